package resp

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/pubsub"
)

// Pub/sub as Redis Cluster serves it: PUBLISH reaches the subscribers of every node, SPUBLISH those of
// the channel's slot, served by its owner and its replicas. A connection subscribes in the node's hub,
// which delivers each message to it as a push (a plain array in RESP2), queued with the connection's
// other pushes and bounded by SubscriberLimit: a connection further behind is dropped, as Redis drops
// one past its pubsub output buffer limit.

// DefaultSubscriberBuffer is Redis's hard pubsub output buffer limit.
const DefaultSubscriberBuffer = 32 << 20

// respSubs are the names a connection subscribes to, by pubsub.Kind. The connection's goroutine changes
// them; a move of a slot away from the node drops its shard channels from another goroutine.
type respSubs struct {
	mu    sync.Mutex
	names [3]map[string]struct{}
}

// count is what a (un)subscribe reply reports: the channels and patterns, or the shard channels.
func (s *respSubs) count(kind pubsub.Kind) int {
	if kind == pubsub.Shard {
		return len(s.names[pubsub.Shard])
	}
	return len(s.names[pubsub.Channel]) + len(s.names[pubsub.Pattern])
}

// subscribed reports whether the connection subscribes to anything: a RESP2 client then runs only the
// commands of pubSubContext.
func (c *respConn) subscribed() bool {
	c.subs.mu.Lock()
	defer c.subs.mu.Unlock()
	return len(c.subs.names[0])+len(c.subs.names[1])+len(c.subs.names[2]) > 0
}

// pubsubFlags are the COMMAND flags of the (un)subscribe commands.
var pubsubFlags = []string{"pubsub", "noscript", "loading", "stale"}

// pubSubContext are the commands a RESP2 client that subscribes may run.
var pubSubContext = map[string]bool{"subscribe": true, "ssubscribe": true, "psubscribe": true, "unsubscribe": true,
	"sunsubscribe": true, "punsubscribe": true, "ping": true, "quit": true, "reset": true}

func pubSubContextMessage(name string) string {
	return "ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
}

// Deliver queues one message for the client (pubsub.Subscriber).
func (c *respConn) Deliver(m pubsub.Message) {
	c.pushMessage(func(proto3 bool) []byte { return messageFrame(proto3, m) })
}

// messageFrame is a message as Redis sends it: [message channel payload], [pmessage pattern channel
// payload] or [smessage channel payload], a push in RESP3.
func messageFrame(proto3 bool, m pubsub.Message) []byte {
	kind, n := "message", 3
	switch m.Kind {
	case pubsub.Pattern:
		kind, n = "pmessage", 4
	case pubsub.Shard:
		kind = "smessage"
	}
	b := make([]byte, 0, 48+len(m.Pattern)+len(m.Channel)+len(m.Payload))
	b = appendHeader(b, proto3, n)
	b = appendBulk(b, kind)
	if m.Kind == pubsub.Pattern {
		b = appendBulk(b, m.Pattern)
	}
	b = appendBulk(b, m.Channel)
	return appendBulk(b, string(m.Payload))
}

func appendHeader(b []byte, proto3 bool, n int) []byte {
	kind := byte('*')
	if proto3 {
		kind = '>'
	}
	b = append(b, kind)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, "\r\n"...)
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, "\r\n"...)
	b = append(b, s...)
	return append(b, "\r\n"...)
}

// subscriptionReply writes one (un)subscribe reply: [kind name count], name null when nil.
func (c *respConn) subscriptionReply(verb string, name []byte, count int) {
	kind := byte('*')
	if c.wr.proto == 3 {
		kind = '>'
	}
	c.wr.header(kind, 3)
	c.wr.bulkString(verb)
	if name == nil {
		c.wr.null()
	} else {
		c.wr.bulk(name)
	}
	c.wr.int(int64(count))
}

var subscribeVerbs = [3]string{"subscribe", "psubscribe", "ssubscribe"}
var unsubscribeVerbs = [3]string{"unsubscribe", "punsubscribe", "sunsubscribe"}

func (c *respConn) cmdSubscribe(args [][]byte)  { c.subscribe(pubsub.Channel, args[1:]) }
func (c *respConn) cmdPSubscribe(args [][]byte) { c.subscribe(pubsub.Pattern, args[1:]) }

// cmdSSubscribe serves SSUBSCRIBE channel...: channels of one slot, which this node serves.
func (c *respConn) cmdSSubscribe(args [][]byte) {
	if c.servesShard(args[1:]) {
		c.subscribe(pubsub.Shard, args[1:])
	}
}

func (c *respConn) cmdUnsubscribe(args [][]byte)  { c.unsubscribe(pubsub.Channel, args[1:]) }
func (c *respConn) cmdPUnsubscribe(args [][]byte) { c.unsubscribe(pubsub.Pattern, args[1:]) }

func (c *respConn) cmdSUnsubscribe(args [][]byte) {
	if len(args) > 2 && !sameSlot(args[1:]) {
		c.wr.error(crossSlotMessage)
		return
	}
	c.unsubscribe(pubsub.Shard, args[1:])
}

const crossSlotMessage = "CROSSSLOT Keys in request don't hash to the same slot"

func sameSlot(names [][]byte) bool {
	slot := kv.KeySlotBytes(names[0])
	for _, name := range names[1:] {
		if kv.KeySlotBytes(name) != slot {
			return false
		}
	}
	return true
}

// servesShard checks that channels share a slot this node serves, and answers the client otherwise.
func (c *respConn) servesShard(channels [][]byte) bool {
	if !sameSlot(channels) {
		c.wr.error(crossSlotMessage)
		return false
	}
	if refusal, ok := c.srv.node.ServesShard(string(channels[0])); !ok {
		c.refuse(kv.KeySlotBytes(channels[0]), refusal)
		return false
	}
	return true
}

func (c *respConn) subscribe(kind pubsub.Kind, names [][]byte) {
	c.startPusher()
	for _, name := range names {
		c.subs.mu.Lock()
		set := c.subs.names[kind]
		if set == nil {
			set = map[string]struct{}{}
			c.subs.names[kind] = set
		}
		if _, ok := set[string(name)]; !ok {
			set[string(name)] = struct{}{}
			c.srv.hub.Subscribe(c, kind, string(name))
		}
		count := c.subs.count(kind)
		c.subs.mu.Unlock()
		c.subscriptionReply(subscribeVerbs[kind], name, count)
	}
}

// unsubscribe drops names, or every name of kind when there are none.
func (c *respConn) unsubscribe(kind pubsub.Kind, names [][]byte) {
	if len(names) == 0 {
		c.subs.mu.Lock()
		for name := range c.subs.names[kind] {
			names = append(names, []byte(name))
		}
		c.subs.mu.Unlock()
		slices.SortFunc(names, func(a, b []byte) int { return strings.Compare(string(a), string(b)) })
		if len(names) == 0 {
			c.subs.mu.Lock()
			count := c.subs.count(kind)
			c.subs.mu.Unlock()
			c.subscriptionReply(unsubscribeVerbs[kind], nil, count)
			return
		}
	}
	for _, name := range names {
		c.subs.mu.Lock()
		if _, ok := c.subs.names[kind][string(name)]; ok {
			delete(c.subs.names[kind], string(name))
			c.srv.hub.Unsubscribe(c, kind, string(name))
		}
		count := c.subs.count(kind)
		c.subs.mu.Unlock()
		c.subscriptionReply(unsubscribeVerbs[kind], name, count)
	}
}

// unsubscribeAll drops every subscription of the connection, telling the client nothing: it closes or resets.
func (c *respConn) unsubscribeAll() {
	c.subs.mu.Lock()
	defer c.subs.mu.Unlock()
	var names [3][]string
	for k, set := range c.subs.names {
		for name := range set {
			names[k] = append(names[k], name)
		}
		c.subs.names[k] = nil
	}
	c.srv.hub.UnsubscribeAll(c, names)
}

// DropShards ends the subscriptions to the shard channels for which gone reports true, those of slots
// this node no longer serves, telling each client with an sunsubscribe as Redis does.
func (s *Server) DropShards(gone func(channel string) bool) {
	for sub, channels := range s.hub.DropShards(gone) {
		c, ok := sub.(*respConn)
		if !ok {
			continue
		}
		slices.Sort(channels)
		for _, ch := range channels {
			c.subs.mu.Lock()
			delete(c.subs.names[pubsub.Shard], ch)
			count := c.subs.count(pubsub.Shard)
			c.subs.mu.Unlock()
			c.pushMessage(func(proto3 bool) []byte {
				b := appendHeader(nil, proto3, 3)
				b = appendBulk(b, "sunsubscribe")
				b = appendBulk(b, ch)
				return append(strconv.AppendInt(append(b, ':'), int64(count), 10), "\r\n"...)
			})
		}
	}
}

// cmdPublish serves PUBLISH channel message: it reaches every node's subscribers, and the reply counts
// this node's, as in Redis Cluster.
func (c *respConn) cmdPublish(args [][]byte) {
	c.wr.int(int64(c.srv.node.Publish(false, string(args[1]), args[2])))
}

// cmdSPublish serves SPUBLISH channel message at a node serving the channel's slot.
func (c *respConn) cmdSPublish(args [][]byte) {
	if c.servesShard(args[1:2]) {
		c.wr.int(int64(c.srv.node.Publish(true, string(args[1]), args[2])))
	}
}

// pubsubSubcommandArity is PUBSUB's subcommands' arity.
var pubsubSubcommandArity = map[string]int{"channels": -2, "numsub": -2, "numpat": 2, "shardchannels": -2,
	"shardnumsub": -2, "help": 2}

// cmdPubsub serves PUBSUB CHANNELS, NUMSUB, NUMPAT, SHARDCHANNELS and SHARDNUMSUB, about this node's
// subscribers, as Redis Cluster answers.
func (c *respConn) cmdPubsub(args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "channels", "shardchannels":
		if len(args) > 3 {
			c.wr.error("ERR unknown subcommand or wrong number of arguments for '" + string(args[1]) + "'. Try PUBSUB HELP.")
			return
		}
		kind, pattern := pubsub.Channel, ""
		if sub == "shardchannels" {
			kind = pubsub.Shard
		}
		if len(args) == 3 {
			pattern = string(args[2])
		}
		names := c.srv.hub.Names(kind, pattern)
		c.wr.array(len(names))
		for _, name := range names {
			c.wr.bulkString(name)
		}
	case "numsub", "shardnumsub":
		kind := pubsub.Channel
		if sub == "shardnumsub" {
			kind = pubsub.Shard
		}
		c.wr.array(2 * (len(args) - 2))
		for _, name := range args[2:] {
			c.wr.bulk(name)
			c.wr.int(int64(c.srv.hub.Count(kind, string(name))))
		}
	case "numpat":
		c.wr.int(int64(c.srv.hub.Patterns()))
	case "help":
		lines := []string{
			"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"CHANNELS [<pattern>]", "    Return the currently active channels matching a <pattern> (default: '*').",
			"NUMPAT", "    Return number of subscriptions to patterns.",
			"NUMSUB [<channel> ...]", "    Return the number of subscribers for the specified channels, excluding",
			"    pattern subscriptions(default: no channels).",
			"SHARDCHANNELS [<pattern>]", "    Return the currently active shard level channels matching a <pattern> (default: '*').",
			"SHARDNUMSUB [<shardchannel> ...]", "    Return the number of subscribers for the specified shard level channel(s)",
			"HELP", "    Prints this help.",
		}
		c.wr.array(len(lines))
		for _, l := range lines {
			c.wr.simple(l)
		}
	default:
		c.unknownSubcommand("pubsub", args[1])
	}
}
