package zaris

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/zaris-go/zaris/chaos"
)

// BenchmarkWatchLatency measures write-to-delivery: a Put made on one node, of a key owned by a second, until
// a Watch on a third delivers it. Three in-process nodes on loopback sockets, RF 2 under Sync (the delivery
// waits, as the Put does, for the in-sync replica), a 64-byte value; one write at a time. "put" is the Put
// alone in the same cluster, before any watch, for comparison.
func BenchmarkWatchLatency(b *testing.B) {
	c := startSocketCluster(b, 3, replicated(2, func(cfg *Config) { cfg.Dialer = nil }))
	writer, owner, watcherNode := c.node(0), c.node(1), c.node(2)
	key := c.keyOwnedBy("bench-watch", owner)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	value := make([]byte, 64)
	b.Run("put", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			if err := writer.Put(ctx, key, value); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
		}
		reportLatency(b, took)
	})
	events, err := watcherNode.Watch(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("put-to-delivery", func(b *testing.B) {
		var took []time.Duration
		i := 0
		for b.Loop() {
			i++
			copy(value, strconv.Itoa(i)+";")
			start := time.Now()
			if err := writer.Put(ctx, key, value); err != nil {
				b.Fatal(err)
			}
			for ev := range events {
				if ev.Kind == WatchPut && string(ev.Value) == string(value) {
					break
				}
			}
			took = append(took, time.Since(start))
		}
		reportLatency(b, took)
	})
}

func reportLatency(b *testing.B, took []time.Duration) {
	p50, p99, _ := chaos.Percentiles(took)
	b.ReportMetric(float64(p50)/float64(time.Microsecond), "p50-µs")
	b.ReportMetric(float64(p99)/float64(time.Microsecond), "p99-µs")
}
