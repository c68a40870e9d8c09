package zaris

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

func TestClusterProtocol(t *testing.T) {
	speaks := func(v uint16, status serf.MemberStatus) member {
		return member{ID: NodeID("m" + string(rune('0'+v))), Status: status, Protocol: transport.Greeting{Version: v, MinVersion: max(v, 1) - 1}}
	}
	for _, tc := range []struct {
		name    string
		members []member
		current uint16
		// recorded is a node the map records as speaking protocol 1, holding a copy when holds is set.
		recorded, holds bool
		want            uint16
	}{
		{name: "every member new", members: []member{speaks(2, serf.StatusAlive), speaks(2, serf.StatusAlive)}, current: 1, want: 2},
		{name: "one member old", members: []member{speaks(2, serf.StatusAlive), speaks(1, serf.StatusAlive)}, current: 1, want: 1},
		{name: "an old member failed may come back", members: []member{speaks(2, serf.StatusAlive), speaks(1, serf.StatusFailed)}, current: 1, want: 1},
		{name: "an old member leaving still runs", members: []member{speaks(2, serf.StatusAlive), speaks(1, serf.StatusLeaving)}, current: 1, want: 1},
		{name: "an old member that left is gone", members: []member{speaks(2, serf.StatusAlive), speaks(1, serf.StatusLeft)}, current: 1, want: 2},
		{name: "an old node gossip does not know, holding a copy", members: []member{speaks(2, serf.StatusAlive)}, current: 1,
			recorded: true, holds: true, want: 1},
		{name: "an old node gossip does not know, holding nothing", members: []member{speaks(2, serf.StatusAlive)}, current: 1,
			recorded: true, want: 2},
		{name: "never falls", members: []member{speaks(1, serf.StatusAlive)}, current: 2, want: 2},
		{name: "no members", current: 1, want: 1},
	} {
		m := newClusterMap(Layout{Segments: 1, Partitions: 1}, 1)
		m.Protocol = tc.current
		if tc.recorded {
			m.Nodes["old"] = NodeInfo{ID: "old", Protocol: 1}
		}
		if tc.holds {
			m.Runtime[0].Owner = "old"
		}
		if got := clusterProtocol(tc.members, m); got != tc.want {
			t.Errorf("%s: clusterProtocol = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestCheckPeerVersions(t *testing.T) {
	own := transport.Greeting{Version: 2, MinVersion: 1}
	tags := func(version, minVersion uint16, cluster ...uint16) map[string]string {
		v := peerVersions{protocol: transport.Greeting{Version: version, MinVersion: minVersion}}
		if len(cluster) > 0 {
			v.cluster, v.hasCluster = cluster[0], true
		}
		return v.tags()
	}
	for _, tc := range []struct {
		name string
		tags map[string]string
		want string // in the error; "" for none
	}{
		{"same release", tags(2, 1, 2), ""},
		{"same release, no map yet", tags(2, 1), ""},
		{"the next release, cluster not yet raised", tags(3, 2, 2), ""},
		{"two releases on", tags(4, 3, 2), "speaks protocol 4"},
		{"a cluster raised past this node", tags(3, 2, 3), "runs protocol 3; this node speaks 2"},
		{"a peer older than this node's cluster: it refuses itself", tags(1, 0, 1), ""},
		{"a cluster older than this node works with", tags(2, 1, 0), "runs protocol 0; this node works with 1 and up"},
		{"a minimum above the version", map[string]string{tagProtocol: "1", tagMinProtocol: "2"}, "announces no protocol version"},
		{"a release without versions", map[string]string{tagRF: "2"}, "announces no protocol version"},
		{"a garbled version", map[string]string{tagProtocol: "x", tagMinProtocol: "1"}, "announces no protocol version"},
		{"a garbled cluster protocol", map[string]string{tagProtocol: "2", tagMinProtocol: "1", tagClusterProtocol: "-1"}, "announces no protocol version"},
	} {
		err := checkPeerVersions(own, "peer", tc.tags)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrIncompatibleVersion) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrIncompatibleVersion saying %q", tc.name, err, tc.want)
		}
	}
}

// TestClusterProtocolRisesOnceEveryMemberSpeaksIt runs a node of this release beside one that speaks the
// previous protocol: they form a cluster that serves, under the previous protocol, for as long as the older
// one is a member. Once it has left, the cluster's protocol rises, and a node of the previous protocol is
// then refused at the door with an error naming both versions.
func TestClusterProtocolRisesOnceEveryMemberSpeaksIt(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, func(cfg *Config) { cfg.PreviousProtocol, cfg.Segments, cfg.Partitions = true, 64, 8 })
	upgraded := c.addWith(1, func(cfg *Config) { cfg.PreviousProtocol = false })
	old := c.node(0)
	c.waitStable(20 * time.Second)
	ctx := bg(t)
	keys := []string{c.keyOwnedBy("owned-by-the-old-node:", old), c.keyOwnedBy("owned-by-the-upgraded-node:", upgraded)}
	for _, key := range keys {
		if err := old.Put(ctx, key, []byte(key)); err != nil {
			t.Fatalf("put %s through the old node: %v", key, err)
		}
		if got, err := upgraded.Get(ctx, key); err != nil || string(got) != key {
			t.Fatalf("get %s through the upgraded node: %q, %v", key, got, err)
		}
	}
	c.awaitLeaderRounds(t, 3)
	if p := c.currentMap().Protocol; p != ProtocolVersion-1 {
		t.Fatalf("the cluster's protocol is %d with a member of protocol %d", p, ProtocolVersion-1)
	}

	if err := old.Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	c.forget(0, old)
	waitFor(t, 20*time.Second, "the cluster's protocol raised, and announced", func() bool {
		advertised, ok := upgraded.members.advertisedClusterProtocol()
		return upgraded.ctl.fsm.clusterMap().Protocol == ProtocolVersion && ok && advertised == ProtocolVersion
	})
	for _, key := range keys {
		if got, err := upgraded.Get(ctx, key); err != nil || string(got) != key {
			t.Fatalf("get %s after the rise: %q, %v", key, got, err)
		}
	}

	_, _, err := c.tryAdd(1, func(cfg *Config) { cfg.PreviousProtocol = true })
	if !errors.Is(err, ErrIncompatibleVersion) || !strings.Contains(err.Error(), fmt.Sprintf("runs protocol %d", ProtocolVersion)) || !strings.Contains(err.Error(), "speaks") {
		t.Fatalf("a node of the previous protocol joined a cluster past it: %v; want ErrIncompatibleVersion naming both", err)
	}
}

// TestJoinRefusesIncompatibleVersions checks the door both ways: a node two protocols ahead of the cluster
// is refused by gossip with both versions named, and the data port refuses a connection of an
// incompatible protocol, or one of a release that sends no greeting, before reading anything from it.
func TestJoinRefusesIncompatibleVersions(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	ahead := transport.Greeting{Version: ProtocolVersion + 2, MinVersion: ProtocolVersion + 1}
	_, _, err := c.tryAdd(1, func(cfg *Config) { cfg.hooks.greeting = &ahead })
	if !errors.Is(err, ErrIncompatibleVersion) || !strings.Contains(err.Error(), fmt.Sprintf("speaks protocol %d", ProtocolVersion)) {
		t.Fatalf("a node two protocols ahead joined: %v", err)
	}

	n := c.node(0)
	if _, err := transport.DialMux(bg(t), n.port.dialer, n.DataAddr(), muxData, &ahead); !errors.Is(err, transport.ErrIncompatible) {
		t.Fatalf("the data port took a connection of protocol %d: %v", ahead.Version, err)
	}
	conn, err := transport.DialMux(bg(t), n.port.dialer, n.DataAddr(), muxData, new(greeting(&n.cfg)))
	if err != nil {
		t.Fatalf("the data port refused this release's greeting: %v", err)
	}
	conn.Close()
	// A client of a release without greetings sends its request right after the lane byte: never served.
	old := transport.NewClient(n.DataAddr(), transport.Options{MuxByte: muxInternal, Dialer: n.port.dialer})
	defer old.Close()
	ctx, cancel := context.WithTimeout(bg(t), 5*time.Second)
	defer cancel()
	if _, err := old.Call(ctx, kv.OpGetMap, nil); err == nil {
		t.Fatal("the data port served a request sent without a greeting")
	}
	// The node refused at the door left: the cluster neither waits for it nor records it.
	waitFor(t, 20*time.Second, "the refused node gone from the members", func() bool {
		return !slices.ContainsFunc(n.members.members(), func(mb member) bool { return mb.ID != n.id && mb.Status != serf.StatusLeft })
	})
	if nodes := c.currentMap().Nodes; len(nodes) != 1 {
		t.Fatalf("the map records %d nodes after a refused join: %v", len(nodes), nodes)
	}
}

// TestRollingUpgrade rolls a 3-node RF 2 cluster of the previous protocol to this release's one process at a
// time (killed, started again, the cluster waited Healthy) under a writer on every node, with a rollback of
// the first upgraded node on the way. The cluster's protocol must stay where it was until the last node
// runs the new one and rise then, and every acknowledged write must read back.
func TestRollingUpgrade(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.PreviousProtocol = true
		cfg.FailoverTimeout = 500 * time.Millisecond
	}))
	ws := &writerSet{t: t, keys: 40}
	byNode := map[int]*writer{}
	for i := range 3 {
		byNode[i] = ws.start(c.node(i))
	}
	steps := []struct {
		node     int
		previous bool
	}{{0, false}, {0, true}, {0, false}, {1, false}, {2, false}}
	for s, step := range steps {
		ws.stop(byNode[step.node])
		c.kill(step.node)
		c.mu.Lock()
		c.cfgs[step.node].PreviousProtocol = step.previous
		c.mu.Unlock()
		n := c.restart(step.node)
		byNode[step.node] = ws.start(n)
		c.waitRecorded(n, 30*time.Second)
		c.waitHealthy(30 * time.Second)
		if s == len(steps)-1 {
			break
		}
		c.awaitLeaderRounds(t, 3)
		if p := c.currentMap().Protocol; p != ProtocolVersion-1 {
			t.Fatalf("after step %d the cluster's protocol is %d, with a member of protocol %d left", s, p, ProtocolVersion-1)
		}
	}
	waitFor(t, 20*time.Second, "the cluster's protocol raised on every node", func() bool {
		for _, n := range c.live() {
			if n.ctl.fsm.clusterMap().Protocol != ProtocolVersion {
				return false
			}
		}
		return true
	})
	for i := range 3 {
		ws.stop(byNode[i])
	}
	writes := 0
	for _, w := range ws.writers() {
		writes += w.writes
		w.assertReadBack(t, c.live())
	}
	if writes == 0 {
		t.Fatal("no write acknowledged during the upgrade")
	}
	t.Logf("%d acknowledged writes over %d restarts", writes, len(steps))
}

// TestFailedOldMemberHoldsTheProtocolBack kills a node of the previous protocol, then restarts the two others
// on this release's: they never knew the failed node through gossip, but the map records it holding copies,
// so the cluster's protocol must stay put, and the failed node must come back on its previous protocol.
func TestFailedOldMemberHoldsTheProtocolBack(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.PreviousProtocol = true
		cfg.DataDir = filepath.Join(base, cfg.Name)
		cfg.FailoverTimeout = 500 * time.Millisecond
		cfg.EvictionTimeout = 10 * time.Minute // the failed node keeps its assignments throughout
		cfg.Segments, cfg.Partitions = 64, 8
	}))
	c.kill(2)
	waitFor(t, 20*time.Second, "node-2 seen failed", func() bool {
		for _, n := range c.live() {
			if slices.ContainsFunc(n.members.members(), func(mb member) bool { return mb.ID == "node-2" && mb.Status != serf.StatusFailed }) {
				return false
			}
		}
		return true
	})
	for _, i := range []int{0, 1} {
		c.kill(i)
		c.mu.Lock()
		c.cfgs[i].PreviousProtocol = false
		c.mu.Unlock()
		c.waitRecorded(c.restart(i), 30*time.Second)
	}
	c.awaitLeaderRounds(t, 3)
	if p := c.currentMap().Protocol; p != ProtocolVersion-1 {
		t.Fatalf("the cluster's protocol rose to %d while a failed node of protocol %d holds copies", p, ProtocolVersion-1)
	}
	c.waitRecorded(c.restart(2), 30*time.Second)
	if p := c.currentMap().Protocol; p != ProtocolVersion-1 {
		t.Fatalf("the cluster's protocol is %d with a member of protocol %d", p, ProtocolVersion-1)
	}
}

// awaitLeaderRounds waits until the leader's control loop has run n more rounds, so that whatever it would
// decide on the cluster's state as it stands has been decided.
func (c *testCluster) awaitLeaderRounds(t *testing.T, n uint64) {
	t.Helper()
	leader := c.leaderNode()
	ticks := leader.ctl.controlTicks.Load()
	waitFor(t, 20*time.Second, fmt.Sprintf("%d more rounds of the leader's control loop", n), func() bool {
		leader.ctl.wakeControl()
		return leader.ctl.controlTicks.Load() >= ticks+n
	})
}
