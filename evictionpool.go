package zaris

import "sync"

// evictionPoolSize is how many candidates a partition's eviction pool keeps.
const evictionPoolSize = 16

// evictionPoolKeyMax is the longest key a pool keeps: a pooled key keeps its string alive after the key is
// gone, so only short ones are kept, and at most evictionPoolSize of them per partition.
const evictionPoolKeyMax = 256

// evictionPool keeps, per partition, the best eviction candidates recent samples met, so that an
// eviction chooses among many more keys than one small sample holds: a key that a sample met stays a
// candidate until a better one displaces it or it is evicted. A candidate is ranked afresh at each
// eviction from its access stamp and expiry as sampled, and the eviction checks that its entry did not
// change since (store.evict), so a key written or used since it joined is not taken by mistake.
type evictionPool struct {
	parts []pooledCandidates
}

// pooledCandidates is one partition's pool.
type pooledCandidates struct {
	mu         sync.Mutex
	candidates []evictionCandidate
}

func newEvictionPool(partitions int) evictionPool {
	return evictionPool{parts: make([]pooledCandidates, partitions)}
}

// take adds the sampled candidates to partition p's pool, then removes and returns the highest ranked at
// now; none when the pool and the sample are empty. The pool keeps the next best, up to its size.
func (ep *evictionPool) take(p int, sampled []evictionCandidate, r evictionRanker, now int64) (evictionCandidate, bool) {
	part := &ep.parts[p]
	part.mu.Lock()
	defer part.mu.Unlock()
	pool := part.candidates
	for _, c := range sampled {
		if i := pooledAt(pool, &c); i >= 0 {
			pool[i] = c // sampled again: its newer word
		} else {
			pool = append(pool, c)
		}
	}
	if len(pool) == 0 {
		return evictionCandidate{}, false
	}
	best := 0
	for i := range pool {
		pool[i].rank = r.rank(&pool[i], now)
		if pool[i].rank > pool[best].rank {
			best = i
		}
	}
	taken := pool[best]
	pool = removeCandidate(pool, best)
	for i := 0; i < len(pool); {
		if len(pool[i].key) > evictionPoolKeyMax {
			pool = removeCandidate(pool, i)
		} else {
			i++
		}
	}
	for len(pool) > evictionPoolSize {
		pool = removeCandidate(pool, lowestRanked(pool))
	}
	part.candidates = pool // removeCandidate zeroed what it removed: no string kept alive past the end
	return taken, true
}

// pooledAt returns the index of c's key in pool, or -1. Keys are compared last: one segment's entries
// mostly differ by version already.
func pooledAt(pool []evictionCandidate, c *evictionCandidate) int {
	version := c.word & versionMask
	for i := range pool {
		if o := &pool[i]; o.segment == c.segment && o.word&versionMask == version && o.key == c.key {
			return i
		}
	}
	return -1
}

// removeCandidate removes pool[i], moving the last candidate into its place.
func removeCandidate(pool []evictionCandidate, i int) []evictionCandidate {
	last := len(pool) - 1
	pool[i] = pool[last]
	pool[last] = evictionCandidate{}
	return pool[:last]
}

// lowestRanked returns the index of the lowest ranked candidate of a non-empty pool.
func lowestRanked(pool []evictionCandidate) int {
	low := 0
	for i := range pool {
		if pool[i].rank < pool[low].rank {
			low = i
		}
	}
	return low
}

// clear empties every partition's pool.
func (ep *evictionPool) clear() {
	for p := range ep.parts {
		part := &ep.parts[p]
		part.mu.Lock()
		part.candidates = nil
		part.mu.Unlock()
	}
}
