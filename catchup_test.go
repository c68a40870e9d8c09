package zaris

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/zaris-go/zaris/durability"
)

// catchUpRetain is the op log in memory of the catch-up tests: far fewer ops than a replica misses.
const catchUpRetain = 16

// catchUpMissed is how many ops of one segment a replica misses: several replication requests' worth.
const catchUpMissed = 3 * replicateMaxOps

// catchUpCluster starts three nodes, RF 2, each with its own data dir and an op log in memory of
// catchUpRetain ops per segment.
func catchUpCluster(t *testing.T, more ...func(*Config)) *testCluster {
	base := t.TempDir()
	return startCluster(t, 3, replicated(2, append([]func(*Config){func(cfg *Config) {
		cfg.DataDir = filepath.Join(base, cfg.Name)
		cfg.OpLogRetain = catchUpRetain
		cfg.ReplicaAckTimeout = time.Second     // a loaded machine must not time out a large catch-up request
		cfg.ReapInterval = 2 * time.Millisecond // the short-lived writes of missWrites expire among the others
	}}, more...)...))
}

// missWrites makes replica miss at least catchUpMissed writes of one segment of partition p, owned by owner:
// the replica is cut off from the owner, or stopped to be restarted from its data dir. It returns the
// segment, the replica's revision of it before, and resume, which brings the replica back and returns it.
func missWrites(t *testing.T, c *testCluster, owner, replica *Node, p int, restart bool) (seg int, had uint64, resume func() *Node) {
	t.Helper()
	tag := "{catchup}"
	for i := 0; owner.layout.KeyPartition(tag) != p; i++ {
		tag = fmt.Sprintf("{catchup%d}", i)
	}
	seg = owner.layout.KeySegment(tag) // every key below is in this segment
	if err := owner.Put(bg(t), tag+":first", []byte("before")); err != nil {
		t.Fatal(err)
	}
	had = replica.own.store.revision(seg)
	if had != owner.own.store.revision(seg) {
		t.Fatalf("the in-sync replica has revision %d of segment %d, the owner %d", had, seg, owner.own.store.revision(seg))
	}
	victim := c.indexOf(replica.id)
	if restart {
		c.kill(victim)
		resume = func() *Node { return c.restart(victim) }
	} else {
		c.faults.Partition(string(owner.id), string(replica.id))
		c.faults.Reset(string(owner.id), string(replica.id))
		resume = func() *Node { c.faults.HealAll(); return replica }
	}
	// A write may fail while the control plane is busy dropping the replica from the in-sync set; it is
	// written again. The owner's revision counts what the replica misses either way. Every fifth write
	// lives a millisecond, so the owner's expiry ops are among the ops missed.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; owner.own.store.revision(seg) < had+catchUpMissed; i++ {
		var opts []PutOption
		if i%5 == 0 {
			opts = append(opts, WithTTL(time.Millisecond))
		}
		err := owner.Put(bg(t), fmt.Sprintf("%s:%d", tag, i%50), []byte(fmt.Sprintf("missed %d", i)), opts...)
		if err != nil && time.Now().After(deadline) {
			t.Fatalf("write %d while the replica is away: %v", i, err)
		}
	}
	return seg, had, resume
}

// waitAllInSync waits until every partition's assigned copies are all in its in-sync set.
func waitAllInSync(t *testing.T, c *testCluster) {
	t.Helper()
	waitFor(t, 30*time.Second, "every copy back in the in-sync sets", func() bool {
		m := c.currentMap()
		for p, nodes := range m.Assignment {
			for _, id := range nodes {
				if id != m.Runtime[p].Owner && !slices.Contains(m.Runtime[p].InSync, id) {
					return false
				}
			}
		}
		return true
	})
}

// TestReplicaCatchesUpFromDisk makes a replica miss many times more ops of a segment than the owner keeps
// in memory, but fewer than its data dir keeps: the replica catches up from ops the owner reads from its
// durable log, with no snapshot, whether it was cut off or restarted from its own data dir.
func TestReplicaCatchesUpFromDisk(t *testing.T) {
	longScenario(t)
	t.Parallel()
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "cut-off", true: "restarted"}[restart], func(t *testing.T) {
			c := catchUpCluster(t)
			_, p, nodes := c.awayFromLeader()
			owner, replica := nodes[0], nodes[1]
			before := owner.ReplicationStats()
			seg, had, resume := missWrites(t, c, owner, replica, p, restart)
			replica = resume()
			waitFor(t, 30*time.Second, "the replica back in the partition's in-sync set", func() bool {
				return slices.Contains(owner.ClusterMap().Runtime[p].InSync, replica.id)
			})
			if got, want := replica.SegmentDigest(seg), owner.SegmentDigest(seg); got != want {
				t.Fatalf("replica back in sync with segment %d %+v; owner has %+v", seg, got, want)
			}
			after := owner.ReplicationStats()
			// The owner's memory holds the last catchUpRetain ops: the others can only have come from disk.
			if fromDisk := after.OpsFromDisk - before.OpsFromDisk; fromDisk == 0 {
				t.Fatalf("the owner sent no op read from disk; the replica missed %d, memory holds %d",
					owner.own.store.revision(seg)-had, catchUpRetain)
			}
			if restart {
				// The restarted process reloaded its copy: it received the ops after it and no snapshot.
				if replica.ReplicationStats().RecoveredOps == 0 {
					t.Fatal("the restarted replica recovered nothing from its data dir")
				}
				if snap, ok, err := replica.own.disk.store.LoadSnapshot(uint32(seg)); err != nil || ok && snap.Revision > had {
					t.Fatalf("the restarted replica installed a snapshot of segment %d (revision %d, %v)", seg, snap.Revision, err)
				}
			} else if sent := after.SnapshotsSent - before.SnapshotsSent; sent != 0 {
				t.Fatalf("the owner sent %d snapshots to a replica its disk could feed", sent)
			}
			if expiries := expiryOps(t, replica.own.disk.store, seg, had); expiries == 0 {
				t.Fatalf("the replica's durable log holds no expiry op of segment %d after revision %d", seg, had)
			}
			waitAllInSync(t, c)
			assertReplicasMatch(t, c)
		})
	}
}

// expiryOps counts the expiry ops of segment seg after revision after in a durable log.
func expiryOps(t *testing.T, log durability.Store, seg int, after uint64) int {
	t.Helper()
	ops, err := log.Ops(uint32(seg), after, 0)
	if err != nil {
		t.Fatalf("read segment %d of the durable log after revision %d: %v", seg, after, err)
	}
	n := 0
	for _, op := range ops {
		if op.Kind == durability.OpExpire {
			n++
		}
	}
	return n
}

// TestReplicaBehindTrimmedDiskGetsSnapshot is the converse: once the owner's durable log no longer reaches
// back to what a cut-off replica holds, the replica is sent a snapshot, and none of the ops it lacks are
// read from disk.
func TestReplicaBehindTrimmedDiskGetsSnapshot(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := catchUpCluster(t, func(cfg *Config) {
		cfg.DiskRetainBytes = 2048
		cfg.DiskTrimInterval = 20 * time.Millisecond
	})
	_, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	before := owner.ReplicationStats()
	seg, had, resume := missWrites(t, c, owner, replica, p, false)
	waitFor(t, 10*time.Second, "the owner's disk log trimmed past the replica", func() bool {
		first, _, err := owner.own.disk.store.Bounds(uint32(seg))
		return err == nil && first > had+1
	})
	resume()
	waitFor(t, 30*time.Second, "the replica back in the partition's in-sync set", func() bool {
		return slices.Contains(owner.ClusterMap().Runtime[p].InSync, replica.id)
	})
	after := owner.ReplicationStats()
	if sent := after.SnapshotsSent - before.SnapshotsSent; sent == 0 {
		t.Fatal("the replica behind the trimmed disk log caught up without a snapshot")
	}
	if fromDisk := after.OpsFromDisk - before.OpsFromDisk; fromDisk != 0 {
		t.Fatalf("the owner sent %d ops read from a disk log that no longer reached the replica", fromDisk)
	}
	waitAllInSync(t, c)
	assertReplicasMatch(t, c)
}

// TestOpsAfterReadsTheDurableLog checks the owner's side on one node: ops the memory no longer holds are
// read from disk, in order and bounded by bytes; a replacement of the segment under way, or one that
// restarted the disk log past the revision asked, sends the replica to a snapshot instead.
func TestOpsAfterReadsTheDurableLog(t *testing.T) {
	c := startCluster(t, 1, func(cfg *Config) {
		cfg.DataDir = t.TempDir()
		cfg.OpLogRetain = 4
	})
	n := c.node(0)
	keys, seg := taggedKeys(n, 100)
	writeAll(t, n, keys)
	last := n.own.store.revision(seg)
	ops, fromDisk, err := n.own.repl.opsAfter(seg, 0, replicateMaxOps, 1<<20)
	if err != nil || !fromDisk || uint64(len(ops)) != last {
		t.Fatalf("from revision 0: %d ops, from disk %v, %v; want all %d from disk", len(ops), fromDisk, err, last)
	}
	for i, op := range ops {
		if op.Revision != uint64(i)+1 {
			t.Fatalf("op %d has revision %d", i, op.Revision)
		}
	}
	if ops, fromDisk, err := n.own.repl.opsAfter(seg, last-2, replicateMaxOps, 1<<20); err != nil || fromDisk || len(ops) != 2 {
		t.Fatalf("from the memory's range: %d ops, from disk %v, %v; want 2 from memory", len(ops), fromDisk, err)
	}
	if ops, _, err := n.own.repl.opsAfter(seg, 0, replicateMaxOps, 1); err != nil || len(ops) == 0 || len(ops) > diskReadOps {
		t.Fatalf("with a budget of one byte: %d ops, %v; want between 1 and %d", len(ops), err, diskReadOps)
	}

	n.own.repl.replaced[seg].begun.Add(1)
	if _, _, err := n.own.repl.opsAfter(seg, 0, replicateMaxOps, 1<<20); !errors.Is(err, durability.ErrTruncated) {
		t.Fatalf("during a replacement of the segment: %v, want durability.ErrTruncated", err)
	}
	n.own.repl.replaced[seg].done.Add(1)

	snap := n.own.repl.takeSnapshot(seg, 1)
	n.own.repl.replaceSegment(seg, snap.Revision, 1, snap.Entries)
	if _, _, err := n.own.repl.opsAfter(seg, 0, replicateMaxOps, 1<<20); !errors.Is(err, durability.ErrTruncated) {
		t.Fatalf("behind a replaced copy: %v, want durability.ErrTruncated", err)
	}
}
