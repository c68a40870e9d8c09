package zaris

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/durability"
)

// Limits of one replication request.
const (
	replicateMaxOps   = 512
	replicateMaxBytes = 4 << 20
)

// replicateRequest carries, from a partition's owner to one replica, ops in revision order per segment,
// optionally whole segment snapshots to install first, and segments whose revision the owner wants to learn.
type replicateRequest struct {
	_msgpack struct{} `msgpack:",as_array"`
	From     NodeID
	// FromIncarnation is the sender's process. A replica takes snapshots and ops only from the process its
	// map records as the partition's owner: a restarted owner may hold less than its previous process did.
	FromIncarnation uint64
	Snapshots       []segmentSnapshot // whole segments to install before the ops
	Ops             []durability.Op
	Probe           []int // segments whose revision the owner does not know yet
	// Epochs holds, per partition sent, the epoch under which the sender owns it now. Fencing checks it,
	// not the epochs the ops were first written under: a new owner legitimately resends older ops.
	Epochs map[int]uint64
	// Pull asks for a piece of the replica's own copy of a segment: a Recovering owner syncing from its source.
	Pull *pullRequest
	// Incarnation is the replica process the sender expects, 0 for any. Another process applies none of
	// the snapshots or ops, which were planned on what its predecessor held, but answers the probes, so the
	// sender learns of the restart.
	Incarnation uint64
}

// replicateReply reports the replica's revision of every segment the request touched.
type replicateReply struct {
	_msgpack struct{} `msgpack:",as_array"`
	Status   Status
	Epoch    uint64 // for ReplicaWriteRejected: the epoch the replica has seen for Segment's partition
	Segment  int
	// Incarnation identifies the replica's process: a new value means it restarted and may have lost
	// what it held.
	Incarnation uint64
	Revisions   map[int]uint64
	// Lines holds, for each probed segment, the epoch of the owner whose history the replica's copy follows.
	Lines map[int]uint64
	// Snapshots answers Pull, with one piece.
	Snapshots []segmentSnapshot
	// MapIndex is the index of the replica's map before it read the revisions it reports. A replica behind
	// the owner's map may still apply a change that discards its copy (see replicaLink.caughtUp).
	MapIndex uint64
}

// segmentSnapshot is a whole segment at Revision, for a replica behind the owner's op log, or one piece of
// it. A segment larger than one request travels in pieces numbered from 0, all but the last with More set,
// and the receiver installs it once it holds every piece.
type segmentSnapshot struct {
	_msgpack struct{} `msgpack:",as_array"`
	Segment  int
	Revision uint64
	Epoch    uint64
	Entries  []durability.Entry
	Part     int
	More     bool
}

// entryBytes is what an entry counts against a request's size limit.
func entryBytes(e *durability.Entry) int { return len(e.Key) + len(e.Value) + 32 }

// nextPiece cuts the next piece of o's snapshot: the entries from where the receiver stands that fit in room
// bytes, at least one, with More set when entries remain after them. It returns the piece and its size.
func (o *outgoingSnapshot) nextPiece(room int) (piece segmentSnapshot, size int) {
	piece = *o.snap
	piece.Part, piece.Entries = o.part, nil
	for i := o.sent; i < len(o.snap.Entries); i++ {
		n := entryBytes(&o.snap.Entries[i])
		if i > o.sent && size+n > room {
			piece.More = true
			break
		}
		piece.Entries = o.snap.Entries[o.sent : i+1]
		size += n
	}
	return piece, size
}

// took moves o past piece, which the receiver has taken.
func (o *outgoingSnapshot) took(piece *segmentSnapshot) {
	o.sent += len(piece.Entries)
	o.part++
}

// ReplicationStats counts what replication moved, for tests and operators.
type ReplicationStats struct {
	OpsSent, BytesSent, SnapshotsSent   uint64
	OpsApplied, SnapshotsApplied, Gaps  uint64
	RejectedStaleEpoch, InSyncDecisions uint64
	// RecoveredOps counts ops replayed from the data dir at start.
	RecoveredOps uint64
	// Recoveries counts partitions this node, as a new owner, synced from a peer that held more before
	// serving them. PulledSegments and PulledPieces count the segments and pieces copied in those syncs.
	Recoveries, PulledSegments, PulledPieces uint64
	// Resyncs counts whole segments resent to a replica whose copy may follow another history: after a
	// failover to this node, or a restart of the replica.
	Resyncs uint64
	// OpsFromDisk counts the ops among OpsSent read from the data dir's op log, which serves a replica behind
	// the op log in memory before it needs a snapshot.
	OpsFromDisk uint64
	// MoveBytesSent counts the bytes among BytesSent that went to the incoming nodes of moves.
	MoveBytesSent uint64
}

type replicationStats struct {
	opsSent, bytesSent, snapshotsSent  atomic.Uint64
	opsApplied, snapshotsApplied, gaps atomic.Uint64
	rejected, inSyncDecisions          atomic.Uint64
	recoveredOps                       atomic.Uint64
	recoveries, pulledSegments         atomic.Uint64
	pulledPieces                       atomic.Uint64
	resyncs, opsFromDisk               atomic.Uint64
	moveBytes                          atomic.Uint64
}

// replicationConfig is what replication needs from its node.
type replicationConfig struct {
	id         NodeID
	layout     Layout
	cfg        *Config
	store      *store
	clusterMap func() *ClusterMap // the map this node has committed
	// call sends one replication request to a node and returns its reply and the request's encoded size.
	call func(id NodeID, req *replicateRequest, timeout time.Duration) (*replicateReply, int, error)
	// propose commits a control-plane decision, waiting out an election (controlPlane.propose): a
	// replica's drop from an in-sync set. offer commits one only if a leader takes it now
	// (controlPlane.offer): a replica's admission, which the link tries again anyway and must not wait
	// for, since it sends nothing meanwhile.
	propose, offer func(ctx context.Context, cmd *command) error
	life           context.Context // ends when the node closes
	wg             *sync.WaitGroup // counts the links' goroutines
	log            *slog.Logger
	// guard runs one round of a link's loop, recovering a panic (panicGuard.guarded); nil runs it bare.
	guard func(what string, fn func())
}

// replication is a node's side of replication: links to the replicas of the partitions it owns, the
// fence (highest epoch seen) of the partitions it replicates, and the op log.
type replication struct {
	replicationConfig
	// oplog holds the recent ops of every segment, bounded (newOpLog). Its concrete type lets the op
	// recorded on each write stay on the stack.
	oplog *durability.Memory
	disk  *diskLog        // nil without a data dir; set once, before the node serves
	fence []atomic.Uint64 // per partition
	// lines holds, per segment, the epoch of the owner whose history this node's copy follows (its own as
	// owner, else its sender's), or 0 when unknown, as for a copy reloaded from disk. Copies of one line are
	// prefixes of one history, because an owner that did not take over in a hand-over resends whole snapshots.
	lines []atomic.Uint64
	// committed holds, per segment this node owns, a revision every in-sync replica holds (visibility.go).
	committed []atomic.Uint64
	// replaced counts, per segment, the replacements of this node's copy (replaceSegment).
	replaced []replacements
	// trimDue marks, per segment, an op log the sweep must look at: written since its last look, or
	// left longer than its tail by a reader that lacked ops (oplog.go).
	trimDue []atomic.Bool
	// incarnation is random per process, so owners notice when a replica restarted.
	incarnation uint64
	stats       replicationStats

	mu    sync.Mutex
	links map[NodeID]*replicaLink
	// joining lists, per partition, the replicas this owner is about to return to the in-sync set.
	joining map[int]map[NodeID]*admission
	// snapshotStage holds the pieces of the snapshots being received from owners.
	snapshotStage
	// pulls holds the snapshots this node serves Recovering owners' pulls from.
	pulls heldPulls
}

// admission is a replica on its way back into a partition's in-sync set, decided at the partition's epoch
// and InSyncIndex. While it is pending, Sync writes wait for the replica too, and one it fails to
// acknowledge drops it, which voids the admission. It is also void once the owner found the replica
// behind and proposed nothing.
type admission struct {
	epoch, inSyncIndex uint64
	abandoned          atomic.Bool
}

// pending reports whether the admission may still apply to a partition in state st.
func (a *admission) pending(st PartitionState) bool {
	return !a.abandoned.Load() && st.Epoch == a.epoch && st.InSyncIndex == a.inSyncIndex
}

func newReplication(c replicationConfig) *replication {
	segments := c.layout.Segments
	return &replication{
		replicationConfig: c,
		oplog:             newOpLog(segments, c.cfg.OpLogRetain, c.cfg.OpLogRetainBytes),
		fence:             make([]atomic.Uint64, c.layout.Partitions),
		lines:             make([]atomic.Uint64, segments),
		trimDue:           make([]atomic.Bool, segments),
		committed:         make([]atomic.Uint64, segments),
		replaced:          make([]replacements, segments),
		incarnation:       rand.Uint64() | 1,
		links:             map[NodeID]*replicaLink{},
		joining:           map[int]map[NodeID]*admission{},
		snapshotStage:     snapshotStage{staged: map[int]*segmentSnapshot{}},
		pulls:             heldPulls{idle: c.cfg.FailoverTimeout, clock: c.cfg.Clock, held: map[pullKey]*heldPull{}},
	}
}

// recordedIn reports whether m records this process as the node's current one.
func (r *replication) recordedIn(m *ClusterMap) bool {
	return m.Nodes[r.id].Incarnation == r.incarnation
}

// ownsIn reports whether this process is partition p's active owner in m: the map names this node and
// records this process, not a previous one, whose copies this one may not hold.
func (r *replication) ownsIn(m *ClusterMap, p int) bool {
	return m.Runtime[p].Owner == r.id && r.recordedIn(m)
}

// enoughInSync reports whether a partition in state st has MinInSync in-sync copies, its owner included.
func (r *replication) enoughInSync(st PartitionState) bool {
	return 1+len(st.InSync) >= r.cfg.MinInSync
}

// revisions returns this node's revision of each segment of partition p, in order.
func (r *replication) revisions(p int) []uint64 {
	first, end := r.layout.PartitionSegments(p)
	revs := make([]uint64, 0, end-first)
	for s := first; s < end; s++ {
		revs = append(revs, r.store.revision(s))
	}
	return revs
}

// guarded runs fn through the guard, if any.
func (r *replication) guarded(what string, fn func()) {
	if r.guard == nil {
		fn()
		return
	}
	r.guard(what, fn)
}

// link returns the replication link to id, starting it on first use.
func (r *replication) link(id NodeID) *replicaLink {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.links[id]
	if l == nil {
		l = newReplicaLink(r, id)
		r.links[id] = l
		r.wg.Add(1)
		go l.run()
	}
	return l
}

// wakeWaiters makes every write waiting for a replica look at the map again, after a map change.
func (r *replication) wakeWaiters() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.links {
		l.wakeWaiters()
	}
}

// awaitReplicas blocks a Sync write (or a read revealing it) at revision of segment until every in-sync or
// admitted replica has applied it and this node's disk holds it as DiskDurability asks. Replicas silent for
// ReplicaAckTimeout are dropped from the in-sync set by a committed decision first. The write fails if that
// decision cannot commit or leaves fewer than MinInSync copies.
func (r *replication) awaitReplicas(ctx context.Context, segment int, revision uint64, write bool) Status {
	p := r.layout.SegmentPartition(segment)
	ticket := r.disk.mark() // the write's op is queued for the disk by now
	for {
		// Admissions first: one that ended before this point has applied, or never will, in the map below.
		joining := r.joiningFor(p)
		m := r.clusterMap()
		if !r.ownsIn(m, p) {
			return StatusOwnershipChanging
		}
		st := m.Runtime[p]
		lagging, status := r.waitCopies(ctx, st, joining, segment, revision)
		if status != StatusSuccess {
			return status
		}
		if len(lagging) == 0 {
			if status := r.awaitDisk(ctx, ticket); status != StatusSuccess {
				return status
			}
			r.confirm(segment, revision)
			if write && !r.enoughInSync(st) {
				return StatusNotEnoughReplicas
			}
			return status
		}
		r.log.Info("replicas lagging; dropping them from the in-sync set", "partition", p, "replicas", lagging)
		if err := r.dropReplicas(ctx, p, st.Epoch, lagging); err != nil {
			r.log.Warn("drop lagging replicas from the in-sync set", "partition", p, "replicas", lagging, "err", err)
			return StatusPartitionUnavailable
		}
	}
}

// awaitDisk waits until this node's disk holds every op queued up to ticket, as far as DiskDurability asks.
func (r *replication) awaitDisk(ctx context.Context, ticket uint64) Status {
	switch err := r.disk.await(ctx, ticket); {
	case err == nil:
		return StatusSuccess
	case ctx.Err() != nil, errors.Is(err, ErrClosed):
		return StatusOwnershipChanging
	default:
		return StatusPartitionUnavailable
	}
}

// waitCopies waits for each in-sync replica of a partition in state st, and each replica being admitted, to
// apply revision; it returns the replicas that timed out.
func (r *replication) waitCopies(ctx context.Context, st PartitionState, joining map[NodeID]*admission, segment int, revision uint64) ([]NodeID, Status) {
	var deadline time.Time // read from the clock only when there is a copy to wait for
	var lagging []NodeID
	await := func(id NodeID, a *admission) Status {
		if deadline.IsZero() {
			deadline = r.cfg.Clock.Now().Add(r.cfg.ReplicaAckTimeout)
		}
		switch err := r.link(id).awaitAcked(ctx, segment, revision, deadline, a); {
		case err == nil:
		case errors.Is(err, ErrReplicaWriteRejected):
			return StatusReplicaWriteRejected
		case errors.Is(err, ErrOwnershipChanging), errors.Is(err, ErrClosed), ctx.Err() != nil:
			return StatusOwnershipChanging
		default:
			lagging = append(lagging, id)
		}
		return StatusSuccess
	}
	for _, id := range st.InSync {
		if status := await(id, nil); status != StatusSuccess {
			return nil, status
		}
	}
	for id, a := range joining {
		if slices.Contains(st.InSync, id) {
			continue
		}
		if status := await(id, a); status != StatusSuccess {
			return nil, status
		}
	}
	return lagging, StatusSuccess
}

// startAdmission registers replica id as joining partition p's in-sync set at state st. Call cancel once
// the admission has applied or its decision will never apply; call abandon instead when it was never
// proposed, which also releases the writes waiting for the replica on its account.
func (r *replication) startAdmission(p int, id NodeID, st PartitionState) (cancel, abandon func()) {
	a := &admission{epoch: st.Epoch, inSyncIndex: st.InSyncIndex}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.joining[p] == nil {
		r.joining[p] = map[NodeID]*admission{}
	}
	r.joining[p][id] = a
	cancel = func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.joining[p][id] == a {
			delete(r.joining[p], id)
		}
	}
	abandon = func() {
		a.abandoned.Store(true)
		cancel()
		r.link(id).wakeWaiters()
	}
	return cancel, abandon
}

// joiningFor returns the admissions to partition p that may still apply and forgets the others.
func (r *replication) joiningFor(p int) map[NodeID]*admission {
	st := r.clusterMap().Runtime[p]
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.DeleteFunc(r.joining[p], func(_ NodeID, a *admission) bool { return !a.pending(st) })
	return maps.Clone(r.joining[p])
}

// admitReplica proposes the return of replica, the process that was found caught up, to partition p's
// in-sync set, as decided at state st.
func (r *replication) admitReplica(ctx context.Context, p int, st PartitionState, replica NodeInfo) error {
	return r.proposeInSync(ctx, r.offer, &command{Kind: cmdAdmit, Partition: p, Epoch: st.Epoch, InSyncIndex: st.InSyncIndex, Node: replica})
}

// dropReplicas commits partition p's in-sync set, at epoch, without the lagging replicas.
func (r *replication) dropReplicas(ctx context.Context, p int, epoch uint64, lagging []NodeID) error {
	ctx, cancel := timeoutContext(ctx, r.cfg.Clock, applyTimeout) // a leaderless control plane fails the write in time
	defer cancel()
	return r.proposeInSync(ctx, r.propose, &command{Kind: cmdDrop, Partition: p, Epoch: epoch, InSync: lagging})
}

func (r *replication) proposeInSync(ctx context.Context, commit func(context.Context, *command) error, cmd *command) error {
	if err := commit(ctx, cmd); err != nil {
		return err
	}
	r.stats.inSyncDecisions.Add(1)
	return nil
}

// serveReplicate applies a replication request on a replica and answers once what it applied is on this
// node's disk as far as DiskDurability asks: an owner that counts the acknowledgement counts a copy that
// outlives this process. A replica whose disk refuses writes answers NotReady.
func (r *replication) serveReplicate(ctx context.Context, req *replicateRequest) replicateReply {
	reply := r.applyReplicate(req)
	if len(req.Snapshots)+len(req.Ops) == 0 {
		return reply
	}
	if err := r.disk.await(ctx, r.disk.mark()); err != nil {
		return replicateReply{Status: StatusNotReady, Incarnation: r.incarnation}
	}
	return reply
}

// applyReplicate applies a replication request on a replica. It answers NotReady and touches nothing when
// its map is behind the sender's (the missing change may discard its copy, as a deposed owner's) or does
// not record the sending process (see unknownSender).
func (r *replication) applyReplicate(req *replicateRequest) replicateReply {
	mapIndex := r.clusterMap().Index // before any revision is read: a discard precedes its map's publication
	if r.behind(req) || r.unknownSender(req) {
		return replicateReply{Status: StatusNotReady, Incarnation: r.incarnation}
	}
	reply := replicateReply{Status: StatusSuccess, Revisions: map[int]uint64{}, Incarnation: r.incarnation, MapIndex: mapIndex}
	if req.Incarnation != 0 && req.Incarnation != r.incarnation {
		req.Snapshots, req.Ops = nil, nil
	}
	for i := range req.Snapshots {
		s := &req.Snapshots[i]
		if status, epoch := r.admit(s.Segment, s.Epoch, req.From); status != StatusSuccess {
			return replicateReply{Status: status, Epoch: epoch, Segment: s.Segment}
		}
		whole, ok := r.stage(s)
		if !ok {
			return replicateReply{Status: StatusInvalidRequest, Segment: s.Segment}
		}
		if whole != nil {
			r.installSnapshot(whole)
			reply.Revisions[s.Segment] = s.Revision
		}
	}
	for i := range req.Ops {
		op := &req.Ops[i]
		seg := int(op.Segment)
		if status, epoch := r.admit(seg, req.senderEpoch(seg, op.Epoch, r.layout), req.From); status != StatusSuccess {
			reply.Status, reply.Epoch, reply.Segment = status, epoch, seg
			return reply
		}
		// The op is recorded under its sender's epoch, the line this copy now follows (see lines).
		line := req.senderEpoch(seg, op.Epoch, r.layout)
		applied, have := r.store.applyAt(seg, line, op)
		if applied {
			r.stats.opsApplied.Add(1)
		} else if op.Revision > have+1 {
			r.stats.gaps.Add(1)
		}
		reply.Revisions[seg] = have
	}
	for _, seg := range req.Probe {
		if seg >= 0 && seg < r.layout.Segments {
			if reply.Lines == nil {
				reply.Lines = map[int]uint64{}
			}
			reply.Revisions[seg], reply.Lines[seg] = r.store.revision(seg), r.lines[seg].Load()
		}
	}
	if req.Pull != nil {
		return r.servePull(req, reply)
	}
	return reply
}

// behind reports whether the sender owns one of the request's partitions under an epoch this node's map has
// not reached yet.
func (r *replication) behind(req *replicateRequest) bool {
	m := r.clusterMap()
	for p, epoch := range req.Epochs {
		if p >= 0 && p < len(m.Runtime) && epoch > m.Runtime[p].Epoch {
			return true
		}
	}
	return false
}

// unknownSender reports whether a request that would change or copy segments comes from a process this
// node's map does not record: a restarted node the map has not caught up with yet, or the previous process
// of one it has. Either way the sender's copies are not the ones the map's decisions were made about.
func (r *replication) unknownSender(req *replicateRequest) bool {
	if len(req.Snapshots)+len(req.Ops) == 0 && req.Pull == nil {
		return false
	}
	return r.clusterMap().Nodes[req.From].Incarnation != req.FromIncarnation
}

// senderEpoch is the epoch the sender claims for segment's partition, or fallback when it names none.
func (req *replicateRequest) senderEpoch(segment int, fallback uint64, layout Layout) uint64 {
	if segment < 0 || segment >= layout.Segments {
		return fallback
	}
	if e, ok := req.Epochs[layout.SegmentPartition(segment)]; ok {
		return e
	}
	return fallback
}

// admit fences a replicated write from node from: it is refused if its epoch is older than any this node
// has seen for the partition, or if the map does not name from the partition's owner at that epoch (this
// node itself, say). An epoch names one owner, so a copy is never replaced from anyone else.
func (r *replication) admit(segment int, epoch uint64, from NodeID) (Status, uint64) {
	if segment < 0 || segment >= r.layout.Segments {
		return StatusInvalidRequest, 0
	}
	p := r.layout.SegmentPartition(segment)
	st := r.clusterMap().Runtime[p]
	seen := max(st.Epoch, r.fence[p].Load())
	if epoch < seen || st.Owner != from || from == r.id {
		r.stats.rejected.Add(1)
		return StatusReplicaWriteRejected, seen
	}
	r.raiseFence(p, epoch)
	return StatusSuccess, epoch
}

// snapshotStage holds, per segment, the pieces of a snapshot received so far, until its last piece.
type snapshotStage struct {
	stageMu sync.Mutex
	staged  map[int]*segmentSnapshot
}

// stage adds piece s to the snapshot being received for its segment. It returns the whole snapshot once s
// is its last piece, and false when s does not follow the pieces staged so far (the sender starts again).
func (st *snapshotStage) stage(s *segmentSnapshot) (whole *segmentSnapshot, ok bool) {
	if s.Part == 0 && !s.More {
		return s, true
	}
	st.stageMu.Lock()
	defer st.stageMu.Unlock()
	staged := st.staged[s.Segment]
	switch {
	case s.Part == 0:
		staged = &segmentSnapshot{Segment: s.Segment, Revision: s.Revision, Epoch: s.Epoch}
		st.staged[s.Segment] = staged
	case staged == nil || staged.Revision != s.Revision || staged.Epoch != s.Epoch || staged.Part+1 != s.Part:
		delete(st.staged, s.Segment)
		return nil, false
	}
	staged.Part, staged.Entries = s.Part, append(staged.Entries, s.Entries...)
	if s.More {
		return nil, true
	}
	delete(st.staged, s.Segment)
	return staged, true
}

// unstage drops the pieces staged for segment seg.
func (st *snapshotStage) unstage(seg int) {
	st.stageMu.Lock()
	delete(st.staged, seg)
	st.stageMu.Unlock()
}

// installSnapshot replaces a segment with the owner's snapshot, on disk too.
func (r *replication) installSnapshot(s *segmentSnapshot) {
	r.replaceSegment(s.Segment, s.Revision, s.Epoch, s.Entries)
	r.stats.snapshotsApplied.Add(1)
}

// replaceSegment replaces a segment's content in memory and, with a data dir, on disk, where the
// snapshot drops whatever the log held: the copy replaced may follow another history, at a higher
// revision, and none of it may come back at restart.
func (r *replication) replaceSegment(seg int, revision, epoch uint64, snap []durability.Entry) {
	r.replaced[seg].begun.Add(1)
	defer r.replaced[seg].done.Add(1)
	r.log.Debug("segment replaced", "segment", seg, "revision", revision, "epoch", epoch, "entries", len(snap))
	r.installSnapshotEntries(seg, revision, epoch, snap, r.disk != nil)
}

// restartOpLog empties segment seg's op log, to resume after revision: the one a snapshot was restored at,
// or a replay reached. The log is reset first, since what it held may follow another history, even up to
// a higher revision.
func (r *replication) restartOpLog(seg int, revision uint64) {
	if err := errors.Join(r.oplog.ResetSegment(uint32(seg)), r.oplog.TruncateBefore(uint32(seg), revision+1)); err != nil {
		r.log.Error("restart the op log", "segment", seg, "revision", revision, "err", err)
	}
}

// installSnapshotEntries replaces a segment's content in memory, restarts its op log after revision and,
// when persist is set, queues the snapshot for the disk log. All of it happens under the segment's lock,
// as a write does, so no write of the segment lands between them: an op written after the snapshot never
// reaches either log before it.
func (r *replication) installSnapshotEntries(seg int, revision, epoch uint64, snap []durability.Entry, persist bool) {
	r.store.restoreThen(seg, revision, snap, func() {
		r.unstage(seg) // pieces of an older snapshot never complete this copy
		r.lines[seg].Store(epoch)
		r.restartOpLog(seg, revision)
		r.raiseFence(r.layout.SegmentPartition(seg), epoch)
		if persist {
			r.disk.enqueue(diskItem{replace: true, snap: &durability.Snapshot{
				Segment: uint32(seg), Revision: revision, Epoch: epoch, Entries: snap}})
		}
	})
}

// raiseFence records that epoch was seen for partition p.
func (r *replication) raiseFence(p int, epoch uint64) {
	for {
		cur := r.fence[p].Load()
		if epoch <= cur || r.fence[p].CompareAndSwap(cur, epoch) {
			return
		}
	}
}

// checkpointToDisk queues a snapshot of segment seg for the disk log. It is taken and queued under the
// segment's lock, so it lands after every op it covers and before every later one, and no replacement of
// the segment comes between.
func (r *replication) checkpointToDisk(seg int) {
	r.store.snapshotThen(seg, func(revision uint64, entries []durability.Entry) {
		r.disk.enqueue(diskItem{snap: &durability.Snapshot{
			Segment: uint32(seg), Revision: revision, Epoch: r.lines[seg].Load(), Entries: entries}})
	})
}

// takeSnapshot copies a segment, as this node's copy under epoch.
func (r *replication) takeSnapshot(segment int, epoch uint64) *segmentSnapshot {
	rev, entries := r.store.snapshot(segment)
	return &segmentSnapshot{Segment: segment, Revision: rev, Epoch: epoch, Entries: entries}
}

// snapshotStats returns replication counters.
func (r *replication) snapshotStats() ReplicationStats {
	s := &r.stats
	return ReplicationStats{
		OpsSent: s.opsSent.Load(), BytesSent: s.bytesSent.Load(), SnapshotsSent: s.snapshotsSent.Load(),
		OpsApplied: s.opsApplied.Load(), SnapshotsApplied: s.snapshotsApplied.Load(), Gaps: s.gaps.Load(),
		RejectedStaleEpoch: s.rejected.Load(), InSyncDecisions: s.inSyncDecisions.Load(),
		RecoveredOps: s.recoveredOps.Load(), Recoveries: s.recoveries.Load(), PulledSegments: s.pulledSegments.Load(),
		PulledPieces: s.pulledPieces.Load(), Resyncs: s.resyncs.Load(), OpsFromDisk: s.opsFromDisk.Load(),
		MoveBytesSent: s.moveBytes.Load(),
	}
}

// lagOpsLimit bounds the ops lag reads from the op log to size one segment's backlog.
const lagOpsLimit = 4096

// ackedIn returns what replica is known to hold of each segment of partition p, in order: the revision it
// acknowledged, with known false where it acknowledged none (or this node has no link to it).
func (r *replication) ackedIn(p int, replica NodeID) (acked []uint64, known []bool) {
	first, end := r.layout.PartitionSegments(p)
	acked, known = make([]uint64, end-first), make([]bool, end-first)
	r.mu.Lock()
	l := r.links[replica]
	r.mu.Unlock()
	if l == nil {
		return acked, known
	}
	l.lock()
	defer l.unlock()
	for s := first; s < end; s++ {
		acked[s-first], known[s-first] = l.acked[s]
	}
	return acked, known
}

// lag returns how far replica is behind this owner on partition p: revisions and op bytes not yet
// acknowledged, over the partition's segments. known is false while a written segment has no
// acknowledgement to count from (no link yet, or one just reset by a failure). Bytes count the backlog the
// op log still holds, up to lagOpsLimit ops a segment.
func (r *replication) lag(p int, replica NodeID) (revisions uint64, bytes int64, known bool) {
	acked, seen := r.ackedIn(p, replica)
	first, _ := r.layout.PartitionSegments(p)
	for i, a := range acked {
		s := first + i
		have := r.store.revision(s)
		switch {
		case !seen[i] && have > 0:
			return 0, 0, false
		case have <= a:
			continue
		}
		revisions += have - a
		ops, _ := r.oplog.Ops(uint32(s), a, lagOpsLimit)
		for j := range ops {
			bytes += int64(opBytes(&ops[j]))
		}
	}
	return revisions, bytes, true
}

// oplogBytes is what the op log in memory holds over every segment.
func (r *replication) oplogBytes() int64 {
	var total int64
	for s := range r.layout.Segments {
		n, _ := r.oplog.LogBytes(uint32(s))
		total += n
	}
	return total
}
