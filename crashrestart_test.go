package zaris

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// restartHooks lets a test hold a cluster at chosen moments of a node's restart or of a replica's return to
// the in-sync set. Every node of the cluster is started with its hooks; each hook is inert until set.
type restartHooks struct {
	partition atomic.Int64 // the partition the hooks act on; -1 for none
	rejoiner  atomic.Value // NodeID kept out of the partition's in-sync set while holdRejoin is set
	holdJoin  atomic.Bool
	// unrecognized is the member whose restarted process the leader does not record while it is set.
	unrecognized atomic.Value
	// paused is the node whose next process applies no map newer than pauseAfter until resume is closed.
	paused     atomic.Value
	pauseAfter atomic.Uint64
	resume     chan struct{}
	resumeOnce sync.Once
	// admit, when set, runs once on the owner between the catch-up check and the admission proposal.
	admit atomic.Pointer[func()]
}

func newRestartHooks() *restartHooks {
	h := &restartHooks{resume: make(chan struct{})}
	h.partition.Store(-1)
	h.rejoiner.Store(NodeID(""))
	h.unrecognized.Store(NodeID(""))
	h.paused.Store(NodeID(""))
	return h
}

// release lets every held node go on; a test defers it, since a node held in apply cannot close.
func (h *restartHooks) release() { h.resumeOnce.Do(func() { close(h.resume) }) }

// startHeldCluster starts three nodes, RF 2, with the hooks installed, a fast failover and no heal during
// the test (a partition keeps its epoch).
func startHeldCluster(t *testing.T, more ...func(*Config)) (*testCluster, *restartHooks) {
	h := newRestartHooks()
	c := startCluster(t, 3, replicated(2, append([]func(*Config){h.install, func(cfg *Config) {
		cfg.FailoverTimeout = time.Second
		cfg.HealCooldown = 10 * time.Minute
	}}, more...)...))
	return c, h
}

// watch makes the hooks act on partition p and its replica.
func (h *restartHooks) watch(p int, replica NodeID) {
	h.partition.Store(int64(p))
	h.rejoiner.Store(replica)
}

// install wires the hooks into cfg.
func (h *restartHooks) install(cfg *Config) {
	name := NodeID(cfg.Name)
	cfg.hooks.holdRejoin = func(p int, replica NodeID) bool {
		if int64(p) != h.partition.Load() {
			// A node held at an old map would wait on its own apply to admit a replica elsewhere.
			return name == h.paused.Load()
		}
		return h.holdJoin.Load() && replica == h.rejoiner.Load()
	}
	cfg.hooks.holdRecognition = func(id NodeID) bool { return id == h.unrecognized.Load() }
	cfg.hooks.beforeApply = func(next *ClusterMap) {
		if name == h.paused.Load() && next.Index > h.pauseAfter.Load() {
			<-h.resume
		}
	}
	cfg.hooks.beforeAdmit = func(p int, replica NodeID) {
		if int64(p) != h.partition.Load() {
			return
		}
		if f := h.admit.Swap(nil); f != nil {
			(*f)()
		}
	}
}

// TestRestartedOwnerEmptiesNoReplica restarts an owner, memory-only, and holds the new process at an old
// map in which it still owns a partition whose replica was out of the in-sync set, while the leader has not
// yet recorded the restart. The new process holds nothing of the partition; it must not act as its owner
// (no probes, resyncs or snapshots), and the replica must refuse a snapshot from a process the map does not
// know as the owner. Once the leader records the restart, the partition fails over to the replica and every
// acknowledged write is still there.
func TestRestartedOwnerEmptiesNoReplica(t *testing.T) {
	longScenario(t)
	t.Parallel()
	// The replica must stay in sync through the writes below, which a loaded machine may delay past the
	// 300 ms the other tests give a replica's acknowledgement: dropped, it could not take the partition over.
	c, h := startHeldCluster(t, func(cfg *Config) { cfg.ReplicaAckTimeout = 5 * time.Second })
	defer h.release()
	ctx := bg(t)
	_, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	h.watch(p, replica.id)

	// The replica restarts and is held out of the partition's in-sync set: that map is the old one the
	// owner's next process will be held at. Then it returns, caught up, under the same epoch.
	h.holdJoin.Store(true)
	ri := c.indexOf(replica.id)
	c.kill(ri)
	replica = c.restart(ri)
	var old *ClusterMap
	waitFor(t, 20*time.Second, "the restarted replica recorded, out of the in-sync set", func() bool {
		old = owner.ClusterMap()
		return old.Nodes[replica.id].Incarnation == replica.own.repl.incarnation && !slices.Contains(old.Runtime[p].InSync, replica.id)
	})
	h.holdJoin.Store(false)
	waitFor(t, 20*time.Second, "the replica back in sync everywhere", func() bool {
		m := owner.ClusterMap()
		for q, st := range m.Runtime {
			if slices.Contains(m.Assignment[q], replica.id) && st.Owner != replica.id && !slices.Contains(st.InSync, replica.id) {
				return false
			}
		}
		return true
	})
	epoch := owner.ClusterMap().Runtime[p].Epoch
	if epoch != old.Runtime[p].Epoch {
		t.Fatalf("partition %d moved from epoch %d to %d; the test needs it still", p, old.Runtime[p].Epoch, epoch)
	}
	var keys []string
	for i := range 50 {
		k := keyInPartition(owner.layout, fmt.Sprintf("held-%d-", i), p)
		if err := owner.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	first, _ := owner.layout.PartitionSegments(p)
	held := replica.own.store.revision(first)
	snapshots := replica.ReplicationStats().SnapshotsApplied

	// The owner crashes; its next process replays up to the old map and stays there, unrecognized.
	h.unrecognized.Store(owner.id)
	h.paused.Store(owner.id)
	h.pauseAfter.Store(old.Index)
	oi := c.indexOf(owner.id)
	c.kill(oi)
	back := c.restart(oi)
	waitFor(t, 20*time.Second, "the restarted owner at the old map", func() bool {
		return back.ClusterMap().Index == old.Index
	})
	if st := back.ClusterMap().Runtime[p]; st.Owner != back.id || slices.Contains(st.InSync, replica.id) {
		t.Fatalf("the old map has partition %d as %+v; the test needs the restarted node as owner, the replica out", p, st)
	}
	// Give the restarted node several control ticks to act on that map; it must not.
	ticks := back.ctl.controlTicks.Load()
	waitFor(t, 10*time.Second, "five control ticks of the restarted node", func() bool {
		return back.ctl.controlTicks.Load() >= ticks+5
	})
	if got := replica.ReplicationStats().SnapshotsApplied; got != snapshots {
		t.Errorf("the replica installed %d snapshots from an owner the map does not know", got-snapshots)
	}

	// A forged snapshot from the unrecognized process, under the partition's epoch, is refused too.
	forged := &replicateRequest{From: back.id, Epochs: map[int]uint64{p: epoch}, Snapshots: []segmentSnapshot{{Segment: first, Epoch: epoch}}}
	if reply, _, err := back.client.callReplica(replica.id, forged, time.Second); err == nil && reply.Status == StatusSuccess {
		t.Errorf("the replica accepted a snapshot from %s's unrecognized process", back.id)
	}
	if got := replica.own.store.revision(first); got != held {
		t.Fatalf("the in-sync replica's segment %d went from revision %d to %d", first, held, got)
	}

	h.release()
	h.unrecognized.Store(NodeID(""))
	waitFor(t, 20*time.Second, "the restarted owner recorded and its partition failed over", func() bool {
		m := c.currentMap()
		return m.Nodes[back.id].Incarnation == back.own.repl.incarnation && m.Runtime[p].Owner == replica.id
	})
	for _, k := range keys {
		if got, err := c.leaderNode().Get(ctx, k); err != nil || string(got) != k {
			t.Fatalf("acknowledged %q reads %q, %v after the failover", k, got, err)
		}
	}
}

// TestAdmissionNeverAcknowledgesBehindTheReplica lands a Sync write between an owner's check that a replica
// caught up and the decision returning it to the in-sync set, with the owner cut from the replica so the
// write cannot reach it. The write must not be acknowledged while the replica is, or may still become, in
// sync without it: after the owner dies, the write is readable or its partition is Unavailable, never a
// false NotFound.
func TestAdmissionNeverAcknowledgesBehindTheReplica(t *testing.T) {
	t.Parallel()
	c, h := startHeldCluster(t)
	defer h.release()
	defer c.faults.HealAll() // a killed node's gossip may still be dialling through a cut link
	ctx := bg(t)
	leader, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	h.watch(p, replica.id)

	// The replica misses a write and leaves the in-sync set; it is held out while more writes land.
	h.holdJoin.Store(true)
	c.faults.Blackhole(string(owner.id), string(replica.id))
	var keys []string
	for i := range 20 {
		k := keyInPartition(owner.layout, fmt.Sprintf("join-%d-", i), p)
		if err := owner.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if slices.Contains(owner.ClusterMap().Runtime[p].InSync, replica.id) {
		t.Fatal("the cut-off replica is still in the in-sync set")
	}
	c.faults.Heal(string(owner.id), string(replica.id))

	// Once the replica has caught up, and before the owner proposes its return, the owner is cut from it
	// again and a write lands.
	late := keyInPartition(owner.layout, "late-", p)
	var lateErr error
	var decisions uint64
	done := make(chan struct{})
	admit := func() {
		defer close(done)
		c.faults.Blackhole(string(owner.id), string(replica.id))
		lateErr = owner.Put(ctx, late, []byte(late))
		decisions = owner.ReplicationStats().InSyncDecisions
	}
	h.admit.Store(&admit)
	h.holdJoin.Store(false)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the replica was never found caught up")
	}
	if lateErr != nil {
		t.Fatalf("the write during the admission failed: %v", lateErr)
	}
	keys = append(keys, late)
	waitFor(t, 10*time.Second, "the admission decided", func() bool {
		return owner.ReplicationStats().InSyncDecisions > decisions
	})

	c.kill(c.indexOf(owner.id))
	waitFor(t, 20*time.Second, "the dead owner's partition failed over or given up, in the leader's routing", func() bool {
		rt := leader.client.router.current()
		routed := rt.segmentPeer[rt.layout().KeySegment(keys[0])]
		return rt.m.Runtime[p].Owner != owner.id && (routed == nil || routed.id != owner.id)
	})
	for _, k := range keys {
		got, err := leader.Get(ctx, k)
		switch {
		case errors.Is(err, ErrNotFound):
			t.Fatalf("acknowledged %q is gone: a false NotFound (partition %d now %+v)", k, p, leader.ClusterMap().Runtime[p])
		case err == nil && string(got) != k:
			t.Fatalf("acknowledged %q reads %q", k, got)
		case err != nil && !errors.Is(err, ErrPartitionUnavailable):
			t.Fatalf("get %q: %v", k, err)
		}
	}
}
