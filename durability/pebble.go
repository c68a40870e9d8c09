package durability

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

const (
	// defaultCacheSize is the block cache when PebbleOptions.CacheSize is zero: enough for the recent
	// tail of the logs, which is what catch-up reads.
	defaultCacheSize = 8 << 20

	// defaultMemTableSize is the memtable when PebbleOptions.MemTableSize is zero. Larger memtables mean
	// less compaction per appended op. Pebble grows each store's memtable from 256 KiB up to this as writes
	// arrive, so an idle store does not pay for it.
	defaultMemTableSize = 32 << 20

	// diskSlowThreshold is how long a disk operation may take before it is logged as slow.
	diskSlowThreshold = 5 * time.Second
)

// PebbleOptions configures OpenPebble and OpenRaftStore.
type PebbleOptions struct {
	// Logger receives Pebble's own messages (routine ones at debug). Nil silences them.
	Logger *slog.Logger
	// CacheSize is the block cache size in bytes; 0 means 8 MiB.
	CacheSize int64
	// MemTableSize bounds each in-memory write buffer in bytes; 0 means 32 MiB. Pebble may hold a
	// few at once while flushing.
	MemTableSize int64
	// NoFsync makes Sync hand the log to the operating system without flushing it to stable storage:
	// synced writes then survive the process being killed, not power loss, for the cost of a write call.
	NoFsync bool
	// FS is the file system the store lives on; nil means the operating system's.
	FS vfs.FS
}

// Pebble is a Store on a Pebble database in one directory. The key layout is in pebble_keys.go.
//
// Bounds, log sizes and snapshot presence are kept in memory and rebuilt at open with a few seeks per
// segment. Ops and snapshots are read from Pebble on demand.
type Pebble struct {
	db  *pebble.DB
	dir string
	fs  io.Closer // stops the disk health checker that wraps the file system

	// life is held shared by every call and exclusively by Close, so that Close waits for calls in
	// progress (Pebble refuses to close under an open iterator).
	life   sync.RWMutex
	closed bool // guarded by life

	// mu guards segs and the scratch buffers. Writers hold it across their commit, so a reader that
	// takes bounds and an iterator under it sees the log and the bounds at the same point.
	mu     sync.RWMutex
	segs   map[uint32]*pebbleSegment
	keyBuf []byte
	valBuf []byte
}

// pebbleSegment is what is known in memory about one segment.
type pebbleSegment struct {
	logBounds
	startOffset uint64 // offset of the first retained op; equals endOffset when the log is empty
	endOffset   uint64 // offset just past the last op
	snapshot    bool
}

var _ Store = (*Pebble)(nil)

// OpenPebble opens (or creates) the store in dir. Damage that Pebble or the index scan detects returns
// an error wrapping ErrCorrupt. Other failures, such as a directory locked by another process, are
// returned with the directory as context.
func OpenPebble(dir string, opts PebbleOptions) (*Pebble, error) {
	db, fsCloser, err := openDB(dir, opts)
	if err != nil {
		return nil, err
	}
	p := &Pebble{db: db, dir: dir, fs: fsCloser}
	if p.segs, err = loadIndex(db); err != nil {
		_ = db.Close()
		_ = fsCloser.Close()
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return p, nil
}

// openDB opens (or creates) a Pebble database in dir with this package's settings: the disk health
// checker, the cache and memtable sizes of opts, and Pebble's messages and failures sent to opts.Logger.
// Closing the database does not stop the health checker: the caller closes the returned io.Closer after
// it. Errors are classified by openError.
func openDB(dir string, opts PebbleOptions) (*pebble.DB, io.Closer, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// The store wraps the file system itself rather than let Pebble do it: Pebble stops its disk health
	// checker only in DB.Close, so a failed Open would leak the checker's goroutine.
	base := opts.FS
	if base == nil {
		base = privateFS{vfs.Default}
	}
	if opts.NoFsync {
		base = walNoFsyncFS{base}
	}
	diskFS, fsCloser := vfs.WithDiskHealthChecks(base, diskSlowThreshold, nil, func(info vfs.DiskSlowInfo) {
		logger.Warn("pebble: slow disk", "info", info.String())
	})
	cache := pebble.NewCache(orDefault(opts.CacheSize, defaultCacheSize))
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{
		FS:                 diskFS,
		Cache:              cache,
		FormatMajorVersion: pebble.FormatNewest,
		MemTableSize:       uint64(orDefault(opts.MemTableSize, defaultMemTableSize)),
		Logger:             pebbleLogger{l: logger},
		EventListener:      pebbleEvents(logger),
	})
	if err != nil {
		_ = fsCloser.Close()
		return nil, nil, openError(dir, err)
	}
	return db, fsCloser, nil
}

// orDefault returns v, or def when v is not positive.
func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// openError classifies a failed pebble.Open. Beyond what Pebble marks as corruption, a file that its
// MANIFEST lists but that is missing means a damaged directory too.
func openError(dir string, err error) error {
	if errors.Is(err, fs.ErrNotExist) && !pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: open %s: %w", ErrCorrupt, dir, err)
	}
	return storageError("open "+dir, err)
}

// Append implements Store: the accepted ops go in one batch, committed without sync.
func (p *Pebble) Append(ops []Op) error {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return ErrClosed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	plan := planAppend(ops, p.boundsLocked)
	ends := make([]uint64, len(plan.touched))
	for i, t := range plan.touched {
		if seg := p.segs[t.segment]; seg != nil {
			ends[i] = seg.endOffset
		}
	}
	if err := p.commitAccepted(ops, plan, ends); err != nil {
		return err
	}
	for i, t := range plan.touched {
		if t.refused == nil {
			seg := p.segmentLocked(t.segment)
			seg.logBounds = t.logBounds
			seg.endOffset = ends[i]
		}
	}
	return plan.err()
}

// commitAccepted writes the ops plan accepts in one batch, advancing ends, the end offset of each
// touched segment.
func (p *Pebble) commitAccepted(ops []Op, plan *appendPlan, ends []uint64) error {
	batch := p.db.NewBatch()
	defer batch.Close()
	for i := range ops {
		op := &ops[i]
		j := plan.find(op.Segment)
		if plan.touched[j].refused != nil {
			continue
		}
		p.keyBuf = appendOpKey(p.keyBuf[:0], op.Segment, op.Revision)
		p.valBuf = AppendOp(binary.BigEndian.AppendUint64(p.valBuf[:0], ends[j]), op)
		if err := batch.Set(p.keyBuf, p.valBuf, nil); err != nil {
			return storageError("append", err)
		}
		ends[j] += uint64(len(p.keyBuf) + len(p.valBuf))
	}
	if batch.Empty() {
		return nil
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		return storageError("append", err)
	}
	return nil
}

// Ops implements Store. The ops are decoded from an iterator opened together with the bounds, so a
// concurrent truncation cannot tear the result.
func (p *Pebble) Ops(segment uint32, after uint64, limit int) ([]Op, error) {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return nil, ErrClosed
	}
	it, from, to, err := p.openRange(segment, after)
	if it == nil || err != nil {
		return nil, err
	}
	n := to - from + 1
	if limit > 0 && uint64(limit) < n {
		n = uint64(limit)
	}
	ops, err := readOps(it, segment, from, n)
	if cerr := it.Close(); err == nil && cerr != nil {
		err = storageError(fmt.Sprintf("read segment %d", segment), cerr)
	}
	if err != nil {
		return nil, err
	}
	return ops, nil
}

// openRange takes segment's bounds and, when there is something to read after after, an iterator over
// the revisions [from, to].
func (p *Pebble) openRange(segment uint32, after uint64) (it *pebble.Iterator, from, to uint64, err error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	from, to, ok, err := p.boundsLocked(segment).readRange(after)
	if !ok || err != nil {
		return nil, 0, 0, err
	}
	upper := append(opKey(segment, to), 0) // the key right after revision to
	it, err = p.db.NewIter(&pebble.IterOptions{LowerBound: opKey(segment, from), UpperBound: upper})
	if err != nil {
		return nil, 0, 0, storageError(fmt.Sprintf("read segment %d", segment), err)
	}
	return it, from, to, nil
}

// maxOpsUpFront caps the ops Ops allocates before reading any, in case the bounds are damaged.
const maxOpsUpFront = 4096

// readOps decodes n consecutive ops of segment from it, the first at revision from.
func readOps(it *pebble.Iterator, segment uint32, from, n uint64) ([]Op, error) {
	ops := make([]Op, 0, min(n, maxOpsUpFront))
	rev := from
	for ok := it.First(); ok && uint64(len(ops)) < n; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, storageError(fmt.Sprintf("read segment %d revision %d", segment, rev), err)
		}
		op, err := decodeStoredOp(it.Key(), v, segment, rev)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
		rev++
	}
	if err := it.Error(); err != nil {
		return nil, storageError(fmt.Sprintf("read segment %d revision %d", segment, rev), err)
	}
	if uint64(len(ops)) < n {
		return nil, corrupt(fmt.Sprintf("segment %d: revision %d missing", segment, rev), nil)
	}
	return ops, nil
}

// Bounds implements Store.
func (p *Pebble) Bounds(segment uint32) (first, last uint64, err error) {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return 0, 0, ErrClosed
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	b := p.boundsLocked(segment)
	return b.first, b.last, nil
}

// TruncateBefore implements Store: one range deletion and the new floor, in one batch without sync.
func (p *Pebble) TruncateBefore(segment uint32, rev uint64) error {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return ErrClosed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	nb, changed := p.boundsLocked(segment).truncated(rev)
	if !changed {
		return nil
	}
	seg := p.segmentLocked(segment)
	start := seg.endOffset
	if !nb.empty() {
		var err error
		if start, err = p.offsetOf(segment, rev); err != nil {
			return err
		}
	}
	batch := p.db.NewBatch()
	defer batch.Close()
	if err := batch.DeleteRange(opKey(segment, 0), opKey(segment, rev), nil); err != nil {
		return storageError("truncate", err)
	}
	if err := batch.Set(segmentKey(floorPrefix, segment), binary.BigEndian.AppendUint64(nil, rev), nil); err != nil {
		return storageError("truncate", err)
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		return storageError(fmt.Sprintf("truncate segment %d", segment), err)
	}
	seg.logBounds = nb
	seg.startOffset = start
	return nil
}

// offsetOf reads the offset stored with segment's op at rev.
func (p *Pebble) offsetOf(segment uint32, rev uint64) (uint64, error) {
	v, closer, err := p.db.Get(opKey(segment, rev))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, corrupt(fmt.Sprintf("segment %d: revision %d missing", segment, rev), nil)
	}
	if err != nil {
		return 0, storageError(fmt.Sprintf("read segment %d revision %d", segment, rev), err)
	}
	defer closer.Close()
	offset, _, err := splitOpValue(segment, rev, v)
	return offset, err
}

// LogBytes implements Store: the keys and values of the retained ops, exactly.
func (p *Pebble) LogBytes(segment uint32) (int64, error) {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return 0, ErrClosed
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if seg := p.segs[segment]; seg != nil {
		return int64(seg.endOffset - seg.startOffset), nil
	}
	return 0, nil
}

// SaveSnapshot implements Store, without sync.
func (p *Pebble) SaveSnapshot(s *Snapshot) error {
	encoded := AppendSnapshot(nil, s)
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return ErrClosed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.db.Set(segmentKey(snapshotPrefix, s.Segment), encoded, pebble.NoSync); err != nil {
		return storageError(fmt.Sprintf("save snapshot of segment %d", s.Segment), err)
	}
	p.segmentLocked(s.Segment).snapshot = true
	return nil
}

// LoadSnapshot implements Store.
func (p *Pebble) LoadSnapshot(segment uint32) (Snapshot, bool, error) {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return Snapshot{}, false, ErrClosed
	}
	v, closer, err := p.db.Get(segmentKey(snapshotPrefix, segment))
	if errors.Is(err, pebble.ErrNotFound) {
		return Snapshot{}, false, nil
	}
	if err != nil {
		return Snapshot{}, false, storageError(fmt.Sprintf("load snapshot of segment %d", segment), err)
	}
	defer closer.Close()
	s, err := DecodeSnapshot(v)
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("snapshot of segment %d: %w", segment, err)
	}
	if s.Segment != segment {
		return Snapshot{}, false, corrupt(fmt.Sprintf("snapshot of segment %d holds segment %d", segment, s.Segment), nil)
	}
	return s, true, nil
}

// ResetSegment implements Store: the segment's ops, snapshot and floor are deleted in one batch, without
// sync, so that a crash leaves the segment either as it was or reset, never in between.
func (p *Pebble) ResetSegment(segment uint32) error {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return ErrClosed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.segs[segment] == nil {
		return nil
	}
	if err := p.commitReset(segment); err != nil {
		return storageError(fmt.Sprintf("reset segment %d", segment), err)
	}
	delete(p.segs, segment)
	return nil
}

// commitReset deletes every record of segment in one batch.
func (p *Pebble) commitReset(segment uint32) error {
	batch := p.db.NewBatch()
	defer batch.Close()
	if err := batch.DeleteRange(opKey(segment, 0), opSegmentUpper(segment), nil); err != nil {
		return err
	}
	for _, prefix := range []byte{snapshotPrefix, floorPrefix} {
		if err := batch.Delete(segmentKey(prefix, segment), nil); err != nil {
			return err
		}
	}
	return batch.Commit(pebble.NoSync)
}

// Segments implements Store.
func (p *Pebble) Segments() ([]uint32, error) {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return nil, ErrClosed
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []uint32
	for id, seg := range p.segs {
		if seg.snapshot || seg.logBounds != (logBounds{}) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Sync implements Store: a synced empty write, which makes the WAL durable up to it.
func (p *Pebble) Sync() error {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed {
		return ErrClosed
	}
	if err := p.db.LogData(nil, pebble.Sync); err != nil {
		return storageError("sync", err)
	}
	return nil
}

// Close implements Store. It waits for calls in progress, then closes Pebble, which finishes its own
// background work and syncs its WAL: a clean close loses nothing.
func (p *Pebble) Close() error {
	p.life.Lock()
	defer p.life.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.segs = nil
	err := p.db.Close()
	_ = p.fs.Close()
	if err != nil {
		return storageError("close "+p.dir, err)
	}
	return nil
}

func (p *Pebble) boundsLocked(segment uint32) logBounds {
	if seg := p.segs[segment]; seg != nil {
		return seg.logBounds
	}
	return logBounds{}
}

func (p *Pebble) segmentLocked(segment uint32) *pebbleSegment {
	seg := p.segs[segment]
	if seg == nil {
		seg = &pebbleSegment{}
		p.segs[segment] = seg
	}
	return seg
}

// storageError adds context to an error from Pebble and marks corruption Pebble detected as ErrCorrupt.
// Errors that already are ErrCorrupt pass through.
func storageError(context string, err error) error {
	switch {
	case errors.Is(err, ErrCorrupt):
		return err
	case pebble.IsCorruptionError(err):
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, context, err)
	default:
		return fmt.Errorf("durability: %s: %w", context, err)
	}
}
