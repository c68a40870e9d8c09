package zaris

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/pubsub"
	"github.com/zaris-go/zaris/transport"
)

// Message is one message a subscription received.
type Message struct {
	Channel string
	Pattern string // the pattern that matched the channel, for a PSubscribe; "" otherwise
	Payload []byte
}

// Publish sends payload to the subscribers of channel on every node of the cluster and returns how many
// of this node's received it (a subscriber of the channel and of a pattern matching it counts twice). Each
// subscriber receives the messages published through one node in the order they were published.
// Delivery is at most once: a node that cannot be reached for long, or falls far behind, misses messages.
func (n *Node) Publish(ctx context.Context, channel string, payload []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if len(channel)+len(payload) > n.cfg.MaxValueSize {
		return 0, fmt.Errorf("%w: a message of %d bytes", ErrValueTooLarge, len(channel)+len(payload))
	}
	if n.life.ctx.Err() != nil {
		return 0, ErrClosed
	}
	return n.pubsub.publish(false, channel, payload), nil
}

// Subscribe receives the messages published to channels, from every node, until ctx ends or the node
// closes; then the returned channel is closed. It is closed as well when the subscriber falls more than
// Config.SubscriberBuffer bytes behind, or more than Config.SubscriberSoftBuffer for SubscriberSoftTime.
func (n *Node) Subscribe(ctx context.Context, channels ...string) (<-chan Message, error) {
	return n.pubsub.subscribe(ctx, pubsub.Channel, channels)
}

// PSubscribe is Subscribe to every channel matching one of patterns, globs as Redis's PSUBSCRIBE takes.
// Each Message names the pattern it matched.
func (n *Node) PSubscribe(ctx context.Context, patterns ...string) (<-chan Message, error) {
	return n.pubsub.subscribe(ctx, pubsub.Pattern, patterns)
}

// broker carries published messages to subscribers on every node. A message published here is delivered
// to this node's subscribers at once and queued for each other node that may have some: every member of
// the map for a channel, the slot's other nodes (its owner and replicas) for a shard channel. Each node's
// queue is sent in order, one batch at a time, by a goroutine that runs while the queue is not empty; a
// batch is numbered, so one sent again after a lost reply is delivered once. Delivery is at most once: a
// queue full because its node is slow or unreachable drops new messages, and a batch its node does not
// take within publishGiveUp is dropped.
type broker struct {
	brokerConfig
	hub *pubsub.Hub

	mu    sync.Mutex
	links map[NodeID]*publishLink

	recvMu sync.Mutex
	seen   map[NodeID]publishMark // the last message taken from each sender

	dropped atomic.Uint64 // messages a queue had no room for, or whose node never took them
}

type brokerConfig struct {
	self        NodeID
	incarnation uint64
	layout      Layout
	clusterMap  func() *ClusterMap
	call        func(ctx context.Context, id NodeID, op transport.Op, payload []byte) ([]byte, error)
	background  func(fn func()) bool // runs fn in a goroutine Close waits for, unless closing
	life        context.Context
	clock       Clock
	maxBatch    int           // bytes of messages in one request
	maxQueued   int           // bytes of messages queued for one node
	subscriber  pubsub.Limit  // on what one subscriber may have waiting (Config.SubscriberBuffer)
	retry       time.Duration // between attempts of a batch
	log         *slog.Logger
}

// publishQueueBytes bounds the messages queued for one node.
const publishQueueBytes = 8 << 20

// publishGiveUp bounds how long a batch is sent again to a node that does not take it.
const publishGiveUp = 10 * time.Second

// maxPublishSenders bounds the senders a node remembers the last message of.
const maxPublishSenders = 4096

// publishLink is the queue of messages for one node.
type publishLink struct {
	to      NodeID
	queue   []publishedMessage
	bytes   int
	next    uint64 // the number of queue[0]
	running bool   // a goroutine sends the queue
}

// publishMark is the last message taken from a sender's process.
type publishMark struct {
	incarnation uint64
	seq         uint64
}

func newBroker(cfg brokerConfig) *broker {
	return &broker{brokerConfig: cfg, hub: pubsub.New(), links: map[NodeID]*publishLink{}, seen: map[NodeID]publishMark{}}
}

// publish delivers payload to this node's subscribers of channel (a shard channel when shard is set),
// queues it for the other nodes, and returns the deliveries made here.
func (b *broker) publish(shard bool, channel string, payload []byte) int {
	delivered := b.hub.Publish(shard, channel, payload)
	receivers := b.receivers(b.clusterMap(), shard, channel)
	if len(receivers) == 0 {
		return delivered
	}
	msg := publishedMessage{shard: shard, channel: channel, payload: slices.Clone(payload)}
	for _, id := range receivers {
		b.enqueue(id, msg)
	}
	return delivered
}

// receivers are the other nodes a message goes to.
func (b *broker) receivers(m *ClusterMap, shard bool, channel string) []NodeID {
	var out []NodeID
	if !shard {
		for id := range m.Nodes {
			if id != b.self {
				out = append(out, id)
			}
		}
		return out
	}
	p := b.layout.KeyPartition(channel)
	if p >= len(m.Runtime) {
		return nil
	}
	if owner := m.Runtime[p].Owner; owner != "" && owner != b.self {
		out = append(out, owner)
	}
	if p < len(m.Assignment) {
		for _, id := range m.Assignment[p] {
			if id != b.self && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// servesSlot reports whether m makes this node the owner or a replica of channel's slot.
func (b *broker) servesSlot(m *ClusterMap, channel string) bool {
	p := b.layout.KeyPartition(channel)
	if p >= len(m.Runtime) {
		return false
	}
	return m.Runtime[p].Owner == b.self || p < len(m.Assignment) && slices.Contains(m.Assignment[p], b.self)
}

// enqueue queues msg for node id and starts its sender if none runs.
func (b *broker) enqueue(id NodeID, msg publishedMessage) {
	b.mu.Lock()
	l := b.links[id]
	if l == nil {
		l = &publishLink{to: id, next: 1}
		b.links[id] = l
	}
	if l.bytes+msg.size() > b.maxQueued {
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	l.queue = append(l.queue, msg)
	l.bytes += msg.size()
	start := !l.running
	l.running = true
	b.mu.Unlock()
	if start && !b.background(func() { b.send(l) }) {
		b.mu.Lock()
		l.running = false
		b.mu.Unlock()
	}
}

// send sends l's queue, a batch at a time, until it is empty.
func (b *broker) send(l *publishLink) {
	for {
		b.mu.Lock()
		if len(l.queue) == 0 || b.life.Err() != nil {
			l.running = false
			if _, member := b.clusterMap().Nodes[l.to]; !member && len(l.queue) == 0 {
				delete(b.links, l.to)
			}
			b.mu.Unlock()
			return
		}
		count, size := 0, 0
		for count < len(l.queue) && (count == 0 || size+l.queue[count].size() <= b.maxBatch) {
			size += l.queue[count].size()
			count++
		}
		batch := publishBatch{From: b.self, Incarnation: b.incarnation, Seq: l.next, Messages: slices.Clone(l.queue[:count])}
		b.mu.Unlock()

		if !b.deliverTo(l.to, &batch) {
			b.dropped.Add(uint64(count))
		}
		b.mu.Lock()
		clear(l.queue[:count])
		l.queue = l.queue[count:]
		l.bytes -= size
		l.next += uint64(count)
		b.mu.Unlock()
	}
}

// deliverTo sends batch to node id until it takes it, and reports whether it did. It gives up when the
// node leaves the map, the node closes, or publishGiveUp has passed.
func (b *broker) deliverTo(id NodeID, batch *publishBatch) bool {
	payload := batch.marshal()
	deadline := b.clock.Now().Add(publishGiveUp)
	for {
		ctx, cancel := context.WithTimeout(b.life, publishGiveUp)
		_, err := b.call(ctx, id, kv.OpPublish, payload)
		cancel()
		if err == nil {
			return true
		}
		if _, member := b.clusterMap().Nodes[id]; !member || b.clock.Now().After(deadline) {
			b.log.Debug("published messages dropped", "to", id, "messages", len(batch.Messages), "err", err)
			return false
		}
		t := b.clock.NewTimer(b.retry)
		select {
		case <-b.life.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
}

// serve takes a batch another node sent and delivers the messages it has not delivered yet.
func (b *broker) serve(payload []byte) ([]byte, error) {
	var batch publishBatch
	if err := batch.unmarshal(slices.Clone(payload)); err != nil {
		return nil, err
	}
	if len(batch.Messages) == 0 {
		return nil, nil
	}
	b.recvMu.Lock()
	defer b.recvMu.Unlock()
	messages := batch.Messages
	mark, known := b.seen[batch.From]
	if known && mark.incarnation == batch.Incarnation && batch.Seq <= mark.seq {
		taken := mark.seq - batch.Seq + 1
		if taken >= uint64(len(messages)) {
			return nil, nil
		}
		messages = messages[taken:]
	}
	if !known && len(b.seen) >= maxPublishSenders {
		clear(b.seen)
	}
	b.seen[batch.From] = publishMark{incarnation: batch.Incarnation, seq: batch.Seq + uint64(len(batch.Messages)) - 1}
	for _, m := range messages {
		b.hub.Publish(m.shard, m.channel, m.payload)
	}
	return nil, nil
}

// subscribe subscribes a new subscriber to names, of kind, and returns the channel it receives on.
func (b *broker) subscribe(ctx context.Context, kind pubsub.Kind, names []string) (<-chan Message, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no channel to subscribe to", ErrInvalidRequest)
	}
	s := &goSubscriber{backlog: pubsub.Backlog{Limit: b.subscriber}, clock: b.clock, wake: make(chan struct{}, 1)}
	var subscribed [3][]string
	subscribed[kind] = names
	for _, name := range names {
		b.hub.Subscribe(s, kind, name)
	}
	out := make(chan Message)
	started := b.background(func() {
		defer close(out)
		defer b.hub.UnsubscribeAll(s, subscribed)
		s.pump(ctx, b.life, out)
	})
	if !started {
		b.hub.UnsubscribeAll(s, subscribed)
		return nil, ErrClosed
	}
	return out, nil
}

// goSubscriber is a subscription of the Go API: messages wait in a queue bounded in bytes, which a
// goroutine hands to the subscriber's channel. A subscriber that falls further behind is ended.
type goSubscriber struct {
	mu      sync.Mutex
	queue   []Message
	bytes   int
	backlog pubsub.Backlog
	clock   Clock
	over    bool
	wake    chan struct{}
}

func (s *goSubscriber) Deliver(m pubsub.Message) {
	size := len(m.Channel) + len(m.Pattern) + len(m.Payload) + 64
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.over:
		return
	case s.backlog.Exceeded(s.bytes+size, s.clock.Now()):
		s.over, s.queue, s.bytes = true, nil, 0
	default:
		s.queue = append(s.queue, Message{Channel: m.Channel, Pattern: m.Pattern, Payload: slices.Clone(m.Payload)})
		s.bytes += size
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pump hands the queued messages to out until ctx or life ends or the subscriber fell too far behind.
func (s *goSubscriber) pump(ctx, life context.Context, out chan<- Message) {
	for {
		s.mu.Lock()
		batch, over := s.queue, s.over
		s.queue, s.bytes = nil, 0
		s.mu.Unlock()
		if over {
			return
		}
		for _, m := range batch {
			select {
			case out <- m:
			case <-ctx.Done():
				return
			case <-life.Done():
				return
			}
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return
		case <-life.Done():
			return
		}
	}
}
