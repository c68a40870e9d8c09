package zaris

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/kv"
)

// The tests of this file each drive one interleaving that real timers cannot produce on purpose: a manual
// clock stops the node's own timers, and test hooks hold a node at a chosen point while something else
// happens. Each counts what the cluster acknowledged and checks it afterwards.

// ackLedger counts what a cluster acknowledged and how it got there: the writes a test made and had
// acknowledged, the owners that acknowledged writes under each epoch of each partition, and whether any
// node ever applied a map that took a partition's epoch back.
type ackLedger struct {
	mu        sync.Mutex
	values    map[string][]byte
	ackers    map[partitionEpoch]map[NodeID]int
	epochs    map[NodeID][]uint64 // per node, each partition's epoch in the last map it applied
	regressed []string
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
			l.regressed = append(l.regressed, fmt.Sprintf("%s: partition %d from epoch %d to %d at index %d", id, p, last[p], st.Epoch, next.Index))
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

// putEverywhere writes three keys to every partition, one through each of c's first three nodes, each key
// its own value, and fails the test unless every write is acknowledged.
func (l *ackLedger) putEverywhere(t *testing.T, c *testCluster, prefix string) {
	t.Helper()
	layout := c.node(0).layout
	for p := range layout.Partitions {
		for i := range 3 {
			key := keyInPartition(layout, fmt.Sprintf("%s-%d-%d-", prefix, p, i), p)
			if err := l.put(bg(t), c.node(i), key, []byte(key)); err != nil {
				t.Fatal(err)
			}
		}
	}
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
	regressed := slices.Clone(l.regressed)
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

// owners returns the live nodes that actively own partition p in their own map.
func (c *testCluster) owners(p int) []NodeID {
	var ids []NodeID
	for _, n := range c.live() {
		if n.own.ownsIn(n.ClusterMap(), p) {
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

// holdPoint holds the one goroutine that reaches it first and lets it go on release. Release may be called
// more than once; a test registers it as a cleanup after starting its cluster, so that it runs before the
// cluster stops: a node held cannot close.
type holdPoint struct {
	held     atomic.Bool
	reached  chan struct{}
	once     sync.Once
	released chan struct{}
}

func newHoldPoint() *holdPoint {
	return &holdPoint{reached: make(chan struct{}), released: make(chan struct{})}
}

// hold blocks the first caller until release and reports whether it was that caller.
func (h *holdPoint) hold() bool {
	if !h.held.CompareAndSwap(false, true) {
		return false
	}
	close(h.reached)
	<-h.released
	return true
}

func (h *holdPoint) release() { h.once.Do(func() { close(h.released) }) }

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
	t.Parallel()
	clock := clocktest.New(time.Unix(1_000_000, 0))
	led := newAckLedger()
	var (
		c        *testCluster
		armed    atomic.Bool
		sealings atomic.Int32
		heldPart atomic.Int32
		heldBy   atomic.Pointer[NodeID]
	)
	seal := newHoldPoint()
	c = startCluster(t, 3, elastic(led.watch, steadyControl, func(cfg *Config) {
		cfg.Clock = clock
		id := NodeID(cfg.Name)
		cfg.hooks.afterSeal = func(p int) {
			sealings.Add(1)
			if !armed.Load() {
				return
			}
			if n := c.nodeByID(id); n == nil || n.IsLeader() {
				return // the owner held is not the leader, so that the leader times its failure
			}
			if heldBy.CompareAndSwap(nil, &id) {
				heldPart.Store(int32(p))
				seal.hold()
			} else if *heldBy.Load() == id {
				// The held owner settles no other move either: each partition it owns when held is one
				// the failover must promote.
				<-seal.released
			}
		}
	}))
	t.Cleanup(seal.release)
	ctx := bg(t)
	layout := c.node(0).layout
	led.putEverywhere(t, c, "sealed")

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
	case !owner.own.cut.isSealed(p):
		t.Fatalf("partition %d is not sealed on %s inside afterSeal", p, owner.id)
	case st.Owner != owner.id || len(st.Target) == 0 || st.Target[0] == owner.id:
		t.Fatalf("partition %d is %+v; want owned by %s and moving to another owner", p, st, owner.id)
	}
	keys := led.keysIn(layout, p)
	if len(keys) == 0 {
		t.Fatalf("no acknowledged write in partition %d", p)
	}
	if reply := owner.own.serveKV(ctx, kv.OpPut, &kv.Request{Key: keys[0], Value: []byte("sealed")}); reply.Status != StatusOwnershipChanging {
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
	// Each node judges by its own map, and the maps reach the nodes one by one.
	waitFor(t, 20*time.Second, "the new owner alone to own the partition by its map", func() bool {
		return slices.Equal(c.owners(p), []NodeID{newOwner.id})
	})
	advanceUntil(t, clock, 50*time.Millisecond, "the new owner to recover the partition", func() bool {
		return newOwner.ClusterMap().Runtime[p].Health != Recovering
	})
	for _, k := range keys {
		if got, _, ok := newOwner.own.store.get(layout.KeySegment(k), k); !ok || string(got) != k {
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

// decisionLog counts, per node, the promotions its leader's rounds were about to commit.
type decisionLog struct {
	mu       sync.Mutex
	promoted map[NodeID]map[int]int
}

func (l *decisionLog) promote(by NodeID, p int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.promoted[by] == nil {
		l.promoted[by] = map[int]int{}
	}
	l.promoted[by][p]++
}

func (l *decisionLog) by(id NodeID) map[int]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.promoted[id])
}

// TestInterleavingLeaderChangeBeforePromotionCommits kills an owner, lets the leader decide its failover
// once FailoverTimeout has passed on the clock, and holds the leader between the promotion it decided and
// its commit. Leadership moves to the third node meanwhile; released, the old leader's commit fails and
// changes nothing. The new leader times the owner's silence afresh and promotes each of its partitions
// exactly once, and no acknowledged write is lost.
func TestInterleavingLeaderChangeBeforePromotionCommits(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Unix(1_000_000, 0))
	led := newAckLedger()
	decisions := &decisionLog{promoted: map[NodeID]map[int]int{}}
	var (
		armed     atomic.Bool
		oldLeader atomic.Pointer[NodeID]
		heldCmd   atomic.Pointer[command]
	)
	promotion := newHoldPoint()
	c := startCluster(t, 3, replicated(2, led.watch, steadyControl, func(cfg *Config) {
		cfg.Clock = clock
		id := NodeID(cfg.Name)
		cfg.hooks.beforeCommitDecision = func(d decision) {
			if d.Kind != cmdPromote || !armed.Load() {
				return
			}
			decisions.promote(id, d.Partition)
			if l := oldLeader.Load(); l != nil && *l == id && !promotion.held.Load() {
				heldCmd.Store(&d.command)
				promotion.hold()
			}
		}
	}))
	t.Cleanup(promotion.release)
	ctx := bg(t)
	for i := range 300 {
		key := fmt.Sprintf("transfer-%d", i)
		if err := led.put(ctx, c.node(i%3), key, []byte(key)); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.currentLeader(t)
	l := c.indexOf(leader.id)
	victim, heir := c.node((l+1)%3), c.node((l+2)%3)
	before := leader.ClusterMap()
	var owned []int
	for p, st := range before.Runtime {
		if st.Owner == victim.id {
			owned = append(owned, p)
		}
	}
	if len(owned) == 0 {
		t.Fatal("the victim owns nothing")
	}

	oldLeader.Store(&leader.id)
	armed.Store(true)
	c.kill(c.indexOf(victim.id))
	waitFor(t, 20*time.Second, "gossip to report the victim failed", func() bool {
		return memberStatus(leader, victim.id) == serf.StatusFailed
	})
	reconcileRound(t, leader) // the suspicion starts now, on the clock
	if got := leader.ClusterMap().OwnedBy(victim.id); got != len(owned) {
		t.Fatalf("the victim lost %d partitions before FailoverTimeout", len(owned)-got)
	}
	clock.Advance(c.cfgs[0].FailoverTimeout)
	waitFor(t, 20*time.Second, "the leader to decide a promotion", func() bool {
		leader.ctl.wakeControl()
		return promotion.wasReached()
	})
	cmd := heldCmd.Load()
	if !slices.Contains(owned, cmd.Partition) || cmd.Epoch != before.Runtime[cmd.Partition].Epoch ||
		!slices.Contains(before.Runtime[cmd.Partition].InSync, cmd.Node.ID) {
		t.Fatalf("held decision %+v is not the promotion of one of %v to an in-sync replica", cmd, owned)
	}

	// Leadership moves to the heir while the old leader holds its promotion.
	ticks := leader.ctl.controlTicks.Load()
	if err := leader.ctl.raft.LeadershipTransferToServer(heir.ctl.serverID(), raft.ServerAddress(heir.DataAddr())).Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	waitFor(t, 20*time.Second, "the heir to lead, as the old leader knows", func() bool {
		return heir.IsLeader() && leader.ctl.leaderID() == heir.id
	})
	promotion.release()
	waitFor(t, 20*time.Second, "the old leader to end its round", func() bool {
		leader.ctl.wakeControl()
		return leader.ctl.controlTicks.Load() > ticks
	})
	for _, n := range c.live() {
		if m := n.ClusterMap(); m.OwnedBy(victim.id) != len(owned) || m.Promotions != before.Promotions {
			t.Fatalf("%s's map after the old leader's commit: the victim owns %d of %d, %d promotions of %d before",
				n.id, m.OwnedBy(victim.id), len(owned), m.Promotions, before.Promotions)
		}
	}

	// The heir times the silence from its own first round.
	newLeader := c.currentLeader(t)
	reconcileRound(t, newLeader)
	if got := newLeader.ClusterMap().OwnedBy(victim.id); got != len(owned) {
		t.Fatalf("the new leader failed %d partitions over before its own FailoverTimeout", len(owned)-got)
	}
	advanceUntil(t, clock, c.cfgs[0].FailoverTimeout/4, "the new leader to fail the victim's partitions over", func() bool {
		newLeader = c.currentLeader(t)
		reconcileRound(t, newLeader)
		return newLeader.ClusterMap().OwnedBy(victim.id) == 0
	})
	after := newLeader.ClusterMap()
	if got := after.Promotions - before.Promotions; got != uint64(len(owned)) {
		t.Fatalf("%d promotions for the %d partitions of the dead owner", got, len(owned))
	}
	if got := decisions.by(leader.id); len(got) != 1 || got[cmd.Partition] != 1 {
		t.Fatalf("the old leader decided promotions %v; want only the one held", got)
	}
	promoted := decisions.by(newLeader.id)
	waitFor(t, 20*time.Second, "every node to apply the failover", func() bool {
		for _, n := range c.live() {
			if n.ClusterMap().Index < after.Index {
				return false
			}
		}
		return true
	})
	for _, p := range owned {
		was, now := before.Runtime[p], after.Runtime[p]
		if promoted[p] != 1 || now.Epoch != was.Epoch+1 || !slices.Contains(was.InSync, now.Owner) {
			t.Fatalf("partition %d: promoted %d times by %s, now %+v; before %+v", p, promoted[p], newLeader.id, now, was)
		}
		if got := c.owners(p); !slices.Equal(got, []NodeID{now.Owner}) {
			t.Fatalf("partition %d is owned by %v; want %s alone", p, got, now.Owner)
		}
	}
	if len(promoted) != len(owned) {
		t.Fatalf("the new leader promoted %v; want each of %v once", promoted, owned)
	}
	t.Logf("%s held the promotion of partition %d at epoch %d to %s; %s promoted all %d partitions of %s",
		leader.id, cmd.Partition, cmd.Epoch, cmd.Node.ID, newLeader.id, len(owned), victim.id)
	for i := range 100 {
		key := keyInPartition(newLeader.layout, fmt.Sprintf("after-%d-", i), owned[i%len(owned)])
		if err := led.put(ctx, newLeader, key, []byte(key)); err != nil {
			t.Fatal(err)
		}
	}
	led.check(t, c)
}

// TestInterleavingRejoinWhileLeaseLapses drops a replica from a partition's in-sync set, lets it catch up,
// and holds the owner between finding it caught up and proposing its return. Meanwhile the owner is cut off
// from every node until its lease lapses: it refuses every write, and the admission it then proposes cannot
// reach the leader. Once FailoverTimeout has passed on the clock the leader gives the partition up
// (Unavailable: its one in-sync copy is the owner's); with the links healed it returns to the owner, which
// held every acknowledged write, and heals. Nothing acknowledged is lost and the partition has one owner.
func TestInterleavingRejoinWhileLeaseLapses(t *testing.T) {
	longScenario(t)
	t.Parallel()
	clock := clocktest.New(time.Unix(1_000_000, 0))
	led := newAckLedger()
	type admission struct {
		p       int
		replica NodeID
		epoch   uint64
	}
	var (
		holdRejoin atomic.Bool
		want       atomic.Pointer[admission]
		admits     atomic.Int32 // beforeAdmit calls for the admission watched
		admitted   atomic.Int32 // maps that show it committed at the epoch it was decided at
	)
	admit := newHoldPoint()
	c := startCluster(t, 3, replicated(2, led.watch, steadyControl, func(cfg *Config) {
		cfg.Clock = clock
		cfg.FailoverTimeout = time.Second // the lease, half of it, runs on the wall clock
		cfg.hooks.holdRejoin = func(int, NodeID) bool { return holdRejoin.Load() }
		cfg.hooks.beforeAdmit = func(p int, replica NodeID) {
			if w := want.Load(); w != nil && w.p == p && w.replica == replica {
				admits.Add(1)
				admit.hold()
			}
		}
		watched := cfg.hooks.beforeApply
		cfg.hooks.beforeApply = func(next *ClusterMap) {
			watched(next)
			if w := want.Load(); w != nil && next.Runtime[w.p].Epoch == w.epoch && slices.Contains(next.Runtime[w.p].InSync, w.replica) {
				admitted.Add(1)
			}
		}
	}))
	t.Cleanup(admit.release)
	c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	leader, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	layout := leader.layout
	for i := range 20 {
		key := keyInPartition(layout, fmt.Sprintf("lease-%d-", i), p)
		if err := led.put(ctx, c.node(i%3), key, []byte(key)); err != nil {
			t.Fatal(err)
		}
	}

	// A write cut off from the replica waits ReplicaAckTimeout on the clock, then drops it.
	holdRejoin.Store(true)
	dropKey := keyInPartition(layout, "lease-drop", p)
	degraded := dropReplicaOnClock(t, c, clock, leader, owner, replica, dropKey, func() error {
		return led.put(ctx, owner, dropKey, []byte(dropKey))
	})

	// The owner finds the replica caught up and is held before it proposes the return.
	want.Store(&admission{p, replica.id, degraded.Epoch})
	holdRejoin.Store(false)
	waitFor(t, 20*time.Second, "the owner to find the replica caught up", func() bool {
		owner.ctl.wakeControl() // nudges the link to the replica, which then rejoins it
		return admit.wasReached()
	})
	if st := owner.ClusterMap().Runtime[p]; st.Owner != owner.id || st.Epoch != degraded.Epoch || slices.Contains(st.InSync, replica.id) {
		t.Fatalf("partition %d inside beforeAdmit: %+v; want %s's at epoch %d without %s", p, st, owner.id, degraded.Epoch, replica.id)
	}

	// Cut off from every node, the owner's lease lapses: it acknowledges nothing.
	c.isolate(owner)
	waitFor(t, 5*time.Second, "the cut-off owner's lease to lapse", func() bool { return !owner.ctl.holdsLease() })
	acked := led.acksBy(p, owner.id)
	refused := 0
	for i := range 3 {
		key := keyInPartition(layout, fmt.Sprintf("lapsed-%d-", i), p)
		if reply := owner.own.serveKV(ctx, kv.OpPut, &kv.Request{Key: key, Value: []byte(key)}); reply.Status == StatusOwnershipChanging {
			refused++
		} else {
			t.Errorf("owner with a lapsed lease answered a write with %s; want OwnershipChanging", reply.Status)
		}
	}
	lapsedPut := make(chan error, 1)
	go func() { lapsedPut <- led.put(ctx, owner, keyInPartition(layout, "lapsed-put", p), []byte("lapsed")) }()
	err := advanceUntilReturns(t, clock, c.cfgs[0].RetryBackoff, "the put through the lapsed owner to give up", lapsedPut)
	if errors.Is(err, ErrOwnershipChanging) {
		refused++
	} else {
		t.Errorf("put through the owner with a lapsed lease: %v; want ErrOwnershipChanging", err)
	}
	if refused != 4 || led.acksBy(p, owner.id) != acked {
		t.Fatalf("with its lease lapsed the owner refused %d of 4 writes and acknowledged %d", refused, led.acksBy(p, owner.id)-acked)
	}
	admit.release()

	// The leader times the owner's silence on the clock; the partition's one in-sync copy is the owner's.
	waitFor(t, 20*time.Second, "gossip to report the cut-off owner failed", func() bool {
		return memberStatus(leader, owner.id) == serf.StatusFailed
	})
	reconcileRound(t, leader) // the suspicion starts now, on the clock
	advanceUntil(t, clock, c.cfgs[0].FailoverTimeout/4, "the leader to give the partition up", func() bool {
		leader = c.currentLeader(t)
		reconcileRound(t, leader)
		return leader.ClusterMap().Runtime[p].Owner != owner.id
	})
	lost := leader.ClusterMap().Runtime[p]
	if lost.Owner != "" || lost.Health != Unavailable || lost.Epoch != degraded.Epoch+1 || !slices.Equal(lost.InSync, []NodeID{owner.id}) {
		t.Fatalf("partition %d after FailoverTimeout: %+v; want Unavailable at epoch %d, held by %s alone", p, lost, degraded.Epoch+1, owner.id)
	}
	if _, err := leader.Get(ctx, dropKey); !errors.Is(err, ErrPartitionUnavailable) {
		t.Fatalf("get from the given-up partition: %v; want ErrPartitionUnavailable", err)
	}
	if led.acksBy(p, owner.id) != acked {
		t.Fatal("the cut-off owner acknowledged a write")
	}

	// Healed, the owner is alive again as the same process and gets its partition back, which then heals.
	c.faults.HealAll()
	advanceUntil(t, clock, 100*time.Millisecond, "the partition back with its owner and Healthy", func() bool {
		st := c.currentMap().Runtime[p]
		return st.Owner == owner.id && st.Health == Healthy && c.settledWithout()
	})
	c.waitHealthy(20 * time.Second)
	final := c.currentMap().Runtime[p]
	if final.Owner != owner.id || final.Epoch <= lost.Epoch {
		t.Fatalf("partition %d at the end: %+v; want %s's above epoch %d", p, final, owner.id, lost.Epoch)
	}
	if got := c.owners(p); !slices.Equal(got, []NodeID{owner.id}) {
		t.Fatalf("partition %d is owned by %v; want %s alone", p, got, owner.id)
	}
	if admits.Load() < 1 || admitted.Load() != 0 {
		t.Fatalf("%d admissions held, %d maps show the held admission committed at epoch %d", admits.Load(), admitted.Load(), degraded.Epoch)
	}
	t.Logf("partition %d: %s held admitting %s at epoch %d; %d writes refused while its lease lapsed; Unavailable at epoch %d, back Healthy at %d",
		p, owner.id, replica.id, degraded.Epoch, refused, lost.Epoch, final.Epoch)
	led.check(t, c)
}

// TestInterleavingReplanWhileCutoverSealed holds an owner right after it sealed a partition it hands over,
// and meanwhile plans that partition anew: the same target primary, another replica. The new plan drops the
// incoming nodes, so the target primary discards its copy, and the test holds its return to the in-sync set.
// Let go, the owner's settle must not commit, since it would make an empty node the owner: the owner reclaims
// the partition under the next epoch and serves on, the move starts again, and no acknowledged write is lost.
func TestInterleavingReplanWhileCutoverSealed(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Unix(1_000_000, 0))
	led := newAckLedger()
	var (
		armed     atomic.Bool
		heldPart  atomic.Int32
		heldBy    atomic.Pointer[NodeID]
		replanned atomic.Pointer[NodeID] // the target primary whose admission to the held partition waits
	)
	seal := newHoldPoint()
	readmit := make(chan struct{})
	letReadmit := sync.OnceFunc(func() { close(readmit) })
	c := startCluster(t, 3, elastic(led.watch, steadyControl, func(cfg *Config) {
		cfg.Clock = clock
		id := NodeID(cfg.Name)
		cfg.hooks.afterSeal = func(p int) {
			if armed.Load() && heldBy.CompareAndSwap(nil, &id) {
				heldPart.Store(int32(p))
				seal.hold()
			}
		}
		cfg.hooks.beforeAdmit = func(p int, replica NodeID) {
			if to := replanned.Load(); to != nil && *to == replica && int32(p) == heldPart.Load() {
				<-readmit
			}
		}
	}))
	t.Cleanup(letReadmit)
	t.Cleanup(seal.release)
	led.putEverywhere(t, c, "replan")

	armed.Store(true)
	c.add(3)
	advanceUntil(t, clock, 50*time.Millisecond, "an owner to seal a partition it hands over", seal.wasReached)
	p := int(heldPart.Load())
	owner := c.nodeByID(*heldBy.Load())
	leader := c.currentLeader(t)
	st := owner.ClusterMap().Runtime[p] // the map the owner sealed by, which the leader's may not have applied yet
	to := st.Target[0]
	if st.Owner != owner.id || to == owner.id || !slices.Contains(st.InSync, to) {
		t.Fatalf("partition %d is %+v; want owned by %s and its target primary in sync", p, st, owner.id)
	}

	// The same target primary with a replica the move did not have: a plan the leader keeps, since it
	// places partitions on the same nodes.
	other := slices.IndexFunc(nodeIDs(c.live()), func(id NodeID) bool { return !slices.Contains(st.Target, id) })
	next := leader.ClusterMap().planned()
	next[p] = []NodeID{to, nodeIDs(c.live())[other]}
	replanned.Store(&to)
	if _, void, err := leader.ctl.apply(&command{Kind: cmdPlan, Assignment: next}); err != nil || void {
		t.Fatalf("plan partition %d anew: void %v, %v", p, void, err)
	}
	waitFor(t, 20*time.Second, "every node to apply the new plan", func() bool {
		for _, n := range c.live() {
			if m := n.ClusterMap(); slices.Contains(m.Runtime[p].InSync, to) || !slices.Equal(m.Runtime[p].Target, next[p]) {
				return false
			}
		}
		return true
	})
	seal.release()

	advanceUntil(t, clock, 50*time.Millisecond, "the sealed owner's cut-over to end", func() bool {
		return owner.ClusterMap().Runtime[p].Epoch != st.Epoch && !owner.own.cut.isSealed(p)
	})
	if now := owner.ClusterMap().Runtime[p]; now.Owner != owner.id || now.Epoch != st.Epoch+1 {
		t.Fatalf("partition %d after the cut-over: %+v; want reclaimed by %s at epoch %d", p, now, owner.id, st.Epoch+1)
	}
	if got := owner.CutoverStats().Reclaimed; got == 0 {
		t.Fatalf("%s reclaimed nothing", owner.id)
	}
	letReadmit()
	advanceUntil(t, clock, 50*time.Millisecond, "the moves to settle", c.settledWithout)
	c.waitHealthy(20 * time.Second)
	led.check(t, c)
}

// TestInterleavingLeaveDuringAStalePlan holds the leader between deciding a plan that gives a joining node
// partitions and committing it, and meanwhile has that node drain: its map shows it holding nothing, but
// the plan still comes. Let go once the drain is over, the plan must not give the node a partition in any
// map after the drain ended.
func TestInterleavingLeaveDuringAStalePlan(t *testing.T) {
	t.Parallel()
	const joiner = NodeID("node-3") // the fourth node the cluster starts
	var (
		mu      sync.Mutex
		holding []uint64 // indexes of the maps node-0 applied that give the joiner something
		met     atomic.Bool
	)
	plan := newHoldPoint()
	c := startCluster(t, 3, elastic(func(cfg *Config) {
		var recorded atomic.Bool // this node applied a map that records the joiner's drain
		cfg.hooks.beforeCommitDecision = func(d decision) {
			gives := slices.ContainsFunc(d.Assignment, func(nodes []NodeID) bool { return slices.Contains(nodes, joiner) })
			if d.Kind == cmdPlan && gives && plan.hold() {
				met.Store(recorded.Load())
			}
		}
		logHolding := cfg.Name == "node-0"
		cfg.hooks.beforeApply = func(next *ClusterMap) {
			recorded.Store(next.draining(joiner))
			if logHolding && next.holds(joiner) {
				mu.Lock()
				holding = append(holding, next.Index)
				mu.Unlock()
			}
		}
	}))
	t.Cleanup(plan.release)
	ctx := bg(t)
	leaver := c.add(1)
	waitFor(t, 20*time.Second, "the leader to decide a plan with the joiner", plan.wasReached)
	waitFor(t, 20*time.Second, "the joiner to apply the cluster's map", func() bool { return leaver.ClusterMap().Version > 0 })
	if m := leaver.ClusterMap(); m.holds(joiner) {
		t.Fatalf("the joiner holds partitions before its plan committed: %+v", m.Runtime)
	}

	// The joiner holds nothing yet, so its drain ends while the plan is held.
	if err := leaver.ctl.drain(ctx); err != nil {
		t.Fatal(err)
	}
	leader := c.currentLeader(t)
	plan.release()
	end := leaver.ClusterMap()
	waitFor(t, 20*time.Second, "node-0 to apply the map the drain ended on", func() bool { return c.node(0).ClusterMap().Index >= end.Index })
	if i := slices.IndexFunc(statusPageOf(c.node(0)).view().Members, func(mb memberView) bool { return mb.Name == joiner }); i < 0 ||
		!statusPageOf(c.node(0)).view().Members[i].Draining {
		t.Fatal("node-0's status view does not show the joiner draining")
	}
	reconcileRound(t, leader)
	mu.Lock()
	last := slices.Max(append(holding, 0))
	mu.Unlock()
	if last > end.Index {
		t.Fatalf("the map at index %d gives the joiner partitions, after its drain ended at index %d", last, end.Index)
	}
	if !end.draining(joiner) || end.holds(joiner) {
		t.Fatalf("the drain ended on a map where the joiner drains: %v, holds partitions: %v", end.draining(joiner), end.holds(joiner))
	}
	if !met.Load() {
		t.Fatal("the held plan was let go before the leader's map recorded the drain: the interleaving did not happen")
	}
	if err := leaver.Leave(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestInterleavingDrainAfterARestartUnderTheSameName has a node drain and leave, and a new process under its
// name drain while the leader holds off recording it: the map still records the first process draining. The
// second process's drain must not end on that record: it ends once the leader has recorded it and its own
// drain.
func TestInterleavingDrainAfterARestartUnderTheSameName(t *testing.T) {
	t.Parallel()
	const name = NodeID("node-3") // the fourth node the cluster starts
	var held atomic.Bool
	c := startCluster(t, 3, elastic(func(cfg *Config) {
		cfg.hooks.holdRecognition = func(id NodeID) bool { return held.Load() && id == name }
	}))
	ctx := bg(t)
	first := c.add(1)
	waitFor(t, 20*time.Second, "the first process to be given partitions", func() bool { return first.ClusterMap().holds(name) })
	if err := first.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.node(0).ClusterMap().Draining[name]; got != first.own.repl.incarnation {
		t.Fatalf("the map records the drain of process %d, want %d", got, first.own.repl.incarnation)
	}

	held.Store(true)
	second := c.restart(c.indexOf(name))
	waitFor(t, 20*time.Second, "the second process to apply the map", func() bool { return second.ClusterMap().Version > 0 })
	drained := make(chan error, 1)
	go func() { drained <- second.ctl.drain(ctx) }()
	leader := c.currentLeader(t)
	waitFor(t, 20*time.Second, "the leader to see the second process leaving", func() bool {
		return slices.ContainsFunc(leader.members.members(), func(mb member) bool {
			return mb.ID == name && mb.Incarnation == second.own.repl.incarnation && mb.Leaving
		})
	})
	held.Store(false)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	end := second.ClusterMap()
	if got := end.Draining[name]; got != second.own.repl.incarnation || end.Nodes[name].Incarnation != second.own.repl.incarnation || end.holds(name) {
		t.Fatalf("the drain ended on a map recording process %d draining and %d as the node (holds partitions: %v); want %d for both",
			got, end.Nodes[name].Incarnation, end.holds(name), second.own.repl.incarnation)
	}
	if err := second.Leave(ctx); err != nil {
		t.Fatal(err)
	}
}
