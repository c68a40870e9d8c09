package zaris

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// TestAtomicGroupRefusesWritesPastItsBound runs key operations in one atomic group of a store bounded at
// 1000 bytes: a put, an expiry, a collection op and an append that would take the group past the bound
// are refused and change nothing, writes that fit still run, and the group's op stays within the bound.
// A transaction's item past the bound answers StatusTooLarge, unless it is a step of a two-phase commit.
func TestAtomicGroupRefusesWritesPastItsBound(t *testing.T) {
	s := newStore(1, systemClock{})
	s.maxGroupBytes = 1000
	var multi []durability.Op
	s.onWrite = func(_ int, _, _ uint64, _ string, _ *entry, change writeChange) { multi = change.multi }
	big := bytes.Repeat([]byte("v"), 600)
	s.put(0, "s", big, forTTL(0))
	lim := opLimits{maxValueSize: 1 << 10, maxReplyBytes: 1 << 10, layout: Layout{Segments: 1, Partitions: 1}}
	before := s.revision(0)
	items := []txnItem{
		{op: kv.OpPut, req: kv.Request{Key: "a", Value: big[:300]}},         // 365 bytes: fits
		{op: kv.OpExpire, req: kv.Request{Key: "s", TTL: int64(time.Hour)}}, // the whole value again
		{op: kv.OpRPush, req: kv.Request{Key: "l", Args: [][]byte{big}}},    // the pushed item
		{op: kv.OpAppend, req: kv.Request{Key: "a", Value: big[:300]}},      // the 600 bytes it would leave
		{op: kv.OpPut, req: kv.Request{Key: "b", Value: big[:200]}},         // 265 more: fits
		{op: kv.OpDelete, req: kv.Request{Key: "s"}},                        // 65 more: fits
		{op: kv.OpPut, req: kv.Request{Key: "c", Value: big[:241]}},         // 1001 in all
		{op: kv.OpPut, req: kv.Request{Key: "e", Value: big[:240]}},         // 1000 in all: fits
	}
	var refused []bool
	s.atomically(0, func(g *store) {
		for _, it := range items {
			lookupKeyOp(it.op).apply(g, 0, it.req, lim)
			refused = append(refused, g.takeRefusal())
		}
	})
	if want := "[false true true true false false true false]"; fmt.Sprint(refused) != want {
		t.Fatalf("refused %v; want %s", refused, want)
	}
	if s.revision(0) != before+1 || len(multi) != 4 {
		t.Fatalf("revision %d -> %d, %d ops; want one write of 4 ops", before, s.revision(0), len(multi))
	}
	if n := len(durability.AppendMulti(nil, multi)); n > s.maxGroupBytes {
		t.Fatalf("the group's op takes %d bytes, past its bound %d", n, s.maxGroupBytes)
	}
	if v, _, _ := s.get(0, "a"); len(v) != 300 {
		t.Fatalf("a holds %d bytes; want the 300 put before the refused append", len(v))
	}
	for _, key := range []string{"s", "l", "c"} {
		if _, _, ok := s.get(0, key); ok {
			t.Fatalf("%s present after the group", key)
		}
	}

	r := applyTxn(s, 0, kv.Request{Args: txnArgs(items[0], txnItem{op: kv.OpPut, req: kv.Request{Key: "d", Value: bytes.Repeat([]byte("v"), 900)}})}, lim)
	var second kv.Reply
	must(t, decodeReply(&second, r.Values[1]))
	if second.Status != StatusTooLarge {
		t.Fatalf("a transaction's put past the bound answered %v", second.Status)
	}
	if _, _, ok := s.get(0, "d"); ok {
		t.Fatal("the refused put of a transaction was written")
	}
	// A step of a two-phase commit is bounded by its transaction's size, and never stops half way.
	r = applyTxn(s, 0, kv.Request{Value: []byte("txn"), Args: txnArgs(items[0], txnItem{op: kv.OpPut, req: kv.Request{Key: "d", Value: bytes.Repeat([]byte("v"), 900)}})}, lim)
	must(t, decodeReply(&second, r.Values[1]))
	if _, _, ok := s.get(0, "d"); second.Status != StatusSuccess || !ok {
		t.Fatalf("a two-phase commit's step past the bound answered %v, wrote %v", second.Status, ok)
	}
}

// TestAtomicGroupRollsBackToAMark writes in one atomic group, marks it, writes more (a put over a key, a
// push onto a list, a delete), and rolls back to the mark: the writes after it are undone, the bytes they
// took freed, and the group ends as one write of the ops before the mark.
func TestAtomicGroupRollsBackToAMark(t *testing.T) {
	s := newStore(1, systemClock{})
	s.maxGroupBytes = 1 << 20
	var multi []durability.Op
	s.onWrite = func(_ int, _, _ uint64, _ string, _ *entry, change writeChange) { multi = change.multi }
	s.put(0, "kept", []byte("old"), forTTL(0))
	lim := opLimits{maxValueSize: 1 << 10, maxReplyBytes: 1 << 10, layout: Layout{Segments: 1, Partitions: 1}}
	apply := func(g *store, op transport.Op, req kv.Request) { lookupKeyOp(op).apply(g, 0, req, lim) }
	s.atomically(0, func(g *store) {
		sg := &storeGroup{g: g, seg: 0, lim: lim}
		apply(g, kv.OpRPush, kv.Request{Key: "l", Args: [][]byte{[]byte("a")}})
		apply(g, kv.OpPut, kv.Request{Key: "x", Value: []byte("1")})
		mark := sg.Mark()
		apply(g, kv.OpPut, kv.Request{Key: "kept", Value: []byte("new")})
		apply(g, kv.OpRPush, kv.Request{Key: "l", Args: [][]byte{[]byte("b"), []byte("c")}})
		apply(g, kv.OpDelete, kv.Request{Key: "x"})
		apply(g, kv.OpPut, kv.Request{Key: "y", Value: []byte("2")})
		sg.RollbackTo(mark)
		if got := sg.Mark(); got != mark {
			t.Fatalf("after the rollback the group is at %+v; want the mark %+v", got, mark)
		}
	})
	if len(multi) != 2 {
		t.Fatalf("the group wrote %d ops; want the 2 before the mark", len(multi))
	}
	for key, want := range map[string]string{"kept": "old", "x": "1"} {
		if v, _, ok := s.get(0, key); !ok || string(v) != want {
			t.Errorf("%s = %q, %v; want %q", key, v, ok, want)
		}
	}
	if _, _, ok := s.get(0, "y"); ok {
		t.Error("y, put after the mark, is present")
	}
	if r := lookupKeyOp(kv.OpLLen).apply(s, 0, kv.Request{Key: "l"}, lim); r.Int != 1 {
		t.Errorf("the list holds %d items; want the 1 pushed before the mark", r.Int)
	}
}
