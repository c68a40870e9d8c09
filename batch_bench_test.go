package zaris

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkBatch compares, in one run on a 4-node cluster, GetMany of 1,000 keys with a loop of 1,000
// single Gets of the same keys and with one single Get of a remote key. The caller is one of the owners,
// so about a quarter of the keys are its own.
func BenchmarkBatch(b *testing.B) {
	// The plain dialer: fault injection is for tests, not for measuring.
	c := startSocketCluster(b, 4, func(cfg *Config) { cfg.Dialer = nil })
	ctx := context.Background()
	caller := c.node(0)
	keys := make([]string, 1000)
	entries := make([]KeyValue, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-%d", i)
		entries[i] = KeyValue{Key: keys[i], Value: make([]byte, 64)}
	}
	results, err := caller.PutMany(ctx, entries)
	if err != nil {
		b.Fatal(err)
	}
	failIfAny(b, results)
	remote := keys[0]
	for i := 1; c.owner(remote) == caller; i++ {
		remote = keys[i]
	}

	b.Run("get-single", func(b *testing.B) {
		for b.Loop() {
			if _, err := caller.Get(ctx, remote); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get-loop-1000", func(b *testing.B) {
		for b.Loop() {
			for _, key := range keys {
				if _, err := caller.Get(ctx, key); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("get-many-1000", func(b *testing.B) {
		for b.Loop() {
			results, err := caller.GetMany(ctx, keys)
			if err != nil {
				b.Fatal(err)
			}
			failIfAny(b, results)
		}
	})
}

func failIfAny(b *testing.B, results []BatchResult) {
	for _, r := range results {
		if r.Err != nil {
			b.Fatalf("%s %q: %v", r.Op, r.Key, r.Err)
		}
	}
}
