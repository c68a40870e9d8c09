package durability

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Memory is a Store that keeps everything in process memory: nothing survives the process. It serves
// tests, nodes that hold the map as a pure cache, and a node's recent ops, bounded by MemoryOptions.
type Memory struct {
	opts MemoryOptions
	// mu guards closed and segs. A call on one segment holds it shared and locks that segment, so calls
	// on different segments do not contend. An Append to several segments holds it exclusively, which
	// makes it atomic, and so does Close, which waits for the calls in progress.
	mu     sync.RWMutex
	closed bool
	segs   map[uint32]*memSegment // never removed from until Close
	chunks chunkCache             // the chunks the segments' logs released, for the next that grows
}

// MemoryOptions tunes a Memory store. The zero value retains every op and copies every value.
type MemoryOptions struct {
	// RetainOps bounds each segment's log in ops, and RetainBytes in LogBytes; 0 means no bound. An Append
	// that goes past either drops the oldest ops, as TruncateBefore would, but always keeps the newest.
	RetainOps   int
	RetainBytes int64
	// ShareValues keeps the Value an Append hands over instead of copying it: the caller must never
	// modify it afterwards.
	ShareValues bool
}

// memSegment is one segment's log and snapshot.
type memSegment struct {
	mu    sync.Mutex // guards the rest when Memory.mu is held shared
	cache *chunkCache
	logBounds
	ops      opQueue // ops.at(i).Revision == first+i
	bytes    int64
	snapshot *Snapshot
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store that retains every op and copies every value.
func NewMemory() *Memory { return NewMemoryWith(MemoryOptions{}) }

// NewMemoryWith returns an empty in-memory store tuned by opts.
func NewMemoryWith(opts MemoryOptions) *Memory {
	return &Memory{opts: opts, segs: make(map[uint32]*memSegment)}
}

// memOpSize is what one op counts towards LogBytes: the memory it holds, its struct in the log's chunks,
// its key and its value. A value the store shares with its caller counts too, since the op may outlive
// the caller's use of it (a later write replaces the key's value, and the op alone keeps the old one).
func memOpSize(op *Op) int64 { return int64(unsafe.Sizeof(*op)) + int64(len(op.Key)+cap(op.Value)) }

// Append implements Store. Ops of a single segment, as a node records its writes, lock only that
// segment.
func (m *Memory) Append(ops []Op) error {
	if len(ops) == 0 || !oneSegment(ops) {
		return m.appendSegments(ops)
	}
	seg, err := m.lockShared(ops[0].Segment, true)
	if err != nil {
		return err
	}
	seg.mu.Lock()
	err = seg.append(ops, m.opts.ShareValues)
	if err == nil {
		m.retain(seg)
	}
	seg.mu.Unlock()
	m.mu.RUnlock()
	return err
}

// appendSegments appends ops of any segments, holding the whole store.
func (m *Memory) appendSegments(ops []Op) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	plan := planAppend(ops, m.boundsLocked)
	for i := range ops {
		if plan.accepts(ops[i].Segment) {
			m.segmentLocked(ops[i].Segment).push(&ops[i], m.opts.ShareValues)
		}
	}
	for _, sb := range plan.touched {
		if sb.refused == nil {
			seg := m.segs[sb.segment]
			seg.logBounds = sb.logBounds
			m.retain(seg)
		}
	}
	return plan.err()
}

// oneSegment reports whether ops all belong to the segment of the first.
func oneSegment(ops []Op) bool {
	for i := 1; i < len(ops); i++ {
		if ops[i].Segment != ops[0].Segment {
			return false
		}
	}
	return true
}

// append adds ops, all of seg, after checking them all, or returns why the first refused one is. It
// stays flat, with the rare paths out of line, to keep the write path's stack small.
func (seg *memSegment) append(ops []Op, share bool) error {
	b := seg.logBounds
	for i := range ops {
		if !b.accepts(&ops[i]) {
			return b.refusal(&ops[i])
		}
		b = b.appended(ops[i].Revision)
	}
	for i := range ops {
		seg.push(&ops[i], share)
	}
	seg.logBounds = b
	return nil
}

// push adds a copy of op at the end of the log, with a value of its own unless share is set. It leaves
// the bounds to the caller.
func (seg *memSegment) push(op *Op, share bool) {
	last := seg.ops.push(seg.cache)
	*last = *op
	if last.Kind.deletes() {
		last.Value = nil
	} else if !share {
		last.Value = bytes.Clone(last.Value)
	}
	seg.bytes += memOpSize(last)
}

// retain drops the oldest ops of seg beyond the store's bounds, keeping the newest.
func (m *Memory) retain(seg *memSegment) {
	maxOps, maxBytes := m.opts.RetainOps, m.opts.RetainBytes
	if maxOps <= 0 && maxBytes <= 0 {
		return
	}
	drop, size := 0, seg.bytes
	for kept := seg.ops.len(); kept > 1 && (maxOps > 0 && kept > maxOps || maxBytes > 0 && size > maxBytes); kept-- {
		size -= memOpSize(seg.ops.at(drop))
		drop++
	}
	if drop > 0 {
		seg.truncate(seg.first + uint64(drop))
	}
}

// truncate applies TruncateBefore(rev) to seg.
func (seg *memSegment) truncate(rev uint64) {
	nb, changed := seg.truncated(rev)
	if !changed {
		return
	}
	drop := min(uint64(seg.ops.len()), rev-seg.first)
	seg.ops.dropFront(int(drop), seg.cache, func(op *Op) { seg.bytes -= memOpSize(op) })
	seg.logBounds = nb
}

// Ops implements Store.
func (m *Memory) Ops(segment uint32, after uint64, limit int) ([]Op, error) {
	seg, err := m.lockShared(segment, false)
	if err != nil || seg == nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	seg.mu.Lock()
	defer seg.mu.Unlock()
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
	seg, err := m.lockShared(segment, false)
	if err != nil || seg == nil {
		return 0, 0, err
	}
	defer m.mu.RUnlock()
	seg.mu.Lock()
	defer seg.mu.Unlock()
	return seg.first, seg.last, nil
}

// TruncateBefore implements Store.
func (m *Memory) TruncateBefore(segment uint32, rev uint64) error {
	seg, err := m.lockShared(segment, true)
	if err != nil {
		return err
	}
	defer m.mu.RUnlock()
	seg.mu.Lock()
	defer seg.mu.Unlock()
	seg.truncate(rev)
	return nil
}

// LogBytes implements Store.
func (m *Memory) LogBytes(segment uint32) (int64, error) {
	seg, err := m.lockShared(segment, false)
	if err != nil || seg == nil {
		return 0, err
	}
	defer m.mu.RUnlock()
	seg.mu.Lock()
	defer seg.mu.Unlock()
	return seg.bytes, nil
}

// SaveSnapshot implements Store. The store keeps its own copy of s.
func (m *Memory) SaveSnapshot(s *Snapshot) error {
	c := cloneSnapshot(s)
	seg, err := m.lockShared(s.Segment, true)
	if err != nil {
		return err
	}
	defer m.mu.RUnlock()
	seg.mu.Lock()
	defer seg.mu.Unlock()
	seg.snapshot = c
	return nil
}

// cloneSnapshot copies s, values included.
func cloneSnapshot(s *Snapshot) *Snapshot {
	c := *s
	c.Entries = slices.Clone(s.Entries)
	for i := range c.Entries {
		c.Entries[i].Key = strings.Clone(c.Entries[i].Key)
		c.Entries[i].Value = append(make([]byte, 0, len(c.Entries[i].Value)), c.Entries[i].Value...)
	}
	return &c
}

// LoadSnapshot implements Store.
func (m *Memory) LoadSnapshot(segment uint32) (Snapshot, bool, error) {
	seg, err := m.lockShared(segment, false)
	if err != nil || seg == nil {
		return Snapshot{}, false, err
	}
	defer m.mu.RUnlock()
	seg.mu.Lock()
	defer seg.mu.Unlock()
	if seg.snapshot == nil {
		return Snapshot{}, false, nil
	}
	s := *seg.snapshot
	s.Entries = slices.Clone(s.Entries)
	return s, true, nil
}

// ResetSegment implements Store.
func (m *Memory) ResetSegment(segment uint32) error {
	seg, err := m.lockShared(segment, false)
	if err != nil || seg == nil {
		return err
	}
	defer m.mu.RUnlock()
	seg.mu.Lock()
	defer seg.mu.Unlock()
	seg.logBounds, seg.ops, seg.bytes, seg.snapshot = logBounds{}, opQueue{}, 0, nil
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
		seg.mu.Lock()
		if seg.snapshot != nil || seg.logBounds != (logBounds{}) {
			out = append(out, id)
		}
		seg.mu.Unlock()
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

// lockShared returns segment's state with m.mu held shared, which the caller releases. The segment is
// created first when create is set. Otherwise it may be nil, and then m.mu is not held, nor on error.
func (m *Memory) lockShared(segment uint32, create bool) (*memSegment, error) {
	m.mu.RLock()
	for {
		if m.closed {
			m.mu.RUnlock()
			return nil, ErrClosed
		}
		seg := m.segs[segment]
		if seg != nil {
			return seg, nil
		}
		m.mu.RUnlock()
		if !create {
			return nil, nil
		}
		m.mu.Lock()
		if !m.closed {
			m.segmentLocked(segment)
		}
		m.mu.Unlock()
		m.mu.RLock()
	}
}

// boundsLocked returns segment's bounds. Called with m.mu held exclusively.
func (m *Memory) boundsLocked(segment uint32) logBounds {
	if seg := m.segs[segment]; seg != nil {
		return seg.logBounds
	}
	return logBounds{}
}

// segmentLocked returns segment's state, created if need be. Called with m.mu held exclusively.
func (m *Memory) segmentLocked(segment uint32) *memSegment {
	seg := m.segs[segment]
	if seg == nil {
		seg = &memSegment{cache: &m.chunks}
		m.segs[segment] = seg
	}
	return seg
}
