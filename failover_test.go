package zaris

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// TestFailoverLosesNoAcknowledgedWrite kills an owner after Sync writes: once the leader confirms the death,
// each of its partitions is served by its in-sync replica under a higher epoch, every acknowledged write is
// readable from every survivor, and the restarted node rejoins as a replica that catches up until the
// partitions are Healthy again.
func TestFailoverLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	ctx := bg(t)
	written := map[string][]byte{}
	for i := 0; i < 600; i++ {
		key := fmt.Sprintf("ledger-%d", i)
		value := []byte(fmt.Sprintf("entry %d", i))
		if err := c.node(i%3).Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
		written[key] = value
	}
	victim := (c.leader() + 1) % 3
	dead := c.node(victim).id
	before := c.leaderNode().ClusterMap()
	owned := before.OwnedBy(dead)
	if owned == 0 {
		t.Fatal("the victim owns nothing")
	}
	c.kill(victim)
	c.waitFailedOver(dead, 20*time.Second)
	after := c.currentMap()
	for p, st := range before.Runtime {
		if st.Owner != dead {
			continue
		}
		now := after.Runtime[p]
		if now.Epoch <= st.Epoch || now.Health != Degraded || now.Owner != st.InSync[0] {
			t.Fatalf("partition %d after failover: %+v; before: %+v", p, now, st)
		}
		if !slices.Equal(after.Assignment[p], before.Assignment[p]) {
			t.Fatalf("partition %d: failover changed the partition map", p)
		}
	}
	lost := 0
	for _, n := range c.live() {
		for key, want := range written {
			if got, err := n.Get(ctx, key); err != nil || !bytes.Equal(got, want) {
				lost++
				t.Errorf("%s reads %s = %q, %v; want %q", n.id, key, got, err, want)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d acknowledged reads failed after failover", lost)
	}

	back := c.restart(victim)
	waitFor(t, 10*time.Second, "the control plane to record the restarted process", func() bool {
		return c.currentMap().Nodes[dead].Incarnation == back.own.repl.incarnation
	})
	waitFor(t, 30*time.Second, "every partition Healthy again", c.allHealthy)
	assertReplicasMatch(t, c)
}

// TestLeaveHandsPartitionsToReplicas checks that a graceful leave hands the node's partitions over without
// waiting for the failure timeout, and loses no acknowledged write. The failure timeout is ten minutes, so
// a handover by failure could not end within the wait.
func TestLeaveHandsPartitionsToReplicas(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.FailoverTimeout, cfg.EvictionTimeout = 10*time.Minute, 10*time.Minute
	}))
	ctx := bg(t)
	for i := 0; i < 300; i++ {
		if err := c.node(i%3).Put(ctx, fmt.Sprintf("k%d", i), []byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	leaver := (c.leader() + 1) % 3
	n := c.node(leaver)
	if err := n.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.nodes[leaver] = nil
	c.mu.Unlock()
	waitFor(t, time.Minute, "the leaver's partitions to move", func() bool {
		return c.live()[0].ClusterMap().OwnedBy(n.id) == 0
	})
	for i := 0; i < 300; i++ {
		key := fmt.Sprintf("k%d", i)
		if got, err := c.live()[0].Get(ctx, key); err != nil || string(got) != fmt.Sprintf("v%d", i) {
			t.Fatalf("after leave %s = %q, %v", key, got, err)
		}
	}
}

// TestOwnerCutOffFromControlPlaneStopsServing isolates an owner from every other node while it could still
// be reached by a client of its own: once its lease lapses it refuses to serve its partitions, and it serves
// again when the link heals.
func TestOwnerCutOffFromControlPlaneStopsServing(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	ctx := bg(t)
	owner := c.node((c.leader() + 1) % 3)
	key := c.keyOwnedBy("leased", owner)
	if err := owner.Put(ctx, key, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	c.isolate(owner)
	waitFor(t, 5*time.Second, "the cut-off owner's lease to lapse", func() bool { return !owner.ctl.holdsLease() })
	if reply := owner.own.serveKV(ctx, kv.OpGet, &kv.Request{Key: key}); reply.Status != StatusOwnershipChanging {
		t.Fatalf("cut-off owner answered %s; want OwnershipChanging", reply.Status)
	}
	if _, err := owner.Get(ctx, key); !errors.Is(err, ErrOwnershipChanging) {
		t.Fatalf("get through the cut-off owner: err = %v; want ErrOwnershipChanging", err)
	}
	c.faults.HealAll()
	waitFor(t, 10*time.Second, "the owner to serve again", func() bool {
		got, err := owner.Get(ctx, key)
		return err == nil && string(got) == "v1"
	})
}

// TestRestartedOwnerDoesNotServeWhatItLost restarts an owner, without a data dir, faster than the failure
// timeout: the restarted process must not serve the partitions its previous process owned (it holds none
// of their data); they fail over to in-sync replicas and every acknowledged write stays readable.
func TestRestartedOwnerDoesNotServeWhatItLost(t *testing.T) {
	c := startCluster(t, 3, replicated(2)) // FailoverTimeout stays at its 10 s default
	ctx := bg(t)
	victim := c.node(1)
	var keys []string
	for i := range 50 {
		k := c.keyOwnedBy(fmt.Sprintf("own%d-", i), victim)
		keys = append(keys, k)
		if err := c.node(0).Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	c.kill(1)
	restarted := c.restart(1)
	waitFor(t, 20*time.Second, "the restarted process recorded in the map", func() bool {
		return c.currentMap().Nodes[restarted.id].Incarnation == restarted.own.repl.incarnation
	})
	if elapsed := time.Since(start); elapsed >= 10*time.Second {
		t.Fatalf("took %v: the partitions waited for the failure timeout", elapsed)
	}
	for _, k := range keys {
		for _, n := range c.live() {
			if got, err := n.Get(ctx, k); err != nil || string(got) != k {
				t.Fatalf("get %q through %s = %q, %v", k, n.id, got, err)
			}
		}
	}
}

// TestHealingWaitsForCooldown restarts a replica three times in a row. Each restart takes it out of the
// in-sync set of the partitions it replicates; each time it catches up the cool-down starts again, so the
// partitions return to Healthy once, under one new epoch, not once per flap.
func TestHealingWaitsForCooldown(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.HealCooldown = 3 * time.Second }))
	ctx := bg(t)
	m := c.currentMap()
	flap := (c.leader() + 1) % 3 // not the leader: its restarts should not hold up control decisions
	flapper := c.node(flap)
	p := slices.IndexFunc(m.Assignment, func(a []NodeID) bool { return a[0] != flapper.id && slices.Contains(a, flapper.id) })
	key := keyInPartition(m.Layout(), "flap", p)
	epoch := m.Runtime[p].Epoch
	for i := range 3 {
		c.kill(flap)
		// The write waits for the dead replica, then has it dropped from the in-sync set.
		if err := c.owner(key).Put(ctx, key, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		flapper = c.restart(flap)
		waitFor(t, 20*time.Second, "the replica back in sync", func() bool {
			st := c.currentMap().Runtime[p]
			return slices.Contains(st.InSync, flapper.id)
		})
		if st := c.currentMap().Runtime[p]; st.Health != Degraded {
			t.Fatalf("flap %d: partition %d is %v as soon as its replica is back; want Degraded until the cool-down ends", i, p, st.Health)
		}
	}
	waitFor(t, 20*time.Second, "the partition Healthy again", func() bool { return c.currentMap().Runtime[p].Health == Healthy })
	if got := c.currentMap().Runtime[p].Epoch; got != epoch+1 {
		t.Fatalf("partition %d went from epoch %d to %d over three flaps; want one healing epoch", p, epoch, got)
	}
}

// writeOnOwnerAlone waits for c to be Healthy, cuts the owner of a partition the leader holds no copy of
// from its only replica and writes value to a key of it, so that the owner alone holds that acknowledged
// write: the replica is out of the in-sync set. The cut stays until the test heals it.
func writeOnOwnerAlone(t *testing.T, c *testCluster, value string) (leader *Node, p int, owner *Node, key string) {
	t.Helper()
	c.waitHealthy(20 * time.Second)
	leader, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	key = keyInPartition(leader.layout, "kept", p)
	c.faults.Partition(string(owner.id), string(replica.id))
	if err := owner.Put(bg(t), key, []byte(value)); err != nil {
		t.Fatal(err)
	}
	if st := leader.ClusterMap().Runtime[p]; len(st.InSync) != 0 {
		t.Fatalf("in-sync set %v after a write the replica could not get; want it empty", st.InSync)
	}
	return leader, p, owner, key
}

// TestLostPartitionReturnsWithItsOwner cuts an owner from its only replica, so it alone holds its latest
// acknowledged write, then from everyone: the partition is declared lost (Unavailable). When the owner
// comes back as the same process, it is given the partition again and the write is readable.
func TestLostPartitionReturnsWithItsOwner(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	ctx := bg(t)
	leader, p, owner, key := writeOnOwnerAlone(t, c, "only on the owner")
	c.faults.Partition(string(owner.id), string(leader.id))
	waitFor(t, 20*time.Second, "the cut-off owner's partition to be declared lost, and routed so", func() bool {
		return leader.ClusterMap().Runtime[p].Health == Unavailable && leader.client.router.current().m.Runtime[p].Health == Unavailable
	})
	if _, err := leader.Get(ctx, key); !errors.Is(err, ErrPartitionUnavailable) {
		t.Fatalf("get from a lost partition: err = %v; want ErrPartitionUnavailable", err)
	}
	c.faults.HealAll()
	waitFor(t, 20*time.Second, "every node to see the owner given its partition back", func() bool {
		for _, n := range c.live() {
			if st := n.ClusterMap().Runtime[p]; st.Owner != owner.id || st.Health == Unavailable {
				return false
			}
		}
		return true
	})
	for _, n := range c.live() {
		if got, err := n.Get(ctx, key); err != nil || string(got) != "only on the owner" {
			t.Fatalf("get %q through %s = %q, %v", key, n.id, got, err)
		}
	}
	c.waitHealthy(30 * time.Second)
}

// TestLostPartitionWaitsForItsDisk cuts an owner from its only replica, so it alone holds its latest
// acknowledged write, then kills it: the partition is lost. Its copies are on its data dir, so the
// partition is neither recreated empty on the live replica nor moved away when EvictionTimeout passes; once
// the owner restarts from its data dir, it is given the partition back and the write is readable.
func TestLostPartitionWaitsForItsDisk(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.DataDir = filepath.Join(base, cfg.Name)
		cfg.FailoverTimeout = 500 * time.Millisecond
		cfg.EvictionTimeout = time.Second
	}))
	ctx := bg(t)
	leader, p, owner, key := writeOnOwnerAlone(t, c, "only on the owner's disk")
	ownerIdx := slices.Index(c.nodes, owner)
	c.kill(ownerIdx)
	c.faults.HealAll()
	waitFor(t, 20*time.Second, "the dead owner's partition to be declared lost", func() bool {
		return leader.ClusterMap().Runtime[p].Health == Unavailable
	})
	lostAt, ticks := time.Now(), leader.ctl.controlTicks.Load()
	waitFor(t, 20*time.Second, "EvictionTimeout to pass on the leader's countdowns", func() bool {
		return time.Since(lostAt) > 3*c.cfgs[0].EvictionTimeout && leader.ctl.controlTicks.Load() > ticks+10
	})
	m := leader.ClusterMap()
	if st := m.Runtime[p]; st.Owner != "" || !slices.Contains(m.Assignment[p], owner.id) {
		t.Fatalf("partition %d given up while its owner's disk held it: owner %q, assigned %v", p, st.Owner, m.Assignment[p])
	}
	back := c.restart(ownerIdx)
	for _, n := range c.live() {
		var got []byte
		var err error
		waitFor(t, 20*time.Second, "an answer through "+string(n.id), func() bool {
			got, err = n.Get(ctx, key)
			return err == nil || errors.Is(err, ErrNotFound) // anything else: not served yet
		})
		if err != nil || string(got) != "only on the owner's disk" {
			t.Fatalf("get %q through %s = %q, %v", key, n.id, got, err)
		}
	}
	if st := back.ClusterMap().Runtime[p]; st.Owner != back.id {
		t.Fatalf("partition %d owned by %q after its owner came back, want %s", p, st.Owner, back.id)
	}
}

// TestMovingPartitionWaitsForItsCutOffReplica checks that a partition that a rebalance plans to move to a joining
// node loses its owner while its only in-sync replica is cut off from the others. The replica is alive and
// holds every acknowledged write, so the partition may be unavailable meanwhile, but once the replica is
// reachable again every acknowledged write must be readable.
func TestMovingPartitionWaitsForItsCutOffReplica(t *testing.T) {
	longScenario(t)
	t.Parallel()
	var held atomic.Value // the joining node, kept out of every in-sync set so that no move settles
	held.Store(NodeID(""))
	c := startCluster(t, 5, elastic(func(cfg *Config) {
		cfg.FailoverTimeout = 500 * time.Millisecond
		cfg.EvictionTimeout = time.Hour
		cfg.ReplicaAckTimeout = time.Second
		cfg.hooks.holdRejoin = func(_ int, replica NodeID) bool { return replica == held.Load().(NodeID) }
	}))
	held.Store(NodeID("node-5"))
	joiner := c.add(1)
	var p int
	var owner, replica NodeID
	waitFor(t, 20*time.Second, "a partition planned to move to the joiner, away from the leader", func() bool {
		l := c.leader()
		if l < 0 {
			return false
		}
		leader := c.node(l).id
		m := c.currentMap()
		for q, st := range m.Runtime {
			if st.Target == nil || st.Target[0] != joiner.id || len(st.InSync) != 1 {
				continue
			}
			owner, replica = st.Owner, st.InSync[0]
			if owner != leader && replica != leader {
				p = q
				return true
			}
		}
		return false
	})
	c.faults.Blackhole(string(owner), string(joiner.id)) // the joiner gets none of the writes below
	layout := c.currentMap().Layout()
	ctx := context.Background()
	var keys []string
	for i := range 20 {
		key := keyInPartition(layout, fmt.Sprintf("moving-%d-", i), p)
		waitFor(t, 10*time.Second, "put "+key+" acknowledged", func() bool {
			return c.nodeByID(owner).Put(ctx, key, []byte(key)) == nil
		})
		keys = append(keys, key)
	}
	waitFor(t, 10*time.Second, "the replica in sync", func() bool {
		return slices.Equal(c.currentMap().Runtime[p].InSync, []NodeID{replica})
	})
	for _, n := range c.live() {
		if n.id != replica {
			c.faults.Partition(string(replica), string(n.id))
		}
	}
	var trace []string
	stopTrace := make(chan struct{})
	traced := make(chan struct{})
	go func() {
		defer close(traced)
		var last string
		for {
			select {
			case <-stopTrace:
				return
			case <-time.After(time.Millisecond):
			}
			m := c.currentMap()
			st := m.Runtime[p]
			cur := fmt.Sprintf("%+v assigned %v", st, m.Assignment[p])
			if cur != last {
				trace = append(trace, fmt.Sprintf("index %d: %s", m.Index, cur))
				last = cur
			}
		}
	}()
	c.kill(c.indexOf(owner))
	t.Logf("partition %d: owner %s killed, in-sync replica %s cut off, planned target %v", p, owner, replica, c.currentMap().Runtime[p].Target)
	waitFor(t, 20*time.Second, "the leader to act on the dead owner", func() bool { return c.currentMap().Runtime[p].Owner != owner })
	// The partition should now wait for its replica; give the leader 3 s to decide otherwise.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && c.currentMap().Runtime[p].Owner == ""; {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("partition %d after the failover: %+v", p, c.currentMap().Runtime[p])
	c.faults.HealAll()
	var reader *Node
	waitFor(t, 10*time.Second, "a leader", func() bool {
		l := c.leader()
		if l >= 0 {
			reader = c.node(l)
		}
		return reader != nil
	})
	probe := keyInPartition(layout, "probe-", p)
	waitFor(t, 30*time.Second, "the partition to serve again", func() bool {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := reader.Get(cctx, probe)
		return err == nil || errors.Is(err, ErrNotFound)
	})
	t.Logf("partition %d once served: %+v assigned %v", p, c.currentMap().Runtime[p], c.currentMap().Assignment[p])
	close(stopTrace)
	<-traced
	for _, l := range trace {
		t.Log(l)
	}
	var lost []string
	for _, k := range keys {
		if v, err := served(t, func() ([]byte, error) { return reader.Get(ctx, k) }); err != nil || string(v) != k {
			lost = append(lost, fmt.Sprintf("%s: %q, %v", k, v, err))
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged writes lost, although their in-sync replica %s stayed alive: %v", len(lost), len(keys), replica, lost[:min(3, len(lost))])
	}
}

// TestLeaveWaitsWhileCutOff starts a graceful Leave on a node cut off from every other one: it sees no other
// member alive, but neither does it hear from the control plane, so that is no proof that no one could take
// its partitions. It keeps draining until its context ends, and says so, rather than leave at once with
// copies no one else may hold.
func TestLeaveWaitsWhileCutOff(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = 500 * time.Millisecond }))
	leaver := c.node((c.leader() + 1) % 3)
	defer c.faults.HealAll()
	for _, n := range c.live() {
		if n != leaver {
			c.faults.Partition(string(leaver.id), string(n.id))
		}
	}
	waitFor(t, 10*time.Second, "the cut-off node to see no other member", func() bool { return !leaver.ctl.othersCanHold() })
	ctx, cancel := context.WithTimeout(bg(t), 3*time.Second)
	defer cancel()
	start := time.Now()
	err := leaver.Leave(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Leave of a cut-off node after %v: %v, want it to wait for its context", time.Since(start).Round(time.Millisecond), err)
	}
}

// TestDrainLogsALastingRefusalOnce has the leader refuse every proposal, as a node of an older version
// refuses an op it does not know, so that each attempt of a leaving node to record its drain fails the same
// way, every RaftCommit. The drain waits for its context and logs the refusal once, not once per attempt.
func TestDrainLogsALastingRefusalOnce(t *testing.T) {
	t.Parallel()
	var refusing atomic.Bool
	c := startCluster(t, 3, replicated(2, steadyControl, func(cfg *Config) {
		cfg.hooks.refuseOp = func(op transport.Op) bool { return refusing.Load() && op == kv.OpPropose }
	}))
	leaver := c.node((c.leader() + 1) % 3)
	refusing.Store(true)
	ctx, cancel := context.WithTimeout(bg(t), 2*time.Second)
	defer cancel()
	if err := leaver.Leave(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Leave with every proposal refused: %v, want it to wait for its context", err)
	}
	warnings := 0
	for line := range strings.Lines(c.logs.String()) {
		if strings.Contains(line, "drain not recorded yet") && strings.Contains(line, "node="+string(leaver.id)+" ") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Fatalf("the drain logged its refusal %d times in 2s, want once", warnings)
	}
}

// TestReconnectedOwnerServesNothingStale isolates an owner until its partition fails over and the new owner
// takes a write, then heals the network. From then on the old owner, asked directly, must never answer with
// the value the new owner replaced: its lease comes back with the leader's first heartbeat, but it serves
// only once its map has caught up with the leader's log, which names the new owner.
func TestReconnectedOwnerServesNothingStale(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	ctx := bg(t)
	owner := c.node((c.leader() + 1) % 3)
	key := c.keyOwnedBy("reconnected", owner)
	must(t, owner.Put(ctx, key, []byte("old")))
	c.isolate(owner)
	leader, p := c.leaderNode(), owner.layout.KeyPartition(key)
	waitFor(t, 20*time.Second, "the partition to fail over", func() bool {
		st := leader.ClusterMap().Runtime[p]
		return st.Owner != "" && st.Owner != owner.id
	})
	newOwner := c.nodeByID(leader.ClusterMap().Runtime[p].Owner)
	waitFor(t, 10*time.Second, "a write through the new owner", func() bool { return newOwner.Put(ctx, key, []byte("new")) == nil })
	c.faults.HealAll()
	deadline := time.Now().Add(3 * time.Second)
	served := 0
	for time.Now().Before(deadline) {
		reply := owner.own.serveKV(ctx, kv.OpGet, &kv.Request{Key: key})
		if reply.Status == StatusSuccess {
			served++
			if string(reply.Value) != "new" {
				t.Fatalf("the reconnected owner served %q after the new owner wrote %q", reply.Value, "new")
			}
		}
		time.Sleep(time.Millisecond)
	}
	waitFor(t, 10*time.Second, "the reconnected node to send the key to its new owner", func() bool {
		return owner.own.serveKV(ctx, kv.OpGet, &kv.Request{Key: key}).Status == StatusMoved
	})
	t.Logf("the reconnected owner served the key %d times, never stale, then redirected it", served)
}

// TestLostPartitionsComeBackEmpty cuts off an owner until its replica takes its partitions over and
// acknowledges writes alone, kills that replica, and only then reconnects the first owner. Those
// partitions have lost every copy of their last writes; wherever they are recreated, the deposed owner
// included, they must come back empty rather than with the copy it was deposed from.
func TestLostPartitionsComeBackEmpty(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startCluster(t, 5, replicated(2, func(cfg *Config) {
		cfg.FailoverTimeout, cfg.EvictionTimeout = time.Second, 4*time.Second
	}))
	ctx := bg(t)
	_, first, nodes := c.awayFromLeader()
	deposed, replica := nodes[0], nodes[1]
	m := c.currentMap()
	var keys []string
	for p, ids := range m.Assignment {
		if slices.Equal(ids, m.Assignment[first]) && m.Runtime[p].Owner == deposed.id {
			keys = append(keys, keyInPartition(deposed.layout, "lost-", p))
			must(t, deposed.Put(ctx, keys[len(keys)-1], []byte("old")))
		}
	}
	c.isolate(deposed)
	owners := func(id NodeID) bool {
		m := c.currentMap()
		for _, key := range keys {
			if m.Runtime[m.Layout().KeyPartition(key)].Owner != id {
				return false
			}
		}
		return true
	}
	waitFor(t, 20*time.Second, "the replica to take the partitions over", func() bool { return owners(replica.id) })
	for _, key := range keys {
		waitFor(t, 10*time.Second, "a write through the new owner", func() bool { return replica.Put(ctx, key, []byte("new")) == nil })
	}
	c.kill(c.indexOf(replica.id))
	waitFor(t, 20*time.Second, "the partitions to be lost", func() bool { return owners("") })
	c.faults.HealAll()
	waitFor(t, 30*time.Second, "every node to route the partitions to a new owner", func() bool {
		for _, n := range c.live() {
			if slices.ContainsFunc(keys, func(key string) bool {
				return n.client.router.current().m.Runtime[n.layout.KeyPartition(key)].Owner == ""
			}) {
				return false
			}
		}
		return true
	})
	onDeposed := 0
	for _, key := range keys {
		p := deposed.layout.KeyPartition(key)
		if c.currentMap().Runtime[p].Owner == deposed.id {
			onDeposed++
		}
		for _, n := range c.live() {
			if v, err := n.Get(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s read %q = %q, %v after partition %d was recreated; want not found (partition: %+v)",
					n.id, key, v, err, p, c.currentMap().Runtime[p])
			}
		}
	}
	t.Logf("%d partitions lost and recreated empty, %d of them on the node deposed from them", len(keys), onDeposed)
}

// TestDeposedOwnerRefusesReads checks that a read on an owner whose copy is being discarded, as happens
// just before the map that deposes it is published, is refused rather than answered from the emptied copy.
func TestDeposedOwnerRefusesReads(t *testing.T) {
	c := startCluster(t, 1, nil)
	n := c.nodes[0]
	ctx := context.Background()
	if err := n.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if reply := n.own.serveKV(ctx, kv.OpGet, &kv.Request{Key: "k"}); reply.Status != StatusSuccess {
		t.Fatalf("get on the owner: %v", reply.Status)
	}
	seg := n.layout.KeySegment("k")
	p := n.layout.SegmentPartition(seg)
	epoch := n.ClusterMap().Runtime[p].Epoch
	n.own.repl.discard(p, epoch+1) // a newer epoch, whose map is not published yet
	for _, op := range []transport.Op{kv.OpGet, kv.OpGetEntry, kv.OpExists} {
		if reply := n.own.serveKV(ctx, op, &kv.Request{Key: "k"}); reply.Status != StatusOwnershipChanging {
			t.Errorf("op %d on the discarded copy: %v; want OwnershipChanging", op, reply.Status)
		}
	}
	status := n.own.readAtomically(ctx, seg, []string{"k"}, func(kv.Group) { t.Error("read the discarded copy") })
	if status != StatusOwnershipChanging {
		t.Errorf("an atomic read of the discarded copy: %v; want OwnershipChanging", status)
	}
}
