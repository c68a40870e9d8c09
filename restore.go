package zaris

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
)

// A restore checks a whole backup first, then sends each segment to its owner in the restoring cluster,
// which installs it at the backup's revision and has its replicas copy it before it answers. Transactions
// are settled on the way: the intents of one decided committed in the backup become its writes, all others
// are dropped, and no intent or record is restored.

// RestoreOption changes what Restore does.
type RestoreOption func(*restoreOptions)

type restoreOptions struct {
	replace bool
}

// RestoreReplacing lets Restore write into a cluster that holds keys: each segment of the backup replaces
// the cluster's.
func RestoreReplacing() RestoreOption { return func(o *restoreOptions) { o.replace = true } }

// RestoreReport describes a restore.
type RestoreReport struct {
	Dir      string
	Keys     int64 // keys restored
	Segments int
	// Committed counts the transactions found decided committed but not yet applied everywhere, whose
	// writes the restore applied; Dropped those undecided or aborted, whose intents it dropped.
	Committed, Dropped int
	Took               time.Duration
}

// Restore copies the backup in src into the cluster, which must have the backup's layout (partitions and
// segments) and may have any number of nodes. It reads every file of the backup and checks its checksum
// before it sends anything, and fails with ErrBadBackup, naming the file, for a backup that is damaged,
// incomplete or of an unknown format. Into a cluster that holds keys it writes nothing and fails with
// ErrNotEmpty, unless RestoreReplacing is given. Keys keep their versions and absolute expiry; a key whose
// expiry passed since the backup is gone. Writes made while Restore runs to a segment it has not reached
// yet are replaced.
func (n *Node) Restore(ctx context.Context, src string, opts ...RestoreOption) (RestoreReport, error) {
	var o restoreOptions
	for _, opt := range opts {
		opt(&o)
	}
	return newBackupTool(n.client, n.ctl.fsm).restore(ctx, src, o)
}

// restore restores the backup in src.
func (b *backupTool) restore(ctx context.Context, src string, o restoreOptions) (RestoreReport, error) {
	start := b.clock.Now()
	if err := b.checkCluster(b.view.clusterMap()); err != nil {
		return RestoreReport{}, err
	}
	bk, err := durability.OpenBackup(src)
	if err != nil {
		return RestoreReport{}, err
	}
	man := bk.Manifest()
	if len(man.Segments) != b.layout.Segments || man.Partitions != b.layout.Partitions {
		return RestoreReport{}, fmt.Errorf("%w: the backup in %s has %d segments over %d partitions, the cluster %d over %d",
			ErrClusterMismatch, src, len(man.Segments), man.Partitions, b.layout.Segments, b.layout.Partitions)
	}
	outcomes, err := readOutcomes(bk, b.pieceBytes())
	if err != nil {
		return RestoreReport{}, err
	}
	if !o.replace {
		if err := b.checkEmpty(ctx); err != nil {
			return RestoreReport{}, err
		}
	}
	rep := RestoreReport{Dir: src, Segments: len(man.Segments)}
	settled := make([]settledSegment, len(man.Segments))
	err = forEach(ctx, len(man.Segments), func(ctx context.Context, seg int) error {
		snap, err := readSegment(bk, seg)
		if err != nil {
			return err
		}
		settled[seg] = settleTransactions(snap, outcomes, man.TakenAt)
		if err := b.sendSegment(ctx, snap, o.replace); err != nil {
			return fmt.Errorf("segment %d: %w", seg, err)
		}
		return nil
	})
	if err != nil {
		return RestoreReport{}, fmt.Errorf("zaris: restore from %s: %w", src, err)
	}
	committed, dropped := map[string]bool{}, map[string]bool{}
	for _, s := range settled {
		rep.Keys += int64(s.keys)
		for _, txn := range s.committed {
			committed[txn] = true
		}
		for _, txn := range s.dropped {
			dropped[txn] = true
		}
	}
	rep.Committed, rep.Dropped, rep.Took = len(committed), len(dropped), b.clock.Now().Sub(start)
	b.log.Info("backup restored", "dir", src, "keys", rep.Keys, "committed", rep.Committed, "dropped", rep.Dropped, "took", rep.Took)
	return rep, nil
}

// readOutcomes reads the whole backup, which checks every file, and returns the outcome recorded for each
// transaction: true for a commit. It refuses a segment at a revision past what versions hold, an entry
// whose version is past its segment's revision, and one larger than maxEntry, which no owner would take.
func readOutcomes(bk *durability.Backup, maxEntry int) (map[string]bool, error) {
	outcomes := map[string]bool{}
	for seg := range bk.Manifest().Segments {
		err := bk.ReadSegment(uint32(seg), func(p *durability.Snapshot) error {
			if p.Revision >= 1<<versionBits {
				return fmt.Errorf("%w: segment %d at revision %d, past what versions hold", ErrBadBackup, seg, p.Revision)
			}
			for _, e := range p.Entries {
				switch {
				case e.Version > p.Revision:
					return fmt.Errorf("%w: segment %d at revision %d holds %q at version %d", ErrBadBackup, seg, p.Revision, e.Key, e.Version)
				case entryBytes(&e) > maxEntry:
					return fmt.Errorf("%w: %q in segment %d takes %d bytes, more than a request to this cluster carries (%d)",
						ErrValueTooLarge, e.Key, seg, entryBytes(&e), maxEntry)
				}
				if txn, ok := strings.CutPrefix(e.Key, recordPrefix); ok && len(e.Value) == 1 {
					outcomes[txn] = e.Value[0] == recordCommitted
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return outcomes, nil
}

// readSegment reads segment seg of the backup whole.
func readSegment(bk *durability.Backup, seg int) (*segmentSnapshot, error) {
	snap := &segmentSnapshot{Segment: seg, Revision: bk.Manifest().Segments[seg].Revision}
	err := bk.ReadSegment(uint32(seg), func(p *durability.Snapshot) error {
		snap.Entries = append(snap.Entries, p.Entries...)
		return nil
	})
	return snap, err
}

// settledSegment is what settleTransactions did to a segment.
type settledSegment struct {
	keys               int
	committed, dropped []string // transactions, by id
}

// settleTransactions applies to snap the intents of the transactions outcomes records as committed, drops
// the others, and drops every intent and record. An intent's TTL counts from takenAt.
func settleTransactions(snap *segmentSnapshot, outcomes map[string]bool, takenAt time.Time) settledSegment {
	var out settledSegment
	writes := map[string]*durability.Entry{} // key -> its committed write, nil for a delete
	for i := range snap.Entries {
		e := &snap.Entries[i]
		key, ok := strings.CutPrefix(e.Key, intentPrefix)
		if !ok {
			continue
		}
		in, err := decodeIntent(e.Value)
		if err != nil {
			continue // dropped with the other internal keys
		}
		if !outcomes[in.txn] {
			out.dropped = append(out.dropped, in.txn)
			continue
		}
		out.committed = append(out.committed, in.txn)
		switch in.action {
		case intentPut:
			w := &durability.Entry{Key: key, Value: in.value, Version: e.Version}
			if in.ttl > 0 {
				w.ExpireAt = takenAt.Add(time.Duration(in.ttl)).UnixNano()
			}
			writes[key] = w
		case intentDelete:
			writes[key] = nil
		}
	}
	kept := snap.Entries[:0]
	for _, e := range snap.Entries {
		if _, written := writes[e.Key]; !written && !isInternalKey(e.Key) {
			kept = append(kept, e)
		}
	}
	for _, w := range writes {
		if w != nil {
			kept = append(kept, *w)
		}
	}
	snap.Entries = kept
	for i := range kept {
		if i == 0 || kept[i].Key != kept[i-1].Key {
			out.keys++
		}
	}
	return out
}

// checkEmpty fails with ErrNotEmpty when any segment of the cluster holds a key.
func (b *backupTool) checkEmpty(ctx context.Context) error {
	var keys, segments int
	for seg := range b.layout.Segments {
		reply, err := b.sendPiece(ctx, &restoreRequest{Probe: true, Piece: segmentSnapshot{Segment: seg}})
		if err != nil {
			return fmt.Errorf("segment %d: %w", seg, err)
		}
		if reply.Keys > 0 {
			keys, segments = keys+reply.Keys, segments+1
		}
	}
	if keys > 0 {
		return fmt.Errorf("%w: %d keys in %d segments; restore with replacing to overwrite them", ErrNotEmpty, keys, segments)
	}
	return nil
}

// sendSegment sends snap to its segment's owner a piece at a time, starting over when the owner changes.
func (b *backupTool) sendSegment(ctx context.Context, snap *segmentSnapshot, replace bool) error {
	budget := b.pieceBytes()
	for attempt := 0; ; attempt++ {
		out := outgoingSnapshot{snap: snap}
		var err error
		for {
			piece, _ := out.nextPiece(budget)
			if _, err = b.sendPiece(ctx, &restoreRequest{Replace: replace, Piece: piece}); err != nil {
				break
			}
			if !piece.More {
				return nil
			}
			out.took(&piece)
		}
		if !errors.Is(err, errOwnerMoved) || attempt >= 10 {
			return err
		}
	}
}

// pieceBytes bounds the entries of one piece a restore sends.
func (b *backupTool) pieceBytes() int { return min(replicateMaxBytes, b.maxFrame/2) }

// errOwnerMoved: a segment's owner changed while a restore sent it.
var errOwnerMoved = errors.New("zaris: the segment's owner changed")

// sendPiece sends req to the owner of its segment under the current map, waiting for a map that names one.
func (b *backupTool) sendPiece(ctx context.Context, req *restoreRequest) (restoreReply, error) {
	seg := req.Piece.Segment
	for {
		m := b.view.clusterMap()
		owner := m.Runtime[b.layout.SegmentPartition(seg)].Owner
		var reply restoreReply
		resp, err := b.peers.callNode(ctx, owner, kv.OpRestore, req.marshal())
		if err == nil {
			err = reply.decode(resp)
		}
		switch {
		case err != nil:
			return reply, fmt.Errorf("node %s: %w", owner, err)
		case reply.Status == StatusSuccess:
			return reply, nil
		case reply.Status == StatusInvalidRequest && reply.Keys > 0:
			return reply, fmt.Errorf("%w: segment %d gained %d keys during the restore", ErrNotEmpty, seg, reply.Keys)
		case !reply.Status.RequiresRefresh() && reply.Status != StatusNotReady:
			return reply, fmt.Errorf("node %s: %s", owner, reply.Status)
		case req.Piece.Part > 0:
			return reply, errOwnerMoved
		}
		if err := b.awaitNewerMap(ctx); err != nil {
			return reply, err
		}
	}
}

// awaitNewerMap waits for the next map, or for a short while, as an owner that was not ready may become
// so under the same map.
func (b *backupTool) awaitNewerMap(ctx context.Context) error {
	t := b.clock.NewTimer(restoreRetryPause)
	defer t.Stop()
	select {
	case <-b.view.next():
	case <-t.C():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// restoreRetryPause is the longest a restore waits before it sends again to a segment's owner that was
// not ready.
const restoreRetryPause = 50 * time.Millisecond

// String describes the restore in one line.
func (r RestoreReport) String() string {
	return fmt.Sprintf("restored %s: %d keys, %d segments, %d transactions committed and %d dropped, in %v",
		r.Dir, r.Keys, r.Segments, r.Committed, r.Dropped, r.Took.Round(time.Millisecond))
}
