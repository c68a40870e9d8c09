package zaris

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A gossip failure of an active owner is a rumour. The leader re-checks the owner directly over the data
// transport and does nothing while it answers. An owner that stays silent without a clean leave is
// suspected, and confirmed dead only once FailoverTimeout has passed since the first suspicion. Each
// partition it owned is then promoted to its most caught-up live in-sync replica under the next epoch.
// Only the runtime owner moves, not the partition map.

// prober is what the leader's probes use of this node: its own copies and the data transport.
type prober struct {
	self    NodeID
	layout  Layout
	timeout time.Duration // bounds each probe
	call    func(id NodeID, req *replicateRequest, timeout time.Duration) (*replicateReply, int, error)
	// local returns this node's revision of segment seg and the epoch line it follows.
	local func(seg int) (revision, line uint64)
}

// replies reports whether node id replies on the data transport within a probe timeout.
func (pr *prober) replies(id NodeID) bool {
	if id == pr.self {
		return true
	}
	_, _, err := pr.call(id, &replicateRequest{From: pr.self}, pr.timeout)
	return err == nil
}

// liveProbe asks live nodes over the data transport what the leader's rules need to know, each node at
// most once, for the segments of every partition it owns, replicates or is assigned. heard remembers, over
// the rounds of one reconcile, which nodes answered a probe and which stayed silent.
type liveProbe struct {
	*prober
	m       *ClusterMap
	answers map[NodeID]probeAnswer
	heard   map[NodeID]bool
	// intact holds, per node, the process that membership says restarted with intact copies: it vouches
	// for its copies before the map records it.
	intact map[NodeID]uint64
}

func (cp *controlPlane) newLiveProbe(m *ClusterMap, members []member, heard map[NodeID]bool) *liveProbe {
	pr := &prober{self: cp.id, layout: cp.layout, timeout: 2 * cp.cfg.Timing.ProbeTimeout, call: cp.callReplica,
		local: cp.localCopy}
	lp := &liveProbe{prober: pr, m: m, answers: map[NodeID]probeAnswer{}, heard: heard, intact: map[NodeID]uint64{}}
	for _, mb := range members {
		if mb.Intact {
			lp.intact[mb.ID] = mb.Incarnation
		}
	}
	return lp
}

func (lp *liveProbe) reachable(id NodeID) bool {
	answered, asked := lp.heard[id]
	if !asked {
		answered = lp.replies(id)
		lp.heard[id] = answered
	}
	return answered
}

func (lp *liveProbe) copies(id NodeID) probeAnswer {
	a, asked := lp.answers[id]
	if !asked {
		a = lp.ask(id)
		lp.answers[id] = a
	}
	return a
}

// segmentsOf lists the segments of the partitions node id owns, replicates or is assigned.
func (lp *liveProbe) segmentsOf(id NodeID) []int {
	var segs []int
	for p, st := range lp.m.Runtime {
		if st.Owner == id || slices.Contains(st.InSync, id) || slices.Contains(lp.m.Assignment[p], id) {
			first, end := lp.layout.PartitionSegments(p)
			for s := first; s < end; s++ {
				segs = append(segs, s)
			}
		}
	}
	return segs
}

func (lp *liveProbe) ask(id NodeID) probeAnswer {
	segs := lp.segmentsOf(id)
	if id == lp.self {
		a := probeAnswer{revisions: map[int]uint64{}, lines: map[int]uint64{}, answered: true}
		for _, s := range segs {
			a.revisions[s], a.lines[s] = lp.local(s)
		}
		return a
	}
	if answered, asked := lp.heard[id]; asked && !answered {
		return probeAnswer{}
	}
	reply, _, err := lp.call(id, &replicateRequest{From: lp.self, Probe: segs}, lp.timeout)
	lp.heard[id] = err == nil
	switch {
	case err != nil:
		return probeAnswer{}
	case reply.Incarnation != lp.m.Nodes[id].Incarnation && reply.Incarnation != lp.intact[id]:
		return probeAnswer{answered: true}
	}
	return probeAnswer{revisions: reply.Revisions, lines: reply.Lines, answered: true}
}

// onOwnershipChange reacts on every node to a committed map, before the node serves under next. A node
// no longer assigned a partition drops its copy. A deposed owner discards its copy, except after a clean
// hand-over or while it may be given a lost partition back. Partitions this node takes over go to tookOver.
func (r *replication) onOwnershipChange(old, next *ClusterMap) {
	if old == nil || old.Version == 0 || len(old.Runtime) != len(next.Runtime) {
		return
	}
	for p, st := range next.Runtime {
		was := old.Runtime[p]
		if st.Owner == r.id && was.Owner != r.id {
			r.tookOver(p, was, st, next)
			continue
		}
		if st.Owner == r.id {
			// A node newly assigned (an incoming node of a move) may hold a copy of its own, reloaded from
			// its data dir or kept from an earlier assignment: it proves it is a prefix of this node's first.
			for _, id := range next.Assignment[p] {
				if id != r.id && !slices.Contains(old.Assignment[p], id) {
					r.link(id).resyncPartition(p, st.Epoch)
				}
			}
			continue
		}
		holder := st.Owner == "" && slices.Contains(st.InSync, r.id) // of a lost partition; it may serve again
		assigned := slices.Contains(next.Assignment[p], r.id) || st.Owner == r.id || holder
		switch {
		case !assigned && (was.Owner == r.id || slices.Contains(old.Assignment[p], r.id)):
			r.discard(p, st.Epoch)
			r.log.Debug("partition moved away; copy dropped", "partition", p)
		// Not deposed, or by a clean hand-over: the old owner sealed the partition and the new one took
		// everything it had, so the copies are equal.
		case was.Owner != r.id || st.Owner == r.id || st.Epoch == was.Epoch || handedOver(was, st):
		// Cut off until the partition was declared lost: the map still lists this node among those holding
		// every acknowledged write, and it may be given the partition back.
		case holder:
			r.log.Warn("partition lost while this node was cut off; keeping its copy to serve it again", "partition", p)
		// Writes applied here but never acknowledged must not survive beside the new owner's history: start
		// again from the new owner's snapshot.
		default:
			r.discard(p, st.Epoch)
			r.log.Info("deposed from partition; copy discarded until the new owner resends it", "partition", p, "owner", st.Owner)
		}
	}
}

// tookOver prepares this node to serve partition p, which it owns in next and did not own before. It
// forgets what its replicas confirmed and, unless the partition was handed over, resyncs them: a replica
// may hold writes of the previous owner that this node never had.
func (r *replication) tookOver(p int, was, st PartitionState, next *ClusterMap) {
	r.forgetConfirmed(p)
	switch {
	// The partition had no owner left and this node held no copy (a recreation, or a move settled
	// without an owner): what it holds may be older than what was acknowledged, so it starts empty.
	case was.Owner == "" && !slices.Contains(was.InSync, r.id):
		r.discard(p, st.Epoch)
		r.log.Warn("partition recreated empty: no copy of it survived", "partition", p)
	case handedOver(was, st):
		return
	}
	r.resyncReplicas(p, next)
}

// resyncReplicas makes each assigned replica of partition p prove its copy is a prefix of this node's
// before it gets any op of p. A copy that is not is resent whole, so this node's ops never land on top of
// another history.
func (r *replication) resyncReplicas(p int, m *ClusterMap) {
	for _, id := range m.Assignment[p] {
		if id != r.id {
			r.link(id).resyncPartition(p, m.Runtime[p].Epoch)
		}
	}
}

// handedOver reports whether a partition went from was to st by a settled move that an owner handed over.
func handedOver(was, st PartitionState) bool {
	return was.Owner != "" && len(was.Target) > 0 && st.Target == nil && st.Owner == was.Target[0] && st.Epoch == was.Epoch+1
}

// discard empties this node's copy of partition p, in memory and on disk, and fences epochs before epoch.
func (r *replication) discard(p int, epoch uint64) {
	first, end := r.layout.PartitionSegments(p)
	for s := first; s < end; s++ {
		r.replaceSegment(s, 0, epoch, nil)
	}
}

// deposed reports whether this node no longer owns partition p by the latest it knows: its map names
// another owner, or a newer epoch was seen for p, as when a map about to be published discarded this
// node's copy. An owner write checks it under the segment's lock, so that a write routed here before a
// failover never lands on the discarded copy, where it would pass for the new owner's history.
func (r *replication) deposed(p int) bool {
	st := r.clusterMap().Runtime[p]
	return st.Owner != r.id || r.fence[p].Load() > st.Epoch
}

// nudgeReplicas wakes the link to every assigned replica of the partitions this node owns, even when no
// write comes: a link then checks whether its replica restarted and whether a lagging one has caught up.
func (r *replication) nudgeReplicas() {
	m := r.clusterMap()
	seen := map[NodeID]bool{}
	for p, st := range m.Runtime {
		if st.Owner != r.id {
			continue
		}
		for _, id := range m.Assignment[p] {
			if id != r.id && !seen[id] {
				seen[id] = true
				r.link(id).nudge()
			}
		}
	}
}

// holdsLease reports whether this node has heard from the control plane recently enough to keep serving
// the partitions it owns: it leads with a quorum, or its last contact with the leader is younger than half
// of FailoverTimeout. After its lease lapsed it holds none until its map has caught up with the leader's
// log (catchUpAfterLapse): the leader's first heartbeat comes before the log, and while the node was away
// the leader may have given its partitions to others.
func (cp *controlPlane) holdsLease() bool {
	if cp.raft.State() == raft.Leader {
		cp.lease.held.Store(true)
		return true
	}
	// The leader promotes a replica only after a whole FailoverTimeout of silence, so a cut-off owner stops
	// serving well before another may start. This assumes clocks run at similar rates, not that they agree.
	last := cp.raft.LastContact()
	if last.IsZero() || time.Since(last) >= cp.cfg.FailoverTimeout/2 {
		if cp.lease.held.CompareAndSwap(true, false) {
			cp.lease.lapses.Add(1)
		}
		return false
	}
	if cp.lease.lapses.Load() > cp.lease.caughtUp.Load() {
		cp.catchUpAfterLapse()
		return false
	}
	cp.lease.held.Store(true)
	return true
}

// leaseState tracks the lapses of a node's lease and its catching up after them.
type leaseState struct {
	held       atomic.Bool   // the node holds a lease: losing it is a lapse
	lapses     atomic.Uint64 // counts the times the node found its lease lapsed
	caughtUp   atomic.Uint64 // the lapse count its map has caught up after
	catchingUp atomic.Bool
}

// catchUpAfterLapse proposes a barrier through the leader and, once this node has applied it, and with it
// every decision the leader made before, counts the lapses seen until then as caught up. One runs at a time.
func (cp *controlPlane) catchUpAfterLapse() {
	if cp.life.Err() != nil || !cp.lease.catchingUp.CompareAndSwap(false, true) {
		return
	}
	seen := cp.lease.lapses.Load()
	cp.wg.Add(1)
	go func() {
		defer cp.wg.Done()
		defer cp.lease.catchingUp.Store(false)
		ctx, cancel := context.WithTimeout(cp.life, cp.cfg.FailoverTimeout)
		defer cancel()
		if err := cp.propose(ctx, &command{Kind: cmdBarrier}); err != nil {
			cp.log.Debug("catching up after a lease lapse", "err", err)
			return
		}
		for cur := cp.lease.caughtUp.Load(); cur < seen && !cp.lease.caughtUp.CompareAndSwap(cur, seen); cur = cp.lease.caughtUp.Load() {
		}
	}()
}
