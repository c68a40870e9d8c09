package zaris

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/durability"
)

// watchScanPage is how many ops of a segment the feed reads from the op log at a time while it looks for
// a watcher's events.
const watchScanPage = 256

// watchFeed is the owner's side of key watches. It serves each watcher's long poll from the op log in
// memory: the events of the watched key (or slot) after the watcher's position, or, when the log no longer
// reaches back that far, the watched keys' current state. It holds nothing per watcher between polls
// but the time of its last one, and per segment the oldest position recent polls read from (readMarks),
// which the op log keeps within its bounds: a watcher further behind is sent the state.
type watchFeed struct {
	oplog  *durability.Memory
	store  *store
	layout Layout
	clock  Clock
	// maxWatchers bounds the watchers that polled within idle; maxEvents and maxBytes bound one reply.
	maxWatchers         int
	maxEvents, maxBytes int
	idle                time.Duration

	signals  []segmentSignal // per segment, woken by every write recorded
	anyWrite segmentSignal   // woken by every write recorded, for near caches' polls over many segments
	remap    segmentSignal   // woken by every map this node commits: a waiting poll's partition may have moved

	mu       sync.Mutex
	watchers map[uint64]time.Time // watcher -> start of its last poll

	marks readMarks // how far back the recent polls read, for the op log's sweep
}

// watchLimits are the bounds of a watch feed (see Config.MaxWatchers and Config.WatchReplyEvents).
type watchLimits struct {
	maxWatchers, maxEvents, maxBytes int
	idle                             time.Duration
}

func newWatchFeed(oplog *durability.Memory, st *store, layout Layout, clock Clock, lim watchLimits) *watchFeed {
	return &watchFeed{
		oplog: oplog, store: st, layout: layout, clock: clock,
		maxWatchers: lim.maxWatchers, maxEvents: lim.maxEvents, maxBytes: lim.maxBytes, idle: lim.idle,
		signals:  make([]segmentSignal, layout.Segments),
		watchers: map[uint64]time.Time{},
		marks:    readMarks{idle: lim.idle},
	}
}

// segmentSignal wakes the polls waiting for a segment's next write.
type segmentSignal struct {
	ch atomic.Pointer[chan struct{}] // nil while nobody waits
	mu sync.Mutex                    // serialises the creation and closing of ch
}

// wait returns a channel closed by the segment's next write.
func (s *segmentSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.ch.Load(); ch != nil {
		return *ch
	}
	ch := make(chan struct{})
	s.ch.Store(&ch)
	return ch
}

// fire wakes the waiting polls; a write with nobody waiting costs one atomic load.
func (s *segmentSignal) fire() {
	if s.ch.Load() == nil {
		return
	}
	s.mu.Lock()
	if ch := s.ch.Swap(nil); ch != nil {
		close(*ch)
	}
	s.mu.Unlock()
}

// written is the feed's write listener: a write wakes the polls waiting for its segment.
func (f *watchFeed) written(segment int, _, _ uint64, _ string, _ *entry, _ writeChange) {
	f.notify(segment)
}

// notify tells the feed that segment has a new op in the log.
func (f *watchFeed) notify(segment int) {
	f.signals[segment].fire()
	f.anyWrite.fire()
}

// remapped ends the waits of every poll, after a map change, so each checks that this node still owns
// what it watches.
func (f *watchFeed) remapped() { f.remap.fire() }

// admit counts watcher id as active and reports whether the owner has room for it: a watcher already
// counted always has.
func (f *watchFeed) admit(id uint64) bool {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, known := f.watchers[id]; !known && len(f.watchers) >= f.maxWatchers {
		for w, last := range f.watchers {
			if now.Sub(last) > f.idle {
				delete(f.watchers, w)
			}
		}
		if len(f.watchers) >= f.maxWatchers {
			return false
		}
	}
	f.watchers[id] = now
	return true
}

// watchScope is what one watch follows: a key, or every key of a slot.
type watchScope struct {
	key  string
	slot int // -1: the key alone
}

func (s watchScope) matches(key string) bool {
	switch {
	case isInternalKey(key): // transactions' intents and records
		return false
	case s.slot < 0:
		return key == s.key
	}
	return int(KeySlot(key)) == s.slot
}

// watchBatch is what one poll found: events in revision order, or the state of a watcher the log no
// longer serves, and the revision the watcher has seen up to.
type watchBatch struct {
	events    []watchEvent
	compacted bool
	state     []durability.Entry // the watched keys alive at revision, when compacted
	revision  uint64
}

// collect returns the scope's events in segment seg after revision after, within the feed's bounds. When
// the op log does not reach back to after, or the segment has not reached it (its history was lost, as
// with Async writes an owner died with), it returns the scope's current state instead.
func (f *watchFeed) collect(seg int, scope watchScope, after uint64) watchBatch {
	b := watchBatch{revision: after}
	size := 0
	for {
		// The store's revision is read first: the log holds every op up to it, recorded under the same lock.
		have := f.store.revision(seg)
		switch {
		case b.revision > have:
			return f.state(seg, scope)
		case b.revision == have:
			return b
		}
		ops, err := f.oplog.Ops(uint32(seg), b.revision, watchScanPage)
		if err != nil || len(ops) == 0 {
			return f.state(seg, scope) // trimmed, or restarted after a snapshot
		}
		for i := range ops {
			op := &ops[i]
			had := len(b.events)
			b.events = appendEvents(b.events, op, scope)
			for _, ev := range b.events[had:] {
				size += ev.size()
			}
			b.revision = op.Revision
			if len(b.events) >= f.maxEvents || size >= f.maxBytes {
				return b
			}
		}
	}
}

// state returns the scope's live keys in segment seg, consistently with the segment's revision. A
// collection, which the snapshot holds in pieces, appears once and without its content.
func (f *watchFeed) state(seg int, scope watchScope) watchBatch {
	revision, entries := f.store.snapshot(seg)
	now := f.store.now()
	b := watchBatch{compacted: true, revision: revision}
	listed := make(map[string]bool)
	for _, e := range entries {
		if !scope.matches(e.Key) || e.ExpireAt != 0 && now >= e.ExpireAt || listed[e.Key] {
			continue
		}
		if e.Kind != uint8(kindString) {
			e.Value, listed[e.Key] = nil, true
		}
		b.state = append(b.state, e)
	}
	return b
}

// next returns the scope's events after revision after, waiting until one comes, wait passes, the node
// commits a new map or ctx ends. Writes to other keys of the segment move the returned revision without
// ending the wait.
func (f *watchFeed) next(ctx context.Context, seg int, scope watchScope, after uint64, wait time.Duration) watchBatch {
	remapped := f.remap.wait()
	timer := f.clock.NewTimer(wait)
	defer timer.Stop()
	for {
		woken := f.signals[seg].wait() // before reading the log: a write after the read wakes it
		b := f.collect(seg, scope, after)
		if len(b.events) > 0 || b.compacted {
			return b
		}
		after = b.revision
		select {
		case <-woken:
		case <-remapped:
			return b
		case <-timer.C():
			return b
		case <-ctx.Done():
			return b
		}
	}
}

// appendEvents appends op's events for the keys in scope to dst: one, or none, for an op of one key; for a
// multi op, one for each key in scope, telling what the key became.
func appendEvents(dst []watchEvent, op *durability.Op, scope watchScope) []watchEvent {
	if op.Kind != durability.OpMulti {
		if scope.matches(op.Key) {
			dst = append(dst, eventOf(op))
		}
		return dst
	}
	ops, _ := durability.DecodeMulti(op.Value) // checked when the op was decoded or made
	last := make(map[string]int, len(ops))
	for i := range ops {
		last[ops[i].Key] = i
	}
	for i := range ops {
		if last[ops[i].Key] == i && scope.matches(ops[i].Key) {
			dst = append(dst, eventOf(&ops[i]))
		}
	}
	return dst
}

// eventOf turns an op of the log into the event a watcher receives.
func eventOf(op *durability.Op) watchEvent {
	ev := watchEvent{Key: op.Key, Version: op.Revision, Revision: op.Revision}
	switch op.Kind {
	case durability.OpPut:
		ev.Kind, ev.Value, ev.Version = WatchPut, op.Value, op.Version
	case durability.OpExpire:
		ev.Kind = WatchExpire
	case durability.OpEvict:
		ev.Kind = WatchEvict
	case durability.OpDelete:
		ev.Kind = WatchDelete
	default:
		ev.Kind, ev.Version = WatchUpdate, op.Version
	}
	return ev
}
