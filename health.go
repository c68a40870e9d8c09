package zaris

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/transport"
)

// Readiness returns nil when the node is ready for traffic: it has joined, holds the cluster's map, the map
// records this process (a full member), no partition it owns or replicates is Recovering, and the control
// plane can decide: it has a leader, the voters its members call for, and this node's server has applied
// its log. An orchestrator that restarts one process at a time, each once the previous one is ready, thus
// never takes a voter away before its successor votes. Otherwise the error says why; it matches ErrClosed
// once the node closes. Orchestrators read it through /readyz.
func (n *Node) Readiness() error {
	if n.life.ctx.Err() != nil {
		return ErrClosed
	}
	m := n.ctl.fsm.clusterMap()
	if err := readinessIn(m, n.id, n.cfg.Lite || n.own.recordedIn(m)); err != nil {
		return err
	}
	return n.ctl.controlReadiness()
}

// readinessIn is Readiness for node id as map m has it; recorded says whether m records its process, or
// needs not (a lite member).
func readinessIn(m *ClusterMap, id NodeID, recorded bool) error {
	switch {
	case m.Version == 0:
		return errors.New("zaris: no partition map assigned yet")
	case !recorded:
		return errors.New("zaris: the cluster map does not record this process yet")
	}
	for p, st := range m.Runtime {
		if st.Health != Recovering {
			continue
		}
		if st.Owner == id || (p < len(m.Assignment) && slices.Contains(m.Assignment[p], id)) {
			return fmt.Errorf("zaris: partition %d, which this node holds, is Recovering", p)
		}
	}
	return nil
}

// controlReadiness is the control plane's part of Readiness.
func (cp *controlPlane) controlReadiness() error {
	h := cp.controlHealth()
	if h.Leader == "" {
		return h.leaderlessErr()
	}
	cf := cp.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return fmt.Errorf("zaris: control-plane configuration: %w", err)
	}
	if err := votersFilled(cf.Configuration().Servers, cp.members.Load().members(), cp.cfg.MaxVoters); err != nil {
		return err
	}
	_, leaderServer := cp.raft.LeaderWithID()
	ctx, cancel := cp.progressCtx()
	defer cancel()
	leader, err := cp.askProgress(ctx, leaderServer)
	var old *transport.RemoteError
	switch {
	case errors.As(err, &old):
		return nil // a leader of a version without the question, during an upgrade: it cannot tell
	case err != nil:
		return fmt.Errorf("zaris: control-plane progress from leader %s: %w", h.Leader, err)
	}
	return appliedCloseTo(cp.raft.AppliedIndex(), leader.Commit)
}

// votersFilled returns nil when the voters of servers whose processes run and stay fill the seats that
// members call for (seats), and otherwise says how many are missing.
func votersFilled(servers []raft.Server, members []member, maxVoters int) error {
	byName := map[NodeID]member{}
	for _, m := range members {
		byName[m.ID] = m
	}
	voters := 0
	for _, s := range servers {
		if m, ok := processOf(s.ID, byName); ok && s.Suffrage == raft.Voter && mayVote(m) {
			voters++
		}
	}
	if want := seats(members, maxVoters); voters < want {
		return fmt.Errorf("zaris: the control plane has %d live voters of the %d its members call for", voters, want)
	}
	return nil
}

// appliedCloseTo returns nil when a server that applied the log to applied is within promotionLag of the
// leader's commit index, and otherwise says how far behind it is.
func appliedCloseTo(applied, commit uint64) error {
	if (serverProgress{Applied: applied}).caughtUp(commit) {
		return nil
	}
	return fmt.Errorf("zaris: this node's control-plane server applied index %d, the leader committed %d", applied, commit)
}

// leaderlessElections is how many election timeouts a node may go without a control-plane leader before
// it raises the alarm: an election, even one lost to a split vote, takes one or two.
const leaderlessElections = 3

// leaderWatch measures how long this node has known no control-plane leader, and raises the alarm, once
// per episode, when that outlasts a few election timeouts: a control plane without a leader decides
// nothing, not even a failover, and a node must say so rather than serve a stale map in silence.
type leaderWatch struct {
	after time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	since   time.Time // when this episode began; zero while a leader is known
	alarmed bool
}

// observe records that at now this node knew leader ("" for none). Until formed (a control plane this
// node belongs to exists) no leader is expected yet.
func (w *leaderWatch) observe(now time.Time, leader NodeID, formed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case leader != "" || !formed:
		if w.alarmed {
			w.log.Info("control plane has a leader again", "leader", leader, "leaderless", now.Sub(w.since).Round(time.Millisecond))
		}
		w.since, w.alarmed = time.Time{}, false
	case w.since.IsZero():
		w.since = now
	case !w.alarmed && now.Sub(w.since) >= w.after:
		w.alarmed = true
		w.log.Error("control plane has no leader: no decision, failover or rebalance can be made until a quorum of voters is back; "+
			"if a majority is gone for good, recover the control plane from the live members", "leaderless", now.Sub(w.since).Round(time.Millisecond))
	}
}

// episode returns how long, at now, this node has known no leader, and whether that raised the alarm.
func (w *leaderWatch) episode(now time.Time) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() {
		return 0, false
	}
	return now.Sub(w.since), w.alarmed
}

// controlHealth is what this node knows of the control plane's leader.
type controlHealth struct {
	Leader     NodeID
	Leaderless time.Duration // how long no leader has been known; 0 with one
	Alarm      bool          // leaderless for longer than a few election timeouts
}

// leaderlessErr says that there is no leader, and for how long once that raised the alarm.
func (h controlHealth) leaderlessErr() error {
	if h.Alarm {
		return fmt.Errorf("zaris: no control-plane leader for %v", h.Leaderless.Round(time.Second))
	}
	return errors.New("zaris: no control-plane leader")
}

// controlHealth reports the control plane's leader as this node knows it now.
func (cp *controlPlane) controlHealth() controlHealth {
	leader := cp.leaderID()
	h := controlHealth{Leader: leader}
	if leader == "" {
		h.Leaderless, h.Alarm = cp.leaderless.episode(cp.cfg.Clock.Now())
	}
	return h
}

// watchLeader feeds the leader watch; it runs every reconcile interval.
func (cp *controlPlane) watchLeader() {
	cp.leaderless.observe(cp.cfg.Clock.Now(), cp.leaderID(), cp.inFormedCluster())
}

// inFormedCluster reports whether this node belongs to a control plane that has had a leader: it saw one,
// or a member says it did.
func (cp *controlPlane) inFormedCluster() bool {
	if cp.formed.Load() {
		return true
	}
	members := cp.members.Load()
	return members != nil && slices.ContainsFunc(members.members(), func(m member) bool { return m.Formed && m.Status == serf.StatusAlive })
}

// progressCtx bounds questions about control-plane progress (askProgress) by a probe timeout.
func (cp *controlPlane) progressCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(cp.life, 2*cp.cfg.Timing.ProbeTimeout)
}
