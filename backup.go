package zaris

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// A backup copies every segment from its owner, a piece at a time, into a directory of durability's
// backup format, while every owner holds transactions' decisions (backup_serve.go). It needs the cluster's
// protocol to have reached backupProtocol, since older nodes know none of its requests. A change of any
// partition's owner during the backup fails it: the new owner may not hold.

const (
	// backupLease is how long an owner holds for a backup without hearing from its coordinator.
	backupLease = 15 * time.Second
	// backupParallelism bounds the segments a backup or a restore copies at once, and so the snapshots
	// owners hold for it.
	backupParallelism = 2
)

// BackupOption changes how Backup copies.
type BackupOption func(*backupOptions)

type backupOptions struct {
	rate int64
}

// BackupRate paces a backup to copy at most bytesPerSecond, so that the writes that go on meanwhile keep
// most of the machine; a rate below MinBackupRate counts as MinBackupRate. Zero, the default, copies as fast
// as the cluster serves.
func BackupRate(bytesPerSecond int64) BackupOption {
	return func(o *backupOptions) {
		if o.rate = bytesPerSecond; bytesPerSecond > 0 {
			o.rate = max(bytesPerSecond, MinBackupRate)
		}
	}
}

// MinBackupRate is the slowest pace a backup takes: an owner keeps the copy of a segment it serves a backup
// for a minute between two requests, and a piece is at most 4 MiB.
const MinBackupRate = 1 << 20

// BackupReport describes a backup taken.
type BackupReport struct {
	Dir      string
	Keys     int64 // entries written, transactions' intents and records included
	Bytes    int64 // bytes of the segment files
	Segments int
	Took     time.Duration
}

// backupPeers sends a backup's and a restore's requests to nodes: OpBackup on the internal lane, OpRestore
// on the data lane, this node's own to its owner.
type backupPeers interface {
	callNode(ctx context.Context, id NodeID, op transport.Op, payload []byte) ([]byte, error)
}

// backupTool takes backups and restores them.
type backupTool struct {
	layout  Layout
	cluster string
	view    mapView
	clock   Clock
	log     *slog.Logger
	peers   backupPeers
	// maxFrame bounds a request; a restore sends pieces of half of it at most.
	maxFrame int
	pace     *pacer
}

// Backup copies the cluster's data into dst, a directory that must not exist, and returns what it wrote.
// The copy is a consistent cut: a transaction over several segments is in it wholly or not at all, and
// every write acknowledged before Backup was called is in it, with its version and its expiry as an
// absolute time. Writes go on during a backup; transactions over several segments wait until it ends, as
// for a held key, and fail with ErrConflict if it outlasts their retries. A backup takes CPU from the
// writes that go on; BackupRate bounds what it takes. It fails with ErrIncompatibleVersion while the
// cluster's protocol is older than the one that introduced backups (a rolling upgrade in progress), and
// with ErrOwnershipChanging when a partition changed owner during the backup, leaving nothing in dst.
func (n *Node) Backup(ctx context.Context, dst string, opts ...BackupOption) (BackupReport, error) {
	var o backupOptions
	for _, opt := range opts {
		opt(&o)
	}
	t := newBackupTool(n.client, n.ctl.fsm)
	t.pace = &pacer{clock: n.cfg.Clock, rate: o.rate}
	return t.backup(ctx, dst)
}

func newBackupTool(c *client, view mapView) *backupTool {
	return &backupTool{layout: c.layout, cluster: c.cfg.ClusterName, view: view, clock: c.cfg.Clock, log: c.log, peers: c, maxFrame: c.cfg.MaxFrameSize}
}

// backup takes a backup into dst.
func (b *backupTool) backup(ctx context.Context, dst string) (BackupReport, error) {
	start := b.clock.Now()
	m := b.view.clusterMap()
	if err := b.checkCluster(m); err != nil {
		return BackupReport{}, err
	}
	w, err := durability.CreateBackup(dst)
	if err != nil {
		return BackupReport{}, err
	}
	id := newBackupID()
	holders := ownersOf(m)
	holds, err := b.hold(ctx, id, holders)
	if err != nil {
		w.Abort()
		return BackupReport{}, err
	}
	manifest := durability.BackupManifest{Release: Version, Cluster: b.cluster, TakenAt: start.UTC(), Protocol: int(m.Protocol),
		Partitions: b.layout.Partitions, MapVersion: m.Version, Segments: make([]durability.BackupSegment, b.layout.Segments)}
	err = b.copySegments(ctx, id, m, w, manifest.Segments)
	if err == nil {
		err = b.checkOwnersKept(m)
	}
	if held := holds.finish(ctx); err == nil {
		err = held
	}
	if err == nil {
		err = w.Finish(manifest)
	}
	if err != nil {
		w.Abort()
		return BackupReport{}, fmt.Errorf("zaris: backup into %s: %w", dst, err)
	}
	rep := BackupReport{Dir: dst, Keys: manifest.Keys(), Bytes: manifest.Bytes(), Segments: len(manifest.Segments), Took: b.clock.Now().Sub(start)}
	b.log.Info("backup taken", "dir", dst, "keys", rep.Keys, "bytes", rep.Bytes, "took", rep.Took)
	return rep, nil
}

// checkCluster refuses a backup or restore of a cluster without a map, or whose protocol predates backups.
func (b *backupTool) checkCluster(m *ClusterMap) error {
	switch {
	case m.Version == 0:
		return ErrNotReady
	case m.Protocol < backupProtocol:
		return fmt.Errorf("%w: the cluster speaks protocol %d and backups need protocol %d: finish the rolling upgrade first",
			ErrIncompatibleVersion, m.Protocol, backupProtocol)
	}
	for p := range m.Runtime {
		if m.Runtime[p].Owner == "" {
			return fmt.Errorf("%w: partition %d has no owner", ErrPartitionUnavailable, p)
		}
	}
	return nil
}

func newBackupID() string {
	var b [8]byte
	rand.Read(b[:])
	return "backup-" + hex.EncodeToString(b[:])
}

// ownersOf lists the nodes that own a partition in m.
func ownersOf(m *ClusterMap) []NodeID {
	seen := map[NodeID]bool{}
	var ids []NodeID
	for p := range m.Runtime {
		if id := m.Runtime[p].Owner; id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// backupHolds are the holds of one backup on the owners: taken, renewed every third of their lease, and
// checked to have lasted throughout.
type backupHolds struct {
	b     *backupTool
	id    string
	nodes []NodeID
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error // the first renewal that failed, or found a hold lapsed
}

// hold has every node of ids hold for backup id, and renews the holds until finish.
func (b *backupTool) hold(ctx context.Context, id string, ids []NodeID) (*backupHolds, error) {
	h := &backupHolds{b: b, id: id, nodes: ids, done: make(chan struct{})}
	if err := h.send(ctx, false); err != nil {
		h.release(ctx)
		return nil, fmt.Errorf("hold transactions for the backup: %w", err)
	}
	h.wg.Go(func() {
		tick := b.clock.NewTicker(backupLease / 3)
		defer tick.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-tick.C():
				if err := h.send(ctx, true); err != nil {
					h.fail(err)
				}
			}
		}
	})
	return h, nil
}

// send asks every node to hold, all at once; with renew, each must answer within a third of the lease
// that it renews a hold it kept. A new hold may wait at its node for the steps in progress, up to the lease.
func (h *backupHolds) send(ctx context.Context, renew bool) error {
	timeout := backupLease + backupLease/3
	if renew {
		timeout = backupLease / 3
	}
	errs := make([]error, len(h.nodes))
	var wg sync.WaitGroup
	for i, node := range h.nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			req := backupRequest{Step: backupHoldStep, ID: h.id, Lease: backupLease}
			resp, err := h.b.peers.callNode(ctx, node, kv.OpBackup, req.marshal())
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("node %s: %w", node, err)
			case renew && (len(resp) != 1 || resp[0] != 1):
				errs[i] = fmt.Errorf("node %s: its hold lapsed, so transactions may have been decided during the backup", node)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (h *backupHolds) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

// finish stops the renewals, checks once more that every hold has lasted, releases them, and returns the
// first failure: a backup whose holds did not last throughout is not a consistent cut.
func (h *backupHolds) finish(ctx context.Context) error {
	close(h.done)
	h.wg.Wait()
	h.fail(h.send(ctx, true))
	h.release(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// release ends every node's hold, all at once; a node that does not hear it ends its hold with its lease.
func (h *backupHolds) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backupLease/3)
	defer cancel()
	var wg sync.WaitGroup
	for _, node := range h.nodes {
		wg.Go(func() {
			req := backupRequest{Step: backupReleaseStep, ID: h.id}
			h.b.peers.callNode(ctx, node, kv.OpBackup, req.marshal())
		})
	}
	wg.Wait()
}

// copySegments copies every segment from its owner in m into w, describing each in descs: a partition's
// segments one after the other into a file of the partition's, backupParallelism partitions at a time.
func (b *backupTool) copySegments(ctx context.Context, id string, m *ClusterMap, w *durability.BackupWriter, descs []durability.BackupSegment) error {
	return forEach(ctx, b.layout.Partitions, func(ctx context.Context, p int) error {
		fw, err := w.File(fmt.Sprintf("%05d", p))
		if err != nil {
			return err
		}
		first, end := b.layout.PartitionSegments(p)
		for seg := first; seg < end && err == nil; seg++ {
			descs[seg], err = b.copySegment(ctx, id, m.Runtime[p], fw, seg)
		}
		return errors.Join(err, fw.Close())
	})
}

// forEach runs fn for each of 0 to n-1, backupParallelism at a time, and returns the first error, after
// which it starts no more.
func forEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range backupParallelism {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// copySegment copies segment seg from st's owner to the end of fw.
func (b *backupTool) copySegment(ctx context.Context, id string, st PartitionState, fw *durability.FileWriter, seg int) (durability.BackupSegment, error) {
	var sw *durability.SegmentWriter
	for part := 0; ; part++ {
		req := backupRequest{Step: backupReadStep, ID: id, Segment: seg, Part: part}
		resp, err := b.peers.callNode(ctx, st.Owner, kv.OpBackup, req.marshal())
		if err != nil {
			return durability.BackupSegment{}, fmt.Errorf("segment %d from %s: %w", seg, st.Owner, err)
		}
		piece, status, err := decodePiece(resp)
		switch {
		case err != nil:
			return durability.BackupSegment{}, err
		case status != StatusSuccess:
			return durability.BackupSegment{}, fmt.Errorf("%w: %s answered %s for segment %d", ErrOwnershipChanging, st.Owner, status, seg)
		case piece.Epoch != st.Epoch:
			return durability.BackupSegment{}, fmt.Errorf("%w: %s sent segment %d at epoch %d, the backup began at %d",
				ErrOwnershipChanging, st.Owner, seg, piece.Epoch, st.Epoch)
		case piece.Segment != seg || piece.Part != part:
			return durability.BackupSegment{}, fmt.Errorf("zaris: %s sent part %d of segment %d for part %d of %d: the copy it held for the backup was dropped",
				st.Owner, piece.Part, piece.Segment, part, seg)
		}
		if sw == nil {
			sw = fw.Segment(uint32(seg), piece.Revision)
		}
		if err := sw.Write(piece.Entries); err != nil {
			return durability.BackupSegment{}, err
		}
		if err := b.pace.pay(ctx, len(resp)); err != nil {
			return durability.BackupSegment{}, err
		}
		if !piece.More {
			return sw.End(), nil
		}
	}
}

// decodePiece decodes the reply to a backup's read: the owner's status, and one piece of a segment.
func decodePiece(b []byte) (segmentSnapshot, Status, error) {
	r := wireReader{b: b}
	fields := r.fields(2)
	status := Status(r.uint8())
	pieces := r.snapshots()
	r.skip(fields - 2)
	if err := r.done("backup piece"); err != nil {
		return segmentSnapshot{}, 0, err
	}
	if len(pieces) != 1 {
		return segmentSnapshot{}, 0, fmt.Errorf("%w: %d pieces in a reply", ErrInvalidRequest, len(pieces))
	}
	return pieces[0], status, nil
}

// checkOwnersKept fails when a partition changed owner since map m: its new owner held nothing.
func (b *backupTool) checkOwnersKept(m *ClusterMap) error {
	now := b.view.clusterMap()
	for p := range m.Runtime {
		if was, is := m.Runtime[p], now.Runtime[p]; was.Owner != is.Owner || was.Epoch != is.Epoch {
			return fmt.Errorf("%w: partition %d went from %s (epoch %d) to %s (epoch %d) during the backup",
				ErrOwnershipChanging, p, was.Owner, was.Epoch, is.Owner, is.Epoch)
		}
	}
	return nil
}

// backupPath resolves dir, as a RESP client names a backup, to a path under root (Config.BackupDir): a
// relative dir is taken from root, an absolute one must lie under it.
func backupPath(root, dir string) (string, error) {
	if root == "" {
		return "", fmt.Errorf("%w: this node has no backup directory (Config.BackupDir, --backup-dir)", ErrInvalidRequest)
	}
	root = filepath.Clean(root)
	path := dir
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	path = filepath.Clean(path)
	if dir == "" || !under(root, path) {
		return "", fmt.Errorf("%w: %q is not a directory under the backup directory %s", ErrInvalidRequest, dir, root)
	}
	// The same once symbolic links are followed, as far as the path exists.
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("%w: the backup directory: %w", ErrInvalidRequest, err)
	}
	existing := path
	for _, err := os.Lstat(existing); err != nil && existing != root; _, err = os.Lstat(existing) {
		existing = filepath.Dir(existing)
	}
	realExisting, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %w", ErrInvalidRequest, dir, err)
	}
	resolved := filepath.Join(realExisting, strings.TrimPrefix(path, existing))
	if !under(realRoot, resolved) {
		return "", fmt.Errorf("%w: %q leads out of the backup directory %s", ErrInvalidRequest, dir, root)
	}
	return resolved, nil
}

// under reports whether path lies strictly under dir; both are clean.
func under(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// String describes the backup in one line.
func (r BackupReport) String() string {
	return fmt.Sprintf("backup %s: %d entries, %d bytes, %d segments in %v", r.Dir, r.Keys, r.Bytes, r.Segments, r.Took.Round(time.Millisecond))
}

// pacer spreads the bytes a backup or a restore moves over time at rate bytes per second, so that the
// writes that go on meanwhile keep most of the machine; rate 0 does not pace.
type pacer struct {
	clock Clock
	rate  int64
	mu    sync.Mutex
	due   time.Time // when the bytes paid for so far have had their time
}

// pay waits until n more bytes fit the rate.
func (p *pacer) pay(ctx context.Context, n int) error {
	if p == nil || p.rate <= 0 {
		return nil
	}
	p.mu.Lock()
	now := p.clock.Now()
	p.due = later(p.due, now).Add(time.Duration(int64(n) * int64(time.Second) / p.rate))
	wait := p.due.Sub(now)
	p.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	return sleepCtx(ctx, p.clock, wait)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
