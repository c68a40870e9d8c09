package zaris

import "sync/atomic"

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
	routingStats
}
