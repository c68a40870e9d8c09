package zaris

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zaris-go/zaris/chaos"
)

// BenchmarkFailover measures failover time: from killing an owner to the first write acknowledged in each of
// its partitions under a new epoch, with one Sync writer per partition running throughout. Each iteration
// kills the owner of partition 0 (never the control-plane leader, whose loss adds an election), measures,
// restarts it and waits until every partition is Healthy again. "test" uses the test timings (LocalTiming,
// FailoverTimeout 500 ms); "default" uses DefaultConfig's (LANTiming, FailoverTimeout 10 s).
func BenchmarkFailover(b *testing.B) {
	b.Run("test", func(b *testing.B) {
		benchmarkFailover(b, func(cfg *Config) { cfg.FailoverTimeout = 500 * time.Millisecond })
	})
	b.Run("default", func(b *testing.B) {
		benchmarkFailover(b, func(cfg *Config) {
			cfg.Timing, cfg.FailoverTimeout = LANTiming(), DefaultConfig().FailoverTimeout
		})
	})
}

func benchmarkFailover(b *testing.B, timings func(*Config)) {
	acks := newAckRecorder()
	c := startSocketCluster(b, 5, replicated(2, func(cfg *Config) {
		cfg.Dialer = nil
		cfg.HealCooldown = 200 * time.Millisecond
		cfg.hooks.observeAck = acks.observe
		timings(cfg)
	}))
	layout := c.currentMap().Layout()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range layout.Partitions {
		key := keyInPartition(layout, "fo", p)
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				live := c.live()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				live[i%len(live)].Put(ctx, key, []byte(strconv.Itoa(i))) // failures are expected while it fails over
				cancel()
			}
		})
	}
	var times []time.Duration
	for b.Loop() {
		m := c.currentMap()
		victim := c.indexOf(m.Runtime[0].Owner)
		if victim == c.leader() {
			victim = c.indexOf(m.Runtime[1].Owner) // partitions 0 and 1 never share an owner
		}
		owned := map[int]uint64{}
		for p, st := range m.Runtime {
			if st.Owner == c.node(victim).id {
				owned[p] = st.Epoch
			}
		}
		at := time.Now()
		c.kill(victim)
		waitFor(b, 30*time.Second, "a write acknowledged under a new epoch in each of its partitions", func() bool {
			for p, epoch := range owned {
				if _, ok := acks.failoverTime(p, epoch, at); !ok {
					return false
				}
			}
			return true
		})
		for p, epoch := range owned {
			d, _ := acks.failoverTime(p, epoch, at)
			times = append(times, d)
		}
		c.restart(victim)
		c.waitHealthy(30 * time.Second)
	}
	close(stop)
	wg.Wait()
	p50, p99, worst := chaos.Percentiles(times)
	b.ReportMetric(float64(p50)/float64(time.Millisecond), "failover-p50-ms")
	b.ReportMetric(float64(p99)/float64(time.Millisecond), "failover-p99-ms")
	b.ReportMetric(float64(worst)/float64(time.Millisecond), "failover-max-ms")
}

// indexOf returns the index of the live node named id, or -1.
func (c *testCluster) indexOf(id NodeID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if n != nil && n.id == id {
			return i
		}
	}
	return -1
}
