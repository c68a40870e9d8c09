package zaris

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCopiesPerShare(t *testing.T) {
	m := func(assign Assignment, owners ...NodeID) *ClusterMap {
		rt := make([]PartitionState, len(assign))
		for p := range rt {
			if p < len(owners) {
				rt[p].Owner = owners[p]
			}
		}
		return &ClusterMap{Assignment: assign, Runtime: rt}
	}
	for _, tc := range []struct {
		name string
		m    *ClusterMap
		want []int
	}{
		{"one node holds all", m(Assignment{{"a"}, {"a"}, {"a"}}), []int{3, 3, 3}},
		{"balanced pairs", m(Assignment{{"a", "b"}, {"b", "c"}, {"c", "a"}}), []int{2, 2, 2}},
		{"the most loaded holder decides", m(Assignment{{"a", "b"}, {"a", "c"}, {"a", "b"}}), []int{3, 3, 3}},
		{"a lightly loaded partition still fits its busiest holder", m(Assignment{{"a"}, {"a"}, {"b"}}), []int{2, 2, 1}},
		{"an owner outside the assignment holds a copy too", m(Assignment{{"a"}, {"b"}}, "c", "c"), []int{2, 2}},
		{"no copies", m(Assignment{{}, {}}), []int{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := copiesPerShare(tc.m); !slices.Equal(got, tc.want) {
				t.Fatalf("copiesPerShare = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseMemorySize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1024": 1024, "100mb": 100 << 20, "2GB": 2 << 30, "64kb": 64 << 10, "1k": 1000, "3m": 3e6, "1g": 1e9, " 5b ": 5,
	} {
		if got, err := ParseMemorySize(in); err != nil || got != want {
			t.Errorf("ParseMemorySize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "mb", "-1", "1.5gb", "10tb", "99999999999999999999", "9000000000gb"} {
		if _, err := ParseMemorySize(in); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParseMemorySize(%q) = %v, want ErrInvalidConfig", in, err)
		}
	}
}

func TestMaxMemoryValidation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxMemory = 100 << 20
	if err := cfg.Validate(); err != nil {
		t.Fatalf("100 MiB with the default op log: %v", err)
	}
	if got := cfg.withDefaults().OpLogRetainBytes; got != (100<<20)/8 {
		t.Fatalf("op log bound under MaxMemory 100 MiB = %d, want an eighth of it", got)
	}
	cfg.OpLogRetainBytes = 60 << 20
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("MaxMemory under twice the op log's bound: %v, want ErrInvalidConfig", err)
	}
	cfg.OpLogRetainBytes, cfg.EvictionPolicy = 0, "allkeys-mru"
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("an eviction policy not served: %v, want ErrInvalidConfig", err)
	}
	cfg.EvictionPolicy, cfg.MaxMemory = "", -1
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a negative MaxMemory: %v, want ErrInvalidConfig", err)
	}
}

// TestMaxMemoryNoEviction floods a three-node RF 2 cluster with several times what MaxMemory lets it
// hold, through the Go API from every node and through RESP: writes past the bound fail with
// ErrOutOfMemory (-OOM over RESP) while no node's copies pass its data budget, every acknowledged write
// reads back, and deletes make room for writes again.
func TestMaxMemoryNoEviction(t *testing.T) {
	t.Parallel()
	const maxMemory, valueSize = 2 << 20, 4 << 10
	c := startRESPCluster(t, 3, replicated(2, func(cfg *Config) { cfg.MaxMemory = maxMemory }))
	c.waitHealthy(20 * time.Second)
	dataBudget := int64(maxMemory) - c.node(0).cfg.OpLogRetainBytes
	value := []byte(strings.Repeat("v", valueSize))

	acked, refused := flood(t, c, "flood", 750, valueSize, nil)
	// 2,250 writes of 4 KiB against about 3 x 1.75 MiB / 2 copies of room: most must be refused.
	if refused < 1000 || len(acked) < 400 {
		t.Fatalf("%d writes acknowledged, %d refused for want of memory: the bound did not bite as it should", len(acked), refused)
	}
	ctx := bg(t)
	t.Logf("%d writes acknowledged, %d refused; data budget %d a node", len(acked), refused, dataBudget)
	// Writes to one partition admitted at the same instant may pass its share together: at most one
	// write per writer.
	slack := int64(len(c.live()) * (valueSize + 64))
	for _, n := range c.live() {
		held := n.own.store.bytes()
		t.Logf("%s holds %d bytes of copies", n.id, held)
		if held > dataBudget+slack {
			t.Fatalf("%s holds %d bytes of copies, over its data budget %d", n.id, held, dataBudget)
		}
	}
	for _, k := range acked {
		if got, err := c.node(0).Get(ctx, k); err != nil || len(got) != valueSize {
			t.Fatalf("acknowledged %s reads back as %d bytes, %v", k, len(got), err)
		}
	}

	rdb := newClusterClient(t, c, 3)
	err := rdb.Set(ctx, "flood-resp", value, 0).Err()
	if err == nil || err.Error() != redisOOMError {
		t.Fatalf("SET past maxmemory over RESP: %v, want %q", err, redisOOMError)
	}
	if got := rdb.ConfigGet(ctx, "maxmemory").Val()["maxmemory"]; got != fmt.Sprint(maxMemory) {
		t.Fatalf("CONFIG GET maxmemory = %q, want %d", got, maxMemory)
	}
	if info := rdb.Info(ctx, "memory").Val(); !strings.Contains(info, fmt.Sprintf("maxmemory:%d\r\n", maxMemory)) {
		t.Fatalf("INFO memory does not report maxmemory %d:\n%s", maxMemory, info)
	}

	for _, k := range acked {
		if _, err := c.node(0).Delete(ctx, k); err != nil {
			t.Fatalf("delete %s under the bound: %v", k, err)
		}
	}
	for i := range 50 {
		if err := c.node(i%3).Put(ctx, fmt.Sprintf("after-%d", i), value); err != nil {
			t.Fatalf("put after the deletes made room: %v", err)
		}
	}
	if err := rdb.Set(ctx, "flood-resp", value, 0).Err(); err != nil {
		t.Fatalf("SET over RESP after the deletes: %v", err)
	}
}

// TestConfigSetMaxMemory lifts and restores the bound at run time over RESP, and refuses a bound the op
// log would take whole or a policy the node does not serve.
func TestConfigSetMaxMemory(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 1, func(cfg *Config) { cfg.MaxMemory = 2 << 20 })
	ctx := bg(t)
	rdb := newClusterClient(t, c, 2)
	big := strings.Repeat("x", 3<<20)
	if err := rdb.Set(ctx, "big", big, 0).Err(); err == nil || err.Error() != redisOOMError {
		t.Fatalf("SET of 3 MiB under maxmemory 2 MiB: %v, want -OOM", err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "big", big, 0).Err(); err != nil {
		t.Fatalf("SET with the bound lifted: %v", err)
	}
	for _, bad := range [][2]string{{"maxmemory", "1kb"}, {"maxmemory", "lots"}, {"maxmemory-policy", "allkeys-mru"}, {"no-such-option", "1"}} {
		if err := rdb.ConfigSet(ctx, bad[0], bad[1]).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR ") {
			t.Fatalf("CONFIG SET %s %s: %v, want an ERR reply", bad[0], bad[1], err)
		}
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "ALLKEYS-LFU").Err(); err != nil {
		t.Fatalf("CONFIG SET maxmemory-policy ALLKEYS-LFU: %v", err)
	}
	if got := rdb.ConfigGet(ctx, "maxmemory-policy").Val()["maxmemory-policy"]; got != EvictionAllKeysLFU {
		t.Fatalf("CONFIG GET maxmemory-policy after setting allkeys-lfu = %q", got)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "100mb").Err(); err != nil {
		t.Fatal(err)
	}
	if got := rdb.ConfigGet(ctx, "maxmemory").Val()["maxmemory"]; got != fmt.Sprint(100<<20) {
		t.Fatalf("CONFIG GET maxmemory after CONFIG SET 100mb = %q", got)
	}
}

// flood writes count values of size bytes from every node at once, keys named by prefix, and returns the
// keys acknowledged and how many were refused for want of memory. A write refused throughout a move of its
// partition is neither. ttl, when it returns non-zero for a
// key's index, gives the key that TTL.
func flood(t *testing.T, c *testCluster, prefix string, count, size int, ttl func(i int) time.Duration) (acked []string, refused int) {
	t.Helper()
	ctx := bg(t)
	value := []byte(strings.Repeat("v", size))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w, n := range c.live() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range count {
				key := fmt.Sprintf("%s-%d-%d", prefix, w, i)
				var opts []PutOption
				if ttl != nil && ttl(i) > 0 {
					opts = append(opts, WithTTL(ttl(i)))
				}
				err := n.Put(ctx, key, value, opts...)
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, key)
				case errors.Is(err, ErrOutOfMemory):
					refused++
				case errors.Is(err, ErrRetriesExhausted) && errors.Is(err, ErrOwnershipChanging):
					// not applied: refused while its partition moved, for longer than the routing retries
				default:
					t.Errorf("put %s: %v", key, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked, refused
}

// TestEvictionAllKeysRandom floods a three-node RF 2 cluster with several times what allkeys-random lets
// it hold: every write is acknowledged, no node's copies pass its data budget, the acknowledged keys that
// read back missing are exactly as many as the owners evicted, and
// replicas hold what their owners hold.
func TestEvictionAllKeysRandom(t *testing.T) {
	t.Parallel()
	const maxMemory, valueSize = 2 << 20, 4 << 10
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.MaxMemory, cfg.EvictionPolicy = maxMemory, EvictionAllKeysRandom }))
	c.waitHealthy(20 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acked, refused := flood(t, c, "flood", 750, valueSize, nil)
	if refused > 0 {
		t.Fatalf("%d writes refused under allkeys-random", refused)
	}
	dataBudget := int64(maxMemory) - c.node(0).cfg.OpLogRetainBytes
	slack := int64(len(c.live()) * (valueSize + 64))
	var evicted uint64
	for _, n := range c.live() {
		if held := n.own.store.bytes(); held > dataBudget+slack {
			t.Fatalf("%s holds %d bytes of copies, over its data budget %d", n.id, held, dataBudget)
		}
		evicted += n.own.store.budget.evicted()
	}
	missing := 0
	for _, k := range acked {
		switch _, err := c.node(0).Get(ctx, k); {
		case errors.Is(err, ErrNotFound):
			missing++
		case err != nil:
			t.Fatalf("get %s: %v", k, err)
		}
	}
	t.Logf("%d writes acknowledged, %d evicted, %d missing", len(acked), evicted, missing)
	if missing == 0 || uint64(missing) != evicted {
		t.Fatalf("%d acknowledged keys are missing, and the owners evicted %d", missing, evicted)
	}
	waitFor(t, 20*time.Second, "replicas to hold what their owners hold", func() bool { return replicaDifferences(c) == "" })

}

// TestEvictionIsAWatchEvent evicts a watched key, the only one of its partition with a TTL, under
// volatile-ttl: its watcher sees a WatchEvict event, distinct from a delete and an expiry.
func TestEvictionIsAWatchEvent(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, func(cfg *Config) {
		cfg.Segments, cfg.Partitions = 128, 128
		cfg.MaxMemory, cfg.OpLogRetainBytes, cfg.EvictionPolicy = 4<<20, 1<<20, EvictionVolatileTTL
	})
	ctx := bg(t)
	n := c.node(0)
	watched := "{w}:watched"
	value := []byte(strings.Repeat("f", 200))
	seg := n.layout.KeySegment(watched)
	p := n.layout.SegmentPartition(seg)
	fill := 0
	put := func() error {
		fill++
		return n.Put(ctx, fmt.Sprintf("{w}:fill-%d", fill), value)
	}
	// Fill the partition to just short of its share first, so that the watcher meets few ops.
	for n.own.store.budget.partitionBytes(p)+2*int64(len(value)+100) < n.own.store.budget.share(p, n.own.store.budget.limit()) {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Put(ctx, watched, []byte("soon gone"), WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	events, err := n.Watch(ctx, watched)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i == 10 {
			t.Fatal("10 writes past the partition's share evicted nothing")
		}
		// The write that evicts the watched key is refused: once it is gone, no key of the partition has
		// a TTL, and what its eviction freed is too little.
		err := put()
		if errors.Is(err, ErrOutOfMemory) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Get(ctx, watched); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the partition is full under volatile-ttl, and its only key with a TTL reads %v", err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the watch ended before it saw the key evicted")
			}
			if ev.Kind == WatchEvict && ev.Key == watched {
				return
			}
			if ev.Kind != WatchPut {
				t.Fatalf("the watcher saw %v of %s, want evict", ev.Kind, ev.Key)
			}
		case <-deadline:
			t.Fatal("the watcher did not see the key evicted")
		}
	}
}

// TestEvictionVolatile checks the volatile policies on one node: volatile-ttl evicts keys with a TTL,
// sooner-expiring ones first, and never one without; with no key left that has a TTL, volatile-random
// refuses writes as noeviction does.
func TestEvictionVolatile(t *testing.T) {
	t.Parallel()
	const maxMemory, valueSize = 4 << 20, 2 << 10
	c := startCluster(t, 1, func(cfg *Config) { cfg.MaxMemory, cfg.EvictionPolicy = maxMemory, EvictionVolatileTTL })
	ctx := bg(t)
	n := c.node(0)
	// Half the keys live an hour, half a day, and a few have no TTL.
	ttl := func(i int) time.Duration {
		switch i % 10 {
		case 0:
			return 0
		case 1, 3, 5, 7:
			return time.Hour
		}
		return 24 * time.Hour
	}
	acked, refused := flood(t, c, "ttl", 2500, valueSize, ttl)
	if refused > 0 || n.own.store.budget.evicted() == 0 {
		t.Fatalf("%d refused, %d evicted under volatile-ttl", refused, n.own.store.budget.evicted())
	}
	lost := map[time.Duration]int{}
	for _, k := range acked {
		var w, i int
		fmt.Sscanf(k, "ttl-%d-%d", &w, &i)
		if _, err := n.Get(ctx, k); errors.Is(err, ErrNotFound) {
			lost[ttl(i)]++
		}
	}
	t.Logf("evicted by TTL: %v", lost)
	if lost[0] > 0 || lost[time.Hour] <= lost[24*time.Hour] {
		t.Fatalf("volatile-ttl evicted %v (by TTL): keys without a TTL, or not the sooner-expiring first", lost)
	}

	if err := n.own.store.budget.setPolicy(EvictionVolatileRandom); err != nil {
		t.Fatal(err)
	}
	_, refused = flood(t, c, "plain", 2500, valueSize, nil)
	if refused == 0 {
		t.Fatal("volatile-random refused nothing once only keys without a TTL were left to evict")
	}
}

// TestEvictionAcrossFailover floods a three-node RF 2 cluster under allkeys-lru, kills an owner, and floods
// the two left: every acknowledged key that no owner reported evicted reads back, no key an owner evicted
// reads back (each is written once), and no survivor's copies pass its data budget.
func TestEvictionAcrossFailover(t *testing.T) {
	longScenario(t)
	t.Parallel()
	const maxMemory, valueSize = 2 << 20, 4 << 10
	var mu sync.Mutex
	evicted := map[string]bool{}
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.MaxMemory, cfg.EvictionPolicy, cfg.FailoverTimeout = maxMemory, EvictionAllKeysLRU, 500*time.Millisecond
		cfg.hooks.evicted = func(key string) {
			mu.Lock()
			evicted[key] = true
			mu.Unlock()
		}
	}))
	c.waitHealthy(20 * time.Second)
	before, refused := flood(t, c, "before", 200, valueSize, nil)
	dead := c.node(1).id
	c.kill(1)
	waitFor(t, 30*time.Second, "every partition owned by a survivor", func() bool {
		for _, st := range c.node(0).ClusterMap().Runtime {
			if st.Owner == "" || st.Owner == dead {
				return false
			}
		}
		return true
	})
	after, refusedAfter := flood(t, c, "after", 250, valueSize, nil)
	if refused+refusedAfter > 0 {
		t.Fatalf("%d writes refused under allkeys-lru", refused+refusedAfter)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mu.Lock()
	defer mu.Unlock()
	var present, gone int
	for _, k := range append(before, after...) {
		_, err := served(t, func() ([]byte, error) { return c.node(0).Get(ctx, k) })
		switch {
		case err != nil && !errors.Is(err, ErrNotFound):
			t.Fatalf("get %s: %v", k, err)
		case evicted[k] && err == nil:
			t.Errorf("%s was evicted and reads back", k)
		case !evicted[k] && err != nil:
			t.Errorf("%s was acknowledged, never evicted, and is missing", k)
		case err == nil:
			present++
		default:
			gone++
		}
	}
	t.Logf("%d keys acknowledged: %d read back, %d evicted", len(before)+len(after), present, gone)
	if gone == 0 {
		t.Fatal("the flood evicted nothing")
	}
	dataBudget := int64(maxMemory) - c.node(0).cfg.OpLogRetainBytes
	for _, n := range c.live() {
		if held := n.own.store.bytes(); held > dataBudget+int64(2*(valueSize+64)) {
			t.Errorf("%s holds %d bytes of copies, over its data budget %d", n.id, held, dataBudget)
		}
	}
}

// TestStoreAccountingFollowsHeap checks that what the store counts against MaxMemory stays within 10% of
// what the heap grows by, for strings and every kind of collection, with small elements and large ones.
// It runs alone (not in parallel), so that the heap grows by the store alone; a goroutine an earlier test
// left behind may still free or take a few KiB meanwhile, so a measurement outside the bounds is taken
// twice more, and the median of the three decides.
func TestStoreAccountingFollowsHeap(t *testing.T) {
	within := func(heap, estimate float64) bool { r := estimate / heap; return r >= 0.9 && r <= 1.1 }
	for _, tc := range accountingCases() {
		heap, estimate := measureAccounting(t, tc, 10_000)
		t.Logf("%s: %.0f B/key on the heap, %.0f counted", tc.name, heap, estimate)
		if !within(heap, estimate) {
			heaps := []float64{heap}
			for range 2 {
				h, _ := measureAccounting(t, tc, 10_000)
				heaps = append(heaps, h)
			}
			slices.Sort(heaps)
			t.Logf("%s: measured again: %.0f B/key on the heap", tc.name, heaps)
			heap = heaps[1]
		}
		if !within(heap, estimate) {
			t.Errorf("%s: the store counts %.0f B/key, the heap grew by %.0f (%.2f)", tc.name, estimate, heap, estimate/heap)
		}
	}
}

// redisOOMError is Redis's reply to a write refused under maxmemory.
const redisOOMError = "OOM command not allowed when used memory > 'maxmemory'."
