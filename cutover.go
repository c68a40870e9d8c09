package zaris

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The owner's side of a move (see rebalance.go): when every target node of a partition it owns is in sync
// and the target primary is another node, the owner seals the partition, waits until the new owner holds
// every revision it has, and asks the leader to settle the move. Sealed, it answers OwnershipChanging to
// reads and writes alike, so nothing is written, acknowledged or read that the new owner lacks.

// cutovers is a node's sealing state, per partition.
type cutovers struct {
	sealed   []atomic.Bool
	inflight []atomic.Int64 // owner writes between the ownership check and the store
	running  []atomic.Bool  // a cut-over or a sync from a failover source is at work (startWorker)
	kick     chan struct{}
	// failures and retryAt space out the attempts on a partition whose cut-overs keep failing, so it
	// serves between them. Touched only by the partition's worker goroutine.
	failures []int
	retryAt  []time.Time

	done, reclaimed atomic.Uint64
	mu              sync.Mutex
	sealTimes       []time.Duration // of the last maxSealTimes cut-overs
	// unsettled are the cut-overs whose settling proposal failed, by partition: it may still commit, and
	// a cut-over counts once the map shows it did.
	unsettled map[int]unsettledCutover
}

// unsettledCutover is a cut-over of a partition owned under epoch, to node to, whose proposal failed after
// it was sealed for sealed.
type unsettledCutover struct {
	epoch  uint64
	to     NodeID
	sealed time.Duration
}

const maxSealTimes = 4096

func newCutovers(partitions int) *cutovers {
	return &cutovers{
		sealed:   make([]atomic.Bool, partitions),
		inflight: make([]atomic.Int64, partitions),
		running:  make([]atomic.Bool, partitions),
		kick:     make(chan struct{}, 1),
		failures: make([]int, partitions),
		retryAt:  make([]time.Time, partitions),

		unsettled: map[int]unsettledCutover{},
	}
}

// proposalFailed notes the cut-over of partition p whose settling proposal failed, or was not applied here
// yet: the map tells later whether it committed.
func (c *cutovers) proposalFailed(p int, u unsettledCutover) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unsettled[p] = u
}

// observe counts, once the map shows partition p in state st settled to its target, a cut-over whose
// proposal failed but committed, and forgets one the map shows ended otherwise.
func (c *cutovers) observe(p int, st *PartitionState) {
	c.mu.Lock()
	u, ok := c.unsettled[p]
	if !ok || st.Epoch <= u.epoch {
		c.mu.Unlock()
		return
	}
	delete(c.unsettled, p)
	c.mu.Unlock()
	if st.Owner == u.to {
		c.record(u.sealed)
	}
}

// enter admits an owner write to partition p unless p is sealed; a write admitted must call leave.
func (c *cutovers) enter(p int) bool {
	c.inflight[p].Add(1)
	if c.sealed[p].Load() {
		c.inflight[p].Add(-1)
		return false
	}
	return true
}

func (c *cutovers) leave(p int) { c.inflight[p].Add(-1) }

// seal stops new writes to p and waits for those already admitted: afterwards p's revisions stand still.
func (c *cutovers) seal(p int) {
	c.sealed[p].Store(true)
	for c.inflight[p].Load() > 0 {
		time.Sleep(20 * time.Microsecond)
	}
}

func (c *cutovers) isSealed(p int) bool { return c.sealed[p].Load() }

// wake asks the cut-over loop to look at the map again.
func (c *cutovers) wake() { signal(c.kick) }

// runCutovers starts a cut-over for each partition that is ready, and a sync from its source for each
// partition this node owns that is Recovering (possession.go), whenever the map changes and on every
// reconcile tick.
func (o *owner) runCutovers() {
	defer o.wg.Done()
	tick := o.cfg.Clock.NewTicker(o.cfg.Timing.Reconcile)
	defer tick.Stop()
	for {
		select {
		case <-o.life.Done():
			return
		case <-o.cut.kick:
		case <-tick.C():
		}
		o.panics.guarded("hand-over scan", func() {
			m := o.view.clusterMap()
			for p := range m.Runtime {
				o.cut.observe(p, &m.Runtime[p])
				switch st := &m.Runtime[p]; {
				case !o.ownsIn(m, p):
				case st.Health == Recovering:
					o.startWorker(p, *st, o.syncFromSource)
				case st.targetInSync() && st.Target[0] != o.id:
					o.startWorker(p, *st, o.cutOverWhenDue)
				}
			}
		})
	}
}

// startWorker runs work for partition p in state st in a goroutine of its own, unless one is already at
// work there.
func (o *owner) startWorker(p int, st PartitionState, work func(int, PartitionState)) {
	if !o.cut.running[p].CompareAndSwap(false, true) {
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer o.cut.running[p].Store(false)
		o.panics.guarded("partition hand-over", func() { work(p, st) })
	}()
}

// cutOverWhenDue cuts partition p over unless its last failed cut-over asks to wait longer.
func (o *owner) cutOverWhenDue(p int, st PartitionState) {
	if !o.cfg.Clock.Now().Before(o.cut.retryAt[p]) {
		o.cutOver(p, st)
	}
}

// cutOver hands partition p, owned under st.Epoch, to its target primary.
func (o *owner) cutOver(p int, st PartitionState) {
	to := st.Target[0]
	start := time.Now()
	o.cut.seal(p)
	defer o.cut.sealed[p].Store(false)
	if hook := o.cfg.hooks.afterSeal; hook != nil {
		hook(p)
	}
	if o.epochMoved(p, st.Epoch) {
		return
	}
	ctx, cancel := timeoutContext(o.life, o.cfg.Clock, o.cfg.CutoverTimeout)
	err := o.drainTo(ctx, p, st.Epoch, to)
	proposed := err == nil
	if proposed {
		err = o.propose(ctx, &command{Kind: cmdSettle, Partition: p, Epoch: st.Epoch, Node: NodeInfo{ID: to}})
	}
	cancel()
	if err == nil && o.epochMoved(p, st.Epoch) {
		o.cut.record(time.Since(start))
		o.cut.failures[p] = 0
		o.log.Debug("partition handed over", "partition", p, "to", to, "sealed", time.Since(start), "revisions", o.repl.revisions(p))
		return
	}
	if proposed { // it may commit yet, or be applied here a moment later
		o.cut.proposalFailed(p, unsettledCutover{epoch: st.Epoch, to: to, sealed: time.Since(start)})
	}
	o.cut.failures[p]++
	o.cut.retryAt[p] = o.cfg.Clock.Now().Add(o.cfg.Timing.Reconcile << min(o.cut.failures[p], 5))
	o.log.Warn("cut-over not confirmed; serving the partition unless the map settles it", "partition", p, "to", to, "err", err)
	o.reclaim(p, st.Epoch)
}

// drainTo waits until node to holds every revision this node has of partition p, owned at epoch.
func (o *owner) drainTo(ctx context.Context, p int, epoch uint64, to NodeID) error {
	link := o.repl.link(to)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		link.lock()
		progress := link.progress
		link.unlock()
		if _, ok := link.caughtUp(p, epoch); ok {
			return nil
		}
		wait := o.cfg.Clock.NewTimer(o.cfg.RetryBackoff)
		select {
		case <-progress:
		case <-wait.C():
		case <-ctx.Done():
		}
		wait.Stop()
	}
}

// reclaim keeps partition p, sealed at epoch, under the next epoch: a settle proposed meanwhile may still
// commit, so the owner serves again only once its map shows the epoch has moved, one way or the other.
func (o *owner) reclaim(p int, epoch uint64) {
	for !o.epochMoved(p, epoch) {
		ctx, cancel := context.WithTimeout(o.life, applyTimeout)
		err := o.propose(ctx, &command{Kind: cmdReclaim, Partition: p, Epoch: epoch})
		cancel()
		if err == nil {
			o.cut.reclaimed.Add(1)
			continue
		}
		if sleepStop(o.cfg.Clock, o.life.Done(), o.cfg.Timing.Reconcile) {
			return
		}
	}
}

// epochMoved reports whether partition p is no longer at epoch in this node's map.
func (o *owner) epochMoved(p int, epoch uint64) bool {
	return o.view.clusterMap().Runtime[p].Epoch != epoch
}

func (c *cutovers) record(d time.Duration) {
	c.done.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sealTimes) == maxSealTimes {
		c.sealTimes = slices.Delete(c.sealTimes, 0, 1)
	}
	c.sealTimes = append(c.sealTimes, d)
}

// CutoverStats reports the partitions this node handed over as owner.
type CutoverStats struct {
	CutOvers, Reclaimed uint64
	// Sealed holds, for the most recent cut-overs, how long the partition refused requests: from the seal
	// until this node applied the settled move.
	Sealed []time.Duration
}
