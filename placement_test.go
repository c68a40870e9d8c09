package zaris

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestKeyFunctionsDoNotAllocate(t *testing.T) {
	l := DefaultLayout()
	s, b := "user:1000:profile{tag}", []byte("user:1000:profile{tag}")
	var sink int
	for name, f := range map[string]func(){
		"KeySlot":           func() { sink += int(KeySlot(s)) },
		"KeySlotBytes":      func() { sink += int(KeySlotBytes(b)) },
		"KeySegment":        func() { sink += l.KeySegment(s) },
		"KeySegmentBytes":   func() { sink += l.KeySegmentBytes(b) },
		"KeyPartition":      func() { sink += l.KeyPartition(s) },
		"KeyPartitionBytes": func() { sink += l.KeyPartitionBytes(b) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s allocates %v times per call", name, n)
		}
	}
	_ = sink
}

func TestNewLayoutValidation(t *testing.T) {
	bad := [][2]int{{0, 0}, {0, 1}, {1, 0}, {-1, 1}, {16, -1}, {16, 17}, {NumSlots + 1, 1}, {1, 2}, {-5, -5}}
	for _, c := range bad {
		l, err := NewLayout(c[0], c[1])
		if !errors.Is(err, ErrInvalidLayout) {
			t.Errorf("NewLayout(%d, %d) error = %v, want ErrInvalidLayout", c[0], c[1], err)
		}
		if l != (Layout{}) {
			t.Errorf("NewLayout(%d, %d) returned %+v with an error", c[0], c[1], l)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Itoa(c[0])) {
			t.Errorf("NewLayout(%d, %d) error %q does not name the values", c[0], c[1], err)
		}
	}
	good := [][2]int{{1, 1}, {NumSlots, NumSlots}, {NumSlots, 1}, {DefaultSegments, DefaultPartitions}, {997, 61}}
	for _, c := range good {
		if l, err := NewLayout(c[0], c[1]); err != nil || l.Segments != c[0] || l.Partitions != c[1] {
			t.Errorf("NewLayout(%d, %d) = %+v, %v", c[0], c[1], l, err)
		}
	}
	if err := (Layout{}).Validate(); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("the zero Layout validates: %v", err)
	}
	if l := DefaultLayout(); l.Validate() != nil || l.Segments != 1024 || l.Partitions != 128 {
		t.Errorf("DefaultLayout() = %+v", l)
	}
}

// checkLayoutInverse checks, for every slot and segment of l, that the inverse views hold exactly the slots and
// segments the forward functions map there: the ranges tile their space in order, without gap or overlap, and
// every member maps back to its range.
func checkLayoutInverse(t *testing.T, l Layout) {
	t.Helper()
	next := 0 // the first slot not yet covered
	for s := range l.Segments {
		first, last := l.SegmentSlots(s)
		if int(first) != next || last < first {
			t.Fatalf("%+v: segment %d slots [%d, %d], want to start at %d", l, s, first, last, next)
		}
		for slot := int(first); slot <= int(last); slot++ {
			if got := l.SlotSegment(uint16(slot)); got != s {
				t.Fatalf("%+v: SlotSegment(%d) = %d, but SegmentSlots(%d) = [%d, %d]", l, slot, got, s, first, last)
			}
		}
		next = int(last) + 1
	}
	if next != NumSlots {
		t.Fatalf("%+v: segments cover slots [0, %d), want [0, %d)", l, next, NumSlots)
	}
	nextSegment := 0
	for p := range l.Partitions {
		first, end := l.PartitionSegments(p)
		if first != nextSegment || end <= first {
			t.Fatalf("%+v: partition %d segments [%d, %d), want to start at %d", l, p, first, end, nextSegment)
		}
		for s := first; s < end; s++ {
			if got := l.SegmentPartition(s); got != p {
				t.Fatalf("%+v: SegmentPartition(%d) = %d, but PartitionSegments(%d) = [%d, %d)", l, s, got, p, first, end)
			}
		}
		firstSlot, lastSlot := l.PartitionSlots(p)
		for slot := int(firstSlot); slot <= int(lastSlot); slot++ {
			if got := l.SlotPartition(uint16(slot)); got != p {
				t.Fatalf("%+v: SlotPartition(%d) = %d, but PartitionSlots(%d) = [%d, %d]", l, slot, got, p, firstSlot, lastSlot)
			}
		}
		if wantFirst, _ := l.SegmentSlots(first); firstSlot != wantFirst {
			t.Fatalf("%+v: PartitionSlots(%d) starts at %d, its first segment at %d", l, p, firstSlot, wantFirst)
		}
		if _, wantLast := l.SegmentSlots(end - 1); lastSlot != wantLast {
			t.Fatalf("%+v: PartitionSlots(%d) ends at %d, its last segment at %d", l, p, lastSlot, wantLast)
		}
		nextSegment = end
	}
	if nextSegment != l.Segments {
		t.Fatalf("%+v: partitions cover segments [0, %d), want [0, %d)", l, nextSegment, l.Segments)
	}
}

func TestLayoutInverseExhaustive(t *testing.T) {
	layouts := [][2]int{
		{DefaultSegments, DefaultPartitions}, {NumSlots, NumSlots}, {NumSlots, DefaultPartitions}, {NumSlots, 1},
		{1024, 1024}, {1, 1}, {1024, 1}, {997, 61}, {997, 997}, {16383, 8191}, {3, 2}, {5000, 4999},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		s := 1 + rng.IntN(NumSlots)
		layouts = append(layouts, [2]int{s, 1 + rng.IntN(s)})
	}
	for _, c := range layouts {
		l, err := NewLayout(c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		checkLayoutInverse(t, l)
	}
}

func TestLayoutSizesAreEven(t *testing.T) {
	for _, c := range [][2]int{{DefaultSegments, DefaultPartitions}, {997, 61}, {16383, 10}} {
		l, _ := NewLayout(c[0], c[1])
		minSlots, maxSlots := NumSlots, 0
		for s := range l.Segments {
			first, last := l.SegmentSlots(s)
			minSlots, maxSlots = min(minSlots, int(last-first)+1), max(maxSlots, int(last-first)+1)
		}
		minSegs, maxSegs := l.Segments, 0
		for p := range l.Partitions {
			first, end := l.PartitionSegments(p)
			minSegs, maxSegs = min(minSegs, end-first), max(maxSegs, end-first)
		}
		if maxSlots-minSlots > 1 || maxSegs-minSegs > 1 {
			t.Errorf("%+v: segments hold %d..%d slots, partitions %d..%d segments", l, minSlots, maxSlots, minSegs, maxSegs)
		}
	}
	l := DefaultLayout()
	if first, last := l.SegmentSlots(1); first != 16 || last != 31 {
		t.Errorf("default segment 1 = slots [%d, %d], want [16, 31]", first, last)
	}
	if first, end := l.PartitionSegments(127); first != 1016 || end != 1024 {
		t.Errorf("default partition 127 = segments [%d, %d), want [1016, 1024)", first, end)
	}
}

func TestLayoutKeyFunctions(t *testing.T) {
	l, _ := NewLayout(997, 61)
	for i := range 5000 {
		k := fmt.Sprintf("key:%d", i)
		if i%3 == 0 {
			k += fmt.Sprintf("{tag%d}", i%37)
		}
		slot := KeySlot(k)
		if got, want := l.KeySegment(k), l.SlotSegment(slot); got != want {
			t.Fatalf("KeySegment(%q) = %d, want %d", k, got, want)
		}
		if got, want := l.KeySegmentBytes([]byte(k)), l.SlotSegment(slot); got != want {
			t.Fatalf("KeySegmentBytes(%q) = %d, want %d", k, got, want)
		}
		if got, want := l.KeyPartition(k), l.SlotPartition(slot); got != want {
			t.Fatalf("KeyPartition(%q) = %d, want %d", k, got, want)
		}
		if got, want := l.KeyPartitionBytes([]byte(k)), l.SlotPartition(slot); got != want {
			t.Fatalf("KeyPartitionBytes(%q) = %d, want %d", k, got, want)
		}
	}
}

func TestLayoutPanicsOutOfRange(t *testing.T) {
	l := DefaultLayout()
	for name, f := range map[string]func(){
		"SlotSegment(NumSlots)":      func() { l.SlotSegment(NumSlots) },
		"SegmentPartition(-1)":       func() { l.SegmentPartition(-1) },
		"SegmentPartition(Segments)": func() { l.SegmentPartition(l.Segments) },
		"SegmentSlots(Segments)":     func() { l.SegmentSlots(l.Segments) },
		"PartitionSegments(-1)":      func() { l.PartitionSegments(-1) },
		"PartitionSlots(Partitions)": func() { l.PartitionSlots(l.Partitions) },
		"SlotPartition(0xFFFF)":      func() { l.SlotPartition(0xFFFF) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "out of range") {
					t.Errorf("%s: recovered %v, want an out-of-range panic", name, r)
				}
			}()
			f()
		}()
	}
}

func FuzzLayout(f *testing.F) {
	f.Add(uint16(1024), uint16(128), uint16(0))
	f.Add(uint16(997), uint16(61), uint16(16383))
	f.Add(uint16(16383), uint16(16383), uint16(8191))
	f.Fuzz(func(t *testing.T, segments, partitions, slot uint16) {
		l, err := NewLayout(int(segments), int(partitions))
		valid := segments >= 1 && segments <= NumSlots && partitions >= 1 && partitions <= segments
		if valid != (err == nil) {
			t.Fatalf("NewLayout(%d, %d) error = %v", segments, partitions, err)
		}
		if err != nil {
			return
		}
		slot %= NumSlots
		s := l.SlotSegment(slot)
		if first, last := l.SegmentSlots(s); slot < first || slot > last {
			t.Fatalf("%+v: slot %d in segment %d = [%d, %d]", l, slot, s, first, last)
		}
		p := l.SegmentPartition(s)
		if first, end := l.PartitionSegments(p); s < first || s >= end {
			t.Fatalf("%+v: segment %d in partition %d = [%d, %d)", l, s, p, first, end)
		}
		if first, last := l.PartitionSlots(p); slot < first || slot > last {
			t.Fatalf("%+v: slot %d in partition %d = slots [%d, %d]", l, slot, p, first, last)
		}
	})
}

// placementNodeIDs returns n distinct node IDs.
func placementNodeIDs(n int) []NodeID {
	ids := make([]NodeID, n)
	for i := range ids {
		ids[i] = NodeID(fmt.Sprintf("node-%02d", i))
	}
	return ids
}

// placementHoldings counts, per node, the copies and the primaries it holds in a.
func placementHoldings(a Assignment) (copies, primaries map[NodeID]int) {
	copies, primaries = map[NodeID]int{}, map[NodeID]int{}
	for _, nodes := range a {
		for i, n := range nodes {
			copies[n]++
			if i == 0 {
				primaries[n]++
			}
		}
	}
	return copies, primaries
}

// checkAssignment verifies the invariants of Assign's result over the live nodes.
func checkAssignment(t *testing.T, a Assignment, live []NodeID, partitions, rf int) {
	t.Helper()
	if len(a) != partitions {
		t.Fatalf("%d partitions, want %d", len(a), partitions)
	}
	want := min(rf, len(live))
	for p, nodes := range a {
		if len(nodes) != want {
			t.Fatalf("partition %d has %d nodes %v, want %d", p, len(nodes), nodes, want)
		}
		if want == 0 && nodes != nil {
			t.Fatalf("partition %d is empty but not nil", p)
		}
		for i, n := range nodes {
			if !slices.Contains(live, n) {
				t.Fatalf("partition %d is on %q, which is not live", p, n)
			}
			if slices.Contains(nodes[:i], n) {
				t.Fatalf("partition %d lists %q twice: %v", p, n, nodes)
			}
		}
	}
	copies, primaries := placementHoldings(a)
	if spread := placementSpread(copies, live); spread > 1 {
		t.Fatalf("copies per node differ by %d: %v", spread, copies)
	}
	if spread := placementSpread(primaries, live); want > 0 && spread > 1 {
		t.Fatalf("primaries per node differ by %d: %v", spread, primaries)
	}
}

func placementSpread(count map[NodeID]int, live []NodeID) int {
	if len(live) == 0 {
		return 0
	}
	lo, hi := count[live[0]], count[live[0]]
	for _, n := range live {
		lo, hi = min(lo, count[n]), max(hi, count[n])
	}
	return hi - lo
}

func TestAssignEdgeCases(t *testing.T) {
	if a := Assign(nil, placementNodeIDs(3), 0, 2); len(a) != 0 {
		t.Errorf("0 partitions: %v", a)
	}
	if a := Assign(nil, placementNodeIDs(3), -4, 2); len(a) != 0 {
		t.Errorf("-4 partitions: %v", a)
	}
	checkAssignment(t, Assign(nil, nil, 16, 2), nil, 16, 2)
	checkAssignment(t, Assign(nil, placementNodeIDs(3), 16, 0), placementNodeIDs(3), 16, 0)
	checkAssignment(t, Assign(nil, placementNodeIDs(3), 16, 5), placementNodeIDs(3), 16, 5)
	checkAssignment(t, Assign(nil, placementNodeIDs(20), 7, 3), placementNodeIDs(20), 7, 3) // more nodes than partitions
	checkAssignment(t, Assign(nil, placementNodeIDs(1), 1, 1), placementNodeIDs(1), 1, 1)

	// A previous map of another length is ignored.
	fresh := Assign(nil, placementNodeIDs(4), 10, 2)
	if got := Assign(Assign(nil, placementNodeIDs(5), 11, 2), placementNodeIDs(4), 10, 2); !equalAssignments(got, fresh) {
		t.Errorf("a previous map of 11 partitions changed the map of 10:\n%v\n%v", got, fresh)
	}
	// Unknown and repeated nodes in prev are ignored.
	prev := Assignment{{"gone", "node-01", "node-01"}, {"node-00", "gone"}, nil, {"node-02", "node-02"}}
	checkAssignment(t, Assign(prev, placementNodeIDs(3), 4, 2), placementNodeIDs(3), 4, 2)
}

func equalAssignments(a, b Assignment) bool {
	return slices.EqualFunc(a, b, func(x, y []NodeID) bool { return slices.Equal(x, y) })
}

func TestAssignIsStable(t *testing.T) {
	for _, c := range []struct{ nodes, parts, rf int }{{10, 128, 3}, {3, 7, 2}, {12, 97, 1}, {5, 16384, 2}} {
		nodes := placementNodeIDs(c.nodes)
		a := Assign(nil, nodes, c.parts, c.rf)
		checkAssignment(t, a, nodes, c.parts, c.rf)
		if again := Assign(a, nodes, c.parts, c.rf); !equalAssignments(again, a) {
			t.Errorf("%+v: reassigning a balanced map over the same nodes changed it", c)
		}
	}
}

func TestAssignIgnoresNodeOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	nodes := placementNodeIDs(9)
	prev := Assign(nil, nodes[:6], 97, 3)
	want := Assign(prev, nodes, 97, 3)
	for range 20 {
		shuffled := slices.Clone(nodes)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled = append(shuffled, shuffled[:rng.IntN(4)]...) // repetitions do not count either
		if got := Assign(prev, shuffled, 97, 3); !equalAssignments(got, want) {
			t.Fatalf("node order %v changed the map", shuffled)
		}
	}
}

func TestAssignmentMoves(t *testing.T) {
	a := Assignment{{"a", "b"}, {"b", "c"}, {"c", "a"}, nil}
	b := Assignment{{"a", "c"}, {"c", "b"}, {"c", "a"}, {"a"}, {"b"}}
	copies, primaries := a.Moves(b)
	// New copies: c on 0, a on 3, b on 4. New primaries: 1 (b -> c), 3 (none -> a), 4 (absent -> b).
	if copies != 3 || primaries != 3 {
		t.Errorf("Moves = %d copies, %d primaries; want 3, 3", copies, primaries)
	}
	if copies, primaries := b.Moves(a); copies != 1 || primaries != 3 {
		t.Errorf("reverse Moves = %d copies, %d primaries; want 1, 3", copies, primaries)
	}
	if copies, primaries := a.Moves(a); copies != 0 || primaries != 0 {
		t.Errorf("Moves to itself = %d, %d", copies, primaries)
	}
}

// assignStep is one topology change of a property run.
type assignStep struct {
	joined, left NodeID // one of them is set
}

// randomAssignSteps returns a seeded sequence of joins and leaves that keeps between 1 and maxNodes nodes alive.
func randomAssignSteps(rng *rand.Rand, count, maxNodes int) []assignStep {
	pool := placementNodeIDs(2 * maxNodes)
	var live []NodeID
	steps := make([]assignStep, 0, count)
	for range count {
		join := len(live) == 0 || len(live) < maxNodes && rng.IntN(2) == 0
		if join {
			var free []NodeID
			for _, n := range pool {
				if !slices.Contains(live, n) {
					free = append(free, n)
				}
			}
			n := free[rng.IntN(len(free))]
			live = append(live, n)
			steps = append(steps, assignStep{joined: n})
		} else {
			i := rng.IntN(len(live))
			steps = append(steps, assignStep{left: live[i]})
			live = slices.Delete(live, i, i+1)
		}
	}
	return steps
}

// idealAssignMoves returns the fewest copies and primaries a single join or leave can move: a newcomer's final share,
// or what the leaver held (nothing when every partition was already on every node).
func idealAssignMoves(prev, next Assignment, s assignStep, liveAfter, rf int) (copies, primaries int) {
	if s.joined != "" {
		copies, primaries := placementHoldings(next)
		return copies[s.joined], primaries[s.joined]
	}
	held, led := placementHoldings(prev)
	if liveAfter < rf {
		return 0, led[s.left]
	}
	return held[s.left], led[s.left]
}

// TestAssignProperties runs seeded random sequences of joins and leaves and checks every map: the invariants,
// independence from node order, and movement. A join moves exactly the newcomer's copies, never more than its
// fair share and never between old nodes; a leave re-homes exactly the leaver's copies. (Balance can force one
// more exchange on a leave when partitions are very few per node, see TestAssignForcedSwap; these sequences
// never need one.)
func TestAssignProperties(t *testing.T) {
	t.Parallel()
	for _, parts := range []int{7, 97, 128} {
		for rf := 1; rf <= 3; rf++ {
			t.Run(fmt.Sprintf("P=%d/R=%d", parts, rf), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(parts), uint64(rf)))
				var live []NodeID
				var a Assignment
				var moved, ideal, movedPrimaries, idealPrimaries int
				for i, s := range randomAssignSteps(rng, 200, 12) {
					if s.joined != "" {
						live = append(live, s.joined)
					} else {
						live = slices.DeleteFunc(live, func(n NodeID) bool { return n == s.left })
					}
					next := Assign(a, live, parts, rf)
					checkAssignment(t, next, live, parts, rf)

					shuffled := slices.Clone(live)
					rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
					if !equalAssignments(Assign(a, shuffled, parts, rf), next) {
						t.Fatalf("step %d: node order changed the map", i)
					}

					copies, primaries := a.Moves(next)
					wantCopies, wantPrimaries := idealAssignMoves(a, next, s, len(live), rf)
					if copies != wantCopies {
						t.Fatalf("step %d (%+v, %d nodes): %d copies moved, ideal %d", i, s, len(live), copies, wantCopies)
					}
					if s.joined != "" {
						share := ceilDiv(parts*min(rf, len(live)), len(live))
						if copies > share {
							t.Fatalf("step %d: join moved %d copies, more than the fair share %d", i, copies, share)
						}
						checkOnlyNewcomerGains(t, a, next, s.joined)
					}
					// Primaries are optimal for the chosen holders (TestAssignIsOptimal), but the holders are
					// chosen for copies first, so a assignStep may move a primary or two more than the ideal.
					if primaries > wantPrimaries+2 {
						t.Fatalf("step %d (%+v): %d primaries moved, ideal %d", i, s, primaries, wantPrimaries)
					}
					moved, ideal = moved+copies, ideal+wantCopies
					movedPrimaries, idealPrimaries = movedPrimaries+primaries, idealPrimaries+wantPrimaries
					a = next
				}
				t.Logf("copies moved %d (ideal %d), primaries moved %d (ideal %d)", moved, ideal, movedPrimaries, idealPrimaries)
				if movedPrimaries > idealPrimaries+idealPrimaries/10 {
					t.Errorf("primaries moved %d, more than 10%% over the ideal %d", movedPrimaries, idealPrimaries)
				}
			})
		}
	}
}

// checkOnlyNewcomerGains checks that after a join every copy that moved went to the newcomer.
func checkOnlyNewcomerGains(t *testing.T, prev, next Assignment, newcomer NodeID) {
	t.Helper()
	for p := range next {
		for _, n := range next[p] {
			if n != newcomer && !slices.Contains(prev[p], n) {
				t.Fatalf("partition %d moved to old node %q on a join: %v -> %v", p, n, prev[p], next[p])
			}
		}
	}
}

// TestAssignMovementRatio grows a cluster one node at a time from 1 to 10 nodes and shrinks it back, and checks
// that each assignStep moves exactly the ideal number of copies, and at most one primary more than the ideal.
func TestAssignMovementRatio(t *testing.T) {
	const parts = DefaultPartitions
	for rf := 1; rf <= 3; rf++ {
		nodes := placementNodeIDs(10)
		var a Assignment
		var totalMoved, totalIdeal int
		report := func(what string, s assignStep, live int, next Assignment) {
			copies, primaries := a.Moves(next)
			wantCopies, wantPrimaries := idealAssignMoves(a, next, s, live, rf)
			t.Logf("rf=%d %-10s -> %2d nodes: copies moved %3d ideal %3d (%.2f), primaries moved %3d ideal %3d",
				rf, what, live, copies, wantCopies, moveRatio(copies, wantCopies), primaries, wantPrimaries)
			if copies != wantCopies {
				t.Errorf("rf=%d %s: %d copies moved, ideal %d", rf, what, copies, wantCopies)
			}
			if primaries > wantPrimaries+1 {
				t.Errorf("rf=%d %s: %d primaries moved, ideal %d", rf, what, primaries, wantPrimaries)
			}
			totalMoved, totalIdeal = totalMoved+copies, totalIdeal+wantCopies
			a = next
		}
		for n := 1; n <= len(nodes); n++ {
			report("join "+string(nodes[n-1]), assignStep{joined: nodes[n-1]}, n, Assign(a, nodes[:n], parts, rf))
		}
		for n := len(nodes) - 1; n >= 1; n-- {
			// Leave from the middle of the sorted order, so indexes of the remaining nodes shift.
			leaver := nodes[n/2]
			nodes = slices.Delete(nodes, n/2, n/2+1)
			report("leave "+string(leaver), assignStep{left: leaver}, n, Assign(a, nodes, parts, rf))
		}
		if r := moveRatio(totalMoved, totalIdeal); r != 1 {
			t.Errorf("rf=%d: moved/ideal = %.3f over the whole run, want 1", rf, r)
		}
	}
}

func moveRatio(moved, ideal int) float64 {
	if ideal == 0 {
		if moved == 0 {
			return 1
		}
		return float64(moved)
	}
	return float64(moved) / float64(ideal)
}

// TestAssignForcedSwap covers a leave that cannot be handled by re-homing the leaver's copies alone. Three
// partitions, two copies each, four nodes: d leaves. Balance then needs two copies on each of a, b and c, but c
// already holds the only partition that lost a copy, and a and b are full. One copy must move from a or b to c
// so that the freed node can take partition 2: two copies move for one lost.
func TestAssignForcedSwap(t *testing.T) {
	prev := Assignment{{"a", "b"}, {"b", "a"}, {"c", "d"}}
	next := Assign(prev, []NodeID{"a", "b", "c"}, 3, 2)
	checkAssignment(t, next, []NodeID{"a", "b", "c"}, 3, 2)
	if copies, _ := prev.Moves(next); copies != 2 {
		t.Errorf("%v -> %v moved %d copies, want 2 (the least possible)", prev, next, copies)
	}
}

// TestAssignIsOptimal compares Assign with an exhaustive search on small random cases: no balanced map keeps
// more previous copies, and no balanced choice of primaries over the chosen holders keeps more primaries.
func TestAssignIsOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pool := []NodeID{"a", "b", "c", "d", "e", "f"}
	for trial := range 300 {
		parts, rf := 1+rng.IntN(5), 1+rng.IntN(3)
		live := slices.Clone(pool[:1+rng.IntN(4)])
		prev := make(Assignment, parts)
		for p := range prev {
			for range rng.IntN(5) {
				prev[p] = append(prev[p], pool[rng.IntN(len(pool))]) // gone nodes and repeats included
			}
		}
		next := Assign(prev, live, parts, rf)
		checkAssignment(t, next, live, parts, rf)
		copies, primaries := prev.Moves(next)
		bestCopies, bestPrimaries := bruteForceMoves(prev, next, live, parts, min(rf, len(live)))
		if copies != bestCopies || primaries != bestPrimaries {
			t.Fatalf("trial %d: %v over %v (rf %d) -> %v moves %d copies and %d primaries; best is %d and %d",
				trial, prev, live, rf, next, copies, primaries, bestCopies, bestPrimaries)
		}
	}
}

// bruteForceMoves returns the fewest copies any balanced map can move from prev, and the fewest primaries any
// balanced choice of primaries over next's holders can move.
func bruteForceMoves(prev, next Assignment, live []NodeID, parts, copies int) (bestCopies, bestPrimaries int) {
	var subsets [][]NodeID // every set of `copies` live nodes
	var build func(from int, cur []NodeID)
	build = func(from int, cur []NodeID) {
		if len(cur) == copies {
			subsets = append(subsets, slices.Clone(cur))
			return
		}
		for i := from; i < len(live); i++ {
			build(i+1, append(cur, live[i]))
		}
	}
	build(0, nil)

	bestCopies = parts*copies + 1
	candidate := make(Assignment, parts)
	var search func(p int)
	search = func(p int) {
		if p == parts {
			held, _ := placementHoldings(candidate)
			if placementSpread(held, live) <= 1 {
				moved, _ := prev.Moves(candidate)
				bestCopies = min(bestCopies, moved)
			}
			return
		}
		for _, s := range subsets {
			candidate[p] = s
			search(p + 1)
		}
	}
	search(0)

	bestPrimaries = parts + 1
	var choose func(p int)
	choose = func(p int) {
		if p == parts {
			if _, led := placementHoldings(candidate); placementSpread(led, live) <= 1 {
				_, moved := prev.Moves(candidate)
				bestPrimaries = min(bestPrimaries, moved)
			}
			return
		}
		for _, n := range next[p] {
			candidate[p] = []NodeID{n} // only the primary matters here
			choose(p + 1)
		}
	}
	choose(0)
	return bestCopies, bestPrimaries
}

// TestAssignNeverFails feeds Assign arbitrary previous maps (unbalanced, with gone nodes, repeats and
// partitions of every size) over random node sets, and checks the invariants of every result.
func TestAssignNeverFails(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	pool := placementNodeIDs(24)
	for trial := range 300 {
		parts, rf := 1+rng.IntN(200), 1+rng.IntN(5)
		live := slices.Clone(pool[:rng.IntN(20)])
		rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
		prev := make(Assignment, parts)
		for p := range prev {
			for range rng.IntN(2 * rf) {
				prev[p] = append(prev[p], pool[rng.IntN(len(pool))])
			}
		}
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("%d partitions, rf %d, nodes %v, prev %v", parts, rf, live, prev)
				}
			}()
			checkAssignment(t, Assign(prev, live, parts, rf), live, parts, rf)
		})
	}
}

func TestAssignLargeMap(t *testing.T) {
	if testing.Short() {
		t.Skip("large map")
	}
	const parts = NumSlots
	nodes := placementNodeIDs(12)
	a := Assign(nil, nodes[:11], parts, 3)
	checkAssignment(t, a, nodes[:11], parts, 3)
	joined := Assign(a, nodes, parts, 3)
	checkAssignment(t, joined, nodes, parts, 3)
	copies, _ := a.Moves(joined)
	if held, _ := placementHoldings(joined); copies != held[nodes[11]] {
		t.Errorf("join moved %d copies, the newcomer holds %d", copies, held[nodes[11]])
	}
	left := Assign(joined, slices.Delete(slices.Clone(nodes), 4, 5), parts, 3)
	checkAssignment(t, left, slices.Delete(slices.Clone(nodes), 4, 5), parts, 3)
	copies, _ = joined.Moves(left)
	if held, _ := placementHoldings(joined); copies != held[nodes[4]] {
		t.Errorf("leave moved %d copies, the leaver held %d", copies, held[nodes[4]])
	}
}

func TestAssignReplicationChange(t *testing.T) {
	nodes := placementNodeIDs(6)
	a := Assign(nil, nodes, DefaultPartitions, 2)
	up := Assign(a, nodes, DefaultPartitions, 3)
	checkAssignment(t, up, nodes, DefaultPartitions, 3)
	if copies, primaries := a.Moves(up); copies != DefaultPartitions || primaries != 0 {
		t.Errorf("rf 2 -> 3 moved %d copies and %d primaries, want %d and 0", copies, primaries, DefaultPartitions)
	}
	down := Assign(up, nodes, DefaultPartitions, 1)
	checkAssignment(t, down, nodes, DefaultPartitions, 1)
	if copies, primaries := up.Moves(down); copies != 0 || primaries != 0 {
		t.Errorf("rf 3 -> 1 moved %d copies and %d primaries, want 0 and 0", copies, primaries)
	}
}

func BenchmarkKeyPartition(b *testing.B) {
	keys := []string{
		"user:1000:profil", "session:8f2a9c1b", "order:000000042", "cart:item:77781",
		"metrics:cpu:host", "k:0123456789abc", "feed:timeline:9", "lock:job:318842",
	}
	l := DefaultLayout()
	b.ReportAllocs()
	var sink int
	for i := 0; b.Loop(); i++ {
		sink += l.KeyPartition(keys[i&7])
	}
	_ = sink
}

func BenchmarkAssign(b *testing.B) {
	nodes := placementNodeIDs(10)
	for _, c := range []struct {
		name string
		from []NodeID
		to   []NodeID
	}{
		{"join", nodes[:9], nodes},
		{"leave", nodes, slices.Delete(slices.Clone(nodes), 3, 4)},
		{"same", nodes, nodes},
	} {
		b.Run(c.name, func(b *testing.B) {
			prev := Assign(nil, c.from, DefaultPartitions, 3)
			b.ReportAllocs()
			for b.Loop() {
				Assign(prev, c.to, DefaultPartitions, 3)
			}
		})
	}
}
