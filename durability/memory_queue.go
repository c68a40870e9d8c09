package durability

// opChunkSize is how many ops one chunk of a Memory log holds. Each segment keeps a partly used first and
// last chunk and a spare, so with a thousand segments the chunk size sets tens of megabytes of room that
// holds no op; 64 ops (6 KiB) keep that small at no measurable cost to appends.
const opChunkSize = 64

// opQueue is one segment's ops in Memory, in chunks of opChunkSize ops: appending copies earlier ops only
// while the first chunk grows, and dropping the head releases whole chunks. The first chunk starts small,
// so that a segment holding few ops takes little memory, and a bounded log that drops as it appends reuses
// the chunk it released last.
type opQueue struct {
	chunks [][]Op // all full (opChunkSize ops) but the last; all but the first allocated full
	head   int    // position of the first op in chunks[0]
	n      int
	spare  []Op // an emptied chunk of opChunkSize ops, or nil
}

func (q *opQueue) len() int { return q.n }

// push appends a zero op and returns it, for the caller to fill in.
func (q *opQueue) push() *Op {
	last := len(q.chunks) - 1
	if last < 0 || len(q.chunks[last]) == cap(q.chunks[last]) {
		q.grow()
		last = len(q.chunks) - 1
	}
	c := q.chunks[last][:len(q.chunks[last])+1]
	q.chunks[last] = c
	q.n++
	return &c[len(c)-1]
}

// grow makes room for one more op: the first chunk starts small and doubles up to opChunkSize ops, and
// the others are the spare chunk or allocated whole.
func (q *opQueue) grow() {
	n := len(q.chunks)
	switch {
	case n > 0 && len(q.chunks[n-1]) < opChunkSize:
		last := q.chunks[n-1]
		q.chunks[n-1] = append(make([]Op, 0, min(2*cap(last), opChunkSize)), last...)
	case q.spare != nil:
		q.chunks = append(q.chunks, q.spare)
		q.spare = nil
	case n == 0:
		q.chunks = append(q.chunks, make([]Op, 0, 4))
	default:
		q.chunks = append(q.chunks, make([]Op, 0, opChunkSize))
	}
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
			if cap(q.chunks[0]) == opChunkSize {
				q.spare = q.chunks[0][:0]
			}
			q.chunks[0] = nil
			q.chunks = q.chunks[1:]
			q.head = 0
		}
	}
	if q.n == 0 {
		q.chunks = nil
	}
}
