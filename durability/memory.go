package durability

import (
	"slices"
	"sync"
)

// Memory is a Store that keeps everything in process memory: nothing survives the process. It serves
// tests and nodes that hold the map as a pure cache.
type Memory struct {
	mu     sync.RWMutex
	closed bool
	segs   map[uint32]*memSegment
}

// memSegment is one segment's log and snapshot.
type memSegment struct {
	logBounds
	ops      opQueue // ops.at(i).Revision == first+i
	bytes    int64
	snapshot *Snapshot
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{segs: make(map[uint32]*memSegment)}
}

// memOpSize is what one op counts towards LogBytes: the same order as its encoding, without encoding it.
func memOpSize(op *Op) int64 { return int64(opSizeHint(op)) }

// Append implements Store.
func (m *Memory) Append(ops []Op) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	plan := planAppend(ops, m.boundsLocked)
	for i := range ops {
		if !plan.accepts(ops[i].Segment) {
			continue
		}
		seg := m.segmentLocked(ops[i].Segment)
		op := ops[i]
		op.Value = cloneValue(op)
		seg.ops.push(op)
		seg.bytes += memOpSize(&op)
	}
	for _, sb := range plan.touched {
		if sb.refused == nil {
			m.segs[sb.segment].logBounds = sb.logBounds
		}
	}
	return plan.err()
}

// cloneValue copies a put's value so that the caller may reuse its buffer; a delete keeps none.
func cloneValue(op Op) []byte {
	if op.Kind != OpPut {
		return nil
	}
	return append(make([]byte, 0, len(op.Value)), op.Value...)
}

// Ops implements Store.
func (m *Memory) Ops(segment uint32, after uint64, limit int) ([]Op, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	seg := m.segs[segment]
	if seg == nil {
		return nil, nil
	}
	from, to, ok, err := seg.readRange(after)
	if !ok || err != nil {
		return nil, err
	}
	start := from - seg.first
	end := to - seg.first + 1
	if limit > 0 && uint64(limit) < end-start {
		end = start + uint64(limit)
	}
	return seg.ops.copyRange(int(start), int(end)), nil
}

// Bounds implements Store.
func (m *Memory) Bounds(segment uint32) (first, last uint64, err error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, 0, ErrClosed
	}
	b := m.boundsLocked(segment)
	return b.first, b.last, nil
}

// TruncateBefore implements Store.
func (m *Memory) TruncateBefore(segment uint32, rev uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	nb, changed := m.boundsLocked(segment).truncated(rev)
	if !changed {
		return nil
	}
	seg := m.segmentLocked(segment)
	drop := min(uint64(seg.ops.len()), rev-seg.first)
	seg.ops.dropFront(int(drop), func(op *Op) { seg.bytes -= memOpSize(op) })
	seg.logBounds = nb
	return nil
}

// LogBytes implements Store.
func (m *Memory) LogBytes(segment uint32) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, ErrClosed
	}
	if seg := m.segs[segment]; seg != nil {
		return seg.bytes, nil
	}
	return 0, nil
}

// SaveSnapshot implements Store. The store keeps its own copy of s.
func (m *Memory) SaveSnapshot(s *Snapshot) error {
	c := cloneSnapshot(s)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.segmentLocked(s.Segment).snapshot = c
	return nil
}

// cloneSnapshot copies s, values included.
func cloneSnapshot(s *Snapshot) *Snapshot {
	c := *s
	c.Entries = slices.Clone(s.Entries)
	for i := range c.Entries {
		c.Entries[i].Value = append(make([]byte, 0, len(c.Entries[i].Value)), c.Entries[i].Value...)
	}
	return &c
}

// LoadSnapshot implements Store.
func (m *Memory) LoadSnapshot(segment uint32) (Snapshot, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return Snapshot{}, false, ErrClosed
	}
	seg := m.segs[segment]
	if seg == nil || seg.snapshot == nil {
		return Snapshot{}, false, nil
	}
	s := *seg.snapshot
	s.Entries = slices.Clone(s.Entries)
	return s, true, nil
}

// ResetSegment implements Store.
func (m *Memory) ResetSegment(segment uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	delete(m.segs, segment)
	return nil
}

// Segments implements Store.
func (m *Memory) Segments() ([]uint32, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	var out []uint32
	for id, seg := range m.segs {
		if seg.snapshot != nil || seg.logBounds != (logBounds{}) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Sync implements Store; memory has nothing to sync.
func (m *Memory) Sync() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// Close implements Store, dropping everything held.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.segs = nil
	return nil
}

func (m *Memory) boundsLocked(segment uint32) logBounds {
	if seg := m.segs[segment]; seg != nil {
		return seg.logBounds
	}
	return logBounds{}
}

func (m *Memory) segmentLocked(segment uint32) *memSegment {
	seg := m.segs[segment]
	if seg == nil {
		seg = &memSegment{}
		m.segs[segment] = seg
	}
	return seg
}
