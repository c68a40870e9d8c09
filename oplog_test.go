package zaris

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestOpLogKeepFrom(t *testing.T) {
	for _, tc := range []struct {
		name  string
		last  uint64
		acked []uint64
		want  uint64
	}{
		{"no replica, short log", 10, nil, 1},
		{"no replica", 1000, nil, 1000 - opLogTail + 1},
		{"replica has everything", 1000, []uint64{1000}, 1000 - opLogTail + 1},
		{"replica inside the tail", 1000, []uint64{990}, 1000 - opLogTail + 1},
		{"replica behind the tail", 1000, []uint64{500}, 501},
		{"replica with nothing", 1000, []uint64{0}, 1},
		{"the furthest behind of two", 1000, []uint64{700, 400}, 401},
		{"replica ahead of the log", 1000, []uint64{1200}, 1000 - opLogTail + 1},
	} {
		if got := opLogKeepFrom(tc.last, tc.acked); got != tc.want {
			t.Errorf("%s: opLogKeepFrom(%d, %v) = %d, want %d", tc.name, tc.last, tc.acked, got, tc.want)
		}
	}
}

// TestOpLogTrimFollowsAcknowledgements checks the sweep on an owner's engine: a segment keeps the ops
// after the revision its replica acknowledged, the newest opLogTail once the replica has them all, and
// everything the bounds allow while the replica's revision is not known.
func TestOpLogTrimFollowsAcknowledgements(t *testing.T) {
	net := newReplicaNet()
	var clusterMap atomic.Pointer[ClusterMap]
	owner, replica := net.add(t, "a", &clusterMap), net.add(t, "b", &clusterMap)
	clusterMap.Store(replicatedMap(1, owner, replica))
	const seg = 0
	link := owner.link(replica.id)
	for _, tc := range []struct {
		name   string
		known  bool
		behind uint64 // how far the replica's acknowledged revision is behind the head
		keep   uint64 // how many ops the sweep must keep
	}{
		{"replica far behind", true, 2 * opLogTail, 2 * opLogTail},
		{"replica at the head", true, 0, opLogTail},
		{"replica inside the tail", true, opLogTail / 2, opLogTail},
		{"replica unknown", false, 0, 4 * opLogTail},
	} {
		// Each case starts from a log that holds exactly the newest opLogTail ops, then adds 3*opLogTail.
		var rev uint64
		for i := range 3 * opLogTail {
			rev = owner.store.put(seg, fmt.Sprint("k", i%10), []byte("v"), forTTL(0))
		}
		if status := owner.awaitReplicas(context.Background(), seg, rev, true); status != StatusSuccess {
			t.Fatalf("%s: replicate up to %d: %v", tc.name, rev, status)
		}
		link.lock()
		if delete(link.acked, seg); tc.known {
			link.acked[seg] = rev - tc.behind
		}
		link.unlock()
		owner.trimOpLog(nil)
		first, last, err := owner.oplog.Bounds(seg)
		if err != nil {
			t.Fatal(err)
		}
		if first != rev-tc.keep+1 || last != rev {
			t.Errorf("%s: the op log holds revisions %d to %d; want %d to %d", tc.name, first, last, rev-tc.keep+1, rev)
		}
		link.lock()
		link.acked[seg] = rev
		link.unlock()
		owner.trimOpLog(nil) // the next case starts from the tail
	}
}

// TestOpLogKeepsWhatReplicasLack checks the op log's sweep on a segment: once the replica has every op the
// owner keeps only the newest opLogTail, as the replica does; while the replica is cut off the owner keeps
// every op it lacks, so that it catches up by replay without a snapshot; and it keeps what a recent watch
// poll may read next.
func TestOpLogKeepsWhatReplicasLack(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2))
	_, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	tag := hashTagIn(owner.layout, p)
	seg := owner.layout.KeySegment(tag)
	written := 0
	write := func(n int) {
		t.Helper()
		for end := written + n; written < end; written++ {
			if err := owner.Put(bg(t), fmt.Sprintf("%s:%d", tag, written%50), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := func(n *Node) uint64 {
		first, last, err := n.own.repl.oplog.Bounds(uint32(seg))
		if err != nil {
			t.Fatal(err)
		}
		return last + 1 - first
	}
	ackedAll := func() bool {
		acked, known := owner.own.repl.ackedIn(p, replica.id)
		first, _ := owner.layout.PartitionSegments(p)
		return known[seg-first] && acked[seg-first] == owner.own.store.revision(seg)
	}

	write(3 * opLogTail)
	waitFor(t, 10*time.Second, "the replica's acknowledgement of every write", ackedAll)
	for _, n := range []*Node{owner, replica} {
		n.own.repl.trimOpLog(nil)
		if got := held(n); got != opLogTail {
			t.Fatalf("%s keeps %d ops of segment %d once the replica has them all; want %d", n.id, got, seg, opLogTail)
		}
	}

	had := replica.own.store.revision(seg)
	c.faults.Partition(string(owner.id), string(replica.id))
	c.faults.Reset(string(owner.id), string(replica.id))
	// The first write waits for the replica until the control plane drops it from the in-sync set; one
	// that fails meanwhile is made again. The owner's revision counts what the replica misses.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; owner.own.store.revision(seg) < had+3*opLogTail; i++ {
		if err := owner.Put(bg(t), fmt.Sprintf("%s:missed:%d", tag, i%50), []byte("m")); err != nil && time.Now().After(deadline) {
			t.Fatalf("write %d while the replica is cut off: %v", i, err)
		}
	}
	owner.own.repl.trimOpLog(nil)
	if first, _, _ := owner.own.repl.oplog.Bounds(uint32(seg)); first > had+1 {
		t.Fatalf("the owner kept segment %d from revision %d while the cut-off replica has %d", seg, first, had)
	}
	sent := owner.ReplicationStats().SnapshotsSent
	c.faults.HealAll()
	waitFor(t, 30*time.Second, "the replica back in sync", func() bool {
		return slices.Contains(owner.ClusterMap().Runtime[p].InSync, replica.id) && ackedAll()
	})
	if got := owner.ReplicationStats().SnapshotsSent - sent; got != 0 {
		t.Fatalf("the replica caught up with %d snapshots; want replay alone", got)
	}
	if got, want := replica.SegmentDigest(seg), owner.SegmentDigest(seg); got != want {
		t.Fatalf("replica's segment %d is %+v, the owner's %+v", seg, got, want)
	}
	owner.own.repl.trimOpLog(nil)
	if got := held(owner); got != opLogTail {
		t.Fatalf("the owner keeps %d ops once the replica caught up; want %d", got, opLogTail)
	}

	// A watch poll that read the segment after its current revision keeps what follows, replicas or not.
	polled := owner.own.store.revision(seg)
	owner.own.watches.marks.mark(time.Now(), []uint32{uint32(seg)}, []uint64{polled})
	write(2 * opLogTail)
	waitFor(t, 10*time.Second, "the replica's acknowledgement of every write", ackedAll)
	owner.own.repl.trimOpLog(owner.own.watches.marks.oldest(time.Now()))
	if first, _, _ := owner.own.repl.oplog.Bounds(uint32(seg)); first != polled+1 {
		t.Fatalf("the owner keeps segment %d from revision %d after a poll that read after %d", seg, first, polled)
	}
}

// TestReadMarks checks the polls' marks over time: the oldest revision asked after per segment, kept over
// the current and the previous stretch of idle time, and dropped once older than that.
func TestReadMarks(t *testing.T) {
	const idle = time.Second
	t0 := time.Unix(1000, 0)
	m := readMarks{idle: idle}
	if got := m.oldest(t0); got != nil {
		t.Fatalf("marks before any poll: %v", got)
	}
	m.mark(t0, []uint32{1, 2}, []uint64{50, 70})
	m.mark(t0.Add(idle/2), []uint32{1, 3}, []uint64{40, 9}) // a second reader of segment 1, further behind
	m.mark(t0.Add(idle/2), []uint32{2}, []uint64{80})       // a later poll of the first reader
	for _, tc := range []struct {
		at   time.Duration
		want map[int]uint64
	}{
		{idle / 2, map[int]uint64{1: 40, 2: 70, 3: 9}},
		{idle, map[int]uint64{1: 40, 2: 70, 3: 9}}, // the stretch ends: its marks are the previous ones
		{2*idle - time.Millisecond, map[int]uint64{1: 40, 2: 70, 3: 9}},
		{2 * idle, nil}, // silent for two stretches
	} {
		if got := m.oldest(t0.Add(tc.at)); !maps.Equal(got, tc.want) {
			t.Errorf("oldest at +%v: %v, want %v", tc.at, got, tc.want)
		}
	}
	m.mark(t0.Add(3*idle), []uint32{1}, []uint64{60})
	if got := m.oldest(t0.Add(4*idle + idle/2)); !maps.Equal(got, map[int]uint64{1: 60}) {
		t.Errorf("in the stretch after a poll: %v, want its mark", got)
	}
	m.mark(t0.Add(5*idle+idle/2), []uint32{1}, []uint64{65}) // the stretch of the first ended more than idle ago
	if got := m.oldest(t0.Add(5*idle + idle/2)); !maps.Equal(got, map[int]uint64{1: 65}) {
		t.Errorf("after a stretch without polls: %v, want only the newest mark", got)
	}
}
