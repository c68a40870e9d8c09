package zaris

import (
	"context"
	"fmt"
	"time"
)

// Possession proof. Failover promotes the most caught-up in-sync replica, which holds every acknowledged
// Sync write. A live assigned peer outside the in-sync set may still hold more of the same history (writes
// acknowledged Async, or not acknowledged at all). When one does, the new owner starts Recovering: it
// serves nothing (clients get OwnershipChanging), copies from that peer (the partition's Source) each
// segment the peer holds more of, and only then asks the leader to let it serve, Degraded. If the source
// cannot be reached within FailoverTimeout the owner serves what it has: nothing acknowledged Sync is lost.

// holdsMore reports whether a copy of a segment at revision rev, following the history of the owner of
// epoch line, extends the new owner's copy at ownRev, of line ownLine. Copies of one line are prefixes of
// one history. An empty copy is extended by any copy of the dead owner's history (lastEpoch, the epoch it
// owned the partition under), but not by one of an older history, which may predate a loss.
func holdsMore(rev, line, ownRev, ownLine, lastEpoch uint64) bool {
	if rev <= ownRev || line == 0 {
		return false
	}
	return line == ownLine || ownRev == 0 && line == lastEpoch
}

// moreOf returns the segments of partition p where node peer holds more than node holder, according to
// the probe's answers; lastEpoch is the epoch the dead owner held p under.
func (rp *revisionProbe) moreOf(peer, holder NodeID, p int, lastEpoch uint64) []int {
	a, b := rp.answer(peer), rp.answer(holder)
	if a.revisions == nil || b.revisions == nil {
		return nil
	}
	var segs []int
	first, end := rp.n.layout.PartitionSegments(p)
	for s := first; s < end; s++ {
		if holdsMore(a.revisions[s], a.lines[s], b.revisions[s], b.lines[s], lastEpoch) {
			segs = append(segs, s)
		}
	}
	return segs
}

// pickSource returns the live assigned peer of p, other than the chosen owner and the previous one (unless
// withOwner: it restarted and may be a source), holding the most segments beyond the owner's copy, or ""
// when none holds anything more.
func (n *Node) pickSource(p int, st PartitionState, owner NodeID, withOwner bool, alive map[NodeID]bool, probe *revisionProbe) NodeID {
	var best NodeID
	most := 0
	for _, id := range n.fsm.clusterMap().Assignment[p] {
		if id == owner || id == st.Owner && !withOwner || !alive[id] {
			continue
		}
		if more := len(probe.moreOf(id, owner, p, st.Epoch)); more > most {
			best, most = id, more
		}
	}
	return best
}

// servePull answers a Recovering owner with this node's own copy of the segments it asks for, each tagged
// with the line it follows. Only the partition's owner under this node's map may pull.
func (r *replication) servePull(req *replicateRequest, reply replicateReply) replicateReply {
	m := r.n.fsm.clusterMap()
	for _, seg := range req.Pull {
		if seg < 0 || seg >= r.n.layout.Segments {
			return replicateReply{Status: StatusInvalidRequest}
		}
		p := r.n.layout.SegmentPartition(seg)
		if st := m.Runtime[p]; st.Owner != req.From || st.Epoch != req.Epochs[p] {
			return replicateReply{Status: StatusReplicaWriteRejected, Epoch: st.Epoch, Segment: seg}
		}
		s := r.takeSnapshot(seg, r.lines[seg].Load())
		reply.Snapshots = append(reply.Snapshots, *s)
	}
	return reply
}

// syncFromSource runs on a Recovering owner: it copies from the partition's source every segment the
// source holds more of, then asks the leader to let it serve. It gives up on the source after
// FailoverTimeout and serves what it has.
func (n *Node) syncFromSource(p int, st PartitionState) {
	giveUp := time.Now().Add(n.cfg.FailoverTimeout)
	for !n.epochMoved(p, st.Epoch) {
		err := n.pullFrom(st.Source, p, st.Epoch)
		if err != nil && time.Now().Before(giveUp) {
			n.log.Debug("sync from source", "partition", p, "source", st.Source, "err", err)
			if sleepStop(n.stop, n.cfg.RetryBackoff) {
				return
			}
			continue
		}
		if err != nil {
			n.log.Warn("source unreachable; serving without what only it held", "partition", p, "source", st.Source, "err", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
		err = n.propose(ctx, &command{Kind: cmdRecovered, Partition: p, Epoch: st.Epoch})
		cancel()
		if err == nil {
			n.repl.stats.recoveries.Add(1)
			return
		}
		if sleepStop(n.stop, n.cfg.Timing.Reconcile) {
			return
		}
	}
}

// pullFrom asks source for its revisions of partition p, then copies each segment where it holds more of
// the same history than this node.
func (n *Node) pullFrom(source NodeID, p int, epoch uint64) error {
	first, end := n.layout.PartitionSegments(p)
	req := &replicateRequest{From: n.id, Epochs: map[int]uint64{p: epoch}}
	for s := first; s < end; s++ {
		req.Probe = append(req.Probe, s)
	}
	reply, _, err := n.callReplica(source, req, n.cfg.ReplicaAckTimeout)
	if err != nil {
		return err
	}
	if reply.Status != StatusSuccess {
		return fmt.Errorf("zaris: source %s answered %s", source, reply.Status)
	}
	for s := first; s < end; s++ {
		if !n.holdsLess(s, reply.Revisions[s], reply.Lines[s], epoch) {
			continue
		}
		if err := n.pullSegment(source, s, epoch); err != nil {
			return err
		}
	}
	return nil
}

// holdsLess reports whether this node, promoted under epoch, holds less of segment s than a copy at
// revision rev of line.
func (n *Node) holdsLess(s int, rev, line, epoch uint64) bool {
	return holdsMore(rev, line, n.store.revision(s), n.repl.lines[s].Load(), epoch-1)
}

// pullSegment copies segment s from source if the copy is still of this node's line and ahead of it.
func (n *Node) pullSegment(source NodeID, s int, epoch uint64) error {
	p := n.layout.SegmentPartition(s)
	reply, _, err := n.callReplica(source, &replicateRequest{From: n.id, Epochs: map[int]uint64{p: epoch}, Pull: []int{s}}, n.cfg.ReplicaAckTimeout)
	if err != nil {
		return err
	}
	if reply.Status != StatusSuccess || len(reply.Snapshots) != 1 || reply.Snapshots[0].Segment != s {
		return fmt.Errorf("zaris: source %s did not send segment %d (%s)", source, s, reply.Status)
	}
	snap := &reply.Snapshots[0]
	if !n.holdsLess(s, snap.Revision, snap.Epoch, epoch) {
		return nil
	}
	n.repl.installSnapshot(snap)
	n.repl.stats.pulledSegments.Add(1)
	n.log.Info("copied a segment from the failover source", "segment", s, "source", source, "revision", snap.Revision)
	return nil
}
