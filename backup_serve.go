package zaris

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tinylib/msgp/msgp"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// The owner's side of backups and restores. While a backup is taken, every owner holds the steps of
// transactions over several segments: prepares, decisions, resolutions and forgets (single-key writes and
// transactions of one segment go on). So no transaction is decided, applied or forgotten between the
// moments two segments are copied: each is in the backup either decided, with its intents and record, or
// undecided, and a restore applies exactly the intents of those decided committed.

// backupStep is what an OpBackup request asks of an owner.
type backupStep uint8

const (
	backupHoldStep    backupStep = 1 // hold transactions' decisions for the backup, for Lease
	backupReleaseStep backupStep = 2 // release them
	backupReadStep    backupStep = 3 // read piece Part of segment Segment's copy
)

// backupRequest is an OpBackup request.
type backupRequest struct {
	Step    backupStep
	ID      string // the backup's id
	Lease   time.Duration
	Segment int
	Part    int
}

const backupRequestFields = 5

func (r *backupRequest) marshal() []byte {
	b := msgp.AppendArrayHeader(nil, backupRequestFields)
	b = msgp.AppendUint8(b, uint8(r.Step))
	b = msgp.AppendString(b, r.ID)
	b = msgp.AppendInt64(b, int64(r.Lease))
	b = msgp.AppendInt(b, r.Segment)
	return msgp.AppendInt(b, r.Part)
}

func (r *backupRequest) decode(b []byte) error {
	w := wireReader{b: b}
	fields := w.fields(backupRequestFields)
	*r = backupRequest{Step: backupStep(w.uint8()), ID: w.string(), Lease: time.Duration(w.int64()), Segment: w.int(), Part: w.int()}
	w.skip(fields - backupRequestFields)
	return w.done("backup request")
}

// restoreRequest is an OpRestore request: a piece of a segment to install, or with Probe set, a question
// whether the segment holds keys.
type restoreRequest struct {
	Probe   bool
	Replace bool // install even where the segment holds keys
	Piece   segmentSnapshot
}

const restoreRequestFields = 3

func (r *restoreRequest) marshal() []byte {
	b := msgp.AppendArrayHeader(nil, restoreRequestFields)
	b = msgp.AppendBool(b, r.Probe)
	b = msgp.AppendBool(b, r.Replace)
	return appendSnapshots(b, []segmentSnapshot{r.Piece})
}

func (r *restoreRequest) decode(b []byte) error {
	w := wireReader{b: b}
	fields := w.fields(restoreRequestFields)
	r.Probe, r.Replace = w.bool(), w.bool()
	pieces := w.snapshots()
	w.skip(fields - restoreRequestFields)
	if err := w.done("restore request"); err != nil {
		return err
	}
	if len(pieces) != 1 {
		return fmt.Errorf("%w: restore request with %d pieces", ErrInvalidRequest, len(pieces))
	}
	r.Piece = pieces[0]
	return nil
}

// restoreReply answers an OpRestore request: Keys is what the segment holds, outside transactions' state.
type restoreReply struct {
	Status Status
	Keys   int
}

func (r *restoreReply) marshal() []byte {
	b := msgp.AppendArrayHeader(nil, 2)
	b = msgp.AppendUint8(b, uint8(r.Status))
	return msgp.AppendInt(b, r.Keys)
}

func (r *restoreReply) decode(b []byte) error {
	w := wireReader{b: b}
	fields := w.fields(2)
	*r = restoreReply{Status: Status(w.uint8()), Keys: w.int()}
	w.skip(fields - 2)
	return w.done("restore reply")
}

// backupHold holds back the steps of transactions over several segments (prepares, decisions,
// resolutions, forgets) while a backup is taken. It lasts the lease its coordinator gives and renews, so a
// coordinator that dies holds nothing for long. A hold begins only once the steps already admitted have
// finished, so none lands between the copies of two segments.
type backupHold struct {
	clock Clock
	mu    sync.Mutex
	id    string        // the backup holding, "" for none
	freed chan struct{} // closed when the hold ends
	timer Timer
	// inflight counts the steps admitted and not yet finished; drained is closed when it falls to zero
	// while a hold waits for that, nil otherwise.
	inflight int
	drained  chan struct{}
	// waiting counts the steps waiting for the hold to end.
	waiting atomic.Int64
}

// heldWait bounds how long a step waits for a hold to end before it is answered StatusLocked, which its
// sender retries as it does a key held by a transaction: a step never keeps its request slot for a whole
// backup.
const heldWait = 250 * time.Millisecond

func newBackupHold(clock Clock) *backupHold {
	freed := make(chan struct{})
	close(freed)
	return &backupHold{clock: clock, freed: freed}
}

// errBackupRunning refuses a hold while another backup holds.
var errBackupRunning = errors.New("zaris: another backup is running")

// hold starts or renews the hold of backup id for lease, and reports whether it renewed one: a hold that
// lapsed in between starts again, and the backup learns that it did not hold throughout. A new hold
// answers once the steps admitted before it have finished, or fails after lease.
func (h *backupHold) hold(id string, lease time.Duration) (renewed bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch h.id {
	case id:
		h.timer.Reset(lease)
		return true, nil
	case "":
	default:
		return false, fmt.Errorf("%w (%s)", errBackupRunning, h.id)
	}
	h.id, h.freed = id, make(chan struct{})
	h.timer = h.clock.AfterFunc(lease, func() { h.release(id) })
	if h.inflight == 0 {
		return false, nil
	}
	if h.drained == nil {
		h.drained = make(chan struct{})
	}
	drained, giveUp := h.drained, h.clock.NewTimer(lease)
	defer giveUp.Stop()
	h.mu.Unlock()
	select {
	case <-drained:
	case <-giveUp.C():
		err = fmt.Errorf("zaris: transactions' steps in progress did not finish within %v", lease)
	}
	h.mu.Lock()
	if err != nil && h.id == id {
		h.releaseLocked()
	}
	return false, err
}

// release ends the hold of backup id, if it holds.
func (h *backupHold) release(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.id == id {
		h.releaseLocked()
	}
}

func (h *backupHold) releaseLocked() {
	h.timer.Stop()
	h.id = ""
	close(h.freed)
}

// holding reports whether backup id holds.
func (h *backupHold) holding(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return id != "" && h.id == id
}

// enter admits a step once no backup holds, waiting up to heldWait, and reports whether it did; an
// admitted step calls leave when it has finished.
func (h *backupHold) enter(ctx context.Context) bool {
	var giveUp Timer
	for {
		h.mu.Lock()
		if h.id == "" {
			h.inflight++
			h.mu.Unlock()
			if giveUp != nil {
				giveUp.Stop()
			}
			return true
		}
		freed := h.freed
		h.mu.Unlock()
		if giveUp == nil {
			giveUp = h.clock.NewTimer(heldWait)
			defer giveUp.Stop()
		}
		h.waiting.Add(1)
		select {
		case <-freed:
			h.waiting.Add(-1)
		case <-giveUp.C():
			h.waiting.Add(-1)
			return false
		case <-ctx.Done():
			h.waiting.Add(-1)
			return false
		}
	}
}

// leave ends a step enter admitted.
func (h *backupHold) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inflight--
	if h.inflight == 0 && h.drained != nil {
		close(h.drained)
		h.drained = nil
	}
}

// heldBack reports whether a backup holds back op with req: a step of a transaction over several
// segments, whose requests name the transaction (a transaction of one segment sends none).
func heldBack(op transport.Op, req *kv.Request) bool {
	switch op {
	case kv.OpDecide, kv.OpForget:
		return true
	case kv.OpTxn:
		return len(req.Value) > 0
	}
	return false
}

// serveBackup answers an OpBackup request.
func (o *owner) serveBackup(payload []byte) ([]byte, error) {
	var req backupRequest
	if err := req.decode(payload); err != nil {
		return nil, err
	}
	switch req.Step {
	case backupHoldStep:
		if req.ID == "" || req.Lease <= 0 || req.Lease > maxBackupLease {
			return nil, fmt.Errorf("%w: backup hold %q for %v", ErrInvalidRequest, req.ID, req.Lease)
		}
		renewed, err := o.backups.hold(req.ID, req.Lease)
		if renewed {
			return []byte{1}, err
		}
		return []byte{0}, err
	case backupReleaseStep:
		o.backups.release(req.ID)
		o.backupReads.releaseAll(NodeID(req.ID))
		return nil, nil
	case backupReadStep:
		piece, status, err := o.backupPiece(&req)
		if err != nil {
			return nil, err
		}
		b := msgp.AppendArrayHeader(nil, 2)
		b = msgp.AppendUint8(b, uint8(status))
		return appendSnapshots(b, []segmentSnapshot{piece}), nil
	}
	return nil, fmt.Errorf("%w: backup step %d", ErrInvalidRequest, req.Step)
}

// backupPiece cuts the piece req asks for of a segment this node actively owns, from one snapshot taken for
// the backup. Its Epoch is the partition's, so the coordinator can tell a copy of another owner. A node that
// does not serve the partition answers the refusal's status and no entries.
func (o *owner) backupPiece(req *backupRequest) (segmentSnapshot, Status, error) {
	seg := req.Segment
	if seg < 0 || seg >= o.layout.Segments || req.Part < 0 {
		return segmentSnapshot{}, 0, fmt.Errorf("%w: segment %d, part %d", ErrInvalidRequest, seg, req.Part)
	}
	if !o.backups.holding(req.ID) {
		return segmentSnapshot{}, 0, fmt.Errorf("zaris: backup %s holds nothing on node %s", req.ID, o.id)
	}
	p := o.layout.SegmentPartition(seg)
	if refusal, owned := o.partitionRefusal(p); !owned {
		return segmentSnapshot{Segment: seg, Part: req.Part}, refusal.Status, nil
	}
	epoch := o.view.clusterMap().Runtime[p].Epoch
	key := pullKey{from: NodeID(req.ID), partition: seg}
	return o.backupReads.piece(key, pullRequest{Segment: seg, Part: req.Part}, o.repl.maxRequestBytes(), func() *segmentSnapshot {
		return o.repl.takeSnapshot(seg, epoch)
	}), StatusSuccess, nil
}

// serveRestore answers an OpRestore request for a segment this node actively owns: a probe with what the
// segment holds, a piece by staging it, and the last piece by installing the whole segment, which its
// replicas then copy, and answering once they have.
func (o *owner) serveRestore(ctx context.Context, payload []byte) []byte {
	var req restoreRequest
	if err := req.decode(payload); err != nil || req.Piece.Segment < 0 || req.Piece.Segment >= o.layout.Segments {
		return (&restoreReply{Status: StatusInvalidRequest}).marshal()
	}
	seg := req.Piece.Segment
	if refusal, owned := o.checkPartition(o.layout.SegmentPartition(seg)); !owned {
		return (&restoreReply{Status: refusal.Status}).marshal()
	}
	keys := o.store.segmentKeys(seg)
	if req.Probe || keys > 0 && !req.Replace {
		status := StatusSuccess
		if !req.Probe {
			status = StatusInvalidRequest
		}
		return (&restoreReply{Status: status, Keys: keys}).marshal()
	}
	whole, ok := o.restores.stage(&req.Piece)
	switch {
	case !ok:
		return (&restoreReply{Status: StatusInvalidRequest}).marshal()
	case whole == nil:
		return (&restoreReply{Status: StatusSuccess}).marshal()
	}
	p := o.layout.SegmentPartition(seg)
	if !o.cut.enter(p) {
		return (&restoreReply{Status: StatusOwnershipChanging}).marshal()
	}
	revision := o.repl.installOwned(seg, whole.Revision, whole.Entries)
	o.cut.leave(p)
	return (&restoreReply{Status: o.repl.awaitReplicas(ctx, seg, revision, true), Keys: o.store.segmentKeys(seg)}).marshal()
}

// maxBackupLease bounds the lease of a backup's hold.
const maxBackupLease = time.Minute

// installOwned replaces the copy of segment seg, which this node owns, with entries at revision. A segment
// that has seen writes is replaced past its revision instead, every entry taking that revision as its
// version, so that no version the segment gave before comes back with another value. Its replicas get the
// whole segment. It returns the revision.
func (r *replication) installOwned(seg int, revision uint64, entries []durability.Entry) uint64 {
	p := r.layout.SegmentPartition(seg)
	m := r.clusterMap()
	epoch := m.Runtime[p].Epoch
	if cur := r.store.revision(seg); cur > 0 {
		revision = max(revision, cur) + 1
		for i := range entries {
			entries[i].Version = revision
		}
	}
	r.installSnapshotEntries(seg, revision, epoch, entries, r.disk != nil)
	for _, id := range m.Assignment[p] {
		if id != r.id {
			r.link(id).resend(seg, epoch)
		}
	}
	return revision
}
