package zaris

import (
	"cmp"
	"slices"
	"sync"
)

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
// now; none when the pool and the sample are empty.
func (ep *evictionPool) take(p int, sampled []evictionCandidate, r evictionRanker, now int64) (evictionCandidate, bool) {
	part := &ep.parts[p]
	part.mu.Lock()
	defer part.mu.Unlock()
	pool := part.candidates
	for _, c := range sampled {
		if i := slices.IndexFunc(pool, func(o evictionCandidate) bool { return o.segment == c.segment && o.key == c.key }); i >= 0 {
			pool[i] = c // sampled again: its newer word
		} else {
			pool = append(pool, c)
		}
	}
	if len(pool) == 0 {
		return evictionCandidate{}, false
	}
	for i := range pool {
		pool[i].rank = r.rank(&pool[i], now)
	}
	slices.SortFunc(pool, byRankDescending)
	best := pool[0]
	kept := pool[:0]
	for _, c := range pool[1:] {
		if len(kept) < evictionPoolSize && len(c.key) <= evictionPoolKeyMax {
			kept = append(kept, c)
		}
	}
	clear(pool[len(kept):]) // no string kept alive past the pool's end
	part.candidates = kept
	return best, true
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

func byRankDescending(a, b evictionCandidate) int { return cmp.Compare(b.rank, a.rank) }
