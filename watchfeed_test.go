package zaris

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/kv"
)

// feedFixture is an owner's store and op log with a watch feed over them, and no cluster.
type feedFixture struct {
	feed   *watchFeed
	store  *store
	clock  *clocktest.Manual
	layout Layout
}

// newFeedFixture keeps retain ops per segment in the log; lim bounds the feed.
func newFeedFixture(t *testing.T, retain int, lim watchLimits) *feedFixture {
	t.Helper()
	layout, err := NewLayout(4, 2)
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktest.New(time.Unix(1_000, 0))
	st := newStore(layout.Segments, clock)
	oplog := durability.NewMemoryWith(durability.MemoryOptions{RetainOps: retain, ShareValues: true})
	f := &feedFixture{feed: newWatchFeed(oplog, st, layout, clock, lim), store: st, clock: clock, layout: layout}
	st.onWrite = func(seg int, rev, _ uint64, key string, next *entry, change writeChange) {
		op := opOfWrite(seg, rev, key, next, change)
		if err := oplog.Append([]durability.Op{op}); err != nil {
			t.Errorf("record op %+v: %v", op, err)
		}
		f.feed.notify(seg)
	}
	return f
}

func (f *feedFixture) put(key, value string, ttl time.Duration) uint64 {
	return f.store.put(f.layout.KeySegment(key), key, []byte(value), forTTL(ttl))
}

func (f *feedFixture) remove(key string) { f.store.remove(f.layout.KeySegment(key), key) }

// sameSegment returns a key with prefix in key's segment but another slot.
func (f *feedFixture) sameSegment(key, prefix string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		if f.layout.KeySegment(k) == f.layout.KeySegment(key) && KeySlot(k) != KeySlot(key) {
			return k
		}
	}
}

var roomyLimits = watchLimits{maxWatchers: 8, maxEvents: 1000, maxBytes: 1 << 20, idle: time.Minute}

func describeEvents(events []watchEvent) string {
	s := ""
	for _, e := range events {
		s += fmt.Sprintf("%v %s=%s@%d/%d; ", e.Kind, e.Key, e.Value, e.Version, e.Revision)
	}
	return s
}

// TestWatchFeedSelectsTheScopesEvents checks that a key's scope gets exactly that key's puts, deletes and
// expiries, in revision order, and a slot's scope every key of the slot and no other key of its segment.
func TestWatchFeedSelectsTheScopesEvents(t *testing.T) {
	f := newFeedFixture(t, 0, roomyLimits)
	key := "{t}a"
	other := f.sameSegment(key, "other")
	seg := f.layout.KeySegment(key)
	f.put(key, "1", 0)           // 1
	f.put(other, "x", 0)         // 2
	f.put("{t}b", "2", 0)        // 3
	f.remove(key)                // 4
	f.put(key, "3", time.Second) // 5
	f.remove(other)              // 6
	f.clock.Advance(time.Second) //
	f.store.expireSegment(seg)   // 7: key expires
	f.put("{t}b", "4", 0)        // 8
	if got := f.store.revision(seg); got != 8 {
		t.Fatalf("segment at revision %d; want 8 (every key above shares it)", got)
	}
	b := f.feed.collect(seg, watchScope{key: key, slot: -1}, 0)
	want := "put {t}a=1@1/1; delete {t}a=@4/4; put {t}a=3@5/5; expire {t}a=@7/7; "
	if got := describeEvents(b.events); got != want || b.compacted || b.revision != 8 {
		t.Fatalf("key scope: %s revision %d compacted %v; want %s revision 8", got, b.revision, b.compacted, want)
	}
	b = f.feed.collect(seg, watchScope{key: key, slot: int(KeySlot(key))}, 2)
	want = "put {t}b=2@3/3; delete {t}a=@4/4; put {t}a=3@5/5; expire {t}a=@7/7; put {t}b=4@8/8; "
	if got := describeEvents(b.events); got != want || b.revision != 8 {
		t.Fatalf("slot scope after 2: %s revision %d; want %s revision 8", got, b.revision, want)
	}
	if b = f.feed.collect(seg, watchScope{key: key, slot: -1}, 8); len(b.events) != 0 || b.compacted || b.revision != 8 {
		t.Fatalf("caught-up watcher got %s revision %d compacted %v", describeEvents(b.events), b.revision, b.compacted)
	}
}

// TestWatchFeedBoundsAReply checks that a reply stops at the count or byte bound, at least one event in,
// with the revision of its last event, so the next poll goes on from there with nothing lost or repeated.
func TestWatchFeedBoundsAReply(t *testing.T) {
	for _, lim := range []watchLimits{
		{maxWatchers: 1, maxEvents: 3, maxBytes: 1 << 20},
		{maxWatchers: 1, maxEvents: 1000, maxBytes: 1}, // every event is over it: one per reply
	} {
		f := newFeedFixture(t, 0, lim)
		key := "k"
		seg := f.layout.KeySegment(key)
		for i := 1; i <= 10; i++ {
			f.put(key, fmt.Sprint(i), 0)
		}
		var seen []uint64
		after := uint64(0)
		for polls := 0; after < 10; polls++ {
			b := f.feed.collect(seg, watchScope{key: key, slot: -1}, after)
			if len(b.events) == 0 || len(b.events) > lim.maxEvents || b.compacted {
				t.Fatalf("limits %+v: poll after %d gave %s compacted %v", lim, after, describeEvents(b.events), b.compacted)
			}
			if last := b.events[len(b.events)-1].Revision; b.revision != last {
				t.Fatalf("limits %+v: reply ends at revision %d, its last event is at %d", lim, b.revision, last)
			}
			for _, e := range b.events {
				seen = append(seen, e.Version)
			}
			after = b.revision
		}
		if fmt.Sprint(seen) != fmt.Sprint([]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
			t.Fatalf("limits %+v: versions delivered %v; want 1 to 10 once each", lim, seen)
		}
	}
}

// TestWatchFeedSendsTheStateWhenTheLogIsTrimmed checks compaction: a watcher behind the op log's first op,
// or ahead of the segment (its history was lost), gets the scope's live keys at the current revision
// instead of events, while one the log still reaches gets events.
func TestWatchFeedSendsTheStateWhenTheLogIsTrimmed(t *testing.T) {
	f := newFeedFixture(t, 4, roomyLimits)
	key := "{t}a"
	seg := f.layout.KeySegment(key)
	for i := 1; i <= 8; i++ {
		f.put(key, fmt.Sprint(i), 0)
	}
	f.put("{t}b", "b", 0)             // 9
	f.put("{t}gone", "g", 0)          // 10
	f.remove("{t}gone")               // 11
	f.put("{t}ttl", "t", time.Second) // 12
	f.clock.Advance(time.Second)      // expired, not yet reaped: not in the state
	if first, _, _ := f.feed.oplog.Bounds(uint32(seg)); first != 9 {
		t.Fatalf("the log starts at %d; want 9", first)
	}
	scope := watchScope{key: key, slot: int(KeySlot(key))}
	for _, after := range []uint64{0, 7, 13} {
		b := f.feed.collect(seg, scope, after)
		got := ""
		for _, e := range b.state {
			got += fmt.Sprintf("%s=%s@%d ", e.Key, e.Value, e.Version)
		}
		if !b.compacted || len(b.events) != 0 || b.revision != 12 || len(b.state) != 2 {
			t.Fatalf("after %d: compacted %v, events %s, state %s at %d; want the state {t}a=8@8 and {t}b=b@9 at 12",
				after, b.compacted, describeEvents(b.events), got, b.revision)
		}
	}
	if b := f.feed.collect(seg, scope, 8); b.compacted || len(b.events) != 4 || b.revision != 12 {
		t.Fatalf("after 8 (the log's first op is 9): compacted %v, events %s, revision %d; want the 4 events 9 to 12",
			b.compacted, describeEvents(b.events), b.revision)
	}
}

// TestWatchFeedBoundsItsWatchers checks MaxWatchers: a new watcher beyond it is refused while the others
// poll, a known one never is, and one that stopped polling for idle frees its place.
func TestWatchFeedBoundsItsWatchers(t *testing.T) {
	f := newFeedFixture(t, 0, watchLimits{maxWatchers: 2, maxEvents: 1, maxBytes: 1, idle: time.Minute})
	if !f.feed.admit(1) || !f.feed.admit(2) {
		t.Fatal("a watcher within the bound was refused")
	}
	if f.feed.admit(3) {
		t.Fatal("a third watcher was admitted over a bound of 2")
	}
	f.clock.Advance(time.Minute)
	if !f.feed.admit(1) {
		t.Fatal("a known watcher was refused")
	}
	if f.feed.admit(3) {
		t.Fatal("a third watcher was admitted while both others polled within idle")
	}
	f.clock.Advance(time.Second)
	if !f.feed.admit(3) {
		t.Fatal("watcher 2, idle for over a minute, still holds its place")
	}
	if f.feed.admit(2) {
		t.Fatal("watcher 2 came back over the bound")
	}
}

// TestWatchFeedWaitsForTheScopesNextEvent checks the long poll: writes to other keys of the segment move
// its revision without ending it, the scope's next write ends it, and the wait ends it empty otherwise.
func TestWatchFeedWaitsForTheScopesNextEvent(t *testing.T) {
	f := newFeedFixture(t, 0, roomyLimits)
	key := "k"
	other := f.sameSegment(key, "other")
	seg := f.layout.KeySegment(key)
	f.put(key, "0", 0) // 1
	done := make(chan watchBatch)
	go func() { done <- f.feed.next(context.Background(), seg, watchScope{key: key, slot: -1}, 1, time.Minute) }()
	f.put(other, "x", 0) // 2
	f.put(other, "y", 0) // 3
	f.put(key, "1", 0)   // 4
	b := <-done
	if got := describeEvents(b.events); got != "put k=1@4/4; " || b.revision != 4 {
		t.Fatalf("long poll gave %s revision %d; want the put at 4 alone", got, b.revision)
	}
	go func() { done <- f.feed.next(context.Background(), seg, watchScope{key: key, slot: -1}, 4, time.Minute) }()
	f.put(other, "z", 0) // 5
	waitFor(t, 5*time.Second, "the poll's timer", func() bool { return f.clock.Armed() > 0 })
	f.clock.Advance(time.Minute)
	if b = <-done; len(b.events) != 0 || b.compacted || b.revision < 4 || b.revision > 5 {
		t.Fatalf("poll that timed out gave %s revision %d compacted %v; want nothing, at 4 or 5", describeEvents(b.events), b.revision, b.compacted)
	}
}

// TestWatchFeedEndsWaitsOnAMapChange checks that a waiting poll returns, empty, when the node commits a new
// map, so that its watcher learns at once when the partition has moved.
func TestWatchFeedEndsWaitsOnAMapChange(t *testing.T) {
	f := newFeedFixture(t, 0, roomyLimits)
	key := "k"
	seg := f.layout.KeySegment(key)
	f.put(key, "0", 0)
	done := make(chan watchBatch)
	go func() { done <- f.feed.next(context.Background(), seg, watchScope{key: key, slot: -1}, 1, time.Hour) }()
	waitFor(t, 5*time.Second, "the poll's timer", func() bool { return f.clock.Armed() > 0 })
	f.feed.remapped()
	if b := <-done; len(b.events) != 0 || b.compacted || b.revision != 1 {
		t.Fatalf("poll ended by a map change gave %s revision %d compacted %v; want nothing at 1", describeEvents(b.events), b.revision, b.compacted)
	}
}

// TestWatchFeedReportsCollectionUpdates checks that a collection's writes reach a watcher as updates with
// the key's version and no content, its emptying as a delete, and that the state after compaction lists a
// collection once, without its content.
func TestWatchFeedReportsCollectionUpdates(t *testing.T) {
	for _, retain := range []int{0, 2} {
		f := newFeedFixture(t, retain, roomyLimits)
		key := "h"
		seg := f.layout.KeySegment(key)
		hset := func(field string) {
			req := kv.Request{Key: key, Args: [][]byte{[]byte(field), []byte("v")}}
			if reply := applyHSet(f.store, seg, req, opLimits{maxValueSize: 1 << 20}); reply.Status != StatusSuccess {
				t.Fatalf("HSET %s: %s", field, reply.Status)
			}
		}
		hset("a") // 1
		hset("b") // 2
		if reply := applyHDel(f.store, seg, kv.Request{Key: key, Args: [][]byte{[]byte("a"), []byte("b")}}, opLimits{}); reply.Status != StatusSuccess {
			t.Fatalf("HDEL: %s", reply.Status)
		}
		hset("c") // 4
		b := f.feed.collect(seg, watchScope{key: key, slot: -1}, 0)
		if retain == 0 {
			want := "update h=@1/1; update h=@2/2; delete h=@3/3; update h=@4/4; "
			if got := describeEvents(b.events); got != want {
				t.Fatalf("events %s; want %s", got, want)
			}
			continue
		}
		if !b.compacted || len(b.state) != 1 || b.state[0].Key != key || b.state[0].Value != nil || b.state[0].Version != 4 {
			t.Fatalf("state after compaction: compacted %v, %+v; want the hash once at version 4 without content", b.compacted, b.state)
		}
	}
}
