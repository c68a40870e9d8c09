package zaris

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/transport"
)

// TestMain runs the parallel tests at least four at a time unless -test.parallel says otherwise: they
// mostly wait on timers and the network, so two at a time left most of two cores idle.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	// A gossip probe under way when its member shuts down ends on its own once its timeouts pass; gossip's
	// shutdown does not wait for it. Every other gossip goroutine must be gone.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}

func bg(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// randomKeys returns n distinct keys, a third of them sharing a few hash tags.
func randomKeys(rng *rand.Rand, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		if i%3 == 0 {
			keys[i] = fmt.Sprintf("{user%d}:field%d", rng.IntN(20), i)
		} else {
			keys[i] = fmt.Sprintf("key-%d-%x", i, rng.Uint64())
		}
	}
	return keys
}

// TestOneHop checks, by counting requests at both ends, that every operation from every node reaches the
// key's owner directly: remote keys cost exactly one request to the owner, local keys none, and no node is
// ever redirected.
func TestOneHop(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("nodes-%d", size), func(t *testing.T) {
			c := startCluster(t, size, nil)
			ctx := bg(t)
			nodes := c.live()
			rng := rand.New(rand.NewPCG(uint64(size), 42))
			keys := randomKeys(rng, 1200)

			wantServed := map[NodeID]uint64{}
			wantLocal := map[NodeID]uint64{}
			wantSent := map[[2]NodeID]uint64{}
			for i, key := range keys {
				caller := nodes[rng.IntN(len(nodes))]
				owner := c.owner(key)
				value := []byte(fmt.Sprintf("v%d", i))
				if err := caller.Put(ctx, key, value); err != nil {
					t.Fatalf("put %q from %s: %v", key, caller.id, err)
				}
				reader := nodes[rng.IntN(len(nodes))]
				got, err := reader.Get(ctx, key)
				if err != nil || !bytes.Equal(got, value) {
					t.Fatalf("get %q from %s = %q, %v; want %q", key, reader.id, got, err, value)
				}
				for _, n := range []*Node{caller, reader} {
					if n == owner {
						wantLocal[n.id]++
					} else {
						wantServed[owner.id]++
						wantSent[[2]NodeID{n.id, owner.id}]++
					}
				}
			}
			for _, n := range nodes {
				s := n.Stats()
				if s.RequestsServed != wantServed[n.id] || s.LocalOps != wantLocal[n.id] {
					t.Errorf("%s served %d remote and %d local; want %d and %d",
						n.id, s.RequestsServed, s.LocalOps, wantServed[n.id], wantLocal[n.id])
				}
				for _, to := range nodes {
					if got, want := s.RequestsSent[to.id], wantSent[[2]NodeID{n.id, to.id}]; got != want {
						t.Errorf("%s sent %d requests to %s; want %d", n.id, got, to.id, want)
					}
				}
				if s.RedirectsSent != 0 || s.RedirectsReceived != 0 || s.Retries != 0 {
					t.Errorf("%s: redirects sent %d, received %d, retries %d; want none",
						n.id, s.RedirectsSent, s.RedirectsReceived, s.Retries)
				}
			}
		})
	}
}

// TestHashTagsColocate checks that keys sharing a hash tag land on one owner.
func TestHashTagsColocate(t *testing.T) {
	c := startCluster(t, 3, nil)
	ctx := bg(t)
	owner := c.owner("{cart:9}")
	before := owner.Stats()
	caller := c.live()[0]
	callerBefore := caller.Stats()
	for i := 0; i < 50; i++ {
		key := fmt.Sprintf("{cart:9}:item:%d", i)
		if c.owner(key) != owner {
			t.Fatalf("key %q placed apart from its hash tag", key)
		}
		if err := caller.Put(ctx, key, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	after := owner.Stats()
	served := after.RequestsServed - before.RequestsServed + after.LocalOps - before.LocalOps
	if owner == caller {
		served = after.LocalOps - callerBefore.LocalOps
	}
	if served != 50 {
		t.Fatalf("owner %s served %d of 50 tagged writes", owner.id, served)
	}
}

// installStaleTable gives n a routing table older than its map, in which partition p is owned by wrong.
func installStaleTable(n *Node, p int, wrong NodeID) {
	stale := n.ClusterMap().clone()
	stale.Index--
	stale.Runtime[p].Owner = wrong
	n.client.router.mu.Lock()
	defer n.client.router.mu.Unlock()
	n.client.router.table.Store(n.client.router.build(n.client.router.current(), stale))
}

// TestStaleMapRedirectsOnce checks the reactive path: a node whose table points a partition at the wrong
// node gets exactly one Moved, refreshes once, retries once and succeeds.
func TestStaleMapRedirectsOnce(t *testing.T) {
	c := startCluster(t, 3, nil)
	ctx := bg(t)
	nodes := c.live()
	caller := nodes[0]
	// A key owned by neither the caller nor the node the stale table will name.
	var key string
	var owner, wrong *Node
	for i := 0; ; i++ {
		key = fmt.Sprintf("stale-%d", i)
		owner = c.owner(key)
		if owner != caller {
			break
		}
	}
	for _, n := range nodes {
		if n != caller && n != owner {
			wrong = n
		}
	}
	if err := caller.Put(ctx, key, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	installStaleTable(caller, caller.layout.KeyPartition(key), wrong.id)
	cb, wb, ob := caller.Stats(), wrong.Stats(), owner.Stats()

	got, err := caller.Get(ctx, key)
	if err != nil || string(got) != "v1" {
		t.Fatalf("get through stale map = %q, %v", got, err)
	}
	ca, wa, oa := caller.Stats(), wrong.Stats(), owner.Stats()
	checks := []struct {
		what      string
		got, want uint64
	}{
		{"redirects received", ca.RedirectsReceived - cb.RedirectsReceived, 1},
		{"reactive refreshes", ca.Refreshes.React - cb.Refreshes.React, 1},
		{"retries", ca.Retries - cb.Retries, 1},
		{"redirects sent by the wrong node", wa.RedirectsSent - wb.RedirectsSent, 1},
		{"requests served by the owner", oa.RequestsServed - ob.RequestsServed, 1},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %d; want %d", ch.what, ch.got, ch.want)
		}
	}
}

// TestRetriesExhaustedNamesPartition checks that redirects are bounded and the error names the partition.
func TestRetriesExhaustedNamesPartition(t *testing.T) {
	c := startCluster(t, 2, func(cfg *Config) { cfg.MaxRetries = 2 })
	ctx := bg(t)
	a, b := c.node(0), c.node(1)
	// a owns the key's partition, but a's committed view is altered to say b does. b redirects to a, a
	// redirects to itself's idea of the owner (b) with a map no newer than its table, so no refresh helps.
	key := c.keyOwnedBy("bounce", a)
	p := a.layout.KeyPartition(key)
	m := a.ClusterMap().clone()
	m.Runtime[p].Owner = b.id
	a.ctl.fsm.current.Store(m) // a's committed view now says b owns p: a redirects to b
	installStaleTable(a, p, b.id)
	_, err := a.Get(ctx, key)
	var rerr *RoutingError
	if !errors.As(err, &rerr) || !errors.Is(err, ErrRetriesExhausted) || !errors.Is(err, ErrMoved) {
		t.Fatalf("err = %v; want a RoutingError matching ErrRetriesExhausted and ErrMoved", err)
	}
	if rerr.Partition != p || rerr.Attempts != 3 {
		t.Fatalf("RoutingError = %+v; want partition %d after 3 attempts", rerr, p)
	}
}

// TestMapConvergesAndSurvivesLeaderDeath checks that every node reaches the same map version, that the death
// of the leader of three voters elects a new one, and that the survivors keep reading and writing both the
// cluster map (a node joins afterwards) and the keys they own.
func TestMapConvergesAndSurvivesLeaderDeath(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	ctx := bg(t)
	version := c.node(0).ClusterMap().Version
	for _, n := range c.live() {
		if m := n.ClusterMap(); m.Version != version || m.Version == 0 {
			t.Fatalf("%s has map version %d; want %d", n.id, m.Version, version)
		}
	}
	old := c.leader()
	if old < 0 {
		t.Fatal("no leader")
	}
	c.kill(old)
	waitFor(t, 10*time.Second, "a new leader", func() bool {
		l := c.leader()
		return l >= 0 && l != old
	})

	joined := c.add(3)
	waitFor(t, 10*time.Second, "the new member in every survivor's map", func() bool {
		for _, n := range c.live() {
			if _, ok := n.ClusterMap().Nodes[joined.id]; !ok {
				return false
			}
		}
		return true
	})

	rng := rand.New(rand.NewPCG(7, 7))
	written := 0
	for _, key := range randomKeys(rng, 600) {
		if c.owner(key) == nil { // owned by the dead node: failover is not part of this test
			continue
		}
		for _, n := range c.live() {
			value := []byte(string(n.id) + key)
			if err := n.Put(ctx, key, value); err != nil {
				t.Fatalf("put %q from %s: %v", key, n.id, err)
			}
			if got, err := n.Get(ctx, key); err != nil || !bytes.Equal(got, value) {
				t.Fatalf("get %q from %s = %q, %v", key, n.id, got, err)
			}
			written++
		}
	}
	if written == 0 {
		t.Fatal("no key owned by a survivor")
	}
}

func TestTTLExpiresAndIsReclaimed(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	c := startCluster(t, 2, func(cfg *Config) {
		cfg.Clock = clock
		cfg.ReapInterval = 5 * time.Millisecond
	})
	ctx := bg(t)
	a := c.node(0)
	keys := randomKeys(rand.New(rand.NewPCG(1, 2)), 40)
	for _, key := range keys {
		if err := a.Put(ctx, key, []byte("short"), WithTTL(10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Put(ctx, "forever", []byte("stays")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(9 * time.Second)
	for _, key := range keys {
		if _, err := a.Get(ctx, key); err != nil {
			t.Fatalf("get %q before expiry: %v", key, err)
		}
	}
	clock.Advance(time.Second)
	for _, key := range keys {
		if _, err := a.Get(ctx, key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get %q after expiry: err = %v; want ErrNotFound", key, err)
		}
		if existed, err := a.Delete(ctx, key); existed || err != nil {
			t.Fatalf("delete expired %q = %v, %v; want false, nil", key, existed, err)
		}
	}
	// Deleted above or not, every expired entry is reclaimed in the background; only "forever" remains.
	waitFor(t, 5*time.Second, "expired entries reclaimed", func() bool {
		total := 0
		for _, n := range c.live() {
			total += n.own.store.len()
		}
		return total == 1
	})
	if got, err := a.Get(ctx, "forever"); err != nil || string(got) != "stays" {
		t.Fatalf("get forever = %q, %v", got, err)
	}
}

// TestCancelMidCall checks that a call stalled on the network returns with its context's error, and that
// the connection serves again once the fault heals.
func TestCancelMidCall(t *testing.T) {
	c := startCluster(t, 2, nil)
	a, b := c.node(0), c.node(1)
	key := c.keyOwnedBy("k", b)
	if err := a.Put(bg(t), key, []byte("v")); err != nil {
		t.Fatal(err)
	}
	c.faults.Partition(string(a.id), string(b.id))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	start := time.Now()
	_, err := a.Get(ctx, key)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stalled get: err = %v; want DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("stalled get returned after %v", elapsed)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := a.Get(ctx, key); !errors.Is(err, context.Canceled) {
		t.Fatalf("get with cancelled context: err = %v; want Canceled", err)
	}
	c.faults.HealAll()
	if got, err := a.Get(bg(t), key); err != nil || string(got) != "v" {
		t.Fatalf("get after heal = %q, %v", got, err)
	}
}

// TestCallToClosedPeer checks that a request to a node that has gone away fails with a transport error
// naming that node, never with a false NotFound.
func TestCallToClosedPeer(t *testing.T) {
	c := startCluster(t, 3, nil)
	a, b := c.node(0), c.node(1)
	key := c.keyOwnedBy("gone", b)
	c.kill(1)
	_, err := a.Get(bg(t), key)
	if err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("get from closed owner: err = %v", err)
	}
	if !errors.Is(err, transport.ErrUnreachable) && !errors.Is(err, transport.ErrConnectionLost) {
		t.Fatalf("err = %v; want a transport error", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte(b.id)) {
		t.Fatalf("error %q does not name node %s", err, b.id)
	}
	a.Close()
	if _, err := a.Get(bg(t), key); !errors.Is(err, ErrClosed) {
		t.Fatalf("get on closed node: err = %v; want ErrClosed", err)
	}
}

func TestJoinRefusesMismatchedParameters(t *testing.T) {
	c := startCluster(t, 1, nil)
	seed := c.node(0).GossipAddr()
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
	}{
		{"partitions", func(cfg *Config) { cfg.Partitions = 64 }},
		{"segments", func(cfg *Config) { cfg.Segments = 512 }},
		{"replication", func(cfg *Config) { cfg.ReplicationFactor = 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("odd-" + tc.name)
			cfg.hooks.network = c.network
			cfg.Join = []string{seed}
			tc.tweak(&cfg)
			n, err := Join(bg(t), cfg)
			if err == nil {
				n.Close()
				t.Fatal("join with mismatched parameters succeeded")
			}
			if !errors.Is(err, ErrClusterMismatch) {
				t.Fatalf("err = %v; want ErrClusterMismatch", err)
			}
		})
	}
	if got := len(c.node(0).members.members()); got != 1 {
		t.Fatalf("seed sees %d members; want only itself", got)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
	}{
		{"no name", func(c *Config) { c.Name = "" }},
		{"bad gossip addr", func(c *Config) { c.GossipAddr = "nope" }},
		{"bad data addr", func(c *Config) { c.DataAddr = "127.0.0.1" }},
		{"too many segments", func(c *Config) { c.Segments = NumSlots + 1 }},
		{"more partitions than segments", func(c *Config) { c.Segments, c.Partitions = 8, 9 }},
		{"rf 0", func(c *Config) { c.ReplicationFactor = 0 }},
		{"expect 0", func(c *Config) { c.BootstrapExpect = 0 }},
		{"value over frame", func(c *Config) { c.MaxValueSize = c.MaxFrameSize }},
		{"zero timing", func(c *Config) { c.Timing.RaftCommit = 0 }},
		{"unspecified data host", func(c *Config) { c.DataAddr = "0.0.0.0:0" }},
		{"no data connections", func(c *Config) { c.DataMaxConns = 0 }},
		{"no raft connections", func(c *Config) { c.RaftMaxConns = 0 }},
		{"per-connection cap over the node's", func(c *Config) { c.DataMaxConnRequests = c.DataMaxRequests + 1 }},
		{"buffer under a frame", func(c *Config) { c.DataMaxBufferedBytes = int64(c.MaxFrameSize) - 1 }},
		{"no idle timeout", func(c *Config) { c.DataIdleTimeout = 0 }},
		{"no write timeout", func(c *Config) { c.DataWriteTimeout = 0 }},
		{"TLS without a gossip key", func(c *Config) { c.TLS, c.GossipKey = suiteCA().peerConfig(c.Name), nil }},
		{"cluster name not a host", func(c *Config) { c.ClusterName = "a/b" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("invalid")
			tc.tweak(&cfg)
			if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v; want ErrInvalidConfig", err)
			}
			n, err := Join(bg(t), cfg)
			if err == nil {
				n.Close()
				t.Fatal("Join accepted an invalid config")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v; want ErrInvalidConfig", err)
			}
		})
	}
}

// TestConfigDefaults checks that Validate changes nothing and that a Config holding only what it must
// (the zero values of fields that have a default) is as valid as DefaultConfig.
func TestConfigDefaults(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WriteConcern, cfg.MinInSync, cfg.Clock, cfg.Logger = 0, 0, nil, nil
	before := fmt.Sprintf("%+v", cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate with defaulted zero fields: %v", err)
	}
	if after := fmt.Sprintf("%+v", cfg); after != before {
		t.Fatalf("Validate changed the config:\n%s\n%s", before, after)
	}
	filled := cfg.withDefaults()
	if filled.WriteConcern != Sync || filled.MinInSync != 1 || filled.Clock == nil || filled.Logger == nil ||
		filled.RESPMaxQueryBuffer != 2*cfg.MaxValueSize+1<<20 {
		t.Fatalf("withDefaults left a default unfilled: %+v", filled)
	}
	cfg.MinInSync = cfg.ReplicationFactor + 1
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("MinInSync over ReplicationFactor: Validate = %v; want ErrInvalidConfig", err)
	}
}

func TestValueTooLargeAndDelete(t *testing.T) {
	c := startCluster(t, 2, func(cfg *Config) { cfg.MaxValueSize = 1024 })
	ctx := bg(t)
	a := c.node(0)
	if err := a.Put(ctx, "big", make([]byte, 1025)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("oversized put: err = %v; want ErrValueTooLarge", err)
	}
	if _, err := a.Get(ctx, "big"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("oversized value was stored: err = %v", err)
	}
	buf := []byte("first")
	if err := a.Put(ctx, "k", buf); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX") // the caller reuses its buffer; the stored value must not change
	if got, _ := c.node(1).Get(ctx, "k"); string(got) != "first" {
		t.Fatalf("stored value changed with the caller's buffer: %q", got)
	}
	if existed, err := c.node(1).Delete(ctx, "k"); !existed || err != nil {
		t.Fatalf("delete = %v, %v", existed, err)
	}
	if existed, err := a.Delete(ctx, "k"); existed || err != nil {
		t.Fatalf("second delete = %v, %v", existed, err)
	}
}

func TestTypedHelpers(t *testing.T) {
	c := startCluster(t, 2, nil)
	ctx := bg(t)
	type profile struct {
		Name  string
		Score int
		Tags  []string
	}
	want := profile{Name: "ada", Score: 42, Tags: []string{"x", "y"}}
	if err := PutTyped(ctx, c.node(0), "profile:ada", want); err != nil {
		t.Fatal(err)
	}
	got, err := GetTyped[profile](ctx, c.node(1), "profile:ada")
	if err != nil || got.Name != want.Name || got.Score != want.Score || len(got.Tags) != 2 {
		t.Fatalf("GetTyped = %+v, %v", got, err)
	}
	if err := c.node(0).Put(ctx, "not-a-profile", []byte{0xc1}); err != nil {
		t.Fatal(err)
	}
	if _, err := GetTyped[profile](ctx, c.node(1), "not-a-profile"); !errors.Is(err, ErrDecode) {
		t.Fatalf("decode of a bad value: err = %v; want ErrDecode", err)
	}
}

// TestConcurrentRefreshesCoalesce checks that many operations redirected at once by the same stale entry
// cause a single map refresh.
func TestConcurrentRefreshesCoalesce(t *testing.T) {
	c := startCluster(t, 3, nil)
	ctx := bg(t)
	caller := c.node(0)
	var keys []string
	var owner *Node
	for i := 0; len(keys) < 64; i++ {
		key := fmt.Sprintf("{hot}:%d", i)
		owner = c.owner(key)
		keys = append(keys, key)
	}
	if owner == caller {
		t.Skip("the hot tag landed on the caller; no remote redirect to provoke")
	}
	var wrong *Node
	for _, n := range c.live() {
		if n != caller && n != owner {
			wrong = n
		}
	}
	installStaleTable(caller, caller.layout.KeyPartition(keys[0]), wrong.id)
	before := caller.Stats()
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	for _, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- caller.Put(ctx, key, []byte("v"))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	after := caller.Stats()
	if got := after.Refreshes.React - before.Refreshes.React; got != 1 {
		t.Fatalf("%d reactive refreshes for one stale entry; want 1", got)
	}
	redirected := after.RedirectsReceived - before.RedirectsReceived
	if coalesced := after.Refreshes.Coalesced - before.Refreshes.Coalesced; coalesced+1 != redirected {
		t.Fatalf("%d redirects: 1 refresh and %d coalesced; want every other one coalesced", redirected, coalesced)
	}
}

// TestPollRepairsStaleTable checks the backstop: with no traffic at all, a stale routing table is replaced
// by the leader's map within a poll interval.
func TestPollRepairsStaleTable(t *testing.T) {
	c := startCluster(t, 3, func(cfg *Config) { cfg.PollInterval = 50 * time.Millisecond })
	n := c.node(0)
	real := n.ClusterMap()
	installStaleTable(n, 0, "nobody")
	before := n.Stats().Refreshes.Poll
	waitFor(t, 5*time.Second, "the poll to reinstall the current map", func() bool {
		return n.client.router.current().m.Index == real.Index
	})
	if n.Stats().Refreshes.Poll == before {
		t.Fatal("table repaired, but not by the poll")
	}
}

// TestLocalWritesKeepNoCallerBuffer checks that every way of writing a value on the node that owns the key
// stores a copy: a caller that reuses its buffers afterwards changes nothing stored.
func TestLocalWritesKeepNoCallerBuffer(t *testing.T) {
	c := startCluster(t, 1, nil)
	ctx := bg(t)
	n := c.node(0)
	var bufs [][]byte
	buf := func(s string) []byte {
		b := []byte(s)
		bufs = append(bufs, b)
		return b
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(n.Put(ctx, "put", buf("put")))
	_, _, err := n.Swap(ctx, "swap", buf("swap"))
	must(err)
	must(n.Put(ctx, "cas", []byte("old")))
	v, err := n.GetEntry(ctx, "cas")
	must(err)
	_, err = n.CompareAndSwap(ctx, "cas", v.Version, buf("cas"))
	must(err)
	_, err = n.Append(ctx, "append", buf("append"))
	must(err)
	_, err = n.SetRange(ctx, "setrange", 0, buf("setrange"))
	must(err)
	_, err = n.PutMany(ctx, []KeyValue{{"many1", buf("many1")}, {"many2", buf("many2")}})
	must(err)
	for _, b := range bufs {
		for i := range b {
			b[i] = 'X'
		}
	}
	for _, key := range []string{"put", "swap", "cas", "append", "setrange", "many1", "many2"} {
		if got, err := n.Get(ctx, key); err != nil || string(got) != key {
			t.Fatalf("%s holds %q (%v) after its caller reused the buffer; want %q", key, got, err, key)
		}
	}
}

// TestLocalGetReturnsACopy checks that a caller modifying a value it read does not change the stored one.
func TestLocalGetReturnsACopy(t *testing.T) {
	c := startCluster(t, 1, nil)
	ctx := bg(t)
	n := c.node(0)
	if err := n.Put(ctx, "k", []byte("stored")); err != nil {
		t.Fatal(err)
	}
	got, err := n.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	copy(got, "XXXXXX")
	if again, _ := n.Get(ctx, "k"); string(again) != "stored" {
		t.Fatalf("stored value changed through a read: %q", again)
	}
}

// TestEmptyValueReadsAlike stores empty values, strings and collection elements, and reads them from their
// owner and from another node, with and without a near cache: every read returns an empty slice that is not
// nil, since nil is how HMGet says a field is missing.
func TestEmptyValueReadsAlike(t *testing.T) {
	t.Run("direct", func(t *testing.T) { testEmptyValueReadsAlike(t, nil) })
	t.Run("near-cache", func(t *testing.T) {
		testEmptyValueReadsAlike(t, func(cfg *Config) { cfg.NearCache.MaxBytes = 1 << 20 })
	})
}

func testEmptyValueReadsAlike(t *testing.T, tweak func(*Config)) {
	c := startCluster(t, 2, tweak)
	ctx := bg(t)
	local := c.node(0)
	for _, owner := range []*Node{c.node(0), c.node(1)} {
		key := c.keyOwnedBy("empty", owner)
		hash, list := c.keyOwnedBy("hash", owner), c.keyOwnedBy("list", owner)
		if err := local.Put(ctx, key, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := local.HSet(ctx, hash, map[string][]byte{"f": {}}); err != nil {
			t.Fatal(err)
		}
		if _, err := local.RPush(ctx, list, []byte{}); err != nil {
			t.Fatal(err)
		}
		where := "local"
		if owner != local {
			where = "remote"
		}
		check := func(read string, v []byte, err error) {
			t.Helper()
			if err != nil || v == nil || len(v) != 0 {
				t.Errorf("%s %s: %q (nil: %v), %v; want an empty value", where, read, v, v == nil, err)
			}
		}
		v, err := local.Get(ctx, key)
		check("Get", v, err)
		v, err = local.Get(ctx, key) // from the near cache, if any
		check("Get again", v, err)
		e, err := local.GetEntry(ctx, key)
		check("GetEntry", e.Value, err)
		rs, err := local.GetMany(ctx, []string{key})
		if err != nil {
			t.Fatal(err)
		}
		check("GetMany", rs[0].Value, err)
		v, err = local.GetAndPersist(ctx, key)
		check("GetAndPersist", v, err)
		v, _, err = local.Swap(ctx, key, nil)
		check("Swap", v, err)
		v, err = local.HGet(ctx, hash, "f")
		check("HGet", v, err)
		vs, err := local.HMGet(ctx, hash, "f")
		if err != nil {
			t.Fatal(err)
		}
		check("HMGet", vs[0], err)
		all, err := local.HGetAll(ctx, hash)
		check("HGetAll", all["f"], err)
		v, err = local.LIndex(ctx, list, 0)
		check("LIndex", v, err)
		vs, err = local.LRange(ctx, list, 0, -1)
		if err != nil || len(vs) != 1 {
			t.Fatalf("LRange: %q, %v", vs, err)
		}
		check("LRange", vs[0], err)
		v, err = local.GetAndDelete(ctx, key)
		check("GetAndDelete", v, err)
	}
}
