package zaris

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
)

// replicated returns a tweak for a cluster with replication factor rf.
func replicated(rf int, more ...func(*Config)) func(*Config) {
	return func(cfg *Config) {
		cfg.ReplicationFactor = rf
		cfg.ReplicaAckTimeout = 300 * time.Millisecond
		cfg.HealCooldown = 200 * time.Millisecond
		for _, f := range more {
			f(cfg)
		}
	}
}

// nodeByID returns the live node named id.
func (c *testCluster) nodeByID(id NodeID) *Node {
	for _, n := range c.live() {
		if n.id == id {
			return n
		}
	}
	return nil
}

// assertReplicasMatch compares every assigned copy of every partition with its owner, segment by segment.
func assertReplicasMatch(t *testing.T, c *testCluster) {
	t.Helper()
	if diff := replicaDifferences(c); diff != "" {
		t.Fatal(diff)
	}
}

// writeBurst writes, overwrites and deletes keys from every node concurrently and returns the final values.
func writeBurst(t *testing.T, c *testCluster, keys int, opts ...PutOption) map[string][]byte {
	t.Helper()
	ctx := bg(t)
	nodes := c.live()
	var mu sync.Mutex
	final := map[string][]byte{}
	var wg sync.WaitGroup
	for w, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := w; i < keys; i += len(nodes) {
				key := fmt.Sprintf("burst-%d", i)
				value := []byte(fmt.Sprintf("v%d-%d", i, rng.IntN(1000)))
				if err := n.Put(ctx, key, value, opts...); err != nil {
					t.Errorf("put %s: %v", key, err)
					return
				}
				if i%5 == 0 {
					if _, err := n.Delete(ctx, key); err != nil {
						t.Errorf("delete %s: %v", key, err)
						return
					}
					value = nil
				}
				mu.Lock()
				final[key] = value
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return final
}

// TestReplicasConvergeAfterBurst checks that after a burst of Sync writes every replica's segments are
// identical to the owner's at once, for RF 2 and 3, and that an Async burst converges too.
func TestReplicasConvergeAfterBurst(t *testing.T) {
	t.Parallel()
	for _, rf := range []int{2, 3} {
		t.Run(fmt.Sprintf("rf-%d-sync", rf), func(t *testing.T) {
			c := startCluster(t, 3, replicated(rf))
			final := writeBurst(t, c, 600)
			assertReplicasMatch(t, c) // Sync: no waiting allowed
			for key, want := range final {
				got, err := c.node(0).Get(bg(t), key)
				if want == nil && err == nil || want != nil && !bytes.Equal(got, want) {
					t.Fatalf("%s = %q, %v; want %q", key, got, err, want)
				}
			}
		})
	}
	t.Run("rf-2-async", func(t *testing.T) {
		c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.WriteConcern = Async }))
		writeBurst(t, c, 600)
		waitFor(t, 10*time.Second, "async replicas to converge", func() bool {
			ok := true
			m := c.live()[0].ClusterMap()
			for p, nodes := range m.Assignment {
				first, end := m.Layout().PartitionSegments(p)
				for s := first; s < end && ok; s++ {
					ok = c.nodeByID(nodes[0]).SegmentDigest(s) == c.nodeByID(nodes[1]).SegmentDigest(s)
				}
			}
			return ok
		})
	})
}

// TestSyncWriteIsOnReplicasWhenAcknowledged reads every replica's store directly right after each ack.
func TestSyncWriteIsOnReplicasWhenAcknowledged(t *testing.T) {
	c := startCluster(t, 3, replicated(3))
	ctx := bg(t)
	for i := 0; i < 300; i++ {
		key := fmt.Sprintf("acked-%d", i)
		value := []byte(fmt.Sprintf("value-%d", i))
		if err := c.node(i%3).Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
		m := c.node(0).ClusterMap()
		p := m.Layout().KeyPartition(key)
		seg := m.Layout().KeySegment(key)
		for _, id := range m.Runtime[p].InSync {
			got, _, ok := c.nodeByID(id).own.store.get(seg, key)
			if !ok || !bytes.Equal(got, value) {
				t.Fatalf("write %d acknowledged but replica %s has %q (present %v)", i, id, got, ok)
			}
		}
		if len(m.Runtime[p].InSync) != 2 {
			t.Fatalf("partition %d has in-sync replicas %v; want 2", p, m.Runtime[p].InSync)
		}
	}
}

// TestStaleEpochIsRefused makes an owner that missed its own deposition accept a write: the replica,
// which knows the newer epoch, refuses the op and the write is not acknowledged.
func TestStaleEpochIsRefused(t *testing.T) {
	c := startCluster(t, 3, replicated(2))
	ctx := bg(t)
	leader := c.leaderNode()
	before := leader.ClusterMap()
	// Pick a partition and rotate its assignment so that its replica becomes the preferred primary.
	p := 0
	oldOwner := c.nodeByID(before.Runtime[p].Owner)
	next := make(Assignment, len(before.Assignment))
	copy(next, before.Assignment)
	next[p] = []NodeID{before.Assignment[p][1], before.Assignment[p][0]}
	if err := leader.ctl.commit(&command{Kind: cmdAssign, Assignment: next}); err != nil {
		t.Fatal(err)
	}
	newOwner := c.nodeByID(next[p][0])
	waitFor(t, 5*time.Second, "every node to apply the new epoch", func() bool {
		for _, n := range c.live() {
			if n.ClusterMap().Runtime[p].Owner != newOwner.id {
				return false
			}
		}
		return true
	})
	// The old owner's map goes back to before the change, but it saw the new epoch when it discarded its
	// copy: it refuses the write itself, before applying it.
	oldOwner.ctl.fsm.current.Store(before)
	key := keyInPartition(oldOwner.layout, "fenced", p)
	if reply := oldOwner.own.serveKV(ctx, kv.OpPut, &kv.Request{Key: key, Value: []byte("stale")}); reply.Status != StatusOwnershipChanging {
		t.Fatalf("write to an owner that saw a newer epoch: status %s; want OwnershipChanging", reply.Status)
	}
	if _, _, ok := oldOwner.own.store.get(oldOwner.layout.KeySegment(key), key); ok {
		t.Fatal("an owner that saw a newer epoch applied a write")
	}
	// The old owner forgets the change altogether: it still believes it owns p at the old epoch.
	oldOwner.own.repl.fence[p].Store(before.Runtime[p].Epoch)
	reply := oldOwner.own.serveKV(ctx, kv.OpPut, &kv.Request{Key: key, Value: []byte("stale")})
	// Applied by the stale owner but refused by a replica, the write is not acknowledged, nor retried:
	// another replica of the old epoch may have taken it and become the new owner.
	if reply.Status != StatusUnconfirmed {
		t.Fatalf("stale owner's write: status %s; want Unconfirmed", reply.Status)
	}
	if _, _, ok := newOwner.own.store.get(oldOwner.layout.KeySegment(key), key); ok {
		t.Fatal("the new owner applied an op from a stale epoch")
	}
	if newOwner.ReplicationStats().RejectedStaleEpoch == 0 {
		t.Fatal("no stale-epoch rejection counted")
	}
	// A direct op with the stale epoch is refused as well.
	seg := oldOwner.layout.KeySegment(key)
	r := newOwner.own.repl.serveReplicate(context.Background(), &replicateRequest{From: oldOwner.id, FromIncarnation: oldOwner.own.repl.incarnation, Ops: []durability.Op{{
		Segment: uint32(seg), Revision: newOwner.own.store.revision(seg) + 1, Epoch: before.Runtime[p].Epoch,
		Kind: durability.OpPut, Key: key, Value: []byte("x"),
	}}})
	if r.Status != StatusReplicaWriteRejected {
		t.Fatalf("stale op: status %s; want ReplicaWriteRejected", r.Status)
	}
}

// ownedPartitionKeys returns n keys sharing one hash tag, in a partition owned by owner whose other copy is
// on replica, and whose leader is neither.
func taggedKeys(owner *Node, count int) (keys []string, segment int) {
	m := owner.ClusterMap()
	for t := 0; ; t++ {
		tag := fmt.Sprintf("{t%d}", t)
		if m.Runtime[m.Layout().KeyPartition(tag)].Owner != owner.id {
			continue
		}
		for i := 0; i < count; i++ {
			keys = append(keys, fmt.Sprintf("%s:%d", tag, i))
		}
		return keys, m.Layout().KeySegment(tag)
	}
}

// TestReplicaCatchesUp cuts a replica off while its owner takes Async writes, then heals: a replica a few
// ops behind receives exactly the missed ops; one behind the op log's retention receives a snapshot.
func TestReplicaCatchesUp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		writes   int
		snapshot bool
	}{{"tail", 5, false}, {"snapshot", 60, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 3, replicated(2, func(cfg *Config) {
				cfg.WriteConcern = Async
				cfg.OpLogRetain = 16
			}))
			ctx := bg(t)
			owner := c.node(0)
			keys, seg := taggedKeys(owner, tc.writes)
			m := owner.ClusterMap()
			replica := c.nodeByID(m.Assignment[m.Layout().SegmentPartition(seg)][1])
			start := replica.ReplicationStats()
			if err := owner.Put(ctx, keys[0], []byte("before")); err != nil {
				t.Fatal(err)
			}
			// Applied and counted: the count follows the store, so a digest alone can run ahead of it.
			waitFor(t, 5*time.Second, "the first write on the replica", func() bool {
				return replica.SegmentDigest(seg) == owner.SegmentDigest(seg) && replica.ReplicationStats().OpsApplied > start.OpsApplied
			})
			before := replica.ReplicationStats()
			if tc.snapshot {
				// The replica goes away and comes back empty: stalled requests of the old process cannot
				// reach the new one, so the owner's log is all it can be fed from, and it is too short.
				victim := slices.Index(c.live(), replica)
				c.kill(victim)
				writeAll(t, owner, keys)
				replica = c.restart(victim)
				before = ReplicationStats{}
			} else {
				c.faults.Partition(string(owner.id), string(replica.id))
				c.faults.Reset(string(owner.id), string(replica.id))
				writeAll(t, owner, keys)
				c.faults.HealAll()
			}
			waitFor(t, 10*time.Second, "the replica to catch up", func() bool {
				return replica.SegmentDigest(seg) == owner.SegmentDigest(seg)
			})
			after := replica.ReplicationStats()
			snapshots := after.SnapshotsApplied - before.SnapshotsApplied
			applied := after.OpsApplied - before.OpsApplied
			if tc.snapshot {
				if snapshots == 0 {
					t.Fatal("the replica behind the op log converged without a snapshot")
				}
				return
			}
			if snapshots != 0 || applied != uint64(tc.writes) {
				t.Fatalf("replica applied %d ops and %d snapshots; want exactly the %d missed ops", applied, snapshots, tc.writes)
			}
		})
	}
}

// writeAll puts a value under every key through n.
func writeAll(t *testing.T, n *Node, keys []string) {
	t.Helper()
	for _, key := range keys {
		if err := n.Put(bg(t), key, []byte("during "+key)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnresponsiveReplicaLeavesInSyncSet checks that a Sync write facing a silent replica is acknowledged
// only after a committed decision removed that replica from the in-sync set.
func TestUnresponsiveReplicaLeavesInSyncSet(t *testing.T) {
	c := startCluster(t, 3, replicated(2))
	ctx := bg(t)
	leader := c.leaderNode()
	m := leader.ClusterMap()
	p := -1
	for i, nodes := range m.Assignment {
		if nodes[0] != leader.id && nodes[1] != leader.id {
			p = i
			break
		}
	}
	if p < 0 {
		t.Fatal("no partition away from the leader")
	}
	owner, replica := c.nodeByID(m.Assignment[p][0]), c.nodeByID(m.Assignment[p][1])
	key := keyInPartition(owner.layout, "silent", p)
	c.faults.Partition(string(owner.id), string(replica.id))
	if err := owner.Put(ctx, key, []byte("v")); err != nil {
		t.Fatalf("put with a silent replica: %v", err)
	}
	st := owner.ClusterMap().Runtime[p]
	if len(st.InSync) != 0 {
		t.Fatalf("in-sync set %v still lists the silent replica", st.InSync)
	}
	if owner.ReplicationStats().InSyncDecisions == 0 {
		t.Fatal("no in-sync decision committed")
	}
	// Healed, the replica catches up and the owner returns it to the in-sync set.
	c.faults.HealAll()
	waitFor(t, 10*time.Second, "the replica back in the in-sync set", func() bool {
		return len(owner.ClusterMap().Runtime[p].InSync) == 1
	})
	seg := owner.layout.KeySegment(key)
	if got, _, ok := replica.own.store.get(seg, key); !ok || string(got) != "v" {
		t.Fatalf("replica back in sync without the write: %q, %v", got, ok)
	}
}

// TestLaggingReplicaDropWaitsOutAnElection kills the control-plane leader while it replicates a partition
// another node owns. The owner's next write finds that replica silent before a new leader is elected: its
// drop from the in-sync set waits for the election, and the write succeeds, where it used to fail.
func TestLaggingReplicaDropWaitsOutAnElection(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.ReplicaAckTimeout = 20 * time.Millisecond // far shorter than an election
		cfg.Timing.RaftHeartbeat = 500 * time.Millisecond
		cfg.Timing.RaftElection = 500 * time.Millisecond
		cfg.Timing.RaftLeaderLease = 250 * time.Millisecond
	}))
	ctx := bg(t)
	leader := c.leaderNode()
	victim := slices.IndexFunc(c.live(), func(n *Node) bool { return n == leader }) // none stopped yet
	m := leader.ClusterMap()
	p := slices.IndexFunc(m.Assignment, func(nodes []NodeID) bool { return nodes[1] == leader.id })
	if p < 0 {
		t.Fatal("the leader replicates no partition")
	}
	owner := c.nodeByID(m.Assignment[p][0])
	key := keyInPartition(owner.layout, "election", p)
	if err := owner.Put(ctx, key, []byte("before")); err != nil {
		t.Fatal(err)
	}
	// A first write may already drop the leader's copy, slow to answer over a new connection, and its
	// return is counted just after the map shows it: the write below must be the one that drops it, and
	// the count must have settled, so both hold on two polls in a row.
	// The count must have held for half a second: a drop and re-admission of a slow copy can land between
	// two close polls. And no admission may be under way: one the map already shows is counted only once
	// its proposal returns, which can be after the kill. The partition must be Healthy again too: a heal
	// still due after such a drop would change its epoch under the drop below and make the owner propose
	// that drop twice.
	var decisions uint64
	var since time.Time
	waitFor(t, 20*time.Second, "the leader's copy in sync, its count settled", func() bool {
		st := owner.ClusterMap().Runtime[p]
		inSync := slices.Contains(st.InSync, leader.id) && st.Health == Healthy && len(owner.own.repl.joiningFor(p)) == 0
		now := owner.ReplicationStats().InSyncDecisions
		if !inSync || now != decisions || since.IsZero() {
			decisions, since = now, time.Now()
			return false
		}
		return time.Since(since) >= 500*time.Millisecond
	})
	c.kill(victim)
	if err := owner.Put(ctx, key, []byte("during")); err != nil {
		t.Fatalf("put while the control plane elects a leader: %v", err)
	}
	if owner.ctl.leaderID() == leader.id || owner.ctl.leaderID() == "" {
		t.Fatalf("the write returned with %q as leader; it should have waited for a new one", owner.ctl.leaderID())
	}
	if got := owner.ReplicationStats().InSyncDecisions; got != decisions+1 {
		t.Fatalf("in-sync decisions went from %d to %d; want the one drop", decisions, got)
	}
	if st := owner.ClusterMap().Runtime[p]; slices.Contains(st.InSync, leader.id) {
		t.Fatalf("in-sync set %v still lists the dead leader", st.InSync)
	}
}

// TestLaggingReplicaDropFailsWithoutQuorum leaves an owner alone, its replica and the third voter dead: the
// drop of the silent replica can never commit, so the write waits for a leader for applyTimeout, then fails
// unacknowledged.
func TestLaggingReplicaDropFailsWithoutQuorum(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.FailoverTimeout = time.Minute // the owner keeps its lease throughout
	}))
	ctx := bg(t)
	owner := c.node(0)
	m := owner.ClusterMap()
	p := slices.IndexFunc(m.Runtime, func(st PartitionState) bool { return st.Owner == owner.id })
	key := keyInPartition(owner.layout, "alone", p)
	if err := owner.Put(ctx, key, []byte("before")); err != nil {
		t.Fatal(err)
	}
	c.kill(1)
	c.kill(2)
	start := time.Now()
	err := owner.Put(ctx, key, []byte("alone"))
	if !errors.Is(err, ErrPartitionUnavailable) {
		t.Fatalf("put with no control-plane quorum: %v; want ErrPartitionUnavailable", err)
	}
	if waited := time.Since(start); waited < applyTimeout || waited > 3*applyTimeout {
		t.Fatalf("the write failed after %v; want it to wait about %v for a leader", waited, applyTimeout)
	}
}

// TestRestartedReplicaFetchesOnlyTheMissedTail stops a replica during writes and restarts it with the same
// DataDir: it reloads its segments from disk and receives exactly the ops it missed, no snapshot.
func TestRestartedReplicaFetchesOnlyTheMissedTail(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.DataDir = filepath.Join(base, cfg.Name)
	}))
	ctx := bg(t)
	leader := c.leader()
	victim := (leader + 1) % 3
	writer := c.node((leader + 2) % 3)
	victimID := c.node(victim).id
	// put writes count keys from 8 writers at once: during the outage, the first write of each partition
	// the victim replicates waits ReplicaAckTimeout for it to be dropped, and those waits overlap.
	put := func(prefix string, count int) (replicatedToVictim int) {
		var toVictim atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, count)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < count; i += 8 {
					key := fmt.Sprintf("%s-%d", prefix, i)
					m := writer.ClusterMap()
					nodes := m.Assignment[m.Layout().KeyPartition(key)]
					if nodes[0] == victimID {
						continue // no failover yet: the victim's own partitions are down while it is
					}
					if err := writer.Put(ctx, key, []byte("value of "+key)); err != nil {
						errs <- fmt.Errorf("put %s: %w", key, err)
						return
					}
					if nodes[1] == victimID {
						toVictim.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return int(toVictim.Load())
	}
	put("before", 400)
	c.kill(victim)
	missed := put("during", 200)
	if missed == 0 {
		t.Fatal("no write during the outage belonged to the victim's replicas")
	}

	restarted := c.restart(victim)
	if restarted.ReplicationStats().RecoveredOps == 0 {
		t.Fatal("the restarted node recovered nothing from its data dir")
	}
	waitFor(t, 20*time.Second, "the restarted replica to converge", func() bool {
		m := writer.ClusterMap()
		for p, nodes := range m.Assignment {
			if nodes[1] != victimID {
				continue
			}
			first, end := m.Layout().PartitionSegments(p)
			for s := first; s < end; s++ {
				if c.nodeByID(nodes[0]).SegmentDigest(s) != restarted.SegmentDigest(s) {
					return false
				}
			}
		}
		return true
	})
	st := restarted.ReplicationStats()
	if st.SnapshotsApplied != 0 || st.OpsApplied != uint64(missed) {
		t.Fatalf("restarted replica applied %d ops and %d snapshots; want exactly the %d missed ops",
			st.OpsApplied, st.SnapshotsApplied, missed)
	}
}

// TestCorruptDataDirIsRefused damages a stopped node's data dir: the restart fails with a clear error
// instead of crashing or serving diverged data.
func TestCorruptDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	c := startCluster(t, 1, func(cfg *Config) { cfg.DataDir = dir })
	for i := 0; i < 50; i++ {
		if err := c.node(0).Put(bg(t), fmt.Sprintf("k%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	c.kill(0)
	files, err := filepath.Glob(filepath.Join(dir, "oplog", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no op log files: %v", err)
	}
	for _, f := range files {
		if err := os.WriteFile(f, bytes.Repeat([]byte{0xde, 0xad}, 64), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig("corrupt")
	cfg.DataDir = dir
	n, err := Join(bg(t), cfg)
	if err == nil {
		n.Close()
		t.Fatal("a node started on a corrupt data dir")
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q does not name the data dir", err)
	}
}

// TestDiskRetentionKeepsDataRecoverable bounds the disk log tightly: segments are snapshotted and their
// covered ops dropped, and a restart still recovers every key.
func TestDiskRetentionKeepsDataRecoverable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := startCluster(t, 1, func(cfg *Config) {
		cfg.DataDir = dir
		cfg.DiskRetainBytes = 2048
		cfg.DiskTrimInterval = 20 * time.Millisecond
	})
	n := c.node(0)
	keys, seg := taggedKeys(n, 200)
	for _, key := range keys {
		if err := n.Put(bg(t), key, []byte("value of "+key)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the segment's disk log to be trimmed", func() bool {
		size, err := n.own.disk.store.LogBytes(uint32(seg))
		_, snap, _ := n.own.disk.store.LoadSnapshot(uint32(seg))
		return err == nil && snap && size <= 2048
	})
	c.kill(0)
	restarted := c.restart(0)
	if err := restarted.Ready(bg(t)); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		got, _, ok := restarted.own.store.get(seg, key)
		if !ok || string(got) != "value of "+key {
			t.Fatalf("after restart %s = %q, %v", key, got, ok)
		}
	}
}

// TestSyncBatchIsOnReplicasWhenAcknowledged checks that a PutMany under Sync returns only once every
// in-sync replica has every item, checking the replicas' stores directly.
func TestSyncBatchIsOnReplicasWhenAcknowledged(t *testing.T) {
	c := startCluster(t, 3, replicated(2))
	entries := make([]KeyValue, 500)
	for i := range entries {
		entries[i] = KeyValue{Key: fmt.Sprintf("batch-%d", i), Value: []byte(fmt.Sprintf("v%d", i))}
	}
	results, err := c.node(0).PutMany(bg(t), entries)
	if err != nil {
		t.Fatal(err)
	}
	m := c.node(0).ClusterMap()
	for i, r := range results {
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
		key := entries[i].Key
		seg := m.Layout().KeySegment(key)
		for _, id := range m.Runtime[m.Layout().KeyPartition(key)].InSync {
			if got, _, ok := c.nodeByID(id).own.store.get(seg, key); !ok || !bytes.Equal(got, entries[i].Value) {
				t.Fatalf("batch acknowledged but replica %s has %q for %s", id, got, key)
			}
		}
	}
}

// TestReplicationBatchLimitKeepsTheRest writes far more ops at once than one replication request carries:
// the segments left out of a full request must stay queued, so every Sync write is acknowledged by its
// replica without any replica timing out of the in-sync set.
func TestReplicationBatchLimitKeepsTheRest(t *testing.T) {
	c := startCluster(t, 2, replicated(2, func(cfg *Config) { cfg.ReplicaAckTimeout = 5 * time.Second }))
	ctx := bg(t)
	entries := make([]KeyValue, 6*replicateMaxOps)
	for i := range entries {
		entries[i] = KeyValue{Key: fmt.Sprintf("bulk-%d", i), Value: []byte(fmt.Sprint(i))}
	}
	results, err := c.node(0).PutMany(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("put %d: %v", r.Index, r.Err)
		}
	}
	for _, n := range c.live() {
		if d := n.ReplicationStats().InSyncDecisions; d != 0 {
			t.Fatalf("%s made %d in-sync decisions; want 0 (a replica timed out)", n.id, d)
		}
	}
	assertReplicasMatch(t, c)
}

// TestLargeSegmentReachesRestartedReplica fills one segment, under one hash tag, with several times the
// frame size, and restarts its replica with an op log too short to replay: the owner must send the segment
// in pieces, and the replica must install it whole and return to the in-sync set.
func TestLargeSegmentReachesRestartedReplica(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.MaxFrameSize = 1 << 20
		cfg.MaxValueSize = 200 << 10
		cfg.OpLogRetain = 4
	}))
	ctx := bg(t)
	_, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	tag := hashTagIn(owner.layout, p)
	seg := owner.layout.KeySegment(tag)
	value := bytes.Repeat([]byte("v"), 200<<10)
	for i := range 24 { // 4.8 MiB: nearly five frames
		if err := owner.Put(ctx, fmt.Sprintf("%s:%d", tag, i), value); err != nil {
			t.Fatal(err)
		}
	}
	sent := owner.ReplicationStats().SnapshotsSent
	ri := c.indexOf(replica.id)
	c.kill(ri)
	replica = c.restart(ri)
	waitFor(t, 30*time.Second, "the restarted replica back in sync with the whole segment", func() bool {
		return slices.Contains(owner.ClusterMap().Runtime[p].InSync, replica.id) &&
			replica.SegmentDigest(seg) == owner.SegmentDigest(seg)
	})
	if owner.ReplicationStats().SnapshotsSent == sent {
		t.Fatal("the segment reached the replica without a snapshot: the test did not cover the pieces")
	}
}

// hashTagIn returns a hash tag whose keys all land in one segment of partition p.
func hashTagIn(layout Layout, p int) string {
	tag := "{big}"
	for i := 0; layout.KeyPartition(tag) != p; i++ {
		tag = fmt.Sprintf("{big%d}", i)
	}
	return tag
}

// TestSnapshotPiecesAssemble checks a replica's assembly of a snapshot sent in pieces: it completes only with
// its last piece, in order, of one snapshot; a piece out of order is refused and drops what was staged, and
// a new first piece starts over.
func TestSnapshotPiecesAssemble(t *testing.T) {
	r := &replication{snapshotStage: snapshotStage{staged: map[int]*segmentSnapshot{}}}
	piece := func(part int, more bool, rev uint64, keys ...string) *segmentSnapshot {
		s := &segmentSnapshot{Segment: 7, Revision: rev, Epoch: 3, Part: part, More: more}
		for _, k := range keys {
			s.Entries = append(s.Entries, durability.Entry{Key: k})
		}
		return s
	}
	keysOf := func(s *segmentSnapshot) (out []string) {
		for _, e := range s.Entries {
			out = append(out, e.Key)
		}
		return out
	}
	if whole, ok := r.stage(piece(0, false, 9, "a")); !ok || whole == nil || !slices.Equal(keysOf(whole), []string{"a"}) {
		t.Fatalf("a snapshot in one piece: %v, %v", whole, ok)
	}
	for _, s := range []*segmentSnapshot{piece(0, true, 9, "a"), piece(1, true, 9, "b")} {
		if whole, ok := r.stage(s); !ok || whole != nil {
			t.Fatalf("piece %d: %v, %v; want staged", s.Part, whole, ok)
		}
	}
	if _, ok := r.stage(piece(1, false, 9, "c")); ok {
		t.Fatal("a repeated piece number was accepted")
	}
	if _, ok := r.stage(piece(2, false, 9, "c")); ok {
		t.Fatal("a piece was accepted after its snapshot's staging was dropped")
	}
	r.stage(piece(0, true, 10, "x"))
	if _, ok := r.stage(piece(1, false, 9, "y")); ok {
		t.Fatal("a piece of another snapshot (revision) was accepted")
	}
	r.stage(piece(0, true, 10, "x"))
	r.stage(piece(1, true, 10, "y"))
	whole, ok := r.stage(piece(2, false, 10, "z"))
	if !ok || whole == nil || whole.Revision != 10 || !slices.Equal(keysOf(whole), []string{"x", "y", "z"}) {
		t.Fatalf("three pieces: %+v, %v", whole, ok)
	}
	if len(r.staged) != 0 {
		t.Fatalf("staging kept after the last piece: %v", r.staged)
	}
}

// TestMinInSync checks that with MinInSync 2 a Sync write is never acknowledged by the owner alone: once
// the only replica is cut off, the write that finds it gone is not acknowledged, the next ones are refused
// without being applied, reads still work, and writes succeed again once the replica is back in sync.
func TestMinInSync(t *testing.T) {
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.MinInSync = 2 }))
	ctx := bg(t)
	leader, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	layout := leader.ClusterMap().Layout()
	key := keyInPartition(layout, "min", p)
	if err := leader.Put(ctx, key, []byte("before")); err != nil {
		t.Fatal(err)
	}
	c.faults.Partition(string(owner.id), string(replica.id))
	err := owner.Put(ctx, key, []byte("cut"))
	if !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("write that lost its only replica: %v, want ErrNotEnoughReplicas", err)
	}
	refused := keyInPartition(layout, "refused", p)
	if err := owner.Put(ctx, refused, []byte("x")); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("write to a partition with one copy in sync: %v, want ErrNotEnoughReplicas", err)
	}
	if _, err := owner.Get(ctx, refused); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused write was applied: get = %v", err)
	}
	c.faults.HealAll()
	waitFor(t, 20*time.Second, "the replica back in the in-sync set", func() bool {
		return len(owner.ClusterMap().Runtime[p].InSync) == 1
	})
	if err := owner.Put(ctx, refused, []byte("x")); err != nil {
		t.Fatalf("write once the replica is back: %v", err)
	}
}

// opLogEngine returns a replication engine with only an op log, of retain ops per segment and retainBytes
// shared by two segments.
func opLogEngine(retain int, retainBytes int64) *replication {
	return &replication{
		replicationConfig: replicationConfig{log: slog.New(slog.DiscardHandler)},
		oplog:             newOpLog(2, retain, retainBytes),
	}
}

// recordOp adds op to r's op log as recordWrite does.
func recordOp(r *replication, op durability.Op) {
	ops := []durability.Op{op}
	if err := r.oplog.Append(ops); err != nil {
		r.relogOps(ops, err)
	}
}

// checkOpLog fails unless segment seg's op log holds the revisions [first, last] and sends a replica
// behind first to a snapshot.
func checkOpLog(t *testing.T, r *replication, seg int, first, last uint64) {
	t.Helper()
	ops, err := r.oplog.Ops(uint32(seg), first-1, 0)
	if err != nil || uint64(len(ops)) != last+1-first || len(ops) > 0 && ops[0].Revision != first {
		t.Fatalf("after revision %d: %d ops, %v; want revisions %d to %d", first-1, len(ops), err, first, last)
	}
	if first > 1 {
		if _, err := r.oplog.Ops(uint32(seg), first-2, 0); !errors.Is(err, durability.ErrTruncated) {
			t.Fatalf("after revision %d: %v, want durability.ErrTruncated", first-2, err)
		}
	}
}

// TestOpLogBounds checks that the op log keeps each segment's newest ops within both bounds, ops and
// bytes, the bytes shared equally by the segments, and keeps the values recorded without copying them.
func TestOpLogBounds(t *testing.T) {
	byCount := opLogEngine(3, 1<<30)
	for rev := uint64(1); rev <= 10; rev++ {
		recordOp(byCount, durability.Op{Segment: 0, Revision: rev, Kind: durability.OpPut, Key: "k", Value: []byte("v")})
	}
	checkOpLog(t, byCount, 0, 8, 10)

	byBytes := opLogEngine(1000, 2<<20) // 1 MiB per segment
	value := bytes.Repeat([]byte("v"), 300<<10)
	for rev := uint64(1); rev <= 10; rev++ {
		recordOp(byBytes, durability.Op{Segment: 1, Revision: rev, Kind: durability.OpPut, Key: "k", Value: value})
	}
	checkOpLog(t, byBytes, 1, 8, 10)
	ops, _ := byBytes.oplog.Ops(1, 9, 0)
	if &ops[0].Value[0] != &value[0] {
		t.Fatal("the op log copied a value recorded")
	}
}

// TestOpLogRestarts checks where a segment's op log starts again: at an op that does not follow its last,
// and after the revision of a snapshot or replay, below its last too. A log restarted and holding no op yet
// still sends a replica behind the restart to a snapshot.
func TestOpLogRestarts(t *testing.T) {
	r := opLogEngine(4, 1<<30)
	put := func(rev uint64) {
		recordOp(r, durability.Op{Segment: 0, Revision: rev, Kind: durability.OpPut, Key: "k", Value: []byte("v")})
	}
	r.restartOpLog(0, 10)
	checkOpLog(t, r, 0, 11, 10)
	put(11)
	checkOpLog(t, r, 0, 11, 11)

	put(20) // a restore jumped the revision
	checkOpLog(t, r, 0, 20, 20)
	put(21)
	put(5) // a step back, as from a copy replaced at a lower revision
	checkOpLog(t, r, 0, 5, 5)

	for rev := uint64(6); rev <= 30; rev++ {
		put(rev)
	}
	r.restartOpLog(0, 12) // a snapshot of another history, below the log's last
	checkOpLog(t, r, 0, 13, 12)
	put(13)
	checkOpLog(t, r, 0, 13, 13)

	r.restartOpLog(0, 0)
	checkOpLog(t, r, 0, 1, 0)
	put(1)
	checkOpLog(t, r, 0, 1, 1)
	checkOpLog(t, r, 1, 1, 0) // the other segment was never touched
}
