package zaris

import (
	"bytes"
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// BenchmarkMemoryPerKey writes 3M puts of 64-byte values over 1M random keys (about 950k distinct), from
// 16 goroutines, and reports the live heap per distinct key after a full collection, with the store's own
// estimate and the bytes the op log counts. Run it with -benchtime=1x: each case builds its own cluster.
//
//   - rf1: one node, the default op log bound;
//   - rf1-oplog256MiB: one node, the op log bound at 256 MiB;
//   - rf2: two nodes in this process, each key on both; the heap of both per key.
func BenchmarkMemoryPerKey(b *testing.B) {
	for _, tc := range []struct {
		name  string
		nodes int
		tweak func(*Config)
	}{
		{"rf1", 1, nil},
		{"rf1-oplog256MiB", 1, func(cfg *Config) { cfg.OpLogRetainBytes = 256 << 20 }},
		{"rf2", 2, func(cfg *Config) { cfg.ReplicationFactor = 2 }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				measureMemoryPerKey(b, tc.nodes, tc.tweak)
			}
		})
	}
}

func measureMemoryPerKey(b *testing.B, nodes int, tweak func(*Config)) {
	const space, writes = 1_000_000, 3_000_000
	before := liveHeap()
	c := startCluster(b, nodes, tweak)
	defer c.stopAll()
	c.waitHealthy(20 * time.Second)
	n := c.node(0)
	ctx := context.Background()
	value := make([]byte, 64)
	const writers = 16
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for range writes / writers {
				if err := n.Put(ctx, "key:"+strconv.Itoa(rng.IntN(space)), value); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	waitOpLogSettled(c)
	keys := float64(n.own.keyCount())
	if nodes > 1 {
		keys = float64(c.node(1).own.keyCount()) // a replica holds every key too; count them once
	}
	heap := float64(liveHeap() - before)
	var store, oplog float64
	for _, n := range c.live() {
		store += float64(n.own.store.bytes())
		oplog += float64(n.own.repl.oplogBytes())
	}
	b.ReportMetric(heap/keys, "heap-B/key")
	b.ReportMetric(store/keys, "store-est-B/key")
	b.ReportMetric(oplog/keys, "oplog-B/key")
	b.ReportMetric(keys, "keys")
}

// waitOpLogSettled waits until the op logs of c's nodes hold the same bytes over one sweep of their trim
// (trimOpLog): the heap is then what the nodes keep once the writes stop.
func waitOpLogSettled(c *testCluster) {
	oplog := func() (total int64) {
		for _, n := range c.live() {
			total += n.own.repl.oplogBytes()
		}
		return total
	}
	for prev := int64(-1); ; {
		cur := oplog()
		if cur == prev {
			return
		}
		prev = cur
		time.Sleep(2 * opLogTrimInterval)
	}
}

// liveHeap is the heap that survives a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkPutEvicting compares Put on one node without a memory bound and under one that allkeys-random
// keeps by evicting steadily: 64-byte values over 1M random keys, from parallel goroutines, after a fill
// that takes the bounded node to its bound. It reports the evictions per put.
func BenchmarkPutEvicting(b *testing.B) {
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
	}{
		{"unbounded", nil},
		{"allkeys-random-16MiB", func(cfg *Config) { cfg.MaxMemory, cfg.EvictionPolicy = 16<<20, EvictionAllKeysRandom }},
		{"allkeys-lru-16MiB", func(cfg *Config) { cfg.MaxMemory, cfg.EvictionPolicy = 16<<20, EvictionAllKeysLRU }},
		{"allkeys-lfu-16MiB", func(cfg *Config) { cfg.MaxMemory, cfg.EvictionPolicy = 16<<20, EvictionAllKeysLFU }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := startCluster(b, 1, tc.tweak)
			n := c.node(0)
			ctx := context.Background()
			value := make([]byte, 64)
			for i := range 300_000 {
				if err := n.Put(ctx, "key:"+strconv.Itoa(i), value); err != nil {
					b.Fatal(err)
				}
			}
			evicted := n.own.store.budget.evicted()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := n.Put(ctx, "key:"+strconv.Itoa(rand.IntN(1_000_000)), value); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(n.own.store.budget.evicted()-evicted)/float64(b.N), "evictions/op")
		})
	}
}

// BenchmarkStoreAccounting compares, per kind of value, the heap a bare store takes for 50,000 keys with
// the store's own estimate of it, which MaxMemory bounds. Run it with -benchtime=1x.
func BenchmarkStoreAccounting(b *testing.B) {
	for _, tc := range accountingCases() {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				heap, estimate := measureAccounting(b, tc, 50_000)
				b.ReportMetric(heap, "heap-B/key")
				b.ReportMetric(estimate, "estimate-B/key")
				b.ReportMetric(estimate/heap, "estimate/heap")
			}
		})
	}
}

// accountingCase is one kind of value whose memory the store's estimate is checked against.
type accountingCase struct {
	name string
	op   transport.Op
	req  kv.Request
}

// accountingCases are strings and each kind of collection, with small elements and with 1 KiB ones.
func accountingCases() []accountingCase {
	kib := strings.Repeat("k", 1024)
	args := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i := range s {
			out[i] = []byte(s[i])
		}
		return out
	}
	return []accountingCase{
		{"string-64B", kv.OpPut, kv.Request{Value: make([]byte, 64)}},
		{"string-1KiB", kv.OpPut, kv.Request{Value: make([]byte, 1024)}},
		{"hash-4-fields", kv.OpHSet, kv.Request{Args: args("f1", "value-one", "f2", "value-two", "f3", "value-three", "f4", "4")}},
		{"set-4-members", kv.OpSAdd, kv.Request{Args: args("m1", "member-two", "member-three", "m4")}},
		{"list-4-items", kv.OpRPush, kv.Request{Args: args("item-one", "item-two", "item-three", "4")}},
		{"zset-4-members", kv.OpZAdd, kv.Request{Args: args("1", "a", "2", "member-b", "3", "member-c", "4", "d")}},
		{"hash-4-fields-1KiB", kv.OpHSet, kv.Request{Args: args("f1", kib, "f2", kib, "f3", kib, "f4", kib)}},
		{"set-4-members-1KiB", kv.OpSAdd, kv.Request{Args: args("1"+kib, "2"+kib, "3"+kib, "4"+kib)}},
		{"list-4-items-1KiB", kv.OpRPush, kv.Request{Args: args(kib, kib, kib, kib)}},
		{"zset-4-members-1KiB", kv.OpZAdd, kv.Request{Args: args("1", "1"+kib, "2", "2"+kib, "3", "3"+kib, "4", "4"+kib)}},
	}
}

// measureAccounting stores keys values of tc in a fresh store and returns, per key, what the heap grew by
// and what the store's estimate counts.
func measureAccounting(tb testing.TB, tc accountingCase, keys int) (heap, estimate float64) {
	layout, _ := NewLayout(64, 64) // hundreds of keys a segment, as a store of millions has with 1,024
	lim := opLimits{maxValueSize: 1 << 20, maxReplyBytes: 1 << 20, layout: layout}
	s := newStore(layout.Segments, systemClock{})
	before := liveHeap() // after the empty store, whose segments' tables are not any key's
	for i := range keys {
		req := tc.req
		req.Key, req.Value, req.Args = "key:"+strconv.Itoa(i), bytes.Clone(req.Value), kv.CloneValues(req.Args) // as a request arrives
		if r := s.applyExclusive(layout.KeySegment(req.Key), &keyOps[tc.op], req, lim); r.Status != StatusSuccess {
			tb.Fatal(r.Status)
		}
	}
	heap = float64(liveHeap()-before) / float64(keys)
	estimate = float64(s.bytes()) / float64(keys)
	runtime.KeepAlive(s)
	return heap, estimate
}
