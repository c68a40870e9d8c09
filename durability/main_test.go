package durability

import (
	"bytes"
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// putOp is segment's put at rev, with a value that names both.
func putOp(segment uint32, rev uint64) Op {
	return Op{
		Segment:  segment,
		Revision: rev,
		Epoch:    3,
		Kind:     OpPut,
		Key:      fmt.Sprintf("key-%d-%d", segment, rev%7),
		Value:    []byte(fmt.Sprintf("value of segment %d at revision %d", segment, rev)),
		ExpireAt: int64(rev) * 1000,
		Version:  rev / 7,
		Time:     1_700_000_000_000_000_000 + int64(rev),
	}
}

// putOps returns segment's puts at revisions [from, to].
func putOps(segment uint32, from, to uint64) []Op {
	var ops []Op
	for rev := from; rev <= to; rev++ {
		ops = append(ops, putOp(segment, rev))
	}
	return ops
}

// sameOp compares ops, counting a nil and an empty Value as equal.
func sameOp(a, b Op) bool {
	return a.Segment == b.Segment && a.Revision == b.Revision && a.Epoch == b.Epoch && a.Kind == b.Kind &&
		a.Key == b.Key && bytes.Equal(a.Value, b.Value) && a.ExpireAt == b.ExpireAt && a.Version == b.Version &&
		a.Time == b.Time
}

func checkOps(t testing.TB, got, want []Op) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d ops, want %d", len(got), len(want))
	}
	for i := range got {
		if !sameOp(got[i], want[i]) {
			t.Fatalf("op %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// sameSnapshot compares snapshots, counting nil and empty slices as equal.
func sameSnapshot(a, b Snapshot) bool {
	if a.Segment != b.Segment || a.Revision != b.Revision || a.Epoch != b.Epoch || len(a.Entries) != len(b.Entries) {
		return false
	}
	for i := range a.Entries {
		ea, eb := a.Entries[i], b.Entries[i]
		if ea.Key != eb.Key || !bytes.Equal(ea.Value, eb.Value) || ea.ExpireAt != eb.ExpireAt || ea.Version != eb.Version || ea.Kind != eb.Kind {
			return false
		}
	}
	return true
}

func testSnapshot(segment uint32, revision uint64, n int) Snapshot {
	s := Snapshot{Segment: segment, Revision: revision, Epoch: 9}
	for i := range n {
		s.Entries = append(s.Entries, Entry{
			Key:      fmt.Sprintf("k%d", i),
			Value:    bytes.Repeat([]byte{byte(i)}, i%40),
			ExpireAt: int64(i) * 17,
			Version:  uint64(i) + 1,
			Kind:     uint8(i % 3),
		})
	}
	return s
}
