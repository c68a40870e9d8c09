package zaris

import (
	"errors"
	"strings"
	"testing"

	"github.com/zaris-go/zaris/durability"
)

// TestOpLogBounds checks that a segment's op log keeps its newest ops within both bounds, ops and bytes,
// always keeps the newest op, and sends a replica behind what it kept to a snapshot.
func TestOpLogBounds(t *testing.T) {
	put := func(l *opLog, rev uint64, size int) {
		l.append(durability.Op{Segment: 0, Revision: rev, Key: "k", Value: []byte(strings.Repeat("v", size))})
	}
	kept := func(l *opLog) (first, last uint64, bytes int) {
		sl := &l.segments[0]
		return sl.ops[0].Revision, sl.ops[len(sl.ops)-1].Revision, sl.bytes
	}
	byCount := newOpLog(2, 3, 1<<30)
	for rev := uint64(1); rev <= 10; rev++ {
		put(byCount, rev, 10)
	}
	if first, last, _ := kept(byCount); first != 8 || last != 10 {
		t.Fatalf("count bound kept revisions %d..%d, want 8..10", first, last)
	}

	byBytes := newOpLog(2, 1000, 2*(1<<20)) // 1 MiB per segment
	for rev := uint64(1); rev <= 10; rev++ {
		put(byBytes, rev, 300<<10)
	}
	first, last, bytes := kept(byBytes)
	if first != 8 || last != 10 || bytes > 1<<20 {
		t.Fatalf("byte bound kept revisions %d..%d in %d bytes, want 8..10 within 1 MiB", first, last, bytes)
	}
	if _, err := byBytes.after(0, 5, 100); !errors.Is(err, errBehindLog) {
		t.Fatalf("a replica at revision 5 gets %v, want errBehindLog", err)
	}
	if ops, err := byBytes.after(0, 8, 100); err != nil || len(ops) != 2 {
		t.Fatalf("a replica at revision 8 gets %d ops, %v; want 2", len(ops), err)
	}

	put(byBytes, 11, 4<<20) // larger than the bound: kept alone
	if first, last, _ := kept(byBytes); first != 11 || last != 11 {
		t.Fatalf("an op larger than the bound: kept %d..%d, want 11 alone", first, last)
	}
	put(byBytes, 20, 10) // a restore jumped the revision
	if first, last, bytes := kept(byBytes); first != 20 || last != 20 || bytes != opBytes(&byBytes.segments[0].ops[0]) {
		t.Fatalf("after a jump: kept %d..%d in %d bytes", first, last, bytes)
	}
}

// TestOpLogKnowsWhereItStarts checks that a log restarted after a revision, and holding no op yet, still
// sends a replica behind that revision elsewhere instead of reporting nothing to send.
func TestOpLogKnowsWhereItStarts(t *testing.T) {
	l := newOpLog(1, 4, 1<<20)
	l.reset(0, 10)
	if _, err := l.after(0, 5, 100); !errors.Is(err, errBehindLog) {
		t.Fatalf("an empty log restarted after revision 10 gives a replica at 5 %v, want errBehindLog", err)
	}
	if ops, err := l.after(0, 10, 100); err != nil || len(ops) != 0 {
		t.Fatalf("a replica at the restart point gets %d ops, %v; want none", len(ops), err)
	}
	l.append(durability.Op{Segment: 0, Revision: 11, Key: "k"})
	if ops, err := l.after(0, 10, 100); err != nil || len(ops) != 1 || ops[0].Revision != 11 {
		t.Fatalf("a replica at the restart point gets %v, %v; want revision 11", ops, err)
	}
	if _, err := l.after(0, 9, 100); !errors.Is(err, errBehindLog) {
		t.Fatalf("a replica behind the restart point gets %v, want errBehindLog", err)
	}
}
