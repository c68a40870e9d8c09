package zaris

import (
	"errors"
	"sync"

	"github.com/zaris-go/zaris/durability"
)

// opLog keeps the recent ops of every segment in memory, in revision order, so replicas that fall behind
// can catch up by replay. It is bounded per segment, in ops and in bytes, each segment keeping at least its
// newest op. A replica behind the bound is fed from the durable log, or gets a segment snapshot.
type opLog struct {
	retain      int // ops kept per segment
	retainBytes int // bytes kept per segment
	segments    []segmentLog
}

type segmentLog struct {
	mu    sync.Mutex
	base  uint64          // the revision ops follow: they hold base+1 onwards, and nothing older
	ops   []durability.Op // ascending, contiguous revisions
	bytes int             // opBytes of ops
}

// newOpLog returns a log for segments that keeps up to retain ops per segment and retainBytes in all,
// shared equally by the segments.
func newOpLog(segments, retain int, retainBytes int64) *opLog {
	perSegment := int(max(1, retainBytes/int64(segments)))
	return &opLog{retain: retain, retainBytes: perSegment, segments: make([]segmentLog, segments)}
}

// opBytes is what an op counts against the log's bound.
func opBytes(op *durability.Op) int { return len(op.Key) + len(op.Value) + 48 }

// errBehindLog says the requested revision is older than the log retains.
var errBehindLog = errors.New("zaris: revision no longer in the op log")

// append adds op, which must follow the segment's last op. The oldest ops beyond the bound are dropped.
func (l *opLog) append(op durability.Op) {
	sl := &l.segments[op.Segment]
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.base+uint64(len(sl.ops))+1 != op.Revision {
		sl.drop(len(sl.ops)) // a restore jumped the revision: the old tail no longer leads here
		sl.base, sl.bytes = op.Revision-1, 0
	}
	sl.ops = append(sl.ops, op)
	sl.bytes += opBytes(&op)
	n := 0
	for kept := len(sl.ops); kept > 1 && (kept > l.retain || sl.bytes > l.retainBytes); kept-- {
		sl.bytes -= opBytes(&sl.ops[n])
		n++
	}
	sl.drop(n)
}

// drop forgets the oldest n ops, releasing their values at once. Called with sl.mu held.
func (sl *segmentLog) drop(n int) {
	if n == 0 {
		return
	}
	clear(sl.ops[:n])
	sl.ops = sl.ops[n:]
	sl.base += uint64(n)
}

// after returns up to limit ops of segment with revisions after rev. It fails with errBehindLog when
// the log no longer reaches back to rev+1, even when it holds no op at all.
func (l *opLog) after(segment int, rev uint64, limit int) ([]durability.Op, error) {
	sl := &l.segments[segment]
	sl.mu.Lock()
	defer sl.mu.Unlock()
	last := sl.base + uint64(len(sl.ops))
	switch {
	case rev >= last:
		return nil, nil
	case rev < sl.base:
		return nil, errBehindLog
	}
	start := int(rev - sl.base)
	end := min(len(sl.ops), start+limit)
	return append([]durability.Op(nil), sl.ops[start:end]...), nil
}

// reset forgets the segment's ops: the log starts again after revision, the one a snapshot was restored at
// or a replay from disk reached.
func (l *opLog) reset(segment int, revision uint64) {
	sl := &l.segments[segment]
	sl.mu.Lock()
	sl.base, sl.ops, sl.bytes = revision, nil, 0
	sl.mu.Unlock()
}
