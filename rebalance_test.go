package zaris

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// elastic is the config of the rebalancing tests: RF 2, Sync writes, a small layout so moves are quick.
func elastic(more ...func(*Config)) func(*Config) {
	return replicated(2, append([]func(*Config){func(cfg *Config) {
		cfg.Segments, cfg.Partitions = 256, 32
		cfg.MaxRetries = 8
	}}, more...)...)
}

// movesOf counts the partitions whose nodes differ between a and b, and those whose primary differs.
func movesOf(a, b Assignment) (changed, primaries int) {
	for p := range a {
		if !slices.Equal(a[p], b[p]) {
			changed++
		}
		if a[p][0] != b[p][0] {
			primaries++
		}
	}
	return changed, primaries
}

func totalCutOvers(nodes []*Node) uint64 {
	var sum uint64
	for _, n := range nodes {
		sum += n.CutoverStats().CutOvers
	}
	return sum
}

func nodeIDs(nodes []*Node) []NodeID {
	var ids []NodeID
	for _, n := range nodes {
		ids = append(ids, n.id)
	}
	slices.Sort(ids)
	return ids
}

// assertBalanced checks that every partition has min(RF, nodes) distinct nodes and that copies and
// primaries are spread within one of each other.
func assertBalanced(t *testing.T, m *ClusterMap, nodes []NodeID) {
	t.Helper()
	copies, primaries := map[NodeID]int{}, map[NodeID]int{}
	for p, a := range m.Assignment {
		if len(a) != min(m.ReplicationFactor, len(nodes)) {
			t.Fatalf("partition %d has nodes %v; want %d", p, a, min(m.ReplicationFactor, len(nodes)))
		}
		primaries[a[0]]++
		for _, id := range a {
			if !slices.Contains(nodes, id) {
				t.Fatalf("partition %d is on %s, which is not a member", p, id)
			}
			copies[id]++
		}
		if st := m.Runtime[p]; st.Owner != a[0] || st.Health != Healthy {
			t.Fatalf("partition %d: owner %s health %v; want %s Healthy", p, st.Owner, st.Health, a[0])
		}
	}
	spread := func(what string, count map[NodeID]int) {
		lo, hi := len(m.Assignment)*m.ReplicationFactor, 0
		for _, id := range nodes {
			lo, hi = min(lo, count[id]), max(hi, count[id])
		}
		if hi-lo > 1 {
			t.Fatalf("%s spread %v over %v", what, count, nodes)
		}
	}
	spread("copies", copies)
	spread("primaries", primaries)
}

// TestRebalanceMovesOnlyWhatAssignChanged joins nodes one at a time, then leaves one, and checks that each
// step settles exactly the partitions Assign changed, cuts over exactly those whose primary changed, and
// loses no key.
func TestRebalanceMovesOnlyWhatAssignChanged(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, elastic())
	ctx := context.Background()
	keys := make([]string, 400)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
		if err := c.node(0).Put(ctx, keys[i], []byte(keys[i])); err != nil {
			t.Fatal(err)
		}
	}
	step := func(what string, change func()) {
		t.Helper()
		before := c.currentMap()
		members := c.live()
		cutBefore := totalCutOvers(members)
		change()
		for _, n := range c.live() {
			if !slices.Contains(members, n) {
				members = append(members, n)
			}
		}
		c.waitHealthy(30 * time.Second)
		after := c.currentMap()
		nodes := nodeIDs(c.live())
		if want := Assign(before.Assignment, nodes, before.Partitions, before.ReplicationFactor); !slices.EqualFunc(after.Assignment, want, slices.Equal) {
			t.Fatalf("%s: assignment is not Assign's:\n got %v\nwant %v", what, after.Assignment, want)
		}
		changed, primaries := movesOf(before.Assignment, after.Assignment)
		if moved := after.Moved - before.Moved; moved != uint64(changed) || changed == 0 {
			t.Fatalf("%s: %d partitions moved; Assign changed %d", what, moved, changed)
		}
		// An owner counts its cut-over once it has applied the settled map, moments after the others.
		waitFor(t, 5*time.Second, fmt.Sprintf("%s: %d cut-overs, one per changed primary", what, primaries), func() bool {
			return totalCutOvers(members)-cutBefore == uint64(primaries)
		})
		assertBalanced(t, after, nodes)
		for _, n := range c.live() {
			for _, k := range keys {
				if got, err := n.Get(ctx, k); err != nil || string(got) != k {
					t.Fatalf("%s: get %q from %s = %q, %v", what, k, n.id, got, err)
				}
			}
		}
		t.Logf("%s: %d partitions moved, %d cut over", what, changed, primaries)
	}
	step("join node-1", func() { c.add(1) })
	step("join node-2", func() { c.add(1) })
	step("node-1 leaves", func() {
		if err := c.node(1).Leave(ctx); err != nil {
			t.Fatal(err)
		}
		c.kill(1)
	})
	assertReplicasMatch(t, c)
}

// TestLeaveDrainsBeforeExit checks that a leaving node holds nothing when it exits and that writes during
// the drain are not lost.
func TestLeaveDrainsBeforeExit(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, elastic())
	ctx := context.Background()
	leaver := c.node(2)
	for i := range 200 {
		k := "d" + strconv.Itoa(i)
		if err := c.node(0).Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	leaveCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := leaver.Leave(leaveCtx); err != nil {
		t.Fatal(err)
	}
	c.kill(2)
	if m := leaver.ClusterMap(); m.holds(leaver.id) {
		t.Fatalf("%s left while still holding partitions", leaver.id)
	}
	c.waitStable(20 * time.Second)
	for i := range 200 {
		k := "d" + strconv.Itoa(i)
		if got, err := c.node(1).Get(ctx, k); err != nil || string(got) != k {
			t.Fatalf("get %q = %q, %v", k, got, err)
		}
	}
}

// writer is one client of the load tests: it writes increasing counters to its own keys
// through one node, retrying each write until it is acknowledged, and reads each key back.
type writer struct {
	id     int
	node   *Node
	keys   int
	acked  []int       // per key, the last acknowledged counter
	acks   []time.Time // when each write was acknowledged, in order
	stop   chan struct{}
	halted sync.Once
	done   chan struct{}
	err    error

	writes, retries int
	worstWrite      time.Duration
}

func (w *writer) key(i int) string { return fmt.Sprintf("w%d-%d", w.id, i) }

// halt stops the writer, if it is still running, and waits until it has.
func (w *writer) halt() {
	w.halted.Do(func() { close(w.stop) })
	<-w.done
}

func (w *writer) run() {
	defer close(w.done)
	ctx := context.Background()
	for seq := 1; ; seq++ {
		select {
		case <-w.stop:
			return
		default:
		}
		i := seq % w.keys
		if w.err = w.put(ctx, i, seq); w.err != nil {
			return
		}
		if w.err = w.check(ctx, i); w.err != nil {
			return
		}
	}
}

// writerSet starts writers on nodes and stops them, failing the test if one saw a stale read or a write
// that could not be acknowledged.
type writerSet struct {
	t    *testing.T
	keys int

	mu  sync.Mutex
	all []*writer
}

// start starts a writer of its own keys on n.
func (ws *writerSet) start(n *Node) *writer {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := &writer{id: len(ws.all), node: n, keys: ws.keys, stop: make(chan struct{}), done: make(chan struct{})}
	w.acked = make([]int, w.keys)
	ws.all = append(ws.all, w)
	go w.run()
	return w
}

// stop stops w and waits for it.
func (ws *writerSet) stop(w *writer) {
	ws.t.Helper()
	close(w.stop)
	<-w.done
	if w.err != nil {
		ws.t.Fatalf("writer %d on %s: %v", w.id, w.node.id, w.err)
	}
}

// writers returns every writer started.
func (ws *writerSet) writers() []*writer {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return slices.Clone(ws.all)
}

// put writes seq to key i until it is acknowledged; only a failure that outlasts the bound is an error.
func (w *writer) put(ctx context.Context, i, seq int) error {
	start := time.Now()
	for {
		err := w.node.Put(ctx, w.key(i), []byte(strconv.Itoa(seq)))
		if err == nil {
			w.acked[i] = seq
			w.acks = append(w.acks, time.Now())
			w.writes++
			w.worstWrite = max(w.worstWrite, time.Since(start))
			return nil
		}
		if time.Since(start) > 10*time.Second {
			return fmt.Errorf("put %s: not acknowledged for 10s: %w", w.key(i), err)
		}
		w.retries++
		time.Sleep(time.Millisecond)
	}
}

// check reads key i and fails if it is older than this writer's last acknowledged write to it.
func (w *writer) check(ctx context.Context, i int) error {
	got, err := w.node.Get(ctx, w.key(i))
	if errors.Is(err, ErrNotFound) || (err == nil && mustAtoi(got) < w.acked[i]) {
		return fmt.Errorf("read %s = %q after acknowledged %d: stale", w.key(i), got, w.acked[i])
	}
	return nil // a read that fails is no evidence either way
}

// assertReadBack checks that every node reads, for each key the writer got a write acknowledged on, the last
// acknowledged value. Keys it never reached (a slow writer stopped early) are skipped.
func (w *writer) assertReadBack(t *testing.T, nodes []*Node) {
	t.Helper()
	for i := range w.keys {
		if w.acked[i] == 0 {
			continue
		}
		for _, n := range nodes {
			if got, err := n.Get(context.Background(), w.key(i)); err != nil || mustAtoi(got) != w.acked[i] {
				t.Fatalf("get %s from %s = %q, %v; want the last acknowledged %d", w.key(i), n.id, got, err, w.acked[i])
			}
		}
	}
}

func mustAtoi(b []byte) int {
	v, err := strconv.Atoi(string(b))
	if err != nil {
		return -1
	}
	return v
}

// TestGrowAndShrinkUnderLoad grows a cluster from 1 to 5 nodes and shrinks it to 2 by graceful leaves while
// a writer on every node writes and reads continuously with Sync writes. No read may be stale, every
// acknowledged write must be readable at the end, and the final map must be balanced.
func TestGrowAndShrinkUnderLoad(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startCluster(t, 1, elastic())
	ws := &writerSet{t: t, keys: 40}
	start, stopWriter := ws.start, ws.stop
	byNode := map[NodeID]*writer{c.node(0).id: start(c.node(0))}
	for range 4 {
		n := c.add(1)
		byNode[n.id] = start(n)
		c.waitHealthy(60 * time.Second)
	}
	assertBalanced(t, c.currentMap(), nodeIDs(c.live()))
	for _, i := range []int{4, 0, 2} {
		n := c.node(i)
		stopWriter(byNode[n.id])
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := n.Leave(ctx)
		cancel()
		if err != nil {
			t.Fatalf("leave %s: %v", n.id, err)
		}
		c.kill(i)
		c.waitHealthy(60 * time.Second)
	}
	for _, n := range c.live() {
		stopWriter(byNode[n.id])
	}
	c.waitHealthy(60 * time.Second)
	final := c.currentMap()
	assertBalanced(t, final, nodeIDs(c.live()))

	var writes, retries int
	var worst time.Duration
	for _, w := range ws.writers() {
		writes, retries, worst = writes+w.writes, retries+w.retries, max(worst, w.worstWrite)
		w.assertReadBack(t, c.live())
	}
	assertReplicasMatch(t, c)
	var sealed []time.Duration
	for _, n := range c.live() {
		sealed = append(sealed, n.CutoverStats().Sealed...)
	}
	t.Logf("%d acknowledged writes, %d retries, slowest acknowledged write %v; %d partitions moved; cut-over %s",
		writes, retries, worst, final.Moved, percentiles(sealed))
}

// percentiles formats p50, p99 and max of ds.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("p50 %v p99 %v max %v (n=%d)", at(0.5), at(0.99), s[len(s)-1], len(s))
}

// TestLostPartitionRelocatedAfterEviction kills both nodes of some partitions: they become Unavailable and
// fail loudly, and once the dead nodes are evicted the plan recreates them, empty, on the survivors.
func TestLostPartitionRelocatedAfterEviction(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 5, elastic(func(cfg *Config) {
		cfg.FailoverTimeout = 500 * time.Millisecond
		cfg.EvictionTimeout = 2 * time.Second
	}))
	ctx := context.Background()
	m := c.currentMap()
	dead := []NodeID{c.node(3).id, c.node(4).id}
	lost := -1
	for p, nodes := range m.Assignment {
		if slices.Contains(dead, nodes[0]) && slices.Contains(dead, nodes[1]) {
			lost = p
			break
		}
	}
	if lost < 0 {
		t.Fatal("no partition lives only on the two nodes to kill")
	}
	key := keyInPartition(m.Layout(), "lost", lost)
	if err := c.node(0).Put(ctx, key, []byte("v")); err != nil {
		t.Fatal(err)
	}
	c.kill(3)
	c.kill(4)
	waitFor(t, 20*time.Second, "the lost partition to fail loudly", func() bool {
		_, err := c.node(0).Get(ctx, key)
		return errors.Is(err, ErrPartitionUnavailable)
	})
	waitFor(t, 20*time.Second, "the dead nodes evicted from the plan", func() bool {
		return slices.Equal(c.currentMap().plannedNodes(), nodeIDs(c.live()))
	})
	c.waitHealthy(30 * time.Second)
	assertBalanced(t, c.currentMap(), nodeIDs(c.live()))
	if _, err := c.node(0).Get(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get from the recreated partition: %v; want ErrNotFound", err)
	}
	if err := c.node(1).Put(ctx, key, []byte("again")); err != nil {
		t.Fatalf("put to the recreated partition: %v", err)
	}
}

// TestCutoverThatCannotFinishKeepsServing gives owners no time to hand over: every cut-over gives up, the
// owner reclaims its partition under a new epoch and goes on serving, and no write is lost.
func TestCutoverThatCannotFinishKeepsServing(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, elastic(func(cfg *Config) { cfg.CutoverTimeout = time.Nanosecond }))
	ctx := context.Background()
	before := c.currentMap()
	c.add(2)
	reclaimed := func() (sum uint64) {
		for _, n := range c.live() {
			sum += n.CutoverStats().Reclaimed
		}
		return sum
	}
	waitFor(t, 20*time.Second, "owners to give up cut-overs and reclaim", func() bool { return reclaimed() >= 3 })
	for i := range 300 {
		k := "r" + strconv.Itoa(i)
		for _, n := range c.live() {
			v := []byte(k + string(n.id))
			if err := n.Put(ctx, k, v); err != nil {
				t.Fatalf("put %q through %s: %v", k, n.id, err)
			}
			if got, err := n.Get(ctx, k); err != nil || string(got) != string(v) {
				t.Fatalf("get %q through %s = %q, %v", k, n.id, got, err)
			}
		}
	}
	m := c.currentMap()
	for p, st := range m.Runtime {
		if st.Owner != before.Runtime[p].Owner {
			t.Fatalf("partition %d changed owner %s -> %s although no cut-over can finish", p, before.Runtime[p].Owner, st.Owner)
		}
	}
	for _, n := range c.live() {
		if s := n.CutoverStats(); s.CutOvers != 0 {
			t.Fatalf("%s finished %d cut-overs", n.id, s.CutOvers)
		}
	}
}

// TestInterruptedMoveIsAbandoned kills a joining node while partitions move to it: what it had taken over
// fails over to the previous owners, the plan drops it once it is evicted, and no acknowledged write is lost.
func TestInterruptedMoveIsAbandoned(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, elastic(func(cfg *Config) {
		cfg.FailoverTimeout = 500 * time.Millisecond
		cfg.EvictionTimeout = time.Second
	}))
	w := &writer{node: c.node(0), keys: 64, stop: make(chan struct{}), done: make(chan struct{})}
	w.acked = make([]int, w.keys)
	go w.run()
	joiner := c.add(3)
	waitFor(t, 20*time.Second, "a move towards the joiner to settle", func() bool {
		return c.currentMap().OwnedBy(joiner.id) > 0
	})
	c.kill(3)
	waitFor(t, 30*time.Second, "the joiner evicted from the plan", func() bool {
		return slices.Equal(c.currentMap().plannedNodes(), nodeIDs(c.live()))
	})
	c.waitHealthy(30 * time.Second)
	close(w.stop)
	<-w.done
	if w.err != nil {
		t.Fatal(w.err)
	}
	assertBalanced(t, c.currentMap(), nodeIDs(c.live()))
	w.assertReadBack(t, c.live())
	assertReplicasMatch(t, c)
}
