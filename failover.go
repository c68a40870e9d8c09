package zaris

import (
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
)

// A gossip failure of an active owner is a rumour. The leader re-checks the owner directly over the data
// transport and does nothing while it answers. An owner that stays silent without a clean leave is
// suspected, and confirmed dead only once FailoverTimeout has passed since the first suspicion; then each
// partition it owned is promoted to its most caught-up live in-sync replica under the next epoch. The
// partition map does not change: only the runtime owner moves.

// handleFailures is called by the leader's reconcile with the current membership.
func (n *Node) handleFailures(members []member) error {
	failed := map[NodeID]bool{}
	for _, m := range members {
		if m.Status == serf.StatusFailed {
			failed[m.ID] = true
		}
	}
	for id := range n.suspects {
		if !failed[id] {
			delete(n.suspects, id) // back alive, or gone through a clean leave
		}
	}
	m := n.fsm.clusterMap()
	for id := range failed {
		if m.OwnedBy(id) == 0 {
			continue
		}
		if n.answers(id) {
			delete(n.suspects, id)
			continue
		}
		if _, known := n.suspects[id]; !known {
			n.log.Warn("owner suspected dead", "node", id)
		}
		if n.suspects.elapsed(id) < n.cfg.FailoverTimeout {
			continue
		}
		if err := n.failOver(id, members); err != nil {
			return err
		}
	}
	return n.reviveLost(members)
}

// answers reports whether node id replies on the data transport within a probe timeout.
func (n *Node) answers(id NodeID) bool {
	if id == n.id {
		return true
	}
	_, _, err := n.callReplica(id, &replicateRequest{From: n.id}, 2*n.cfg.Timing.ProbeTimeout)
	return err == nil
}

// failOver promotes every partition actively owned by the dead node to its most caught-up live in-sync
// replica, or leaves it Unavailable when there is none.
func (n *Node) failOver(dead NodeID, members []member) error {
	_, err := n.promoteEach(n.partitionsWhere(func(st PartitionState) bool { return st.Owner == dead }), members, promotion{giveUp: true})
	return err
}

// resume re-decides, under the next epoch, every partition a restarted owner with intact copies still owns:
// its copy holds every write it acknowledged, but maybe not every write its replicas applied, so the most
// caught-up of it and its live in-sync replicas takes the partition, syncing first from a peer that holds
// more. It reports whether every partition was re-decided.
func (n *Node) resume(owner NodeID, members []member) (bool, error) {
	waiting, err := n.promoteEach(n.partitionsWhere(func(st PartitionState) bool { return st.Owner == owner }), members, promotion{withOwner: true})
	return waiting == 0, err
}

// reviveLost gives each Unavailable partition back to a node that held every acknowledged write of it when
// it was lost (the map keeps those in its in-sync set), once one is alive again as the same process.
func (n *Node) reviveLost(members []member) error {
	lost := n.partitionsWhere(func(st PartitionState) bool { return st.Health == Unavailable && len(st.InSync) > 0 })
	if len(lost) == 0 {
		return nil
	}
	_, err := n.promoteEach(lost, members, promotion{})
	return err
}

// partitionsWhere lists the partitions whose state satisfies cond in the current map.
func (n *Node) partitionsWhere(cond func(PartitionState) bool) []int {
	var parts []int
	for p, st := range n.fsm.clusterMap().Runtime {
		if cond(st) {
			parts = append(parts, p)
		}
	}
	return parts
}

// promotion says whom promoteEach may choose, and what it does when it can choose no one.
type promotion struct {
	giveUp    bool // a partition with no in-sync replica left becomes Unavailable; otherwise it waits
	withOwner bool // the current owner, restarted with intact copies, is a candidate too
}

// promoteEach promotes each partition of parts to its most caught-up live in-sync replica, with a source
// to sync from first when a live peer holds more, and returns how many partitions it left to wait. Each
// candidate is asked once for its revisions.
func (n *Node) promoteEach(parts []int, members []member, how promotion) (waiting int, err error) {
	alive := map[NodeID]bool{}
	probe := &revisionProbe{n: n, answers: map[NodeID]probeAnswer{}, intact: map[NodeID]uint64{}}
	for _, m := range members {
		if m.Status == serf.StatusAlive {
			alive[m.ID] = true
		}
		if m.Intact {
			probe.intact[m.ID] = m.Incarnation
		}
	}
	m := n.fsm.clusterMap()
	for _, p := range parts {
		first, end := n.layout.PartitionSegments(p)
		for s := first; s < end; s++ {
			probe.segments = append(probe.segments, s)
		}
	}
	for _, p := range parts {
		st := m.Runtime[p]
		to, unsure := n.pickSuccessor(p, st, how.withOwner, alive, probe)
		if to == "" && (unsure || !how.giveUp) {
			if unsure {
				n.log.Warn("failover waits: no live in-sync replica answered", "partition", p, "from", st.Owner)
			}
			waiting++
			continue // try again at the next reconcile rather than give up a copy that may be intact
		}
		var source NodeID
		if to != "" {
			source = n.pickSource(p, st, to, how.withOwner, alive, probe)
		}
		n.log.Warn("failing over partition", "partition", p, "from", st.Owner, "to", to, "epoch", st.Epoch+1, "source", source)
		cmd := &command{Kind: cmdPromote, Partition: p, Epoch: st.Epoch, Node: NodeInfo{ID: to}, Source: source}
		if err := n.commit(cmd); err != nil {
			return waiting, err
		}
	}
	return waiting, nil
}

// pickSuccessor returns the live in-sync replica of p holding the most of it (by segment revisions). Only an
// in-sync replica is sure to hold every acknowledged write. It returns "" when none is left, with unsure set
// when some in-sync replica gossip calls alive did not answer: it may be intact behind a passing fault.
func (n *Node) pickSuccessor(p int, st PartitionState, withOwner bool, alive map[NodeID]bool, probe *revisionProbe) (best NodeID, unsure bool) {
	var bestTotal uint64
	candidates := st.InSync
	if withOwner && st.Owner != "" {
		candidates = append([]NodeID{st.Owner}, st.InSync...)
	}
	for _, id := range candidates {
		if !alive[id] {
			continue
		}
		total, ok, answered := probe.total(id, p)
		if !ok {
			unsure = unsure || !answered
			continue
		}
		if best == "" || total > bestTotal {
			best, bestTotal = id, total
		}
	}
	return best, unsure
}

// revisionProbe asks each node at most once for its revisions of a set of segments.
type revisionProbe struct {
	n        *Node
	segments []int
	answers  map[NodeID]probeAnswer
	// intact holds, per node, the process that membership says restarted with intact copies: it vouches
	// for its copies before the map records it.
	intact map[NodeID]uint64
}

type probeAnswer struct {
	revisions map[int]uint64 // nil when the node cannot vouch for its copy
	lines     map[int]uint64 // per segment, the epoch whose history the copy follows
	answered  bool           // false: no reply, so its copy may be intact behind a passing fault
}

// total returns the sum of node id's revisions of partition p's segments, and whether the node can vouch
// for them: it answered, and it is the process the map knows (a restarted one may lack acknowledged
// writes). answered is false when the node did not reply at all.
func (rp *revisionProbe) total(id NodeID, p int) (total uint64, ok, answered bool) {
	a := rp.answer(id)
	if a.revisions == nil {
		return 0, false, a.answered
	}
	first, end := rp.n.layout.PartitionSegments(p)
	for s := first; s < end; s++ {
		total += a.revisions[s]
	}
	return total, true, true
}

// answer returns node id's answer, asking it on first use.
func (rp *revisionProbe) answer(id NodeID) probeAnswer {
	a, asked := rp.answers[id]
	if !asked {
		a = rp.ask(id)
		rp.answers[id] = a
	}
	return a
}

func (rp *revisionProbe) ask(id NodeID) probeAnswer {
	n := rp.n
	if id == n.id {
		a := probeAnswer{revisions: map[int]uint64{}, lines: map[int]uint64{}, answered: true}
		for _, s := range rp.segments {
			a.revisions[s], a.lines[s] = n.store.revision(s), n.repl.lines[s].Load()
		}
		return a
	}
	reply, _, err := n.callReplica(id, &replicateRequest{From: n.id, Probe: rp.segments}, 2*n.cfg.Timing.ProbeTimeout)
	switch {
	case err != nil:
		return probeAnswer{}
	case reply.Incarnation != n.fsm.clusterMap().Nodes[id].Incarnation && reply.Incarnation != rp.intact[id]:
		return probeAnswer{answered: true}
	}
	return probeAnswer{revisions: reply.Revisions, lines: reply.Lines, answered: true}
}

// onOwnershipChange reacts on every node to a committed map. A node deposed from a partition it still
// replicates discards its copy: writes it applied but never got acknowledged must not survive beside the
// new owner's history, so it starts again from the new owner's snapshot. A clean hand-over is the
// exception: the old owner sealed the partition and the new one took everything it had, so the copies are
// equal, and so is an owner cut off until its partition was declared lost: the map still lists it among
// the nodes holding every acknowledged write, and it may be given the partition back. A node no longer
// assigned a partition drops its copy, and so does a node given a partition that had no owner left
// without holding it: what it holds may be older than what was acknowledged, and the partition starts
// again empty. This runs before the node serves under next.
func (r *replication) onOwnershipChange(old, next *ClusterMap) {
	if old == nil || old.Version == 0 || len(old.Runtime) != len(next.Runtime) {
		return
	}
	for p, st := range next.Runtime {
		was := old.Runtime[p]
		if st.Owner == r.n.id && was.Owner != r.n.id {
			r.tookOver(p, was, st, next)
			continue
		}
		holder := st.Owner == "" && slices.Contains(st.InSync, r.n.id) // of a lost partition; it may serve again
		assigned := slices.Contains(next.Assignment[p], r.n.id) || st.Owner == r.n.id || holder
		switch {
		case !assigned && (was.Owner == r.n.id || slices.Contains(old.Assignment[p], r.n.id)):
			r.discard(p, st.Epoch)
			r.n.log.Debug("partition moved away; copy dropped", "partition", p)
		case was.Owner != r.n.id || st.Owner == r.n.id || st.Epoch == was.Epoch || handedOver(was, st):
		case holder:
			r.n.log.Warn("partition lost while this node was cut off; keeping its copy to serve it again", "partition", p)
		default:
			r.discard(p, st.Epoch)
			r.n.log.Info("deposed from partition; copy discarded until the new owner resends it", "partition", p, "owner", st.Owner)
		}
	}
}

// tookOver prepares this node to serve partition p, which it owns in next and did not own before: it does
// not know yet what its replicas confirm, and unless the partition was handed over, a replica may hold
// writes of the previous owner that this node never had. Given a partition that had no owner left without
// holding it, it starts again empty.
func (r *replication) tookOver(p int, was, st PartitionState, next *ClusterMap) {
	r.forgetConfirmed(p)
	if handedOver(was, st) {
		return
	}
	if was.Owner == "" && !slices.Contains(was.InSync, r.n.id) {
		r.discard(p, st.Epoch)
		r.n.log.Warn("partition recreated empty: no copy of it survived", "partition", p)
	}
	r.resyncReplicas(p, next)
}

// resyncReplicas makes each assigned replica of partition p prove its copy is a prefix of this node's
// before it gets any op of p; a copy that is not is resent whole, so that ops of this node's history never
// land on top of another one.
func (r *replication) resyncReplicas(p int, m *ClusterMap) {
	for _, id := range m.Assignment[p] {
		if id != r.n.id {
			r.link(id).resyncPartition(p, m.Runtime[p].Epoch)
		}
	}
}

// handedOver reports whether a partition went from was to st by a settled move that changed its owner.
func handedOver(was, st PartitionState) bool {
	return len(was.Target) > 0 && st.Target == nil && st.Owner == was.Target[0] && st.Epoch == was.Epoch+1
}

// discard empties this node's copy of partition p, in memory and on disk, and fences epochs before epoch.
func (r *replication) discard(p int, epoch uint64) {
	first, end := r.n.layout.PartitionSegments(p)
	for s := first; s < end; s++ {
		r.replaceSegment(s, 0, epoch, nil)
	}
}

// nudgeReplicas wakes the link to every assigned replica of the partitions this node owns, even when no
// write comes: a link then checks whether its replica restarted and whether a lagging one has caught up.
func (r *replication) nudgeReplicas() {
	m := r.n.fsm.clusterMap()
	seen := map[NodeID]bool{}
	for p, st := range m.Runtime {
		if st.Owner != r.n.id {
			continue
		}
		for _, id := range m.Assignment[p] {
			if id != r.n.id && !seen[id] {
				seen[id] = true
				r.link(id).nudge()
			}
		}
	}
}

// holdsLease reports whether this node has heard from the control plane recently enough to keep serving
// the partitions it owns: it leads with a quorum, or its last contact with the leader is younger than half
// of FailoverTimeout. The leader promotes a replica only after an owner has been silent for a whole
// FailoverTimeout, so an owner cut off from the control plane stops serving well before another may start,
// even when clients still reach it. This assumes the nodes' clocks run at similar rates (not that they
// agree on the time).
func (n *Node) holdsLease() bool {
	if n.raft.State() == raft.Leader {
		return true
	}
	last := n.raft.LastContact()
	return !last.IsZero() && time.Since(last) < n.cfg.FailoverTimeout/2
}

// healPartitions returns to Healthy, each under a new epoch, the Degraded partitions whose copies have all
// been back in sync for HealCooldown without a break: a node that keeps dropping out and coming back restarts
// the cool-down each time instead of causing a transition each time. Leader only.
func (n *Node) healPartitions() error {
	m := n.fsm.clusterMap()
	for p := range m.Runtime {
		if !m.healable(p) {
			delete(n.healableSince, p)
			continue
		}
		if n.healableSince.elapsed(p) < n.cfg.HealCooldown {
			continue
		}
		if err := n.commit(&command{Kind: cmdHeal, Partition: p, Epoch: m.Runtime[p].Epoch}); err != nil {
			return err
		}
		delete(n.healableSince, p)
	}
	return nil
}
