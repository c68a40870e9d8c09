package zaris

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/durability"
)

// diskLog writes a node's ops and segment snapshots to its durability store, off the hot path. Writers
// enqueue under their segment's lock, so a segment's ops keep their order, and one goroutine commits the
// queue in batches: one write, plus one fsync under DiskSynced, per batch. Under DiskWritten and DiskSynced
// an acknowledgement waits for its batch (await). Under DiskBehind a crash may lose the latest tail, which
// the node fetches again from the owner.
type diskLog struct {
	diskLogConfig
	store   durability.Store
	waits   bool // acknowledgements wait for the disk
	wake    chan struct{}
	written atomic.Uint64 // ops committed

	mu      sync.Mutex
	queue   []diskItem
	bytes   int64         // what queue holds, against Config.DiskQueueBytes
	room    sync.Cond     // signalled, on mu, whenever the writer takes the queue
	queued  uint64        // items ever enqueued: the ticket of the latest
	done    uint64        // tickets whose batch is committed (and synced)
	failed  error         // the first write the store refused: the disk acknowledges nothing after it
	flushed chan struct{} // closed, and replaced, whenever done moves
}

// diskItem is an op, or a snapshot of its segment's state up to its revision. A replacing snapshot
// (replace) may follow another history, at a lower revision than the log reached, so it is written over
// an emptied segment. A checkpoint of the node's own state (trim) does not replace: ops newer than it may
// already be in the log.
type diskItem struct {
	op      durability.Op
	snap    *durability.Snapshot
	replace bool
}

// size is what item counts against the queue's bound.
func (it *diskItem) size() int64 {
	if it.snap == nil {
		return int64(opBytes(&it.op))
	}
	size := int64(64)
	for i := range it.snap.Entries {
		size += int64(len(it.snap.Entries[i].Key) + len(it.snap.Entries[i].Value) + 32)
	}
	return size
}

// diskLogConfig is what the disk log takes from its node.
type diskLogConfig struct {
	cfg  *Config
	log  *slog.Logger
	life context.Context // ends when the node closes; the writer then drains the queue and stops
	wg   *sync.WaitGroup // the writer's goroutine, which Close waits for
	// failed, when set, is called once, from the writer, when the store first refuses a write.
	failed func(error)
}

// openDiskLog opens the Pebble store under c.cfg.DataDir.
func openDiskLog(c diskLogConfig) (*diskLog, error) {
	level, dir := c.cfg.DiskDurability, c.cfg.DataDir
	pebble, err := durability.OpenPebble(filepath.Join(dir, "oplog"), durability.PebbleOptions{
		Logger: c.log, NoFsync: level == DiskWritten, FS: c.cfg.hooks.diskFS})
	if err != nil {
		return nil, fmt.Errorf("zaris: open data dir %s: %w", dir, err)
	}
	var store durability.Store = pebble
	if wrap := c.cfg.hooks.diskStore; wrap != nil {
		store = wrap(store)
	}
	return newDiskLog(store, c, level != DiskBehind), nil
}

func newDiskLog(store durability.Store, c diskLogConfig, waits bool) *diskLog {
	d := &diskLog{diskLogConfig: c, store: store, waits: waits, wake: make(chan struct{}, 1), flushed: make(chan struct{})}
	d.room.L = &d.mu
	return d
}

// enqueue queues item and returns its ticket, for await. While the queue holds DiskQueueBytes it waits
// for the writer to take it, unless the node stops (the writer drains the queue as it stops).
func (d *diskLog) enqueue(item diskItem) uint64 {
	size := item.size()
	d.mu.Lock()
	for d.bytes > 0 && d.bytes+size > d.cfg.DiskQueueBytes && !d.stopping() {
		d.room.Wait()
	}
	d.queue = append(d.queue, item)
	d.bytes += size
	d.queued++
	ticket := d.queued
	d.mu.Unlock()
	signal(d.wake)
	return ticket
}

func (d *diskLog) stopping() bool {
	select {
	case <-d.life.Done():
		return true
	default:
		return false
	}
}

// mark returns the ticket of the latest item queued. It is nil-safe, for nodes without a DataDir.
func (d *diskLog) mark() uint64 {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.queued
}

// await blocks until every item up to ticket is on disk as far as the node's DiskDurability asks. It
// returns at once without a DataDir or under DiskBehind, and fails after a refused write.
func (d *diskLog) await(ctx context.Context, ticket uint64) error {
	if d == nil || !d.waits {
		return nil
	}
	return d.flushedTo(ctx, ticket)
}

// flushedTo blocks until the batch holding ticket is committed (and synced, under DiskSynced). After a
// refused write it fails.
func (d *diskLog) flushedTo(ctx context.Context, ticket uint64) error {
	for {
		d.mu.Lock()
		done, failed, flushed := d.done, d.failed, d.flushed
		d.mu.Unlock()
		switch {
		case failed != nil:
			return failed
		case done >= ticket:
			return nil
		}
		select {
		case <-flushed:
		case <-ctx.Done():
			return ctx.Err()
		case <-d.life.Done():
			return ErrClosed
		}
	}
}

// run commits queued items until the node stops, then drains what is left and closes the store.
func (d *diskLog) run() {
	defer d.wg.Done()
	for {
		select {
		case <-d.life.Done():
			d.flush()
			if err := errors.Join(d.store.Sync(), d.store.Close()); err != nil {
				d.log.Warn("close op log", "err", err)
			}
			return
		case <-d.wake:
			d.flush()
		}
	}
}

// flush commits the queue, syncs it when acknowledgements wait for it, and releases their waiters.
func (d *diskLog) flush() {
	d.mu.Lock()
	items, upTo := d.queue, d.queued
	d.queue, d.bytes = nil, 0
	d.room.Broadcast()
	d.mu.Unlock()
	err := d.commit(items)
	if err == nil && d.waits && len(items) > 0 {
		err = d.store.Sync()
	}
	d.mu.Lock()
	first := err != nil && d.failed == nil
	if first {
		d.failed = fmt.Errorf("zaris: data dir refused a write: %w", err)
		d.log.Error("data dir refused a write; this node acknowledges no more writes until it restarts", "err", err)
	}
	d.done = upTo
	close(d.flushed)
	d.flushed = make(chan struct{})
	d.mu.Unlock()
	if first && d.diskLogConfig.failed != nil {
		d.diskLogConfig.failed(err)
	}
}

// keepDraining, once this node's data dir has refused a write, has the control plane move every partition
// away from the node, as a drain does: the node acknowledges no write any more, and what it owns would
// otherwise take none until it restarts. record proposes the drain and reports whether the map records it;
// it is retried every interval until then, or until life ends. The node stays a member; its next process
// starts undrained.
func keepDraining(life context.Context, clock Clock, interval time.Duration, log *slog.Logger, record func(context.Context) (bool, error)) {
	log.Error("data dir failed: moving this node's partitions to the others until it restarts")
	for {
		done, err := record(life)
		if done || errors.Is(err, ErrClosed) {
			return
		}
		wait := clock.NewTimer(interval)
		select {
		case <-wait.C():
		case <-life.Done():
			wait.Stop()
			return
		}
	}
}

// commit writes items in order: runs of ops as one batch each, snapshots in their place between them. It
// goes on past a refused write and returns the first error.
func (d *diskLog) commit(items []diskItem) error {
	var errs []error
	var ops []durability.Op
	for _, it := range items {
		if it.snap == nil {
			ops = append(ops, it.op)
			continue
		}
		errs = append(errs, d.commitOps(ops))
		ops = ops[:0]
		errs = append(errs, d.commitSnapshot(it.snap, it.replace))
	}
	errs = append(errs, d.commitOps(ops))
	return errors.Join(errs...)
}

func (d *diskLog) commitOps(ops []durability.Op) error {
	if len(ops) == 0 {
		return nil
	}
	if err := d.store.Append(ops); err != nil {
		d.log.Error("append to op log", "ops", len(ops), "err", err)
		return err
	}
	d.written.Add(uint64(len(ops)))
	return nil
}

// commitSnapshot saves a segment snapshot and drops the ops it covers. A replacing snapshot first resets
// the segment, so the log resumes right after the snapshot whatever it held.
func (d *diskLog) commitSnapshot(s *durability.Snapshot, replace bool) error {
	var err error
	if replace {
		err = d.store.ResetSegment(s.Segment)
	}
	if err == nil {
		err = d.store.SaveSnapshot(s)
	}
	if err == nil {
		err = d.store.TruncateBefore(s.Segment, s.Revision+1)
	}
	if err != nil {
		d.log.Error("save segment snapshot", "segment", s.Segment, "err", err)
	}
	return err
}

// replay rebuilds the store from the disk log: each segment's snapshot, then the ops after it. It runs
// before the node joins, so nothing else touches the store.
func (r *replication) replay(d *diskLog) (segments int, ops int, err error) {
	list, err := d.store.Segments()
	if err != nil {
		return 0, 0, fmt.Errorf("zaris: read op log: %w", err)
	}
	for _, seg := range list {
		if int(seg) >= r.layout.Segments {
			return 0, 0, fmt.Errorf("zaris: op log holds segment %d, the cluster has %d: %w", seg, r.layout.Segments, durability.ErrCorrupt)
		}
		n, err := r.replaySegment(d, int(seg))
		if err != nil {
			return 0, 0, err
		}
		ops += n
	}
	return len(list), ops, nil
}

func (r *replication) replaySegment(d *diskLog, seg int) (int, error) {
	snap, ok, err := d.store.LoadSnapshot(uint32(seg))
	if err != nil {
		return 0, fmt.Errorf("zaris: load snapshot of segment %d: %w", seg, err)
	}
	if ok {
		r.installSnapshotEntries(seg, snap.Revision, snap.Epoch, snap.Entries, false)
	}
	ops, err := d.store.Ops(uint32(seg), snap.Revision, 0)
	if err != nil {
		return 0, fmt.Errorf("zaris: replay segment %d after revision %d: %w", seg, snap.Revision, err)
	}
	for i := range ops {
		op := &ops[i]
		if applied, have := r.store.applyAt(seg, op.Epoch, op); !applied {
			return 0, fmt.Errorf("zaris: replay segment %d: op %d follows revision %d: %w", seg, op.Revision, have, durability.ErrCorrupt)
		}
		r.raiseFence(r.layout.SegmentPartition(seg), op.Epoch)
	}
	if len(ops) > 0 {
		r.lines[seg].Store(ops[len(ops)-1].Epoch) // ops are recorded under the line they follow
	}
	r.restartOpLog(seg, r.store.revision(seg)) // the ops replayed stay on disk, for replicas behind
	return len(ops), nil
}

// trim bounds the disk log: a segment whose log outgrows DiskRetainBytes, or whose oldest op is older than
// DiskRetainAge, is snapshotted and its covered ops dropped.
func (d *diskLog) trim(checkpoint func(seg int)) {
	now := d.cfg.Clock.Now()
	for seg := 0; seg < d.cfg.Segments; seg++ {
		if d.needsTrim(seg, now) {
			checkpoint(seg)
		}
	}
}

func (d *diskLog) needsTrim(seg int, now time.Time) bool {
	size, err := d.store.LogBytes(uint32(seg))
	if err != nil || size == 0 {
		return false
	}
	if size > d.cfg.DiskRetainBytes {
		return true
	}
	first, _, err := d.store.Bounds(uint32(seg))
	if err != nil {
		return false
	}
	oldest, err := d.store.Ops(uint32(seg), first-1, 1)
	return err == nil && len(oldest) == 1 && now.Sub(time.Unix(0, oldest[0].Time)) > d.cfg.DiskRetainAge
}

// replacements counts the replacements of one segment's copy, begun and done. A copy is replaced in memory
// before the disk log commits it, so a disk read matches memory only if no replacement was under way when
// it started and none began before it ended.
type replacements struct{ begun, done atomic.Uint64 }

// opsAfter returns up to limit ops of segment seg after revision after, up to about budget bytes, from the
// op log in memory or, when memory does not reach back, from the one on disk (fromDisk). It fails with
// durability.ErrTruncated, and the replica needs a snapshot, when neither reaches back or a replacement is
// under way.
func (r *replication) opsAfter(seg int, after uint64, limit, budget int) (ops []durability.Op, fromDisk bool, err error) {
	ops, err = r.oplog.Ops(uint32(seg), after, limit)
	if !errors.Is(err, durability.ErrTruncated) || r.disk == nil {
		return ops, false, err
	}
	c := &r.replaced[seg]
	done := c.done.Load()
	if c.begun.Load() != done {
		return nil, false, durability.ErrTruncated
	}
	ops, err = r.disk.opsAfter(seg, after, limit, budget)
	if err != nil && !errors.Is(err, durability.ErrTruncated) {
		r.log.Debug("read the op log on disk", "segment", seg, "after", after, "err", err)
	}
	if err != nil || len(ops) == 0 || c.begun.Load() != done {
		return nil, false, durability.ErrTruncated
	}
	return ops, true, nil
}

// diskReadOps is how many ops a catch-up read takes from the store at a time: a read bounded by bytes goes
// past its budget by fewer than that many ops.
const diskReadOps = 64

// opsAfter returns up to limit ops of segment seg after revision after, and stops reading once they reach
// budget bytes. It fails with durability.ErrTruncated when the store no longer reaches back to after+1.
// It first waits for every queued item to be stored: the op log in memory drops only queued ops, so the
// ops returned meet it without a gap.
func (d *diskLog) opsAfter(seg int, after uint64, limit, budget int) ([]durability.Op, error) {
	ctx, cancel := context.WithTimeout(d.life, d.cfg.ReplicaAckTimeout)
	defer cancel()
	if err := d.flushedTo(ctx, d.mark()); err != nil {
		return nil, err
	}
	var ops []durability.Op
	for bytes := 0; len(ops) < limit && (len(ops) == 0 || bytes < budget); {
		want := min(diskReadOps, limit-len(ops))
		chunk, err := d.store.Ops(uint32(seg), after, want)
		if err != nil && len(ops) == 0 {
			return nil, err
		}
		for i := range chunk {
			bytes += opBytes(&chunk[i])
		}
		ops = append(ops, chunk...)
		if err != nil || len(chunk) < want {
			break // the store holds no more, or what was read so far is all it can give
		}
		after = chunk[len(chunk)-1].Revision
	}
	return ops, nil
}
