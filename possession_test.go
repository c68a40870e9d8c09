package zaris

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris/durability"
)

// aheadSetup is a partition whose in-sync replica lags a peer outside the in-sync set: the owner's writes,
// acknowledged Async, reached the held-out replica but not the in-sync one.
type aheadSetup struct {
	c             *testCluster
	p             int
	owner, inSync *Node // inSync will be promoted when owner dies
	ahead         *Node // holds more than inSync, outside the in-sync set
	leader        *Node
	ownerIdx      int
	segments      []int
	syncKey       string
	asyncKeys     []string
	// aheadRevisions are the held-out copy's revisions when the setup is done.
	aheadRevisions map[int]uint64
}

// heldReplica is the replica a test keeps out of a partition's in-sync set.
type heldReplica struct {
	p  int
	id NodeID
}

// newAheadSetup starts five nodes (RF 3), configured further by more, and builds the situation on a
// partition the leader has no copy of, so the leader can fail it over while it reaches every other node.
func newAheadSetup(t *testing.T, more ...func(*Config)) *aheadSetup {
	s := &aheadSetup{}
	var held atomic.Pointer[heldReplica]
	hold := func(p int, replica NodeID) bool {
		h := held.Load()
		return h != nil && h.p == p && h.id == replica
	}
	s.c = startCluster(t, 5, replicated(3, append([]func(*Config){func(cfg *Config) {
		cfg.FailoverTimeout = time.Second
		// The leader's probe of the replicas waits twice ProbeTimeout: a busy machine answers LocalTiming's
		// 200 ms late, and the failover these tests watch then picks no source.
		cfg.Timing.ProbeInterval, cfg.Timing.ProbeTimeout = 600*time.Millisecond, 300*time.Millisecond
		cfg.hooks.holdRejoin = hold
	}}, more...)...))
	s.c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	var nodes []*Node
	s.leader, s.p, nodes = s.c.awayFromLeader()
	m := s.c.currentMap()
	s.owner, s.inSync, s.ahead = nodes[0], nodes[1], nodes[2]
	s.ownerIdx = s.c.indexOf(s.owner.id)
	first, end := m.Layout().PartitionSegments(s.p)
	for seg := first; seg < end; seg++ {
		s.segments = append(s.segments, seg)
	}

	s.syncKey = keyInPartition(m.Layout(), "synced", s.p)
	if err := s.owner.Put(ctx, s.syncKey, []byte("everywhere")); err != nil {
		t.Fatal(err)
	}
	// Hold the third copy out of the in-sync set.
	held.Store(&heldReplica{p: s.p, id: s.ahead.id})
	st := s.owner.ClusterMap().Runtime[s.p]
	if err := s.owner.own.repl.dropReplicas(ctx, s.p, st.Epoch, []NodeID{s.ahead.id}); err != nil {
		t.Fatal(err)
	}
	// Async writes reach the held-out copy, not the in-sync one.
	s.c.faults.Blackhole(string(s.owner.id), string(s.inSync.id))
	for i := range 20 {
		k := keyInPartition(m.Layout(), fmt.Sprintf("async-%d-", i), s.p)
		s.asyncKeys = append(s.asyncKeys, k)
		if err := s.owner.Put(ctx, k, []byte("v-"+k), WithWriteConcern(Async)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the held-out replica to receive the Async writes", func() bool {
		for _, seg := range s.segments {
			if s.ahead.own.store.revision(seg) != s.owner.own.store.revision(seg) {
				return false
			}
		}
		return true
	})
	s.aheadRevisions = map[int]uint64{}
	behind := false
	for _, seg := range s.segments {
		s.aheadRevisions[seg] = s.ahead.own.store.revision(seg)
		behind = behind || s.inSync.own.store.revision(seg) < s.aheadRevisions[seg]
	}
	if !behind {
		t.Fatal("the in-sync replica received the Async writes despite the fault")
	}
	return s
}

// promoted waits until the in-sync replica serves the partition, and returns the map that says so.
func (s *aheadSetup) promoted(t *testing.T) *ClusterMap {
	var m *ClusterMap
	waitFor(t, 20*time.Second, "the in-sync replica to serve the partition", func() bool {
		m = s.inSync.ClusterMap()
		st := m.Runtime[s.p]
		// and routes by that map: a Put routed by the one before would go to the dead owner
		return st.Owner == s.inSync.id && st.Health == Degraded && s.inSync.client.router.current().m.Index >= m.Index
	})
	return m
}

// sameCopies waits until the new owner and the other survivor hold identical copies of the partition.
func (s *aheadSetup) sameCopies(t *testing.T) {
	waitFor(t, 20*time.Second, "both copies of the partition to converge", func() bool {
		for _, seg := range s.segments {
			if s.inSync.SegmentDigest(seg) != s.ahead.SegmentDigest(seg) {
				return false
			}
		}
		return true
	})
}

// TestFailoverPullsFromPeerHoldingMore kills an owner whose only in-sync replica lags another live copy:
// the promoted replica must first sync from that copy (Recovering), then serve everything it held.
func TestFailoverPullsFromPeerHoldingMore(t *testing.T) {
	t.Parallel()
	s := newAheadSetup(t)
	ctx := bg(t)
	s.c.kill(s.ownerIdx)
	s.c.faults.HealAll()
	s.promoted(t)
	// The owner counts a recovery once the leader's decision is applied, just after the map shows it.
	waitFor(t, 5*time.Second, "the new owner to count its recovery", func() bool {
		return s.inSync.ReplicationStats().Recoveries > 0
	})
	if st := s.inSync.ReplicationStats(); st.Recoveries != 1 || st.PulledSegments == 0 {
		t.Fatalf("new owner: %d recoveries, %d segments pulled; want 1 recovery pulling from the peer", st.Recoveries, st.PulledSegments)
	}
	for _, seg := range s.segments {
		if got := s.inSync.own.store.revision(seg); got != s.aheadRevisions[seg] {
			t.Fatalf("segment %d: new owner at revision %d, the peer had %d", seg, got, s.aheadRevisions[seg])
		}
	}
	for _, k := range append([]string{s.syncKey}, s.asyncKeys...) {
		for _, n := range s.c.live() {
			got, err := n.Get(ctx, k)
			if err != nil || string(got) != string(valueFor(k, s.syncKey)) {
				t.Fatalf("get %q through %s = %q, %v", k, n.id, got, err)
			}
		}
	}
	s.sameCopies(t)
}

// TestFailoverPullsSegmentLargerThanFrame is TestFailoverPullsFromPeerHoldingMore with a segment, held
// only by the peer outside the in-sync set, several times the frame size: the new owner must pull it in
// pieces and recover it whole.
func TestFailoverPullsSegmentLargerThanFrame(t *testing.T) {
	t.Parallel()
	const values, valueSize = 32, 16 << 10 // 512 KiB: four 128 KiB frames
	s := newAheadSetup(t, func(cfg *Config) {
		cfg.MaxFrameSize = 128 << 10
		cfg.MaxValueSize = valueSize
	})
	ctx := bg(t)
	tag := hashTagIn(s.owner.layout, s.p)
	seg := s.owner.layout.KeySegment(tag)
	for i := range values { // the in-sync replica is still cut off: only the held-out copy gets these
		value := bytes.Repeat([]byte{byte('a' + i)}, valueSize)
		if err := s.owner.Put(ctx, fmt.Sprintf("%s:%d", tag, i), value, WithWriteConcern(Async)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the held-out replica to receive the large segment", func() bool {
		return s.ahead.own.store.revision(seg) == s.owner.own.store.revision(seg)
	})
	want := s.ahead.SegmentDigest(seg)
	if want != s.owner.SegmentDigest(seg) {
		t.Fatalf("the held-out replica's copy %+v differs from the owner's %+v", want, s.owner.SegmentDigest(seg))
	}
	s.c.kill(s.ownerIdx)
	s.c.faults.HealAll()
	s.promoted(t)
	waitFor(t, 5*time.Second, "the new owner to count its recovery", func() bool {
		return s.inSync.ReplicationStats().Recoveries > 0
	})
	if got := s.inSync.SegmentDigest(seg); got != want {
		t.Fatalf("new owner's copy of the large segment: %+v; the source held %+v", got, want)
	}
	st := s.inSync.ReplicationStats()
	minPieces := values * valueSize / s.inSync.own.repl.maxRequestBytes()
	if st.PulledSegments == 0 || st.PulledPieces <= st.PulledSegments || st.PulledPieces < uint64(minPieces) {
		t.Fatalf("new owner pulled %d segments in %d pieces; want the large one in at least %d pieces",
			st.PulledSegments, st.PulledPieces, minPieces)
	}
	s.sameCopies(t)
}

// TestPullPiecesAssemble pulls a segment of several pieces from a source whose copy changes during the
// pull: the puller must assemble exactly the snapshot the pull started from, and the source must release
// it after the last piece. A source that starts over mid-way (its snapshot released) still yields one
// whole snapshot; a pull interrupted mid-way, or sent a piece out of order, yields nothing and leaves
// nothing staged, and the source releases what it held once the puller stops asking.
func TestPullPiecesAssemble(t *testing.T) {
	const seg, entries, budget = 5, 40, 1000 // 135 bytes an entry: 7 a piece, 6 pieces
	copyAt := func(rev uint64) *segmentSnapshot {
		s := &segmentSnapshot{Segment: seg, Revision: rev, Epoch: 2}
		for i := range entries {
			s.Entries = append(s.Entries, durability.Entry{Key: fmt.Sprintf("k%02d", i),
				Value: bytes.Repeat([]byte{byte(rev), byte(i)}, 50), Version: rev})
		}
		return s
	}
	source := &heldPulls{idle: time.Minute, clock: systemClock{}, held: map[pullKey]*heldPull{}}
	rev := uint64(10)
	take := func() *segmentSnapshot { rev++; return copyAt(rev) } // each snapshot sees a newer revision
	key := pullKey{from: "owner", partition: 1}
	serve := func(part int) (*segmentSnapshot, error) {
		piece := source.piece(key, pullRequest{Segment: seg, Part: part}, budget, take)
		return &piece, nil
	}
	pull := func(fetch func(part int) (*segmentSnapshot, error)) (*segmentSnapshot, uint64, error) {
		puller := &replication{snapshotStage: snapshotStage{staged: map[int]*segmentSnapshot{}}}
		whole, err := puller.assemblePull(seg, fetch)
		if len(puller.staged) != 0 {
			t.Fatalf("pieces left staged: %v", puller.staged)
		}
		return whole, puller.stats.pulledPieces.Load(), err
	}
	held := func() int {
		source.mu.Lock()
		defer source.mu.Unlock()
		return len(source.held)
	}
	expect := func(whole *segmentSnapshot, rev uint64, pieces, wantPieces uint64, err error) {
		t.Helper()
		if err != nil || whole == nil || whole.Revision != rev || !reflect.DeepEqual(whole.Entries, copyAt(rev).Entries) {
			t.Fatalf("pulled %+v, %v; want the source's copy at revision %d", whole, err, rev)
		}
		if pieces != wantPieces || held() != 0 {
			t.Fatalf("%d pieces, %d snapshots still held by the source; want %d pieces, none held", pieces, held(), wantPieces)
		}
	}

	whole, pieces, err := pull(serve)
	expect(whole, 11, pieces, 6, err)

	whole, pieces, err = pull(func(part int) (*segmentSnapshot, error) {
		if part == 3 && rev == 12 {
			source.release(key, nil) // as after idle: the source starts over from a new snapshot
		}
		return serve(part)
	})
	expect(whole, 13, pieces, 3+6, err)

	source.idle = 20 * time.Millisecond
	if whole, _, err := pull(func(part int) (*segmentSnapshot, error) {
		if part == 2 {
			return nil, fmt.Errorf("source gone")
		}
		return serve(part)
	}); err == nil || whole != nil {
		t.Fatalf("interrupted pull: %+v, %v; want an error", whole, err)
	}
	waitFor(t, 5*time.Second, "the source to release the interrupted pull", func() bool { return held() == 0 })

	if whole, _, err := pull(func(part int) (*segmentSnapshot, error) {
		piece, err := serve(part)
		piece.Part *= 2
		return piece, err
	}); err == nil || whole != nil {
		t.Fatalf("pull sent pieces out of order: %+v, %v; want an error", whole, err)
	}
}

// TestFailoverWithoutSourceResyncsReplicaAhead kills the same owner while the leader cannot reach the
// copy that holds more: the in-sync replica serves at once, and the copy ahead of it, which follows a
// history the new owner does not have, is replaced whole instead of being fed ops on top of it.
func TestFailoverWithoutSourceResyncsReplicaAhead(t *testing.T) {
	t.Parallel()
	s := newAheadSetup(t)
	ctx := bg(t)
	s.c.faults.Partition(string(s.leader.id), string(s.ahead.id))
	s.c.kill(s.ownerIdx)
	s.c.faults.Heal(string(s.owner.id), string(s.inSync.id))
	s.promoted(t)
	if st := s.inSync.ReplicationStats(); st.Recoveries != 0 {
		t.Fatalf("new owner recovered %d times from a peer the leader could not reach", st.Recoveries)
	}
	s.c.faults.HealAll() // the copy ahead must learn the new map before it accepts the new owner's data
	if err := s.inSync.Put(ctx, s.syncKey, []byte("after")); err != nil {
		t.Fatal(err)
	}
	s.sameCopies(t)
	if st := s.inSync.ReplicationStats(); st.Resyncs == 0 {
		t.Fatal("the copy ahead of the new owner converged without being resent")
	}
	for _, k := range s.asyncKeys {
		if _, err := s.inSync.Get(ctx, k); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Async write %q the new owner never had: err = %v; want ErrNotFound", k, err)
		}
	}
}

// valueFor is the value newAheadSetup wrote under key.
func valueFor(key, syncKey string) []byte {
	if key == syncKey {
		return []byte("everywhere")
	}
	return []byte("v-" + key)
}
