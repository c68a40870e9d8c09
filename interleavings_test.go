package zaris

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/internal/clocktest"
)

// The tests of this file each drive one interleaving that real timers cannot produce on purpose: a manual
// clock stops the node's own timers, and test hooks hold a node at a chosen point while something else
// happens. Each counts what the cluster acknowledged and checks it afterwards.

// ackLedger counts what a cluster acknowledged and how it got there: the writes a test made and had
// acknowledged, the owners that acknowledged writes under each epoch of each partition, and whether any
// node ever applied a map that took a partition's epoch back.
type ackLedger struct {
	mu       sync.Mutex
	values   map[string][]byte
	ackers   map[partitionEpoch]map[NodeID]int
	epochs   map[NodeID][]uint64 // per node, each partition's epoch in the last map it applied
	regressd []string
}

type partitionEpoch struct {
	p     int
	epoch uint64
}

func newAckLedger() *ackLedger {
	return &ackLedger{values: map[string][]byte{}, ackers: map[partitionEpoch]map[NodeID]int{}, epochs: map[NodeID][]uint64{}}
}

// watch is a config tweak that makes a node report its acknowledgements and its maps to the ledger.
func (l *ackLedger) watch(cfg *Config) {
	id := NodeID(cfg.Name)
	cfg.hooks.observeAck = l.observeAck
	cfg.hooks.beforeApply = func(next *ClusterMap) { l.applied(id, next) }
}

func (l *ackLedger) observeAck(owner NodeID, p int, epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := partitionEpoch{p, epoch}
	if l.ackers[k] == nil {
		l.ackers[k] = map[NodeID]int{}
	}
	l.ackers[k][owner]++
}

func (l *ackLedger) applied(id NodeID, next *ClusterMap) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := l.epochs[id]
	for p, st := range next.Runtime {
		if p < len(last) && st.Epoch < last[p] {
			l.regressd = append(l.regressd, fmt.Sprintf("%s: partition %d from epoch %d to %d at index %d", id, p, last[p], st.Epoch, next.Index))
		}
	}
	epochs := make([]uint64, len(next.Runtime))
	for p, st := range next.Runtime {
		epochs[p] = st.Epoch
	}
	l.epochs[id] = epochs
}

// put writes key through n and records it if the write was acknowledged.
func (l *ackLedger) put(ctx context.Context, n *Node, key string, value []byte) error {
	err := n.Put(ctx, key, value)
	if err == nil {
		l.mu.Lock()
		l.values[key] = value
		l.mu.Unlock()
	}
	return err
}

// keysIn returns the acknowledged keys of partition p.
func (l *ackLedger) keysIn(layout Layout, p int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys []string
	for k := range l.values {
		if layout.KeyPartition(k) == p {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// acks returns how many writes owner acknowledged as owner of partition p at epoch.
func (l *ackLedger) acks(p int, epoch uint64, owner NodeID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ackers[partitionEpoch{p, epoch}][owner]
}

// acksBy returns how many writes owner acknowledged as owner of partition p, under any epoch.
func (l *ackLedger) acksBy(p int, owner NodeID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, owners := range l.ackers {
		if k.p == p {
			n += owners[owner]
		}
	}
	return n
}

// check reads every acknowledged write back through every live node, and fails the test if one is lost,
// if two owners acknowledged writes under one epoch of a partition, or if a node's map took an epoch back.
func (l *ackLedger) check(t *testing.T, c *testCluster) {
	t.Helper()
	l.mu.Lock()
	values := maps.Clone(l.values)
	for k, owners := range l.ackers {
		if len(owners) > 1 {
			t.Errorf("partition %d at epoch %d: writes acknowledged by %d owners: %v", k.p, k.epoch, len(owners), owners)
		}
	}
	regressed := slices.Clone(l.regressd)
	l.mu.Unlock()
	for _, r := range regressed {
		t.Errorf("epoch went back: %s", r)
	}
	if len(values) == 0 {
		t.Fatal("no write was acknowledged")
	}
	lost := 0
	ctx := bg(t)
	for _, n := range c.live() {
		for k, want := range values {
			if got, err := n.Get(ctx, k); err != nil || !bytes.Equal(got, want) {
				lost++
				if lost <= 10 {
					t.Errorf("%s reads acknowledged %q = %q, %v; want %q", n.id, k, got, err, want)
				}
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d reads of %d acknowledged writes failed", lost, len(values))
	}
}

// isolate cuts node n off from every other live node: data, control plane and gossip.
func (c *testCluster) isolate(n *Node) {
	for _, other := range c.live() {
		if other != n {
			c.faults.Partition(string(n.id), string(other.id))
		}
	}
}

// owners returns the live nodes that actively own partition p in their own map.
func (c *testCluster) owners(p int) []NodeID {
	var ids []NodeID
	for _, n := range c.live() {
		if n.ownsIn(n.ClusterMap(), p) {
			ids = append(ids, n.id)
		}
	}
	return ids
}

// settledWithout reports whether every live node has one map, without a move, every partition Healthy,
// planned on exactly the live nodes.
func (c *testCluster) settledWithout() bool {
	m := c.currentMap()
	if m.moving() || !c.allHealthy() || !slices.Equal(m.plannedNodes(), nodeIDs(c.live())) {
		return false
	}
	for _, n := range c.live() {
		if n.ClusterMap().Index != m.Index {
			return false
		}
	}
	return true
}

// steadyControl is a config tweak that slows raft's heartbeats and elections, which run on the wall clock,
// so that a loaded machine does not move leadership on its own while a test holds a node.
func steadyControl(cfg *Config) {
	cfg.Timing.RaftHeartbeat = 500 * time.Millisecond
	cfg.Timing.RaftElection = 500 * time.Millisecond
	cfg.Timing.RaftLeaderLease = 250 * time.Millisecond
}

// holdPoint holds the one goroutine that reaches it first and lets it go on release; release may be called
// more than once, and is called at the test's end so that no node stays held while the cluster stops.
type holdPoint struct {
	held    atomic.Bool
	reached chan struct{}
	once    sync.Once
	go_     chan struct{}
}

func newHoldPoint(t *testing.T) *holdPoint {
	h := &holdPoint{reached: make(chan struct{}), go_: make(chan struct{})}
	t.Cleanup(h.release)
	return h
}

// hold blocks the first caller until release and reports whether it was that caller.
func (h *holdPoint) hold() bool {
	if !h.held.CompareAndSwap(false, true) {
		return false
	}
	close(h.reached)
	<-h.go_
	return true
}

func (h *holdPoint) release() { h.once.Do(func() { close(h.go_) }) }

// wasReached reports whether a caller is held, or was.
func (h *holdPoint) wasReached() bool {
	select {
	case <-h.reached:
		return true
	default:
		return false
	}
}

// currentLeader waits for a live node to lead the control plane and returns it.
func (c *testCluster) currentLeader(t *testing.T) *Node {
	t.Helper()
	var leader *Node
	waitFor(t, 20*time.Second, "a control-plane leader", func() bool {
		i := c.leader()
		if i >= 0 {
			leader = c.node(i)
		}
		return leader != nil
	})
	return leader
}

// TestInterleavingFailoverWhileCutoverSealed holds an owner handing a partition over right after it sealed
// it, crashes it there (cut off from every node, then closed), and only then lets it go on. The leader fails
// the partition over once FailoverTimeout has passed on the clock: it gets exactly one new owner, under a
// higher epoch, that holds every acknowledged write; the dead owner's settle never commits; and once the dead
// node is evicted (EvictionTimeout on the clock, the quickest way) the map settles Healthy without it.
func TestInterleavingFailoverWhileCutoverSealed(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	led := newAckLedger()
	var (
		c        *testCluster
		armed    atomic.Bool
		sealings atomic.Int32
		heldPart atomic.Int32
		heldBy   atomic.Pointer[NodeID]
	)
	seal := newHoldPoint(t)
	c = startCluster(t, 3, elastic(led.watch, steadyControl, func(cfg *Config) {
		cfg.Clock = clock
		id := NodeID(cfg.Name)
		cfg.hooks.afterSeal = func(p int) {
			sealings.Add(1)
			if !armed.Load() {
				return
			}
			if n := c.nodeByID(id); n == nil || n.IsLeader() || seal.held.Load() {
				return // the owner held is not the leader, so that the leader times its failure
			}
			heldPart.Store(int32(p))
			heldBy.Store(&id)
			seal.hold()
		}
	}))
	t.Cleanup(seal.release) // before the cluster stops: a held owner cannot close
	ctx := bg(t)
	layout := c.node(0).layout
	for p := range layout.Partitions {
		for i := range 3 {
			key := keyInPartition(layout, fmt.Sprintf("sealed-%d-%d-", p, i), p)
			if err := led.put(ctx, c.node(i), key, []byte(key)); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A fourth node makes the leader plan moves; the first owner other than the leader to seal one is held.
	armed.Store(true)
	c.add(3)
	advanceUntil(t, clock, 50*time.Millisecond, "an owner other than the leader to seal a partition it hands over", seal.wasReached)
	p := int(heldPart.Load())
	owner := c.nodeByID(*heldBy.Load())
	leader := c.currentLeader(t)
	before := leader.ClusterMap()
	st := before.Runtime[p]
	switch {
	case leader == owner:
		t.Fatalf("the held owner %s has become the leader", owner.id)
	case !owner.cut.isSealed(p):
		t.Fatalf("partition %d is not sealed on %s inside afterSeal", p, owner.id)
	case st.Owner != owner.id || len(st.Target) == 0 || st.Target[0] == owner.id:
		t.Fatalf("partition %d is %+v; want owned by %s and moving to another owner", p, st, owner.id)
	}
	keys := led.keysIn(layout, p)
	if len(keys) == 0 {
		t.Fatalf("no acknowledged write in partition %d", p)
	}
	if reply := owner.serveKV(ctx, opPut, &kvRequest{Key: keys[0], Value: []byte("sealed")}); reply.Status != StatusOwnershipChanging {
		t.Fatalf("sealed owner answered a write with %s; want OwnershipChanging", reply.Status)
	}

	// The owner crashes while held: cut off from every node, so that nothing it does once let go reaches
	// the cluster, then closed.
	c.isolate(owner)
	killed := make(chan struct{})
	victim := c.indexOf(owner.id)
	go func() {
		c.kill(victim)
		close(killed)
	}()
	waitFor(t, 20*time.Second, "gossip to report the held owner failed", func() bool {
		return memberStatus(c.currentLeader(t), owner.id) == serf.StatusFailed
	})
	seal.release()

	// The leader times the silence on the clock; a round may go to the control plane's own servers before
	// it decides, and a new leader would start timing afresh, so the clock moves on until the failover.
	timeout := c.cfgs[0].FailoverTimeout
	reconcileRound(t, c.currentLeader(t)) // the suspicion starts now, on the clock
	advanceUntil(t, clock, timeout/4, "the leader to fail the dead owner's partitions over", func() bool {
		leader = c.currentLeader(t)
		reconcileRound(t, leader)
		return leader.ClusterMap().OwnedBy(owner.id) == 0
	})
	after := leader.ClusterMap()
	now := after.Runtime[p]
	if now.Owner == "" || now.Epoch <= st.Epoch {
		t.Fatalf("partition %d after FailoverTimeout: %+v; want a new owner above epoch %d", p, now, st.Epoch)
	}
	if !slices.Contains(st.InSync, now.Owner) {
		t.Fatalf("partition %d promoted to %s, not one of its in-sync replicas %v", p, now.Owner, st.InSync)
	}
	if got, want := after.Promotions-before.Promotions, uint64(before.OwnedBy(owner.id)); got != want {
		t.Fatalf("%d promotions for the %d partitions of the dead owner", got, want)
	}

	// The held owner, let go, finds no one; its cut-over times out on the clock and it closes.
	advanceUntil(t, clock, c.cfgs[0].CutoverTimeout, "the crashed owner to close", func() bool {
		select {
		case <-killed:
			return true
		default:
			return false
		}
	})
	c.faults.HealAll() // the dead node's addresses refuse now, as a crashed process's would
	waitFor(t, 20*time.Second, "every node to apply the failover", func() bool {
		for _, n := range c.live() {
			if n.ClusterMap().Runtime[p].Epoch < now.Epoch {
				return false
			}
		}
		return true
	})
	newOwner := c.nodeByID(c.currentMap().Runtime[p].Owner)
	if got := c.owners(p); !slices.Equal(got, []NodeID{newOwner.id}) {
		t.Fatalf("partition %d is owned by %v after the failover; want %s alone", p, got, newOwner.id)
	}
	advanceUntil(t, clock, 50*time.Millisecond, "the new owner to recover the partition", func() bool {
		return newOwner.ClusterMap().Runtime[p].Health != Recovering
	})
	for _, k := range keys {
		if got, _, ok := newOwner.store.get(layout.KeySegment(k), k); !ok || string(got) != k {
			t.Fatalf("new owner %s holds %q = %q, %v; want the acknowledged value", newOwner.id, k, got, ok)
		}
	}

	advanceUntil(t, clock, 5*time.Second, "a Healthy map without the dead node", c.settledWithout)
	c.waitHealthy(20 * time.Second)
	final := c.currentMap().Runtime[p]
	if final.Owner == owner.id || final.Epoch < now.Epoch {
		t.Fatalf("partition %d at the end: %+v", p, final)
	}
	if got := led.acksBy(p, owner.id); got == 0 {
		t.Fatalf("the dead owner acknowledged no write of partition %d", p)
	}
	t.Logf("partition %d: held sealed on %s at epoch %d moving to %v; promoted to %s at epoch %d; ended on %s at epoch %d (%d seals)",
		p, owner.id, st.Epoch, st.Target, now.Owner, now.Epoch, final.Owner, final.Epoch, sealings.Load())
	led.check(t, c)
}
