package zaris

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
)

// A leaving node drains: the control plane records this process draining and the leader moves its
// partitions to others; a voter then hands leadership over and waits for its removal before it stops.

// drain announces that this node is leaving and waits until the map records this process draining and
// gives it no partition, or until ctx ends or the node closes. Once recorded, no plan gives it partitions
// again, so an empty map before the leader knows of the leave does not end the drain. A lite member holds
// nothing and a node with no map has been given nothing, so neither waits. Nor does a node holding nothing
// that knows no leader: no plan commits without one, and the next leader sees it leaving. A node alone (see
// alone) has no one to drain to: it returns at once if alone at the start, else after being alone for
// FailoverTimeout, since the others may be leaving too.
func (cp *controlPlane) drain(ctx context.Context) error {
	if cp.cfg.Lite || cp.fsm.clusterMap().Version == 0 || cp.alone() {
		return nil
	}
	if err := cp.members.Load().markLeaving(); err != nil {
		// The flag is set locally and gossip will carry it; only the broadcast's confirmation timed out.
		cp.log.Warn("leave: drain announced without confirmation", "err", err)
	}
	lonely, leaderless := countdowns[bool]{}, countdowns[bool]{}
	warned := "" // the last reason logged for a drain not recorded, so that a lasting one is logged once
	for {
		m := cp.fsm.clusterMap()
		if cp.leaderID() != "" {
			clear(leaderless)
		}
		// A node holding nothing need not wait for a control plane that stays without a leader; a moment
		// between two leaders is no reason to end the drain unrecorded.
		noLeader := cp.leaderID() == "" && leaderless.elapsed(true, cp.cfg.Clock.Now()) >= cp.cfg.FailoverTimeout
		if !m.holds(cp.id) && (cp.drainRecorded(m) || noLeader) {
			return nil
		}
		if !cp.alone() {
			clear(lonely)
		} else if lonely.elapsed(true, cp.cfg.Clock.Now()) >= cp.cfg.FailoverTimeout {
			return nil
		}
		err := cp.recordDrain(ctx, m)
		switch {
		case errors.Is(err, ErrClosed):
			return err
		case err != nil && ctx.Err() == nil && !errors.Is(err, errNoLeader) && err.Error() != warned:
			warned = err.Error()
			cp.log.Warn("leave: drain not recorded yet", "err", err)
		}
		wait := cp.cfg.Clock.NewTimer(cp.cfg.Timing.RaftCommit)
		select {
		case <-wait.C():
		case <-ctx.Done():
			wait.Stop()
			return fmt.Errorf("%w: %w", ErrNotDrained, ctx.Err())
		case <-cp.life.Done():
			wait.Stop()
			return ErrClosed
		}
	}
}

// drainRecorded reports whether m records this process as draining, not a predecessor under its name.
func (cp *controlPlane) drainRecorded(m *ClusterMap) bool {
	inc, ok := m.Draining[cp.id]
	return ok && inc == cp.incarnation
}

// recordDrain proposes this process's drain unless m records it already, or records another process under
// its name: the drain would be void until the leader has recorded this one. One attempt is bounded by
// applyTimeout, so a drain goes on checking whether it is alone while the control plane does not answer.
func (cp *controlPlane) recordDrain(ctx context.Context, m *ClusterMap) error {
	info, known := m.Nodes[cp.id]
	if cp.drainRecorded(m) || known && info.Incarnation != cp.incarnation {
		return nil
	}
	attempt, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	return cp.offer(attempt, &command{Kind: cmdDrain, Node: NodeInfo{ID: cp.id, Incarnation: cp.incarnation}})
}

// alone reports whether no other member could take this node's partitions, as far as a node that hears
// from the control plane can tell: one that does not may only be cut off from the others.
func (cp *controlPlane) alone() bool { return !cp.othersCanHold() && cp.holdsLease() }

// othersCanHold reports whether another live member, not leaving itself, could take partitions.
func (cp *controlPlane) othersCanHold() bool {
	m := cp.fsm.clusterMap()
	for _, mb := range cp.members.Load().members() {
		if _, known := m.Nodes[mb.ID]; known && mb.ID != cp.id && mb.Status == serf.StatusAlive && !mb.Lite && !m.drains(mb) {
			return true
		}
	}
	return false
}

// handOverLeadership asks the control plane to elect another voter if this node leads and another node has
// a vote, and waits for the outcome (about an election timeout at most). A leaving node must not lead when
// it stops: that would cost the cluster a full election with no leader, and every owner its lease.
func (cp *controlPlane) handOverLeadership() {
	cf := cp.raft.GetConfiguration()
	if !cp.isLeader() || cf.Error() != nil || !cp.othersVote(cf.Configuration()) {
		return
	}
	if err := cp.decide(func() raft.Future { return cp.raft.LeadershipTransfer() }); err != nil {
		cp.log.Warn("leadership hand-over before leave", "err", err)
	}
}

// awaitRemoval waits until this node's server holds no vote in the control plane (the leader demotes a
// voter that left, then removes it), or no other node has a vote to take it. Only a leader changes servers,
// never its own, so while this node leads it hands leadership over again. A removed server may never hear of
// its removal, so silence from the leader counts as one, but only where the other voters keep a quorum
// without this one (a voter departing unremoved from two would leave the other unable to elect a leader),
// and the leader, asked, does not say this server still votes (leaderDropped).
func (cp *controlPlane) awaitRemoval(ctx context.Context) error {
	tick := cp.cfg.Clock.NewTicker(cp.cfg.Timing.GossipInterval)
	defer tick.Stop()
	following := time.Now() // compared with raft's last contact, a wall-clock time
	for {
		cf := cp.raft.GetConfiguration()
		if cf.Error() != nil || !cp.votesIn(cf.Configuration()) || !cp.othersVote(cf.Configuration()) {
			return nil
		}
		if cp.isLeader() {
			cp.handOverLeadership()
			following = time.Now()
		} else if othersKeepQuorum(cf.Configuration()) && cp.forgotten(following) && cp.leaderDropped(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("zaris: leave: control plane did not remove %s: %w", cp.id, ctx.Err())
		case <-tick.C():
		}
	}
}

// othersKeepQuorum reports whether, of configuration c's voters, all but one still make a quorum.
func othersKeepQuorum(c raft.Configuration) bool {
	voters := 0
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	return voters-1 >= voters/2+1
}

// forgotten reports whether no leader has contacted this follower for a heartbeat timeout since following
// began. Either the leader has removed it (raft tells a removed server so only if its last, best-effort
// replication to it gets through), or the others are electing a leader among themselves.
func (cp *controlPlane) forgotten(following time.Time) bool {
	last := cp.raft.LastContact()
	if last.Before(following) {
		last = following
	}
	return time.Since(last) >= cp.cfg.Timing.RaftHeartbeat
}

// votesIn reports whether configuration c lists this process's server as a voter.
func (cp *controlPlane) votesIn(c raft.Configuration) bool {
	return slices.ContainsFunc(c.Servers, func(s raft.Server) bool { return s.ID == cp.serverID() && s.Suffrage == raft.Voter })
}

// othersVote reports whether configuration c gives a vote to a server of another node.
func (cp *controlPlane) othersVote(c raft.Configuration) bool {
	return slices.ContainsFunc(c.Servers, func(s raft.Server) bool {
		name, _ := splitRaftID(s.ID)
		return s.Suffrage == raft.Voter && name != cp.id
	})
}

// onlyCopies lists the partitions of which, as far as map m and the members tell, node self holds the
// only live copy with every acknowledged write: it owns them, or holds them in sync while they have no
// owner, and no other member alive as the process the map records, and not leaving, is in sync.
func onlyCopies(m *ClusterMap, self NodeID, members []member) []int {
	live := map[NodeID]bool{}
	for _, mb := range members {
		if info, known := m.Nodes[mb.ID]; known && mb.ID != self && mb.Status == serf.StatusAlive &&
			!m.drains(mb) && info.Incarnation == mb.Incarnation {
			live[mb.ID] = true
		}
	}
	var only []int
	for p, st := range m.Runtime {
		mine := st.Owner == self || st.Owner == "" && slices.Contains(st.InSync, self)
		if mine && !slices.ContainsFunc(st.InSync, func(id NodeID) bool { return live[id] }) {
			only = append(only, p)
		}
	}
	return only
}
