package zaris

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
)

// errReplicaTimeout says a replica did not apply a write within ReplicaAckTimeout.
var errReplicaTimeout = errors.New("zaris: replica did not acknowledge in time")

// errReplicaBehind says a replica has not yet applied the map that made this node the owner. The link
// retries after a backoff.
var errReplicaBehind = errors.New("zaris: replica has not caught up with the cluster map")

// replicaLink streams a partition owner's ops to one replica node, for every partition that node
// replicates for this owner. For each dirty segment it sends the ops the replica lacks in revision order,
// from the op log in memory or the data dir's, or a snapshot when neither reaches back far enough.
type replicaLink struct {
	r    *replication
	to   NodeID
	wake chan struct{}

	mu    sync.Mutex
	dirty map[int]uint64 // segment -> generation, bumped by every write
	acked map[int]uint64 // segment -> revision the replica is known to have
	// acks holds, for a segment writes wait on, a channel closed when the replica's revision of it is next
	// learnt, so that a reply wakes only the writes of the segments it answers for.
	acks     map[int]chan struct{}
	progress chan struct{}  // closed and replaced when the link is fenced, or the map may have changed what writes wait for
	fenced   map[int]uint64 // partition -> newer epoch the replica has seen: this node was deposed
	// resync lists the segments whose copy on the replica may follow another history than this node's.
	// Until that is settled the replica gets no op of them and its revisions of them are not trusted.
	resync map[int]resyncMark
	// incarnation is the replica's process as last seen: a restarted one may have reloaded, from its data
	// dir, a copy of another history than this node's.
	incarnation uint64
	// outgoing holds, per segment, a snapshot being sent in pieces and how far the replica has taken it.
	outgoing map[int]*outgoingSnapshot
}

// outgoingSnapshot is a segment snapshot too large for one request, sent a piece at a time.
type outgoingSnapshot struct {
	snap *segmentSnapshot // the whole segment
	sent int              // entries the replica has taken
	part int              // the next piece's number
}

// resyncStep is how far a segment's resync has come.
type resyncStep uint8

const (
	resyncProbe    resyncStep = iota + 1 // ask which history the replica's copy follows
	resyncSnapshot                       // it may follow another one: send the segment whole
)

// resyncMark is a segment's resync step and the partition epoch it was decided under. A step whose epoch
// the partition has left is decided again rather than carried out for another owner's history.
type resyncMark struct {
	step  resyncStep
	epoch uint64
}

func newReplicaLink(r *replication, to NodeID) *replicaLink {
	l := &replicaLink{
		r: r, to: to,
		wake:     make(chan struct{}, 1),
		dirty:    map[int]uint64{},
		acked:    map[int]uint64{},
		acks:     map[int]chan struct{}{},
		fenced:   map[int]uint64{},
		resync:   map[int]resyncMark{},
		outgoing: map[int]*outgoingSnapshot{},
		progress: make(chan struct{}),
	}
	return l
}

func (l *replicaLink) lock()   { l.mu.Lock() }
func (l *replicaLink) unlock() { l.mu.Unlock() }

// nudge wakes the link without new writes, so that it re-examines the in-sync set.
func (l *replicaLink) nudge() { signal(l.wake) }

// markDirty records that segment has a write the replica may lack. It runs under the segment's lock.
func (l *replicaLink) markDirty(segment int) {
	l.lock()
	l.dirty[segment]++
	l.unlock()
	signal(l.wake)
}

// resyncPartition makes the link check, before sending any op of partition p, that the replica's copy of
// each segment is empty or a prefix of this node's, and send whole those that are not. epoch is the
// partition's epoch in the map that asked for it.
func (l *replicaLink) resyncPartition(p int, epoch uint64) {
	l.lock()
	l.probePartition(p, epoch)
	l.unlock()
	signal(l.wake)
}

// probePartition puts every segment of partition p at the first step of a resync. Called with l.mu held.
func (l *replicaLink) probePartition(p int, epoch uint64) {
	first, end := l.r.layout.PartitionSegments(p)
	for s := first; s < end; s++ {
		l.markResync(s, resyncMark{resyncProbe, epoch})
	}
}

// resend makes the link send segment s whole, as this node's copy under epoch.
func (l *replicaLink) resend(s int, epoch uint64) {
	l.lock()
	l.markResync(s, resyncMark{resyncSnapshot, epoch})
	l.unlock()
	signal(l.wake)
}

// markResync puts segment s at a step of a resync. Called with l.mu held.
func (l *replicaLink) markResync(s int, mark resyncMark) {
	l.resync[s] = mark
	l.dirty[s]++
	delete(l.acked, s)
}

// awaitAcked waits until the replica has applied segment up to revision, or until no committed decision
// expects it to: it is not in the partition's in-sync set and not being admitted to it (a, when not nil).
func (l *replicaLink) awaitAcked(ctx context.Context, segment int, revision uint64, deadline time.Time, a *admission) error {
	timer := l.r.cfg.Clock.NewTimer(deadline.Sub(l.r.cfg.Clock.Now()))
	defer timer.Stop()
	l.lock()
	if _, known := l.acked[segment]; !known {
		l.dirty[segment]++ // nothing may be on its way to the replica: make the link ask where it stands
	}
	l.unlock()
	signal(l.wake)
	for {
		l.lock()
		acked, known := l.acked[segment]
		held := known && acked >= revision
		fenced, progress := l.isFenced(segment), l.progress
		var ack chan struct{}
		if !held {
			ack = l.ackOf(segment)
		}
		l.unlock()
		owner, needed := l.expected(segment, a)
		switch {
		case held:
			return nil
		case !owner:
			return ErrOwnershipChanging
		case !needed && !fenced:
			return nil // a committed decision no longer expects the replica to hold the write
		}
		// A fenced write waits for this node's map to reach the epoch the replica saw, even if that map no
		// longer expects the replica: the epoch may be this node's own next one (a reclaim), which the
		// replica learnt first. Deposed, the map soon names another owner; cut off from the control plane,
		// the write fails at its deadline.
		select {
		case <-ack:
		case <-progress:
			signal(l.wake) // the map may have lifted the fence: the link resends what it held back
		case <-timer.C():
			if fenced {
				return ErrReplicaWriteRejected
			}
			return fmt.Errorf("%w: %s, segment %d, revision %d", errReplicaTimeout, l.to, segment, revision)
		case <-ctx.Done():
			return ctx.Err()
		case <-l.r.life.Done():
			return ErrClosed
		}
	}
}

// ackOf returns the channel closed when the replica's revision of segment is next learnt. Called with
// l.mu held.
func (l *replicaLink) ackOf(segment int) chan struct{} {
	ch := l.acks[segment]
	if ch == nil {
		ch = make(chan struct{})
		l.acks[segment] = ch
	}
	return ch
}

// learnt records the replica's revision of segment and wakes the writes waiting on it. Called with l.mu
// held.
func (l *replicaLink) learnt(segment int, revision uint64) {
	l.acked[segment] = revision
	if ch := l.acks[segment]; ch != nil {
		close(ch)
		delete(l.acks, segment)
	}
}

// expected reports whether this node still owns segment's partition in the committed map, and whether the
// replica must still hold the write: the map lists it in the partition's in-sync set, or its admission a
// may still apply.
func (l *replicaLink) expected(segment int, a *admission) (owner, needed bool) {
	m := l.r.clusterMap()
	p := l.r.layout.SegmentPartition(segment)
	st := m.Runtime[p]
	return l.r.ownsIn(m, p), slices.Contains(st.InSync, l.to) || a != nil && a.pending(st)
}

// wakeWaiters makes the writes waiting on this link look at the map again.
func (l *replicaLink) wakeWaiters() {
	l.lock()
	close(l.progress)
	l.progress = make(chan struct{})
	l.unlock()
}

// run sends until the node stops.
func (l *replicaLink) run() {
	defer l.r.wg.Done()
	for {
		select {
		case <-l.r.life.Done():
			return
		case <-l.wake:
		}
		stopped := false
		l.r.guarded("replica link", func() {
			if stopped = l.sendPending(); !stopped {
				l.maybeRejoin()
			}
		})
		if stopped {
			return
		}
	}
}

// sendPending sends, retrying with backoff, until the replica has every dirty segment. It reports whether
// the node stopped meanwhile.
func (l *replicaLink) sendPending() (stopped bool) {
	backoff := l.r.cfg.RetryBackoff
	for l.hasWork() {
		if err := l.sendOnce(); err != nil {
			l.r.log.Debug("replicate", "to", l.to, "err", err)
			if sleepStop(l.r.cfg.Clock, l.r.life.Done(), backoff) {
				return true
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = l.r.cfg.RetryBackoff
	}
	return false
}

// maybeRejoin asks the control plane to put the replica back in the in-sync set of each partition this
// node owns once the replica holds everything the owner has. Segments whose state on the replica is
// unknown are probed first. Between two partitions it sends what writes wait for, so that the admissions
// of many partitions do not hold up the writes of any.
func (l *replicaLink) maybeRejoin() {
	m := l.r.clusterMap()
	for p, st := range m.Runtime {
		if !l.r.ownsIn(m, p) || st.Health == Recovering || slices.Contains(st.InSync, l.to) || !slices.Contains(m.Assignment[p], l.to) {
			continue
		}
		if hold := l.r.cfg.hooks.holdRejoin; hold != nil && hold(p, l.to) {
			continue
		}
		l.rejoin(p, st)
		if l.sendPending() {
			return
		}
	}
}

// rejoin returns the replica to partition p's in-sync set if it holds everything the owner has. Writes
// wait for the replica from before the check until the decision applies or is voided (see admission).
func (l *replicaLink) rejoin(p int, st PartitionState) {
	cancel, abandon := l.r.startAdmission(p, l.to, st)
	process, ok := l.caughtUp(p, st.Epoch)
	if !ok {
		abandon() // nothing proposed: the writes begun meanwhile need not wait for the replica
		return
	}
	if hook := l.r.cfg.hooks.beforeAdmit; hook != nil {
		hook(p, l.to)
	}
	ctx, stop := context.WithTimeout(l.r.life, applyTimeout)
	defer stop()
	if err := l.r.admitReplica(ctx, p, st, NodeInfo{ID: l.to, Incarnation: process}); err != nil {
		// The decision may still apply: writes go on waiting for the replica until the map moves past it.
		l.r.log.Debug("return replica to the in-sync set", "partition", p, "replica", l.to, "err", err)
		return
	}
	cancel() // applied, or void: the map has moved past the point it was decided at
}

// caughtUp probes the replica's revisions of partition p's segments, owned at epoch, and reports whether
// it holds each up to the owner's, and which process of the replica answered. It marks dirty the segments
// the replica lacks, so the link feeds them.
func (l *replicaLink) caughtUp(p int, epoch uint64) (process uint64, ok bool) {
	first, end := l.r.layout.PartitionSegments(p)
	seen := l.r.clusterMap().Index
	target := l.r.revisions(p)
	req := replicateRequest{From: l.r.id, Epochs: map[int]uint64{p: epoch}}
	for s := first; s < end; s++ {
		req.Probe = append(req.Probe, s)
	}
	reply, _, err := l.call(&req)
	if err != nil {
		return 0, false
	}
	l.absorb(&batch{}, reply)
	// A replica whose map is behind this node's may yet apply a change that drops it from the partition
	// and discards the copy it just reported.
	ok = reply.MapIndex >= seen
	for s := first; s < end; s++ {
		l.lock()
		resyncing := l.resync[s].step != 0
		l.unlock()
		if rev, known := reply.Revisions[s]; !known || rev < target[s-first] || resyncing {
			l.markDirty(s)
			ok = false
		}
	}
	return reply.Incarnation, ok
}

func (l *replicaLink) hasWork() bool {
	m := l.r.clusterMap()
	l.lock()
	defer l.unlock()
	for seg := range l.dirty {
		if !l.isFenced(seg) && m.Runtime[l.r.layout.SegmentPartition(seg)].Health != Recovering {
			return true
		}
	}
	return false
}

// isFenced reports whether the replica has refused this node's epoch for the segment's partition, and
// this node has not since become its owner under that epoch or a newer one. Called with l.mu held.
func (l *replicaLink) isFenced(segment int) bool {
	p := l.r.layout.SegmentPartition(segment)
	seen, ok := l.fenced[p]
	// An epoch names one owner: if this node owns the partition under the epoch the replica saw, or a
	// later one, it has not been deposed (a heal or a reclaim gave it a new epoch the replica learnt first).
	return ok && l.r.clusterMap().Runtime[p].Epoch < seen
}

// batch is one request in the making, with what it takes to retire its segments from the dirty set.
type batch struct {
	req    replicateRequest
	gen    map[int]uint64 // dirty generation when the batch was planned
	target map[int]uint64 // owner's revision when the batch was planned
	bytes  int
	disk   int // ops read from the data dir's op log
}

// sendOnce plans one request, sends it and absorbs the reply. After a failure the replica's revisions are
// forgotten: it may have restarted with less than it had.
func (l *replicaLink) sendOnce() error {
	b := l.plan()
	reply, size, err := l.call(&b.req)
	if err != nil {
		l.forget()
		return err
	}
	l.r.stats.opsSent.Add(uint64(len(b.req.Ops)))
	l.r.stats.opsFromDisk.Add(uint64(b.disk))
	l.r.stats.bytesSent.Add(uint64(size))
	if l.feedsMove(&b.req) {
		l.r.stats.moveBytes.Add(uint64(size))
	}
	for _, s := range b.req.Snapshots {
		if !s.More {
			l.r.stats.snapshotsSent.Add(1)
		}
	}
	l.absorb(b, reply)
	return nil
}

// feedsMove reports whether req carries a partition to this replica as an incoming node of its move.
func (l *replicaLink) feedsMove(req *replicateRequest) bool {
	m := l.r.clusterMap()
	for p := range req.Epochs {
		if st := m.Runtime[p]; slices.Contains(st.Target, l.to) && !slices.Contains(st.From, l.to) {
			return true
		}
	}
	return false
}

// call sends one replication request to the replica and returns its reply and the request's size.
func (l *replicaLink) call(req *replicateRequest) (*replicateReply, int, error) {
	return l.r.call(l.to, req, l.r.cfg.ReplicaAckTimeout)
}

// callReplica sends one replication request (ops, a snapshot, probes, or nothing at all as a liveness
// check) to node id and returns its reply and the request's encoded size.
func (c *client) callReplica(id NodeID, req *replicateRequest, timeout time.Duration) (*replicateReply, int, error) {
	p := c.router.peerByID(id)
	if p == nil || p.local {
		return nil, 0, fmt.Errorf("zaris: no connection to node %s", id)
	}
	req.FromIncarnation = c.incarnation
	payload := req.marshal()
	ctx, cancel := context.WithTimeout(c.life, timeout)
	defer cancel()
	resp, err := p.internal.Call(ctx, kv.OpReplicate, payload)
	if err != nil {
		return nil, 0, err
	}
	var reply replicateReply
	if err := reply.decodeMsg(resp); err != nil {
		return nil, 0, err
	}
	if reply.Status == StatusNotReady {
		return nil, 0, fmt.Errorf("%w: %s", errReplicaBehind, id)
	}
	return &reply, len(payload), nil
}

// forget drops what the link knew of the replica's revisions, and the snapshots it was sending in pieces.
func (l *replicaLink) forget() {
	l.lock()
	clear(l.acked)
	clear(l.outgoing)
	l.unlock()
}

// plan picks the dirty segments and what each needs: the ops the replica lacks, or a snapshot when no op
// log reaches back. Every reply reports the replica's revision of each segment sent. Only the
// segments that fit in the request enter b.gen, so only they can be retired by its reply.
func (l *replicaLink) plan() *batch {
	b := &batch{req: replicateRequest{From: l.r.id, Epochs: map[int]uint64{}},
		gen: map[int]uint64{}, target: map[int]uint64{}}
	type candidate struct {
		gen, acked uint64
		known      bool
	}
	candidates := map[int]candidate{}
	var probes, snapshots []int
	l.lock()
	b.req.Incarnation = l.incarnation
	// Load the map under the lock: a segment marked dirty before this point was written under this map or
	// an older one, so a partition this node has just taken over is never mistaken for one it lost.
	m := l.r.clusterMap()
	for seg, gen := range l.dirty {
		p := l.r.layout.SegmentPartition(seg)
		if !l.r.ownsIn(m, p) {
			delete(l.dirty, seg) // not ours to replicate, or not yet: the map does not know this process
			delete(l.resync, seg)
			delete(l.outgoing, seg)
			continue
		}
		if l.isFenced(seg) || m.Runtime[p].Health == Recovering {
			continue // a Recovering owner sends nothing: its copy is about to grow from its source
		}
		if mark := l.resync[seg]; mark.step != 0 && mark.epoch != m.Runtime[p].Epoch {
			l.resync[seg] = resyncMark{resyncProbe, m.Runtime[p].Epoch} // decided for another epoch: ask again
		}
		switch l.resync[seg].step {
		case resyncProbe:
			probes = append(probes, seg)
			continue
		case resyncSnapshot:
			snapshots = append(snapshots, seg)
			b.gen[seg] = gen
			continue
		}
		acked, known := l.acked[seg]
		candidates[seg] = candidate{gen: gen, acked: acked, known: known}
	}
	l.unlock()
	if len(probes)+len(snapshots) > 0 {
		l.planResync(b, m, probes, snapshots)
		return b
	}
	for seg, c := range candidates {
		b.req.Epochs[l.r.layout.SegmentPartition(seg)] = m.Runtime[l.r.layout.SegmentPartition(seg)].Epoch
		b.gen[seg] = c.gen
		b.target[seg] = l.r.store.revision(seg)
		if c.known {
			l.addOps(b, seg, c.acked)
		} else {
			// Probe, and optimistically send the latest op: an in-sync replica usually has everything
			// before it, and if not, the reply tells where it stands.
			b.req.Probe = append(b.req.Probe, seg)
			l.addLatestOp(b, seg)
		}
		if len(b.req.Ops) >= replicateMaxOps || b.bytes >= l.r.maxRequestBytes() {
			break
		}
	}
	return b
}

// planResync fills b with the resyncs under way: probes of the segments whose history is unknown, and
// whole snapshots of those that differ, up to the request's size limit. Only the snapshots are retired by
// the reply; a probed segment found to share this node's history is then fed ops as usual.
func (l *replicaLink) planResync(b *batch, m *ClusterMap, probes, snapshots []int) {
	for _, seg := range probes {
		p := l.r.layout.SegmentPartition(seg)
		b.req.Probe = append(b.req.Probe, seg)
		b.req.Epochs[p] = m.Runtime[p].Epoch
	}
	gens := b.gen
	b.gen = map[int]uint64{}
	for _, seg := range snapshots {
		s := l.addSnapshot(b, seg, m.Runtime[l.r.layout.SegmentPartition(seg)].Epoch)
		b.gen[seg], b.target[seg] = gens[seg], s.Revision
		l.r.stats.resyncs.Add(1)
		if b.bytes >= l.r.maxRequestBytes() {
			return
		}
	}
}

// addSnapshot adds to b a copy of segment seg, sent as this node's copy under epoch: the replica installs
// it only while the map names this process the partition's owner at that epoch. A copy larger than what is
// left of the request goes a piece at a time, from a snapshot taken once and kept until its last piece.
func (l *replicaLink) addSnapshot(b *batch, seg int, epoch uint64) *segmentSnapshot {
	l.lock()
	o := l.outgoing[seg]
	l.unlock()
	if o == nil || o.snap.Epoch != epoch {
		o = &outgoingSnapshot{snap: l.r.takeSnapshot(seg, epoch)}
		l.r.log.Debug("sending a segment's copy", "segment", seg, "to", l.to, "revision", o.snap.Revision, "epoch", epoch, "entries", len(o.snap.Entries))
		l.lock()
		l.outgoing[seg] = o
		l.unlock()
	}
	piece, size := o.nextPiece(l.r.maxRequestBytes() - b.bytes)
	b.bytes += size
	b.req.Snapshots = append(b.req.Snapshots, piece)
	b.req.Epochs[l.r.layout.SegmentPartition(seg)] = epoch
	return o.snap
}

// tookPieces advances the snapshots sent in pieces by what the replica took from b, and forgets those
// finished or refused. Called with l.mu held.
func (l *replicaLink) tookPieces(b *batch, took bool) {
	for _, s := range b.req.Snapshots {
		o := l.outgoing[s.Segment]
		switch {
		case o == nil || o.part != s.Part:
		case took && s.More:
			o.took(&s)
		default:
			delete(l.outgoing, s.Segment)
		}
	}
}

// addOps adds to b the ops of seg after revision after, as many as the request has room for: from the op
// log in memory, or from the data dir's for those memory no longer holds. When neither reaches back, it adds
// a snapshot of the segment instead, if the request carries none yet.
func (l *replicaLink) addOps(b *batch, seg int, after uint64) {
	ops, fromDisk, err := l.r.opsAfter(seg, after, replicateMaxOps-len(b.req.Ops), l.r.maxRequestBytes()-b.bytes)
	if errors.Is(err, durability.ErrTruncated) {
		if len(b.req.Snapshots) == 0 {
			l.addSnapshot(b, seg, b.req.Epochs[l.r.layout.SegmentPartition(seg)])
		}
		return
	}
	added := l.appendOps(b, ops)
	if fromDisk {
		b.disk += added
	}
}

// addLatestOp adds to b the newest op of seg, when memory holds it, for a replica whose revision is not
// known: it costs no read of the disk and no snapshot, since the replica may well have every op already.
func (l *replicaLink) addLatestOp(b *batch, seg int) {
	if ops, err := l.r.oplog.Ops(uint32(seg), max(b.target[seg], 1)-1, 1); err == nil {
		l.appendOps(b, ops)
	}
}

// opBytes is what an op counts against a request's size and the disk queue's bound.
func opBytes(op *durability.Op) int { return len(op.Key) + len(op.Value) + 48 }

// appendOps adds ops to b while the request has room and returns how many it added: the rest goes in the
// next request, and the reply tells how far the replica got.
func (l *replicaLink) appendOps(b *batch, ops []durability.Op) int {
	for i := range ops {
		size := opBytes(&ops[i])
		if len(b.req.Ops) > 0 && b.bytes+size > l.r.maxRequestBytes() {
			return i
		}
		b.req.Ops = append(b.req.Ops, ops[i])
		b.bytes += size
	}
	return len(ops)
}

// maxRequestBytes bounds what one replication request carries, well within a frame.
func (r *replication) maxRequestBytes() int { return min(replicateMaxBytes, r.cfg.MaxFrameSize/2) }

// absorb records the replica's revisions and retires segments that are caught up and saw no new write
// since the batch was planned.
func (l *replicaLink) absorb(b *batch, reply *replicateReply) {
	ahead, prefix := l.aheadOfOwner(reply), l.prefixes(reply)
	l.lock()
	defer l.unlock()
	if reply.Status == StatusReplicaWriteRejected {
		l.fenced[l.r.layout.SegmentPartition(reply.Segment)] = reply.Epoch
	}
	l.noteIncarnation(reply.Incarnation)
	for s, epoch := range ahead {
		l.markResync(s, resyncMark{resyncSnapshot, epoch})
	}
	for s := range reply.Lines {
		switch mark := l.resync[s]; {
		case mark.step != resyncProbe:
		case prefix[s]:
			delete(l.resync, s)
		default:
			l.resync[s] = resyncMark{resyncSnapshot, mark.epoch}
		}
	}
	took := reply.Status == StatusSuccess && (b.req.Incarnation == 0 || reply.Incarnation == b.req.Incarnation)
	if took {
		for _, s := range b.req.Snapshots {
			if !s.More {
				delete(l.resync, s.Segment)
			}
		}
	}
	l.tookPieces(b, took)
	for seg, rev := range reply.Revisions {
		if l.resync[seg].step == 0 {
			l.learnt(seg, rev)
		}
	}
	for seg, gen := range b.gen {
		if acked, ok := l.acked[seg]; ok && l.dirty[seg] == gen && acked >= b.target[seg] {
			delete(l.dirty, seg)
		}
	}
	if reply.Status == StatusReplicaWriteRejected {
		close(l.progress) // the writes of the fenced partition look at the map again
		l.progress = make(chan struct{})
	}
}

// noteIncarnation records the replica's process. When it restarted, each segment this node owns there is
// checked before any op: a reloaded copy of this node's history gets only the ops it lacks, any other is
// resent whole. Called with l.mu held.
func (l *replicaLink) noteIncarnation(incarnation uint64) {
	if incarnation == 0 || incarnation == l.incarnation {
		return
	}
	// A process first heard from is as unknown as a restarted one: it may have reloaded, from its data
	// dir, a copy of another history than this node's.
	l.incarnation = incarnation
	m := l.r.clusterMap()
	for p, st := range m.Runtime {
		if l.r.ownsIn(m, p) && slices.Contains(m.Assignment[p], l.to) {
			l.probePartition(p, st.Epoch)
		}
	}
}

// aheadOfOwner returns, with their partition's epoch, the owned segments where the replica reports a
// revision beyond this node's. Such a copy follows another history and must be resent whole. Call it
// without l.mu, since it takes segment locks.
func (l *replicaLink) aheadOfOwner(reply *replicateReply) map[int]uint64 {
	m := l.r.clusterMap()
	ahead := map[int]uint64{}
	for seg, rev := range reply.Revisions {
		if seg < 0 || seg >= l.r.layout.Segments {
			continue
		}
		p := l.r.layout.SegmentPartition(seg)
		if l.r.ownsIn(m, p) && rev > l.r.store.revision(seg) {
			ahead[seg] = m.Runtime[p].Epoch
		}
	}
	return ahead
}

// prefixes reports, for each segment the reply probed, whether the replica's copy is empty or a prefix of
// this node's: it follows the same owner's history and is not ahead of it. Called without l.mu.
func (l *replicaLink) prefixes(reply *replicateReply) map[int]bool {
	prefix := map[int]bool{}
	for s, line := range reply.Lines {
		if s < 0 || s >= l.r.layout.Segments {
			continue
		}
		rev := reply.Revisions[s]
		prefix[s] = rev == 0 || line != 0 && line == l.r.lines[s].Load() && rev <= l.r.store.revision(s)
	}
	return prefix
}

// sleepStop sleeps for d on clock c and reports whether stop closed meanwhile.
func sleepStop(c Clock, stop <-chan struct{}, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return true
	case <-t.C():
		return false
	}
}
