package zaris

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/memnet"
	"github.com/zaris-go/zaris/internal/ports"
	"github.com/zaris-go/zaris/transport"
)

// testCluster is the one in-process cluster helper of the multi-node tests: it starts N nodes on an
// in-memory network (or on loopback sockets) with fast timings, waits for a stable map, injects faults
// between them and stops them all at cleanup.
type testCluster struct {
	t      testing.TB
	faults *transport.Faults
	// network carries the nodes' data, control-plane and gossip links; nil puts them on loopback sockets.
	network *memnet.Network
	tweak   func(*Config)

	logs *logTail // the nodes' recent log lines, printed when the test fails

	mu      sync.Mutex
	nodes   []*Node  // nil once stopped
	cfgs    []Config // the config each node was started with, its bound addresses filled in
	seq     int
	started []*Node // every process started, closed at cleanup whatever became of it
	stopped bool
}

// logTail keeps the last lines written to it, at most max, for a failing test to print.
type logTail struct {
	mu    sync.Mutex
	lines []string
	next  int
	max   int
}

func newLogTail(max int) *logTail { return &logTail{max: max} }

// Write keeps p as one line: slog handlers write each record in one call.
func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) < l.max {
		l.lines = append(l.lines, string(p))
	} else {
		l.lines[l.next] = string(p)
		l.next = (l.next + 1) % l.max
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(append(slices.Clone(l.lines[l.next:]), l.lines[:l.next]...), "")
}

// logger writes Info and above to the tail, unless ZARIS_TEST_LOG sends every node's log to stderr.
func (l *logTail) logger() *slog.Logger {
	if os.Getenv("ZARIS_TEST_LOG") != "" {
		return testLogger()
	}
	return slog.New(slog.NewTextHandler(l, nil))
}

// testLogger is silent unless ZARIS_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("ZARIS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testConfig is a loopback config with fast timings and free ports. Raft's run slower than LocalTiming's
// (steadyControl), so that a loaded machine running the suite in parallel does not move leadership while a
// test counts on where it is.
func testConfig(name string) Config {
	cfg := DefaultConfig()
	cfg.Name = name
	cfg.Timing = LocalTiming()
	steadyControl(&cfg)
	cfg.Logger = testLogger()
	cfg.ReplicationFactor = 1
	if secureSuite() {
		cfg.TLS = suiteCA().peerConfig(name)
		cfg.GossipKey = testGossipKey
	}
	return cfg
}

// longScenario skips, under -short, a scenario that spends several seconds waiting for failure detection,
// restarts or moves: the README's test command runs the rest within its time, and CI runs them all.
func longScenario(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a scenario of several seconds: runs without -short")
	}
}

// startCluster starts n nodes that bootstrap together on an in-memory network of their own and waits until
// every node has the same map.
func startCluster(t testing.TB, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	return startClusterOn(t, memnet.New(), n, tweak)
}

// startSocketCluster is startCluster on loopback sockets, for tests of what a real port does or of how the
// system performs on one, and for clusters that processes outside the test must reach.
func startSocketCluster(t testing.TB, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	return startClusterOn(t, nil, n, tweak)
}

// startClusterOn starts n nodes on network, or on loopback sockets when it is nil.
func startClusterOn(t testing.TB, network *memnet.Network, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, faults: transport.NewFaults(), network: network, tweak: tweak, logs: newLogTail(300)}
	t.Cleanup(c.stopAll)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cluster's last %d log lines:\n%s", c.logs.max, c.logs)
			t.Logf("the control plane as each live node sees it:\n%s", c.controlViews())
		}
	})
	for i := 0; i < n; i++ {
		c.add(n)
	}
	c.waitStable(20 * time.Second)
	return c
}

// controlViews describes, for a failed test, each live node's control plane: its raft state and term, the
// rounds of its control loop, the members it sees, and the stack of its control loop when that is not
// waiting for its next round.
func (c *testCluster) controlViews() string {
	var b strings.Builder
	for _, n := range c.live() {
		fmt.Fprintf(&b, "%s: raft %s, term %d, %d control rounds; members:", n.id, n.ctl.raft.State(), n.ctl.raft.CurrentTerm(), n.ctl.controlTicks.Load())
		for _, mb := range n.members.members() {
			fmt.Fprintf(&b, " %s(%s, incarnation %d)", mb.ID, mb.Status, mb.Incarnation)
		}
		b.WriteByte('\n')
	}
	if m := c.currentMap(); m != nil {
		b.WriteString("the map records:")
		for _, id := range slices.Sorted(maps.Keys(m.Nodes)) {
			fmt.Fprintf(&b, " %s(incarnation %d)", id, m.Nodes[id].Incarnation)
		}
		b.WriteByte('\n')
	}
	stacks := make([]byte, 8<<20)
	stacks = stacks[:runtime.Stack(stacks, true)]
	for _, g := range strings.Split(string(stacks), "\n\n") {
		if strings.Contains(g, ").runControl(") && !strings.Contains(g, "[select") {
			b.WriteString(g + "\n\n")
		}
	}
	return b.String()
}

// add starts one more node that joins through the first live node.
func (c *testCluster) add(bootstrapExpect int) *Node {
	c.t.Helper()
	return c.addWith(bootstrapExpect, nil)
}

// addWith is add with a further change to the node's config.
func (c *testCluster) addWith(bootstrapExpect int, tweak func(*Config)) *Node {
	c.t.Helper()
	n, cfg, err := c.tryAdd(bootstrapExpect, tweak)
	if err != nil {
		c.t.Fatalf("join %s: %v", cfg.Name, err)
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.cfgs = append(c.cfgs, cfg)
	c.mu.Unlock()
	return n
}

// tryAdd starts one more node as addWith does, and returns its Join's error rather than fail the test.
func (c *testCluster) tryAdd(bootstrapExpect int, tweak func(*Config)) (*Node, Config, error) {
	c.t.Helper()
	c.mu.Lock()
	name := fmt.Sprintf("node-%d", c.seq)
	c.seq++
	var seeds []string
	for _, n := range c.nodes {
		if n != nil {
			seeds = append(seeds, n.GossipAddr())
			break
		}
	}
	c.mu.Unlock()

	cfg := testConfig(name)
	cfg.Logger = c.logs.logger()
	cfg.BootstrapExpect = bootstrapExpect
	cfg.Join = seeds
	cfg.hooks.network = c.network
	cfg.Dialer = c.faults.Dialer(name, c.baseDialer())
	cfg.hooks.gossipTransport = c.faults.GossipTransport
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	if tweak != nil {
		tweak(&cfg)
	}
	if c.network == nil {
		c.reservePorts(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := Join(ctx, cfg)
	if err != nil {
		return nil, cfg, err
	}
	c.register(n)
	cfg.GossipAddr, cfg.DataAddr = n.GossipAddr(), n.DataAddr()
	return n, cfg, nil
}

// reservePorts gives a node on sockets gossip and data ports of its own where cfg leaves the choice to the
// kernel, so that a restart finds them free: a port the kernel picks may be taken, while its node is down,
// by any outgoing connection.
func (c *testCluster) reservePorts(cfg *Config) {
	for _, addr := range []*string{&cfg.GossipAddr, &cfg.DataAddr} {
		host, port, err := net.SplitHostPort(*addr)
		if err != nil || port != "0" {
			continue
		}
		picked, err := ports.Free(1)
		if err != nil {
			c.t.Fatal(err)
		}
		*addr = net.JoinHostPort(host, strconv.Itoa(picked[0]))
	}
}

// baseDialer is what the cluster's fault injection dials through: the in-memory network, or nil for sockets.
func (c *testCluster) baseDialer() transport.Dialer {
	if c.network == nil {
		return nil
	}
	return c.network
}

// restart starts node i again after kill, with its name, addresses and data directory.
func (c *testCluster) restart(i int) *Node {
	c.t.Helper()
	return c.restartVia(i, c.live()...)
}

// restartVia is restart joining through seeds only.
func (c *testCluster) restartVia(i int, seeds ...*Node) *Node {
	c.t.Helper()
	c.mu.Lock()
	cfg := c.cfgs[i]
	c.mu.Unlock()
	cfg.Join = nil
	for _, n := range seeds {
		cfg.Join = append(cfg.Join, n.GossipAddr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := Join(ctx, cfg)
	for start := time.Now(); errors.Is(err, syscall.EADDRINUSE) && ctx.Err() == nil; {
		// Seen once in a chaos run: the data port of the killed process still bound at its restart, 7 s
		// on. The restart waits for the port and says how long it waited, so that a run shows it.
		c.t.Logf("restart %s: %v; its address still bound %v after its previous process closed", cfg.Name, err, time.Since(start).Round(time.Millisecond))
		time.Sleep(100 * time.Millisecond)
		n, err = Join(ctx, cfg)
	}
	if err != nil {
		c.t.Fatalf("restart %s: %v", cfg.Name, err)
	}
	c.register(n)
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return n
	}
	c.nodes[i] = n
	c.mu.Unlock()
	return n
}

// register attributes n's data and gossip addresses to n, so that faults on its links cut both.
func (c *testCluster) register(n *Node) {
	c.faults.Register(string(n.id), n.DataAddr())
	c.faults.Register(string(n.id), n.GossipAddr())
	c.mu.Lock()
	stopped := c.stopped
	c.started = append(c.started, n)
	c.mu.Unlock()
	if stopped { // started by a goroutine of the test that outlived it
		n.Close()
	}
}

// live returns the running nodes.
func (c *testCluster) live() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range c.nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// node returns the i-th node started.
func (c *testCluster) node(i int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// kill closes node i without leaving: a crash from the cluster's point of view.
func (c *testCluster) kill(i int) { c.killProcess(i, c.node(i)) }

// killProcess kills node i as kill does if it is still process n, and reports whether it did: since the
// caller chose n, it may have left (forget) or been killed and restarted.
func (c *testCluster) killProcess(i int, n *Node) bool {
	c.mu.Lock()
	if n == nil || c.nodes[i] != n {
		c.mu.Unlock()
		return false
	}
	c.nodes[i] = nil
	c.mu.Unlock()
	n.Close()
	return true
}

// forget drops node i, which has closed itself (a graceful Leave), if it is still process n, and reports
// whether it was: a process restarted in its place stays.
func (c *testCluster) forget(i int, n *Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.nodes) || c.nodes[i] != n { // stopped at cleanup, or restarted
		return false
	}
	c.nodes[i] = nil
	return true
}

// leader returns the index of the node that leads the control plane, or -1.
func (c *testCluster) leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if n != nil && n.IsLeader() {
			return i
		}
	}
	return -1
}

// raftTerm returns the highest control-plane term any live node knows.
func (c *testCluster) raftTerm() uint64 {
	var term uint64
	for _, n := range c.live() {
		term = max(term, n.ctl.raft.CurrentTerm())
	}
	return term
}

// leaderNode waits until a live node leads the control plane and returns it.
func (c *testCluster) leaderNode() *Node {
	c.t.Helper()
	var i int
	waitFor(c.t, 10*time.Second, "a control-plane leader", func() bool { i = c.leader(); return i >= 0 })
	return c.node(i)
}

// waitStable waits until every live node has the same partition map, knows the same leader, and has
// installed that map in its routing table; the map records every live node's process and plans
// partitions on every live node that may hold them, and no partition is moving.
func (c *testCluster) waitStable(timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, timeout, "a stable cluster map", func() bool {
		nodes := c.live()
		if len(nodes) == 0 {
			return false
		}
		first := nodes[0].ClusterMap()
		leader := nodes[0].ctl.leaderID()
		if first.Version == 0 || leader == "" || first.moving() {
			return false
		}
		for _, n := range nodes {
			m := n.ClusterMap()
			if m.Index != first.Index || n.ctl.leaderID() != leader || n.client.router.current().m.Index != m.Index {
				return false
			}
			if !n.own.recordedIn(first) || !n.cfg.Lite && !n.life.left.Load() && !slices.Contains(first.plannedNodes(), n.id) {
				return false // the leader has yet to act on this member: another map change is coming
			}
		}
		return true
	})
}

// waitRecorded waits until every live node's map records n's process: until then a map can look Healthy
// only because it has not yet acted on n's restart.
func (c *testCluster) waitRecorded(n *Node, timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, timeout, "the map to record "+string(n.id)+"'s process", func() bool {
		for _, l := range c.live() {
			if !n.own.recordedIn(l.ClusterMap()) {
				return false
			}
		}
		return true
	})
}

// waitHealthy waits until the map is stable and every partition is Healthy.
func (c *testCluster) waitHealthy(timeout time.Duration) {
	c.t.Helper()
	c.waitStable(timeout)
	waitFor(c.t, timeout, "every partition Healthy", c.allHealthy)
	c.waitStable(timeout)
}

// isolate cuts node n off from every other live node: data, control plane and gossip.
func (c *testCluster) isolate(n *Node) {
	for _, other := range c.live() {
		if other != n {
			c.faults.Partition(string(n.id), string(other.id))
		}
	}
}

// waitFailedOver waits until no live node's map, nor the routing table it serves callers with, has dead as
// the owner of any partition.
func (c *testCluster) waitFailedOver(dead NodeID, timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, timeout, "the dead owner's partitions to fail over, in every live node's map and routing table", func() bool {
		for _, n := range c.live() {
			table := n.client.router.current()
			if n.ClusterMap().OwnedBy(dead) > 0 || table == nil || table.m.OwnedBy(dead) > 0 {
				return false
			}
		}
		return true
	})
}

// allHealthy reports whether every partition of the current map is Healthy.
func (c *testCluster) allHealthy() bool {
	return !slices.ContainsFunc(c.currentMap().Runtime, func(st PartitionState) bool { return st.Health != Healthy })
}

func (c *testCluster) stopAll() {
	c.mu.Lock()
	started, live := c.started, c.nodes
	c.nodes, c.started, c.stopped = nil, nil, true
	c.mu.Unlock()
	for _, n := range started {
		if !slices.Contains(live, n) && !closesWithin(n, 10*time.Second) {
			c.t.Errorf("%s was dropped as closed (left, or closed itself) but still runs", n.id)
		}
	}
	var wg sync.WaitGroup
	for _, n := range started {
		wg.Add(1)
		go func() { defer wg.Done(); n.Close() }()
	}
	wg.Wait()
}

// closesWithin reports whether n's Close has begun, or begins within bound.
func closesWithin(n *Node, bound time.Duration) bool {
	select {
	case <-n.life.ctx.Done():
		return true
	case <-time.After(bound):
		return false
	}
}

// currentMap returns the newest committed map among the live nodes.
func (c *testCluster) currentMap() *ClusterMap {
	var newest *ClusterMap
	for _, n := range c.live() {
		if m := n.ClusterMap(); newest == nil || m.Index > newest.Index {
			newest = m
		}
	}
	return newest
}

// owner returns the node that actively owns key according to the committed map of any live node.
func (c *testCluster) owner(key string) *Node {
	nodes := c.live()
	m := nodes[0].ClusterMap()
	id := m.Runtime[m.Layout().KeyPartition(key)].Owner
	for _, n := range nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// keyOwnedBy returns a key starting with prefix whose partition n actively owns.
func (c *testCluster) keyOwnedBy(prefix string, n *Node) string {
	key := prefix
	for c.owner(key) != n {
		key += "!"
	}
	return key
}

// keyInPartition returns a key starting with prefix that falls in partition p.
func keyInPartition(layout Layout, prefix string, p int) string {
	key := prefix
	for layout.KeyPartition(key) != p {
		key += "!"
	}
	return key
}

// minWait is the least waitFor waits. A test's timeout bounds a hang, not a speed (benchmarks measure
// speeds): on a machine busy with other work, what takes a fraction of a second idle can take many seconds.
const minWait = 30 * time.Second

// waitFor polls cond until it holds or timeout (at least minWait) passes. It bounds a wait for an
// asynchronous outcome; it is never used to let a race settle.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout = max(timeout, minWait)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// served runs read until no owner refuses it. A new owner whose short lease lapsed on a loaded machine,
// or a routing table one map behind, refuses for a moment; a refusal loses nothing.
func served[T any](t *testing.T, read func() (T, error)) (v T, err error) {
	t.Helper()
	waitFor(t, 20*time.Second, "a read that no owner refuses", func() bool {
		v, err = read()
		return !errors.Is(err, ErrOwnershipChanging) && !errors.Is(err, ErrRetriesExhausted)
	})
	return v, err
}

// awayFromLeader returns the control-plane leader and a partition it holds no copy of, actively owned by its
// preferred primary, with the partition's assigned nodes in order: the leader can fail that partition over
// while it reaches every other node.
func (c *testCluster) awayFromLeader() (leader *Node, p int, nodes []*Node) {
	c.t.Helper()
	leader = c.leaderNode()
	m := c.currentMap()
	p = -1
	for q, ids := range m.Assignment {
		if !slices.Contains(ids, leader.id) && m.Runtime[q].Owner == ids[0] {
			p = q
			break
		}
	}
	if p < 0 {
		c.t.Fatal("every partition has a copy on the leader, or an owner other than its preferred primary")
	}
	for _, id := range m.Assignment[p] {
		nodes = append(nodes, c.nodeByID(id))
	}
	return leader, p, nodes
}

// TestKillSparesTheProcessesItWasNotAskedFor checks killProcess against the processes a nemesis may hold
// stale: one already gone, and one whose node was restarted since; only the process in place is killed.
func TestKillSparesTheProcessesItWasNotAskedFor(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, nil)
	first := c.node(1)
	if !c.killProcess(1, first) {
		t.Fatal("the live process was not killed")
	}
	if c.killProcess(1, first) {
		t.Fatal("a process already killed was killed again")
	}
	second := c.restart(1)
	if c.killProcess(1, first) || c.node(1) != second {
		t.Fatal("a kill of the first process took the restarted one")
	}
	if !c.forget(1, second) || c.killProcess(1, second) {
		t.Fatal("a process the cluster forgot (it left) was killed")
	}
	second.Close()
}
