package durability

import "sync"

// opChunkSize is how many ops one chunk of a Memory log holds. Each segment keeps a partly used first and
// last chunk, so with a thousand segments the chunk size sets megabytes of room that holds no op; 16 ops
// (1.5 KiB) keep that small at no measurable cost to appends, and reads of a range cross more chunks.
const opChunkSize = 16

// opQueue is one segment's ops in Memory, in chunks of opChunkSize ops: appending copies earlier ops only
// while the first chunk grows, and dropping the head releases whole chunks to the store's chunkCache, from
// which any segment's next chunk comes. The first chunk starts small, so that a segment holding few ops
// takes little memory.
type opQueue struct {
	chunks [][]Op // all full (opChunkSize ops) but the last; all but the first allocated full
	head   int    // position of the first op in chunks[0]
	n      int
}

// chunkCache holds emptied chunks of a store's segments, up to maxCachedChunks, so that logs that drop as
// they append reuse chunks instead of allocating them, and a segment keeps no spare chunk of its own. A nil
// cache keeps nothing.
type chunkCache struct {
	mu   sync.Mutex
	free [][]Op // emptied, of capacity opChunkSize
}

// maxCachedChunks bounds a chunkCache: enough for the segments that cross a chunk's end at about the same
// time, a few hundred kilobytes.
const maxCachedChunks = 256

// get returns an empty chunk of capacity opChunkSize.
func (c *chunkCache) get() []Op {
	if c != nil {
		c.mu.Lock()
		if n := len(c.free); n > 0 {
			chunk := c.free[n-1]
			c.free[n-1] = nil
			c.free = c.free[:n-1]
			c.mu.Unlock()
			return chunk
		}
		c.mu.Unlock()
	}
	return make([]Op, 0, opChunkSize)
}

// put keeps chunk, whose ops are all zero, for a later get, unless the cache is full.
func (c *chunkCache) put(chunk []Op) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if len(c.free) < maxCachedChunks {
		c.free = append(c.free, chunk[:0])
	}
	c.mu.Unlock()
}

func (q *opQueue) len() int { return q.n }

// push appends a zero op and returns it, for the caller to fill in. A new chunk comes from cache.
func (q *opQueue) push(cache *chunkCache) *Op {
	last := len(q.chunks) - 1
	if last < 0 || len(q.chunks[last]) == cap(q.chunks[last]) {
		q.grow(cache)
		last = len(q.chunks) - 1
	}
	c := q.chunks[last][:len(q.chunks[last])+1]
	q.chunks[last] = c
	q.n++
	return &c[len(c)-1]
}

// grow makes room for one more op: the first chunk starts small and doubles up to opChunkSize ops, and
// the others come whole from cache.
func (q *opQueue) grow(cache *chunkCache) {
	n := len(q.chunks)
	switch {
	case n > 0 && len(q.chunks[n-1]) < opChunkSize:
		last := q.chunks[n-1]
		q.chunks[n-1] = append(make([]Op, 0, min(2*cap(last), opChunkSize)), last...)
	case n == 0:
		q.chunks = append(q.chunks, make([]Op, 0, 4))
	default:
		q.chunks = append(q.chunks, cache.get())
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

// dropFront removes the first k ops, calling dropped on each before it goes, and hands the chunks it
// empties to cache.
func (q *opQueue) dropFront(k int, cache *chunkCache, dropped func(*Op)) {
	for range k {
		dropped(q.at(0))
		q.chunks[0][q.head] = Op{}
		q.head++
		q.n--
		if q.head == opChunkSize || q.n == 0 {
			if cap(q.chunks[0]) == opChunkSize {
				cache.put(q.chunks[0])
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
