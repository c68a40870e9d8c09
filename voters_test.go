package zaris

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
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
	leaving := func(name string, inc uint64) member {
		return with(alive(name, inc), func(m *member) { m.Leaving = true })
	}
	left := func(name string, inc uint64) member {
		return with(leaving(name, inc), func(m *member) { m.Status = serf.StatusLeft })
	}
	three := []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1)}
	tests := []struct {
		name     string
		servers  []raft.Server
		members  []member
		dead     []NodeID
		caughtUp []raft.ServerID
		vacated  []NodeID
		max      int
		want     []string
	}{
		{name: "steady", servers: three, members: []member{alive("a", 1), alive("b", 1), alive("c", 1)}},
		{name: "a failed voter stays until DeadServerTimeout", servers: three,
			members: []member{alive("a", 1), alive("b", 1), failed("c", 1)}},
		{name: "a dead voter is removed", servers: three, dead: []NodeID{"c"},
			members: []member{alive("a", 1), alive("b", 1), failed("c", 1)},
			want:    []string{"remove c#1"}},
		{name: "a voter whose member left is demoted first", servers: three,
			members: []member{alive("a", 1), alive("b", 1), with(alive("c", 1), func(m *member) { m.Status = serf.StatusLeft })},
			want:    []string{"demote to non-voter c#1"}},
		{name: "a non-voter whose member left is removed", servers: []raft.Server{voter("a", 1), voter("b", 1), nonvoter("c", 1)},
			members: []member{alive("a", 1), alive("b", 1), with(alive("c", 1), func(m *member) { m.Status = serf.StatusLeft })},
			want:    []string{"remove c#1"}},
		{name: "a voter keeps its vote while it drains", servers: three,
			members: []member{alive("a", 1), alive("b", 1), leaving("c", 1)}},
		{name: "a voter that left is demoted, leaving its partner alone to vote", servers: []raft.Server{voter("a", 1), voter("c", 1)},
			members: []member{alive("a", 1), left("c", 1)},
			want:    []string{"demote to non-voter c#1"}},
		{name: "a drained voter that gossip calls failed, not left, is demoted as one that left", servers: three,
			members: []member{alive("a", 1), alive("b", 1), with(leaving("c", 1), func(m *member) { m.Status = serf.StatusFailed })},
			want:    []string{"demote to non-voter c#1"}},
		{name: "a drained voter whose departure gossip has yet to hear of, only its intent, is demoted", servers: three,
			members: []member{alive("a", 1), alive("b", 1), with(leaving("c", 1), func(m *member) { m.Status = serf.StatusLeaving })},
			want:    []string{"demote to non-voter c#1"}},
		{name: "a drained voter that gossip calls failed keeps its vote while its successor has not caught up",
			servers: append(slices.Clone(three), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), with(leaving("c", 1), func(m *member) { m.Status = serf.StatusFailed }), alive("d", 1)}},
		{name: "a voter that left keeps its vote while the others would have no live quorum without it", servers: three,
			members: []member{alive("a", 1), failed("b", 1), left("c", 1)}},
		{name: "a voter that left is demoted once the dead voter is removed", servers: three, dead: []NodeID{"b"},
			members: []member{alive("a", 1), failed("b", 1), left("c", 1)},
			want:    []string{"remove b#1", "demote to non-voter c#1"}},
		{name: "a caught-up non-voter takes the vote of one that left beside a failed voter, which is then demoted", caughtUp: []raft.ServerID{"d#1"},
			servers: append(slices.Clone(three), nonvoter("d", 1)),
			members: []member{alive("a", 1), failed("b", 1), left("c", 1), alive("d", 1)},
			want:    []string{"promote to voter d#1", "demote to non-voter c#1"}},
		{name: "a voter that left keeps its vote while its successor has not caught up",
			servers: append(slices.Clone(three), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), left("c", 1), alive("d", 1)}},
		{name: "a voter that left hands its seat to a caught-up successor, then is demoted", caughtUp: []raft.ServerID{"d#1"},
			servers: append(slices.Clone(three), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), left("c", 1), alive("d", 1)},
			want:    []string{"promote to voter d#1", "demote to non-voter c#1"}},
		{name: "of five voters, one that left is demoted: the four others fill the three seats four members call for",
			servers: []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1), voter("d", 1), voter("e", 1)},
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), left("e", 1)},
			want:    []string{"demote to non-voter e#1"}},
		{name: "a shrinking cluster demotes voters that left once the rest fill the seats",
			servers: []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1), voter("d", 1), voter("e", 1)},
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), left("d", 1), leaving("e", 1)},
			want:    []string{"demote to non-voter d#1"}},
		{name: "a voter that left beside one that drains waits for two successors: voters stay odd", caughtUp: []raft.ServerID{"f#1"},
			servers: append(slices.Clone(three), voter("d", 1), voter("e", 1), nonvoter("f", 1), nonvoter("g", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), left("d", 1), leaving("e", 1), alive("f", 1), alive("g", 1)}},
		{name: "a voter that left beside one that drains hands over to two successors", caughtUp: []raft.ServerID{"f#1", "g#1"},
			servers: append(slices.Clone(three), voter("d", 1), voter("e", 1), nonvoter("f", 1), nonvoter("g", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), left("d", 1), leaving("e", 1), alive("f", 1), alive("g", 1)},
			want:    []string{"promote to voter f#1", "promote to voter g#1", "demote to non-voter d#1"}},
		{name: "a restarted process of a voter that left without handing its seat over takes the vote back",
			servers: append(slices.Clone(three), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 2), alive("d", 1)},
			want:    []string{"remove c#1", "add voter c#2"}},
		{name: "the next process of a voter that left takes its seat back at once while the voters are short", vacated: []NodeID{"e"},
			servers: []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1), voter("d", 1)},
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), alive("e", 2)},
			want:    []string{"add voter e#2"}},
		{name: "the next process of a voter that left joins as a non-voter while the voters fill the seats", vacated: []NodeID{"d"},
			servers: three, members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 2)},
			want: []string{"add non-voter d#2"}},
		{name: "a new member joins as a non-voter even while the voters are short",
			servers: []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1), voter("d", 1)},
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), alive("e", 1)},
			want:    []string{"add non-voter e#1"}},
		{name: "of three caught-up non-voters, two are promoted in name order", caughtUp: []raft.ServerID{"d#1", "e#1", "f#1"},
			servers: append(slices.Clone(three), nonvoter("f", 1), nonvoter("e", 1), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), alive("e", 1), alive("f", 1)},
			want:    []string{"promote to voter d#1", "promote to voter e#1"}},
		{name: "a non-voter not caught up is passed over for one that is", caughtUp: []raft.ServerID{"e#1", "f#1"},
			servers: append(slices.Clone(three), nonvoter("f", 1), nonvoter("e", 1), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), alive("e", 1), alive("f", 1)},
			want:    []string{"promote to voter e#1", "promote to voter f#1"}},
		{name: "once its successor votes, the voter that left is demoted beside the failed one",
			servers: append(slices.Clone(three), voter("d", 1)),
			members: []member{alive("a", 1), failed("b", 1), left("c", 1), alive("d", 1)},
			want:    []string{"demote to non-voter c#1"}},
		{name: "a caught-up non-voter is promoted while a voter drains, which keeps its vote", caughtUp: []raft.ServerID{"d#1"},
			servers: append(slices.Clone(three), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), leaving("c", 1), alive("d", 1)},
			want:    []string{"promote to voter d#1"}},
		{name: "two voters that left are both demoted: the voter left is live", servers: three,
			members: []member{alive("a", 1), left("b", 1), left("c", 1)},
			want:    []string{"demote to non-voter b#1", "demote to non-voter c#1"}},
		{name: "of five voters, one that left is demoted while three others are live",
			servers: []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1), voter("d", 1), voter("e", 1)},
			members: []member{alive("a", 1), alive("b", 1), failed("c", 1), alive("d", 1), left("e", 1)},
			want:    []string{"demote to non-voter e#1"}},
		{name: "of five voters, one that left keeps its vote beside two failed ones",
			servers: []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1), voter("d", 1), voter("e", 1)},
			members: []member{alive("a", 1), failed("b", 1), failed("c", 1), alive("d", 1), left("e", 1)}},
		{name: "the leader is not demoted after it left", servers: three,
			members: []member{left("a", 1), alive("b", 1), alive("c", 1)}},
		{name: "a server gossip does not know stays until DeadServerTimeout", servers: three,
			members: []member{alive("a", 1), alive("b", 1)}},
		{name: "a server gossip has not known for DeadServerTimeout is removed", servers: three, dead: []NodeID{"c"},
			members: []member{alive("a", 1), alive("b", 1)},
			want:    []string{"remove c#1"}},
		{name: "a memory-only process restarted replaces its predecessor, which is removed first, and takes its vote", servers: three,
			members: []member{alive("a", 1), alive("b", 1), alive("c", 2)},
			want:    []string{"remove c#1", "add voter c#2"}},
		{name: "a restarted non-voter's new process joins as a non-voter",
			servers: append(slices.Clone(three), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 2)},
			want:    []string{"remove d#1", "add non-voter d#2"}},
		{name: "a restarted voter's new process that is leaving joins as a non-voter", servers: three,
			members: []member{alive("a", 1), alive("b", 1), leaving("c", 2)},
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
		{name: "a caught-up non-voter replaces a removed voter", dead: []NodeID{"c"}, caughtUp: []raft.ServerID{"d#1"},
			servers: append(slices.Clone(three), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), failed("c", 1), alive("d", 1)},
			want:    []string{"remove c#1", "promote to voter d#1"}},
		{name: "a non-voter not caught up waits",
			servers: []raft.Server{voter("a", 1), voter("b", 1), nonvoter("d", 1)},
			members: []member{alive("a", 1), alive("b", 1), alive("d", 1)}},
		{name: "one caught-up non-voter beside three voters waits for a second: voters stay odd", caughtUp: []raft.ServerID{"d#1"},
			servers: append(slices.Clone(three), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1)}},
		{name: "two caught-up non-voters beside three voters make five", caughtUp: []raft.ServerID{"d#1", "e#1"},
			servers: append(slices.Clone(three), nonvoter("e", 1), nonvoter("d", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), alive("e", 1)},
			want:    []string{"promote to voter d#1", "promote to voter e#1"}},
		{name: "no more voters than MaxVoters", max: 3, caughtUp: []raft.ServerID{"d#1", "e#1"},
			servers: append(slices.Clone(three), nonvoter("d", 1), nonvoter("e", 1)),
			members: []member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), alive("e", 1)}},
		{name: "lite and leaving members are not promoted", caughtUp: []raft.ServerID{"d#1", "e#1"},
			servers: []raft.Server{voter("a", 1), nonvoter("d", 1), nonvoter("e", 1)},
			members: []member{alive("a", 1), with(alive("d", 1), func(m *member) { m.Lite = true }),
				with(alive("e", 1), func(m *member) { m.Leaving = true })}},
		{name: "a lone voter takes two caught-up non-voters", caughtUp: []raft.ServerID{"b#1", "c#1"},
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
				CaughtUp:  func(id raft.ServerID) bool { return slices.Contains(tc.caughtUp, id) },
				Vacated:   func(id NodeID) bool { return slices.Contains(tc.vacated, id) },
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

// TestRaftAddressRoundTrip checks that a control-plane address names its server and where it listens, and
// that a plain host:port names no server.
func TestRaftAddressRoundTrip(t *testing.T) {
	tests := []struct {
		addr   raft.ServerAddress
		id     raft.ServerID
		listen string
	}{
		{raftAddress("127.0.0.1:7000", "node-1#beef"), "node-1#beef", "127.0.0.1:7000"},
		{raftAddress("[::1]:7000", "odd@name#1"), "odd@name#1", "[::1]:7000"},
		{raftAddress("host.example:7000", raftID("n", 0xff)), "n#ff", "host.example:7000"},
		{"127.0.0.1:7000", "", "127.0.0.1:7000"},
	}
	for _, tc := range tests {
		if id, listen := splitRaftAddress(tc.addr); id != tc.id || listen != tc.listen {
			t.Errorf("splitRaftAddress(%q) = %q, %q, want %q, %q", tc.addr, id, listen, tc.id, tc.listen)
		}
	}
}

// TestRaftStreamServesOnlyItsServer checks that a control-plane connection reaches raft only on the server
// it names, or on any server when it names none: a process does not answer for another server at its address.
func TestRaftStreamServesOnlyItsServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := raftID("node-1", 2)
	stream := newRaftStream(rawRaftListener{ln}, nil, nil, self, 0)
	defer stream.Close()
	dialer := newRaftStream(nil, nil, nil, raftID("node-0", 1), 0)
	tests := []struct {
		to     raft.ServerAddress
		served bool
	}{
		{raftAddress(ln.Addr().String(), self), true},
		{raft.ServerAddress(ln.Addr().String()), true},
		{raftAddress(ln.Addr().String(), raftID("node-1", 1)), false}, // the process this one replaced
		{raftAddress(ln.Addr().String(), raftID("node-2", 2)), false},
	}
	for _, tc := range tests {
		conn, err := dialer.Dial(tc.to, time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", tc.to, err)
		}
		if _, err := conn.Write([]byte("raft")); err != nil {
			t.Fatalf("write to %s: %v", tc.to, err)
		}
		accepted, err := stream.Accept()
		if err != nil {
			t.Fatalf("accept from %s: %v", tc.to, err)
		}
		got := make([]byte, 4)
		_, err = io.ReadFull(accepted, got)
		switch {
		case tc.served && (err != nil || string(got) != "raft"):
			t.Errorf("connection for %s: read %q, %v; want it served", tc.to, got, err)
		case !tc.served && !errors.Is(err, errOtherServer):
			t.Errorf("connection for %s: read %q, %v; want %v", tc.to, got, err, errOtherServer)
		}
		accepted.Close()
		conn.Close()
	}
}

// rawRaftListener hands out connections whose protocol byte has been read, as the data port's mux does.
type rawRaftListener struct{ net.Listener }

func (l rawRaftListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	var lane [1]byte
	if _, err := io.ReadFull(conn, lane[:]); err != nil || lane[0] != muxRaft {
		conn.Close()
		return nil, fmt.Errorf("lane %q: %v", lane[0], err)
	}
	return conn, nil
}

// TestRestartedProcessDoesNotVoteForItsPredecessor reproduces a lost control-plane decision: the leader
// commits it with one follower while the other is cut off, that follower crashes and restarts (memory only:
// a new server, at the same address), and the leader is cut off. The cut-off follower, lacking the
// decision, must not be elected by the restarted process answering for its predecessor's server; once the
// network heals, every node's map holds the decision.
func TestRestartedProcessDoesNotVoteForItsPredecessor(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader := c.leaderNode()
	var others []int
	for i, n := range c.live() {
		if n != leader {
			others = append(others, i)
		}
	}
	crashed, behind := c.node(others[0]), c.node(others[1])
	c.isolate(behind)

	const p = 0
	if err := leader.ctl.commit(&command{Kind: cmdReclaim, Partition: p, Epoch: leader.ClusterMap().Runtime[p].Epoch}); err != nil {
		t.Fatalf("commit with %s alone: %v", crashed.id, err)
	}
	decided := leader.ClusterMap().Runtime[p].Epoch

	c.kill(others[0])
	c.faults.Partition(string(leader.id), string(crashed.id))
	c.faults.Heal(string(behind.id), string(crashed.id))
	c.faults.Heal(string(crashed.id), string(behind.id))
	restarted := c.restartVia(others[0], behind)
	if restarted.ctl.serverID() == crashed.ctl.serverID() {
		t.Fatalf("%s restarted as the same server %s", crashed.id, crashed.ctl.serverID())
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if behind.IsLeader() {
			t.Fatalf("%s, without the decision committed at epoch %d, was elected", behind.id, decided)
		}
	}

	c.faults.HealAll()
	c.waitStable(20 * time.Second)
	for _, n := range c.live() {
		if got := n.ClusterMap().Runtime[p].Epoch; got < decided {
			t.Errorf("%s: partition %d at epoch %d, want the committed epoch %d or later", n.id, p, got, decided)
		}
	}
}

// TestLeaveFromTwoVotersKeepsTheOtherDeciding has one of two voters leave while the fault injector holds its
// control-plane traffic, so that it hears nothing from the other after it hands leadership over. It must not
// take that silence for its removal and close with its vote: the other would then never again have a quorum.
// Once the link heals the other voter leads and takes writes, and the leaver's departure went through.
func TestLeaveFromTwoVotersKeepsTheOtherDeciding(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startCluster(t, 2, func(cfg *Config) { cfg.Lite = cfg.Name == "node-1" }) // the leaver has nothing to drain
	stayer, leaver := c.node(0), c.node(1)
	cf := leaver.ctl.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	if voters := countVoters(cf.Configuration()); voters != 2 {
		t.Fatalf("%d voters, want 2: %v", voters, cf.Configuration().Servers)
	}
	waitFor(t, 10*time.Second, string(leaver.id)+" to lead", func() bool {
		if !leaver.IsLeader() {
			_ = c.giveLeadershipBack(leaver, time.Second) // a transfer that fails is tried again
		}
		return leaver.IsLeader()
	})

	c.faults.Partition(string(stayer.id), string(leaver.id))
	left := make(chan error, 1)
	go func() {
		// Long enough to outlast the partition and the removal after it on a loaded machine: the test
		// bounds the leave once healed below.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		left <- leaver.Leave(ctx)
	}()
	waitFor(t, 10*time.Second, string(leaver.id)+" to stop leading", func() bool { return !leaver.IsLeader() })
	held := time.After(20 * leaver.cfg.Timing.RaftHeartbeat) // far beyond the silence it once took for its removal
	select {
	case err := <-left:
		t.Fatalf("%s left, with its vote, while cut off from the only other voter: %v", leaver.id, err)
	case <-held:
	}
	c.faults.HealAll()
	select {
	case err := <-left:
		if err != nil {
			t.Fatalf("%s leaves: %v", leaver.id, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not finish leaving once healed", leaver.id)
	}
	waitFor(t, 10*time.Second, string(stayer.id)+" to lead alone", stayer.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stayer.Put(ctx, "after-the-leave", []byte("v")); err != nil {
		t.Fatalf("put after %s left: %v", leaver.id, err)
	}
}

// TestLeaveBesideAFailedVoter has a voter leave while another voter is dead but not yet removed (its
// DeadServerTimeout far off): the others hold no live quorum without the leaver until a stable non-voter
// takes a vote, so that non-voter is promoted first, and the leave finishes long before the dead voter's
// removal. The dead voter keeps its vote meanwhile, and the cluster still takes writes.
func TestLeaveBesideAFailedVoter(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startCluster(t, 3, replicated(2, quickFailure, func(cfg *Config) { cfg.DeadServerTimeout = time.Hour }))
	leader := c.currentLeader(t)
	var others []*Node
	for _, n := range c.live() {
		if n != leader {
			others = append(others, n)
		}
	}
	dead, leaver := others[0], others[1]
	successor := c.add(3)
	c.waitStable(20 * time.Second)
	c.kill(c.indexOf(dead.id))
	waitFor(t, 60*time.Second, "a Healthy map without the dead node", c.settledWithout)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := leaver.Leave(ctx); err != nil {
		t.Fatalf("%s leaves beside the dead voter %s: %v", leaver.id, dead.id, err)
	}
	c.forget(c.indexOf(leaver.id), leaver)
	var servers []raft.Server
	waitFor(t, 10*time.Second, string(leaver.id)+"'s server to be removed", func() bool {
		cf := leader.ctl.raft.GetConfiguration()
		servers = cf.Configuration().Servers
		return cf.Error() == nil && !slices.ContainsFunc(servers, func(s raft.Server) bool {
			name, _ := splitRaftID(s.ID)
			return name == leaver.id
		})
	})
	voters := map[NodeID]bool{}
	for _, s := range servers {
		if name, _ := splitRaftID(s.ID); s.Suffrage == raft.Voter {
			voters[name] = true
		}
	}
	if want := map[NodeID]bool{leader.id: true, dead.id: true, successor.id: true}; !maps.Equal(voters, want) {
		t.Fatalf("voters %v; want %v", voters, want)
	}
	if err := leader.Put(bg(t), "after-the-leave", []byte("v")); err != nil {
		t.Fatalf("put after %s left: %v", leaver.id, err)
	}
}

// quickFailure fails a dead node's partitions over after a second and takes it out of the map after two.
func quickFailure(cfg *Config) {
	cfg.FailoverTimeout = time.Second
	cfg.EvictionTimeout = 2 * time.Second
}

// countVoters counts the voters of configuration c.
func countVoters(c raft.Configuration) int {
	n := 0
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			n++
		}
	}
	return n
}

// TestVotersReplacedOneByOne replaces every node of a three-node cluster, one at a time, by a new node with a
// new name: each original is killed for good once its replacement has joined. The dead voter must leave the
// control plane and the replacement become a voter, so the cluster keeps deciding: each partition of the
// dead node fails over, is rebalanced onto the live nodes, and takes writes; every acknowledged write stays
// readable at the end.
func TestVotersReplacedOneByOne(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startCluster(t, 3, replicated(2, quickFailure, func(cfg *Config) { cfg.DeadServerTimeout = time.Second }))
	ctx := bg(t)
	written := map[string]string{}
	write := func(round int) {
		live := c.live()
		for i := range 50 {
			k := fmt.Sprintf("round%d-%d", round, i)
			err := live[i%len(live)].Put(ctx, k, []byte(k))
			for errors.Is(err, ErrUnconfirmed) { // a move's hand-over cut short: the put is idempotent, send it again
				err = live[i%len(live)].Put(ctx, k, []byte(k))
			}
			if err != nil {
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
	cf := c.node(li).ctl.raft.GetConfiguration()
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

// TestLeaverFindsItsServer checks that a leaving node tells its own control-plane server, named by node and
// process, from the servers of other nodes and from its predecessor's, and whether it still votes.
func TestLeaverFindsItsServer(t *testing.T) {
	cp := &controlPlane{controlConfig: controlConfig{id: "a"}, serverInc: 2}
	server := func(name NodeID, inc uint64, s raft.ServerSuffrage) raft.Server {
		return raft.Server{Suffrage: s, ID: raftID(name, inc)}
	}
	for _, tc := range []struct {
		name          string
		servers       []raft.Server
		votes, others bool
	}{
		{"alone", []raft.Server{server("a", 2, raft.Voter)}, true, false},
		{"with a voter", []raft.Server{server("a", 2, raft.Voter), server("b", 1, raft.Voter)}, true, true},
		{"with a non-voter", []raft.Server{server("a", 2, raft.Voter), server("b", 1, raft.Nonvoter)}, true, false},
		{"demoted", []raft.Server{server("a", 2, raft.Nonvoter), server("b", 1, raft.Voter)}, false, true},
		{"removed", []raft.Server{server("a", 1, raft.Voter), server("b", 1, raft.Voter)}, false, true},
		{"beside its predecessor", []raft.Server{server("a", 1, raft.Voter), server("a", 2, raft.Voter)}, true, false},
	} {
		c := raft.Configuration{Servers: tc.servers}
		if got := cp.votesIn(c); got != tc.votes {
			t.Errorf("%s: votesIn = %v, want %v", tc.name, got, tc.votes)
		}
		if got := cp.othersVote(c); got != tc.others {
			t.Errorf("%s: othersVote = %v, want %v", tc.name, got, tc.others)
		}
	}
}

// TestLeaderLeaveKeepsWritesFlowing makes the control-plane leader leave gracefully while three writers on
// each other node write without pause. Owners' leases last half a heartbeat timeout, so an election after a
// timeout (no follower starts one sooner) would stop every write for longer than a lease: leadership must
// pass by hand-over. The leaver is given leadership straight back after its first hand-over, as when it wins
// the next election, and must hand it over again rather than stop as leader. From the end of its drain
// (moving partitions is not under test here) until every node takes writes again once the control plane
// has dropped the leaver, no stretch without a write acknowledged anywhere may last a lease; and every
// acknowledged write must be readable at the end.
func TestLeaderLeaveKeepsWritesFlowing(t *testing.T) { // not in parallel: it times a gap in acknowledgements
	timing := LocalTiming()
	failover := timing.RaftHeartbeat
	lease := failover / 2
	c := startCluster(t, 3, elastic(func(cfg *Config) { cfg.FailoverTimeout = failover }))
	li := c.leader()
	if li < 0 {
		t.Fatal("no control-plane leader")
	}
	leaver := c.node(li)
	var through []*Node
	for _, n := range c.live() {
		if n != leaver {
			through = append(through, n, n, n)
		}
	}
	writers := startWriters(t, through)
	c.awaitWritable(t, 10*time.Second)
	handedBack := make(chan error, 1)
	go func() { handedBack <- c.giveLeadershipBack(leaver, 10*time.Second) }()
	left := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		left <- leaver.Leave(ctx)
	}()
	waitFor(t, 20*time.Second, "the leaver to drain", func() bool { return !leaver.ClusterMap().holds(leaver.id) })
	start := time.Now()
	if err := <-left; err != nil {
		t.Fatalf("leave: %v", err)
	}
	c.kill(li)
	if err := <-handedBack; err != nil {
		t.Fatalf("give leadership back to the leaver: %v", err)
	}
	c.awaitDropped(t, leaver, 10*time.Second)
	c.awaitWritable(t, 10*time.Second)
	end := time.Now()
	gap := longestGap(stopWriters(t, writers), start, end)
	t.Logf("longest stretch with no write acknowledged: %v of %v", gap, end.Sub(start))
	if gap >= lease {
		t.Fatalf("no write acknowledged for %v while the leader left; want less than a lease, %v", gap, lease)
	}
	c.waitHealthy(20 * time.Second)
	for _, w := range writers {
		w.assertReadBack(t, c.live())
	}
}

// awaitDropped waits until a live leader's control-plane configuration no longer lists gone's server.
func (c *testCluster) awaitDropped(t *testing.T, gone *Node, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "the control plane to drop "+string(gone.id), func() bool {
		li := c.leader()
		if li < 0 {
			return false
		}
		cf := c.node(li).ctl.raft.GetConfiguration()
		return cf.Error() == nil && !slices.ContainsFunc(cf.Configuration().Servers, func(s raft.Server) bool {
			return s.ID == raftID(gone.id, gone.ctl.serverInc)
		})
	})
}

// awaitWritable waits until a write through every live node is acknowledged.
func (c *testCluster) awaitWritable(t *testing.T, timeout time.Duration) {
	t.Helper()
	for _, n := range c.live() {
		waitFor(t, timeout, "a write through "+string(n.id), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			return n.Put(ctx, "writable-"+string(n.id), []byte("ok")) == nil
		})
	}
}

// startWriters starts a writer on each of nodes; the test's cleanup stops those still running.
func startWriters(t *testing.T, nodes []*Node) []*writer {
	var writers []*writer
	for _, n := range nodes {
		w := &writer{id: len(writers), node: n, keys: 40, stop: make(chan struct{}), done: make(chan struct{})}
		w.acked = make([]int, w.keys)
		writers = append(writers, w)
		go w.run()
	}
	t.Cleanup(func() {
		for _, w := range writers {
			w.halt()
		}
	})
	return writers
}

// stopWriters stops writers, fails the test if one of them failed, and returns the times of every write they
// got acknowledged, sorted.
func stopWriters(t *testing.T, writers []*writer) []time.Time {
	t.Helper()
	var acks []time.Time
	for _, w := range writers {
		w.halt()
		if w.err != nil {
			t.Fatalf("writer on %s: %v", w.node.id, w.err)
		}
		acks = append(acks, w.acks...)
	}
	slices.SortFunc(acks, time.Time.Compare)
	return acks
}

// giveLeadershipBack waits until a node other than leaver leads the control plane and has it hand leadership
// straight back to leaver.
func (c *testCluster) giveLeadershipBack(leaver *Node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if i := c.leader(); i >= 0 && c.node(i) != leaver {
			id, addr := raftID(leaver.id, leaver.ctl.serverInc), raft.ServerAddress(leaver.DataAddr())
			return c.node(i).ctl.raft.LeadershipTransferToServer(id, addr).Error()
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("no node other than %s led within %v", leaver.id, timeout)
}

// longestGap returns the longest stretch of [from, to] in which none of acks falls; acks must be sorted.
func longestGap(acks []time.Time, from, to time.Time) time.Duration {
	var longest time.Duration
	prev := from
	for _, at := range acks {
		if at.Before(from) {
			continue
		}
		if at.After(to) {
			break
		}
		longest = max(longest, at.Sub(prev))
		prev = at
	}
	return max(longest, to.Sub(prev))
}

// TestOthersKeepQuorum checks when a leaving voter may take silence from the leader for its removal: only
// where the other voters make a quorum without it.
func TestOthersKeepQuorum(t *testing.T) {
	for voters, want := range []bool{1: false, 2: false, 3: true, 4: true, 5: true} {
		if voters == 0 {
			continue
		}
		var c raft.Configuration
		for i := range voters {
			c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raftID(NodeID(fmt.Sprint(i)), 1)})
		}
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Nonvoter, ID: "n#1"})
		if got := othersKeepQuorum(c); got != want {
			t.Errorf("%d voters and a non-voter: othersKeepQuorum = %v, want %v", voters, got, want)
		}
	}
}

// TestRestartedVoterKeepsItsVote restarts a voter, memory-only, with ServerStabilization far away: its new
// process is a new server, and it takes its predecessor's vote at once rather than wait to be promoted, so
// the control plane is never left a voter short while the cluster restarts its processes one after another.
func TestRestartedVoterKeepsItsVote(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *Config) { cfg.Timing.ServerStabilization = time.Hour })
	leader := c.leader()
	i := (leader + 1) % 3
	old := c.node(i).ctl.serverID()
	c.kill(i)
	restarted := c.restart(i)
	waitFor(t, 20*time.Second, "the restarted process to vote in its predecessor's place", func() bool {
		cf := c.node(leader).ctl.raft.GetConfiguration()
		if cf.Error() != nil {
			return false
		}
		voters := 0
		for _, s := range cf.Configuration().Servers {
			switch {
			case s.ID == old:
				return false
			case s.Suffrage == raft.Voter:
				voters++
			}
		}
		return voters == 3 && restarted.ctl.votesIn(cf.Configuration())
	})
}

// TestLiteLeaveNeedsNoControlPlane has lite members leave: one beside a working control plane, which records
// no drain of it, and one while the control plane has lost its quorum. Neither holds a partition, so neither
// leave waits for a decision.
func TestLiteLeaveNeedsNoControlPlane(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, elastic())
	lite := func() *Node { return c.addWith(1, func(cfg *Config) { cfg.Lite = true }) }
	first, second := lite(), lite()
	for _, n := range []*Node{first, second} {
		waitFor(t, 20*time.Second, "the lite members to apply the map", func() bool { return n.ClusterMap().Version > 0 })
	}
	if err := first.Leave(bg(t)); err != nil {
		t.Fatal(err)
	}
	if m := c.node(0).ClusterMap(); m.draining(first.id) {
		t.Fatalf("the map records the lite member draining: %v", m.Draining)
	}

	c.kill(1)
	c.kill(2)
	waitFor(t, 20*time.Second, "the control plane to lose its leader", func() bool { return !c.node(0).IsLeader() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := second.Leave(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestControlPlaneReplicatesOneRequestAtATime checks that the control plane's transport refuses raft's
// pipelined replication, which can deadlock a follower's replication, and Shutdown with it, once the follower
// refuses an append.
func TestControlPlaneReplicatesOneRequestAtATime(t *testing.T) {
	c := startCluster(t, 1, nil)
	n := c.node(0)
	if _, err := n.ctl.raftTrans.AppendEntriesPipeline("other", raft.ServerAddress(n.DataAddr())); !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("a replication pipeline: %v; want %v", err, raft.ErrPipelineReplicationNotSupported)
	}
}

// TestCutOffServerDoesNotDeposeTheLeader cuts a follower off from the others for several election timeouts
// and heals it: with the pre-vote its campaigns never raise its term, so once heard again it follows the
// leader it had, under the same term, rather than forcing an election.
func TestCutOffServerDoesNotDeposeTheLeader(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	c.waitStable(20 * time.Second)
	leader := c.leaderNode()
	term := leader.ctl.raft.CurrentTerm()
	var cut *Node
	for _, n := range c.live() {
		if n != leader {
			cut = n
			break
		}
	}
	c.isolate(cut)
	election := cut.cfg.Timing.RaftElection
	waitFor(t, 20*time.Second, "the cut-off follower to campaign", func() bool {
		return cut.ctl.raft.State() == raft.Candidate || cut.ctl.raft.State() == raft.Follower && cut.ctl.leaderID() == ""
	})
	deadline := time.Now().Add(5 * election) // the cut-off server campaigns several times meanwhile
	for time.Now().Before(deadline) {
		if got := cut.ctl.raft.CurrentTerm(); got != term {
			t.Fatalf("the cut-off server's term went from %d to %d without a vote it could win", term, got)
		}
		time.Sleep(election / 4)
	}
	c.faults.HealAll()
	waitFor(t, 20*time.Second, "the healed follower to follow the leader", func() bool {
		return cut.ctl.leaderID() == leader.id
	})
	if !leader.IsLeader() || leader.ctl.raft.CurrentTerm() != term {
		t.Fatalf("after the heal: %s leads %v under term %d; it led under term %d", leader.id, leader.IsLeader(), leader.ctl.raft.CurrentTerm(), term)
	}
}

// TestFirstFounderStandsAtOnce: a new cluster elects its first leader without waiting out a heartbeat
// timeout, in one election, won by the first founder by name, and no founder warns when that election
// reaches it before its own bootstrap. With a 30 s heartbeat, waiting it out would outlast startCluster's
// 20 s.
func TestFirstFounderStandsAtOnce(t *testing.T) {
	t.Parallel()
	for range 10 {
		c := startCluster(t, 3, func(cfg *Config) {
			cfg.Timing.RaftHeartbeat = 30 * time.Second
			cfg.Timing.RaftElection = 30 * time.Second
			cfg.Timing.RaftLeaderLease = 10 * time.Second
		})
		if leader := c.leaderNode(); leader.id != "node-0" {
			t.Fatalf("first leader %s; want node-0, the first founder by name", leader.id)
		}
		for _, n := range c.live() {
			if term := n.ctl.raft.CurrentTerm(); term != 2 {
				t.Errorf("%s at term %d; want 2: the bootstrap's term, then one election", n.id, term)
			}
		}
		if logs := c.logs.String(); strings.Contains(logs, `msg="bootstrap control plane"`) {
			t.Fatalf("a founder warned of its bootstrap:\n%s", logs)
		}
		c.stopAll()
	}
}

// TestFirstMapDoesNotWaitForGossip: a new leader decides the cluster's first map while the tag saying
// that the cluster has formed, which takes a few gossip rounds to spread, is still on its way.
func TestFirstMapDoesNotWaitForGossip(t *testing.T) {
	released := make(chan struct{})
	var mu sync.Mutex
	reached := map[string]bool{}
	c := startCluster(t, 3, func(cfg *Config) {
		name := cfg.Name
		cfg.hooks.beforeAdvertiseFormed = func(life context.Context) {
			mu.Lock()
			reached[name] = true
			mu.Unlock()
			select {
			case <-released:
			case <-life.Done():
			}
		}
	})
	leader := c.leaderNode()
	mu.Lock()
	held := reached[string(leader.id)]
	mu.Unlock()
	if !held {
		t.Fatalf("the leader %s had not begun to advertise the cluster formed when the map was stable", leader.id)
	}
	close(released)
	waitFor(t, 10*time.Second, "every member to see every other advertise the cluster formed", func() bool {
		for _, n := range c.live() {
			for _, m := range n.members.members() {
				if !m.Formed {
					return false
				}
			}
		}
		return true
	})
}

// voterSamples records the number of voters after every server change any leader makes, through the
// afterServerChange hook of each node's config.
type voterSamples struct {
	mu      sync.Mutex
	samples []voterSample
}

type voterSample struct {
	change serverChange
	voters int
}

func (s *voterSamples) hook(cfg *Config) {
	cfg.hooks.afterServerChange = func(ch serverChange, c raft.Configuration) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.samples = append(s.samples, voterSample{change: ch, voters: countVoters(c)})
	}
}

// since returns the samples from the i-th on, and how many there are in all.
func (s *voterSamples) since(i int) ([]voterSample, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples[min(i, len(s.samples)):]), len(s.samples)
}

// assertAtLeast fails the test for each sample with fewer than want voters.
func assertAtLeast(t *testing.T, samples []voterSample, want int, during string) {
	t.Helper()
	for _, s := range samples {
		if s.voters < want {
			t.Errorf("%s: %d voters after %s %s (%s); the target for the members that remain is %d",
				during, s.voters, s.change.Kind, s.change.ID, s.change.Why, want)
		}
	}
}

// unready says why the live nodes of c that are not ready are not, or "" when all are.
func (c *testCluster) unready() string {
	var why []string
	for _, n := range c.live() {
		if err := n.Readiness(); err != nil {
			why = append(why, fmt.Sprintf("%s: %v", n.id, err))
		}
	}
	return strings.Join(why, "; ")
}

// awaitReady waits until every live node of c is ready, and otherwise fails the test with their reasons.
func (c *testCluster) awaitReady(t *testing.T, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for why := c.unready(); why != ""; why = c.unready() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready after %v: %s", what, timeout, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRollingRestartKeepsVoters restarts every node of a memory-only cluster of five in turn, as a rolling
// deploy does: each leaves gracefully, its next process joins under the same name as a new control-plane
// server, and the next node leaves as soon as every node is ready again. While one node is away the four
// that remain call for three voters, so no server change may leave fewer; readiness, which the next leave
// waits for, must mean all five vote again. Every acknowledged write reads back at the end.
func TestRollingRestartKeepsVoters(t *testing.T) {
	longScenario(t)
	t.Parallel()
	var rec voterSamples
	c := startCluster(t, 5, elastic(rec.hook))
	c.awaitReady(t, 60*time.Second, "the new cluster")
	for round := range 5 {
		leaver := c.node(round)
		_, seen := rec.since(0)
		leaveCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := leaver.Leave(leaveCtx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %s leaves: %v", round, leaver.id, err)
		}
		c.forget(round, leaver)
		c.restart(round)
		c.awaitReady(t, 60*time.Second, fmt.Sprintf("round %d, %s restarted", round, leaver.id))
		samples, _ := rec.since(seen)
		assertAtLeast(t, samples, 3, fmt.Sprintf("round %d, %s restarting", round, leaver.id))
		li := -1
		waitFor(t, 20*time.Second, "a leader", func() bool { li = c.leader(); return li >= 0 }) // an election may follow readiness
		cf := c.node(li).ctl.raft.GetConfiguration()
		if err := cf.Error(); err != nil {
			t.Fatal(err)
		}
		if voters := countVoters(cf.Configuration()); voters != 5 {
			t.Fatalf("round %d: ready with %d voters, want 5: %v", round, voters, cf.Configuration().Servers)
		}
		key := fmt.Sprintf("after-round-%d", round)
		if err := c.node(round).Put(bg(t), key, []byte(key)); err != nil {
			t.Fatalf("round %d: put: %v", round, err)
		}
	}
	samples, all := rec.since(0)
	t.Logf("%d server changes over the rolling restart; fewest voters after one: %d", all,
		slices.MinFunc(samples, func(a, b voterSample) int { return a.voters - b.voters }).voters)
	for round := range 5 {
		key := fmt.Sprintf("after-round-%d", round)
		if got, err := c.node(0).Get(bg(t), key); err != nil || string(got) != key {
			t.Fatalf("get %q: %q, %v", key, got, err)
		}
	}
}

// TestLeaveWithoutSuccessorKeepsItsVote has a voter of three leave while the only other members are fresh
// non-voters that cannot be promoted (they cannot tell their progress and are far from stable). Demoting
// the leaver would leave two voters where the four members that remain call for three, so it keeps its
// vote and closes as a voter: the two others still make a quorum, and the cluster takes writes. Its next process, under the same name, takes the vote back, as a crashed voter's does.
func TestLeaveWithoutSuccessorKeepsItsVote(t *testing.T) {
	longScenario(t)
	t.Parallel()
	var rec voterSamples
	c := startCluster(t, 3, elastic(rec.hook, func(cfg *Config) { cfg.Timing.ServerStabilization = time.Hour }))
	fresh := func(cfg *Config) {
		cfg.hooks.refuseOp = func(op transport.Op) bool { return op == kv.OpServerProgress }
	}
	c.addWith(3, fresh)
	c.addWith(3, fresh)
	c.waitStable(30 * time.Second)
	li := c.leader()
	if li < 0 {
		t.Fatal("no leader")
	}
	i := (li + 1) % 3
	leaver := c.node(i)
	leaveCtx, cancel := context.WithTimeout(bg(t), 8*time.Second)
	defer cancel()
	// It ends with an error when its time runs out, or without one when the leader fell silent and said,
	// or could not be asked, whether it still votes: either way it closes with its vote.
	t.Logf("%s's leave: %v", leaver.id, leaver.Leave(leaveCtx))
	c.forget(i, leaver)
	leader := c.node(li)
	waitFor(t, 20*time.Second, "the leader to see "+string(leaver.id)+" gone", func() bool {
		return slices.ContainsFunc(leader.members.members(), func(m member) bool {
			return m.ID == leaver.id && m.Status != serf.StatusAlive
		})
	})
	rounds := leader.ctl.controlTicks.Load() + 10
	waitFor(t, 20*time.Second, "ten more control rounds on the leader", func() bool { return leader.ctl.controlTicks.Load() >= rounds })
	samples, _ := rec.since(0)
	assertAtLeast(t, samples, 3, "the leave")
	cf := leader.ctl.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	if !leaver.ctl.votesIn(cf.Configuration()) {
		t.Fatalf("%s's server lost its vote: %v", leaver.id, cf.Configuration().Servers)
	}
	if err := leader.Put(bg(t), "after-the-leave", []byte("v")); err != nil {
		t.Fatalf("put after %s closed as a voter: %v", leaver.id, err)
	}
	next := c.restart(i)
	waitFor(t, 30*time.Second, string(next.id)+"'s next process to take the vote back", func() bool {
		li := c.leader()
		if li < 0 {
			return false
		}
		cf := c.node(li).ctl.raft.GetConfiguration()
		return cf.Error() == nil && next.ctl.votesIn(cf.Configuration()) && !leaver.ctl.votesIn(cf.Configuration()) && countVoters(cf.Configuration()) == 3
	})
}

// TestCaughtUpNonVotersArePromoted grows a cluster of three to five with ServerStabilization an hour away:
// the new members' servers are promoted once they hold the control plane's log, not after the hour, and a
// new member is ready only once it votes, since five members call for five voters.
func TestCaughtUpNonVotersArePromoted(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *Config) { cfg.Timing.ServerStabilization = time.Hour })
	first := c.add(3)
	c.awaitReady(t, 60*time.Second, string(first.id)+" beside three voters")
	second := c.add(3)
	waitFor(t, 60*time.Second, "five voters", func() bool {
		li := c.leader()
		if li < 0 {
			return false
		}
		cf := c.node(li).ctl.raft.GetConfiguration()
		return cf.Error() == nil && countVoters(cf.Configuration()) == 5 && first.ctl.votesIn(cf.Configuration()) && second.ctl.votesIn(cf.Configuration())
	})
	c.awaitReady(t, 60*time.Second, "five voters")
}

// TestServerProgress checks the answer to a progress question: a process answers for its own server only,
// and says whether the server that asks votes.
func TestServerProgress(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, nil)
	a, b := c.node(0), c.node(1)
	p, err := a.ctl.askProgress(bg(t), b.ctl.serverID())
	if err != nil || p.Server != b.ctl.serverID() || p.Applied == 0 || !p.AskerVotes {
		t.Fatalf("progress of %s: %+v, %v", b.id, p, err)
	}
	if _, err := a.ctl.askProgress(bg(t), raftID(b.id, b.ctl.serverInc+1)); !errors.Is(err, errOtherProcess) {
		t.Fatalf("progress of another process of %s: %v, want %v", b.id, err, errOtherProcess)
	}
}
