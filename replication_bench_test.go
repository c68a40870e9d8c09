package zaris

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris/chaos"
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
		c := startSocketCluster(b, 3, func(cfg *Config) {
			cfg.Dialer = nil
			cfg.ReplicationFactor = tc.rf
			cfg.WriteConcern = tc.concern
		})
		benchPuts(b, tc.name, c.node(0))
		c.stopAll()
	}
}

// BenchmarkPutDiskDurability compares, in one run, Sync Puts on a 3-node RF 2 cluster without a data dir
// and with one under each DiskDurability: what each level's promise costs.
func BenchmarkPutDiskDurability(b *testing.B) {
	for _, tc := range []struct {
		name  string
		disk  bool
		level DiskDurability
	}{{"memory", false, 0}, {"behind", true, DiskBehind}, {"written", true, DiskWritten}, {"synced", true, DiskSynced}} {
		dir := b.TempDir()
		c := startSocketCluster(b, 3, func(cfg *Config) {
			cfg.Dialer = nil
			cfg.ReplicationFactor = 2
			if tc.disk {
				cfg.DataDir = filepath.Join(dir, cfg.Name)
				cfg.DiskDurability = tc.level
			}
		})
		benchPuts(b, tc.name, c.node(0))
		c.stopAll()
	}
}

// benchPuts measures Put latency (serial, with its p50 and p99) and throughput (16 callers per core)
// through n, over 10,000 keys.
func benchPuts(b *testing.B, name string, n *Node) {
	ctx := context.Background()
	value := make([]byte, 64)
	b.Run(name+"/latency", func(b *testing.B) {
		var took []time.Duration
		i := 0
		for b.Loop() {
			start := time.Now()
			if err := n.Put(ctx, fmt.Sprintf("k%d", i%10000), value); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
			i++
		}
		p50, p99, _ := chaos.Percentiles(took)
		b.ReportMetric(float64(p50.Microseconds()), "p50-us")
		b.ReportMetric(float64(p99.Microseconds()), "p99-us")
	})
	b.Run(name+"/throughput", func(b *testing.B) {
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
}
