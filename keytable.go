package zaris

import (
	"iter"
	"strings"
)

// keyTable holds one segment's entries in scan order: a B+ tree of entries ordered by (scan position,
// key), an entry holding its key. Positions sit in arrays of their own, so a search compares integers
// along a few cache lines and reads an entry's key only where positions tie. A tree rather than a hash
// table ordered by position: keys of one hash tag share a slot, and a writer may pick keys whose positions
// crowd together. Guarded by the segment's lock.
type keyTable struct{ t *tableTree }

// tableTree is a keyTable's root and entry count, which inserts and removals change.
type tableTree struct {
	root *tableNode
	n    int
}

// tableMax is the most items a node holds: 62 positions and 62 pointers make a node of 1,008 bytes, which
// fills Go's 1,024-byte size class.
const tableMax = 62

// tableMerge is the fill below which a node that lost an item joins a neighbour, when the two fit in one
// node, or else takes items from it: every node but the root holds at least this many items, so a table
// emptied by removals gives its memory back.
const tableMerge = tableMax / 4

// tableNode is a leaf, whose items are entries, or an inner node, whose items are children. An inner
// node's item i (i > 0) is child i under a lower bound: every entry of the child sorts at or after
// (pos[i], ents[i].key()), and before the next child's bound. A bound's entry holds only a key (boundOf),
// so that it keeps no value alive. Searches never read item 0's bound, and a new root has none.
type tableNode struct {
	n    int
	pos  [tableMax]uint64
	ents [tableMax]*entry
	kids *[tableMax]*tableNode // nil for a leaf
}

func newKeyTable() keyTable { return keyTable{&tableTree{root: &tableNode{}}} }

// len counts the entries.
func (t keyTable) len() int { return t.t.n }

// compareItem orders (pos, key) against an item at (ipos, ie).
func compareItem(pos uint64, key string, ipos uint64, ie *entry) int {
	switch {
	case pos < ipos:
		return -1
	case pos > ipos:
		return 1
	}
	return strings.Compare(key, ie.key())
}

// child returns the index of the child of inner node nd whose range holds (pos, key): the last one whose
// bound is at or before it, or 0.
func (nd *tableNode) child(pos uint64, key string) int {
	lo, hi := 1, nd.n // the answer is lo-1 once every bound in [1, lo) is <= and [hi, n) is >
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compareItem(pos, key, nd.pos[m], nd.ents[m]) >= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// search returns the index of the first item of leaf nd at or after (pos, key), and whether it is key's.
func (nd *tableNode) search(pos uint64, key string) (int, bool) {
	lo, hi := 0, nd.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if nd.pos[m] < pos || nd.pos[m] == pos && nd.ents[m].key() < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < nd.n && nd.pos[lo] == pos && nd.ents[lo].key() == key
}

// get returns key's entry, nil when it has none.
func (t keyTable) get(key string) *entry { return t.find(scanPosition(key), key) }

// find returns the entry of key at position pos, nil when there is none.
func (t keyTable) find(pos uint64, key string) *entry {
	nd := t.t.root
	for nd.kids != nil {
		nd = nd.kids[nd.child(pos, key)]
	}
	if i, ok := nd.search(pos, key); ok {
		return nd.ents[i]
	}
	return nil
}

// set stores e, an entry of key, replacing the entry key had, and returns that one (nil when key had none).
func (t keyTable) set(key string, e *entry) (old *entry) {
	if e.key() != key {
		panic("zaris: an entry stored under a key not its own")
	}
	return t.insert(scanPosition(key), e)
}

// insert stores e at position pos, as set does; tests give keys the positions they need through it.
func (t keyTable) insert(pos uint64, e *entry) (old *entry) {
	old, split := t.t.root.insert(pos, e)
	if split != nil { // the root split: a new root over both halves
		root := &tableNode{n: 2, kids: &[tableMax]*tableNode{t.t.root, split}}
		root.pos[1], root.ents[1] = split.pos[0], boundOf(split)
		t.t.root = root
	}
	if old == nil {
		t.t.n++
	}
	return old
}

// insert adds (pos, e) under nd, replacing the entry of e's key, and returns that one. When nd had to
// split, it also returns the new right half, whose item 0 is its bound.
func (nd *tableNode) insert(pos uint64, e *entry) (old *entry, split *tableNode) {
	if nd.kids == nil {
		i, found := nd.search(pos, e.key())
		if found {
			old, nd.ents[i] = nd.ents[i], e
			return old, nil
		}
		return nil, nd.add(i, pos, e, nil)
	}
	c := nd.child(pos, e.key())
	if nd.shareFullLeaf(c) {
		c = nd.child(pos, e.key())
	}
	old, sp := nd.kids[c].insert(pos, e)
	if sp == nil {
		return old, nil
	}
	return old, nd.add(c+1, sp.pos[0], boundOf(sp), sp)
}

// tableShare is the fill up to which a leaf's neighbour takes half the items of a full leaf: a leaf splits
// only when its neighbours are fuller, which keeps leaves filled at about four fifths rather than two
// thirds as keys arrive in no order.
const tableShare = tableMax * 3 / 4

// shareFullLeaf has child c of nd, when it is a full leaf, share its items with a neighbour that holds
// tableShare or fewer, and reports whether one did.
func (nd *tableNode) shareFullLeaf(c int) bool {
	if kid := nd.kids[c]; kid.kids != nil || kid.n < tableMax {
		return false
	}
	switch {
	case c > 0 && nd.kids[c-1].n <= tableShare:
		nd.rebalance(c - 1)
	case c+1 < nd.n && nd.kids[c+1].n <= tableShare:
		nd.rebalance(c)
	default:
		return false
	}
	return true
}

// boundOf returns the bound a parent keeps for nd, the new right half of a split: its first item's, as
// an entry holding only the key when nd is a leaf, whose item is a stored entry.
func boundOf(nd *tableNode) *entry {
	if nd.kids != nil {
		return nd.ents[0]
	}
	return newStringEntry(nd.ents[0].key(), nil, 0, 0)
}

// add puts an item at index i: an entry in a leaf, or child kid under its bound (pos, e) in an inner node.
// A full node splits in two first, and add returns the right half.
func (nd *tableNode) add(i int, pos uint64, e *entry, kid *tableNode) (split *tableNode) {
	to := nd
	if nd.n == tableMax {
		const half = tableMax / 2
		split = &tableNode{n: tableMax - half}
		copy(split.pos[:], nd.pos[half:])
		copy(split.ents[:], nd.ents[half:])
		clear(nd.ents[half:])
		if nd.kids != nil {
			split.kids = new([tableMax]*tableNode)
			copy(split.kids[:], nd.kids[half:])
			clear(nd.kids[half:])
		}
		nd.n = half
		if i > half {
			to, i = split, i-half
		}
	}
	copy(to.pos[i+1:to.n+1], to.pos[i:to.n])
	copy(to.ents[i+1:to.n+1], to.ents[i:to.n])
	to.pos[i], to.ents[i] = pos, e
	if to.kids != nil {
		copy(to.kids[i+1:to.n+1], to.kids[i:to.n])
		to.kids[i] = kid
	}
	to.n++
	return split
}

// remove deletes key's entry and returns it, nil when key had none.
func (t keyTable) remove(key string) *entry { return t.removeAt(scanPosition(key), key) }

// removeAt deletes the entry of key at position pos and returns it, nil when there is none.
func (t keyTable) removeAt(pos uint64, key string) *entry {
	old := t.t.root.remove(pos, key)
	if old != nil {
		t.t.n--
	}
	for t.t.root.kids != nil && t.t.root.n == 1 {
		t.t.root = t.t.root.kids[0]
	}
	return old
}

// remove deletes the entry of key at pos under nd and returns it. A child left with fewer than
// tableMerge items joins a neighbour when the two fit in one node, and otherwise takes items from one.
func (nd *tableNode) remove(pos uint64, key string) *entry {
	if nd.kids == nil {
		i, found := nd.search(pos, key)
		if !found {
			return nil
		}
		old := nd.ents[i]
		nd.cut(i)
		return old
	}
	c := nd.child(pos, key)
	old := nd.kids[c].remove(pos, key)
	if old != nil && nd.kids[c].n < tableMerge {
		switch {
		case c > 0 && nd.kids[c-1].n+nd.kids[c].n <= tableMax:
			nd.merge(c - 1)
		case c+1 < nd.n && nd.kids[c].n+nd.kids[c+1].n <= tableMax:
			nd.merge(c)
		case c > 0:
			nd.rebalance(c - 1)
		case c+1 < nd.n:
			nd.rebalance(c)
		}
	}
	return old
}

// rebalance shares the items of children i and i+1 of nd, too many for one node, evenly between them,
// and gives child i+1 the bound of its new first item.
func (nd *tableNode) rebalance(i int) {
	left, right := nd.kids[i], nd.kids[i+1]
	nd.lendBound(i + 1)
	half := (left.n + right.n) / 2
	if k := half - left.n; k > 0 { // the right child's first k items go to the left one's end
		copy(left.pos[left.n:], right.pos[:k])
		copy(left.ents[left.n:], right.ents[:k])
		copy(right.pos[:], right.pos[k:right.n])
		copy(right.ents[:], right.ents[k:right.n])
		clear(right.ents[right.n-k : right.n])
		if right.kids != nil {
			copy(left.kids[left.n:], right.kids[:k])
			copy(right.kids[:], right.kids[k:right.n])
			clear(right.kids[right.n-k : right.n])
		}
		left.n, right.n = half, right.n-k
	} else if k < 0 { // the left child's last -k items go to the right one's front
		k = -k
		copy(right.pos[k:], right.pos[:right.n])
		copy(right.ents[k:], right.ents[:right.n])
		copy(right.pos[:k], left.pos[half:left.n])
		copy(right.ents[:k], left.ents[half:left.n])
		clear(left.ents[half:left.n])
		if right.kids != nil {
			copy(right.kids[k:], right.kids[:right.n])
			copy(right.kids[:k], left.kids[half:left.n])
			clear(left.kids[half:left.n])
		}
		left.n, right.n = half, right.n+k
	}
	nd.pos[i+1], nd.ents[i+1] = right.pos[0], boundOf(right)
}

// merge moves every item of child i+1 into child i, and drops child i+1. The first child moved takes the
// bound it had here, which holds for all of it.
func (nd *tableNode) merge(i int) {
	left, right := nd.kids[i], nd.kids[i+1]
	nd.lendBound(i + 1)
	if right.kids != nil {
		copy(left.kids[left.n:], right.kids[:right.n])
	}
	copy(left.pos[left.n:], right.pos[:right.n])
	copy(left.ents[left.n:], right.ents[:right.n])
	left.n += right.n
	nd.cut(i + 1)
}

// lendBound gives child i of nd, when it is an inner node about to pass its first child to a neighbour,
// the bound that child has here, which its item 0 otherwise need not hold.
func (nd *tableNode) lendBound(i int) {
	if kid := nd.kids[i]; kid.kids != nil {
		kid.pos[0], kid.ents[0] = nd.pos[i], nd.ents[i]
	}
}

// cut removes item i of nd, clearing the slot it frees so that nothing removed stays reachable from it.
func (nd *tableNode) cut(i int) {
	copy(nd.pos[i:], nd.pos[i+1:nd.n])
	copy(nd.ents[i:], nd.ents[i+1:nd.n])
	nd.n--
	nd.ents[nd.n] = nil
	if nd.kids != nil {
		copy(nd.kids[i:], nd.kids[i+1:nd.n+1])
		nd.kids[nd.n] = nil
	}
}

// samplePosition returns the position of an entry chosen by descending from the root through random
// children (intn(n) picks one of n): close to uniform, since every node but the root is at least a quarter
// full, and independent of how the keys' positions crowd. ok is false for an empty table.
func (t keyTable) samplePosition(intn func(n int) int) (pos uint64, ok bool) {
	if t.t.n == 0 {
		return 0, false
	}
	nd := t.t.root
	for nd.kids != nil {
		nd = nd.kids[intn(nd.n)]
	}
	return nd.pos[intn(nd.n)], true
}

// all yields every key and its entry, in scan order.
func (t keyTable) all() iter.Seq2[string, *entry] {
	return func(yield func(string, *entry) bool) {
		t.t.root.ascend(0, func(_ uint64, e *entry) bool { return yield(e.key(), e) })
	}
}

// from yields the position and entry of every entry at position from or after it, in scan order. The
// caller may stop early but must not change the table while it walks.
func (t keyTable) from(from uint64) iter.Seq2[uint64, *entry] {
	return func(yield func(uint64, *entry) bool) { t.t.root.ascend(from, yield) }
}

// ascend yields the items under nd at position pos or after it, in order, until yield returns false, and
// reports whether it never did.
func (nd *tableNode) ascend(pos uint64, yield func(uint64, *entry) bool) bool {
	lo, hi := 0, nd.n
	if nd.kids != nil {
		lo = 1 // the last child whose bound is before pos holds the first entries at pos, if any
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if nd.pos[m] < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if nd.kids == nil {
		for i := lo; i < nd.n; i++ {
			if !yield(nd.pos[i], nd.ents[i]) {
				return false
			}
		}
		return true
	}
	for c := lo - 1; c < nd.n; c++ {
		if !nd.kids[c].ascend(pos, yield) {
			return false
		}
	}
	return true
}
