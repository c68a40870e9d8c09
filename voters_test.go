package zaris

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
)

// TestPlanServers checks the rules that make the control plane's servers follow membership, one case per
// rule.
func TestPlanServers(t *testing.T) {
	voter := func(name string, inc uint64) raft.Server {
		return raft.Server{Suffrage: raft.Voter, ID: raftID(NodeID(name), inc), Address: raft.ServerAddress(name + ":1")}
	}
	nonvoter := func(name string, inc uint64) raft.Server {
		s := voter(name, inc)
		s.Suffrage = raft.Nonvoter
		return s
	}
	alive := func(name string, inc uint64) member {
		return member{ID: NodeID(name), DataAddr: name + ":1", Incarnation: inc, Server: inc, Status: serf.StatusAlive}
	}
	with := func(m member, change func(*member)) member { change(&m); return m }
	failed := func(name string, inc uint64) member {
		return with(alive(name, inc), func(m *member) { m.Status = serf.StatusFailed })
	}
	three := []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1)}
	tests := []struct {
		name    string
		servers []raft.Server
		members []member
		dead    []NodeID
		stable  []raft.ServerID
		max     int
		want    []string
	}{
		{name: "steady", servers: three, members: []member{alive("a", 1), alive("b", 1), alive("c", 1)}},
		{name: "a failed voter stays until DeadServerTimeout", servers: three,
			members: []member{alive("a", 1), alive("b", 1), failed("c", 1)}},
		{name: "a dead voter is removed", servers: three, dead: []NodeID{"c"},
			members: []member{alive("a", 1), alive("b", 1), failed("c", 1)},
			want:    []string{"remove c#1"}},
		{name: "a member that left is removed", servers: three,
			members: []member{alive("a", 1), alive("b", 1), with(alive("c", 1), func(m *member) { m.Status = serf.StatusLeft })},
			want:    []string{"remove c#1"}},
		{name: "a server gossip does not know stays until DeadServerTimeout", servers: three,
			members: []member{alive("a", 1), alive("b", 1)}},
		{name: "a server gossip has not known for DeadServerTimeout is removed", servers: three, dead: []NodeID{"c"},
			members: []member{alive("a", 1), alive("b", 1)},
			want:    []string{"remove c#1"}},
		{name: "a memory-only process restarted replaces its predecessor, which is removed first", servers: three,
			members: []member{alive("a", 1), alive("b", 1), alive("c", 2)},
			want:    []string{"remove c#1", "add non-voter c#2"}},
		{name: "a process restarted from its data dir is the same server", servers: three,
			members: []member{alive("a", 1), alive("b", 1), with(alive("c", 1), func(m *member) { m.Incarnation = 2 })}},
		{name: "the leader is never removed", servers: three,
			members: []member{failed("a", 1), alive("b", 1), alive("c", 1)}, dead: []NodeID{"a"}},
		{name: "a new member joins as a non-voter", servers: three,
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1)},
			want:    []string{"add non-voter d#1"}},
		{name: "a failed member is not added", servers: three,
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), failed("d", 1)}},
		{name: "a stable non-voter replaces a removed voter", dead: []NodeID{"c"}, stable: []raft.ServerID{"d#1"},
			servers: append(slices.Clone(three), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), failed("c", 1), alive("d", 1)},
			want:    []string{"remove c#1", "promote to voter d#1"}},
		{name: "a non-voter not yet stable waits",
			servers: []raft.Server{voter("a", 1), voter("b", 1), nonvoter("d", 1)},
			members: []member{alive("a", 1), alive("b", 1), alive("d", 1)}},
		{name: "one stable non-voter beside three voters waits for a second: voters stay odd", stable: []raft.ServerID{"d#1"},
			servers: append(slices.Clone(three), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1)}},
		{name: "two stable non-voters beside three voters make five", stable: []raft.ServerID{"d#1", "e#1"},
			servers: append(slices.Clone(three), nonvoter("e", 1), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), alive("e", 1)},
			want:    []string{"promote to voter d#1", "promote to voter e#1"}},
		{name: "no more voters than MaxVoters", max: 3, stable: []raft.ServerID{"d#1", "e#1"},
			servers: append(slices.Clone(three), nonvoter("d", 1), nonvoter("e", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), alive("e", 1)}},
		{name: "lite and leaving members are not promoted", stable: []raft.ServerID{"d#1", "e#1"},
			servers: []raft.Server{voter("a", 1), nonvoter("d", 1), nonvoter("e", 1)},
			members: []member{alive("a", 1), with(alive("d", 1), func(m *member) { m.Lite = true }),
				with(alive("e", 1), func(m *member) { m.Leaving = true })}},
		{name: "a lone voter takes two stable non-voters", stable: []raft.ServerID{"b#1", "c#1"},
			servers: []raft.Server{voter("a", 1), nonvoter("b", 1), nonvoter("c", 1)},
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1)},
			want:    []string{"promote to voter b#1", "promote to voter c#1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			facts := serverFacts{
				Leader:    raftID("a", 1),
				MaxVoters: 5,
				Dead:      func(id NodeID) bool { return slices.Contains(tc.dead, id) },
				Stable:    func(id raft.ServerID) bool { return slices.Contains(tc.stable, id) },
			}
			if tc.max > 0 {
				facts.MaxVoters = tc.max
			}
			var got []string
			for _, ch := range planServers(tc.servers, tc.members, facts) {
				got = append(got, fmt.Sprintf("%s %s", ch.Kind, ch.ID))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("plan %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRaftIDRoundTrip checks that a process's raft identity names its node and incarnation, even for a
// node name that contains the separator.
func TestRaftIDRoundTrip(t *testing.T) {
	for _, name := range []NodeID{"a", "node-1", "odd#name"} {
		if got, inc := splitRaftID(raftID(name, 0xbeef)); got != name || inc != 0xbeef {
			t.Fatalf("splitRaftID(raftID(%q)) = %q, %x", name, got, inc)
		}
	}
}

// TestVotersReplacedOneByOne replaces every node of a three-node cluster, one at a time, by a new node with a
// new name: each original is killed for good once its replacement has joined. The dead voter must leave the
// control plane and the replacement become a voter, so the cluster keeps deciding: each partition of the
// dead node fails over, is rebalanced onto the live nodes, and takes writes; every acknowledged write stays
// readable at the end.
func TestVotersReplacedOneByOne(t *testing.T) {
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.FailoverTimeout = time.Second
		cfg.DeadServerTimeout = time.Second
		cfg.EvictionTimeout = 2 * time.Second
	}))
	ctx := bg(t)
	written := map[string]string{}
	write := func(round int) {
		live := c.live()
		for i := range 50 {
			k := fmt.Sprintf("round%d-%d", round, i)
			if err := live[i%len(live)].Put(ctx, k, []byte(k)); err != nil {
				t.Fatalf("round %d: put %q: %v", round, k, err)
			}
			written[k] = k
		}
	}
	write(0)
	for round := 1; round <= 3; round++ {
		c.add(3)
		victim := c.node(round - 1)
		c.kill(round - 1)
		waitFor(t, 60*time.Second, fmt.Sprintf("round %d: %s replaced in the control plane and the map", round, victim.id), func() bool {
			return c.replaced(victim.id)
		})
		write(round)
	}
	for _, n := range c.live() {
		for k, want := range written {
			if got, err := n.Get(ctx, k); err != nil || string(got) != want {
				t.Fatalf("%s reads %q = %q, %v", n.id, k, got, err)
			}
		}
	}
}

// replaced reports whether dead is gone from the control plane, whose voters are exactly the live nodes
// (three) under a live leader, and from the map, whose partitions are all served by live nodes.
func (c *testCluster) replaced(dead NodeID) bool {
	li := c.leader()
	if li < 0 {
		return false
	}
	cf := c.node(li).raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	voters := 0
	for _, s := range cf.Configuration().Servers {
		name, _ := splitRaftID(s.ID)
		if name == dead || c.nodeByID(name) == nil {
			return false
		}
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	m := c.currentMap()
	if voters != 3 || m.moving() {
		return false
	}
	for p, st := range m.Runtime {
		if st.Owner == "" || c.nodeByID(st.Owner) == nil || st.Health == Unavailable || slices.Contains(m.Assignment[p], dead) {
			return false
		}
	}
	return true
}
