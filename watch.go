package zaris

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
)

// WatchEventKind says what a WatchEvent reports.
type WatchEventKind uint8

const (
	// WatchPut: the key was written; Value is its new value.
	WatchPut WatchEventKind = iota + 1
	// WatchDelete: the key was deleted.
	WatchDelete
	// WatchExpire: the key's owner deleted it because its expiry time had passed.
	WatchExpire
	// WatchCompacted: the events between the last one delivered and Revision are no longer held by the
	// owner (its op log was trimmed, or starts later, as after a move). The watched keys' state at
	// Revision follows as WatchState events, then events after Revision.
	WatchCompacted
	// WatchState: a watched key alive at the Revision of the WatchCompacted event before it. Keys not
	// listed had no value then. A hash, set, list or sorted set comes without its content (Value nil).
	WatchState
	// WatchUpdate: a hash, set, list or sorted set was changed, or its expiry was. The event carries no
	// content: the collection as of Version is read with the collection's methods.
	WatchUpdate
	// WatchEvict: the key's owner deleted it to keep within its memory bound (Config.MaxMemory).
	WatchEvict
)

func (k WatchEventKind) String() string {
	switch k {
	case WatchPut:
		return "put"
	case WatchDelete:
		return "delete"
	case WatchExpire:
		return "expire"
	case WatchCompacted:
		return "compacted"
	case WatchUpdate:
		return "update"
	case WatchState:
		return "state"
	case WatchEvict:
		return "evict"
	}
	return fmt.Sprintf("WatchEventKind(%d)", uint8(k))
}

// WatchEvent is one change of a watched key, or a mark of where the watch resumed from the current state.
// Put, delete and expire events come in strictly increasing Version, each exactly once.
type WatchEvent struct {
	Kind  WatchEventKind
	Key   string
	Value []byte // WatchPut, and WatchState of a string
	// Version is the key's version after the change (for a put, as GetEntry reports it), or for a delete
	// or expiry the version the change itself took. For WatchState it is the key's version at Revision.
	Version uint64
	// Revision is the revision of the key's segment that the event comes from: the change's own, equal to
	// Version, or for WatchCompacted and WatchState the revision the state was taken at.
	Revision uint64
}

// WatchOption tunes a watch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	from    uint64
	fromSet bool
}

// WatchFrom resumes a watch after version: it delivers the events with a version above it, as the ones
// after the last event a previous watch delivered. Without it a watch starts with the next change.
func WatchFrom(version uint64) WatchOption {
	return func(o *watchOptions) { o.from, o.fromSet = version, true }
}

// Watch follows key's changes: puts, deletes and expiries, in version order, each once. The owner of the
// key serves them from its op log; when the owner changes (failover, migration) or cannot be reached, the
// watch re-attaches to the new owner from the last version it delivered. When no owner holds the events
// since then any more, it delivers WatchCompacted and the key's current state, then goes on. Under the
// Sync write concern it delivers only changes every in-sync replica holds, so no failover takes one back.
//
// The channel is closed when ctx ends or the node closes. Watch returns an error when the first attach to
// the owner fails (ErrTooManyWatchers, for one); later failures are retried.
func (n *Node) Watch(ctx context.Context, key string, opts ...WatchOption) (<-chan WatchEvent, error) {
	return n.client.watch(ctx, key, false, opts)
}

// WatchTag is Watch over every key of the slot of hash tag tag: the keys named "...{tag}...", and any other
// key that falls in that slot. They share one owner and one order.
func (n *Node) WatchTag(ctx context.Context, tag string, opts ...WatchOption) (<-chan WatchEvent, error) {
	if tag == "" || strings.Contains(tag, "}") { // a hash tag ends at its first '}'
		return nil, fmt.Errorf("%w: hash tag %q", ErrInvalidRequest, tag)
	}
	return n.client.watch(ctx, "{"+tag+"}", true, opts)
}

// watchRequest is one long poll of a watch, sent to the owner of Key.
type watchRequest struct {
	_msgpack struct{} `msgpack:",as_array"`
	Watcher  uint64   // random per watch: the owner counts watchers by it
	Key      string   // the watched key, or a key of the watched slot
	Slot     bool     // watch every key of Key's slot
	After    uint64   // the revision the watcher has seen up to
	Latest   bool     // ignore After: answer the current revision, with no event
	Wait     int64    // nanoseconds the owner may wait for an event, within its WatchPoll
}

// watchReply answers a watchRequest. For refusals, Owner, Epoch and MapIndex are as in kv.Reply.
type watchReply struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Status    Status
	Owner     NodeID
	Epoch     uint64
	MapIndex  uint64
	Events    []watchEvent
	Compacted bool               // the log does not reach back to After: State is the scope at Revision
	State     []durability.Entry // when Compacted
	Revision  uint64             // the revision the watcher has now seen up to
}

// watchEvent is a WatchEvent on the wire.
type watchEvent struct {
	_msgpack struct{} `msgpack:",as_array"`
	Kind     WatchEventKind
	Key      string
	Value    []byte
	Version  uint64
	Revision uint64
}

// size is what the event counts against WatchBufferBytes.
func (e *watchEvent) size() int { return len(e.Key) + len(e.Value) + 32 }

// serveWatch answers one poll if this node actively owns the watched key's partition: the scope's events
// after req.After, waiting for one within WatchPoll. Under the Sync concern the reply reveals only
// revisions every in-sync replica holds, as a read does.
func (o *owner) serveWatch(ctx context.Context, req *watchRequest) watchReply {
	seg, refusal, owned := o.checkOwner(req.Key)
	if !owned {
		return watchRefusal(&refusal)
	}
	if !o.watches.admit(req.Watcher) {
		return watchReply{Status: StatusTooManyWatchers}
	}
	scope := watchScope{key: req.Key, slot: -1}
	if req.Slot {
		scope.slot = int(KeySlot(req.Key))
	}
	b := watchBatch{revision: o.store.revision(seg)}
	if !req.Latest {
		o.watches.marks.mark(o.cfg.Clock.Now(), []uint32{uint32(seg)}, []uint64{req.After})
		b = o.watches.next(ctx, seg, scope, req.After, min(time.Duration(req.Wait), o.cfg.WatchPoll))
	}
	if _, refusal, owned := o.checkOwner(req.Key); !owned { // the partition moved during the wait
		return watchRefusal(&refusal)
	}
	if o.cfg.WriteConcern == Sync && b.revision > o.repl.committed[seg].Load() {
		if status := o.repl.awaitReplicas(ctx, seg, b.revision, false); status != StatusSuccess {
			return watchReply{Status: status}
		}
	}
	return watchReply{Status: StatusSuccess, Events: b.events, Compacted: b.compacted, State: b.state, Revision: b.revision}
}

func watchRefusal(r *kv.Reply) watchReply {
	return watchReply{Status: r.Status, Owner: r.Owner, Epoch: r.Epoch, MapIndex: r.MapIndex}
}

// watchClient is what a watcher uses of its node: the routing table, the way to poll an owner, and the
// node's settings and lifetime.
type watchClient struct {
	router   *router
	route    func(ctx context.Context, seg int, pace *redirectPacer, attempt func(p *peer, t *routingTable) (nextAttempt, refusal, error)) error
	send     func(ctx context.Context, p *peer, req *watchRequest, wait time.Duration) (watchReply, error)
	layout   Layout
	clock    Clock
	log      *slog.Logger
	life     context.Context // ends when the node closes
	wg       *sync.WaitGroup // the node's, which Close waits on
	backoff  time.Duration   // Config.RetryBackoff
	retries  int             // Config.MaxRetries
	pollWait time.Duration   // Config.WatchPoll
}

// watcher is the watching node's side of one watch: it polls the owner of its key and delivers the events.
type watcher struct {
	c      *watchClient
	id     uint64
	key    string
	slot   bool
	after  uint64 // the revision delivered up to
	latest bool   // no position yet: the first poll asks for the current revision
	out    chan WatchEvent
}

func (c *client) watch(ctx context.Context, key string, slot bool, opts []WatchOption) (<-chan WatchEvent, error) {
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	wc := &watchClient{router: c.router, route: c.routeSegment, send: c.sendWatch, layout: c.layout, clock: c.cfg.Clock, log: c.log, life: c.life,
		wg: c.wg, backoff: c.cfg.RetryBackoff, retries: c.cfg.MaxRetries, pollWait: c.cfg.WatchPoll}
	w := &watcher{c: wc, id: rand.Uint64(), key: key, slot: slot, after: o.from, latest: !o.fromSet, out: make(chan WatchEvent)}
	first, err := w.attach(ctx)
	if err != nil {
		return nil, err
	}
	wc.wg.Add(1)
	go w.run(ctx, first)
	return w.out, nil
}

// attach makes the watch's first poll, which does not wait for events, within the routing retries.
func (w *watcher) attach(ctx context.Context) (watchReply, error) {
	return w.poll(ctx, w.c.pacer(), 0)
}

// pacer paces a watch's resends as every routed request's are (redirectPacer).
func (c *watchClient) pacer() *redirectPacer {
	return &redirectPacer{router: c.router, clock: c.clock, pause: c.backoff, limit: c.retries}
}

// run delivers the events of each poll and polls again, until ctx ends or the node closes. A poll that
// fails is retried after a pause that grows up to a second, on the owner the routing table then names.
func (w *watcher) run(ctx context.Context, reply watchReply) {
	defer w.c.wg.Done()
	defer close(w.out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(w.c.life, cancel)
	defer stop()
	for w.deliver(ctx, &reply) {
		pace := w.c.pacer()
		pace.limit, pace.maxPause = math.MaxInt, time.Second // a watch outlives any number of refusals
		for {
			var err error
			reply, err = w.poll(ctx, pace, w.c.pollWait)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				break
			}
			w.c.log.Debug("watch poll", "key", w.key, "err", err)
			if pace.wait(ctx) != nil {
				return
			}
		}
	}
}

// poll sends one poll through the route loop, whose refusals for a stale routing table go again as pace
// allows: the owner's answer, or a failure, settles it.
func (w *watcher) poll(ctx context.Context, pace *redirectPacer, wait time.Duration) (reply watchReply, err error) {
	req := watchRequest{Watcher: w.id, Key: w.key, Slot: w.slot, After: w.after, Latest: w.latest, Wait: int64(wait)}
	err = w.c.route(ctx, w.c.layout.KeySegment(w.key), pace, func(p *peer, t *routingTable) (nextAttempt, refusal, error) {
		var err error
		reply, err = w.c.send(ctx, p, &req, wait)
		probe := kv.Reply{Status: reply.Status, MapIndex: reply.MapIndex}
		switch {
		case err != nil:
			return attemptDone, refusal{}, err
		case redirects(&probe, t.m.Index) || reply.Status == StatusPartitionUnavailable:
			return attemptRedirected, refusal{reply.Status, reply.MapIndex}, nil
		case reply.Status != StatusSuccess:
			return attemptDone, refusal{}, statusErr(reply.Status)
		}
		return attemptDone, refusal{}, nil
	})
	if err != nil {
		return watchReply{}, err
	}
	return reply, nil
}

// deliver sends the reply's events on the watch's channel and moves the watch past them. It skips events
// at or below the position, which a watch never delivers twice, and reports false once ctx ended.
func (w *watcher) deliver(ctx context.Context, reply *watchReply) bool {
	w.latest = false
	var events []WatchEvent
	if reply.Compacted {
		events = append(events, WatchEvent{Kind: WatchCompacted, Version: reply.Revision, Revision: reply.Revision})
		slices.SortFunc(reply.State, func(a, b durability.Entry) int { return strings.Compare(a.Key, b.Key) })
		for _, e := range reply.State {
			events = append(events, WatchEvent{Kind: WatchState, Key: e.Key, Value: e.Value, Version: e.Version, Revision: reply.Revision})
		}
	}
	for _, e := range reply.Events {
		if e.Revision > w.after {
			events = append(events, WatchEvent{Kind: e.Kind, Key: e.Key, Value: e.Value, Version: e.Version, Revision: e.Revision})
		}
	}
	for _, ev := range events {
		select {
		case w.out <- ev:
		case <-ctx.Done():
			return false
		}
		if ev.Kind != WatchState {
			w.after = ev.Revision
		}
	}
	w.after = max(w.after, reply.Revision)
	return true
}

// sendWatch sends one poll to p, in process when p is this node, allowing for the owner's wait.
func (c *client) sendWatch(ctx context.Context, p *peer, req *watchRequest, wait time.Duration) (watchReply, error) {
	if p.local {
		reply := c.local.serveWatch(ctx, req)
		reply.copyValues() // the store's values, which the watcher's reader must not share
		return reply, nil
	}
	payload, err := encode(req)
	if err != nil {
		return watchReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, wait+c.cfg.ReplicaAckTimeout+time.Second)
	defer cancel()
	resp, err := p.client.Call(ctx, kv.OpWatch, payload)
	if err != nil {
		return watchReply{}, fmt.Errorf("zaris: watch to node %s (%s): %w", p.id, p.addr, err)
	}
	var reply watchReply
	if err := decode(resp, &reply); err != nil {
		return watchReply{}, fmt.Errorf("zaris: watch reply from node %s: %w", p.id, err)
	}
	return reply, nil
}

// copyValues gives the reply's keys and values storage of their own: the store's would keep its entries
// alive.
func (r *watchReply) copyValues() {
	for i := range r.Events {
		r.Events[i].Key, r.Events[i].Value = strings.Clone(r.Events[i].Key), bytes.Clone(r.Events[i].Value)
	}
	for i := range r.State {
		r.State[i].Key, r.State[i].Value = strings.Clone(r.State[i].Key), bytes.Clone(r.State[i].Value)
	}
}

// serveWatchRequest decodes and serves an kv.OpWatch request.
func (o *owner) serveWatchRequest(ctx context.Context, payload []byte) ([]byte, error) {
	var req watchRequest
	if err := decode(payload, &req); err != nil {
		return encode(&watchReply{Status: StatusInvalidRequest})
	}
	reply := o.serveWatch(ctx, &req)
	return encode(&reply)
}
