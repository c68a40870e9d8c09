package zaris

import (
	"errors"
	"time"

	"github.com/zaris-go/zaris/durability"
)

// The op log in memory holds each segment's recent ops: what the replicas of a partition this node owns
// have not acknowledged yet, which the links send and a lagging replica catches up from, what recent
// watch and near-cache polls may read next (readmarks.go), and a short tail for readers arriving from
// elsewhere. Every write adds its op; the bounds (OpLogRetain, OpLogRetainBytes) drop the oldest at once,
// and a sweep drops what no reader needs.

const (
	// opLogTail is how many of a segment's newest ops the log keeps once every replica has them: for a
	// watcher or near cache that re-attaches after a failover or a move, and for replicas whose position
	// a newly promoted owner has yet to learn.
	opLogTail = 64
	// opLogTrimInterval is how often the sweep drops the ops no reader needs.
	opLogTrimInterval = 250 * time.Millisecond
)

// newOpLog returns the op log in memory: it keeps up to retain ops per segment and retainBytes in all,
// shared equally by the segments, each segment keeping at least its newest op. It shares the values of the
// ops recorded, which the store never modifies.
func newOpLog(segments, retain int, retainBytes int64) *durability.Memory {
	return durability.NewMemoryWith(durability.MemoryOptions{
		RetainOps:   retain,
		RetainBytes: max(1, retainBytes/int64(segments)),
		ShareValues: true,
	})
}

// opLogKeepFrom returns the oldest revision a segment's op log must keep, given its newest revision last
// and the revision each reader has (each replica's acknowledgement, the oldest a poll asked after): the
// first op one of them lacks, or the start of the newest opLogTail ops if that is older.
func opLogKeepFrom(last uint64, acked []uint64) uint64 {
	keep := uint64(1)
	if last > opLogTail {
		keep = last - opLogTail + 1
	}
	for _, a := range acked {
		keep = min(keep, a+1)
	}
	return keep
}

// trimOpLog drops from the op log the ops that every replica of their segment has acknowledged and that
// no recent watch or near-cache poll asked for (read: per segment, the oldest revision asked after, as
// readMarks.oldest gives), keeping each segment's newest opLogTail. A segment one of whose replicas has no
// known position keeps what the bounds allow.
func (r *replication) trimOpLog(read map[int]uint64) {
	m := r.clusterMap()
	var acked []uint64
	for p := range r.layout.Partitions {
		var links []*replicaLink
		looked, complete := false, true
		first, end := r.layout.PartitionSegments(p)
		for s := first; s < end; s++ {
			if !r.trimDue[s].Swap(false) {
				continue
			}
			if !looked && r.ownsIn(m, p) {
				links, complete = r.replicaLinks(m, p)
			}
			looked = true
			var known, atTail bool
			if complete {
				acked, known = ackedBy(links, s, acked[:0])
			}
			if known {
				if after, polled := read[s]; polled {
					acked = append(acked, after)
				}
				atTail = r.trimSegment(s, acked)
			}
			if !atTail {
				r.trimDue[s].Store(true) // a reader still lacks ops: look again next time
			}
		}
	}
}

// replicaLinks returns the links to partition p's replicas in m; complete is false when one has none yet.
func (r *replication) replicaLinks(m *ClusterMap, p int) (links []*replicaLink, complete bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range m.Assignment[p] {
		if id == r.id {
			continue
		}
		l := r.links[id]
		if l == nil {
			return nil, false
		}
		links = append(links, l)
	}
	return links, true
}

// ackedBy appends to dst the revision of segment s that each link's replica acknowledged; known is false
// when one of them has none.
func ackedBy(links []*replicaLink, s int, dst []uint64) (acked []uint64, known bool) {
	for _, l := range links {
		l.lock()
		a, ok := l.acked[s]
		l.unlock()
		if !ok {
			return dst, false
		}
		dst = append(dst, a)
	}
	return dst, true
}

// trimSegment drops the ops of segment s that opLogKeepFrom lets go, and reports whether the log is then
// down to its tail.
func (r *replication) trimSegment(s int, acked []uint64) (atTail bool) {
	first, last, err := r.oplog.Bounds(uint32(s))
	if err != nil || last == 0 {
		return err == nil
	}
	keep := opLogKeepFrom(last, acked)
	if keep > first {
		if err := r.oplog.TruncateBefore(uint32(s), keep); err != nil {
			r.log.Debug("trim the op log", "segment", s, "before", keep, "err", err)
			return false
		}
	}
	return keep+opLogTail > last
}

// recordWrite is the store's write hook: it turns the write into an op in the log and, on the owner,
// tells the links of the partition's replicas that the segment has news.
func (r *replication) recordWrite(segment int, revision, epoch uint64, key string, next *entry, change writeChange) {
	p := r.layout.SegmentPartition(segment)
	m := r.clusterMap()
	owned := epoch == 0
	if owned {
		epoch = m.Runtime[p].Epoch
	}
	r.lines[segment].Store(epoch)
	r.trimDue[segment].Store(true)
	ops := [1]durability.Op{opOfWrite(segment, revision, key, next, change)}
	op := &ops[0]
	op.Epoch, op.Time = epoch, change.at
	if err := r.oplog.Append(ops[:]); err != nil {
		r.relogOps(ops[:], err)
	}
	if r.disk != nil {
		r.disk.enqueue(diskItem{op: *op})
	}
	if !owned {
		return
	}
	for _, id := range m.Assignment[p] {
		if id != r.id {
			r.link(id).markDirty(segment)
		}
	}
}

// relogOps adds ops, consecutive ones of one segment, to the op log, which refused them with err. Ops
// that do not follow the segment's last, as after a restore, restart the segment's log at the first of
// them. It is apart from recordWrite, which calls it, so that the write path's stack stays small.
func (r *replication) relogOps(ops []durability.Op, err error) {
	if errors.Is(err, durability.ErrOutOfOrder) {
		r.restartOpLog(int(ops[0].Segment), ops[0].Revision-1)
		err = r.oplog.Append(ops)
	}
	if err != nil {
		r.log.Error("record ops in the op log", "segment", ops[0].Segment, "revision", ops[0].Revision, "err", err)
	}
}
