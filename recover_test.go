package zaris

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/internal/kv"
)

// recoveryTimings makes a dead owner's partitions fail over, and those with no live copy come back empty,
// within seconds. Dead servers keep the default timeout: a recovery leaves them out of the configuration.
func recoveryTimings(maxVoters int) func(*Config) {
	return func(cfg *Config) {
		cfg.ReplicationFactor = 2
		cfg.MaxVoters = maxVoters
		cfg.FailoverTimeout = 2 * time.Second
		cfg.EvictionTimeout = 3 * time.Second
		cfg.LostPartitionTimeout = 3 * time.Second
	}
}

// putAcknowledged writes every key of want through n, in batches, until each write is acknowledged: a
// busy machine may delay an owner past its lease.
func putAcknowledged(t *testing.T, n *Node, want map[string]string) {
	t.Helper()
	pending := slices.Sorted(maps.Keys(want))
	waitFor(t, time.Minute, "every key acknowledged", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		entries := make([]KeyValue, len(pending))
		for i, key := range pending {
			entries[i] = KeyValue{Key: key, Value: []byte(want[key])}
		}
		results, err := n.PutMany(ctx, entries)
		if err != nil {
			return false
		}
		pending = pending[:0]
		for _, r := range results {
			if r.Err != nil {
				pending = append(pending, r.Key)
			}
		}
		return len(pending) == 0
	})
}

// readBack reads every key of want through n, in batches, until each read answers, and fails the test
// on a value other than want's.
func readBack(t *testing.T, n *Node, want map[string]string) {
	t.Helper()
	pending := slices.Sorted(maps.Keys(want))
	waitFor(t, time.Minute, "every key read back", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		results, err := n.GetMany(ctx, pending)
		if err != nil {
			return false
		}
		var left []string
		for _, r := range results {
			switch {
			case r.Err != nil:
				left = append(left, r.Key)
			case string(r.Value) != want[r.Key]:
				t.Fatalf("%s = %q, want %q", r.Key, r.Value, want[r.Key])
			}
		}
		pending = left
		return len(pending) == 0
	})
}

// TestRecoverAfterEveryVoterDied kills a majority of the voters for good, memory only: the live members
// have no leader until RecoverControlPlane, then a leader and a map; every key whose partition had a live
// copy reads back, and a write succeeds on every partition.
func TestRecoverAfterEveryVoterDied(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		maxVoters int
		dataDir   bool
	}{
		{name: "3 of 5 voters", maxVoters: 5},
		{name: "3 voters of 5 nodes", maxVoters: 3},
		{name: "3 voters of 5 nodes with data dirs", maxVoters: 3, dataDir: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testRecoverAfterVotersDied(t, tc.maxVoters, tc.dataDir)
		})
	}
}

func testRecoverAfterVotersDied(t *testing.T, maxVoters int, dataDir bool) {
	tweak := recoveryTimings(maxVoters)
	if dataDir {
		base := t.TempDir()
		timings := tweak
		tweak = func(cfg *Config) { timings(cfg); cfg.DataDir = filepath.Join(base, cfg.Name) }
	}
	c := startCluster(t, 5, tweak)
	c.waitHealthy(20 * time.Second)
	const keys = 2000
	written := map[string]string{}
	for i := range keys {
		written[fmt.Sprintf("k%d", i)] = fmt.Sprint(i)
	}
	putAcknowledged(t, c.node(0), written)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // from the first kill
	defer cancel()
	before := c.currentMap()
	victims := c.voters(3)
	for _, i := range victims {
		c.kill(i)
	}
	live := c.live()
	liveIDs := map[NodeID]bool{}
	for _, n := range live {
		liveIDs[n.id] = true
	}

	// Gossip marks the dead failed; the control plane stays without a leader.
	waitFor(t, 20*time.Second, "the dead voters failed to gossip, and no leader", func() bool {
		for _, n := range live {
			if n.ctl.leaderID() != "" {
				return false
			}
			for _, mb := range n.members.members() {
				if !liveIDs[mb.ID] && mb.Status == serf.StatusAlive {
					return false
				}
			}
		}
		return true
	})

	report, err := live[0].RecoverControlPlane(ctx)
	if err != nil {
		t.Fatalf("recover: %v (report %+v)", err, report)
	}
	t.Logf("recovery:\n%s", report)
	if report.MapIndex < before.Index || len(report.Failed) > 0 || len(report.Voters)%2 != 1 {
		t.Fatalf("report %+v: want the map at index %d or later, an odd number of voters, none failed", report, before.Index)
	}
	c.leaderNode()
	waitFor(t, 20*time.Second, "every live member on the recovered map", func() bool {
		for _, n := range live {
			if n.ClusterMap().Index <= report.Index {
				return false
			}
		}
		return true
	})

	heldKeys, lost := map[string]string{}, 0
	for key, value := range written {
		st := before.Runtime[before.Layout().KeyPartition(key)]
		if !liveIDs[st.Owner] && !slices.ContainsFunc(st.InSync, func(id NodeID) bool { return liveIDs[id] }) {
			lost++
			continue
		}
		heldKeys[key] = value
	}
	held := len(heldKeys)
	readBack(t, live[0], heldKeys)
	t.Logf("%d keys had a live copy and all read back; %d had every copy on a dead node", held, lost)
	if held == 0 {
		t.Fatal("no key had a live copy: the test proves nothing")
	}

	layout := before.Layout()
	for p := range layout.Partitions {
		key := keyInPartition(layout, "new", p)
		waitFor(t, 30*time.Second, fmt.Sprintf("a write to partition %d", p), func() bool {
			return live[p%len(live)].Put(ctx, key, []byte("v")) == nil
		})
	}
	if !dataDir {
		return
	}
	// The recovered control plane is on disk: its voter, restarted, leads it again.
	c.mu.Lock()
	voter := slices.IndexFunc(c.nodes, func(n *Node) bool { return n != nil && n.id == report.Voters[0] })
	c.mu.Unlock()
	c.kill(voter)
	restarted := c.restart(voter)
	c.leaderNode()
	waitFor(t, 20*time.Second, "the restarted voter's map past the recovery", func() bool {
		return restarted.ClusterMap().Index > report.Index
	})
	waitFor(t, 30*time.Second, "a write after the voter's restart", func() bool {
		return restarted.Put(ctx, "after-restart", []byte("v")) == nil
	})
}

// voters returns the indexes of n of the live nodes whose servers vote, the leader last.
func (c *testCluster) voters(n int) []int {
	c.t.Helper()
	leader := c.leaderNode()
	cf := leader.ctl.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		c.t.Fatal(err)
	}
	var out []int
	li := -1
	for i, node := range c.nodes {
		if node == nil || !node.ctl.votesIn(cf.Configuration()) {
			continue
		}
		if node == leader {
			li = i
			continue
		}
		out = append(out, i)
	}
	out = append(out, li)
	if len(out) < n {
		c.t.Fatalf("%d voters, want %d", len(out), n)
	}
	return out[len(out)-n:]
}

// TestRecoverRefusesWhileAQuorumIsReachable: with a leader, or with a dead minority of voters, recovery
// refuses and changes nothing.
func TestRecoverRefusesWhileAQuorumIsReachable(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, recoveryTimings(3))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	instances := map[*Node]*raft.Raft{}
	for _, n := range c.live() {
		instances[n] = n.ctl.raft.cur.Load()
		if _, err := n.RecoverControlPlane(ctx); !errors.Is(err, ErrQuorumReachable) {
			t.Fatalf("recover on %s with every voter alive: %v, want ErrQuorumReachable", n.id, err)
		}
	}
	c.kill(c.voters(1)[0]) // the leader
	live := c.live()
	for _, n := range live {
		_, err := n.RecoverControlPlane(ctx)
		if !errors.Is(err, ErrQuorumReachable) {
			t.Fatalf("recover on %s with 2 of 3 voters alive: %v, want ErrQuorumReachable", n.id, err)
		}
		t.Logf("refused: %v", err)
	}
	for _, n := range live {
		if n.ctl.raft.cur.Load() != instances[n] {
			t.Fatalf("%s's control plane was restarted by a refused recovery", n.id)
		}
	}
	waitFor(t, 20*time.Second, "a write after the refusals", func() bool {
		return live[0].Put(ctx, "after", []byte("v")) == nil
	})
}

// TestPlanRecovery checks the recovery's decision: refusals while a quorum may be reachable, the newest map,
// a term and index past every member's, and an odd number of full members voting.
func TestPlanRecovery(t *testing.T) {
	mapAt := func(index uint64) *ClusterMap {
		m := newClusterMap(Layout{Segments: 4, Partitions: 2}, 2)
		m.Index, m.Version = index, 1
		return m
	}
	st := func(name string, term, last uint64, m *ClusterMap, voters ...string) recoveryState {
		var ids []raft.ServerID
		for _, v := range voters {
			ids = append(ids, raftID(NodeID(v), 1))
		}
		return recoveryState{Node: NodeID(name), Server: raftID(NodeID(name), 1), DataAddr: name + ":1", Term: term,
			LastIndex: last, LastTerm: term, Voters: ids, Map: m}
	}
	alive := func(names ...string) []member {
		var out []member
		for _, n := range names {
			out = append(out, member{ID: NodeID(n), Server: 1, Status: serf.StatusAlive})
		}
		return out
	}
	withLeader := st("d", 4, 10, mapAt(9), "a", "b", "c")
	withLeader.Leader = raftID("a", 1)
	lite := st("f", 3, 8, mapAt(8), "a", "b", "c")
	lite.Lite = true
	for _, tc := range []struct {
		name    string
		states  []recoveryState
		members []member
		refuse  string
		voters  []NodeID
		from    NodeID
		term    uint64
		index   uint64
	}{
		{name: "nobody answered", refuse: "no member answered"},
		{name: "a member hears a leader", states: []recoveryState{withLeader, st("e", 4, 10, mapAt(9), "a", "b", "c")},
			members: alive("d", "e"), refuse: "follows leader"},
		{name: "a majority of voters answers", states: []recoveryState{st("a", 4, 10, mapAt(9), "a", "b", "c"), st("b", 4, 10, mapAt(9), "a", "b", "c")},
			members: alive("a", "b"), refuse: "2 of the 3 voters"},
		{name: "a silent voter alive to gossip", states: []recoveryState{st("d", 4, 10, mapAt(9), "a", "b", "c"), st("e", 4, 10, mapAt(9), "a", "b", "c")},
			members: alive("a", "d", "e"), refuse: "alive to gossip"},
		{name: "a member knows an older configuration a majority of which answers",
			states:  []recoveryState{st("a", 4, 10, mapAt(9), "a", "b", "c", "f", "g"), st("d", 3, 7, mapAt(7), "a", "d", "x"), st("e", 3, 7, mapAt(7))},
			members: alive("a", "d", "e"), refuse: "2 of the 3 voters"},
		{name: "no member holds a map", states: []recoveryState{st("d", 4, 10, nil, "a", "b", "c")}, members: alive("d"),
			refuse: "no live member holds a cluster map"},
		{name: "a minority answers: the newest map, past every term and index",
			states:  []recoveryState{st("d", 4, 12, mapAt(9), "a", "b", "c"), st("e", 6, 10, mapAt(10), "a", "b", "c"), lite},
			members: alive("d", "e", "e"), voters: []NodeID{"d"}, from: "e", term: 7, index: 13},
		{name: "three full members vote",
			states: []recoveryState{st("d", 4, 10, mapAt(9), "a", "b", "c", "d", "e"), st("f", 4, 10, mapAt(9)), st("g", 4, 10, mapAt(9)),
				st("e", 4, 11, mapAt(10), "a", "b", "c", "d", "e")},
			members: alive("d", "e", "f", "g"), voters: []NodeID{"d", "e", "f"}, from: "e", term: 5, index: 12},
		{name: "the log of the latest term wins over a longer one",
			states:  []recoveryState{st("d", 4, 12, mapAt(12), "a", "b", "c"), st("e", 5, 11, mapAt(11), "a", "b", "c")},
			members: alive("d", "e"), voters: []NodeID{"d"}, from: "e", term: 6, index: 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := planRecovery(tc.states, tc.members, 5)
			if tc.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refuse) {
					t.Fatalf("err %v, want a refusal saying %q", err, tc.refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := plan.report()
			if !slices.Equal(r.Voters, tc.voters) || r.From != tc.from || plan.Term != tc.term || plan.Index != tc.index ||
				len(r.Voters)+len(r.Nonvoters) != len(tc.states) {
				t.Fatalf("plan %+v, want voters %v from %s, term %d, index %d", r, tc.voters, tc.from, tc.term, tc.index)
			}
		})
	}
}

// TestReplayLog: a survey's map has the commands of the member's log past its map applied, those already in
// it not applied again.
func TestReplayLog(t *testing.T) {
	m := newClusterMap(Layout{Segments: 4, Partitions: 2}, 2)
	logs := raft.NewInmemStore()
	var entries []*raft.Log
	for i, name := range []NodeID{"a", "b", "c"} {
		data, err := encode(&command{Kind: cmdUpsertNode, Node: NodeInfo{ID: name, DataAddr: string(name) + ":1", Incarnation: 1}})
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data})
	}
	entries = append(entries, &raft.Log{Index: 4, Term: 1, Type: raft.LogConfiguration})
	if err := logs.StoreLogs(entries); err != nil {
		t.Fatal(err)
	}
	first, err := replayLog(m, logs, 1)
	if err != nil || first.Index != 1 || len(first.Nodes) != 1 {
		t.Fatalf("replay to 1: %v, index %d, nodes %v; want index 1 and a", err, first.Index, first.Nodes)
	}
	all, err := replayLog(first, logs, 4)
	if err != nil || all.Index != 3 || len(all.Nodes) != 3 {
		t.Fatalf("replay to 4: %v, index %d, nodes %v; want index 3 and a, b, c", err, all.Index, all.Nodes)
	}
	if len(m.Nodes) != 0 {
		t.Fatal("replay changed the map it started from")
	}
}

// TestRESPRecover: RECOVER needs a login allowed @admin commands, and relays a refusal as a QUORUM error.
func TestRESPRecover(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 3, func(cfg *Config) {
		cfg.RESPUsers = []RESPUser{
			{Name: "default", Disabled: true},
			{Name: "admin", Passwords: []string{"a"}},
			{Name: "reader", Passwords: []string{"r"}, ReadOnly: true},
		}
	})
	r := dialRaw(t, c.node(0).RESPAddr())
	for _, s := range []struct{ input, want string }{
		{respCmd("RECOVER"), "-NOAUTH Authentication required."},
		{respCmd("AUTH", "reader", "r"), "+OK"},
		{respCmd("RECOVER"), "-NOPERM"},
		{respCmd("AUTH", "admin", "a"), "+OK"},
		{respCmd("RECOVER", "now"), "-ERR wrong number of arguments for 'recover' command"},
		{respCmd("RECOVER"), "-QUORUM zaris: control-plane quorum still reachable: "},
	} {
		r.send(s.input)
		if got := r.line(); !strings.HasPrefix(got, s.want) {
			t.Fatalf("%q: %q, want %q", s.input, got, s.want)
		}
	}
}

// TestRecoveryStartRefusals: a node refuses, without touching its control plane, a new start it cannot
// take, whatever a peer sends.
func TestRecoveryStartRefusals(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	n := c.node(0)
	instance := n.ctl.raft.cur.Load()
	m := n.ClusterMap()
	self := raft.Server{Suffrage: raft.Voter, ID: n.ctl.serverID(), Address: raftAddress(n.DataAddr(), n.ctl.serverID())}
	other := raft.Server{Suffrage: raft.Voter, ID: "x#1", Address: "x#1@x:1"}
	otherLayout := newClusterMap(Layout{Segments: 4, Partitions: 2}, 1)
	start := func(edit func(*recoveryStart)) []byte {
		s := recoveryStart{Term: 1000, Index: m.Index + 1000, Servers: []raft.Server{self}, Map: m}
		edit(&s)
		b, err := encode(&s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{name: "garbage", payload: []byte{0xc1, 0xff, 0x00}, want: "recovery start"},
		{name: "no map", payload: start(func(s *recoveryStart) { s.Map = nil }), want: "layout"},
		{name: "another layout", payload: start(func(s *recoveryStart) { s.Map = otherLayout }), want: "layout"},
		{name: "index not past the map", payload: start(func(s *recoveryStart) { s.Index = m.Index }), want: "not past"},
		{name: "without this server", payload: start(func(s *recoveryStart) { s.Servers = []raft.Server{other} }), want: "does not list"},
		{name: "a server twice", payload: start(func(s *recoveryStart) { s.Servers = []raft.Server{self, self} }), want: "twice"},
		{name: "no voter", payload: start(func(s *recoveryStart) { s.Servers[0].Suffrage = raft.Nonvoter }), want: "without a voter"},
		{name: "a leader heard", payload: start(func(*recoveryStart) {}), want: "follows leader"},
	} {
		_, err := n.ctl.serveRecovery(kv.OpRecoveryInstall, tc.payload)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if n.ctl.raft.cur.Load() != instance {
		t.Fatal("a refused start replaced the raft instance")
	}
}
