package resp

import (
	"strings"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// Keyspace notifications, as Redis's notify-keyspace-events: a change of a key publishes its event on
// __keyspace@0__:<key> and the key on __keyevent@0__:<event>, to this node's subscribers only, as each
// node of a Redis Cluster does for the keys it serves. The classes a node publishes are set by
// Options.NotifyKeyspaceEvents and CONFIG SET notify-keyspace-events.
//
// Most events follow from the key operation a command ran (opEvents); a command whose events differ
// from those of its operations (RENAME, LMOVE, SPOP, ...) mutes them and names its own.

// notifyClasses is a set of event classes, each named by one character of notifyChars.
type notifyClasses uint16

const (
	notifyKeyspace notifyClasses = 1 << iota // K: __keyspace@0__:<key> channels
	notifyKeyevent                           // E: __keyevent@0__:<event> channels
	notifyGeneric                            // g: DEL, EXPIRE, RENAME, ...
	notifyString                             // $
	notifyList                               // l
	notifySet                                // s
	notifyHash                               // h
	notifyZSet                               // z
	notifyExpired                            // x: a key's TTL ran out
	notifyEvicted                            // e: a key evicted under the memory bound
	notifyStream                             // t: no stream is served; kept for CONFIG's sake
	notifyKeyMiss                            // m: a read of a missing key
	notifyModule                             // d: no module is served; kept for CONFIG's sake
	notifyNew                                // n: a key created
	// notifyAll is A: every class but key misses and new keys, as in Redis.
	notifyAll = notifyGeneric | notifyString | notifyList | notifySet | notifyHash | notifyZSet |
		notifyExpired | notifyEvicted | notifyStream | notifyModule
)

// notifyChars names each class, in the order Redis writes them back.
var notifyChars = []struct {
	ch    byte
	class notifyClasses
}{
	{'g', notifyGeneric}, {'$', notifyString}, {'l', notifyList}, {'s', notifySet}, {'h', notifyHash},
	{'z', notifyZSet}, {'x', notifyExpired}, {'e', notifyEvicted}, {'t', notifyStream}, {'d', notifyModule},
	{'n', notifyNew}, {'K', notifyKeyspace}, {'E', notifyKeyevent}, {'m', notifyKeyMiss},
}

// parseNotifyClasses reads a notify-keyspace-events value.
func parseNotifyClasses(s string) (notifyClasses, bool) {
	var classes notifyClasses
	for i := range len(s) {
		if s[i] == 'A' {
			classes |= notifyAll
			continue
		}
		j := 0
		for j < len(notifyChars) && notifyChars[j].ch != s[i] {
			j++
		}
		if j == len(notifyChars) {
			return 0, false
		}
		classes |= notifyChars[j].class
	}
	return classes, true
}

// ValidNotifyKeyspaceEvents reports whether s is a value notify-keyspace-events takes.
func ValidNotifyKeyspaceEvents(s string) bool {
	_, ok := parseNotifyClasses(s)
	return ok
}

// String writes the classes as CONFIG GET does: A for every class it covers, then K, E and m.
func (n notifyClasses) String() string {
	var b strings.Builder
	all := n&notifyAll == notifyAll
	if all {
		b.WriteByte('A')
	}
	for _, c := range notifyChars {
		covered := all && (c.class&notifyAll != 0 || c.class == notifyNew)
		if n&c.class != 0 && !covered {
			b.WriteByte(c.ch)
		}
	}
	return b.String()
}

const invalidNotifyMessage = "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."

// publishes reports whether a change of class is published on some channel.
func (n notifyClasses) publishes(class notifyClasses) bool {
	return n&class != 0 && n&(notifyKeyspace|notifyKeyevent) != 0
}

// notifyKey publishes event of class for key to this node's subscribers, if the node publishes the class.
func (s *Server) notifyKey(class notifyClasses, event string, key []byte) {
	classes := notifyClasses(s.notify.Load())
	if !classes.publishes(class) {
		return
	}
	if classes&notifyKeyspace != 0 {
		s.hub.Publish(false, "__keyspace@0__:"+string(key), []byte(event))
	}
	if classes&notifyKeyevent != 0 {
		s.hub.Publish(false, "__keyevent@0__:"+event, key)
	}
}

// KeyRemoved publishes the expiry of key (class x), or its eviction under the memory bound (class e), a
// key this node owns.
func (s *Server) KeyRemoved(key string, evicted bool) {
	if evicted {
		s.notifyKey(notifyEvicted, "evicted", []byte(key))
	} else {
		s.notifyKey(notifyExpired, "expired", []byte(key))
	}
}

// keyEvent is one event of a command, published once the command is done.
type keyEvent struct {
	class notifyClasses
	event string
	key   []byte
}

// notify queues an event of the running command for key.
func (c *respConn) notify(class notifyClasses, event string, key []byte) {
	if notifyClasses(c.srv.notify.Load()).publishes(class) {
		c.events = append(c.events, keyEvent{class: class, event: event, key: key})
	}
}

// created queues "new" for key when reply is that of a write that created it.
func (c *respConn) created(reply kv.Reply, key []byte) {
	if reply.Created {
		c.notify(notifyNew, "new", key)
	}
}

// muteOps makes the running command name its own events: those of its key operations are not published.
func (c *respConn) muteOps() { c.eventsMuted = true }

// dropEventsSince drops the events queued after the first n: their writes were undone.
func (c *respConn) dropEventsSince(n int) {
	clear(c.events[n:])
	c.events = c.events[:n]
}

// publishEvents publishes the events the command queued, once it is done.
func (c *respConn) publishEvents() {
	for _, e := range c.events {
		c.srv.notifyKey(e.class, e.event, e.key)
	}
	clear(c.events)
	c.events, c.eventsMuted = c.events[:0], false
}

// opEvents queues the events of one key operation that succeeded, "new" first for a key it created, unless
// the command muted them.
func (c *respConn) opEvents(op transport.Op, req *kv.Request, reply kv.Reply) {
	if c.eventsMuted {
		return
	}
	if reply.Status == kv.StatusSuccess {
		c.created(reply, []byte(req.Key)) // as Redis: before the operation's own event
	}
	if !notifyClasses(c.srv.notify.Load()).publishes(notifyAll) {
		return
	}
	ev, ok := opEventOf[op]
	if !ok || reply.Status != kv.StatusSuccess || !ev.when(req, reply) {
		return
	}
	key := []byte(req.Key)
	if ev.event != "" {
		c.notify(ev.class, ev.event, key)
	}
	if ev.then != nil {
		ev.then(c, req, reply)
	}
	if reply.Emptied {
		c.notify(notifyGeneric, "del", key)
	}
}

// opEvent is the event of a key operation that succeeded: its class and name, when it is published, and
// what follows it.
type opEvent struct {
	class notifyClasses
	event string
	when  func(req *kv.Request, reply kv.Reply) bool
	then  func(c *respConn, req *kv.Request, reply kv.Reply)
}

func always(*kv.Request, kv.Reply) bool            { return true }
func counted(_ *kv.Request, r kv.Reply) bool       { return r.Int > 0 }
func committed(_ *kv.Request, r kv.Reply) bool     { return r.Version != 0 }
func nonEmptyValue(q *kv.Request, _ kv.Reply) bool { return len(q.Value) > 0 }

// opEventOf names the events of each key operation that writes. Commands whose events are not those of
// their operations mute these and name their own.
var opEventOf = map[transport.Op]opEvent{
	kv.OpPut:         {class: notifyString, event: "set", when: always, then: expiryGiven},
	kv.OpPutIf:       {class: notifyString, event: "set", when: counted, then: expiryGiven},
	kv.OpDelete:      {class: notifyGeneric, event: "del", when: always},
	kv.OpGetDel:      {class: notifyGeneric, event: "del", when: always},
	kv.OpIncr:        {class: notifyString, event: "incrby", when: always},
	kv.OpIncrByFloat: {class: notifyString, event: "incrbyfloat", when: always},
	kv.OpAppend:      {class: notifyString, event: "append", when: always},
	kv.OpSetRange:    {class: notifyString, event: "setrange", when: nonEmptyValue},
	kv.OpExpire:      {when: always, then: expirySet},
	kv.OpGetEx:       {when: always, then: getExExpiry},
	kv.OpPersist:     {class: notifyGeneric, event: "persist", when: counted},
	kv.OpHSet:        {class: notifyHash, event: "hset", when: always},
	kv.OpHDel:        {class: notifyHash, event: "hdel", when: counted},
	kv.OpHIncrBy:     {class: notifyHash, event: "hincrby", when: always},
	kv.OpSAdd:        {class: notifySet, event: "sadd", when: counted},
	kv.OpSRem:        {class: notifySet, event: "srem", when: counted},
	kv.OpLPush:       {class: notifyList, event: "lpush", when: committed},
	kv.OpRPush:       {class: notifyList, event: "rpush", when: committed},
	kv.OpLPop:        {class: notifyList, event: "lpop", when: committed},
	kv.OpRPop:        {class: notifyList, event: "rpop", when: committed},
	kv.OpLTrim:       {class: notifyList, event: "ltrim", when: committed},
	kv.OpZAdd:        {when: committed, then: zaddEvent},
	kv.OpZRem:        {class: notifyZSet, event: "zrem", when: counted},
	kv.OpZIncrBy:     {class: notifyZSet, event: "zincr", when: always},
}

// expiryGiven follows a write that set an expiry with an expire event, as SET EX and SETEX do.
func expiryGiven(c *respConn, req *kv.Request, _ kv.Reply) {
	if req.TTL > 0 || req.ExpireAt != 0 {
		c.notify(notifyGeneric, "expire", []byte(req.Key))
	}
}

// expirySet is EXPIRE's event: expire, or del for a time already past.
func expirySet(c *respConn, req *kv.Request, _ kv.Reply) {
	if req.TTL > 0 {
		c.notify(notifyGeneric, "expire", []byte(req.Key))
	} else {
		c.notify(notifyGeneric, "del", []byte(req.Key))
	}
}

// getExExpiry is GETEX's event: expire, del for a time already past, persist when it dropped an expiry.
func getExExpiry(c *respConn, req *kv.Request, reply kv.Reply) {
	switch {
	case req.Cond&kv.CondKeepTTL != 0:
	case req.TTL > 0:
		c.notify(notifyGeneric, "expire", []byte(req.Key))
	case req.TTL < 0:
		c.notify(notifyGeneric, "del", []byte(req.Key))
	case reply.Int == 1:
		c.notify(notifyGeneric, "persist", []byte(req.Key))
	}
}

// zaddEvent is ZADD's event: zincr with the INCR option, which precedes the scores, zadd otherwise.
func zaddEvent(c *respConn, req *kv.Request, _ kv.Reply) {
	event := "zadd"
options:
	for _, arg := range req.Args {
		switch strings.ToLower(string(arg)) {
		case "nx", "xx", "gt", "lt", "ch":
		case "incr":
			event = "zincr"
		default:
			break options
		}
	}
	c.notify(notifyZSet, event, []byte(req.Key))
}

// popped queues the events of a pop a command composed of other operations: event for key, and del when
// the pop, whose last operation answered last, emptied it.
func (c *respConn) popped(class notifyClasses, event string, key []byte, last kv.Reply) {
	c.notify(class, event, key)
	if last.Emptied {
		c.notify(notifyGeneric, "del", key)
	}
}

// stored queues the event of a command that stores its result at dst (SINTERSTORE, ZUNIONSTORE, ...):
// event when the result has members, del when it has none and dst held a value, which deleted answered.
func (c *respConn) stored(class notifyClasses, event string, dst []byte, deleted kv.Reply, members int) {
	switch {
	case members > 0:
		if deleted.Status != kv.StatusSuccess {
			c.notify(notifyNew, "new", dst) // as Redis: a destination that held nothing is a new key
		}
		c.notify(class, event, dst)
	case deleted.Status == kv.StatusSuccess:
		c.notify(notifyGeneric, "del", dst)
	}
}
