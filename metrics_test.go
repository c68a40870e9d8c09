package zaris

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/zaris-go/zaris/internal/kv"
)

// scrape is one scrape of a node's /metrics over HTTP, parsed.
type scrape map[string]*dto.MetricFamily

// metricsServer serves n's series at /metrics on loopback, as an embedding service would.
func metricsServer(t *testing.T, n *Node) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.Collector())
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.PanicOnError}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

func scrapeMetrics(t *testing.T, url string) scrape {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// value sums the samples of name whose labels include want (counters, gauges, or a histogram's count).
func (s scrape) value(name string, want ...string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, m := range f.Metric {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

// series counts the samples of name whose labels include want.
func (s scrape) series(name string, want ...string) int {
	n := 0
	if f := s[name]; f != nil {
		for _, m := range f.Metric {
			if hasLabels(m, want) {
				n++
			}
		}
	}
	return n
}

func hasLabels(m *dto.Metric, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range m.Label {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestMetricsFollowTheCluster scrapes /metrics from every node of a 3-node cluster under load: operations
// grow on both sides as many as were made, and after a node is killed its partitions show Degraded, the
// failovers are counted, and the leader times them.
func TestMetricsFollowTheCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *Config) { cfg.ReplicationFactor, cfg.FailoverTimeout = 2, time.Second })
	c.waitHealthy(20 * time.Second)
	urls := make([]string, 3)
	for i := range urls {
		urls[i] = metricsServer(t, c.node(i))
	}
	before := scrapeMetrics(t, urls[0])

	ctx := context.Background()
	const writers, perWriter = 4, 50
	var wg sync.WaitGroup
	var gets atomic.Int64
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				key := fmt.Sprintf("m:%d:%d", w, i)
				if err := c.node(0).Put(ctx, key, []byte("value")); err != nil {
					t.Error(err)
					return
				}
				if _, err := c.node(0).Get(ctx, key); err != nil {
					t.Error(err)
					return
				}
				gets.Add(1)
			}
		})
	}
	wg.Wait()
	const puts = writers * perWriter
	after := scrapeMetrics(t, urls[0])
	for _, op := range []string{"put", "get"} {
		grew := after.value("zaris_operations_total", "side", "caller", "op", op, "status", "Success") -
			before.value("zaris_operations_total", "side", "caller", "op", op, "status", "Success")
		if grew != puts {
			t.Errorf("caller-side %s successes grew by %v; want %d", op, grew, puts)
		}
		if timed := after.value("zaris_operation_duration_seconds", "side", "caller", "op", op); timed < puts {
			t.Errorf("caller-side %s timings = %v; want at least %d", op, timed, puts)
		}
	}
	served := 0.0
	for _, url := range urls {
		served += scrapeMetrics(t, url).value("zaris_operations_total", "side", "owner", "op", "put", "status", "Success")
	}
	if served < puts {
		t.Errorf("owners served %v puts; want at least %d", served, puts)
	}
	if after.value("zaris_store_bytes") <= 0 || after.value("zaris_keys") != float64(c.node(0).own.keyCount()) {
		t.Errorf("store_bytes %v, keys %v (node holds %d)", after.value("zaris_store_bytes"), after.value("zaris_keys"), c.node(0).own.keyCount())
	}
	owned := c.node(0).ClusterMap().OwnedBy(c.node(0).Name())
	if got := after.series("zaris_partition_in_sync_replicas"); got != owned {
		t.Errorf("in-sync series for %d partitions; node 0 owns %d", got, owned)
	}
	if after.series("zaris_replication_lag_revisions") == 0 {
		t.Error("no replication lag series on an owner with replicas")
	}
	// Scrapes read each node's state at a different instant: an election between them (a leader that lost
	// its lease for a moment on a starved machine) may show none or two, so the count must settle on one.
	waitFor(t, 10*time.Second, "exactly one node to report leading the control plane", func() bool {
		leaders := 0.0
		for _, url := range urls {
			leaders += scrapeMetrics(t, url).value("zaris_raft_state", "state", "Leader")
		}
		return leaders == 1
	})

	sum := func(name string) float64 {
		total := 0.0
		for _, url := range urls {
			total += scrapeMetrics(t, url).value(name)
		}
		return total
	}
	movedBefore, copiedBefore := after.value("zaris_partitions_moved_total"), sum("zaris_move_sent_bytes_total")
	c.add(3) // a fourth node: partitions move to it, copied whole
	c.waitStable(20 * time.Second)
	moved := scrapeMetrics(t, urls[0]).value("zaris_partitions_moved_total") - movedBefore
	if copied := sum("zaris_move_sent_bytes_total") - copiedBefore; moved == 0 || copied <= 0 {
		t.Errorf("after a join: %v partitions moved, %v bytes copied", moved, copied)
	}

	victim := 1
	if c.leader() == victim {
		victim = 2
	}
	dead := c.node(victim).Name()
	lost := c.currentMap().OwnedBy(dead)
	failoversBefore := after.value("zaris_partition_failovers_total")
	termBefore := c.raftTerm()
	c.kill(victim)
	c.waitFailedOver(dead, 20*time.Second)
	waitFor(t, 10*time.Second, "a scrape showing Degraded partitions and the failovers", func() bool {
		s := scrapeMetrics(t, urls[0])
		return s.value("zaris_partitions", "health", "Degraded") > 0 &&
			s.value("zaris_partition_failovers_total")-failoversBefore >= float64(lost) &&
			s.value("zaris_members", "status", "failed") == 1
	})
	timed := 0.0
	for i, url := range urls {
		if i != victim {
			timed += scrapeMetrics(t, url).value("zaris_failover_duration_seconds")
		}
	}
	// A decision whose commit raft reported as lost with the leadership may still apply, in the next term,
	// without its leader learning so: only a failover under one term must have every decision timed.
	switch term := c.raftTerm(); {
	case term == termBefore && timed < float64(lost):
		t.Errorf("%v failovers timed by the leader in term %d; want %d", timed, term, lost)
	case timed == 0:
		t.Errorf("no failover timed across terms %d to %d; want up to %d", termBefore, term, lost)
	}
}

// TestHistogramBuckets checks where durations land and that the cumulative counts add up.
func TestHistogramBuckets(t *testing.T) {
	var h histogram
	for _, d := range []time.Duration{0, 25 * time.Microsecond, 26 * time.Microsecond, time.Millisecond, time.Minute} {
		h.observe(d)
	}
	count, sum, buckets := h.cumulative()
	if count != 5 {
		t.Fatalf("count = %d; want 5", count)
	}
	if want := (time.Minute + time.Millisecond + 51*time.Microsecond).Seconds(); sum < want-1e-9 || sum > want+1e-9 {
		t.Errorf("sum = %v; want %v", sum, want)
	}
	for bound, want := range map[float64]uint64{0.000025: 2, 0.00005: 3, 0.001: 4, 10: 4} {
		if buckets[bound] != want {
			t.Errorf("bucket %v = %d; want %d", bound, buckets[bound], want)
		}
	}
}

// TestMetricsOffCountsNoOperations: with DisableMetrics, the operation series are absent and the state
// series stay.
func TestMetricsOffCountsNoOperations(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, func(cfg *Config) { cfg.DisableMetrics = true })
	n := c.node(0)
	if err := n.Put(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s := scrapeMetrics(t, metricsServer(t, n))
	if s.series("zaris_operations_total") != 0 {
		t.Error("operations counted with metrics off")
	}
	if s.value("zaris_keys") != 1 || s.value("zaris_partitions_owned") == 0 {
		t.Errorf("keys %v, partitions owned %v; want 1 and all", s.value("zaris_keys"), s.value("zaris_partitions_owned"))
	}
	if !strings.HasPrefix(s["zaris_keys"].GetHelp(), "Keys held") {
		t.Errorf("help = %q", s["zaris_keys"].GetHelp())
	}
}

// BenchmarkMetricsCost compares remote Get and Put with the operation metrics on and off (Config.
// DisableMetrics), on two 2-node loopback clusters that run side by side; each sub-benchmark pair runs
// back to back, so the machine's drift touches both alike.
func BenchmarkMetricsCost(b *testing.B) {
	ctx := context.Background()
	value := make([]byte, 64)
	type side struct {
		name         string
		caller       *Node
		remoteKey    string
		remoteSerial []string
	}
	var sides []side
	for _, off := range []bool{false, true} {
		c := startSocketCluster(b, 2, func(cfg *Config) {
			cfg.Dialer = nil // the plain dialer: fault injection is for tests, not for measuring
			cfg.DisableMetrics = off
		})
		s := side{name: "metrics", caller: c.node(0)}
		if off {
			s.name = "off"
		}
		owner := c.node(1)
		for i := range 64 {
			key := c.keyOwnedBy("bench-"+strconv.Itoa(i)+"-", owner)
			if err := owner.Put(ctx, key, value); err != nil {
				b.Fatal(err)
			}
			s.remoteSerial = append(s.remoteSerial, key)
		}
		s.remoteKey = s.remoteSerial[0]
		sides = append(sides, s)
	}
	for _, op := range []string{"get", "put"} {
		for _, s := range sides {
			b.Run(op+"/"+s.name, func(b *testing.B) {
				for b.Loop() {
					var err error
					if op == "get" {
						_, err = s.caller.Get(ctx, s.remoteKey)
					} else {
						err = s.caller.Put(ctx, s.remoteKey, value)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		for _, s := range sides {
			b.Run(op+"-parallel/"+s.name, func(b *testing.B) {
				b.SetParallelism(16) // 32 goroutines on 2 cores
				var next atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					key := s.remoteSerial[next.Add(1)%uint64(len(s.remoteSerial))]
					for pb.Next() {
						var err error
						if op == "get" {
							_, err = s.caller.Get(ctx, key)
						} else {
							err = s.caller.Put(ctx, key, value)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkOpObserve is what counting and timing one operation costs, alone and from every core at once.
func BenchmarkOpObserve(b *testing.B) {
	m := newOpMetrics()
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			m.caller.observe(kv.OpGet, StatusSuccess, nil, 80*time.Microsecond)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.caller.observe(kv.OpGet, StatusSuccess, nil, 80*time.Microsecond)
			}
		})
	})
}
