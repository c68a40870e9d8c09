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
				q.push(Op{Revision: next})
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
