package zaris

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkPutReplication compares, in one run, Put latency (serial) and throughput (parallel callers) on a
// 3-node cluster with RF 1, RF 2 under Sync and RF 2 under Async. Keys are spread over every partition, so
// most Puts are remote.
func BenchmarkPutReplication(b *testing.B) {
	for _, tc := range []struct {
		name    string
		rf      int
		concern WriteConcern
	}{{"rf1", 1, Async}, {"rf2-sync", 2, Sync}, {"rf2-async", 2, Async}} {
		c := startCluster(b, 3, func(cfg *Config) {
			cfg.Dialer = nil
			cfg.ReplicationFactor = tc.rf
			cfg.WriteConcern = tc.concern
		})
		n := c.node(0)
		ctx := context.Background()
		value := make([]byte, 64)
		b.Run(tc.name+"/latency", func(b *testing.B) {
			i := 0
			for b.Loop() {
				if err := n.Put(ctx, fmt.Sprintf("k%d", i%10000), value); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(tc.name+"/throughput", func(b *testing.B) {
			var next atomic.Int64
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := n.Put(ctx, fmt.Sprintf("k%d", next.Add(1)%10000), value); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		c.stopAll()
	}
}
