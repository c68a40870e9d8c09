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
	var model []Op
	next := uint64(1)
	for step := range 2000 {
		if rng.IntN(3) > 0 {
			for range rng.IntN(3 * opChunkSize / 2) {
				*q.push() = Op{Revision: next}
				model = append(model, Op{Revision: next})
				next++
			}
		} else {
			k := rng.IntN(len(model) + 1)
			var dropped []uint64
			q.dropFront(k, func(op *Op) { dropped = append(dropped, op.Revision) })
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
// chunks after the first are allocated whole, and that a chunk released by a drop is reused.
func TestOpQueueStartsSmall(t *testing.T) {
	var q opQueue
	*q.push() = Op{Revision: 1}
	if c := cap(q.chunks[0]); c >= opChunkSize {
		t.Fatalf("one op takes a chunk of capacity %d", c)
	}
	for rev := uint64(2); rev <= opChunkSize+1; rev++ {
		*q.push() = Op{Revision: rev}
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
	q.dropFront(opChunkSize, func(*Op) {})
	for rev := uint64(opChunkSize + 2); rev <= 2*opChunkSize+1; rev++ {
		*q.push() = Op{Revision: rev}
	}
	if len(q.chunks) != 2 || &q.chunks[1][0] != released {
		t.Fatalf("the chunk released was not reused: %d chunks", len(q.chunks))
	}
}
