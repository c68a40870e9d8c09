package zaris

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
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
	// backups holds transactions' decisions during a backup; backupReads holds the snapshots a backup
	// reads in pieces; restores stages the pieces of segments being restored.
	backups     *backupHold
	backupReads *heldPulls
	restores    *snapshotStage
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

// serveKV applies one key operation if this node actively owns the key's partition; otherwise it answers
// Moved with the owner and epoch it knows. It never forwards.
func (o *owner) serveKV(ctx context.Context, op transport.Op, req *kv.Request) (reply kv.Reply) {
	start := time.Now()
	defer func() { o.ownerOp(op, reply.Status, start) }()
	if heldBack(op, req) {
		if !o.backups.enter(ctx) {
			return kv.Reply{Status: StatusLocked} // a backup holds: sent again, as for a held key
		}
		defer o.backups.leave()
	}
	seg, refusal, owned := o.checkOwner(req.Key)
	if !owned {
		return refusal
	}
	return o.applyKV(ctx, op, seg, req)
}

// keyCount counts the keys held on this node, owned or replicated.
func (o *owner) keyCount() int { return o.store.len() }

// expiringKeyCount counts the keys held on this node that have a TTL.
func (o *owner) expiringKeyCount() int { return o.store.expiringLen() }

// expiredKeys counts the keys this node expired as their owner.
func (o *owner) expiredKeys() uint64 { return o.stats.expired.Load() }

// ownsIn reports whether this process is partition p's active owner in m (see replication.ownsIn).
func (o *owner) ownsIn(m *ClusterMap, p int) bool { return o.repl.ownsIn(m, p) }

// recordedIn reports whether m records this process as the node's current one.
func (o *owner) recordedIn(m *ClusterMap) bool { return o.repl.recordedIn(m) }

// checkOwner returns the key's segment if this node actively owns its partition in the committed map, and
// otherwise the reply that refuses the request (Moved, PartitionUnavailable or NotReady).
func (o *owner) checkOwner(key string) (segment int, refusal kv.Reply, owned bool) {
	segment = o.layout.KeySegment(key)
	refusal, owned = o.checkPartition(o.layout.SegmentPartition(segment))
	return segment, refusal, owned
}

// checkPartition reports whether this node actively owns partition p in the committed map under a live
// lease, and otherwise returns the reply that refuses a request for it.
func (o *owner) checkPartition(p int) (refusal kv.Reply, owned bool) {
	refusal, owned = o.partitionRefusal(p)
	o.countRefusal(&refusal)
	return refusal, owned
}

// countRefusal counts a refusal that sends the request to another node.
func (o *owner) countRefusal(refusal *kv.Reply) {
	if refusal.Status == StatusMoved || refusal.Status == StatusPartitionUnavailable {
		o.stats.redirectsSent.Add(1)
	}
}

// partitionRefusal is checkPartition without counting the redirects, for scans that only look.
func (o *owner) partitionRefusal(p int) (refusal kv.Reply, owned bool) {
	m := o.view.clusterMap()
	if m.Version == 0 {
		return kv.Reply{Status: StatusNotReady, MapIndex: m.Index}, false
	}
	st := m.Runtime[p]
	if st.Owner == o.id {
		if !o.ownsIn(m, p) || o.panics.gaveUp.Load() || !o.holdsLease() || st.Health == Recovering || o.cut.isSealed(p) {
			return kv.Reply{Status: StatusOwnershipChanging, Epoch: st.Epoch, MapIndex: m.Index}, false
		}
		return kv.Reply{}, true
	}
	if st.Health == Unavailable {
		return kv.Reply{Status: StatusPartitionUnavailable, Epoch: st.Epoch, MapIndex: m.Index}, false
	}
	return kv.Reply{Status: StatusMoved, Owner: st.Owner, Epoch: st.Epoch, MapIndex: m.Index}, false
}

// applyKV runs one key operation on the local store and, for a successful write under the Sync concern,
// waits until every in-sync replica has it. The caller has checked ownership.
func (o *owner) applyKV(ctx context.Context, op transport.Op, seg int, req *kv.Request) kv.Reply {
	reply := o.applyStore(ctx, op, seg, req)
	if reply.Status == StatusNotFound && o.loads.covers(op, req.Key) {
		reply = o.loads.readThrough(ctx, req.Key, func() kv.Reply {
			if _, refusal, owned := o.checkOwner(req.Key); !owned {
				return refusal // the partition moved during the load: the caller reads again at its owner
			}
			return o.applyStore(ctx, op, seg, req)
		})
	}
	if o.awaitsReplicas(op, req, &reply) {
		if status := o.repl.awaitReplicas(ctx, seg, o.store.revision(seg), true); status != StatusSuccess {
			return kv.Reply{Status: settleApplied(status)}
		}
	} else if rev, wait := o.unconfirmed(op, seg, &reply); wait {
		if status := o.repl.awaitReplicas(ctx, seg, rev, false); status != StatusSuccess {
			return kv.Reply{Status: status}
		}
	}
	if o.cfg.hooks.observeAck != nil && reply.Status == StatusSuccess && !readOnly(op) {
		o.observeAck(seg)
	}
	return reply
}

// observeAck tells the observeAck test hook that a write to seg is being acknowledged.
func (o *owner) observeAck(seg int) {
	p := o.layout.SegmentPartition(seg)
	if st := o.view.clusterMap().Runtime[p]; st.Owner == o.id {
		o.cfg.hooks.observeAck(o.id, p, st.Epoch)
	}
}

// applyAtomically runs fn on an atomic group of segment seg (store.atomically) as applyKV runs a write:
// refused when the partition has too few in-sync copies or is sealed for a hand-over, or when a
// transaction holds one of keys, and under the Sync concern acknowledged only once the in-sync replicas
// hold the group. fn gets the limits key operations run under. The caller has checked ownership.
func (o *owner) applyAtomically(ctx context.Context, seg int, keys []string, fn func(kv.Group)) Status {
	p := o.layout.SegmentPartition(seg)
	if o.cfg.WriteConcern == Sync && !o.enoughInSync(o.view.clusterMap().Runtime[p]) {
		return StatusNotEnoughReplicas
	}
	revision, status := o.applyGroup(p, seg, keys, fn)
	if status != StatusSuccess || o.cfg.WriteConcern != Sync {
		return status
	}
	return settleApplied(o.repl.awaitReplicas(ctx, seg, revision, true))
}

// applyGroup is applyAtomically's write, unless partition p is sealed: it returns the segment's revision
// after it. A panic of fn is an internal error.
func (o *owner) applyGroup(p, seg int, keys []string, fn func(kv.Group)) (revision uint64, status Status) {
	if !o.cut.enter(p) {
		return 0, StatusOwnershipChanging
	}
	defer o.cut.leave(p)
	defer o.panics.recoverOp(kv.OpTxn, seg, &status)
	o.store.budget.makeRoomForGroup(seg)
	lim := o.opLimits()
	revision = o.store.atomically(seg, func(g *store) {
		for _, key := range keys {
			if g.lockedBy(seg, key) != "" {
				status = StatusLocked
				return
			}
		}
		if o.repl.deposed(p) {
			status = StatusOwnershipChanging
			return
		}
		fn(&storeGroup{g: g, seg: seg, lim: lim})
	})
	return revision, status
}

// readAtomically runs fn on a read-only view of segment seg (store.readAtomically), so that every key fn
// reads is seen at one revision, never in the middle of an atomic group. It is refused while a committed
// transaction's intent is about to write one of keys, and under the Sync concern it answers only once the
// in-sync replicas hold the revision fn saw, as a single read does. The caller has checked ownership.
func (o *owner) readAtomically(ctx context.Context, seg int, keys []string, fn func(kv.Group)) Status {
	revision, status := o.readViewOf(seg, keys, fn, o.opLimits())
	if status != StatusSuccess || o.cfg.WriteConcern != Sync || !o.repl.unconfirmedAt(seg, revision) {
		return status
	}
	return o.repl.awaitReplicas(ctx, seg, revision, false)
}

// readViewOf is readAtomically's read under lim: it returns the revision fn saw. A panic of fn is an
// internal error.
func (o *owner) readViewOf(seg int, keys []string, fn func(kv.Group), lim opLimits) (revision uint64, status Status) {
	defer o.panics.recoverOp(kv.OpGet, seg, &status)
	revision = o.store.readAtomically(seg, func(g *store) {
		for _, key := range keys {
			if g.writeIntentOn(seg, key) {
				status = StatusLocked // a committed transaction may be about to change it
				return
			}
		}
		if lim.deposedFrom(seg) {
			status = StatusOwnershipChanging // the copy may be the emptied one of a deposed owner
			return
		}
		fn(&storeGroup{g: g, seg: seg, lim: lim, read: true})
	})
	return revision, status
}

// opLimits are the limits key operations run under on this node.
func (o *owner) opLimits() opLimits {
	return opLimits{memory: o.store.budget, deposed: o.repl.deposed, maxValueSize: o.cfg.MaxValueSize, maxReplyBytes: o.cfg.MaxFrameSize / 2, layout: o.layout}
}

// awaitsReplicas reports whether reply is a successful write that must reach the in-sync replicas before
// it is acknowledged.
func (o *owner) awaitsReplicas(op transport.Op, req *kv.Request, reply *kv.Reply) bool {
	return reply.Status == StatusSuccess && !readOnly(op) && o.concern(req) == Sync
}

// enoughInSync reports whether a partition in state st has MinInSync in-sync copies, its owner included.
func (o *owner) enoughInSync(st PartitionState) bool { return o.repl.enoughInSync(st) }

func (o *owner) concern(req *kv.Request) WriteConcern {
	if req.Concern != 0 {
		return req.Concern
	}
	return o.cfg.WriteConcern
}

// readCopy serves read-only operation k of req from this node's copy of segment seg, within lim: refused
// while a committed transaction may be about to change the key.
func (o *owner) readCopy(seg int, k *keyOperation, req *kv.Request, lim opLimits) kv.Reply {
	if o.store.writeIntentOn(seg, req.Key) {
		return kv.Reply{Status: StatusLocked}
	}
	return o.store.applyRead(seg, k, *req, lim)
}

// applyStore runs one key operation on the local store. A write is refused if its partition was sealed
// for a hand-over since the ownership check.
func (o *owner) applyStore(_ context.Context, op transport.Op, seg int, req *kv.Request) (reply kv.Reply) {
	k := lookupKeyOp(op)
	if k == nil {
		return kv.Reply{Status: StatusInvalidRequest}
	}
	defer o.panics.recoverOp(op, seg, &reply.Status)
	k = o.panicking(k, op, req.Key)
	if refusal := refuseKeyOp(k, req.Key); refusal != nil {
		return *refusal
	}
	if k.readOnly {
		return o.readCopy(seg, k, req, o.opLimits())
	}
	p := o.layout.SegmentPartition(seg)
	if o.concern(req) == Sync && !o.enoughInSync(o.view.clusterMap().Runtime[p]) {
		return kv.Reply{Status: StatusNotEnoughReplicas}
	}
	if !o.cut.enter(p) {
		return kv.Reply{Status: StatusOwnershipChanging}
	}
	defer o.cut.leave(p)
	if !k.grows && op != kv.OpTxn {
		return o.store.applyExclusive(seg, k, *req, o.opLimits())
	}
	// A write that lost the room eviction made for it to another write makes room again.
	for range 4 {
		o.store.budget.makeRoom(seg, requestFootprint(req))
		reply = o.store.applyExclusive(seg, k, *req, o.opLimits())
		if reply.Status != StatusOutOfMemory || !o.store.budget.evicts() {
			break
		}
	}
	return reply
}
