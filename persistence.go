package zaris

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/durability"
)

// diskLog writes a node's ops and segment snapshots to its durability store, off the hot path: writers
// enqueue under their segment's lock (so a segment's ops keep their order) and one goroutine commits
// them in batches, without syncing. A crash may lose the latest tail; the node then fetches it again
// from the partition's owner.
type diskLog struct {
	store   durability.Store
	n       *Node
	wake    chan struct{}
	written atomic.Uint64 // ops committed

	mu    sync.Mutex
	queue []diskItem
}

// diskItem is an op, or a snapshot of its segment's state up to its revision. A snapshot that replaces
// the segment (replace) is written over an emptied segment: it may follow another history, at a lower
// revision than the log reached, so none of the log's ops may survive it. A checkpoint of the node's own
// state (trim) is not one: ops newer than it may already be in the log.
type diskItem struct {
	op      durability.Op
	snap    *durability.Snapshot
	replace bool
}

// openDiskLog opens the Pebble store under dir.
func openDiskLog(n *Node, dir string) (*diskLog, error) {
	store, err := durability.OpenPebble(filepath.Join(dir, "oplog"), durability.PebbleOptions{Logger: n.log})
	if err != nil {
		return nil, fmt.Errorf("zaris: open data dir %s: %w", dir, err)
	}
	return &diskLog{store: store, n: n, wake: make(chan struct{}, 1)}, nil
}

func (d *diskLog) enqueue(item diskItem) {
	d.mu.Lock()
	d.queue = append(d.queue, item)
	d.mu.Unlock()
	signal(d.wake)
}

// run commits queued items until the node stops, then drains what is left and closes the store.
func (d *diskLog) run() {
	defer d.n.wg.Done()
	for {
		select {
		case <-d.n.stop:
			d.flush()
			if err := errors.Join(d.store.Sync(), d.store.Close()); err != nil {
				d.n.log.Warn("close op log", "err", err)
			}
			return
		case <-d.wake:
			d.flush()
		}
	}
}

// flush commits the queue: runs of ops as one batch each, snapshots in their place between them.
func (d *diskLog) flush() {
	d.mu.Lock()
	items := d.queue
	d.queue = nil
	d.mu.Unlock()
	var ops []durability.Op
	for _, it := range items {
		if it.snap == nil {
			ops = append(ops, it.op)
			continue
		}
		d.commitOps(ops)
		ops = ops[:0]
		d.commitSnapshot(it.snap, it.replace)
	}
	d.commitOps(ops)
}

func (d *diskLog) commitOps(ops []durability.Op) {
	if len(ops) == 0 {
		return
	}
	if err := d.store.Append(ops); err != nil {
		d.n.log.Error("append to op log", "ops", len(ops), "err", err)
		return
	}
	d.written.Add(uint64(len(ops)))
}

// commitSnapshot saves a segment snapshot and drops the ops it covers; one that replaces the segment
// first resets it, so the log resumes right after the snapshot whatever it held.
func (d *diskLog) commitSnapshot(s *durability.Snapshot, replace bool) {
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
		d.n.log.Error("save segment snapshot", "segment", s.Segment, "err", err)
	}
}

// load rebuilds the store from disk: each segment's snapshot, then the ops after it. It runs before the
// node joins, so nothing else touches the store.
func (d *diskLog) load() (segments int, ops int, err error) {
	list, err := d.store.Segments()
	if err != nil {
		return 0, 0, fmt.Errorf("zaris: read op log: %w", err)
	}
	for _, seg := range list {
		if int(seg) >= d.n.layout.Segments {
			return 0, 0, fmt.Errorf("zaris: op log holds segment %d, the cluster has %d: %w", seg, d.n.layout.Segments, durability.ErrCorrupt)
		}
		n, err := d.loadSegment(int(seg))
		if err != nil {
			return 0, 0, err
		}
		ops += n
	}
	return len(list), ops, nil
}

func (d *diskLog) loadSegment(seg int) (int, error) {
	snap, ok, err := d.store.LoadSnapshot(uint32(seg))
	if err != nil {
		return 0, fmt.Errorf("zaris: load snapshot of segment %d: %w", seg, err)
	}
	if ok {
		d.n.repl.installSnapshotEntries(seg, snap.Revision, snap.Epoch, snap.Entries)
	}
	ops, err := d.store.Ops(uint32(seg), snap.Revision, 0)
	if err != nil {
		return 0, fmt.Errorf("zaris: replay segment %d after revision %d: %w", seg, snap.Revision, err)
	}
	for i := range ops {
		op := &ops[i]
		if applied, have := d.n.store.applyAt(seg, op.Revision, op.Epoch, op.Key, entryOf(op)); !applied {
			return 0, fmt.Errorf("zaris: replay segment %d: op %d follows revision %d: %w", seg, op.Revision, have, durability.ErrCorrupt)
		}
		d.n.repl.raiseFence(d.n.layout.SegmentPartition(seg), op.Epoch)
	}
	if len(ops) > 0 {
		d.n.repl.lines[seg].Store(ops[len(ops)-1].Epoch) // ops are recorded under the line they follow
	}
	return len(ops), nil
}

// trim bounds the disk log: a segment whose log outgrows DiskRetainBytes, or whose oldest op is older than
// DiskRetainAge, is snapshotted and its covered ops dropped.
func (d *diskLog) trim() {
	now := d.n.cfg.Clock.Now()
	for seg := 0; seg < d.n.layout.Segments; seg++ {
		if d.needsTrim(seg, now) {
			d.enqueue(diskItem{snap: d.n.repl.diskSnapshot(seg)})
		}
	}
}

func (d *diskLog) needsTrim(seg int, now time.Time) bool {
	size, err := d.store.LogBytes(uint32(seg))
	if err != nil || size == 0 {
		return false
	}
	if size > d.n.cfg.DiskRetainBytes {
		return true
	}
	first, _, err := d.store.Bounds(uint32(seg))
	if err != nil {
		return false
	}
	oldest, err := d.store.Ops(uint32(seg), first-1, 1)
	return err == nil && len(oldest) == 1 && now.Sub(time.Unix(0, oldest[0].Time)) > d.n.cfg.DiskRetainAge
}
