package durability

import (
	"bytes"
	"fmt"
	"testing"
)

const (
	benchBatch      = 100     // ops per Append
	benchValueSize  = 64      // bytes per value
	benchReplayOps  = 100_000 // ops replayed per iteration
	benchReplayPage = 1000    // ops per Ops call
)

// benchOps returns segment's ops [from, from+n) with 64-byte values.
func benchOps(segment uint32, from uint64, n int) []Op {
	value := bytes.Repeat([]byte("v"), benchValueSize)
	ops := make([]Op, n)
	for i := range ops {
		rev := from + uint64(i)
		ops[i] = Op{Segment: segment, Revision: rev, Epoch: 1, Kind: OpPut, Key: fmt.Sprintf("user:%d", rev),
			Value: value, Version: rev, Time: int64(rev)}
	}
	return ops
}

func BenchmarkPebbleAppend(b *testing.B) { benchAppend(b, openPebble(b, b.TempDir())) }

func BenchmarkMemoryAppend(b *testing.B) { benchAppend(b, NewMemory()) }

// benchAppend appends batches of 100 ops, each batch to the next of 16 segments.
func benchAppend(b *testing.B, s Store) {
	const segments = 16
	batches := make([][]Op, segments)
	for i := range batches {
		batches[i] = benchOps(uint32(i), 1, benchBatch)
	}
	b.ReportAllocs()
	b.SetBytes(benchBatch * benchValueSize)
	n := 0
	for b.Loop() {
		batch := batches[n%segments]
		if err := s.Append(batch); err != nil {
			b.Fatal(err)
		}
		for i := range batch {
			batch[i].Revision += benchBatch
		}
		n++
	}
	b.ReportMetric(float64(n*benchBatch)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkPebbleReplay reads back one segment of 100k ops, written and then reopened as after a
// restart, in pages of 1000.
func BenchmarkPebbleReplay(b *testing.B) {
	dir := b.TempDir()
	s, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		b.Fatal(err)
	}
	fillReplay(b, s)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	benchReplay(b, openPebble(b, dir))
}

func BenchmarkMemoryReplay(b *testing.B) {
	s := NewMemory()
	fillReplay(b, s)
	benchReplay(b, s)
}

func fillReplay(b *testing.B, s Store) {
	for rev := uint64(1); rev <= benchReplayOps; rev += benchReplayPage {
		if err := s.Append(benchOps(7, rev, benchReplayPage)); err != nil {
			b.Fatal(err)
		}
	}
}

func benchReplay(b *testing.B, s Store) {
	b.ReportAllocs()
	b.SetBytes(benchReplayOps * benchValueSize)
	for b.Loop() {
		var after uint64
		for after < benchReplayOps {
			ops, err := s.Ops(7, after, benchReplayPage)
			if err != nil {
				b.Fatal(err)
			}
			if len(ops) == 0 || ops[0].Revision != after+1 {
				b.Fatalf("replay stalled after %d", after)
			}
			after = ops[len(ops)-1].Revision
		}
	}
	b.ReportMetric(float64(b.N*benchReplayOps)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkAppendOp(b *testing.B) {
	op := benchOps(1, 1, 1)[0]
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendOp(buf[:0], &op)
	}
}

func BenchmarkDecodeOp(b *testing.B) {
	op := benchOps(1, 1, 1)[0]
	encoded := AppendOp(nil, &op)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeOp(encoded); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryAppendOne appends single ops, sharing their values, round-robin to 64 segments bounded
// to 4096 ops each: how a node records its writes.
func BenchmarkMemoryAppendOne(b *testing.B) {
	const segments = 64
	s := NewMemoryWith(MemoryOptions{RetainOps: 4096, RetainBytes: 4 << 20, ShareValues: true})
	op := benchOps(0, 1, 1)[0]
	next := make([]uint64, segments)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		seg := n % segments
		next[seg]++
		op.Segment, op.Revision = uint32(seg), next[seg]
		if err := s.Append([]Op{op}); err != nil {
			b.Fatal(err)
		}
		n++
	}
}
