package zaris

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/glob"
	"github.com/zaris-go/zaris/internal/kv"
)

// testPager is a pager over a bare store that serves the partitions serves says it serves, and refuses the
// others as moved to node "b".
func testPager(s *store, layout Layout, serves func(p int) bool) *scanPager {
	return &scanPager{layout: layout, store: s, maxBytes: 1 << 20, check: func(p int) (kv.Reply, bool) {
		if serves != nil && !serves(p) {
			return kv.Reply{Status: StatusMoved, Owner: "b"}, false
		}
		return kv.Reply{}, true
	}}
}

// scanAll pages through the key space with req's options until the cursor comes back to 0, and returns
// every key with the number of times it came, and the pages.
func scanAll(t *testing.T, pg *scanPager, req kv.ScanRequest, mode scanMode) (map[string]int, []kv.ScanReply) {
	t.Helper()
	seen := map[string]int{}
	var pages []kv.ScanReply
	for {
		page := pg.page(&req, mode)
		if page.reply.Status != StatusSuccess {
			t.Fatalf("page at cursor %d: %v", req.Cursor, page.reply.Status)
		}
		pages = append(pages, page.reply)
		for _, k := range page.reply.Keys {
			seen[k]++
		}
		if page.reply.Next == kv.ScanDone {
			return seen, pages
		}
		if page.reply.Next <= req.Cursor {
			t.Fatalf("cursor went from %d to %d", req.Cursor, page.reply.Next)
		}
		if len(pages) > 1_000_000 {
			t.Fatal("the scan does not end")
		}
		req.Cursor = page.reply.Next
	}
}

func fillStore(s *store, layout Layout, keys []string) {
	for _, k := range keys {
		s.put(layout.KeySegment(k), k, []byte("v"), forTTL(0))
	}
}

func numberedKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return keys
}

func checkEachOnce(t *testing.T, seen map[string]int, want []string) {
	t.Helper()
	for _, k := range want {
		if seen[k] != 1 {
			t.Errorf("key %q returned %d times; want once", k, seen[k])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct keys returned; want %d", len(seen), len(want))
	}
}

// TestScanEmptyStore walks a store with no keys, or keys in a few segments only: the empty segments cost
// no page of their own, and the scan ends.
func TestScanEmptyStore(t *testing.T) {
	layout, _ := NewLayout(64, 8)
	s := newStore(layout.Segments, systemClock{})
	seen, pages := scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 10}, scanRouted)
	if len(seen) != 0 || len(pages) != 1 {
		t.Fatalf("empty store: %d keys in %d pages; want none in one page", len(seen), len(pages))
	}
	keys := []string{"{a}1", "{a}2", "{z}1"}
	fillStore(s, layout, keys)
	seen, pages = scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 10}, scanRouted)
	checkEachOnce(t, seen, keys)
	if len(pages) != 1 {
		t.Fatalf("3 keys in %d pages of 10; want one", len(pages))
	}
}

// TestScanPagesAreBounded walks 5000 keys in pages of 7: each page visits at most 7 keys, and every key comes
// exactly once, in slot order.
func TestScanPagesAreBounded(t *testing.T) {
	layout, _ := NewLayout(64, 8)
	s := newStore(layout.Segments, systemClock{})
	keys := numberedKeys("key:", 5000)
	fillStore(s, layout, keys)
	seen, pages := scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 7}, scanRouted)
	checkEachOnce(t, seen, keys)
	last := uint16(0)
	for _, p := range pages {
		if len(p.Keys) > 7 {
			t.Fatalf("a page of count 7 returned %d keys", len(p.Keys))
		}
		for _, k := range p.Keys {
			if KeySlot(k) < last {
				t.Fatalf("key %q of slot %d after slot %d", k, KeySlot(k), last)
			}
			last = KeySlot(k)
		}
	}
	if len(pages) < 5000/7 {
		t.Fatalf("%d pages for 5000 keys in pages of 7", len(pages))
	}
}

// TestScanSlotLargerThanPage puts 1000 keys in one slot and walks it in pages of 10: the cursor advances
// within the slot, and every key comes once.
func TestScanSlotLargerThanPage(t *testing.T) {
	layout, _ := NewLayout(64, 8)
	s := newStore(layout.Segments, systemClock{})
	keys := numberedKeys("{tag}:", 1000)
	fillStore(s, layout, keys)
	slot := KeySlot("{tag}")
	seen, pages := scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 10}, scanRouted)
	checkEachOnce(t, seen, keys)
	within := 0
	for _, p := range pages {
		if p.Next != kv.ScanDone && kv.ScanSlot(p.Next) == slot {
			within++
		}
	}
	if within < 99 {
		t.Fatalf("%d pages stopped within the slot; want at least 99", within)
	}
}

// TestScanMatchAndType returns only the keys that match the pattern and the type.
func TestScanMatchAndType(t *testing.T) {
	layout, _ := NewLayout(64, 8)
	s := newStore(layout.Segments, systemClock{})
	users, others := numberedKeys("user:", 300), numberedKeys("order:", 300)
	fillStore(s, layout, append(append([]string(nil), users...), others...))
	seen, _ := scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 50, Match: []byte("user:*")}, scanRouted)
	checkEachOnce(t, seen, users)
	seen, _ = scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 50, Match: []byte("order:1?")}, scanRouted)
	checkEachOnce(t, seen, numberedKeys("order:1", 10))
	seen, _ = scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 50, Type: "string"}, scanRouted)
	if len(seen) != 600 {
		t.Fatalf("TYPE string: %d keys; want 600", len(seen))
	}
	seen, _ = scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 50, Type: "hash"}, scanRouted)
	if len(seen) != 0 {
		t.Fatalf("TYPE hash: %d keys; want none", len(seen))
	}
}

// TestScanByteBound walks keys of 1 KiB with room for about four per page: pages stop at the byte bound
// whatever their count, and a key larger than the bound still comes, alone.
func TestScanByteBound(t *testing.T) {
	layout, _ := NewLayout(64, 8)
	s := newStore(layout.Segments, systemClock{})
	var keys []string
	for i := range 100 {
		keys = append(keys, fmt.Sprintf("%d:%s", i, strings.Repeat("k", 1024)))
	}
	keys = append(keys, strings.Repeat("huge", 2000))
	fillStore(s, layout, keys)
	pg := testPager(s, layout, nil)
	pg.maxBytes = 4 * (1024 + 8 + kv.ScanKeyOverhead)
	seen, pages := scanAll(t, pg, kv.ScanRequest{Count: 1000}, scanRouted)
	checkEachOnce(t, seen, keys)
	for _, p := range pages {
		bytes := 0
		for _, k := range p.Keys {
			bytes += len(k) + kv.ScanKeyOverhead
		}
		if bytes > pg.maxBytes && len(p.Keys) > 1 {
			t.Fatalf("a page of %d keys carries %d bytes; bound %d", len(p.Keys), bytes, pg.maxBytes)
		}
	}
}

// TestScanSkipsExpired returns no expired key, even one not yet reclaimed.
func TestScanSkipsExpired(t *testing.T) {
	layout, _ := NewLayout(64, 8)
	clock := clocktest.New(time.Unix(1000, 0))
	s := newStore(layout.Segments, clock)
	live, dying := numberedKeys("live:", 100), numberedKeys("dying:", 100)
	fillStore(s, layout, live)
	for _, k := range dying {
		s.put(layout.KeySegment(k), k, []byte("v"), forTTL(time.Second))
	}
	clock.Advance(2 * time.Second)
	seen, _ := scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 30}, scanRouted)
	checkEachOnce(t, seen, live)
	reaped := 0
	for seg := range layout.Segments {
		reaped += s.expireSegment(seg)
	}
	if reaped != 100 {
		t.Fatal("the expired keys were not all reclaimed")
	}
	seen, _ = scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 30}, scanRouted)
	checkEachOnce(t, seen, live)
}

// TestScanOwnership: a routed page stops at the first partition its node does not serve and is refused
// there; a page of the node's own keys skips the partitions of others.
func TestScanOwnership(t *testing.T) {
	layout, _ := NewLayout(64, 8)
	s := newStore(layout.Segments, systemClock{})
	keys := numberedKeys("k", 2000)
	fillStore(s, layout, keys)
	odd := func(p int) bool { return p%2 == 1 }
	pg := testPager(s, layout, odd)
	if page := pg.page(&kv.ScanRequest{Count: 10}, scanRouted); page.reply.Status != StatusMoved || page.reply.Owner != "b" {
		t.Fatalf("routed page in a partition served elsewhere: %+v; want Moved to b", page.reply)
	}
	first, _ := layout.PartitionSlots(1)
	page := pg.page(&kv.ScanRequest{Cursor: slotStart(int(first)), Count: 100000}, scanRouted)
	if second, _ := layout.PartitionSlots(2); page.reply.Status != StatusSuccess || page.reply.Next != slotStart(int(second)) {
		t.Fatalf("routed page from partition 1: %v, next %d; want success up to partition 2 at %d",
			page.reply.Status, page.reply.Next, slotStart(int(second)))
	}
	var mine []string
	for _, k := range keys {
		if odd(layout.KeyPartition(k)) {
			mine = append(mine, k)
		}
	}
	seen, _ := scanAll(t, pg, kv.ScanRequest{Count: 25}, scanOwned)
	checkEachOnce(t, seen, mine)
}

// TestScanPositionGroups gives several keys one position, as a hash collision would: a page never stops
// between them, so resuming at a position loses none.
func TestScanPositionGroups(t *testing.T) {
	layout, _ := NewLayout(1, 1)
	s := newStore(layout.Segments, systemClock{})
	keys := numberedKeys("c", 40)
	fillStore(s, layout, keys)
	seg := &s.segments[0]
	seg.entries = newKeyTable()
	for i, k := range keys {
		seg.entries.insert(uint64(i/8)<<20, newStringEntry(k, []byte("v"), 0, 0)) // five groups of eight
	}
	seen, pages := scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 3}, scanRouted)
	checkEachOnce(t, seen, keys)
	if len(pages) != 5 {
		t.Fatalf("%d pages; want 5, one per group", len(pages))
	}
}

// TestScanCountsInternalKeys fills a segment with transaction intents and a few keys: a walk visits no more
// entries than its bound, intents included, and pages of walks return every key once and no intent.
func TestScanCountsInternalKeys(t *testing.T) {
	layout, _ := NewLayout(1, 1)
	s := newStore(layout.Segments, systemClock{})
	keys := numberedKeys("k", 5)
	fillStore(s, layout, keys)
	for i := range 500 {
		s.put(0, intentKey(fmt.Sprint("held", i)), []byte("intent"), forTTL(0))
	}
	walk := s.scan(0, kv.ScanDone, kv.ScanDone, scanBounds{visits: 10, bytes: 1 << 20}, &scanFilter{}, nil)
	if walk.visited > 10 || walk.next == kv.ScanDone {
		t.Fatalf("a walk bounded to 10 visits visited %d entries and resumes at %#x", walk.visited, walk.next)
	}
	seen, _ := scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 10}, scanRouted)
	checkEachOnce(t, seen, keys)
}

// TestScanKeysKeepNoEntryAlive checks that the keys a walk returns are copies: holding them does not keep
// the entry of a key deleted since, and so its value, in memory.
func TestScanKeysKeepNoEntryAlive(t *testing.T) {
	s := newStore(1, systemClock{})
	s.put(0, "big", make([]byte, 1<<20), forTTL(0))
	gone := weak.Make(s.segments[0].entries.get("big"))
	walk := s.scan(0, kv.ScanDone, kv.ScanDone, scanBounds{visits: 10, bytes: 1 << 20}, &scanFilter{}, nil)
	s.remove(0, "big")
	runtime.GC()
	if gone.Value() != nil {
		t.Fatal("the keys of a walk keep a deleted key's entry alive")
	}
	if len(walk.keys) != 1 || walk.keys[0] != "big" {
		t.Fatalf("the walk returned %q", walk.keys)
	}
}

// TestScanDuringWrites scans while other keys are written and deleted: every key present for the whole
// scan comes, and no key that was never written does.
func TestScanDuringWrites(t *testing.T) {
	layout, _ := NewLayout(64, 8)
	s := newStore(layout.Segments, systemClock{})
	stable := numberedKeys("stable:", 3000)
	fillStore(s, layout, stable)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprintf("churn:%d", i%500)
			if i%3 == 0 {
				s.remove(layout.KeySegment(k), k)
			} else {
				s.put(layout.KeySegment(k), k, []byte("v"), forTTL(0))
			}
		}
	})
	seen, _ := scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Count: 5}, scanRouted)
	close(stop)
	wg.Wait()
	for _, k := range stable {
		if seen[k] == 0 {
			t.Fatalf("stable key %q missing", k)
		}
	}
	for k := range seen {
		if !strings.HasPrefix(k, "stable:") && !strings.HasPrefix(k, "churn:") {
			t.Fatalf("key %q was never written", k)
		}
	}
}

// TestScanPositionOrder: positions order keys by slot first, and the last slot's end is the scan's end.
func TestScanPositionOrder(t *testing.T) {
	for _, k := range []string{"a", "b", "{x}1", "user:1000", ""} {
		if got := kv.ScanSlot(scanPosition(k)); got != KeySlot(k) {
			t.Fatalf("slot of %q's position %d; want %d", k, got, KeySlot(k))
		}
	}
	if slotStart(NumSlots) != kv.ScanDone {
		t.Fatal("the position after the last slot is not the end")
	}
	if scanPosition("a") == math.MaxUint64 {
		t.Fatal("implausible position")
	}
}

// TestScanPageStopsWhenPartitionLeaves: a span of a page that ends with the partition no longer served is
// forgotten, since the copy it read may have been dropped meanwhile; the page ends after the spans before.
func TestScanPageStopsWhenPartitionLeaves(t *testing.T) {
	layout, _ := NewLayout(1, 1)
	s := newStore(layout.Segments, systemClock{})
	fillStore(s, layout, numberedKeys("k", 3*scanLockSpan))
	checks := 0
	pg := testPager(s, layout, func(int) bool { checks++; return checks <= 2 })
	page := pg.page(&kv.ScanRequest{Count: 10 * scanLockSpan}, scanRouted)
	if page.reply.Status != StatusSuccess || len(page.reply.Keys) != scanLockSpan {
		t.Fatalf("page: %v with %d keys; want success with the first span's %d", page.reply.Status, len(page.reply.Keys), scanLockSpan)
	}
	rest, _ := scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Cursor: page.reply.Next, Count: 100}, scanRouted)
	if len(rest)+len(page.reply.Keys) != 3*scanLockSpan {
		t.Fatalf("%d keys before the cursor and %d after; want %d in all", len(page.reply.Keys), len(rest), 3*scanLockSpan)
	}
	checks = 1 // the first span ends with the partition refused: nothing was read, the page is refused
	if page := pg.page(&kv.ScanRequest{Count: 100}, scanRouted); page.reply.Status != StatusMoved {
		t.Fatalf("page refused after its first span: %v; want Moved", page.reply.Status)
	}
}

// TestScanEmptyPartitionBeforeForeign: a routed page that crosses an empty partition it serves and reaches
// one it does not ends there with success, so the router sends the rest to that partition's owner.
func TestScanEmptyPartitionBeforeForeign(t *testing.T) {
	layout, _ := NewLayout(64, 8)
	s := newStore(layout.Segments, systemClock{})
	page := testPager(s, layout, func(p int) bool { return p == 0 }).page(&kv.ScanRequest{Count: 10}, scanRouted)
	if second, _ := layout.PartitionSlots(1); page.reply.Status != StatusSuccess || page.reply.Next != slotStart(int(second)) {
		t.Fatalf("page: %v, next %d; want success, next %d", page.reply.Status, page.reply.Next, slotStart(int(second)))
	}
}

// FuzzScanRequest decodes an kv.OpScan request as an owner does and serves it from a small store: a request
// that decodes is served without panicking, returns only live keys that match, from positions between its
// cursor and the next, and the next cursor is past its own unless the scan is done.
func FuzzScanRequest(f *testing.F) {
	for _, req := range []kv.ScanRequest{
		{Count: 10},
		{Cursor: slotStart(5000), Count: 1, Match: []byte("k1*")},
		{Cursor: math.MaxUint64, Count: -5, Match: []byte("[")},
		{Cursor: 1, Count: math.MaxInt, Type: "string"},
		{Cursor: slotStart(16000) + 12345, Count: 3, Match: []byte("\\"), Type: "hash"},
	} {
		b, err := encode(&req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	layout, _ := NewLayout(16, 4)
	s := newStore(layout.Segments, systemClock{})
	fillStore(s, layout, numberedKeys("k", 500))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzReflective[kv.ScanRequest](t, data)
		var req kv.ScanRequest
		if decode(data, &req) != nil {
			return
		}
		page := testPager(s, layout, func(p int) bool { return p != 2 }).page(&req, scanRouted)
		if page.reply.Status != StatusSuccess {
			if page.reply.Status != StatusMoved || layout.SlotPartition(kv.ScanSlot(req.Cursor)) != 2 {
				t.Fatalf("page at %d refused: %v", req.Cursor, page.reply.Status)
			}
			return
		}
		next := page.reply.Next
		if next != kv.ScanDone && next <= req.Cursor {
			t.Fatalf("cursor went from %d to %d", req.Cursor, next)
		}
		for _, k := range page.reply.Keys {
			pos := scanPosition(k)
			if pos < req.Cursor || next != kv.ScanDone && pos >= next {
				t.Fatalf("key %q at %d outside [%d, %d)", k, pos, req.Cursor, next)
			}
			if req.Match != nil && !glob.Match(req.Match, []byte(k), false) || req.Type != "" && req.Type != "string" {
				t.Fatalf("key %q does not pass match %q, type %q", k, req.Match, req.Type)
			}
		}
	})
}

// checkTable fails the test unless every segment's table keeps its invariants, with every key at its scan
// position, and counts its internal keys.
func checkTable(t testing.TB, name string, s *store) {
	t.Helper()
	for i := range s.segments {
		seg := &s.segments[i]
		seg.mu.RLock()
		err := seg.entries.check(true)
		internal := 0
		for k := range seg.entries.all() {
			if isInternalKey(k) {
				internal++
			}
		}
		if err == nil && internal != seg.internal {
			err = fmt.Errorf("%d internal keys counted as %d", internal, seg.internal)
		}
		seg.mu.RUnlock()
		if err != nil {
			t.Fatalf("%s: segment %d: %v", name, i, err)
		}
	}
}

// TestStoreTableFollowsEveryChange keeps every segment's table in order, each key at its position, through
// puts, overwrites, deletes, reaping, a replica's ordered writes and a snapshot restore.
func TestStoreTableFollowsEveryChange(t *testing.T) {
	layout, _ := NewLayout(8, 2)
	clock := clocktest.New(time.Unix(1000, 0))
	s := newStore(layout.Segments, clock)
	keys := numberedKeys("k", 400)
	fillStore(s, layout, keys)
	fillStore(s, layout, keys[:100]) // overwrites
	for _, k := range keys[100:150] {
		s.remove(layout.KeySegment(k), k)
	}
	for _, k := range keys[150:200] {
		s.put(layout.KeySegment(k), k, []byte("v"), forTTL(time.Second))
	}
	checkTable(t, "after writes", s)
	clock.Advance(2 * time.Second)
	for seg := range layout.Segments {
		s.expireSegment(seg)
	}
	checkTable(t, "after reaping", s)

	replica := newStore(layout.Segments, clock)
	for seg := range layout.Segments {
		rev, snap := s.snapshot(seg)
		replica.restore(seg, rev, snap)
	}
	checkTable(t, "after restore", replica)
	seg := layout.KeySegment("r")
	for _, kind := range []durability.OpKind{durability.OpPut, durability.OpDelete, durability.OpDelete, durability.OpPut} {
		op := durability.Op{Segment: uint32(seg), Revision: replica.revision(seg) + 1, Kind: kind, Key: "r"}
		if kind == durability.OpPut {
			op.Value = []byte("v")
		}
		if applied, _ := replica.applyAt(seg, 1, &op); !applied {
			t.Fatal("an op in order was not applied")
		}
	}
	checkTable(t, "after ordered writes", replica)
	seen, _ := scanAll(t, testPager(replica, layout, nil), kv.ScanRequest{Count: 17}, scanRouted)
	if want := 400 - 50 - 50 + 1; len(seen) != want {
		t.Fatalf("replica scan: %d keys; want %d", len(seen), want)
	}
}

// TestScanPageReadsASegmentAtOneRevision: an atomic write of a segment that lands between two lock spans
// of a page, deleting a key the first span returned and creating one after it, ends the page before the
// second span, so that no page shows both keys, a state the segment never had.
func TestScanPageReadsASegmentAtOneRevision(t *testing.T) {
	layout, _ := NewLayout(1, 1)
	s := newStore(layout.Segments, systemClock{})
	keys := numberedKeys("k", 3*scanLockSpan)
	fillStore(s, layout, keys)
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(scanPosition(a), scanPosition(b)) })
	gone := keys[0]
	created := "new"
	for i := 0; scanPosition(created) <= scanPosition(keys[2*scanLockSpan]); i++ {
		created = fmt.Sprintf("new%d", i)
	}
	checks := 0
	pg := testPager(s, layout, func(int) bool {
		if checks++; checks == 2 { // after the page's first span
			s.atomically(0, func(g *store) {
				g.update(0, gone, func(*entry, int64) (*entry, bool) { return nil, true })
				g.put(0, created, []byte("v"), forTTL(0))
			})
		}
		return true
	})
	page := pg.page(&kv.ScanRequest{Count: 10 * scanLockSpan}, scanRouted)
	if !slices.Contains(page.reply.Keys, gone) || slices.Contains(page.reply.Keys, created) {
		t.Fatalf("the page holds %q: %v, and %q: %v; want the first, not the second",
			gone, slices.Contains(page.reply.Keys, gone), created, slices.Contains(page.reply.Keys, created))
	}
	if len(page.reply.Keys) != scanLockSpan {
		t.Fatalf("the page holds %d keys; want the first span's %d", len(page.reply.Keys), scanLockSpan)
	}
	rest, _ := scanAll(t, testPager(s, layout, nil), kv.ScanRequest{Cursor: page.reply.Next, Count: 100}, scanRouted)
	if rest[created] != 1 || rest[gone] != 0 || len(rest)+len(page.reply.Keys) != 3*scanLockSpan+1 {
		t.Fatalf("after the page: %d keys, %q %d times, %q %d times", len(rest), created, rest[created], gone, rest[gone])
	}
}
