package zaris

import (
	"iter"
	"math/bits"
)

// keyTable holds one segment's entries in a single array kept in scan order: an open-addressing hash table
// whose home slot for a key grows with the key's scan position (ordered linear probing). A lookup costs the
// few probes of a hash table; a scan resumes at a position by reading the array on from that position's home
// slot; and a key costs one slot of 16 bytes, where a map and a separate ordered index cost a map slot and a
// tree item. Its invariants: the entries appear in (position, key) order, each at or after its home slot,
// with no empty slot between the two. Guarded by the segment's lock.
type keyTable struct {
	slots []tableSlot // homes index the first homes slots; the slots past them take what overflows the last
	homes int
	used  int
	lo    uint64 // the first position of the segment's range
	span  uint64 // the range's width; 0 is the whole space of 2^64 positions
	scale uint64 // home(pos) is the high word of (pos-lo)*scale: homes*2^64/span
}

// tableSlot is one slot of a keyTable: an entry and its key's scan position, or nothing when e is nil.
type tableSlot struct {
	pos uint64
	e   *entry
}

// Sizing: a table grows by half when more than 13/16 of its home slots are used, and halves when fewer than
// a quarter are, so it sits between about half and four fifths full. tableSlack slots past the homes absorb
// what overflows the last ones without a copy.
const (
	tableMinHomes = 8
	tableSlack    = 8
)

// newKeyTable returns an empty table for the positions of segment out of segments, sized for n entries.
func newKeyTable(segment, segments, n int) keyTable {
	first := func(seg int) uint64 { return uint64((seg*NumSlots + segments - 1) / segments) }
	t := keyTable{lo: slotStart(int(first(segment))), span: (first(segment+1) - first(segment)) << scanHashBits}
	t.resize(max(tableMinHomes, n*3/2))
	return t
}

// home is the first slot where an entry at position pos may lie. It never decreases as pos grows.
func (t *keyTable) home(pos uint64) int {
	if pos < t.lo {
		return 0
	}
	d := pos - t.lo
	if t.span != 0 && d >= t.span {
		return t.homes - 1
	}
	h, _ := bits.Mul64(d, t.scale)
	return int(h)
}

// len counts the entries.
func (t *keyTable) len() int { return t.used }

// get returns key's entry, nil when it has none.
func (t *keyTable) get(key string) *entry {
	pos := scanPosition(key)
	for i := t.home(pos); i < len(t.slots); i++ {
		s := &t.slots[i]
		if s.e == nil || s.pos > pos {
			return nil
		}
		if s.pos == pos && s.e.key == key {
			return s.e
		}
	}
	return nil
}

// set stores e under key, replacing the entry key had, and returns that one (nil when key had none).
func (t *keyTable) set(key string, e *entry) (old *entry) {
	if e.key != key {
		e.key = key
	}
	return t.insert(scanPosition(key), e)
}

// insert stores e at position pos, as set does; tests give keys the positions they need through it.
func (t *keyTable) insert(pos uint64, e *entry) (old *entry) {
	i := t.home(pos)
	for ; i < len(t.slots); i++ {
		s := &t.slots[i]
		if s.e == nil || s.pos > pos || s.pos == pos && s.e.key > e.key {
			break
		}
		if s.pos == pos && s.e.key == e.key {
			old, s.e = s.e, e
			return old
		}
	}
	// Shift the run from i on by one slot, into the first empty one after it.
	end := i
	for end < len(t.slots) && t.slots[end].e != nil {
		end++
	}
	if end == len(t.slots) {
		t.slots = append(t.slots, tableSlot{})
	}
	copy(t.slots[i+1:end+1], t.slots[i:end])
	t.slots[i] = tableSlot{pos: pos, e: e}
	t.used++
	if t.used*16 > t.homes*13 {
		t.resize(t.homes * 3 / 2)
	}
	return nil
}

// remove deletes key's entry and returns it, nil when key had none.
func (t *keyTable) remove(key string) *entry {
	pos := scanPosition(key)
	for i := t.home(pos); i < len(t.slots); i++ {
		s := &t.slots[i]
		if s.e == nil || s.pos > pos {
			return nil
		}
		if s.pos == pos && s.e.key == key {
			old := s.e
			t.removeAt(i)
			return old
		}
	}
	return nil
}

// removeAt empties slot i and moves back each following entry that lies after its home, so that no entry
// is left with an empty slot between it and its home.
func (t *keyTable) removeAt(i int) {
	hole := i
	for j := i + 1; j < len(t.slots) && t.slots[j].e != nil && t.home(t.slots[j].pos) <= hole; j++ {
		t.slots[hole] = t.slots[j]
		hole = j
	}
	t.slots[hole] = tableSlot{}
	t.used--
	if t.homes > tableMinHomes && t.used*4 < t.homes {
		t.resize(t.homes / 2)
	}
}

// resize rebuilds the table over homes home slots. Entries keep their order, so each goes to its new home
// or, when an earlier one took that slot, to the next free one.
func (t *keyTable) resize(homes int) {
	homes = max(homes, tableMinHomes)
	old := t.slots
	t.homes = homes
	t.scale = uint64(homes)
	if t.span != 0 {
		t.scale, _ = bits.Div64(uint64(homes), 0, t.span)
	}
	t.slots = make([]tableSlot, homes+tableSlack)
	next := 0
	for _, s := range old {
		if s.e == nil {
			continue
		}
		i := max(t.home(s.pos), next)
		if i == len(t.slots) {
			t.slots = append(t.slots, tableSlot{})
		}
		t.slots[i] = s
		next = i + 1
	}
}

// all yields every key and its entry, in scan order.
func (t *keyTable) all() iter.Seq2[string, *entry] {
	return func(yield func(string, *entry) bool) {
		for _, s := range t.slots {
			if s.e != nil && !yield(s.e.key, s.e) {
				return
			}
		}
	}
}

// from yields the position and entry of every entry at position from or after it, in scan order.
// The caller may stop early but must not change the table while it walks.
func (t *keyTable) from(from uint64) iter.Seq2[uint64, *entry] {
	return func(yield func(uint64, *entry) bool) {
		for i := t.home(from); i < len(t.slots); i++ {
			s := t.slots[i]
			if s.e != nil && s.pos >= from && !yield(s.pos, s.e) {
				return
			}
		}
	}
}
