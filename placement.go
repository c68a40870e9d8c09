package zaris

import (
	"fmt"
	"slices"

	"github.com/zaris-go/zaris/internal/kv"
)

// The key space has three levels. A key hashes to one of NumSlots slots exactly as in Redis Cluster; the slots
// are cut into S contiguous segments (the unit of the op log and of catch-up), and the segments into P
// contiguous partitions (the unit of ownership, replication and failover). S and P are fixed when a cluster is
// created; Layout holds them.
const (
	// NumSlots is the number of hash slots, as in Redis Cluster.
	NumSlots = kv.NumSlots
	// DefaultSegments is the number of segments of a cluster created without an explicit layout.
	DefaultSegments = 1024
	// DefaultPartitions is the number of partitions of a cluster created without an explicit layout.
	DefaultPartitions = 128

	slotBits = 14 // NumSlots == 1 << slotBits
)

// KeySlot returns the Redis Cluster slot of key: byte for byte what CLUSTER KEYSLOT returns. When key holds a
// hash tag (the bytes between its first '{' and the first '}' after it, if there is at least one), only the tag
// is hashed, so keys that share a tag share a slot.
func KeySlot(key string) uint16 { return kv.KeySlot(key) }

// KeySlotBytes is KeySlot for a byte slice. It neither allocates nor copies key.
func KeySlotBytes(key []byte) uint16 { return kv.KeySlotBytes(key) }

// Layout is the fixed shape of a cluster's key space: Segments contiguous slot ranges over the NumSlots slots, and
// Partitions contiguous segment runs over the segments. Both splits are proportional, so ranges differ in size
// by at most one. Build one with NewLayout or DefaultLayout; the zero Layout is not valid.
type Layout struct {
	Segments   int
	Partitions int
}

// DefaultLayout returns the layout of DefaultSegments segments and DefaultPartitions partitions.
func DefaultLayout() Layout {
	return Layout{Segments: DefaultSegments, Partitions: DefaultPartitions}
}

// NewLayout returns the layout of the given segment and partition counts, which must satisfy
// 1 <= partitions <= segments <= NumSlots. Errors wrap ErrInvalidLayout.
func NewLayout(segments, partitions int) (Layout, error) {
	l := Layout{Segments: segments, Partitions: partitions}
	if err := l.Validate(); err != nil {
		return Layout{}, err
	}
	return l, nil
}

// Validate reports whether l satisfies 1 <= Partitions <= Segments <= NumSlots. Errors wrap ErrInvalidLayout.
func (l Layout) Validate() error {
	if l.Segments < 1 || l.Segments > NumSlots {
		return fmt.Errorf("%w: %d segments, want 1 to %d", ErrInvalidLayout, l.Segments, NumSlots)
	}
	if l.Partitions < 1 || l.Partitions > l.Segments {
		return fmt.Errorf("%w: %d partitions over %d segments, want 1 to %d",
			ErrInvalidLayout, l.Partitions, l.Segments, l.Segments)
	}
	return nil
}

// SlotSegment returns the segment of slot: slot*Segments/NumSlots. It panics if slot >= NumSlots.
func (l Layout) SlotSegment(slot uint16) int {
	if slot >= NumSlots {
		panicOutOfRange("slot", int(slot), NumSlots)
	}
	return int(slot) * l.Segments >> slotBits
}

// SegmentPartition returns the partition of segment: segment*Partitions/Segments. It panics if segment is out
// of range.
func (l Layout) SegmentPartition(segment int) int {
	if uint(segment) >= uint(l.Segments) {
		panicOutOfRange("segment", segment, l.Segments)
	}
	return segment * l.Partitions / l.Segments
}

// SlotPartition returns the partition of slot. It panics if slot >= NumSlots.
func (l Layout) SlotPartition(slot uint16) int {
	return l.SegmentPartition(l.SlotSegment(slot))
}

// KeySegment returns the segment of key.
func (l Layout) KeySegment(key string) int {
	return int(KeySlot(key)) * l.Segments >> slotBits
}

// KeySegmentBytes returns the segment of key, without allocating.
func (l Layout) KeySegmentBytes(key []byte) int {
	return int(KeySlotBytes(key)) * l.Segments >> slotBits
}

// KeyPartition returns the partition of key.
func (l Layout) KeyPartition(key string) int {
	return l.KeySegment(key) * l.Partitions / l.Segments
}

// KeyPartitionBytes returns the partition of key, without allocating.
func (l Layout) KeyPartitionBytes(key []byte) int {
	return l.KeySegmentBytes(key) * l.Partitions / l.Segments
}

// SegmentSlots returns the inclusive slot range of segment: the slots whose SlotSegment is segment. It is
// never empty. It panics if segment is out of range.
func (l Layout) SegmentSlots(segment int) (first, last uint16) {
	if uint(segment) >= uint(l.Segments) {
		panicOutOfRange("segment", segment, l.Segments)
	}
	// SlotSegment(slot) == s  <=>  s*NumSlots <= slot*Segments < (s+1)*NumSlots.
	first = uint16(ceilDiv(segment*NumSlots, l.Segments))
	last = uint16(ceilDiv((segment+1)*NumSlots, l.Segments) - 1)
	return first, last
}

// PartitionSegments returns the half-open segment range [first, end) of partition: the segments whose
// SegmentPartition is partition. It is never empty. It panics if partition is out of range.
func (l Layout) PartitionSegments(partition int) (first, end int) {
	if uint(partition) >= uint(l.Partitions) {
		panicOutOfRange("partition", partition, l.Partitions)
	}
	// SegmentPartition(seg) == p  <=>  p*Segments <= seg*Partitions < (p+1)*Segments.
	return ceilDiv(partition*l.Segments, l.Partitions), ceilDiv((partition+1)*l.Segments, l.Partitions)
}

// PartitionSlots returns the inclusive slot range of partition. It panics if partition is out of range.
func (l Layout) PartitionSlots(partition int) (first, last uint16) {
	firstSegment, end := l.PartitionSegments(partition)
	first, _ = l.SegmentSlots(firstSegment)
	_, last = l.SegmentSlots(end - 1)
	return first, last
}

// ceilDiv returns ⌈a/b⌉ for a >= 0 and b > 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

func panicOutOfRange(what string, value, limit int) {
	panic(fmt.Sprintf("zaris: %s %d out of range [0, %d)", what, value, limit))
}

// NodeID names a cluster member.
type NodeID = kv.NodeID

// Assignment is a partition map: for each partition, its assigned nodes, the preferred primary first and then
// the replicas. A partition with no nodes has a nil entry.
type Assignment [][]NodeID

// Moves compares a (the map before) with b (the map after). It returns how many (partition, node) copies of b
// are not in a, that is, how many copies must be built on a new node, and how many partitions of b have a
// different preferred primary than in a (including a partition that gains or loses its last node).
func (a Assignment) Moves(b Assignment) (copies, primaries int) {
	for p := range max(len(a), len(b)) {
		before, after := a.partition(p), b.partition(p)
		for _, n := range after {
			if !slices.Contains(before, n) {
				copies++
			}
		}
		if !samePrimary(before, after) {
			primaries++
		}
	}
	return copies, primaries
}

// partition returns the nodes of partition p, or nil if a has no such partition.
func (a Assignment) partition(p int) []NodeID {
	if p < len(a) {
		return a[p]
	}
	return nil
}

func samePrimary(x, y []NodeID) bool {
	if len(x) == 0 || len(y) == 0 {
		return len(x) == len(y)
	}
	return x[0] == y[0]
}

// Assign computes the partition map of partitions partitions over nodes with replication factor rf.
//
// Every partition gets min(rf, number of distinct nodes) distinct nodes, the first being its preferred primary.
// Copies per node differ by at most one across nodes, and so do primaries per node. Among such maps, Assign
// returns one that keeps the most copies of prev (the fewest copies to build), then the most primaries of prev.
// A primary that must move goes, where it can, to a node that held the partition before. A joining node takes
// its fair share of copies from nodes over their new quota. A leaving node has only its own copies re-homed,
// unless the balance forces one more exchange (possible only with few partitions per node).
//
// The result depends only on prev, on the set of nodes (not their order or repetitions), on partitions and on
// rf. Nodes of prev that are gone are ignored, and a prev of another length counts as nil. With no nodes or
// rf < 1 every partition is empty. With partitions < 1 the map is empty.
func Assign(prev Assignment, nodes []NodeID, partitions, rf int) Assignment {
	if partitions < 1 {
		return Assignment{}
	}
	out := make(Assignment, partitions)
	members := slices.Compact(slices.Sorted(slices.Values(nodes)))
	copies := min(max(rf, 0), len(members))
	if copies == 0 {
		return out
	}
	if len(prev) != partitions {
		prev = nil
	}
	before := projectPrevious(prev, members, partitions)
	holds := placeCopies(before, len(members), copies)
	primary := placePrimaries(before, holds)
	backing := make([]NodeID, partitions*copies) // one allocation for all partitions
	for p := range out {
		out[p] = holderList(backing[p*copies:p*copies:(p+1)*copies], members, before.holders[p], holds.row(p), primary[p])
	}
	return out
}

// previousMap is a previous assignment in terms of member indexes, without gone nodes and duplicates.
type previousMap struct {
	holders [][]int // per partition, its live previous holders in their previous order
	primary []int   // per partition, its previous primary if still a member, else -1
}

func projectPrevious(prev Assignment, members []NodeID, partitions int) previousMap {
	before := previousMap{holders: make([][]int, partitions), primary: make([]int, partitions)}
	total := 0
	for _, nodes := range prev {
		total += len(nodes)
	}
	backing := make([]int, total) // one allocation for all partitions
	for p := range partitions {
		before.primary[p] = -1
		if prev == nil {
			continue
		}
		holders := backing[:0:len(prev[p])]
		backing = backing[len(prev[p]):]
		for i, id := range prev[p] {
			n, live := slices.BinarySearch(members, id)
			if !live || slices.Contains(holders, n) {
				continue
			}
			if i == 0 {
				before.primary[p] = n
			}
			holders = append(holders, n)
		}
		before.holders[p] = holders
	}
	return before
}

// placeCopies chooses the holders of every partition: copies distinct nodes each, copies per node balanced,
// as many previous copies kept as the balance allows.
func placeCopies(before previousMap, nodes, copies int) *balancer {
	parts := len(before.holders)
	b := newBalancer(parts, nodes, parts*copies)
	for p := range parts {
		b.want[p] = copies
		for n := range nodes {
			b.setArc(p, n, arcMove)
		}
		for _, n := range before.holders[p] {
			b.setArc(p, n, arcKeep)
		}
	}
	order, firm, share := copyKeepOrder(before, nodes)
	b.keep(order, firm)
	steerOrphans(b, before, share)
	b.complete()
	return b
}

// steerOrphans sets the fill preferences of b so that a partition that lost its primary, and kept no holder
// able to take one more primary, gets such a holder. It changes no copy's cost: it only spares placePrimaries
// from moving other partitions' primaries to make room.
func steerOrphans(b *balancer, before previousMap, share []int) {
	room := slices.Clone(share)
	for p, n := range before.primary {
		if n >= 0 && b.has[p*b.nodes+n] {
			room[n]--
		}
	}
	needsPrimary := make([]bool, b.parts)
	for p, n := range before.primary {
		if n >= 0 && b.has[p*b.nodes+n] {
			continue
		}
		best := -1
		for _, h := range before.holders[p] {
			if b.has[p*b.nodes+h] && room[h] > 0 && (best < 0 || room[h] > room[best]) {
				best = h
			}
		}
		if best >= 0 {
			room[best]-- // a kept holder will take the primary
		} else {
			needsPrimary[p] = true
		}
	}
	b.score = func(p, n int) int {
		if needsPrimary[p] {
			return room[n]
		}
		return 0
	}
	b.placed = func(p, n int) {
		if needsPrimary[p] && room[n] > 0 {
			needsPrimary[p] = false
			room[n]--
		}
	}
}

// copyKeepOrder lists, per node, the previous copies it holds by keep priority and how many of them are firm
// (kept before any other), and returns each node's expected share of primaries in the new map. The order is:
// previous primaries up to the share (firm), replicas, then surplus primaries. A node over its copy quota thus
// gives up surplus primaries first, and a newcomer takes them with their copies, sparing a second handover.
func copyKeepOrder(before previousMap, nodes int) (order [][]int, firm, share []int) {
	primaries := make([][]int, nodes)
	replicas := make([][]int, nodes)
	for p, holders := range before.holders {
		for _, n := range holders {
			if n == before.primary[p] {
				primaries[n] = append(primaries[n], p)
			} else {
				replicas[n] = append(replicas[n], p)
			}
		}
	}
	share = primaryShares(primaries, len(before.holders))
	order, firm = make([][]int, nodes), make([]int, nodes)
	for n := range nodes {
		firm[n] = min(share[n], len(primaries[n]))
		order[n] = slices.Concat(primaries[n][:firm[n]], replicas[n], primaries[n][firm[n]:])
	}
	return order, firm, share
}

// primaryShares predicts how many primaries each node gets in a balanced map of parts partitions, given the
// previous primaries of each node: the floor share, plus one for the nodes that held the most, as
// placePrimaries will decide.
func primaryShares(primaries [][]int, parts int) []int {
	nodes := len(primaries)
	share := make([]int, nodes)
	for n := range share {
		share[n] = parts / nodes
	}
	for _, n := range mostFirst(primaries, nil)[:parts%nodes] {
		share[n]++
	}
	return share
}

// mostFirst returns the node indexes ordered by decreasing len(lists[n]), then by decreasing tie[n] (if tie is
// not nil), then by index.
func mostFirst(lists [][]int, tie []int) []int {
	order := make([]int, len(lists))
	for n := range order {
		order[n] = n
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if d := len(lists[b]) - len(lists[a]); d != 0 || tie == nil {
			return d
		}
		return tie[b] - tie[a]
	})
	return order
}

// placePrimaries chooses one primary per partition among its holders, primaries per node balanced, as many
// previous primaries kept as the balance allows. Where a primary must move it prefers a holder that held the
// partition before (it has the data) over a new copy.
func placePrimaries(before previousMap, holds *balancer) []int {
	parts, nodes := holds.parts, holds.nodes
	b := newBalancer(parts, nodes, parts)
	keepOrder := make([][]int, nodes)
	for p := range parts {
		b.want[p] = 1
		for n := range nodes {
			if holds.has[p*nodes+n] {
				b.setArc(p, n, arcMove)
			}
		}
		if n := before.primary[p]; n >= 0 && holds.has[p*nodes+n] {
			b.setArc(p, n, arcKeep)
			keepOrder[n] = append(keepOrder[n], p)
		}
	}
	b.keep(keepOrder, nil)
	b.score = func(p, n int) int { // a node that held the partition before has its data
		if slices.Contains(before.holders[p], n) {
			return 1
		}
		return 0
	}
	b.complete()
	primary := make([]int, parts)
	for p := range parts {
		primary[p] = slices.Index(b.row(p), true)
	}
	return primary
}

// holderList renders one partition into list (empty, with room for every holder): its primary, then its other
// holders that held it before (in their previous order), then its new holders (in member order).
func holderList(list, members []NodeID, previous []int, holds []bool, primary int) []NodeID {
	list = append(list, members[primary])
	for _, n := range previous {
		if n != primary && holds[n] {
			list = append(list, members[n])
		}
	}
	for n, held := range holds {
		if held && n != primary && !slices.Contains(previous, n) {
			list = append(list, members[n])
		}
	}
	return list
}

// Arc costs of a balancer: placing a unit of a partition on a node either keeps it where it was or moves it.
const (
	arcForbidden int8 = -1
	arcKeep      int8 = 0
	arcMove      int8 = 1
)

// balancer is a minimum-cost balanced assignment of partitions to nodes, solved as a min-cost flow.
//
// Partition p must receive want[p] distinct nodes among those its arcs allow. Every node ends with floor or
// floor+1 units, exactly ceils of them with floor+1 (the caller makes the totals match). A unit costs 0 on a
// kept arc and 1 on a moved one, and the solution minimises the total. The flow network is source -> partition
// (capacity want[p]) -> node (capacity 1 per arc) -> sink (capacity floor), plus node -> hub (capacity 1) ->
// sink (capacity ceils), the hub deciding which nodes take the extra unit. It is never built explicitly: the
// residual arcs are read off the has matrix and the loads.
type balancer struct {
	parts, nodes int
	floor, ceils int
	want         []int              // per partition
	arc          []int8             // parts*nodes, arcForbidden or the unit's cost
	score        func(p, n int) int // optional: the greedy fill puts a unit of p on the highest scoring node
	placed       func(p, n int)     // optional: told of every unit the greedy fill places
	has          []bool             // parts*nodes, the current solution
	got          []int              // per partition
	load         []int              // per node
	ceilsUsed    int                // nodes with load floor+1
	missing      int                // units still to place

	// scratch space of augment
	dist, parent []int
	queue        []int
	queued       []bool
}

func newBalancer(parts, nodes, units int) *balancer {
	cells := parts * nodes
	b := &balancer{
		parts: parts, nodes: nodes,
		floor: units / nodes, ceils: units % nodes,
		want: make([]int, parts), arc: make([]int8, cells),
		has: make([]bool, cells), got: make([]int, parts), load: make([]int, nodes),
		missing: units,
	}
	for i := range b.arc {
		b.arc[i] = arcForbidden
	}
	return b
}

func (b *balancer) setArc(p, n int, cost int8) { b.arc[p*b.nodes+n] = cost }

// row returns which nodes partition p is placed on.
func (b *balancer) row(p int) []bool { return b.has[p*b.nodes : (p+1)*b.nodes] }

// hasRoom reports whether node n can take one more unit without breaking the balance.
func (b *balancer) hasRoom(n int) bool {
	return b.load[n] < b.floor || b.load[n] == b.floor && b.ceilsUsed < b.ceils
}

// canPlace reports whether a unit of p may go on n directly.
func (b *balancer) canPlace(p, n int) bool {
	i := p*b.nodes + n
	return b.got[p] < b.want[p] && b.arc[i] != arcForbidden && !b.has[i] && b.hasRoom(n)
}

func (b *balancer) place(p, n int) {
	b.has[p*b.nodes+n] = true
	b.got[p]++
	b.load[n]++
	b.missing--
	if b.load[n] == b.floor+1 {
		b.ceilsUsed++
	}
}

func (b *balancer) unplace(p, n int) {
	if b.load[n] == b.floor+1 {
		b.ceilsUsed--
	}
	b.has[p*b.nodes+n] = false
	b.got[p]--
	b.load[n]--
	b.missing++
}

// keep places as many kept units as possible. order[n] lists node n's kept arcs by priority, and its first
// firm[n] entries are taken before all others (firm may be nil). The floor+1 quotas go to the nodes with the
// most kept arcs, then the most firm ones. A greedy pass lets nodes choose in index order, each over its quota
// preferring partitions that earlier nodes already gave a unit up of, so losses fall on distinct partitions
// and one newcomer can take them all. Augmenting paths over kept arcs then make the kept units maximal.
func (b *balancer) keep(order [][]int, firm []int) {
	quota := make([]int, b.nodes)
	for i, n := range mostFirst(order, firm) {
		quota[n] = b.floor
		if i < b.ceils {
			quota[n]++
		}
	}
	short := make([]bool, b.parts) // a node has already given up a unit of the partition
	for n := range b.nodes {
		take := func(p int) {
			if b.load[n] < quota[n] && b.canPlace(p, n) {
				b.place(p, n)
			}
		}
		var rest []int
		if firm != nil {
			for _, p := range order[n][:firm[n]] {
				take(p)
			}
			rest = order[n][firm[n]:]
		} else {
			rest = order[n]
		}
		for _, p := range rest {
			if short[p] {
				take(p)
			}
		}
		for _, p := range rest {
			take(p)
		}
		for _, p := range order[n] {
			if !b.has[p*b.nodes+n] {
				short[p] = true
			}
		}
	}
	for b.missing > 0 && b.augment(true) {
	}
}

// complete places every missing unit at the least cost. A greedy pass puts units directly on nodes with room
// (see bestDirect). The units it cannot place that way go along shortest augmenting paths, which move placed
// units to make room. Once the kept units are maximal, no placement can cost less than one, so the greedy pass
// keeps the solution optimal for its size, and each shortest path then keeps it optimal.
func (b *balancer) complete() {
	for p := range b.parts {
		for b.got[p] < b.want[p] {
			n := b.bestDirect(p)
			if n < 0 {
				break
			}
			b.place(p, n)
			if b.placed != nil {
				b.placed(p, n)
			}
		}
	}
	for b.missing > 0 {
		if !b.augment(false) {
			// The network always admits a full flow: a partition never wants more nodes than it may use, and
			// the node capacities add up to the units wanted.
			panic("zaris: internal error: partition assignment is infeasible")
		}
	}
}

// bestDirect returns the node that should take the next unit of p directly, or -1 if none can: the highest
// score, then the lowest load, then the lowest index.
func (b *balancer) bestDirect(p int) int {
	best, bestScore := -1, 0
	for n := range b.nodes {
		if !b.canPlace(p, n) {
			continue
		}
		score := 0
		if b.score != nil {
			score = b.score(p, n)
		}
		if best < 0 || score > bestScore || score == bestScore && b.load[n] < b.load[best] {
			best, bestScore = n, score
		}
	}
	return best
}

// augment places one missing unit along a shortest augmenting path of the residual network, found with a
// queue-based Bellman-Ford search (arc costs may be negative on the way back, never in a cycle). With
// keptOnly, only kept arcs may be added. It reports whether a path was found.
//
// Vertices are the partitions [0, parts), the nodes [parts, parts+nodes) and the hub. Residual arcs:
//
//   - partition p to node n when p may use n and does not, at the arc's cost;
//   - node n back to each partition it holds, at minus the cost (that unit leaves n);
//   - node n to the hub when n is at floor;
//   - the hub to node n when n is at floor+1 (n gives its extra slot away).
//
// A path ends at a node below floor, or at the hub while a floor+1 slot is free.
func (b *balancer) augment(keptOnly bool) bool {
	hub := b.parts + b.nodes
	b.resetSearch(hub + 1)
	for p := range b.parts {
		if b.got[p] < b.want[p] {
			b.dist[p] = 0
			b.enqueue(p)
		}
	}
	for head := 0; head < len(b.queue); head++ {
		if head > (hub+1)*(hub+1) {
			panic("zaris: internal error: negative cycle in partition assignment")
		}
		u := b.queue[head]
		b.queued[u] = false
		switch {
		case u < b.parts:
			for n := range b.nodes {
				i := u*b.nodes + n
				if b.arc[i] != arcForbidden && !b.has[i] && !(keptOnly && b.arc[i] != arcKeep) {
					b.relax(u, b.parts+n, int(b.arc[i]))
				}
			}
		case u < hub:
			n := u - b.parts
			for p := range b.parts {
				if i := p*b.nodes + n; b.has[i] {
					b.relax(u, p, -int(b.arc[i]))
				}
			}
			if b.load[n] == b.floor && b.ceils > 0 {
				b.relax(u, hub, 0)
			}
		default:
			for n := range b.nodes {
				if b.load[n] == b.floor+1 {
					b.relax(u, b.parts+n, 0)
				}
			}
		}
	}
	end := b.pathEnd(hub)
	if end < 0 {
		return false
	}
	b.applyPath(end)
	return true
}

func (b *balancer) resetSearch(vertices int) {
	if len(b.dist) != vertices {
		b.dist, b.parent, b.queued = make([]int, vertices), make([]int, vertices), make([]bool, vertices)
	}
	for v := range vertices {
		b.dist[v], b.parent[v], b.queued[v] = unreached, -1, false
	}
	b.queue = b.queue[:0]
}

const unreached = int(^uint(0) >> 1)

func (b *balancer) enqueue(v int) {
	if !b.queued[v] {
		b.queued[v] = true
		b.queue = append(b.queue, v)
	}
}

func (b *balancer) relax(u, v, cost int) {
	if d := b.dist[u] + cost; d < b.dist[v] {
		b.dist[v], b.parent[v] = d, u
		b.enqueue(v)
	}
}

// pathEnd returns the cheapest vertex from which a unit can reach the sink, or -1.
func (b *balancer) pathEnd(hub int) int {
	end := -1
	consider := func(v int) {
		if b.dist[v] != unreached && (end < 0 || b.dist[v] < b.dist[end]) {
			end = v
		}
	}
	for n := range b.nodes {
		if b.load[n] < b.floor {
			consider(b.parts + n)
		}
	}
	if b.ceilsUsed < b.ceils {
		consider(hub)
	}
	return end
}

// applyPath shifts one unit along the path that ends at end. Units leave their nodes before new ones arrive, so
// no load ever passes floor+1 on the way.
func (b *balancer) applyPath(end int) {
	type step struct{ p, n int }
	var adds, removes []step
	isNode := func(v int) bool { return v >= b.parts && v < b.parts+b.nodes }
	for v := end; b.parent[v] >= 0; v = b.parent[v] {
		switch u := b.parent[v]; {
		case u < b.parts && isNode(v): // partition -> node: place
			adds = append(adds, step{u, v - b.parts})
		case isNode(u) && v < b.parts: // node -> partition: take back
			removes = append(removes, step{v, u - b.parts})
		}
	}
	for _, s := range removes {
		b.unplace(s.p, s.n)
	}
	for _, s := range adds {
		b.place(s.p, s.n)
	}
}
