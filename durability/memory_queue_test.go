package durability

import (
	"math/rand/v2"
	"testing"
)

// TestOpQueue drives an opQueue and a plain slice with the same random pushes and drops and compares
// them across many chunk boundaries.
func TestOpQueue(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q opQueue
	var cache chunkCache
	var model []Op
	next := uint64(1)
	for step := range 2000 {
		if rng.IntN(3) > 0 {
			for range rng.IntN(3 * opChunkSize / 2) {
				*q.push(&cache) = Op{Revision: next}
				model = append(model, Op{Revision: next})
				next++
			}
		} else {
			k := rng.IntN(len(model) + 1)
			var dropped []uint64
			q.dropFront(k, &cache, func(op *Op) { dropped = append(dropped, op.Revision) })
			for i, rev := range dropped {
				if rev != model[i].Revision {
					t.Fatalf("step %d: dropped revision %d, want %d", step, rev, model[i].Revision)
				}
			}
			if len(dropped) != k {
				t.Fatalf("step %d: dropped %d ops, want %d", step, len(dropped), k)
			}
			model = model[k:]
		}
		if q.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, q.len(), len(model))
		}
		if len(model) == 0 {
			continue
		}
		start := rng.IntN(len(model))
		end := start + rng.IntN(len(model)-start+1)
		got := q.copyRange(start, end)
		for i := range got {
			if got[i].Revision != model[start+i].Revision {
				t.Fatalf("step %d: copyRange(%d, %d)[%d] = %d, want %d", step, start, end, i, got[i].Revision, model[start+i].Revision)
			}
		}
		if len(got) != end-start {
			t.Fatalf("step %d: copyRange(%d, %d) returned %d ops", step, start, end, len(got))
		}
		if i := rng.IntN(len(model)); q.at(i).Revision != model[i].Revision {
			t.Fatalf("step %d: at(%d) = %d, want %d", step, i, q.at(i).Revision, model[i].Revision)
		}
	}
}

// TestOpQueueStartsSmall checks that a queue holding few ops does not take a whole chunk, that the
// chunks after the first are allocated whole, and that a chunk released by a drop goes, emptied, to the
// cache and from there to the next queue that grows.
func TestOpQueueStartsSmall(t *testing.T) {
	var q, other opQueue
	var cache chunkCache
	*q.push(&cache) = Op{Revision: 1}
	if c := cap(q.chunks[0]); c >= opChunkSize {
		t.Fatalf("one op takes a chunk of capacity %d", c)
	}
	for rev := uint64(2); rev <= opChunkSize+1; rev++ {
		*q.push(&cache) = Op{Revision: rev, Key: "k", Value: []byte("v")}
	}
	if len(q.chunks) != 2 || len(q.chunks[0]) != opChunkSize || cap(q.chunks[1]) != opChunkSize {
		t.Fatalf("%d ops: %d chunks, the first holding %d, the second of capacity %d",
			q.len(), len(q.chunks), len(q.chunks[0]), cap(q.chunks[1]))
	}
	for i := range q.len() {
		if q.at(i).Revision != uint64(i)+1 {
			t.Fatalf("at(%d) = %d", i, q.at(i).Revision)
		}
	}
	released := &q.chunks[0][:1][0]
	q.dropFront(opChunkSize, &cache, func(*Op) {})
	if len(cache.free) != 1 || &cache.free[0][:1][0] != released {
		t.Fatalf("the emptied chunk is not in the cache: %d chunks there", len(cache.free))
	}
	for _, op := range cache.free[0][:opChunkSize] {
		if op.Revision != 0 || op.Key != "" || op.Value != nil {
			t.Fatalf("a cached chunk still holds op %d", op.Revision)
		}
	}
	for rev := uint64(1); rev <= opChunkSize+1; rev++ {
		*other.push(&cache) = Op{Revision: rev}
	}
	if len(other.chunks) != 2 || &other.chunks[1][0] != released || len(cache.free) != 0 {
		t.Fatalf("another queue's second chunk did not come from the cache: %d chunks cached", len(cache.free))
	}
}

// TestChunkCacheIsBounded checks that the cache keeps at most maxCachedChunks chunks, and that a nil
// cache keeps none and still hands out chunks.
func TestChunkCacheIsBounded(t *testing.T) {
	var cache chunkCache
	for range maxCachedChunks + 5 {
		cache.put(make([]Op, 0, opChunkSize))
	}
	if len(cache.free) != maxCachedChunks {
		t.Fatalf("the cache keeps %d chunks; want %d", len(cache.free), maxCachedChunks)
	}
	var none *chunkCache
	none.put(make([]Op, 0, opChunkSize))
	if c := none.get(); len(c) != 0 || cap(c) != opChunkSize {
		t.Fatalf("a nil cache hands out a chunk of length %d, capacity %d", len(c), cap(c))
	}
}
