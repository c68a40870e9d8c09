package zaris

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkFormation measures how long a new 3-node cluster on loopback sockets takes to form: from the first
// Join to a map every node holds, under a leader they agree on. Each iteration then closes the cluster,
// which is not counted. "test" uses the test timings (LocalTiming); "default" uses DefaultConfig's
// (LANTiming).
func BenchmarkFormation(b *testing.B) {
	b.Run("test", func(b *testing.B) { benchmarkFormation(b, nil) })
	b.Run("default", func(b *testing.B) {
		benchmarkFormation(b, func(cfg *Config) { cfg.Timing = LANTiming() })
	})
}

func benchmarkFormation(b *testing.B, timings func(*Config)) {
	var times []time.Duration
	for b.Loop() {
		start := time.Now()
		c := startSocketCluster(b, 3, func(cfg *Config) {
			cfg.Dialer = nil
			if timings != nil {
				timings(cfg)
			}
		})
		times = append(times, time.Since(start))
		b.StopTimer()
		c.stopAll()
		b.StartTimer()
	}
	slices.Sort(times)
	var sum time.Duration
	for _, d := range times {
		sum += d
	}
	b.ReportMetric(float64(sum)/float64(len(times))/1e6, "ms-mean")
	b.ReportMetric(float64(times[len(times)-1])/1e6, "ms-max")
}
