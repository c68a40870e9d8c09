package zaris

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// newTestNearCache is a near cache with no node behind it: its pollers are not started.
func newTestNearCache(t *testing.T, staleness time.Duration) (*nearCache, *clocktest.Manual) {
	t.Helper()
	clock := clocktest.New(time.Unix(1000, 0))
	cfg := DefaultConfig()
	cfg.Clock = clock
	cfg.NearCache = NearCacheConfig{MaxBytes: 1 << 20, MaxStaleness: staleness}
	layout, _ := NewLayout(cfg.Segments, cfg.Partitions)
	c, err := newNearCache(cfg, layout, slog.New(slog.DiscardHandler), func(NodeID) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return c, clock
}

// fill caches value under key as a fill from owner at epoch 1 and segment revision 10 would.
func (c *nearCache) testFill(key, value string, f nearFill) {
	seg := c.layout.KeySegment(key)
	c.keep(key, seg, f, &nearEntry{value: []byte(value), version: 1}, "owner", 1, 10)
}

func (c *nearCache) cached(key string) string {
	e, check := c.lookup(key, c.layout.KeySegment(key))
	switch {
	case e == nil:
		return "<miss>"
	case check:
		return "<check>"
	}
	return string(e.value)
}

// TestNearCacheKeepsNothingDroppedDuringItsRead checks the fills that must keep nothing: one during which
// the key was dropped (a write of this node, or an owner's report), one whose segment was dropped, and
// one begun before the drops it could still have missed were forgotten.
func TestNearCacheKeepsNothingDroppedDuringItsRead(t *testing.T) {
	c, _ := newTestNearCache(t, 0)
	seg := c.layout.KeySegment("k")

	c.testFill("k", "v1", c.begin(seg))
	if got := c.cached("k"); got != "v1" {
		t.Fatalf("after a fill: %s", got)
	}

	f := c.begin(seg)
	c.forget("k") // this node's write returns while the read was in flight
	c.testFill("k", "v1", f)
	if got := c.cached("k"); got != "<miss>" {
		t.Fatalf("a fill begun before a write of the key kept %s", got)
	}

	f = c.begin(seg)
	c.mu.Lock()
	c.dropSegment(seg, "test")
	c.mu.Unlock()
	c.testFill("k", "v1", f)
	if got := c.cached("k"); got != "<miss>" {
		t.Fatalf("a fill begun before its segment was dropped kept %s", got)
	}

	f = c.begin(seg)
	for i := range nearDropMemory + 1 {
		c.forget("other-" + strconv.Itoa(i))
	}
	c.testFill("k", "v1", f)
	if got := c.cached("k"); got != "<miss>" {
		t.Fatalf("a fill begun before the drops it could have missed were forgotten kept %s", got)
	}
	if s := c.stats.refused.Load(); s != 3 {
		t.Fatalf("refused %d fills, want 3", s)
	}

	c.testFill("k", "v2", c.begin(seg))
	if got := c.cached("k"); got != "v2" {
		t.Fatalf("a fill after the drops: %s", got)
	}
}

// TestNearCacheAppliesOwnerReports feeds a cache the answers of an owner's polls: changed keys go, a gap
// or a new epoch takes the whole segment, a refusal stops following it, and an answer to a poll the cache
// has moved on from changes nothing.
func TestNearCacheAppliesOwnerReports(t *testing.T) {
	c, _ := newTestNearCache(t, 0)
	a, b := "a", keyInSegment(c.layout, "b", c.layout.KeySegment("a"))
	seg := c.layout.KeySegment(a)
	fillBoth := func() {
		c.testFill(a, "va", c.begin(seg))
		c.testFill(b, "vb", c.begin(seg))
	}
	poll := func() *nearWatchRequest {
		return &nearWatchRequest{Segments: []uint32{uint32(seg)}, After: []uint64{c.subs[seg].cursor}}
	}
	answer := func(req *nearWatchRequest, r nearSegmentReply) {
		c.apply("owner", req, &nearWatchReply{Segments: []nearSegmentReply{r}})
		c.values.Wait()
	}
	fillBoth()
	answer(poll(), nearSegmentReply{Epoch: 1, Revision: 11, Keys: []string{a}})
	if c.cached(a) != "<miss>" || c.cached(b) != "vb" {
		t.Fatalf("after a report of %s: %s, %s", a, c.cached(a), c.cached(b))
	}
	if cur := c.subs[seg].cursor; cur != 11 {
		t.Fatalf("cursor %d after the report, want 11", cur)
	}

	stale := poll()
	answer(poll(), nearSegmentReply{Epoch: 1, Revision: 12})
	answer(stale, nearSegmentReply{Epoch: 1, Revision: 30, Keys: []string{b}})
	if c.cached(b) != "vb" || c.subs[seg].cursor != 12 {
		t.Fatalf("an answer to an outdated poll was applied: %s, cursor %d", c.cached(b), c.subs[seg].cursor)
	}

	for _, r := range []nearSegmentReply{
		{Epoch: 1, Revision: 40, Gap: true},
		{Epoch: 2, Revision: 41},
	} {
		fillBoth()
		answer(poll(), r)
		if c.cached(a) != "<miss>" || c.cached(b) != "<miss>" {
			t.Fatalf("after %+v: %s, %s", r, c.cached(a), c.cached(b))
		}
		c.subs[seg].epoch = r.Epoch
	}

	fillBoth()
	answer(poll(), nearSegmentReply{Status: StatusMoved})
	if c.cached(a) != "<miss>" || c.subs[seg] != nil {
		t.Fatalf("after a refusal: %s, following %v", c.cached(a), c.subs[seg] != nil)
	}
}

// TestNearCacheChecksValuesPastMaxStaleness checks that a value read more than MaxStaleness ago must be
// checked with its owner, even though the owner's reports keep coming: one may have been lost.
func TestNearCacheChecksValuesPastMaxStaleness(t *testing.T) {
	c, clock := newTestNearCache(t, time.Second)
	seg := c.layout.KeySegment("k")
	c.testFill("k", "v", c.begin(seg))
	clock.Advance(time.Second)
	if got := c.cached("k"); got != "v" {
		t.Fatalf("at MaxStaleness: %s", got)
	}
	clock.Advance(time.Millisecond)
	req := &nearWatchRequest{Segments: []uint32{uint32(seg)}, After: []uint64{10}}
	c.apply("owner", req, &nearWatchReply{Segments: []nearSegmentReply{{Epoch: 1, Revision: 10}}})
	if got := c.cached("k"); got != "<check>" {
		t.Fatalf("past MaxStaleness, after a report: %s", got)
	}
	c.testFill("k", "v", c.begin(seg)) // the check found it unchanged
	if got := c.cached("k"); got != "v" {
		t.Fatalf("after the check: %s", got)
	}
}

// keyInSegment returns a key starting with prefix that falls in segment seg.
func keyInSegment(layout Layout, prefix string, seg int) string {
	for i := 0; ; i++ {
		if key := prefix + strconv.Itoa(i); layout.KeySegment(key) == seg {
			return key
		}
	}
}

// nearCached gives node i of the cluster a near cache, or every node with i < 0.
func nearCached(i int, more ...func(*Config)) func(*Config) {
	return func(cfg *Config) {
		if i < 0 || cfg.Name == fmt.Sprintf("node-%d", i) {
			cfg.NearCache.MaxBytes = 1 << 20
		}
		for _, f := range more {
			f(cfg)
		}
	}
}

// TestNearCacheServesRepeatedReadsFromMemory reads a key another node owns twice: the second read is
// served from memory, as the owner's count of requests served shows.
func TestNearCacheServesRepeatedReadsFromMemory(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, nearCached(0))
	ctx := bg(t)
	reader, owner := c.node(0), c.node(1)
	key := c.keyOwnedBy("hot", owner)
	must(t, reader.Put(ctx, key, []byte("v")))
	for i := range 3 {
		if v, err := reader.Get(ctx, key); err != nil || string(v) != "v" {
			t.Fatalf("read %d: %q, %v", i, v, err)
		}
	}
	served := owner.Stats().RequestsServed
	for range 100 {
		if v, err := reader.Get(ctx, key); err != nil || string(v) != "v" {
			t.Fatalf("cached read: %q, %v", v, err)
		}
	}
	if more := owner.Stats().RequestsServed - served; more != 0 {
		t.Fatalf("the owner served %d requests for 100 reads of a cached key", more)
	}
	if s := reader.NearCacheStats(); s.Hits < 100 || s.Bytes <= 0 {
		t.Fatalf("stats %+v: want at least 100 hits and some bytes", s)
	}
	local := c.keyOwnedBy("local", reader)
	must(t, reader.Put(ctx, local, []byte("l")))
	before := reader.NearCacheStats()
	if v, err := reader.Get(ctx, local); err != nil || string(v) != "l" {
		t.Fatalf("local read: %q, %v", v, err)
	}
	if after := reader.NearCacheStats(); after.Hits != before.Hits || after.Misses != before.Misses {
		t.Fatalf("a key this node owns went through the near cache: %+v -> %+v", before, after)
	}
}

// TestNearCacheSeesOtherNodesWrites caches a key on one node and writes it through another: the cached
// value is dropped on the owner's report, and reads never go back to a value once a newer one was read.
func TestNearCacheSeesOtherNodesWrites(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nearCached(0))
	ctx := bg(t)
	reader, owner, writer := c.node(0), c.node(1), c.node(2)
	key := c.keyOwnedBy("shared", owner)
	newest := 0
	for i := 1; i <= 20; i++ {
		must(t, writer.Put(ctx, key, []byte(strconv.Itoa(i))))
		waitFor(t, 10*time.Second, "the reader to see write "+strconv.Itoa(i), func() bool {
			v, err := reader.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := strconv.Atoi(string(v))
			if got < newest {
				t.Fatalf("read %d after %d", got, newest)
			}
			newest = got
			return got == i
		})
	}
	if s := reader.NearCacheStats(); s.Invalidations == 0 || s.Hits == 0 {
		t.Fatalf("stats %+v: want invalidations and hits", s)
	}
}

// TestNearCacheReadsItsOwnWrites has one goroutine of a node read a key in a loop, refilling its near
// cache, while another writes the key through the same node and reads it back: the read back returns the
// write every time, whatever fill raced it.
func TestNearCacheReadsItsOwnWrites(t *testing.T) {
	const readerPace = 100 * time.Microsecond
	t.Parallel()
	c := startCluster(t, 2, nearCached(0))
	// 200 writes and read-backs beside two readers that fill the cache in a loop: under a second alone, far
	// longer on a loaded machine, where each fill waits for the cache's background goroutine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := c.node(0)
	key := c.keyOwnedBy("own", c.node(1))
	must(t, node.Put(ctx, key, []byte("0")))
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				node.Get(ctx, key)
				time.Sleep(readerPace) // a fill or a hit at a time, leaving the cores to the writes
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()
	// At least 200 writes, and on until the readers have hit the cache between two of them: the read-backs
	// are checked while the cache is filled and served, not only while it is being invalidated.
	for i := 1; i <= 200 || node.NearCacheStats().Hits == 0; i++ {
		if ctx.Err() != nil {
			t.Fatalf("stats %+v after %d writes: the readers never hit the cache", node.NearCacheStats(), i-1)
		}
		want := strconv.Itoa(i)
		switch i % 3 {
		case 0:
			must(t, node.Put(ctx, key, []byte(want)))
		case 1:
			e, err := node.GetEntry(ctx, key)
			must(t, err)
			_, err = node.CompareAndSwap(ctx, key, e.Version, []byte(want))
			must(t, err)
		case 2:
			_, err := node.ExecuteBatch(ctx, []BatchItem{{Op: BatchPut, Key: key, Value: []byte(want)}})
			must(t, err)
		}
		if v, err := node.Get(ctx, key); err != nil || string(v) != want {
			t.Fatalf("write %d read back as %q, %v", i, v, err)
		}
	}
}

// TestNearCacheFollowsFailover caches a key, kills its owner, and writes the key through the new owner: the
// cache drops what it held of the partition and reads the new owner's value.
func TestNearCacheFollowsFailover(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, nearCached(-1, func(cfg *Config) { cfg.FailoverTimeout = time.Second })))
	ctx := bg(t)
	reader, p, nodes := c.awayFromLeader() // the reader holds no copy of the partition
	key := keyInPartition(reader.layout, "failover-", p)
	must(t, reader.Put(ctx, key, []byte("before")))
	for range 3 {
		v, err := reader.Get(ctx, key)
		if err != nil || string(v) != "before" {
			t.Fatalf("read %q, %v", v, err)
		}
	}
	dropped := reader.NearCacheStats().SegmentsDropped
	c.kill(c.indexOf(nodes[0].id))
	c.waitFailedOver(nodes[0].id, 20*time.Second)
	waitFor(t, 10*time.Second, "a write through the new owner", func() bool { return nodes[1].Put(ctx, key, []byte("after")) == nil })
	waitFor(t, 10*time.Second, "the reader to see the new owner's value", func() bool {
		v, err := reader.Get(ctx, key)
		return err == nil && string(v) == "after"
	})
	if s := reader.NearCacheStats(); s.SegmentsDropped <= dropped {
		t.Fatalf("stats %+v: the failover dropped no segment", s)
	}
}

// BenchmarkNearCache compares, in one run on loopback sockets, a Get of a hot key another node owns served
// by the near cache, the same Get without the cache (a remote request), and a Get of a key the caller owns
// (in process). zipf-* run a read-mostly workload (95% Get, 5% Put, 10k keys drawn Zipfian from a 2-node
// cluster) with and without the cache.
func BenchmarkNearCache(b *testing.B) {
	c := startSocketCluster(b, 2, func(cfg *Config) {
		cfg.Dialer = nil // the plain dialer: fault injection is for tests, not for measuring
		if cfg.Name == "node-0" {
			cfg.NearCache.MaxBytes = 64 << 20
		}
	})
	ctx := context.Background()
	cached, plain := c.node(0), c.node(1)
	value := make([]byte, 64)
	hot := c.keyOwnedBy("hot", plain)
	mine := c.keyOwnedBy("mine", cached)
	remote := c.keyOwnedBy("remote", cached) // owned by the caller of the plain reads: read from node-1 it is remote
	for _, key := range []string{hot, mine, remote} {
		if err := cached.Put(ctx, key, value); err != nil {
			b.Fatal(err)
		}
	}
	get := func(n *Node, key string) func(b *testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				if _, err := n.Get(ctx, key); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("get-near-cached", get(cached, hot))
	b.Run("get-remote", get(plain, remote))
	b.Run("get-local", get(cached, mine))

	const keys = 10_000
	names := make([]string, keys)
	for i := range names {
		names[i] = "zipf-" + strconv.Itoa(i)
		if err := plain.Put(ctx, names[i], value); err != nil {
			b.Fatal(err)
		}
	}
	zipf := func(n *Node) func(b *testing.B) {
		return func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
				z := rand.NewZipf(rng, 1.1, 1, keys-1)
				for pb.Next() {
					key := names[z.Uint64()]
					var err error
					if rng.IntN(100) < 5 {
						err = n.Put(ctx, key, value)
					} else if _, err = n.Get(ctx, key); errors.Is(err, ErrNotFound) {
						err = nil
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.Run("zipf-near-cached", zipf(cached))
	b.Run("zipf-plain", zipf(plain))
}

// nearWireSeeds are kv.OpNearWatch messages the fuzz tests start from.
func nearWireSeeds() ([]nearWatchRequest, []nearWatchReply) {
	return []nearWatchRequest{
			{Cache: 7, Segments: []uint32{3, 9}, After: []uint64{10, 0}, Wait: int64(time.Second)},
			{Cache: 1},
		}, []nearWatchReply{
			{Status: StatusSuccess, Segments: []nearSegmentReply{
				{Status: StatusSuccess, Epoch: 2, Revision: 14, Keys: []string{"a", "{t}b"}},
				{Status: StatusSuccess, Epoch: 2, Revision: 30, Gap: true},
				{Status: StatusMoved},
			}},
			{Status: StatusTooManyWatchers},
		}
}

// FuzzDecodeNearWatchRequest fuzzes the kv.OpNearWatch request, read with the reflective codec.
func FuzzDecodeNearWatchRequest(f *testing.F) {
	requests, _ := nearWireSeeds()
	for i := range requests {
		b, err := encode(&requests[i])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(fuzzReflective[nearWatchRequest])
}

// FuzzDecodeNearWatchReply fuzzes the kv.OpNearWatch reply, which the caching node reads with the reflective
// codec.
func FuzzDecodeNearWatchReply(f *testing.F) {
	_, replies := nearWireSeeds()
	for i := range replies {
		b, err := encode(&replies[i])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(fuzzReflective[nearWatchReply])
}

// TestNearWatchRefusesBadRequests checks that an owner refuses a poll whose segments and revisions do not
// pair up or name segments that do not exist, before it waits.
func TestNearWatchRefusesBadRequests(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	n := c.node(0)
	for name, req := range map[string]nearWatchRequest{
		"unpaired": {Segments: []uint32{1, 2}, After: []uint64{0}, Wait: int64(time.Hour)},
		"no such":  {Segments: []uint32{uint32(n.layout.Segments)}, After: []uint64{0}, Wait: int64(time.Hour)},
		"too many": {Segments: make([]uint32, n.layout.Segments+1), After: make([]uint64, n.layout.Segments+1)},
	} {
		if r := n.own.serveNearWatch(bg(t), &req); r.Status != StatusInvalidRequest {
			t.Errorf("%s: status %s, want InvalidRequest", name, r.Status)
		}
	}
}

// TestNearCacheReadsUncachedFromOlderOwners gives a node a near cache in a cluster whose other node, like a
// node of an older version, knows neither kv.OpNearGet nor kv.OpNearWatch: reads of its keys go through the
// plain path, current and uncached.
func TestNearCacheReadsUncachedFromOlderOwners(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, nearCached(0, func(cfg *Config) {
		if cfg.Name == "node-1" {
			cfg.hooks.refuseOp = func(op transport.Op) bool { return op == kv.OpNearGet || op == kv.OpNearWatch }
		}
	}))
	ctx := bg(t)
	reader, owner := c.node(0), c.node(1)
	key := c.keyOwnedBy("old", owner)
	for i := range 5 {
		want := strconv.Itoa(i)
		must(t, owner.Put(ctx, key, []byte(want)))
		if v, err := reader.Get(ctx, key); err != nil || string(v) != want {
			t.Fatalf("read %q, %v; want %q", v, err, want)
		}
	}
	if s := reader.NearCacheStats(); s.Hits != 0 || s.Bytes != 0 {
		t.Fatalf("stats %+v: an older owner's key was cached", s)
	}
}
