package zaris

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// check returns an error unless t keeps its invariants: entries in (position, key) order, each at its key's
// position when keyed says positions come from keys, at or after its home with no empty slot in between,
// and as many as it counts.
func (t *keyTable) check(keyed bool) error {
	n, prev := 0, (*tableSlot)(nil)
	for i := range t.slots {
		s := &t.slots[i]
		if s.e == nil {
			continue
		}
		n++
		if keyed && s.pos != scanPosition(s.e.key) {
			return fmt.Errorf("slot %d: %q at position %#x, want %#x", i, s.e.key, s.pos, scanPosition(s.e.key))
		}
		if prev != nil && (prev.pos > s.pos || prev.pos == s.pos && prev.e.key >= s.e.key) {
			return fmt.Errorf("slot %d: %q at %#x follows %q at %#x", i, s.e.key, s.pos, prev.e.key, prev.pos)
		}
		home := t.home(s.pos)
		if home > i {
			return fmt.Errorf("slot %d: %q lies before its home %d", i, s.e.key, home)
		}
		for j := home; j < i; j++ {
			if t.slots[j].e == nil {
				return fmt.Errorf("slot %d: %q has an empty slot %d after its home %d", i, s.e.key, j, home)
			}
		}
		prev = s
	}
	if n != t.used {
		return fmt.Errorf("%d entries counted as %d", n, t.used)
	}
	return nil
}

// tableRanges are the segments whose tables the tests fill: the whole space, the first, a middle and the
// last of 1,024, and segments of 3, whose ranges are not a power of two wide.
var tableRanges = []struct{ segment, segments int }{{0, 1}, {0, 1024}, {517, 1024}, {1023, 1024}, {1, 3}, {2, 3}}

// segmentKeys returns n distinct keys of segment out of segments, as the layout places them.
func segmentKeys(segment, segments, n int) []string {
	layout := Layout{Segments: segments, Partitions: 1}
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := "key:" + strconv.Itoa(i); layout.KeySegment(k) == segment {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestKeyTableIsAMapInScanOrder runs random sets, removals and lookups against a map, through growth and
// shrinking, and checks after each step of a hundred that the table holds what the map does, in scan order,
// that a walk from any position yields exactly the entries at or after it, and that the invariants hold.
func TestKeyTableIsAMapInScanOrder(t *testing.T) {
	for _, r := range tableRanges {
		t.Run(fmt.Sprintf("%d_of_%d", r.segment, r.segments), func(t *testing.T) {
			keys := segmentKeys(r.segment, r.segments, 3000)
			keys = append(keys, "outside:a", "outside:b") // a key of another segment still finds its entry
			tab := newKeyTable(r.segment, r.segments, 0)
			model := map[string]*entry{}
			rng := rand.New(rand.NewPCG(uint64(r.segment), uint64(r.segments)))
			peak := 0
			for step := range 40000 {
				k := keys[rng.IntN(len(keys))]
				if step > 25000 { // then mostly removals, so that the table shrinks
					if rng.IntN(8) != 0 {
						if got, want := tab.remove(k), model[k]; got != want {
							t.Fatalf("remove %q returned %p, want %p", k, got, want)
						}
						delete(model, k)
					}
				} else if rng.IntN(4) == 0 {
					if got, want := tab.remove(k), model[k]; got != want {
						t.Fatalf("remove %q returned %p, want %p", k, got, want)
					}
					delete(model, k)
				} else {
					e := &entry{value: []byte(k)}
					if got, want := tab.set(k, e), model[k]; got != want {
						t.Fatalf("set %q returned %p, want %p", k, got, want)
					}
					model[k] = e
				}
				if got, want := tab.get(k), model[k]; got != want {
					t.Fatalf("get %q = %p, want %p", k, got, want)
				}
				peak = max(peak, tab.homes)
				if step%100 == 0 {
					checkTableHolds(t, &tab, model)
				}
			}
			checkTableHolds(t, &tab, model)
			if tab.homes >= peak/4 {
				t.Fatalf("%d home slots for %d entries after a peak of %d: the table did not shrink", tab.homes, tab.len(), peak)
			}
		})
	}
}

// checkTableHolds fails the test unless tab keeps its invariants and holds exactly model's entries in scan
// order, and a walk from a position yields those at or after it.
func checkTableHolds(t *testing.T, tab *keyTable, model map[string]*entry) {
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
		if pos != scanPosition(e.key) {
			t.Fatalf("from yields %q at %#x, its position is %#x", e.key, pos, scanPosition(e.key))
		}
		got = append(got, e.key)
	}
	i, _ := slices.BinarySearchFunc(want, from, func(k string, pos uint64) int { return cmp.Compare(scanPosition(k), pos) })
	if !slices.Equal(got, want[i:]) {
		t.Fatalf("from %#x yields %d keys, want the last %d", from, len(got), len(want)-i)
	}
}

// TestKeyTableSharedPositions gives many keys one position, as hash collisions would, and some positions
// outside the segment's range: lookups still find each, and they keep (position, key) order.
func TestKeyTableSharedPositions(t *testing.T) {
	tab := newKeyTable(5, 16, 0)
	lo := slotStart(5 * NumSlots / 16)
	positions := []uint64{0, lo, lo, lo + 1<<40, lo + 1<<40, ^uint64(0), ^uint64(0)}
	var keys []string
	for i := range 200 {
		k := "k" + strconv.Itoa(i)
		keys = append(keys, k)
		tab.insert(positions[i%len(positions)], &entry{key: k})
	}
	if err := tab.check(false); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if i%2 == 0 {
			if tab.removeAt(slotOf(t, &tab, k)); tab.check(false) != nil {
				t.Fatalf("after removing %q: %v", k, tab.check(false))
			}
		}
	}
	if tab.len() != 100 {
		t.Fatalf("%d entries left, want 100", tab.len())
	}
}

// slotOf returns the slot of key's entry in tab, whatever its position.
func slotOf(t *testing.T, tab *keyTable, key string) int {
	t.Helper()
	for i, s := range tab.slots {
		if s.e != nil && s.e.key == key {
			return i
		}
	}
	t.Fatalf("%q is not in the table", key)
	return -1
}

// FuzzKeyTable runs a sequence of sets and removals, one byte each, against a map.
func FuzzKeyTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0x80, 0x81, 4, 0x82})
	f.Add([]byte("a long run of sets that fills and grows the table, then removes"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		tab := newKeyTable(1, 3, 0)
		model := map[string]*entry{}
		for _, op := range ops {
			k := strconv.Itoa(int(op & 0x7f))
			if op&0x80 != 0 {
				if tab.remove(k) != model[k] {
					t.Fatalf("remove %q disagrees with the map", k)
				}
				delete(model, k)
			} else {
				e := &entry{}
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
