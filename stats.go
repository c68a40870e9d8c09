package zaris

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Stats are a node's routing counters, so users and tests can see the routing at work.
type Stats struct {
	// RequestsSent counts key requests this node sent to each peer (one per hop).
	RequestsSent map[NodeID]uint64
	// LocalOps counts operations on keys this node owns, served in-process without a network call.
	LocalOps uint64
	// RequestsServed counts key requests this node served for other nodes; a batch request counts once.
	RequestsServed uint64
	// BatchItemsServed counts the items of the batch requests this node served for other nodes.
	BatchItemsServed uint64
	// RedirectsSent counts requests this node refused because it is not the key's active owner.
	RedirectsSent uint64
	// RedirectsReceived counts Moved, OwnershipChanging and ReplicaWriteRejected replies this node received.
	RedirectsReceived uint64
	// Retries counts operations resent after a redirect.
	Retries uint64
	// Refreshes counts routing-table installs by cause. Coalesced counts reactive refreshes that found the
	// table already installed by a concurrent one.
	Refreshes struct{ Push, Poll, React, Coalesced uint64 }
}

type nodeStats struct {
	localOps      atomic.Uint64
	served        atomic.Uint64
	batchItems    atomic.Uint64
	redirectsSent atomic.Uint64
	redirects     atomic.Uint64
	retries       atomic.Uint64
	expired       atomic.Uint64 // keys this node expired as their owner
	// failovers times the failovers this node committed as leader, from its suspicion of the owner.
	failovers histogram
	// recentFailovers keeps the recent failovers this node applied, for the status page.
	recentFailovers failoverHistory
	routingStats
}

// histogram counts durations into latencyBuckets with atomics only, so observing never locks or allocates.
type histogram struct {
	counts [numBuckets + 1]atomic.Uint64 // the last one counts what exceeds every bound
	sumNs  atomic.Uint64
}

func (h *histogram) observe(d time.Duration) {
	i := 0
	for i < numBuckets && int64(d) > latencyBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(max(d, 0)))
}

// cumulative returns the histogram as Prometheus states one: the count, the sum in seconds and, per bound,
// how many observations were at most that bound.
func (h *histogram) cumulative() (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, numBuckets)
	for i, bound := range latencyBuckets {
		count += h.counts[i].Load()
		buckets[bound] = count
	}
	count += h.counts[numBuckets].Load()
	return count, float64(h.sumNs.Load()) / 1e9, buckets
}

// counted reports whether the histogram has observed anything.
func (h *histogram) counted() bool {
	for i := range h.counts {
		if h.counts[i].Load() > 0 {
			return true
		}
	}
	return false
}

// failoverEvent is one partition's promotion, as this node's map recorded it.
type failoverEvent struct {
	Partition int    `json:"partition"`
	From      NodeID `json:"from"`
	To        NodeID `json:"to"` // "" when no copy was left: the partition became Unavailable
	Epoch     uint64 `json:"epoch"`
	At        int64  `json:"at"` // Unix milliseconds, when this node applied it
}

// failoverHistory keeps the most recent failovers this node applied, for the status page.
type failoverHistory struct {
	mu     sync.Mutex
	events []failoverEvent // oldest first, at most failoverHistoryLen
}

const failoverHistoryLen = 32

// note records the partitions a map change failed over: those whose owner changed while the map's
// count of promotions grew.
func (h *failoverHistory) note(old, next *ClusterMap, at time.Time) {
	if next.Promotions == old.Promotions || len(old.Runtime) != len(next.Runtime) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, st := range next.Runtime {
		was := old.Runtime[p]
		if st.Epoch == was.Epoch || st.Owner == was.Owner || was.Owner == "" {
			continue
		}
		h.events = append(h.events, failoverEvent{Partition: p, From: was.Owner, To: st.Owner, Epoch: st.Epoch, At: at.UnixMilli()})
	}
	if over := len(h.events) - failoverHistoryLen; over > 0 {
		h.events = slices.Delete(h.events, 0, over)
	}
}

// recent returns the recorded failovers, the most recent first.
func (h *failoverHistory) recent() []failoverEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.events)
	slices.Reverse(out)
	return out
}
