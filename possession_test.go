package zaris

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
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

// newAheadSetup starts five nodes (RF 3) and builds the situation on a partition the leader has no copy
// of, so the leader can fail it over while it reaches every other node.
func newAheadSetup(t *testing.T) *aheadSetup {
	s := &aheadSetup{}
	var held atomic.Pointer[heldReplica]
	hold := func(p int, replica NodeID) bool {
		h := held.Load()
		return h != nil && h.p == p && h.id == replica
	}
	s.c = startCluster(t, 5, replicated(3, func(cfg *Config) {
		cfg.FailoverTimeout = time.Second
		cfg.holdRejoin = hold
	}))
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
	if err := s.owner.repl.dropReplicas(ctx, s.p, st.Epoch, []NodeID{s.ahead.id}); err != nil {
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
			if s.ahead.store.revision(seg) != s.owner.store.revision(seg) {
				return false
			}
		}
		return true
	})
	s.aheadRevisions = map[int]uint64{}
	behind := false
	for _, seg := range s.segments {
		s.aheadRevisions[seg] = s.ahead.store.revision(seg)
		behind = behind || s.inSync.store.revision(seg) < s.aheadRevisions[seg]
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
		return st.Owner == s.inSync.id && st.Health == Degraded
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
		if got := s.inSync.store.revision(seg); got != s.aheadRevisions[seg] {
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

// TestFailoverWithoutSourceResyncsReplicaAhead kills the same owner while the leader cannot reach the
// copy that holds more: the in-sync replica serves at once, and the copy ahead of it, which follows a
// history the new owner does not have, is replaced whole instead of being fed ops on top of it.
func TestFailoverWithoutSourceResyncsReplicaAhead(t *testing.T) {
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
