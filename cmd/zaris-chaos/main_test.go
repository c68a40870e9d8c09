package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris"
)

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		nemesis   string
		valueSize int
	}{
		{nil, nemesisMixed, 0},
		{[]string{"-nemesis", "crash-restart"}, nemesisCrashRestart, crashValue},
		{[]string{"-nemesis", "crash-restart", "-value-size", "0"}, nemesisCrashRestart, 0},
		{[]string{"-value-size", "64"}, nemesisMixed, 64},
		{[]string{"-nemesis", "partition"}, nemesisPartition, 0},
	} {
		o, err := parseOptions(tc.args)
		if err != nil || o.nemesis != tc.nemesis || o.valueSize != tc.valueSize {
			t.Errorf("parseOptions(%q) = nemesis %q, value size %d, %v; want %q, %d", tc.args, o.nemesis, o.valueSize, err,
				tc.nemesis, tc.valueSize)
		}
	}
	for _, args := range [][]string{
		{"-nemesis", "chaos"}, {"-value-size", "-1"}, {"-value-size", "2000000"}, {"-replace-every", "0s"},
		{"-dead-server-timeout", "-1s"}, {"-nemesis", "replace", "-eviction-timeout", "100ms"},
	} {
		if _, err := parseOptions(args); err == nil {
			t.Errorf("parseOptions(%q) accepted", args)
		}
	}
}

// TestStoppable checks the victims within the failure model: a server restarted after a kill holds
// nothing until the map records its new process, so its partners must stay up meanwhile.
func TestStoppable(t *testing.T) {
	c := &cluster{}
	for _, name := range []string{"a", "b", "c"} {
		c.servers = append(c.servers, &server{name: name, done: make(chan struct{})}) // open: running
	}
	n := newNemesis(c, nil, 1, io.Discard)
	m := &zaris.ClusterMap{
		Nodes: map[zaris.NodeID]zaris.NodeInfo{"a": {Incarnation: 1}, "b": {Incarnation: 1}, "c": {Incarnation: 1}},
		Runtime: []zaris.PartitionState{
			{Owner: "a", InSync: []zaris.NodeID{"b"}},
			{Owner: "b", InSync: []zaris.NodeID{"c"}},
		},
	}
	names := func() []string {
		var out []string
		for _, s := range n.stoppable(m) {
			out = append(out, s.name)
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("stoppable with every copy live = %v, want all", got)
	}
	n.dead["b"] = 1 // b was killed and restarted; the map still lists its previous process
	if got := names(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("stoppable while b's new process is unknown = %v, want [b]", got)
	}
	m.Nodes["b"] = zaris.NodeInfo{Incarnation: 2}
	if got := names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("stoppable once the map knows b's new process = %v, want all", got)
	}
	close(c.servers[2].done) // c is down: it is no copy, and b is the only live one of partition 1
	if got := names(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("stoppable with c down = %v, want [a]", got)
	}
}

// TestParseReplaceOptions checks that -nemesis replace gives the servers short dead-server and eviction
// timeouts unless the flags say otherwise, and that the other schedules leave the servers' defaults.
func TestParseReplaceOptions(t *testing.T) {
	for _, tc := range []struct {
		args                 []string
		deadServer, eviction time.Duration
	}{
		{[]string{"-nemesis", "replace"}, replaceDeadServer, replaceEviction},
		{[]string{"-nemesis", "replace", "-eviction-timeout", "10s", "-dead-server-timeout", "5s"}, 5 * time.Second, 10 * time.Second},
		{[]string{"-nemesis", "crash-restart"}, 0, 0},
		{[]string{"-eviction-timeout", "2s"}, 0, 2 * time.Second},
	} {
		o, err := parseOptions(tc.args)
		if err != nil || o.deadServer != tc.deadServer || o.eviction != tc.eviction {
			t.Errorf("parseOptions(%q) = dead server %v, eviction %v, %v; want %v, %v", tc.args, o.deadServer, o.eviction,
				err, tc.deadServer, tc.eviction)
		}
	}
	c := &cluster{failover: time.Second, deadServer: 2 * time.Second, eviction: 3 * time.Second}
	args := strings.Join(c.args(&server{name: "zaris-6"}, nil), " ")
	if !strings.Contains(args, "--dead-server-timeout 2s") || !strings.Contains(args, "--eviction-timeout 3s") {
		t.Errorf("server args %q lack the timeouts", args)
	}
	c.deadServer, c.eviction = 0, 0
	if args := strings.Join(c.args(&server{name: "zaris-1"}, nil), " "); strings.Contains(args, "timeout 0s") {
		t.Errorf("server args %q pass unset timeouts", args)
	}
}

// TestReplaceVictim checks the replacement's choices: the oldest server still running is the victim, and
// each new server gets the next name, its own ports and its own data directory.
func TestReplaceVictim(t *testing.T) {
	c := &cluster{dataRoot: "/data"}
	for _, name := range []string{"zaris-1", "zaris-2", "zaris-3"} {
		c.servers = append(c.servers, &server{name: name, done: make(chan struct{})})
	}
	if s := oldestRunning(c); s == nil || s.name != "zaris-1" {
		t.Fatalf("oldest running = %v, want zaris-1", s)
	}
	close(c.servers[0].done) // zaris-1 was replaced
	if s := oldestRunning(c); s == nil || s.name != "zaris-2" {
		t.Fatalf("oldest running after zaris-1 died = %v, want zaris-2", s)
	}
	s, err := c.addServer()
	if err != nil {
		t.Fatal(err)
	}
	if s.name != "zaris-4" || s.dataDir != "/data/zaris-4" || s.gossip == s.data || s.data == s.resp {
		t.Fatalf("new server %+v: want zaris-4 with its own ports and data directory", s)
	}
	if last := c.list()[3]; last != s {
		t.Fatalf("new server not appended: %v", last)
	}
	close(c.servers[1].done)
	close(c.servers[2].done)
	if s := oldestRunning(c); s != nil {
		t.Fatalf("oldest running with zaris-4 never started = %v, want none", s)
	}
	for _, u := range []float64{0, 0.5, 0.999} {
		if d := jitter(10*time.Second, u); d < 8*time.Second || d >= 12*time.Second {
			t.Errorf("jitter(10s, %v) = %v, want within 8-12 s", u, d)
		}
	}
}

// TestRetiredHolders checks which replaced servers the map still lists a copy on.
func TestRetiredHolders(t *testing.T) {
	m := &zaris.ClusterMap{
		Assignment: zaris.Assignment{{"b", "c"}, {"c", "d"}},
		Runtime:    []zaris.PartitionState{{Owner: "b", InSync: []zaris.NodeID{"c"}}, {Owner: "c", Target: []zaris.NodeID{"c", "e"}}},
	}
	retired := []retirement{{s: &server{name: "a"}}, {s: &server{name: "d"}}, {s: &server{name: "e"}}}
	if got := retiredHolders(m, retired); !slices.Equal(got, []string{"d", "e"}) {
		t.Fatalf("retired holders = %v, want [d e]", got)
	}
}

// TestFinalVoters checks the voters read from the leaders' logs: founders, plus promotions, minus removals.
func TestFinalVoters(t *testing.T) {
	log := `time=T level=INFO msg="control-plane server change" node=zaris-3 change="add non-voter" server=zaris-6#a7 why="new process"
time=T level=INFO msg="rebalancing" nodes=[zaris-2]
time=T level=INFO msg="control-plane server change" node=zaris-3 change=remove server=zaris-1#22 why="member failed for DeadServerTimeout"
time=T level=INFO msg="control-plane server change" node=zaris-3 change="promote to voter" server=zaris-6#a7 why=stable
`
	changes := parseServerChanges(strings.NewReader(log))
	want := []controlChange{{"add non-voter", "zaris-6"}, {"remove", "zaris-1"}, {"promote to voter", "zaris-6"}}
	if !slices.Equal(changes, want) {
		t.Fatalf("parsed %v, want %v", changes, want)
	}
	if got := finalVoters(founders(3), changes); !slices.Equal(got, []string{"zaris-2", "zaris-3", "zaris-6"}) {
		t.Fatalf("final voters = %v", got)
	}
	if got := founders(7); len(got) != 5 || got[0] != "zaris-1" {
		t.Fatalf("founders(7) = %v, want the first 5", got)
	}
}

// TestSlotKeys checks that the end-of-run sweep has one key in each slot.
func TestSlotKeys(t *testing.T) {
	for slot, key := range slotKeys("k") {
		if int(zaris.KeySlot(key)) != slot {
			t.Fatalf("key %q for slot %d is in slot %d", key, slot, zaris.KeySlot(key))
		}
	}
}

// TestParseRestartOptions checks the restart schedules' options: -nemesis full-restart needs -data-dir,
// and -rolling-stop takes kill (the default) or term.
func TestParseRestartOptions(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		nemesis     string
		rollingStop string
	}{
		{[]string{"-nemesis", "rolling-restart"}, nemesisRollingRestart, "kill"},
		{[]string{"-nemesis", "rolling-restart", "-rolling-stop", "term"}, nemesisRollingRestart, "term"},
		{[]string{"-nemesis", "rolling-restart", "-data-dir", "d"}, nemesisRollingRestart, "kill"},
		{[]string{"-nemesis", "full-restart", "-data-dir", "d"}, nemesisFullRestart, "kill"},
	} {
		o, err := parseOptions(tc.args)
		if err != nil || o.nemesis != tc.nemesis || o.rollingStop != tc.rollingStop {
			t.Errorf("parseOptions(%q) = nemesis %q, rolling stop %q, %v; want %q, %q", tc.args, o.nemesis, o.rollingStop,
				err, tc.nemesis, tc.rollingStop)
		}
	}
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"-nemesis", "full-restart"}, "needs -data-dir"},
		{[]string{"-nemesis", "rolling-restart", "-rolling-stop", "hup"}, "-rolling-stop"},
		{[]string{"-rolling-stop", ""}, "-rolling-stop"},
	} {
		if _, err := parseOptions(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseOptions(%q) = %v, want an error about %s", tc.args, err, tc.want)
		}
	}
}

// TestSecureRun checks that -secure gives every server the flags and files of a secured peer, and the
// lite member a TLS config and gossip key that load.
func TestSecureRun(t *testing.T) {
	p, err := newCredentials(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	args, err := p.serverArgs("zaris-1")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "--gossip-key" {
			continue
		}
		if _, err := os.Stat(args[i+1]); err != nil {
			t.Fatalf("%s: %v", args[i], err)
		}
	}
	if _, err := zaris.TLSFromFiles(args[1], args[3], args[5]); err != nil {
		t.Fatalf("the server's files do not load: %v", err)
	}
	cfg := zaris.DefaultConfig()
	cfg.Name = "chaos-lite"
	if err := p.secure(&cfg); err != nil || cfg.TLS == nil || len(cfg.GossipKey) != 32 {
		t.Fatalf("lite member: TLS %v, gossip key of %d bytes, err %v", cfg.TLS != nil, len(cfg.GossipKey), err)
	}
}
