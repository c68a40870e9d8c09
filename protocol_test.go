package zaris

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/transport"
)

func TestClusterProtocol(t *testing.T) {
	speaks := func(v uint16, status serf.MemberStatus) member {
		return member{Status: status, Protocol: transport.Greeting{Version: v, MinVersion: max(v, 1) - 1}}
	}
	for _, tc := range []struct {
		name    string
		members []member
		current uint16
		want    uint16
	}{
		{"every member new", []member{speaks(2, serf.StatusAlive), speaks(2, serf.StatusAlive)}, 1, 2},
		{"one member old", []member{speaks(2, serf.StatusAlive), speaks(1, serf.StatusAlive)}, 1, 1},
		{"an old member failed may come back", []member{speaks(2, serf.StatusAlive), speaks(1, serf.StatusFailed)}, 1, 1},
		{"an old member leaving still runs", []member{speaks(2, serf.StatusAlive), speaks(1, serf.StatusLeaving)}, 1, 1},
		{"an old member that left is gone", []member{speaks(2, serf.StatusAlive), speaks(1, serf.StatusLeft)}, 1, 2},
		{"never falls", []member{speaks(1, serf.StatusAlive)}, 2, 2},
		{"no members", nil, 1, 1},
	} {
		if got := clusterProtocol(tc.members, tc.current); got != tc.want {
			t.Errorf("%s: clusterProtocol = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestCheckPeerVersions(t *testing.T) {
	own := peerVersions{protocol: transport.Greeting{Version: 2, MinVersion: 1}, cluster: 2}
	tags := func(v peerVersions) map[string]string { return v.tags() }
	for _, tc := range []struct {
		name string
		tags map[string]string
		want string // in the error; "" for none
	}{
		{"same release", tags(own), ""},
		{"the next release, cluster not yet raised", tags(peerVersions{transport.Greeting{Version: 3, MinVersion: 2}, 2}), ""},
		{"two releases on", tags(peerVersions{transport.Greeting{Version: 4, MinVersion: 3}, 2}), "speaks protocol 4"},
		{"a cluster raised past this node", tags(peerVersions{transport.Greeting{Version: 3, MinVersion: 2}, 3}), "runs protocol 3; this node speaks 2"},
		{"a peer older than this cluster", tags(peerVersions{transport.Greeting{Version: 1, MinVersion: 0}, 1}), "speaks protocol 1; this cluster runs protocol 2"},
		{"a release without versions", map[string]string{tagRF: "2"}, "announces no protocol version"},
		{"a garbled version", map[string]string{tagProtocol: "x", tagMinProtocol: "1", tagClusterProtocol: "1"}, "announces no protocol version"},
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
	leader := c.leaderNode()
	ticks := leader.ctl.controlTicks.Load()
	waitFor(t, 20*time.Second, "three rounds of the leader's control loop", func() bool {
		leader.ctl.wakeControl()
		return leader.ctl.controlTicks.Load() >= ticks+3
	})
	if p := c.currentMap().Protocol; p != ProtocolVersion-1 {
		t.Fatalf("the cluster's protocol is %d with a member of protocol %d", p, ProtocolVersion-1)
	}

	if err := old.Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	c.forget(0, old)
	waitFor(t, 20*time.Second, "the cluster's protocol raised, and announced", func() bool {
		return upgraded.ctl.fsm.clusterMap().Protocol == ProtocolVersion && upgraded.members.versions().cluster == ProtocolVersion
	})
	for _, key := range keys {
		if got, err := upgraded.Get(ctx, key); err != nil || string(got) != key {
			t.Fatalf("get %s after the rise: %q, %v", key, got, err)
		}
	}

	_, _, err := c.tryAdd(1, func(cfg *Config) { cfg.PreviousProtocol = true })
	if !errors.Is(err, ErrIncompatibleVersion) || !strings.Contains(err.Error(), "runs protocol 1") || !strings.Contains(err.Error(), "speaks") {
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
	if !errors.Is(err, ErrIncompatibleVersion) || !strings.Contains(err.Error(), "speaks protocol 3") {
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
	conn, err = transport.DialMux(bg(t), n.port.dialer, n.DataAddr(), muxData, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(make([]byte, 16)); err == nil {
		if k, err := conn.Read(make([]byte, 1)); err == nil {
			t.Fatalf("the data port answered %d bytes to a connection without a greeting", k)
		}
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
		leader := c.leaderNode()
		ticks := leader.ctl.controlTicks.Load()
		waitFor(t, 20*time.Second, "three rounds of the leader's control loop", func() bool {
			leader.ctl.wakeControl()
			return leader.ctl.controlTicks.Load() >= ticks+3
		})
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
