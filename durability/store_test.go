package durability

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// newStoreFunc opens a fresh, empty store that the test owns.
type newStoreFunc func(t *testing.T) Store

func TestMemoryConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts MemoryOptions
		skip []string
	}{
		{"default", MemoryOptions{}, nil},
		// Bounds above what any case appends to one segment: nothing is dropped, every call takes the
		// bounded path.
		{"bounded", MemoryOptions{RetainOps: 1000, RetainBytes: 1 << 20}, nil},
		{"shared-values", MemoryOptions{RetainOps: 1000, RetainBytes: 1 << 20, ShareValues: true}, []string{"ValueCopied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testConformance(t, func(t *testing.T) Store {
				s := NewMemoryWith(tc.opts)
				t.Cleanup(func() { s.Close() })
				return s
			}, tc.skip...)
		})
	}
}

func TestPebbleConformance(t *testing.T) {
	testConformance(t, func(t *testing.T) Store {
		return openPebble(t, t.TempDir())
	})
}

// openPebble opens the store in dir and closes it when the test ends.
func openPebble(t testing.TB, dir string) *Pebble {
	t.Helper()
	s, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testConformance runs the behaviour every Store shares, but for the cases named in skip.
func testConformance(t *testing.T, newStore newStoreFunc, skip ...string) {
	tests := []struct {
		name string
		run  func(t *testing.T, s Store)
	}{
		{"AppendAndRead", testAppendAndRead},
		{"Limits", testLimits},
		{"SegmentsInterleaved", testSegmentsInterleaved},
		{"ManySegmentsOneCall", testManySegmentsOneCall},
		{"GapRefused", testGapRefused},
		{"OrderRefused", testOrderRefused},
		{"InvalidOpRefused", testInvalidOpRefused},
		{"RefusalIsPerSegment", testRefusalIsPerSegment},
		{"ValueCopied", testValueCopied},
		{"Deletes", testDeletes},
		{"Truncate", testTruncate},
		{"TruncateEverything", testTruncateEverything},
		{"TruncatePastEnd", testTruncatePastEnd},
		{"TruncateFresh", testTruncateFresh},
		{"LogBytes", testLogBytes},
		{"Snapshots", testSnapshots},
		{"SnapshotCopied", testSnapshotCopied},
		{"Segments", testSegments},
		{"ResetThenAppend", testResetThenAppend},
		{"ResetThenSnapshot", testResetThenSnapshot},
		{"ResetFresh", testResetFresh},
		{"Sync", testSync},
		{"Closed", testClosed},
		{"Concurrent", testConcurrent},
	}
	for _, tt := range tests {
		if slices.Contains(skip, tt.name) {
			continue
		}
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newStore(t)) })
	}
}

func mustAppend(t testing.TB, s Store, ops []Op) {
	t.Helper()
	if err := s.Append(ops); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

func mustOps(t testing.TB, s Store, segment uint32, after uint64, limit int) []Op {
	t.Helper()
	ops, err := s.Ops(segment, after, limit)
	if err != nil {
		t.Fatalf("Ops(%d, %d, %d): %v", segment, after, limit, err)
	}
	return ops
}

func checkBounds(t testing.TB, s Store, segment uint32, wantFirst, wantLast uint64) {
	t.Helper()
	first, last, err := s.Bounds(segment)
	if err != nil {
		t.Fatalf("Bounds(%d): %v", segment, err)
	}
	if first != wantFirst || last != wantLast {
		t.Fatalf("Bounds(%d) = (%d, %d), want (%d, %d)", segment, first, last, wantFirst, wantLast)
	}
}

func checkTruncated(t testing.TB, s Store, segment uint32, after uint64) {
	t.Helper()
	if ops, err := s.Ops(segment, after, 0); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Ops(%d, %d) = %d ops, %v; want ErrTruncated", segment, after, len(ops), err)
	}
}

func logBytes(t testing.TB, s Store, segment uint32) int64 {
	t.Helper()
	n, err := s.LogBytes(segment)
	if err != nil {
		t.Fatalf("LogBytes(%d): %v", segment, err)
	}
	return n
}

func testAppendAndRead(t *testing.T, s Store) {
	checkBounds(t, s, 3, 0, 0)
	if ops := mustOps(t, s, 3, 0, 0); len(ops) != 0 {
		t.Fatalf("fresh segment has %d ops", len(ops))
	}
	all := putOps(3, 1, 10)
	mustAppend(t, s, all[:4])
	mustAppend(t, s, all[4:])
	checkBounds(t, s, 3, 1, 10)
	checkOps(t, mustOps(t, s, 3, 0, 0), all)
	checkOps(t, mustOps(t, s, 3, 6, 0), all[6:])
	for _, after := range []uint64{10, 11, 1 << 63, ^uint64(0)} {
		if ops := mustOps(t, s, 3, after, 0); len(ops) != 0 {
			t.Fatalf("Ops after %d returned %d ops", after, len(ops))
		}
	}
	checkBounds(t, s, 4, 0, 0)
	if err := s.Append(nil); err != nil {
		t.Fatalf("empty Append: %v", err)
	}
}

func testLimits(t *testing.T, s Store) {
	all := putOps(0, 1, 20)
	mustAppend(t, s, all)
	for _, tc := range []struct {
		after uint64
		limit int
		want  []Op
	}{
		{0, 5, all[:5]},
		{5, 5, all[5:10]},
		{17, 5, all[17:]},
		{0, 20, all},
		{0, 1000, all},
		{3, 0, all[3:]},
		{3, -1, all[3:]},
		{19, 1, all[19:]},
	} {
		t.Run(fmt.Sprintf("after%d_limit%d", tc.after, tc.limit), func(t *testing.T) {
			checkOps(t, mustOps(t, s, 0, tc.after, tc.limit), tc.want)
		})
	}
}

func testSegmentsInterleaved(t *testing.T, s Store) {
	var ops []Op
	for rev := uint64(1); rev <= 5; rev++ {
		for _, segment := range []uint32{7, 2, 0xFFFFFFFF, 0} {
			ops = append(ops, putOp(segment, rev))
		}
	}
	mustAppend(t, s, ops)
	for _, segment := range []uint32{7, 2, 0xFFFFFFFF, 0} {
		checkBounds(t, s, segment, 1, 5)
		checkOps(t, mustOps(t, s, segment, 0, 0), putOps(segment, 1, 5))
	}
	checkBounds(t, s, 1, 0, 0)
	checkBounds(t, s, 6, 0, 0)
}

// testManySegmentsOneCall appends to more segments in one call than Append searches linearly.
func testManySegmentsOneCall(t *testing.T, s Store) {
	const segments = 3 * linearLimit
	var ops []Op
	for rev := uint64(1); rev <= 4; rev++ {
		for segment := uint32(segments); segment > 0; segment-- {
			ops = append(ops, putOp(segment*1000, rev))
		}
	}
	mustAppend(t, s, ops)
	// Revisions 5 and 6 everywhere, then late gaps in the first and last segments.
	more := slices.Clone(ops[:2*segments])
	for i := range more {
		more[i] = putOp(more[i].Segment, more[i].Revision+4)
	}
	more = append(more, putOp(segments*1000, 8), putOp(1000, 9))
	if err := s.Append(more); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("Append with late gaps = %v, want ErrOutOfOrder", err)
	}
	for segment := uint32(1); segment <= segments; segment++ {
		last := uint64(6)
		if segment == 1 || segment == segments {
			last = 4
		}
		checkBounds(t, s, segment*1000, 1, last)
		checkOps(t, mustOps(t, s, segment*1000, 0, 0), putOps(segment*1000, 1, last))
		if n := logBytes(t, s, segment*1000); n <= 0 {
			t.Fatalf("segment %d holds %d bytes", segment*1000, n)
		}
	}
}

func testGapRefused(t *testing.T, s Store) {
	mustAppend(t, s, putOps(1, 1, 3))
	for _, ops := range [][]Op{
		{putOp(1, 5)},
		{putOp(1, 4), putOp(1, 6)},
		{putOp(2, 2)}, // a new segment starts at 1
	} {
		if err := s.Append(ops); !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("Append(%d..) = %v, want ErrOutOfOrder", ops[0].Revision, err)
		}
	}
	checkBounds(t, s, 1, 1, 3)
	checkBounds(t, s, 2, 0, 0)
	checkOps(t, mustOps(t, s, 1, 0, 0), putOps(1, 1, 3))
}

func testOrderRefused(t *testing.T, s Store) {
	mustAppend(t, s, putOps(1, 1, 3))
	for _, ops := range [][]Op{
		{putOp(1, 3)},
		{putOp(1, 2)},
		{putOp(1, 0)},
		{putOp(1, 4), putOp(1, 4)},
		{putOp(1, 5), putOp(1, 4)},
		{putOp(9, 0)},
	} {
		if err := s.Append(ops); !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("Append(%v) = %v, want ErrOutOfOrder", ops, err)
		}
	}
	checkBounds(t, s, 1, 1, 3)
}

func testInvalidOpRefused(t *testing.T, s Store) {
	bad := putOp(1, 1)
	bad.Kind = 0
	withValue := Op{Segment: 1, Revision: 1, Kind: OpDelete, Key: "k", Value: []byte("v")}
	expiryWithValue := Op{Segment: 1, Revision: 1, Kind: OpExpire, Key: "k", Value: []byte("v")}
	for _, op := range []Op{bad, withValue, expiryWithValue} {
		if err := s.Append([]Op{op}); !errors.Is(err, ErrInvalidOp) {
			t.Fatalf("Append(%+v) = %v, want ErrInvalidOp", op, err)
		}
	}
	checkBounds(t, s, 1, 0, 0)
}

// testRefusalIsPerSegment checks that a refused segment keeps none of its ops of the call while the
// other segments keep all of theirs.
func testRefusalIsPerSegment(t *testing.T, s Store) {
	mustAppend(t, s, putOps(4, 1, 2))
	invalid := putOp(5, 2)
	invalid.Kind = 99
	var ops []Op
	for rev := uint64(1); rev <= 5; rev++ {
		ops = append(ops, putOp(1, rev), putOp(2, rev), putOp(4, rev+2))
	}
	ops = append(ops, putOp(3, 2))              // a new segment must start at 1
	ops = append(ops, putOp(4, 7), putOp(4, 9)) // segment 4: fine up to 7, then a gap
	ops = append(ops, putOp(5, 1), invalid)     // segment 5: an invalid second op
	err := s.Append(ops)
	if !errors.Is(err, ErrOutOfOrder) || !errors.Is(err, ErrInvalidOp) {
		t.Fatalf("Append = %v, want ErrOutOfOrder and ErrInvalidOp", err)
	}
	for _, mention := range []string{"segment 3", "segment 4", "segment 5"} {
		if !strings.Contains(err.Error(), mention) {
			t.Errorf("error %q does not name %s", err, mention)
		}
	}
	for _, segment := range []uint32{1, 2} {
		checkBounds(t, s, segment, 1, 5)
		checkOps(t, mustOps(t, s, segment, 0, 0), putOps(segment, 1, 5))
	}
	checkBounds(t, s, 4, 1, 2)
	checkOps(t, mustOps(t, s, 4, 0, 0), putOps(4, 1, 2))
	for _, segment := range []uint32{3, 5} {
		checkBounds(t, s, segment, 0, 0)
		if n := logBytes(t, s, segment); n != 0 {
			t.Fatalf("segment %d holds %d bytes after a refused append", segment, n)
		}
	}
	if segs, err := s.Segments(); err != nil || !slices.Equal(segs, []uint32{1, 2, 4}) {
		t.Fatalf("Segments = %v, %v; want [1 2 4]", segs, err)
	}
}

func testValueCopied(t *testing.T, s Store) {
	op := putOp(1, 1)
	want := slices.Clone(op.Value)
	mustAppend(t, s, []Op{op})
	op.Value[0] ^= 0xFF
	got := mustOps(t, s, 1, 0, 0)
	if string(got[0].Value) != string(want) {
		t.Fatalf("stored value changed with the caller's buffer: %q", got[0].Value)
	}
}

func testDeletes(t *testing.T, s Store) {
	ops := []Op{
		putOp(1, 1),
		{Segment: 1, Revision: 2, Epoch: 3, Kind: OpDelete, Key: "gone", Version: 4, Time: 5},
		{Segment: 1, Revision: 3, Epoch: 3, Kind: OpPut, Key: "", Value: []byte{}, Version: 1},
		{Segment: 1, Revision: 4, Epoch: 3, Kind: OpExpire, Key: "", ExpireAt: 6, Version: 4, Time: 7},
	}
	mustAppend(t, s, ops)
	got := mustOps(t, s, 1, 0, 0)
	checkOps(t, got, ops)
	if got[1].Value != nil || got[3].Value != nil {
		t.Fatalf("delete or expiry came back with a value: %q, %q", got[1].Value, got[3].Value)
	}
}

func testTruncate(t *testing.T, s Store) {
	all := putOps(5, 1, 10)
	mustAppend(t, s, all)
	mustTruncate(t, s, 5, 5)
	checkBounds(t, s, 5, 5, 10)
	checkOps(t, mustOps(t, s, 5, 4, 0), all[4:])
	checkOps(t, mustOps(t, s, 5, 7, 2), all[7:9])
	for _, after := range []uint64{0, 1, 3} {
		checkTruncated(t, s, 5, after)
	}
	for _, rev := range []uint64{0, 1, 5} { // at or below first: no-ops
		mustTruncate(t, s, 5, rev)
		checkBounds(t, s, 5, 5, 10)
	}
	mustAppend(t, s, putOps(5, 11, 12))
	checkBounds(t, s, 5, 5, 12)
	checkOps(t, mustOps(t, s, 5, 4, 0), putOps(5, 5, 12))
}

func mustTruncate(t testing.TB, s Store, segment uint32, rev uint64) {
	t.Helper()
	if err := s.TruncateBefore(segment, rev); err != nil {
		t.Fatalf("TruncateBefore(%d, %d): %v", segment, rev, err)
	}
}

func testTruncateEverything(t *testing.T, s Store) {
	mustAppend(t, s, putOps(5, 1, 10))
	mustTruncate(t, s, 5, 11)
	checkBounds(t, s, 5, 11, 10)
	if ops := mustOps(t, s, 5, 10, 0); len(ops) != 0 {
		t.Fatalf("emptied log returned %d ops", len(ops))
	}
	checkTruncated(t, s, 5, 9)
	checkTruncated(t, s, 5, 0)
	if err := s.Append([]Op{putOp(5, 1)}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("Append at 1 after truncation = %v, want ErrOutOfOrder", err)
	}
	mustAppend(t, s, []Op{putOp(5, 11)})
	checkBounds(t, s, 5, 11, 11)
	checkOps(t, mustOps(t, s, 5, 10, 0), putOps(5, 11, 11))
}

func testTruncatePastEnd(t *testing.T, s Store) {
	mustAppend(t, s, putOps(5, 1, 10))
	mustTruncate(t, s, 5, 101) // a snapshot at 100 was installed
	checkBounds(t, s, 5, 101, 100)
	checkTruncated(t, s, 5, 10)
	if ops := mustOps(t, s, 5, 100, 0); len(ops) != 0 {
		t.Fatalf("got %d ops after the end", len(ops))
	}
	if err := s.Append([]Op{putOp(5, 11)}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("Append at 11 = %v, want ErrOutOfOrder", err)
	}
	mustAppend(t, s, putOps(5, 101, 102))
	checkBounds(t, s, 5, 101, 102)
}

func testTruncateFresh(t *testing.T, s Store) {
	mustTruncate(t, s, 8, 1)
	checkBounds(t, s, 8, 0, 0)
	if segs, _ := s.Segments(); len(segs) != 0 {
		t.Fatalf("TruncateBefore(1) of a fresh segment listed it: %v", segs)
	}
	mustTruncate(t, s, 8, 51)
	checkBounds(t, s, 8, 51, 50)
	checkTruncated(t, s, 8, 0)
	if segs, _ := s.Segments(); !slices.Equal(segs, []uint32{8}) {
		t.Fatalf("Segments = %v, want [8]", segs)
	}
	mustAppend(t, s, []Op{putOp(8, 51)})
	checkBounds(t, s, 8, 51, 51)
}

func testLogBytes(t *testing.T, s Store) {
	if n := logBytes(t, s, 2); n != 0 {
		t.Fatalf("fresh segment has %d bytes", n)
	}
	mustAppend(t, s, putOps(2, 1, 100))
	full := logBytes(t, s, 2)
	if full < 100*int64(len(putOp(2, 50).Value)) {
		t.Fatalf("100 ops take %d bytes, less than their values", full)
	}
	mustAppend(t, s, putOps(3, 1, 10))
	if n := logBytes(t, s, 2); n != full {
		t.Fatalf("another segment's append changed LogBytes: %d -> %d", full, n)
	}
	mustTruncate(t, s, 2, 51)
	half := logBytes(t, s, 2)
	if half <= 0 || half >= full {
		t.Fatalf("after dropping half the log, LogBytes %d (was %d)", half, full)
	}
	if half < full*4/10 || half > full*6/10 {
		t.Fatalf("after dropping half the log, LogBytes %d is far from half of %d", half, full)
	}
	mustTruncate(t, s, 2, 101)
	if n := logBytes(t, s, 2); n != 0 {
		t.Fatalf("emptied log has %d bytes", n)
	}
	mustAppend(t, s, putOps(2, 101, 150))
	if n := logBytes(t, s, 2); n < half*8/10 || n > half*12/10 {
		t.Fatalf("50 new ops take %d bytes, 50 old ones took %d", n, half)
	}
}

func testSnapshots(t *testing.T, s Store) {
	if _, ok, err := s.LoadSnapshot(4); ok || err != nil {
		t.Fatalf("LoadSnapshot of a fresh segment = %v, %v", ok, err)
	}
	for _, snap := range []Snapshot{testSnapshot(4, 10, 50), testSnapshot(4, 20, 0), testSnapshot(4, 30, 3)} {
		if err := s.SaveSnapshot(&snap); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.LoadSnapshot(4)
		if !ok || err != nil {
			t.Fatalf("LoadSnapshot = %v, %v", ok, err)
		}
		if !sameSnapshot(got, snap) {
			t.Fatalf("LoadSnapshot = %+v, want %+v", got, snap)
		}
	}
	if _, ok, _ := s.LoadSnapshot(5); ok {
		t.Fatal("a snapshot appeared for another segment")
	}
	checkBounds(t, s, 4, 0, 0)
}

func testSnapshotCopied(t *testing.T, s Store) {
	snap := testSnapshot(1, 5, 10)
	if err := s.SaveSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	snap.Entries[3].Value[0] ^= 0xFF
	snap.Entries[4].Key = "changed"
	got, _, err := s.LoadSnapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	if !sameSnapshot(got, testSnapshot(1, 5, 10)) {
		t.Fatal("the stored snapshot changed with the caller's copy")
	}
}

func testSegments(t *testing.T, s Store) {
	if segs, err := s.Segments(); err != nil || len(segs) != 0 {
		t.Fatalf("Segments of an empty store = %v, %v", segs, err)
	}
	mustAppend(t, s, putOps(9, 1, 3))
	mustAppend(t, s, putOps(1, 1, 3))
	snap := testSnapshot(5, 1, 1)
	if err := s.SaveSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	mustTruncate(t, s, 9, 4) // emptied, still advanced
	segs, err := s.Segments()
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{1, 5, 9}; !slices.Equal(segs, want) {
		t.Fatalf("Segments = %v, want %v", segs, want)
	}
}

func mustReset(t testing.TB, s Store, segment uint32) {
	t.Helper()
	if err := s.ResetSegment(segment); err != nil {
		t.Fatalf("ResetSegment(%d): %v", segment, err)
	}
}

func mustSaveSnapshot(t testing.TB, s Store, snap Snapshot) {
	t.Helper()
	if err := s.SaveSnapshot(&snap); err != nil {
		t.Fatalf("SaveSnapshot(%d at %d): %v", snap.Segment, snap.Revision, err)
	}
}

// checkSegments fails unless Segments lists exactly want.
func checkSegments(t testing.TB, s Store, want ...uint32) {
	t.Helper()
	if segs, err := s.Segments(); err != nil || !slices.Equal(segs, want) {
		t.Fatalf("Segments = %v, %v; want %v", segs, err, want)
	}
}

// checkReset fails unless segment looks never written.
func checkReset(t testing.TB, s Store, segment uint32) {
	t.Helper()
	checkBounds(t, s, segment, 0, 0)
	if n := logBytes(t, s, segment); n != 0 {
		t.Fatalf("reset segment %d holds %d bytes", segment, n)
	}
	if ops := mustOps(t, s, segment, 0, 0); len(ops) != 0 {
		t.Fatalf("reset segment %d returned %d ops", segment, len(ops))
	}
	if _, ok, err := s.LoadSnapshot(segment); ok || err != nil {
		t.Fatalf("LoadSnapshot of reset segment %d = %v, %v", segment, ok, err)
	}
}

// testResetThenAppend resets a truncated segment with a snapshot: it starts again at revision 1, and
// the other segments keep everything.
func testResetThenAppend(t *testing.T, s Store) {
	mustAppend(t, s, append(putOps(5, 1, 10), putOps(6, 1, 4)...))
	mustSaveSnapshot(t, s, testSnapshot(5, 3, 4))
	mustTruncate(t, s, 5, 4)
	mustReset(t, s, 5)
	checkReset(t, s, 5)
	checkSegments(t, s, 6)
	if err := s.Append([]Op{putOp(5, 11)}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("Append at 11 after reset = %v, want ErrOutOfOrder", err)
	}
	mustAppend(t, s, putOps(5, 1, 3))
	checkBounds(t, s, 5, 1, 3)
	checkOps(t, mustOps(t, s, 5, 0, 0), putOps(5, 1, 3))
	checkBounds(t, s, 6, 1, 4)
	checkOps(t, mustOps(t, s, 6, 0, 0), putOps(6, 1, 4))
	checkSegments(t, s, 5, 6)
}

// testResetThenSnapshot replaces a segment with a snapshot below its last revision: the log resumes
// right after the snapshot, as for a fresh segment.
func testResetThenSnapshot(t *testing.T, s Store) {
	mustAppend(t, s, putOps(5, 1, 10))
	mustReset(t, s, 5)
	snap := testSnapshot(5, 4, 3)
	mustSaveSnapshot(t, s, snap)
	mustTruncate(t, s, 5, 5)
	checkBounds(t, s, 5, 5, 4)
	if err := s.Append([]Op{putOp(5, 11)}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("Append at 11 after reset = %v, want ErrOutOfOrder", err)
	}
	mustAppend(t, s, putOps(5, 5, 6))
	checkBounds(t, s, 5, 5, 6)
	checkOps(t, mustOps(t, s, 5, 4, 0), putOps(5, 5, 6))
	checkTruncated(t, s, 5, 3)
	if got, ok, err := s.LoadSnapshot(5); !ok || err != nil || !sameSnapshot(got, snap) {
		t.Fatalf("LoadSnapshot = %+v, %v, %v; want %+v", got, ok, err, snap)
	}
}

// testResetFresh resets segments never written, and one twice: nothing changes.
func testResetFresh(t *testing.T, s Store) {
	mustAppend(t, s, putOps(2, 1, 3))
	mustReset(t, s, 8)
	mustReset(t, s, 0xFFFFFFFF)
	checkReset(t, s, 8)
	checkSegments(t, s, 2)
	checkOps(t, mustOps(t, s, 2, 0, 0), putOps(2, 1, 3))
	mustReset(t, s, 2)
	mustReset(t, s, 2)
	checkReset(t, s, 2)
	checkSegments(t, s)
	mustAppend(t, s, []Op{putOp(8, 1)})
	checkBounds(t, s, 8, 1, 1)
}

func testSync(t *testing.T, s Store) {
	mustAppend(t, s, putOps(1, 1, 3))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
}

func testClosed(t *testing.T, s Store) {
	mustAppend(t, s, putOps(1, 1, 3))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	snap := testSnapshot(1, 1, 1)
	calls := map[string]error{
		"Append":         s.Append(putOps(1, 4, 4)),
		"TruncateBefore": s.TruncateBefore(1, 2),
		"SaveSnapshot":   s.SaveSnapshot(&snap),
		"Sync":           s.Sync(),
		"ResetSegment":   s.ResetSegment(1),
	}
	_, calls["Ops"] = s.Ops(1, 0, 0)
	_, _, calls["Bounds"] = s.Bounds(1)
	_, calls["LogBytes"] = s.LogBytes(1)
	_, _, calls["LoadSnapshot"] = s.LoadSnapshot(1)
	_, calls["Segments"] = s.Segments()
	for name, err := range calls {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// testConcurrent appends to distinct segments from many goroutines while others read and truncate, then
// checks every log. Readers check that each answer is a contiguous run starting right after what they
// asked for, or ErrTruncated.
func testConcurrent(t *testing.T, s Store) {
	const (
		writers       = 8
		segsPerWriter = 3
		batches       = 40
		opsPerBatch   = 10
		readers       = 4
		lastRevision  = batches * opsPerBatch
		truncatedUpTo = 100 // even segments are truncated up to here while being written
		truncateEvery = 2
	)
	var writing sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, writers+readers+1)
	for w := range writers {
		writing.Add(1)
		go func() {
			defer writing.Done()
			for b := range batches {
				var ops []Op
				for i := range segsPerWriter {
					from := uint64(b*opsPerBatch) + 1
					ops = append(ops, putOps(uint32(w*segsPerWriter+i), from, from+opsPerBatch-1)...)
				}
				if err := s.Append(ops); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var others sync.WaitGroup
	for r := range readers {
		others.Add(1)
		go func() {
			defer others.Done()
			errs <- readWhileWriting(s, uint32(r), writers*segsPerWriter, stop)
		}()
	}
	others.Add(1)
	go func() {
		defer others.Done()
		errs <- truncateWhileWriting(s, writers*segsPerWriter, truncatedUpTo, stop)
	}()
	writing.Wait()
	close(stop)
	others.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for segment := uint32(0); segment < writers*segsPerWriter; segment++ {
		first := uint64(1)
		if segment%truncateEvery == 0 {
			mustTruncate(t, s, segment, truncatedUpTo)
			first = truncatedUpTo
		}
		checkBounds(t, s, segment, first, lastRevision)
		checkOps(t, mustOps(t, s, segment, first-1, 0), putOps(segment, first, lastRevision))
	}
}

func readWhileWriting(s Store, seed uint32, segments uint32, stop <-chan struct{}) error {
	for i := seed; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		segment := i % segments
		after := uint64(i*7) % 300
		ops, err := s.Ops(segment, after, 50)
		if errors.Is(err, ErrTruncated) {
			continue
		}
		if err != nil {
			return err
		}
		for j, op := range ops {
			if want := putOp(segment, after+1+uint64(j)); !sameOp(op, want) {
				return fmt.Errorf("Ops(%d, %d)[%d] = %+v, want %+v", segment, after, j, op, want)
			}
		}
		first, last, err := s.Bounds(segment)
		if err != nil {
			return err
		}
		if last != 0 && first > last+1 {
			return fmt.Errorf("segment %d bounds (%d, %d)", segment, first, last)
		}
		if _, err := s.LogBytes(segment); err != nil {
			return err
		}
		if _, err := s.Segments(); err != nil {
			return err
		}
	}
}

// truncateWhileWriting repeatedly truncates the even segments, never past what their writer has
// reached, up to upTo.
func truncateWhileWriting(s Store, segments uint32, upTo uint64, stop <-chan struct{}) error {
	for rev := uint64(2); ; rev++ {
		select {
		case <-stop:
			return nil
		default:
		}
		for segment := uint32(0); segment < segments; segment += 2 {
			_, last, err := s.Bounds(segment)
			if err != nil {
				return err
			}
			if err := s.TruncateBefore(segment, min(rev, last, upTo)); err != nil {
				return err
			}
		}
	}
}
