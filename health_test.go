package zaris

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// TestVotersFilled checks when the control plane has the voters its members call for, as readiness wants:
// the largest odd number up to MaxVoters of the members that run and stay, counting only voters whose
// processes do.
func TestVotersFilled(t *testing.T) {
	voter := func(name string, inc uint64) raft.Server {
		return raft.Server{Suffrage: raft.Voter, ID: raftID(NodeID(name), inc)}
	}
	nonvoter := func(name string, inc uint64) raft.Server {
		s := voter(name, inc)
		s.Suffrage = raft.Nonvoter
		return s
	}
	alive := func(name string, inc uint64) member {
		return member{ID: NodeID(name), DataAddr: name + ":1", Server: inc, Status: serf.StatusAlive}
	}
	with := func(m member, change func(*member)) member { change(&m); return m }
	leaving := func(name string) member { return with(alive(name, 1), func(m *member) { m.Leaving = true }) }
	failed := func(name string) member {
		return with(alive(name, 1), func(m *member) { m.Status = serf.StatusFailed })
	}
	for _, tc := range []struct {
		name    string
		servers []raft.Server
		members []member
		max     int
		ok      bool
	}{
		{"one voter alone", []raft.Server{voter("a", 1)}, []member{alive("a", 1)}, 5, true},
		{"two members call for one voter", []raft.Server{voter("a", 1), nonvoter("b", 1)}, []member{alive("a", 1), alive("b", 1)}, 5, true},
		{"three members, two voters", []raft.Server{voter("a", 1), voter("b", 1), nonvoter("c", 1)},
			[]member{alive("a", 1), alive("b", 1), alive("c", 1)}, 5, false},
		{"five members, four voters: a restarted voter's next process not yet voting",
			[]raft.Server{voter("a", 1), voter("b", 1), voter("c", 1), voter("d", 1), nonvoter("e", 2)},
			[]member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), alive("e", 2)}, 5, false},
		{"five members, five voters", []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1), voter("d", 1), voter("e", 2)},
			[]member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), alive("e", 2)}, 5, true},
		{"a leaving member calls for no seat", []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1), nonvoter("d", 1)},
			[]member{alive("a", 1), alive("b", 1), alive("c", 1), leaving("d")}, 5, true},
		{"a draining voter fills no seat", []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1), nonvoter("d", 1)},
			[]member{alive("a", 1), alive("b", 1), leaving("c"), alive("d", 1)}, 5, false},
		{"a failed voter fills no seat, nor calls for one", []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1)},
			[]member{alive("a", 1), alive("b", 1), failed("c")}, 5, true},
		{"a predecessor's server fills no seat", []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1)},
			[]member{alive("a", 1), alive("b", 1), alive("c", 2)}, 5, false},
		{"MaxVoters caps the seats", []raft.Server{voter("a", 1), voter("b", 1), voter("c", 1), nonvoter("d", 1), nonvoter("e", 1)},
			[]member{alive("a", 1), alive("b", 1), alive("c", 1), alive("d", 1), alive("e", 1)}, 3, true},
		{"lite members call for no seat", []raft.Server{voter("a", 1), nonvoter("b", 1), nonvoter("c", 1)},
			[]member{alive("a", 1), with(alive("b", 1), func(m *member) { m.Lite = true }), with(alive("c", 1), func(m *member) { m.Lite = true })}, 5, true},
	} {
		err := votersFilled(tc.servers, tc.members, tc.max)
		if (err == nil) != tc.ok {
			t.Errorf("%s: votersFilled = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestAppliedCloseTo checks how far behind the leader's commit index a server may have applied and still
// count as caught up.
func TestAppliedCloseTo(t *testing.T) {
	for _, tc := range []struct {
		applied, commit uint64
		ok              bool
	}{
		{0, 0, true}, {10, 10, true}, {10, 9, true}, {100, 100 + promotionLag, true},
		{100, 101 + promotionLag, false}, {0, 1000, false},
	} {
		if err := appliedCloseTo(tc.applied, tc.commit); (err == nil) != tc.ok {
			t.Errorf("applied %d, commit %d: %v, want ok %v", tc.applied, tc.commit, err, tc.ok)
		}
	}
}

// TestLeaderWatch feeds the leader watch a sequence of observations and checks the episode it reports and
// the log lines it writes: one ERROR per episode, once it outlasts the alarm's delay, and none before the
// control plane has formed.
func TestLeaderWatch(t *testing.T) {
	var errorsLogged, infos atomic.Int32
	w := leaderWatch{after: 3 * time.Second, log: slog.New(levelCounter{errors: &errorsLogged, infos: &infos})}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		at      time.Duration
		leader  NodeID
		formed  bool
		since   time.Duration // the episode's length after the step
		alarm   bool
		errors  int32
		recover int32
	}{
		{at: 0, formed: false},
		{at: 10 * time.Second, formed: false}, // no control plane yet: waiting to form, not dead
		{at: 11 * time.Second, leader: "a", formed: true},
		{at: 12 * time.Second, formed: true},
		{at: 14 * time.Second, formed: true, since: 2 * time.Second},
		{at: 15 * time.Second, formed: true, since: 3 * time.Second, alarm: true, errors: 1},
		{at: 30 * time.Second, formed: true, since: 18 * time.Second, alarm: true, errors: 1},
		{at: 31 * time.Second, leader: "b", formed: true, errors: 1, recover: 1},
		{at: 32 * time.Second, formed: true, errors: 1, recover: 1},
		{at: 40 * time.Second, formed: true, since: 8 * time.Second, alarm: true, errors: 2, recover: 1},
	}
	for i, s := range steps {
		w.observe(at(s.at), s.leader, s.formed)
		since, alarm := w.episode(at(s.at))
		if since != s.since || alarm != s.alarm || errorsLogged.Load() != s.errors || infos.Load() != s.recover {
			t.Fatalf("step %d (at %v): episode %v, alarm %v, %d errors and %d recoveries logged; want %v, %v, %d, %d",
				i, s.at, since, alarm, errorsLogged.Load(), infos.Load(), s.since, s.alarm, s.errors, s.recover)
		}
	}
}

// levelCounter is a slog handler that counts the ERROR and INFO records about the control plane's leader.
type levelCounter struct{ errors, infos *atomic.Int32 }

func (levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h levelCounter) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "control plane has") {
		return nil
	}
	switch r.Level {
	case slog.LevelError:
		h.errors.Add(1)
	case slog.LevelInfo:
		h.infos.Add(1)
	}
	return nil
}
func (h levelCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h levelCounter) WithGroup(string) slog.Handler      { return h }

// TestLeaderlessNodeSaysSo kills two of three memory-only voters for good: the survivor can elect no
// leader, and after a few election timeouts must say so everywhere an operator looks: one ERROR log line
// (not one per round), the leaderless metrics, Readiness and /readyz, the status page, CLUSTER INFO's
// state and INFO.
func TestLeaderlessNodeSaysSo(t *testing.T) {
	t.Parallel()
	var errorsLogged, infos atomic.Int32
	c := startRESPCluster(t, 3, func(cfg *Config) {
		if cfg.Name == "node-0" {
			cfg.Logger = slog.New(levelCounter{errors: &errorsLogged, infos: &infos})
		}
	})
	survivor := c.node(0)
	c.awaitReady(t, 60*time.Second, "the new cluster")
	conn := dialDiff(t, survivor.RESPAddr())
	if info := infoPayload(t, conn.do(t, []string{"CLUSTER", "INFO"})); !strings.Contains(info, "cluster_state:ok\r\n") || strings.Contains(info, "reason") {
		t.Fatalf("CLUSTER INFO of a healthy cluster:\n%s", info)
	}
	url := metricsServer(t, survivor)
	before := errorsLogged.Load() // a loaded machine may have had an election slow enough for an alarm
	c.kill(1)
	c.kill(2)
	alarmAfter := leaderlessElections * survivor.cfg.Timing.RaftElection
	waitFor(t, 30*time.Second, "the survivor to raise the leaderless alarm", func() bool { return survivor.ctl.controlHealth().Alarm })
	if err := survivor.Readiness(); err == nil || !strings.Contains(err.Error(), "no control-plane leader for") {
		t.Errorf("Readiness while leaderless: %v", err)
	}
	s := scrapeMetrics(t, url)
	if got := s.value("zaris_control_plane_leaderless_alarm"); got != 1 {
		t.Errorf("zaris_control_plane_leaderless_alarm %v, want 1", got)
	}
	if got := s.value("zaris_control_plane_leaderless_seconds"); got < alarmAfter.Seconds() {
		t.Errorf("zaris_control_plane_leaderless_seconds %v, want at least %v", got, alarmAfter.Seconds())
	}
	if v := statusPageOf(survivor).view(); !strings.Contains(v.Leaderless, "no control-plane leader for") || v.Ready == "" {
		t.Errorf("status view while leaderless: leaderless %q, ready %q", v.Leaderless, v.Ready)
	}
	info := infoPayload(t, conn.do(t, []string{"CLUSTER", "INFO"}))
	if !strings.Contains(info, "cluster_state:fail\r\n") || !strings.Contains(info, "zaris_cluster_state_reason:zaris: no control-plane leader for") {
		t.Errorf("CLUSTER INFO while leaderless:\n%s", info)
	}
	if info := infoOf(t, conn, "server"); !strings.Contains(info, "zaris_control_plane_state:leaderless\r\n") || !strings.Contains(info, "zaris_control_plane_leader:\r\n") {
		t.Errorf("INFO server while leaderless:\n%s", info)
	}
	logged := errorsLogged.Load()
	later := survivor.ctl.controlTicks.Load() + 10 // ten more control rounds, each past the alarm's delay
	waitFor(t, 30*time.Second, "ten more control rounds", func() bool { return survivor.ctl.controlTicks.Load() >= later })
	if got := errorsLogged.Load(); logged != before+1 || got != before+1 {
		t.Errorf("%d ERROR lines once the alarm rose, %d ten rounds later; want one for the episode", logged-before, got-before)
	}
}

// TestReadinessBesideAnOlderLeader runs a cluster whose nodes answer progress questions as a version
// without them does, as during a rolling upgrade: readiness cannot learn the leader's commit index, and
// must not hold every node back for it.
func TestReadinessBesideAnOlderLeader(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.hooks.refuseOp = func(op transport.Op) bool { return op == kv.OpServerProgress }
	})
	c.awaitReady(t, 60*time.Second, "beside a leader that cannot tell its progress")
}
