package durability

import (
	"errors"
	"fmt"
)

// logBounds is the revision range of one segment's log, shared by both stores so that they agree on
// every edge (see Store). The zero value is a segment never written.
type logBounds struct {
	first, last uint64
}

// empty reports whether the log retains no op.
func (b logBounds) empty() bool { return b.last == 0 || b.first > b.last }

// next is the revision the next appended op must carry.
func (b logBounds) next() uint64 { return b.last + 1 }

// readRange returns the revisions [from, to] that Ops(after) covers; ok is false when there are none.
func (b logBounds) readRange(after uint64) (from, to uint64, ok bool, err error) {
	if after >= b.last {
		return 0, 0, false, nil
	}
	if after+1 < b.first {
		return 0, 0, false, ErrTruncated
	}
	return after + 1, b.last, true, nil
}

// truncated returns the bounds after TruncateBefore(rev); changed is false when it is a no-op.
func (b logBounds) truncated(rev uint64) (nb logBounds, changed bool) {
	if rev <= max(b.first, 1) {
		return b, false
	}
	return logBounds{first: rev, last: max(b.last, rev-1)}, true
}

// appended returns the bounds after appending the op at rev, which must be b.next().
func (b logBounds) appended(rev uint64) logBounds {
	if b.first == 0 {
		b.first = rev
	}
	b.last = rev
	return b
}

// checkOp validates op as the next one of a segment whose log has bounds b.
func (b logBounds) checkOp(op *Op) error {
	if b.accepts(op) {
		return nil
	}
	return b.refusal(op)
}

// accepts reports whether op is valid as the next one of a segment whose log has bounds b.
func (b logBounds) accepts(op *Op) bool {
	return op.Revision == b.last+1 && (op.Kind.valid() && !op.Kind.deletes() || op.Kind.deletes() && len(op.Value) == 0)
}

// refusal says why accepts refuses op.
func (b logBounds) refusal(op *Op) error {
	if !op.Kind.valid() {
		return fmt.Errorf("%w: segment %d revision %d: unknown kind %d", ErrInvalidOp, op.Segment, op.Revision, op.Kind)
	}
	if op.Kind.deletes() && len(op.Value) > 0 {
		return fmt.Errorf("%w: segment %d revision %d: delete carries a value", ErrInvalidOp, op.Segment, op.Revision)
	}
	switch next := b.next(); {
	case op.Revision < next:
		return fmt.Errorf("%w: segment %d: revision %d is not above the last %d", ErrOutOfOrder, op.Segment, op.Revision, b.last)
	case op.Revision > next:
		return fmt.Errorf("%w: segment %d: revision %d leaves a gap after %d", ErrOutOfOrder, op.Segment, op.Revision, b.last)
	}
	return nil
}

// segmentBounds pairs a segment with bounds.
type segmentBounds struct {
	segment uint32
	logBounds
	refused error // why none of this segment's ops apply; nil when they all do
}

// appendPlan validates a whole Append before any of it is applied: it yields, for each touched
// segment, either the bounds it ends with or why its ops are refused.
type appendPlan struct {
	touched []segmentBounds
	index   map[uint32]int // into touched, built once more than a few segments are touched
}

// linearLimit is how many touched segments are searched linearly before appendPlan builds its index.
const linearLimit = 8

// planAppend checks ops in order against the bounds current reports. A segment is refused at its first
// bad op, and its later ops in the call are not looked at.
func planAppend(ops []Op, current func(segment uint32) logBounds) *appendPlan {
	p := &appendPlan{}
	for i := range ops {
		op := &ops[i]
		sb := p.lookup(op.Segment, current)
		if sb.refused != nil {
			continue
		}
		if err := sb.checkOp(op); err != nil {
			sb.refused = err
			continue
		}
		sb.logBounds = sb.appended(op.Revision)
	}
	return p
}

// accepts reports whether the ops of segment are to be applied.
func (p *appendPlan) accepts(segment uint32) bool {
	i := p.find(segment)
	return i >= 0 && p.touched[i].refused == nil
}

// err joins the reasons of every refused segment; nil when none is.
func (p *appendPlan) err() error {
	var errs []error
	for _, sb := range p.touched {
		if sb.refused != nil {
			errs = append(errs, sb.refused)
		}
	}
	return errors.Join(errs...)
}

// lookup returns the running bounds of segment, starting from current's answer.
func (p *appendPlan) lookup(segment uint32, current func(uint32) logBounds) *segmentBounds {
	if i := p.find(segment); i >= 0 {
		return &p.touched[i]
	}
	p.touched = append(p.touched, segmentBounds{segment: segment, logBounds: current(segment)})
	p.indexLast()
	return &p.touched[len(p.touched)-1]
}

// find returns the index of segment in touched, or -1.
func (p *appendPlan) find(segment uint32) int {
	if n := len(p.touched); n > 0 && p.touched[n-1].segment == segment {
		return n - 1
	}
	if p.index != nil {
		if i, ok := p.index[segment]; ok {
			return i
		}
		return -1
	}
	for i := range p.touched {
		if p.touched[i].segment == segment {
			return i
		}
	}
	return -1
}

// indexLast records the newest touched segment in the index, building it when the linear search gets long.
func (p *appendPlan) indexLast() {
	n := len(p.touched)
	switch {
	case p.index != nil:
		p.index[p.touched[n-1].segment] = n - 1
	case n > linearLimit:
		p.index = make(map[uint32]int, 2*n)
		for i, sb := range p.touched {
			p.index[sb.segment] = i
		}
	}
}
