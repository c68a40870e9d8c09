package zaris

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
)

// TestLeaveWithoutLeaderClosesAsFailed has a voter leave after the other two voters died, so that no leader
// can record its drain or move its partitions. The leave must fail with ErrNotDrained once its context
// ends, and the node, holding the only live copy of some partitions, must not say goodbye: the member that
// survives sees it fail, never leave cleanly.
func TestLeaveWithoutLeaderClosesAsFailed(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2))
	observer := c.add(3)
	c.waitStable(20 * time.Second)
	voters := c.voterNodes(t)
	if len(voters) != 3 || slices.Contains(voters, observer) {
		t.Fatalf("voters %v: want the three founders", nodeIDs(voters))
	}
	leaver := voters[0]
	for _, v := range voters[1:] {
		c.kill(c.indexOf(v.id))
	}
	waitFor(t, 20*time.Second, "the leaver to see no leader and both voters failed", func() bool {
		return leaver.ctl.leaderID() == "" && gossipStatus(leaver, voters[1].id) == serf.StatusFailed &&
			gossipStatus(leaver, voters[2].id) == serf.StatusFailed
	})
	if len(onlyCopies(leaver.ctl.fsm.clusterMap(), leaver.id, leaver.members.members())) == 0 {
		t.Fatalf("%s holds no partition whose only live copy it has; the test needs one", leaver.id)
	}
	ctx, cancel := context.WithTimeout(bg(t), 2*time.Second)
	defer cancel()
	err := leaver.Leave(ctx)
	if !errors.Is(err, ErrNotDrained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Leave with no leader: %v; want ErrNotDrained after its context's deadline", err)
	}
	c.forget(c.indexOf(leaver.id), leaver)
	waitFor(t, 20*time.Second, string(observer.id+" to see "+leaver.id+" fail"), func() bool {
		st := gossipStatus(observer, leaver.id)
		if st == serf.StatusLeft || st == serf.StatusLeaving {
			t.Fatalf("%s sees %s %v: it said goodbye holding the only copy of partitions", observer.id, leaver.id, st)
		}
		return st == serf.StatusFailed
	})
	if !strings.Contains(err.Error(), "only live copy") {
		t.Fatalf("Leave with no leader: %q does not say it held the only live copy of partitions", err)
	}
}

// TestUndrainedLeaveLosesNoAcknowledgedWrite cuts a node off from the others, so that its drain can never
// be recorded, and has it leave. The leave fails with ErrNotDrained; the others fail its partitions over to
// their in-sync copies, and every write it acknowledged reads back. No partition is recreated empty.
func TestUndrainedLeaveLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, quickFailure))
	leader := c.currentLeader(t)
	leaver := c.node((c.indexOf(leader.id) + 1) % 3)
	ctx := bg(t)
	var keys []string
	for i := range 40 {
		key := c.keyOwnedBy(fmt.Sprintf("undrained-%d", i), leaver)
		must(t, leader.Put(ctx, key, []byte(key)))
		keys = append(keys, key)
	}
	defer c.faults.HealAll()
	for _, n := range c.live() {
		if n != leaver {
			c.faults.Partition(string(leaver.id), string(n.id))
		}
	}
	leaveCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := leaver.Leave(leaveCtx); !errors.Is(err, ErrNotDrained) {
		t.Fatalf("Leave of a cut-off node: %v; want ErrNotDrained", err)
	}
	c.forget(c.indexOf(leaver.id), leaver)
	waitFor(t, 30*time.Second, "every partition owned by a live node", func() bool {
		m := leader.ctl.fsm.clusterMap()
		return !slices.ContainsFunc(m.Runtime, func(st PartitionState) bool { return st.Owner == "" || st.Owner == leaver.id })
	})
	var lost []string
	for _, k := range keys {
		if v, err := leader.Get(ctx, k); err != nil || string(v) != k {
			lost = append(lost, fmt.Sprintf("%s: %q, %v", k, v, err))
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged writes lost: %v", len(lost), len(keys), lost[:min(3, len(lost))])
	}
	if strings.Contains(c.logs.String(), "EMPTY") {
		t.Fatal("a partition was recreated empty")
	}
}

// voterNodes returns the live nodes whose servers vote in the leader's configuration.
func (c *testCluster) voterNodes(t *testing.T) []*Node {
	t.Helper()
	cf := c.currentLeader(t).ctl.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	var out []*Node
	for _, s := range cf.Configuration().Servers {
		name, _ := splitRaftID(s.ID)
		if n := c.nodeByID(name); n != nil && s.Suffrage == raft.Voter {
			out = append(out, n)
		}
	}
	return out
}

// gossipStatus returns the status of member id as n's gossip sees it, or StatusNone when n knows no such member.
func gossipStatus(n *Node, id NodeID) serf.MemberStatus {
	for _, mb := range n.members.members() {
		if mb.ID == id {
			return mb.Status
		}
	}
	return serf.StatusNone
}

// TestOnlyCopies checks which partitions a leaver holds the only live in-sync copy of, by table.
func TestOnlyCopies(t *testing.T) {
	nodes := map[NodeID]NodeInfo{"a": {ID: "a", Incarnation: 1}, "b": {ID: "b", Incarnation: 2}, "c": {ID: "c", Incarnation: 3}}
	alive := func(id NodeID, inc uint64) member { return member{ID: id, Incarnation: inc, Status: serf.StatusAlive} }
	for _, tc := range []struct {
		name    string
		runtime []PartitionState
		members []member
		want    []int
	}{
		{"a live in-sync replica elsewhere", []PartitionState{{Owner: "a", InSync: []NodeID{"b"}}},
			[]member{alive("a", 1), alive("b", 2)}, nil},
		{"no replica in sync", []PartitionState{{Owner: "a", InSync: nil}},
			[]member{alive("a", 1), alive("b", 2)}, []int{0}},
		{"the replica failed", []PartitionState{{Owner: "a", InSync: []NodeID{"b"}}},
			[]member{alive("a", 1), {ID: "b", Incarnation: 2, Status: serf.StatusFailed}}, []int{0}},
		{"the replica is another process now", []PartitionState{{Owner: "a", InSync: []NodeID{"b"}}},
			[]member{alive("a", 1), alive("b", 9)}, []int{0}},
		{"the replica is leaving too", []PartitionState{{Owner: "a", InSync: []NodeID{"b"}}},
			[]member{alive("a", 1), {ID: "b", Incarnation: 2, Status: serf.StatusAlive, Leaving: true}}, []int{0}},
		{"ownerless, held in sync here only", []PartitionState{{Owner: "", InSync: []NodeID{"a"}}},
			[]member{alive("a", 1), alive("b", 2)}, []int{0}},
		{"owned elsewhere", []PartitionState{{Owner: "c", InSync: []NodeID{"a"}}},
			[]member{alive("a", 1), alive("c", 3)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &ClusterMap{Nodes: nodes, Runtime: tc.runtime}
			if got := onlyCopies(m, "a", tc.members); !slices.Equal(got, tc.want) {
				t.Fatalf("onlyCopies = %v, want %v", got, tc.want)
			}
		})
	}
}
