package zaris

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris/durability"
)

// TestPersistenceResentCopyReloadsAsResent deposes an owner that holds Async writes its replica never
// got. The new owner resends it the partition whole, below the revision its disk log reached, then writes
// on. After a restart the old owner must reload exactly the new owner's copy: none of the writes it was
// told to drop, every write it received since.
func TestPersistenceResentCopyReloadsAsResent(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.FailoverTimeout = time.Second
		cfg.DataDir = filepath.Join(base, cfg.Name)
	}))
	c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	leader, p, nodes := c.awayFromLeader()
	m := c.currentMap()
	owner, replica := nodes[0], nodes[1]
	tag := keyInPartition(m.Layout(), "resent", p)
	seg := m.Layout().KeySegment(tag)
	keys := func(prefix string, count int) []string {
		var out []string
		for i := range count {
			out = append(out, fmt.Sprintf("{%s}:%s-%d", tag, prefix, i))
		}
		return out
	}
	sameCopy := func() bool { return owner.SegmentDigest(seg) == replica.SegmentDigest(seg) }

	writeAll(t, owner, keys("synced", 1))
	c.faults.Blackhole(string(owner.id), string(replica.id))
	dropped := keys("dropped", 10)
	for _, k := range dropped {
		if err := owner.Put(ctx, k, []byte("only on the old owner"), WithWriteConcern(Async)); err != nil {
			t.Fatal(err)
		}
	}
	c.faults.Partition(string(owner.id), string(replica.id))
	c.faults.Partition(string(owner.id), string(leader.id))
	waitFor(t, 20*time.Second, "the replica to take the partition over", func() bool {
		st := replica.ClusterMap().Runtime[p]
		return st.Owner == replica.id && st.Health == Degraded
	})
	c.faults.HealAll()
	waitFor(t, 20*time.Second, "the deposed owner to receive the new owner's copy", sameCopy)
	kept := keys("kept", 15)
	writeAll(t, replica, kept)
	waitFor(t, 20*time.Second, "the deposed owner to receive the new writes", sameCopy)
	want := replica.SegmentDigest(seg)

	i := c.indexOf(owner.id)
	c.kill(i)
	restarted := c.restart(i)
	if got := restarted.SegmentDigest(seg); got != want {
		t.Fatalf("segment %d reloaded as %+v; the new owner holds %+v", seg, got, want)
	}
	checkReloaded(t, restarted, seg, dropped, kept)
}

// TestPersistenceDiscardedCopyStaysDiscarded discards a node's copy of a partition, as a deposed owner
// does, then writes to the partition again: after a restart the node must reload only what came after.
func TestPersistenceDiscardedCopyStaysDiscarded(t *testing.T) {
	dir := t.TempDir()
	c := startCluster(t, 1, func(cfg *Config) { cfg.DataDir = dir })
	n := c.node(0)
	keys, seg := taggedKeys(n, 30)
	dropped, kept := keys[:20], keys[20:]
	writeAll(t, n, dropped)
	waitFor(t, 10*time.Second, "the writes to reach the disk log", func() bool {
		return n.own.disk.written.Load() >= uint64(len(dropped))
	})
	p := n.layout.SegmentPartition(seg)
	n.own.repl.discard(p, n.ClusterMap().Runtime[p].Epoch)
	writeAll(t, n, kept)
	want, epoch := n.SegmentDigest(seg), n.ClusterMap().Runtime[p].Epoch

	c.kill(0)
	restarted := c.restart(0)
	if got := restarted.SegmentDigest(seg); got != want {
		t.Fatalf("segment %d reloaded as %+v; before the restart it was %+v", seg, got, want)
	}
	checkReloaded(t, restarted, seg, dropped, kept)
	if line := restarted.own.repl.lines[seg].Load(); line != epoch {
		t.Fatalf("reloaded segment %d follows the history of epoch %d; its last writes were under epoch %d", seg, line, epoch)
	}
}

// TestPersistenceReplacementsRaceWrites replaces a segment's copy, and checkpoints it to disk, over and
// over while writes to the segment go on: the disk log must take every op in order, without a gap, and a
// restart must reload the segment exactly as memory held it.
func TestPersistenceReplacementsRaceWrites(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, func(cfg *Config) { cfg.DataDir = t.TempDir() })
	n := c.node(0)
	keys, seg := taggedKeys(n, 64)
	p := n.layout.SegmentPartition(seg)
	epoch := n.ClusterMap().Runtime[p].Epoch
	ctx := bg(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const writers = 4
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i += writers {
				select {
				case <-stop:
					return
				default:
				}
				if err := n.Put(ctx, keys[i%len(keys)], []byte("v"), WithWriteConcern(Async)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range 400 {
		if i%2 == 0 {
			n.own.repl.discard(p, epoch)
		} else {
			n.own.repl.checkpointToDisk(seg)
		}
	}
	close(stop)
	wg.Wait()
	if err := n.own.disk.flushedTo(ctx, n.own.disk.mark()); err != nil {
		t.Fatalf("the disk log refused the ops of a segment replaced amid writes: %v", err)
	}
	want := n.SegmentDigest(seg)
	c.kill(0)
	if got := c.restart(0).SegmentDigest(seg); got != want {
		t.Fatalf("segment %d reloaded as %+v; before the restart it was %+v", seg, got, want)
	}
}

// checkReloaded fails unless n's copy of seg holds every key of kept and none of dropped.
func checkReloaded(t *testing.T, n *Node, seg int, dropped, kept []string) {
	t.Helper()
	for _, k := range dropped {
		if _, _, ok := n.own.store.get(seg, k); ok {
			t.Fatalf("the restarted node reloaded %q, which it was told to drop", k)
		}
	}
	for _, k := range kept {
		if got, _, ok := n.own.store.get(seg, k); !ok || string(got) != "during "+k {
			t.Fatalf("the restarted node reloaded %q as %q, %v", k, got, ok)
		}
	}
}

// failingStore refuses every Append once failing is set, as a full or broken disk does.
type failingStore struct {
	durability.Store
	failing *atomic.Bool
}

var errDiskBroken = errors.New("test: the disk refuses writes")

func (s failingStore) Append(ops []durability.Op) error {
	if s.failing.Load() {
		return errDiskBroken
	}
	return s.Store.Append(ops)
}

// TestDiskFailureMovesPartitionsAway breaks the disk of one node of three (RF 2, data dirs) while writes
// go on: the node, which acknowledges no write any more, has its partitions moved to the others, so that
// every key takes writes again through any node, and every write acknowledged before or after reads back.
func TestDiskFailureMovesPartitionsAway(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	var broken atomic.Bool
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.DataDir = filepath.Join(base, cfg.Name)
		if cfg.Name == "node-2" {
			cfg.hooks.diskStore = func(s durability.Store) durability.Store { return failingStore{s, &broken} }
		}
	}))
	c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	victim, entry := c.node(2), c.node(0)
	owned := func() int {
		m := entry.ClusterMap()
		count := 0
		for p, st := range m.Runtime {
			if st.Owner == victim.id || slices.Contains(m.Assignment[p], victim.id) {
				count++
			}
		}
		return count
	}
	if owned() == 0 {
		t.Fatal("the node whose disk breaks holds no partition to begin with")
	}
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = fmt.Sprintf("disk-%d", i)
	}
	writeAll(t, entry, keys[:100])
	broken.Store(true)
	// Writes to the broken node's partitions fail until they move; the ones that fail are retried below.
	for _, k := range keys[100:] {
		_ = entry.Put(ctx, k, []byte("during "+k))
	}
	waitFor(t, 30*time.Second, "the broken node's partitions to move to the others", func() bool { return owned() == 0 })
	writeAll(t, entry, keys[100:])
	for _, k := range keys {
		if got, err := c.node(1).Get(ctx, k); err != nil || string(got) != "during "+k {
			t.Fatalf("%s reads %q, %v", k, got, err)
		}
	}
}
