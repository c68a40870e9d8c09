package zaris

import (
	"iter"

	"github.com/google/btree"
)

// keyTable holds one segment's entries in scan order, as (position, entry) items in a B-tree; an entry holds
// its key. A tree rather than a hash table ordered by position: keys of one hash tag share a slot, and a
// writer may pick keys whose positions crowd together. Guarded by the segment's lock.
type keyTable struct{ tree *btree.BTreeG[tableItem] }

// tableItem is an entry at its key's scan position. A probe for a position, with no entry, sorts before
// every entry at that position.
type tableItem struct {
	pos uint64
	e   *entry
}

func tableItemLess(a, b tableItem) bool {
	switch {
	case a.pos != b.pos:
		return a.pos < b.pos
	case a.e == nil || b.e == nil:
		return a.e == nil && b.e != nil
	}
	return a.e.key() < b.e.key()
}

// tableDegree is the B-tree's degree: wide nodes keep the tree shallow and the walk cache-friendly.
const tableDegree = 32

func newKeyTable() keyTable {
	return keyTable{tree: btree.NewG(tableDegree, tableItemLess)}
}

// len counts the entries.
func (t keyTable) len() int { return t.tree.Len() }

// get returns key's entry, nil when it has none.
func (t keyTable) get(key string) *entry { return t.find(scanPosition(key), key) }

// find returns the entry of key at position pos, nil when there is none. Keys rarely share a position, so
// the walk usually stops at the first item it reads.
func (t keyTable) find(pos uint64, key string) (found *entry) {
	t.tree.AscendGreaterOrEqual(tableItem{pos: pos}, func(it tableItem) bool {
		if it.pos == pos && it.e.key() == key {
			found = it.e
		}
		return found == nil && it.pos == pos
	})
	return found
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
	prev, _ := t.tree.ReplaceOrInsert(tableItem{pos: pos, e: e})
	return prev.e
}

// remove deletes key's entry and returns it, nil when key had none.
func (t keyTable) remove(key string) *entry { return t.removeAt(scanPosition(key), key) }

// removeAt deletes the entry of key at position pos and returns it, nil when there is none.
func (t keyTable) removeAt(pos uint64, key string) *entry {
	e := t.find(pos, key)
	if e != nil {
		t.tree.Delete(tableItem{pos: pos, e: e})
	}
	return e
}

// all yields every key and its entry, in scan order.
func (t keyTable) all() iter.Seq2[string, *entry] {
	return func(yield func(string, *entry) bool) {
		t.tree.Ascend(func(it tableItem) bool { return yield(it.e.key(), it.e) })
	}
}

// from yields the position and entry of every entry at position from or after it, in scan order. The
// caller may stop early but must not change the table while it walks.
func (t keyTable) from(from uint64) iter.Seq2[uint64, *entry] {
	return func(yield func(uint64, *entry) bool) {
		t.tree.AscendGreaterOrEqual(tableItem{pos: from}, func(it tableItem) bool { return yield(it.pos, it.e) })
	}
}
