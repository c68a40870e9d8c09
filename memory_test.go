package zaris

import (
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
	cfg.OpLogRetainBytes = 64 << 20
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("MaxMemory under twice the op log's bound: %v, want ErrInvalidConfig", err)
	}
	cfg.OpLogRetainBytes, cfg.EvictionPolicy = 0, "allkeys-lru"
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
	const maxMemory, valueSize = 4 << 20, 2 << 10
	c := startRESPCluster(t, 3, replicated(2, func(cfg *Config) { cfg.MaxMemory = maxMemory }))
	c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	dataBudget := int64(maxMemory) - c.node(0).cfg.OpLogRetainBytes
	value := []byte(strings.Repeat("v", valueSize))

	var mu sync.Mutex
	var acked []string
	refused := 0
	var wg sync.WaitGroup
	for w, n := range c.live() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				key := fmt.Sprintf("flood-%d-%d", w, i)
				err := n.Put(ctx, key, value)
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, key)
				case errors.Is(err, ErrOutOfMemory):
					refused++
				default:
					t.Errorf("put %s: %v", key, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// 9,000 writes of 2 KiB against about 3 x 3.5 MiB / 2 copies of room: most must be refused.
	if refused < 3000 || len(acked) < 1000 {
		t.Fatalf("%d writes acknowledged, %d refused for want of memory: the bound did not bite as it should", len(acked), refused)
	}
	t.Logf("%d writes acknowledged, %d refused; data budget %d a node", len(acked), refused, dataBudget)
	// Writes to one partition admitted at the same instant may pass its share together: at most one
	// write per writer.
	slack := int64(len(c.live()) * (valueSize + 64))
	for _, n := range c.live() {
		held := n.store.bytes()
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
	if err == nil || err.Error() != respOOMError {
		t.Fatalf("SET past maxmemory over RESP: %v, want %q", err, respOOMError)
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
	if err := rdb.Set(ctx, "big", big, 0).Err(); err == nil || err.Error() != respOOMError {
		t.Fatalf("SET of 3 MiB under maxmemory 2 MiB: %v, want -OOM", err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "big", big, 0).Err(); err != nil {
		t.Fatalf("SET with the bound lifted: %v", err)
	}
	for _, bad := range [][2]string{{"maxmemory", "1kb"}, {"maxmemory", "lots"}, {"maxmemory-policy", "allkeys-lru"}, {"no-such-option", "1"}} {
		if err := rdb.ConfigSet(ctx, bad[0], bad[1]).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR ") {
			t.Fatalf("CONFIG SET %s %s: %v, want an ERR reply", bad[0], bad[1], err)
		}
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "100mb").Err(); err != nil {
		t.Fatal(err)
	}
	if got := rdb.ConfigGet(ctx, "maxmemory").Val()["maxmemory"]; got != fmt.Sprint(100<<20) {
		t.Fatalf("CONFIG GET maxmemory after CONFIG SET 100mb = %q", got)
	}
}
