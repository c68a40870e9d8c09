package zaris

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// check returns an error unless t holds its entries in strict (position, key) order, each at its key's
// position when keyed says positions come from keys, and unless its tree is sound: every leaf at one depth,
// every child's entries within its bounds, no node over full, and its count right.
func (t keyTable) check(keyed bool) error {
	var prev *entry
	var prevPos uint64
	count, depth := 0, -1
	var walk func(nd *tableNode, level int, lo, hi *entry, loPos, hiPos uint64) error
	walk = func(nd *tableNode, level int, lo, hi *entry, loPos, hiPos uint64) error {
		if nd.n > tableMax || nd.n < 0 || nd.kids != nil && nd.n == 0 {
			return fmt.Errorf("a node holds %d items", nd.n)
		}
		if level > 0 && nd.n < tableMerge {
			return fmt.Errorf("a node at depth %d holds %d items; at least %d", level, nd.n, tableMerge)
		}
		if slices.ContainsFunc(nd.ents[nd.n:], func(e *entry) bool { return e != nil }) ||
			nd.kids != nil && slices.ContainsFunc(nd.kids[nd.n:], func(k *tableNode) bool { return k != nil }) {
			return fmt.Errorf("a node of %d items keeps a pointer in a free slot", nd.n)
		}
		if nd.kids != nil {
			for i := range nd.n {
				clo, cloPos := lo, loPos
				if i > 0 {
					clo, cloPos = nd.ents[i], nd.pos[i]
				}
				chi, chiPos := hi, hiPos
				if i+1 < nd.n {
					chi, chiPos = nd.ents[i+1], nd.pos[i+1]
				}
				if err := walk(nd.kids[i], level+1, clo, chi, cloPos, chiPos); err != nil {
					return err
				}
			}
			return nil
		}
		if depth >= 0 && depth != level {
			return fmt.Errorf("leaves at depths %d and %d", depth, level)
		}
		depth = level
		for i := range nd.n {
			e, pos := nd.ents[i], nd.pos[i]
			order := func(aPos uint64, a *entry, bPos uint64, b *entry) int {
				return cmp.Or(cmp.Compare(aPos, bPos), strings.Compare(a.key(), b.key()))
			}
			switch {
			case keyed && pos != scanPosition(e.key()):
				return fmt.Errorf("%q at position %#x, want %#x", e.key(), pos, scanPosition(e.key()))
			case prev != nil && order(prevPos, prev, pos, e) >= 0:
				return fmt.Errorf("%q at %#x follows %q at %#x", e.key(), pos, prev.key(), prevPos)
			case lo != nil && order(pos, e, loPos, lo) < 0:
				return fmt.Errorf("%q at %#x sorts before its leaf's bound %q at %#x", e.key(), pos, lo.key(), loPos)
			case hi != nil && order(pos, e, hiPos, hi) >= 0:
				return fmt.Errorf("%q at %#x sorts at or after the next leaf's bound %q at %#x", e.key(), pos, hi.key(), hiPos)
			}
			prev, prevPos = e, pos
			count++
		}
		return nil
	}
	if err := walk(t.t.root, 0, nil, nil, 0, 0); err != nil {
		return err
	}
	if err := t.t.root.boundsHoldOnlyKeys(); err != nil {
		return err
	}
	if count != t.len() {
		return fmt.Errorf("%d entries in the tree, len says %d", count, t.len())
	}
	return nil
}

// boundsHoldOnlyKeys returns an error if an inner node's bound under nd is an entry with a value: a stored
// entry, which the bound would keep alive after its removal.
func (nd *tableNode) boundsHoldOnlyKeys() error {
	if nd.kids == nil {
		return nil
	}
	for i := range nd.n {
		if b := nd.ents[i]; b != nil && (b.coll() != nil || len(b.value()) > 0) {
			return fmt.Errorf("the bound %q of child %d holds a value", b.key(), i)
		}
		if err := nd.kids[i].boundsHoldOnlyKeys(); err != nil {
			return err
		}
	}
	return nil
}

// TestKeyTableIsAMapInScanOrder runs random sets, removals and lookups against a map, and checks after
// each step of a hundred that the table holds what the map does, in scan order, and that a walk from a
// position yields exactly the entries at or after it: with keys spread over the slots, and with keys that
// share one hash tag, and so one slot.
func TestKeyTableIsAMapInScanOrder(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"key:", "{tag}:"} {
		t.Run(prefix, func(t *testing.T) {
			keys := make([]string, 3000)
			for i := range keys {
				keys[i] = prefix + strconv.Itoa(i)
			}
			tab := newKeyTable()
			model := map[string]*entry{}
			rng := rand.New(rand.NewPCG(1, uint64(len(prefix))))
			for step := range 40000 {
				k := keys[rng.IntN(len(keys))]
				if removing := step > 25000; removing && rng.IntN(8) != 0 || !removing && rng.IntN(4) == 0 {
					if got, want := tab.remove(k), model[k]; got != want {
						t.Fatalf("remove %q returned %p, want %p", k, got, want)
					}
					delete(model, k)
				} else {
					e := newStringEntry(k, []byte(k), 0, 0)
					if got, want := tab.set(k, e), model[k]; got != want {
						t.Fatalf("set %q returned %p, want %p", k, got, want)
					}
					model[k] = e
				}
				if got, want := tab.get(k), model[k]; got != want {
					t.Fatalf("get %q = %p, want %p", k, got, want)
				}
				if step%100 == 0 {
					checkTableHolds(t, tab, model)
				}
			}
			checkTableHolds(t, tab, model)
		})
	}
}

// checkTableHolds fails the test unless tab keeps its invariants and holds exactly model's entries in scan
// order, and a walk from a position yields those at or after it.
func checkTableHolds(t *testing.T, tab keyTable, model map[string]*entry) {
	t.Helper()
	if err := tab.check(true); err != nil {
		t.Fatal(err)
	}
	want := slices.SortedFunc(maps.Keys(model), func(a, b string) int {
		return cmp.Or(cmp.Compare(scanPosition(a), scanPosition(b)), cmp.Compare(a, b))
	})
	var got []string
	for k, e := range tab.all() {
		if model[k] != e {
			t.Fatalf("all yields %q with %p, want %p", k, e, model[k])
		}
		got = append(got, k)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("all yields %d keys %.5q..., want %d in scan order %.5q...", len(got), got, len(want), want)
	}
	if len(want) == 0 {
		return
	}
	from := scanPosition(want[len(want)/3])
	got = got[:0]
	for pos, e := range tab.from(from) {
		if pos != scanPosition(e.key()) {
			t.Fatalf("from yields %q at %#x, its position is %#x", e.key(), pos, scanPosition(e.key()))
		}
		got = append(got, e.key())
	}
	i, _ := slices.BinarySearchFunc(want, from, func(k string, pos uint64) int { return cmp.Compare(scanPosition(k), pos) })
	if !slices.Equal(got, want[i:]) {
		t.Fatalf("from %#x yields %d keys, want the last %d", from, len(got), len(want)-i)
	}
}

// TestKeyTableSharedPositions gives many keys one position, as hash collisions would: each is still found
// and removed by its key, and they keep (position, key) order.
func TestKeyTableSharedPositions(t *testing.T) {
	tab := newKeyTable()
	positions := []uint64{0, 1 << 50, 1 << 50, 1<<50 + 1, ^uint64(0), ^uint64(0)}
	entries := map[string]*entry{}
	for i := range 200 {
		k := "k" + strconv.Itoa(i)
		entries[k] = newStringEntry(k, nil, 0, 0)
		tab.insert(positions[i%len(positions)], entries[k])
	}
	if err := tab.check(false); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		k, pos := "k"+strconv.Itoa(i), positions[i%len(positions)]
		if got := tab.find(pos, k); got != entries[k] {
			t.Fatalf("find %q at %#x = %p, want %p", k, pos, got, entries[k])
		}
		if i%2 == 0 {
			if got := tab.removeAt(pos, k); got != entries[k] {
				t.Fatalf("removeAt %q = %p, want %p", k, got, entries[k])
			}
			if tab.find(pos, k) != nil {
				t.Fatalf("%q is still found after its removal", k)
			}
		}
	}
	if err := tab.check(false); err != nil || tab.len() != 100 {
		t.Fatalf("%d entries left, want 100 (%v)", tab.len(), err)
	}
}

// TestKeyTableOnePosition gives 3,000 keys one position, as crafted hash collisions would: the tree orders
// them by key across many nodes, finds each, and empties in any order.
func TestKeyTableOnePosition(t *testing.T) {
	tab := newKeyTable()
	rng := rand.New(rand.NewPCG(3, 4))
	keys := make([]string, 3000)
	for i := range keys {
		keys[i] = "c" + strconv.Itoa(i)
	}
	const pos = 1 << 40
	for _, i := range rng.Perm(len(keys)) {
		tab.insert(pos, newStringEntry(keys[i], nil, 0, 0))
	}
	if err := tab.check(false); err != nil {
		t.Fatal(err)
	}
	var walked []string
	for p, e := range tab.from(pos) {
		if p != pos {
			t.Fatalf("%q at %#x", e.key(), p)
		}
		walked = append(walked, e.key())
	}
	if !slices.IsSorted(walked) || len(walked) != len(keys) {
		t.Fatalf("a walk from the position yields %d keys, sorted %v", len(walked), slices.IsSorted(walked))
	}
	for n, i := range rng.Perm(len(keys)) {
		if tab.find(pos, keys[i]) == nil || tab.removeAt(pos, keys[i]) == nil || tab.find(pos, keys[i]) != nil {
			t.Fatalf("%q not found, not removed, or found after its removal", keys[i])
		}
		if n%97 == 0 {
			if err := tab.check(false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if tab.len() != 0 || tab.t.root.kids != nil || tab.t.root.n != 0 {
		t.Fatalf("emptied, the table holds %d entries under a root of %d items", tab.len(), tab.t.root.n)
	}
}

// FuzzKeyTable runs a sequence of sets and removals, one byte each, against a map.
func FuzzKeyTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0x80, 0x81, 4, 0x82})
	f.Add([]byte("a long run of sets that fills and grows the table, then removes"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		tab := newKeyTable()
		model := map[string]*entry{}
		for _, op := range ops {
			k := strconv.Itoa(int(op & 0x7f))
			if op&0x80 != 0 {
				if tab.remove(k) != model[k] {
					t.Fatalf("remove %q disagrees with the map", k)
				}
				delete(model, k)
			} else {
				e := newStringEntry(k, nil, 0, 0)
				if tab.set(k, e) != model[k] {
					t.Fatalf("set %q disagrees with the map", k)
				}
				model[k] = e
			}
			if err := tab.check(true); err != nil {
				t.Fatal(err)
			}
		}
		for k, e := range model {
			if tab.get(k) != e {
				t.Fatalf("get %q disagrees with the map", k)
			}
		}
		if tab.len() != len(model) {
			t.Fatalf("%d entries, want %d", tab.len(), len(model))
		}
	})
}

// TestKeyTableKeepsNodesFilled fills and clears runs of neighbouring positions in random order, so that
// nodes emptied by removals sit next to full ones that cannot take them in: they take items from them
// instead, and the table's check holds every node but the root to at least tableMerge items.
func TestKeyTableKeepsNodesFilled(t *testing.T) {
	t.Parallel()
	tab := newKeyTable()
	model := map[uint64]bool{}
	rng := rand.New(rand.NewPCG(4, 6)) // a seed that moves items both ways, between leaves and between inner nodes
	key := func(pos uint64) string { return "r" + strconv.FormatUint(pos, 10) }
	const space = 30000
	for round := range 250 {
		from := rng.Uint64N(space)
		width := 1 + rng.Uint64N(3000)
		fill := round < 40 || rng.IntN(2) == 0
		for _, i := range rng.Perm(int(min(from+width, space) - from)) { // in random order: leaves fill past half
			pos := from + uint64(i)
			if fill && !model[pos] {
				tab.insert(pos, newStringEntry(key(pos), []byte("v"), 0, 0)) // a value, which no bound may hold
				model[pos] = true
			} else if !fill && model[pos] {
				if tab.removeAt(pos, key(pos)) == nil {
					t.Fatalf("round %d: %s not removed", round, key(pos))
				}
				delete(model, pos)
			}
		}
		if err := tab.check(false); err != nil {
			t.Fatalf("round %d, after %s %d positions from %d: %v", round, map[bool]string{true: "filling", false: "clearing"}[fill], width, from, err)
		}
		if tab.len() != len(model) {
			t.Fatalf("round %d: the table holds %d entries, the model %d", round, tab.len(), len(model))
		}
	}
}

// TestKeyTableFillsLeavesAsKeysArrive inserts keys in random order, as writes bring them: a full leaf
// shares with a neighbour before it splits, so leaves end about four fifths full, where splits alone
// leave them about two thirds full.
func TestKeyTableFillsLeavesAsKeysArrive(t *testing.T) {
	t.Parallel()
	tab := newKeyTable()
	rng := rand.New(rand.NewPCG(7, 9))
	const keys = 100_000
	for i := range keys {
		k := "key:" + strconv.Itoa(rng.IntN(keys*10)) + ":" + strconv.Itoa(i)
		tab.set(k, newStringEntry(k, nil, 0, 0))
	}
	if err := tab.check(true); err != nil {
		t.Fatal(err)
	}
	leaves := 0
	var count func(nd *tableNode)
	count = func(nd *tableNode) {
		if nd.kids == nil {
			leaves++
			return
		}
		for _, kid := range nd.kids[:nd.n] {
			count(kid)
		}
	}
	count(tab.t.root)
	if fill := float64(keys) / float64(leaves*tableMax); fill < 0.78 {
		t.Fatalf("%d keys in %d leaves: %.0f%% full, want at least 78%%", keys, leaves, 100*fill)
	}
}
