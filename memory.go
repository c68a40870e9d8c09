package zaris

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/zaris-go/zaris/internal/kv"
)

// The eviction policies, named as Redis names them. Under noeviction, once a partition holds its share of
// MaxMemory, writes that would grow it are refused with ErrOutOfMemory; reads and deletes are served. The
// others make room by evicting keys of the partition the write goes to, the allkeys policies any key and the
// volatile ones a key with a TTL: at random, the least recently used (lru) or least frequently used (lfu)
// of a sample, or under volatile-ttl the one of a sample that expires soonest. The volatile policies refuse
// the write as noeviction does when the partition has no key with a TTL.
const (
	EvictionNoEviction     = "noeviction"
	EvictionAllKeysRandom  = "allkeys-random"
	EvictionVolatileRandom = "volatile-random"
	EvictionVolatileTTL    = "volatile-ttl"
	EvictionAllKeysLRU     = "allkeys-lru"
	EvictionVolatileLRU    = "volatile-lru"
	EvictionAllKeysLFU     = "allkeys-lfu"
	EvictionVolatileLFU    = "volatile-lfu"
)

// evictionPolicies are the policies served, by their index in memoryBudget.policy.
var evictionPolicies = []string{EvictionNoEviction, EvictionAllKeysRandom, EvictionVolatileRandom, EvictionVolatileTTL,
	EvictionAllKeysLRU, EvictionVolatileLRU, EvictionAllKeysLFU, EvictionVolatileLFU}

// policyAccess is what each policy needs an entry's access stamp to track.
func policyAccess(policy string) accessMode {
	switch policy {
	case EvictionAllKeysLRU, EvictionVolatileLRU:
		return accessLRU
	case EvictionAllKeysLFU, EvictionVolatileLFU:
		return accessLFU
	}
	return accessNone
}

// volatileOnly reports whether policy evicts only keys with a TTL.
func volatileOnly(policy string) bool { return strings.HasPrefix(policy, "volatile-") }

// evictionPolicyIndex returns the index of the policy named name (case-insensitive), or false.
func evictionPolicyIndex(name string) (uint32, bool) {
	for i, p := range evictionPolicies {
		if strings.EqualFold(name, p) {
			return uint32(i), true
		}
	}
	return 0, false
}

// budgetStore is what a memory budget reads and evicts from: the node's store.
type budgetStore interface {
	segmentBytes(seg int) int64
	sampleKey(seg int, sample evictionSample) (taken int)
	evict(seg int, key string, word uint64) (freed int64, ok bool)
	now() int64
}

// memoryBudget holds the data a node stores within Config.MaxMemory. What MaxMemory leaves after the bounds
// of the in-memory op log and the near cache is the data budget, and each partition gets a share of it: the
// budget divided by the number of partition copies its most loaded holder keeps, owned or replicated. The
// owner refuses a write that would grow a partition past its share. Every copy of a partition holds the
// same data, so no holder's copies add up to more than its data budget, whatever it replicates for others,
// and no node has to ask another how much it holds.
type memoryBudget struct {
	reserved  int64 // taken from MaxMemory before the data budget: the op log's and near cache's bounds
	max       atomic.Int64
	divisors  atomic.Pointer[[]int] // per partition, from the map: the copies its most loaded holder keeps
	policy    atomic.Uint32         // an index in evictionPolicies
	access    atomic.Uint32         // the policy's accessMode
	layout    Layout
	store     budgetStore
	refusals  atomic.Uint64
	evictions atomic.Uint64
	pool      evictionPool
	onEvict   func(key string) // a test hook; nil in production
}

func newMemoryBudget(cfg *Config, layout Layout, store budgetStore) *memoryBudget {
	b := &memoryBudget{reserved: cfg.OpLogRetainBytes + cfg.NearCache.MaxBytes, layout: layout, store: store, onEvict: cfg.hooks.evicted,
		pool: newEvictionPool(layout.Partitions)}
	b.max.Store(cfg.MaxMemory)
	_ = b.setPolicy(cmp.Or(cfg.EvictionPolicy, EvictionNoEviction)) // Validate checked it
	return b
}

// setPolicy changes the eviction policy at run time.
func (b *memoryBudget) setPolicy(name string) error {
	i, ok := evictionPolicyIndex(name)
	if b == nil || !ok {
		return fmt.Errorf("%w: eviction policy %q is none of %s", ErrInvalidConfig, name, strings.Join(evictionPolicies, ", "))
	}
	b.policy.Store(i)
	b.access.Store(uint32(policyAccess(evictionPolicies[i])))
	b.pool.clear() // ranked by the policy before
	return nil
}

// accessMode is what the policy needs entries' access stamps to track; nil-safe.
func (b *memoryBudget) accessMode() accessMode {
	if b == nil {
		return accessNone
	}
	return accessMode(b.access.Load())
}

// policyName is the eviction policy as it stands; nil-safe.
func (b *memoryBudget) policyName() string {
	if b == nil {
		return EvictionNoEviction
	}
	return evictionPolicies[b.policy.Load()]
}

// evicted counts the keys evicted; nil-safe.
func (b *memoryBudget) evicted() uint64 {
	if b == nil {
		return 0
	}
	return b.evictions.Load()
}

// setMax changes MaxMemory at run time. Zero lifts the bound; a bound the op log and near cache would
// take whole is refused.
func (b *memoryBudget) setMax(limit int64) error {
	if err := b.checkMax(limit); err != nil {
		return err
	}
	b.max.Store(limit)
	return nil
}

// checkMax reports why setMax would refuse limit, or nil.
func (b *memoryBudget) checkMax(limit int64) error {
	switch {
	case b == nil:
		return fmt.Errorf("%w: this endpoint has no node whose memory it could bound", ErrInvalidConfig)
	case limit != 0 && limit < minMaxMemory(b.reserved):
		return fmt.Errorf("%w: maxmemory %d is below %d: the in-memory op log and near cache may hold %d of it",
			ErrInvalidConfig, limit, minMaxMemory(b.reserved), b.reserved)
	}
	return nil
}

// limit is MaxMemory as it stands, 0 for no bound; nil-safe.
func (b *memoryBudget) limit() int64 {
	if b == nil {
		return 0
	}
	return b.max.Load()
}

// refused counts the writes refused for want of memory; nil-safe.
func (b *memoryBudget) refused() uint64 {
	if b == nil {
		return 0
	}
	return b.refusals.Load()
}

// minMaxMemory is the least MaxMemory a node whose op log and near cache may hold reserved bytes accepts:
// twice that, so that at least half of it holds data.
func minMaxMemory(reserved int64) int64 { return 2 * reserved }

// mapChanged recomputes the partitions' shares for the map m.
func (b *memoryBudget) mapChanged(m *ClusterMap) {
	d := copiesPerShare(m)
	b.divisors.Store(&d)
}

// admits reports whether partition p's copies may grow by size bytes. It is nil-safe: a node without a
// budget admits everything.
func (b *memoryBudget) admits(segment int, size int64) bool {
	if b == nil {
		return true
	}
	limit := b.max.Load()
	if limit == 0 {
		return true
	}
	p := b.layout.SegmentPartition(segment)
	if b.partitionBytes(p)+size <= b.share(p, limit) {
		return true
	}
	b.refusals.Add(1)
	return false
}

// share is what partition p's copies may hold under MaxMemory limit.
func (b *memoryBudget) share(p int, limit int64) int64 {
	divisor := 1
	if d := b.divisors.Load(); d != nil && p < len(*d) {
		divisor = max(1, (*d)[p])
	}
	return (limit - b.reserved) / int64(divisor)
}

// partitionBytes is what this node's copy of partition p takes.
func (b *memoryBudget) partitionBytes(p int) int64 {
	var n int64
	first, end := b.layout.PartitionSegments(p)
	for s := first; s < end; s++ {
		n += b.store.segmentBytes(s)
	}
	return n
}

// maxEvictionsPerWrite bounds the keys one write evicts to make room; a write still without room is refused.
const maxEvictionsPerWrite = 1024

// evictionSamples is how many keys the LRU, LFU and volatile-ttl policies sample per eviction into the
// partition's pool of candidates, from which they evict the highest ranked.
const evictionSamples = 5

// makeRoom evicts keys of segment's partition, by the eviction policy, until its copies have room for
// size more bytes, and reports whether they have. Each eviction is a write of its own segment, which
// replicas, the disk log and watchers see as an eviction. Under noeviction, or without a bound, it evicts
// nothing. It takes segment locks one at a time: the caller holds none.
func (b *memoryBudget) makeRoom(segment int, size int64) bool {
	if b == nil || b.max.Load() == 0 {
		return true
	}
	p := b.layout.SegmentPartition(segment)
	policy := evictionPolicies[b.policy.Load()]
	for range maxEvictionsPerWrite {
		limit := b.max.Load()
		share := b.share(p, limit)
		if limit == 0 || b.partitionBytes(p)+size <= share {
			return true
		}
		if policy == EvictionNoEviction || size > share {
			return false
		}
		victim, ok := b.victim(p, policy)
		if !ok {
			return false
		}
		if _, ok := b.store.evict(victim.segment, victim.key, victim.word); ok {
			b.evictions.Add(1)
			if b.onEvict != nil {
				b.onEvict(victim.key)
			}
		}
	}
	return false
}

// evicts reports whether the eviction policy makes room rather than refuse; nil-safe.
func (b *memoryBudget) evicts() bool { return b != nil && b.policy.Load() != 0 }

// makeRoomForGroup makes room, as makeRoom does, for an atomic group whose size is not known before it
// runs: a sixteenth of the partition's share.
func (b *memoryBudget) makeRoomForGroup(segment int) {
	if !b.evicts() || b.max.Load() == 0 {
		return
	}
	b.makeRoom(segment, b.share(b.layout.SegmentPartition(segment), b.max.Load())/16)
}

// victim picks the key of partition p that policy evicts next: the first key a sample meets under the
// random policies; else the highest ranked of the partition's pool after a few more keys joined it
// (evictionPool). A sample takes keys in scan order, which bear no relation to their use or expiry, from a
// random key of a random segment, and goes on to the partition's next segments until it has as many as it
// wants or has seen every segment.
func (b *memoryBudget) victim(p int, policy string) (evictionCandidate, bool) {
	var sampled []evictionCandidate
	sample := evictionSample{intn: rand.IntN, withTTL: volatileOnly(policy), want: 1,
		offer: func(c evictionCandidate) { sampled = append(sampled, c) }}
	ranked := policy == EvictionVolatileTTL || policyAccess(policy) != accessNone
	if ranked {
		sample.want = evictionSamples
		sampled = make([]evictionCandidate, 0, evictionSamples)
	}
	first, end := b.layout.PartitionSegments(p)
	taken := 0
	start := rand.IntN(end - first)
	for i := 0; i < end-first && taken < sample.want; i++ {
		want := sample.want
		sample.want -= taken
		taken += b.store.sampleKey(first+(start+i)%(end-first), sample)
		sample.want = want
	}
	if !ranked {
		if len(sampled) == 0 {
			return evictionCandidate{}, false // no segment of the partition holds a key to evict
		}
		return sampled[0], true
	}
	return b.pool.take(p, sampled, rankerOf(policy), b.store.now())
}

// evictionSample says what sampleKey looks for: want evictable keys (with a TTL if withTTL), each offered
// to offer; intn(n) picks one of n at random.
type evictionSample struct {
	intn    func(n int) int
	withTTL bool
	want    int
	offer   func(evictionCandidate)
}

// evictionRanker ranks candidates for eviction by a policy, the higher the sooner: by idle time, by rarity
// of use, by nearness of expiry, or not at all.
type evictionRanker struct {
	mode accessMode
	ttl  bool
}

func rankerOf(policy string) evictionRanker {
	return evictionRanker{mode: policyAccess(policy), ttl: policy == EvictionVolatileTTL}
}

// rank is c's rank at now.
func (r evictionRanker) rank(c *evictionCandidate, now int64) uint64 {
	switch {
	case r.mode != accessNone:
		return evictionRank(r.mode, c.access(), now)
	case r.ttl:
		return math.MaxUint64 - uint64(c.expireAt)
	}
	return 0
}

// footprint estimates what req may add to its partition's copies, as the store counts an entry: its key
// and value rounded to the allocator's size class, its arguments likewise, and its item in the key table.
func requestFootprint(req *kv.Request) int64 {
	n := allocSize(int(entryHeader)+len(req.Key)+len(req.Value)) + tableItemOverhead
	for _, a := range req.Args {
		n += allocSize(len(a))
	}
	return n
}

// copiesPerShare returns, per partition of m, the number of partition copies kept by the holder of it that
// keeps the most: its assigned nodes (during a move, the incoming ones too) and its active owner. Dividing
// a node's data budget by it gives a share that fits every holder.
func copiesPerShare(m *ClusterMap) []int {
	holders := func(p int) []NodeID {
		ids := m.Assignment[p]
		if owner := m.Runtime[p].Owner; owner != "" && !slices.Contains(ids, owner) {
			ids = append(ids[:len(ids):len(ids)], owner)
		}
		return ids
	}
	held := map[NodeID]int{}
	for p := range m.Assignment {
		for _, id := range holders(p) {
			held[id]++
		}
	}
	out := make([]int, len(m.Assignment))
	for p := range m.Assignment {
		for _, id := range holders(p) {
			out[p] = max(out[p], held[id])
		}
	}
	return out
}

// ParseMemorySize parses a byte count in Redis's units: a plain number of bytes, or one followed by
// k, kb, m, mb, g or gb (case-insensitive; k is 1000 and kb 1024, as Redis counts). Errors wrap
// ErrInvalidConfig.
func ParseMemorySize(s string) (int64, error) {
	n, err := kv.ParseMemorySize(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return n, nil
}
