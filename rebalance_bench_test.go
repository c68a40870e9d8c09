package zaris

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkCutover measures how long partitions stop taking writes while they move. Each iteration adds a
// fourth node to a 3-node cluster (RF 2, Sync) and then has it leave gracefully, while one writer per
// partition writes through a node that stays. It reports the owners' sealed windows (from the seal until
// the owner applied the settled move) and the latency of every write meanwhile: its tail is the cut-over as
// clients see it, redirect and retry included.
func BenchmarkCutover(b *testing.B) {
	c := startSocketCluster(b, 3, elastic(func(cfg *Config) { cfg.Dialer = nil }))
	layout := c.currentMap().Layout()
	client := c.node(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var latencies []time.Duration
	var failures int
	for p := range layout.Partitions {
		key := keyInPartition(layout, "bench", p)
		wg.Go(func() {
			ctx := context.Background()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				err := client.Put(ctx, key, []byte(strconv.Itoa(i)))
				mu.Lock()
				if err != nil {
					failures++
				} else {
					latencies = append(latencies, time.Since(start))
				}
				mu.Unlock()
			}
		})
	}
	var nodes []*Node
	for b.Loop() {
		n := c.add(3)
		nodes = append(nodes, n)
		c.waitStable(60 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := n.Leave(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		c.kill(len(c.cfgs) - 1)
		c.waitStable(60 * time.Second)
	}
	close(stop)
	wg.Wait()

	var sealed []time.Duration
	for _, n := range append(nodes, c.live()...) {
		sealed = append(sealed, n.CutoverStats().Sealed...)
	}
	report := func(ds []time.Duration, name string) {
		if len(ds) == 0 {
			return
		}
		slices.Sort(ds)
		at := func(q float64) float64 {
			return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))]) / float64(time.Millisecond)
		}
		b.ReportMetric(at(0.5), name+"-p50-ms")
		b.ReportMetric(at(0.99), name+"-p99-ms")
		b.ReportMetric(float64(ds[len(ds)-1])/float64(time.Millisecond), name+"-max-ms")
	}
	var decisions uint64
	for _, n := range append(nodes, c.live()...) {
		decisions += n.ReplicationStats().InSyncDecisions
	}
	b.ReportMetric(float64(decisions), "insync-decisions")
	report(sealed, "sealed")
	report(latencies, "write")
	b.ReportMetric(float64(len(sealed))/float64(b.N), "cutovers/op")
	b.ReportMetric(float64(failures), "failed-writes")
}
