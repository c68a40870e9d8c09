package zaris

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// BenchmarkStore measures the local store alone, one goroutine, on 1M keys of 64-byte values over the
// default 1,024 segments: reads of present and absent keys, overwrites, and a delete with the insert that
// puts the key back (which changes the set of keys, as new keys and expiries do), and edits: SETRANGE of 8
// bytes inside a value, INCR of a counter.
func BenchmarkStore(b *testing.B) {
	const space = 1_000_000
	layout, _ := NewLayout(DefaultSegments, 1)
	s := newStore(layout.Segments, systemClock{})
	keys := make([]string, space)
	segs := make([]int, space)
	value := make([]byte, 64)
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
		segs[i] = layout.KeySegment(keys[i])
		s.put(segs[i], keys[i], value, forTTL(0))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			i := rng.IntN(space)
			if _, _, ok := s.get(segs[i], keys[i]); !ok {
				b.Fatal("a stored key is missing")
			}
		}
	})
	absent := make([]string, space)
	for i := range absent {
		absent[i] = "absent:" + strconv.Itoa(i)
	}
	b.Run("get-absent", func(b *testing.B) {
		for b.Loop() {
			k := absent[rng.IntN(space)]
			if _, _, ok := s.get(layout.KeySegment(k), k); ok {
				b.Fatal("an absent key was found")
			}
		}
	})
	b.Run("overwrite", func(b *testing.B) {
		for b.Loop() {
			i := rng.IntN(space)
			s.put(segs[i], keys[i], value, forTTL(0))
		}
	})
	b.Run("setrange", func(b *testing.B) { // an edit in place: the value keeps its 64 bytes
		part, limit := []byte("12345678"), DefaultConfig().MaxValueSize
		for b.Loop() {
			i := rng.IntN(space)
			if _, err := s.setRange(segs[i], keys[i], 8, part, limit); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("incr", func(b *testing.B) {
		counters := make([]string, 1000)
		counterSegs := make([]int, len(counters))
		for i := range counters {
			counters[i] = "counter:" + strconv.Itoa(i)
			counterSegs[i] = layout.KeySegment(counters[i])
			s.put(counterSegs[i], counters[i], []byte("0"), forTTL(0))
		}
		for b.Loop() {
			i := rng.IntN(len(counters))
			if _, err := s.incr(counterSegs[i], counters[i], 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("delete-insert", func(b *testing.B) {
		for b.Loop() {
			i := rng.IntN(space)
			s.remove(segs[i], keys[i])
			s.put(segs[i], keys[i], value, forTTL(0))
		}
	})
}

// BenchmarkAtomicGroup measures one atomic group of the kind EXEC runs, on one segment: SET, INCR, HSET of
// a field of a 1,000-field hash, LPUSH and RPOP of a 1,000-item list, and the group's end with its one op.
func BenchmarkAtomicGroup(b *testing.B) {
	layout, _ := NewLayout(1, 1)
	lim := opLimits{maxValueSize: 1 << 20, maxReplyBytes: 1 << 20, layout: layout}
	s := newStore(1, systemClock{})
	for i := range 1000 {
		n := []byte(strconv.Itoa(i))
		s.atomically(0, func(g *store) {
			lookupKeyOp(kv.OpHSet).apply(g, 0, kv.Request{Key: "h", Args: [][]byte{n, n}}, lim)
			lookupKeyOp(kv.OpRPush).apply(g, 0, kv.Request{Key: "l", Args: [][]byte{n}}, lim)
		})
	}
	group := []struct {
		op  transport.Op
		req kv.Request
	}{
		{kv.OpPut, kv.Request{Key: "s", Value: make([]byte, 64)}},
		{kv.OpIncr, kv.Request{Key: "n", Delta: 1}},
		{kv.OpHSet, kv.Request{Key: "h", Args: [][]byte{[]byte("7"), []byte("seven")}}},
		{kv.OpLPush, kv.Request{Key: "l", Args: [][]byte{[]byte("head")}}},
		{kv.OpRPop, kv.Request{Key: "l"}},
	}
	for b.Loop() {
		s.atomically(0, func(g *store) {
			for _, w := range group {
				if r := lookupKeyOp(w.op).apply(g, 0, w.req, lim); r.Status != StatusSuccess {
					b.Fatalf("%s: %s", lookupKeyOp(w.op).name, describeReply(r))
				}
			}
		})
	}
}
