package zaris

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// owner is a node's serving side. It holds the copies of the partitions the map gives this node, serves the
// key operations, batches, scans and watches routed to it, replicates its writes, hands partitions over
// and takes them back, expires keys, and resolves the intents of transactions their coordinators left.
type owner struct {
	ownerConfig
	store   *store
	repl    *replication
	watches *watchFeed   // serves the watchers of the partitions this node owns
	loads   *readThrough // nil without Config.Loader
	cut     *cutovers
	disk    *diskLog // nil without a DataDir
	// intact is set when this process reloaded a data dir whose previous process acknowledged only writes
	// it had on disk: its copies hold every write that process acknowledged (DiskDurability).
	intact bool
}

// ownerConfig is what the owner takes from its node.
type ownerConfig struct {
	cfg    *Config
	id     NodeID
	layout Layout
	log    *slog.Logger
	view   mapView
	// holdsLease reports whether this node may serve the partitions it owns (controlPlane.holdsLease), and
	// leaseHeld whether it did at its last check; propose commits a decision through the control plane's
	// leader.
	holdsLease func() bool
	leaseHeld  func() bool
	propose    func(ctx context.Context, cmd *command) error
	// client sends what the owner asks of other nodes: a transaction's resolution.
	client *client
	// callReplica sends one replication request to a node: a pull of a partition's copy.
	callReplica  func(id NodeID, req *replicateRequest, timeout time.Duration) (*replicateReply, int, error)
	stats        *nodeStats
	metrics      *opMetrics // nil with Config.DisableMetrics
	panics       *panicGuard
	goBackground func(f func()) bool
	life         context.Context
	wg           *sync.WaitGroup
}

// mapView is the cluster map this node has committed, and a signal of the next.
type mapView interface {
	clusterMap() *ClusterMap
	// next returns a channel that is closed once a newer map than the current one is published.
	next() <-chan struct{}
}
