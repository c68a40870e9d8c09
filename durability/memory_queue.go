package durability

// opChunkSize is how many ops one chunk of a Memory log holds.
const opChunkSize = 256

// opQueue is one segment's ops in Memory, in fixed-size chunks: appending never copies earlier ops, and
// dropping the head releases whole chunks.
type opQueue struct {
	chunks [][]Op // each of capacity opChunkSize; all full but the last
	head   int    // position of the first op in chunks[0]
	n      int
}

func (q *opQueue) len() int { return q.n }

// push appends op.
func (q *opQueue) push(op Op) {
	if len(q.chunks) == 0 || len(q.chunks[len(q.chunks)-1]) == opChunkSize {
		q.chunks = append(q.chunks, make([]Op, 0, opChunkSize))
	}
	last := len(q.chunks) - 1
	q.chunks[last] = append(q.chunks[last], op)
	q.n++
}

// at returns the i-th op.
func (q *opQueue) at(i int) *Op {
	i += q.head
	return &q.chunks[i/opChunkSize][i%opChunkSize]
}

// copyRange returns a copy of ops [start, end).
func (q *opQueue) copyRange(start, end int) []Op {
	out := make([]Op, 0, end-start)
	for start < end {
		i := start + q.head
		chunk := q.chunks[i/opChunkSize]
		from := i % opChunkSize
		to := min(len(chunk), from+end-start)
		out = append(out, chunk[from:to]...)
		start += to - from
	}
	return out
}

// dropFront removes the first k ops, calling dropped on each before it goes.
func (q *opQueue) dropFront(k int, dropped func(*Op)) {
	for range k {
		dropped(q.at(0))
		q.chunks[0][q.head] = Op{}
		q.head++
		q.n--
		if q.head == opChunkSize || q.n == 0 {
			q.chunks[0] = nil
			q.chunks = q.chunks[1:]
			q.head = 0
		}
	}
	if q.n == 0 {
		q.chunks = nil
	}
}
