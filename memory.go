package zaris

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// EvictionNoEviction is the eviction policy that evicts nothing: once a partition holds its share of
// MaxMemory, writes that would grow it are refused with ErrOutOfMemory; reads and deletes are served.
const EvictionNoEviction = "noeviction"

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
	layout    Layout
	footprint func(segment int) int64 // what a segment's entries take
	refusals  atomic.Uint64
}

func newMemoryBudget(cfg *Config, layout Layout, footprint func(segment int) int64) *memoryBudget {
	b := &memoryBudget{reserved: cfg.OpLogRetainBytes + cfg.NearCache.MaxBytes, layout: layout, footprint: footprint}
	b.max.Store(cfg.MaxMemory)
	return b
}

// setMax changes MaxMemory at run time. Zero lifts the bound; a bound the op log and near cache would
// take whole is refused.
func (b *memoryBudget) setMax(limit int64) error {
	if b == nil {
		return fmt.Errorf("%w: this endpoint has no node whose memory it could bound", ErrInvalidConfig)
	}
	if limit != 0 && limit < minMaxMemory(b.reserved) {
		return fmt.Errorf("%w: maxmemory %d is below %d: the in-memory op log and near cache may hold %d of it",
			ErrInvalidConfig, limit, minMaxMemory(b.reserved), b.reserved)
	}
	b.max.Store(limit)
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
		n += b.footprint(s)
	}
	return n
}

// footprint estimates what req may add to its partition's copies: its key, value and arguments, and an
// entry's overhead.
func (req *kvRequest) footprint() int64 {
	n := int64(len(req.Key) + len(req.Value) + entryOverhead)
	for _, a := range req.Args {
		n += int64(len(a))
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
// k, kb, m, mb, g or gb (case-insensitive; k is 1000 and kb 1024, as Redis counts).
func ParseMemorySize(s string) (int64, error) {
	lower := strings.ToLower(strings.TrimSpace(s))
	units := []struct {
		suffix string
		scale  int64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"b", 1}}
	scale := int64(1)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			lower, scale = strings.TrimSuffix(lower, u.suffix), u.scale
			break
		}
	}
	n, err := strconv.ParseInt(lower, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/scale {
		return 0, fmt.Errorf("%w: memory size %q is not a byte count (such as 100mb or 2gb)", ErrInvalidConfig, s)
	}
	return n * scale, nil
}
