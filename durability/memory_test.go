package durability

import (
	"bytes"
	"errors"
	"testing"
	"time"
	"unsafe"
)

// sizedPut is segment's put at rev with a value of size bytes.
func sizedPut(segment uint32, rev uint64, size int) Op {
	return Op{Segment: segment, Revision: rev, Kind: OpPut, Key: "k", Value: bytes.Repeat([]byte("v"), size)}
}

// TestMemoryRetainOps checks the bound in ops: each segment keeps its newest ops, whether appended one by
// one or in one call, first follows the drops, and a reader behind them is told to get a snapshot.
func TestMemoryRetainOps(t *testing.T) {
	s := NewMemoryWith(MemoryOptions{RetainOps: 3})
	defer s.Close()
	for rev := uint64(1); rev <= 10; rev++ {
		mustAppend(t, s, []Op{putOp(1, rev)})
	}
	mustAppend(t, s, putOps(2, 1, 10))
	mustAppend(t, s, append(putOps(3, 1, 5), putOps(4, 1, 2)...)) // several segments in one call
	for _, seg := range []uint32{1, 2} {
		checkBounds(t, s, seg, 8, 10)
		checkOps(t, mustOps(t, s, seg, 7, 0), putOps(seg, 8, 10))
		checkTruncated(t, s, seg, 6)
		var want int64
		for _, op := range putOps(seg, 8, 10) {
			want += memOpSize(&op)
		}
		if n := logBytes(t, s, seg); n != want {
			t.Fatalf("segment %d: LogBytes %d, want %d for the 3 ops kept", seg, n, want)
		}
	}
	checkBounds(t, s, 3, 3, 5)
	checkBounds(t, s, 4, 1, 2)

	mustTruncate(t, s, 1, 21) // restarts after a snapshot at 20
	mustAppend(t, s, putOps(1, 21, 22))
	checkBounds(t, s, 1, 21, 22)
	checkTruncated(t, s, 1, 19)
}

// TestMemoryRetainBytes checks the bound in bytes: a segment keeps the newest ops that fit, an op larger
// than the bound is kept alone, and another segment keeps its own.
func TestMemoryRetainBytes(t *testing.T) {
	const bound = 1 << 20
	s := NewMemoryWith(MemoryOptions{RetainOps: 1000, RetainBytes: bound})
	defer s.Close()
	for rev := uint64(1); rev <= 10; rev++ {
		mustAppend(t, s, []Op{sizedPut(0, rev, 300<<10)})
	}
	mustAppend(t, s, []Op{sizedPut(1, 1, 10)})
	checkBounds(t, s, 0, 8, 10)
	if n := logBytes(t, s, 0); n > bound {
		t.Fatalf("LogBytes %d past the bound %d", n, bound)
	}
	checkTruncated(t, s, 0, 5)
	if ops := mustOps(t, s, 0, 8, 100); len(ops) != 2 {
		t.Fatalf("after revision 8: %d ops, want 2", len(ops))
	}

	mustAppend(t, s, []Op{sizedPut(0, 11, 4<<20)})
	checkBounds(t, s, 0, 11, 11)
	checkTruncated(t, s, 0, 9)
	checkBounds(t, s, 1, 1, 1)
}

// TestMemoryRetainBytesCountsMemory checks that the bound in bytes bounds memory: small ops hold more
// than their encoding (a struct in the log, and a shared value), and the log keeps as many as that memory
// allows, not as many as their encoded size would.
func TestMemoryRetainBytesCountsMemory(t *testing.T) {
	const kept, valueSize = 100, 64
	per := int64(unsafe.Sizeof(Op{})) + int64(len("k")+valueSize)
	s := NewMemoryWith(MemoryOptions{RetainOps: 10_000, RetainBytes: kept * per, ShareValues: true})
	defer s.Close()
	for rev := uint64(1); rev <= 1000; rev++ {
		mustAppend(t, s, []Op{sizedPut(0, rev, valueSize)})
	}
	checkBounds(t, s, 0, 1000-kept+1, 1000)
	if n := logBytes(t, s, 0); n != kept*per {
		t.Fatalf("LogBytes %d for %d ops; want %d, what they hold", n, kept, kept*per)
	}
}

// TestMemoryShareValues checks that a store sharing values hands back the very bytes appended, and that
// one without the option copies them.
func TestMemoryShareValues(t *testing.T) {
	for _, share := range []bool{false, true} {
		s := NewMemoryWith(MemoryOptions{ShareValues: share})
		op := putOp(1, 1)
		mustAppend(t, s, []Op{op, {Segment: 1, Revision: 2, Kind: OpDelete, Key: "gone", Value: []byte{}}})
		got := mustOps(t, s, 1, 0, 0)
		if same := &got[0].Value[0] == &op.Value[0]; same != share {
			t.Errorf("ShareValues %v: the value read back is the one appended: %v", share, same)
		}
		if got[1].Value != nil {
			t.Errorf("ShareValues %v: a delete came back with value %q", share, got[1].Value)
		}
		s.Close()
	}
}

// TestMemorySegmentsDoNotContend checks that a call on one segment proceeds while another segment is
// locked, as by an append in progress.
func TestMemorySegmentsDoNotContend(t *testing.T) {
	s := NewMemory()
	defer s.Close()
	mustAppend(t, s, append(putOps(1, 1, 1), putOps(2, 1, 1)...))
	busy := s.segs[1]
	busy.mu.Lock()
	defer busy.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		if err := s.Append([]Op{putOp(2, 2)}); err != nil {
			done <- err
			return
		}
		_, err := s.Ops(2, 0, 0)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call on segment 2 waited for segment 1")
	}
	if err := s.Append([]Op{putOp(2, 2)}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("appending revision 2 again: %v, want ErrOutOfOrder", err)
	}
}
