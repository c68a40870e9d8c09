package zaris

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Possession proof. Failover promotes the most caught-up in-sync replica, which holds every acknowledged
// Sync write. A live assigned peer outside the in-sync set may still hold more of the same history (writes
// acknowledged Async, or not acknowledged at all). When one does, the new owner starts Recovering: it
// serves nothing (clients get OwnershipChanging), copies from that peer (the partition's Source) each
// segment the peer holds more of, and only then asks the leader to let it serve, Degraded.
//
// A segment comes in pieces, each within one replication request, all cut from one snapshot the source
// holds for the pull. It replaces the owner's copy only once whole. If the source cannot be reached within
// FailoverTimeout the owner serves what it has: nothing acknowledged Sync is lost.

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

// pullRequest asks a failover source for piece Part of its own copy of Segment. Part 0 starts a pull, and
// each later part continues the one snapshot the source took for it.
type pullRequest struct {
	_msgpack struct{} `msgpack:",as_array"`
	Segment  int
	Part     int
}

// servePull answers a Recovering owner with the piece it asks for of this node's own copy of a segment,
// tagged with the line it follows. Only the partition's owner under this node's map may pull.
func (r *replication) servePull(req *replicateRequest, reply replicateReply) replicateReply {
	seg := req.Pull.Segment
	if seg < 0 || seg >= r.layout.Segments || req.Pull.Part < 0 {
		return replicateReply{Status: StatusInvalidRequest}
	}
	p := r.layout.SegmentPartition(seg)
	key := pullKey{from: req.From, partition: p}
	if st := r.clusterMap().Runtime[p]; st.Owner != req.From || st.Epoch != req.Epochs[p] {
		r.pulls.release(key, nil)
		return replicateReply{Status: StatusReplicaWriteRejected, Epoch: st.Epoch, Segment: seg}
	}
	piece := r.pulls.piece(key, *req.Pull, r.maxRequestBytes(), func() *segmentSnapshot {
		return r.takeSnapshot(seg, r.lines[seg].Load())
	})
	reply.Snapshots = append(reply.Snapshots, piece)
	return reply
}

// pullKey names a pull in progress: a Recovering owner pulls the segments of a partition one at a time.
type pullKey struct {
	from      NodeID
	partition int
}

// heldPulls are the snapshots a failover source serves pulls from, a piece at a time, so every piece of a
// pull comes from one revision of the segment. It holds at most one per puller and partition. A snapshot
// is released once its last piece is served, when the puller asks for another segment or is refused, or
// after idle without a request.
type heldPulls struct {
	idle  time.Duration
	clock Clock
	mu    sync.Mutex // taken before a segment's lock, to take a snapshot, never after one
	held  map[pullKey]*heldPull
}

// heldPull is one pull's snapshot, with the timer that releases it once the puller stops asking.
type heldPull struct {
	out   outgoingSnapshot
	timer Timer
}

// piece returns the piece of segment want asks for, at most budget bytes unless one entry is larger. It
// cuts it from the snapshot held for key when want continues it. Otherwise (a new pull, or a released
// snapshot) it takes a new one with take and starts over at part 0.
func (h *heldPulls) piece(key pullKey, want pullRequest, budget int, take func() *segmentSnapshot) segmentSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	held := h.held[key]
	if held == nil || want.Part == 0 || held.out.snap.Segment != want.Segment || held.out.part != want.Part {
		held = h.holdLocked(key, take())
	}
	piece, _ := held.out.nextPiece(budget)
	if !piece.More {
		h.releaseLocked(key, held)
		return piece
	}
	held.out.took(&piece)
	held.timer.Reset(h.idle)
	return piece
}

// holdLocked keeps snap for the pull named key, in place of whatever was held for it. Called with h.mu held.
func (h *heldPulls) holdLocked(key pullKey, snap *segmentSnapshot) *heldPull {
	h.releaseLocked(key, nil)
	held := &heldPull{out: outgoingSnapshot{snap: snap}}
	held.timer = h.clock.AfterFunc(h.idle, func() { h.release(key, held) })
	h.held[key] = held
	return held
}

// release drops the snapshot held for key if it is held (any, when held is nil).
func (h *heldPulls) release(key pullKey, held *heldPull) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.releaseLocked(key, held)
}

// releaseLocked is release, called with h.mu held.
func (h *heldPulls) releaseLocked(key pullKey, held *heldPull) {
	cur := h.held[key]
	if cur == nil || held != nil && cur != held {
		return
	}
	cur.timer.Stop()
	delete(h.held, key)
}

// releaseAll drops every snapshot held for puller from.
func (h *heldPulls) releaseAll(from NodeID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, held := range h.held {
		if key.from == from {
			h.releaseLocked(key, held)
		}
	}
}

// syncFromSource runs on a Recovering owner: it copies from the partition's source every segment the
// source holds more of, then asks the leader to let it serve. It gives up on the source after
// FailoverTimeout and serves what it has.
func (o *owner) syncFromSource(p int, st PartitionState) {
	giveUp := o.cfg.Clock.Now().Add(o.cfg.FailoverTimeout)
	for !o.epochMoved(p, st.Epoch) {
		err := o.pullFrom(st.Source, p, st.Epoch)
		if err != nil && o.cfg.Clock.Now().Before(giveUp) {
			o.log.Debug("sync from source", "partition", p, "source", st.Source, "err", err)
			if sleepStop(o.cfg.Clock, o.life.Done(), o.cfg.RetryBackoff) {
				return
			}
			continue
		}
		if err != nil {
			o.log.Warn("source unreachable; serving without what only it held", "partition", p, "source", st.Source, "err", err)
		}
		ctx, cancel := context.WithTimeout(o.life, applyTimeout)
		err = o.propose(ctx, &command{Kind: cmdRecovered, Partition: p, Epoch: st.Epoch})
		cancel()
		if err == nil {
			o.repl.stats.recoveries.Add(1)
			return
		}
		if sleepStop(o.cfg.Clock, o.life.Done(), o.cfg.Timing.Reconcile) {
			return
		}
	}
}

// pullFrom asks source for its revisions of partition p, then copies each segment where it holds more of
// the same history than this node.
func (o *owner) pullFrom(source NodeID, p int, epoch uint64) error {
	first, end := o.layout.PartitionSegments(p)
	req := &replicateRequest{From: o.id, Epochs: map[int]uint64{p: epoch}}
	for s := first; s < end; s++ {
		req.Probe = append(req.Probe, s)
	}
	reply, _, err := o.callReplica(source, req, o.cfg.ReplicaAckTimeout)
	if err != nil {
		return err
	}
	if reply.Status != StatusSuccess {
		return fmt.Errorf("zaris: source %s answered %s", source, reply.Status)
	}
	for s := first; s < end; s++ {
		if !o.holdsLess(s, reply.Revisions[s], reply.Lines[s], epoch) {
			continue
		}
		if err := o.pullSegment(source, s, epoch); err != nil {
			return err
		}
	}
	return nil
}

// holdsLess reports whether this node, promoted under epoch, holds less of segment s than a copy at
// revision rev of line.
func (o *owner) holdsLess(s int, rev, line, epoch uint64) bool {
	return holdsMore(rev, line, o.store.revision(s), o.repl.lines[s].Load(), epoch-1)
}

// pullSegment copies segment s from source, a piece at a time. Once the copy is whole, it replaces this
// node's copy if this node still owns the partition under epoch and the copy is of its line and ahead of it.
func (o *owner) pullSegment(source NodeID, s int, epoch uint64) error {
	snap, err := o.repl.assemblePull(s, func(part int) (*segmentSnapshot, error) {
		return o.pullPiece(source, s, epoch, part)
	})
	if err != nil {
		return err
	}
	if o.epochMoved(o.layout.SegmentPartition(s), epoch) {
		return fmt.Errorf("zaris: segment %d pulled after its partition left epoch %d", s, epoch)
	}
	if !o.holdsLess(s, snap.Revision, snap.Epoch, epoch) {
		return nil
	}
	o.repl.installSnapshot(snap)
	o.repl.stats.pulledSegments.Add(1)
	o.log.Info("copied a segment from the failover source", "segment", s, "source", source, "revision", snap.Revision)
	return nil
}

// pullPiece asks source for piece part of its copy of segment s, as the partition's owner under epoch.
func (o *owner) pullPiece(source NodeID, s int, epoch uint64, part int) (*segmentSnapshot, error) {
	p := o.layout.SegmentPartition(s)
	if o.epochMoved(p, epoch) {
		return nil, fmt.Errorf("zaris: partition %d left epoch %d during a pull", p, epoch)
	}
	req := &replicateRequest{From: o.id, Epochs: map[int]uint64{p: epoch}, Pull: &pullRequest{Segment: s, Part: part}}
	reply, _, err := o.callReplica(source, req, o.cfg.ReplicaAckTimeout)
	if err != nil {
		return nil, err
	}
	if reply.Status != StatusSuccess || len(reply.Snapshots) != 1 {
		return nil, fmt.Errorf("zaris: source %s did not send segment %d (%s)", source, s, reply.Status)
	}
	return &reply.Snapshots[0], nil
}

// assemblePull fetches segment seg a piece at a time, from part 0, and assembles the pieces as a replica
// does those its owner sends (stage). It returns the whole snapshot, or the first error after dropping the
// staged pieces.
func (r *replication) assemblePull(seg int, fetch func(part int) (*segmentSnapshot, error)) (*segmentSnapshot, error) {
	for part := 0; ; {
		piece, err := fetch(part)
		if err == nil && piece.Segment != seg {
			err = fmt.Errorf("zaris: asked for segment %d, got %d", seg, piece.Segment)
		}
		var whole *segmentSnapshot
		if err == nil {
			var ok bool
			if whole, ok = r.stage(piece); !ok {
				err = fmt.Errorf("zaris: piece %d of segment %d does not follow the pieces pulled", piece.Part, seg)
			}
		}
		if err != nil {
			r.unstage(seg)
			return nil, err
		}
		r.stats.pulledPieces.Add(1)
		if whole != nil {
			return whole, nil
		}
		part = piece.Part + 1
	}
}
