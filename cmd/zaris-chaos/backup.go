package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/chaos"
)

// Under -nemesis backup the cluster is backed up once while the workload runs, then destroyed, every
// server SIGKILLed, and the backup restored into -restore-nodes new servers, where the checks run against
// the backup's cut: every write acknowledged before the backup began reads back (the ledger, the preloaded
// keys), no other value appears, and the bank's balances are exactly what the transfers whose receipts
// were restored made of them, none half in.

const nemesisBackup = "backup"

// preloadBatch is how many keys one preload write carries; preloadValue the bytes of each value.
const (
	preloadBatch = 1000
	preloadValue = 64
)

// backupRun is what the backup schedule did.
type backupRun struct {
	dir          string
	rate         int64 // bytes a second; 0 for unpaced
	began, ended time.Time
	report       zaris.BackupReport
	err          error
}

// runBackup lets the workload run for a third of duration, backs the cluster up, and waits for the end
// of the faults.
func (n *nemesis) runBackup(ctx context.Context, duration time.Duration) {
	if !chaos.Sleep(ctx, duration/3) {
		n.backup.err = errors.New("the run ended before the backup")
		return
	}
	b := n.backup
	b.began = time.Now()
	b.report, b.err = n.lite.Backup(ctx, b.dir, zaris.BackupRate(b.rate))
	b.ended = time.Now()
	if b.err != nil {
		n.step("backup failed: %v", b.err)
	} else {
		n.step("%s", b.report)
	}
	<-ctx.Done()
}

// preloadKey is the i-th preloaded key.
func preloadKey(i int) string { return "pre-" + strconv.Itoa(i) }

// preload writes -preload keys, preloadValue bytes each, in batches.
func (h *harness) preload(ctx context.Context) error {
	start := time.Now()
	for first := 0; first < h.o.preload; first += preloadBatch {
		var kvs []zaris.KeyValue
		for i := first; i < min(first+preloadBatch, h.o.preload); i++ {
			key := preloadKey(i)
			kvs = append(kvs, zaris.KeyValue{Key: key, Value: []byte(chaos.LedgerValue(key, preloadValue))})
		}
		if err := h.putAll(ctx, kvs); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
	}
	fmt.Printf("preloaded %d keys of %d bytes in %v\n", h.o.preload, preloadValue, time.Since(start).Round(time.Millisecond))
	return nil
}

// putAll writes kvs, again until each is acknowledged, within settleBound.
func (h *harness) putAll(ctx context.Context, kvs []zaris.KeyValue) error {
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	for len(kvs) > 0 {
		res, err := h.lite.PutMany(ctx, kvs)
		if err != nil && ctx.Err() != nil {
			return err
		}
		var again []zaris.KeyValue
		for i := range kvs {
			if err != nil || res[i].Err != nil {
				again = append(again, kvs[i])
			}
		}
		kvs = again
	}
	return nil
}

// checkPreload reads every preloaded key back and fails the run for each missing or wrong.
func (h *harness) checkPreload(ctx context.Context) bool {
	var missing, wrong int
	var first string
	for start := 0; start < h.o.preload; start += preloadBatch {
		var keys []string
		for i := start; i < min(start+preloadBatch, h.o.preload); i++ {
			keys = append(keys, preloadKey(i))
		}
		res, err := h.getAll(ctx, keys)
		if err != nil {
			h.failures = append(h.failures, "read the preloaded keys back: "+err.Error())
			return false
		}
		for i, r := range res {
			switch {
			case errors.Is(r.Err, zaris.ErrNotFound):
				missing++
			case string(r.Value) != chaos.LedgerValue(keys[i], preloadValue):
				wrong++
			default:
				continue
			}
			if first == "" {
				first = keys[i]
			}
		}
	}
	h.notes = append(h.notes, fmt.Sprintf("preloaded keys: %d read back, %d missing, %d wrong", h.o.preload-missing-wrong, missing, wrong))
	if missing+wrong > 0 {
		h.failures = append(h.failures, fmt.Sprintf("%d preloaded keys missing and %d wrong after the restore, %s first", missing, wrong, first))
		return false
	}
	return true
}

// getAll reads keys, again until each read is answered, within settleBound.
func (h *harness) getAll(ctx context.Context, keys []string) ([]zaris.BatchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	for {
		res, err := h.lite.GetMany(ctx, keys)
		if err == nil && !slices.ContainsFunc(res, func(r zaris.BatchResult) bool {
			return r.Err != nil && !errors.Is(r.Err, zaris.ErrNotFound)
		}) {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// restoreElsewhere destroys the cluster, starts -restore-nodes new servers, checks that damaged copies of
// the backup are refused, restores the backup, and sets the ledger and the bank to be checked as of the
// backup's cut. It reports whether all went through.
func (h *harness) restoreElsewhere(ctx context.Context) bool {
	b := h.nem.backup
	if b.err != nil {
		h.failures = append(h.failures, "backup: "+b.err.Error())
		return false
	}
	h.noteBackup(b)
	old := h.c.list()
	h.c.kill(old...)
	h.lite.Close()
	fmt.Printf("cluster destroyed: %d servers SIGKILLed\n", len(old))
	if err := h.startRestored(ctx, len(old)); err != nil {
		h.failures = append(h.failures, "start the new servers: "+err.Error())
		return false
	}
	ok := h.checkRefusals(ctx, b.dir)
	start := time.Now()
	rep, err := h.lite.Restore(ctx, b.dir)
	if err != nil {
		h.failures = append(h.failures, "restore: "+err.Error())
		return false
	}
	h.notes = append(h.notes, fmt.Sprintf("%s into %d new servers: %.1f MB/s", rep, h.o.restoreNodes,
		float64(b.report.Bytes)/1e6/time.Since(start).Seconds()))
	h.ledger = h.ledger.AsOf(b.began)
	h.bank.Cut = b.began
	return h.checkPreload(ctx) && ok
}

// noteBackup notes the backup's figures, and the writers' throughput while it ran against as long a time
// just before.
func (h *harness) noteBackup(b *backupRun) {
	took := b.ended.Sub(b.began)
	ops := h.history.Ops()
	during, before := ackedWrites(ops, b.began, b.ended), ackedWrites(ops, b.began.Add(-took), b.began)
	h.notes = append(h.notes, fmt.Sprintf("%s: %.1f MB/s; writers acknowledged %.0f writes/s during it, %.0f/s as long "+
		"before it (%.2fx)", b.report, float64(b.report.Bytes)/1e6/took.Seconds(), during, before, during/max(before, 1)))
}

// ackedWrites is the rate of writes acknowledged from from to to, per second.
func ackedWrites(ops []chaos.Op, from, to time.Time) float64 {
	n := 0
	for _, op := range ops {
		if (op.Kind == chaos.Put || op.Kind == chaos.Cas) && op.Outcome == chaos.OK && !op.End.Before(from) && op.End.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

// startRestored starts -restore-nodes new servers, named after the first first, and joins a new lite
// member to them.
func (h *harness) startRestored(ctx context.Context, first int) error {
	dataRoot := ""
	if h.o.dataDir != "" {
		dataRoot = filepath.Join(h.o.dataDir, "restored")
	}
	servers, err := newServers(first+1, h.o.restoreNodes, dataRoot)
	if err != nil {
		return err
	}
	h.c.mu.Lock()
	h.c.servers, h.c.nodes = servers, h.o.restoreNodes
	h.c.mu.Unlock()
	if err := h.bringUp(ctx); err != nil {
		return err
	}
	fmt.Printf("%d new servers serving\n", h.o.restoreNodes)
	return nil
}

// checkRefusals restores damaged copies of the backup, a byte flipped in one and a segment file missing
// from another, and fails the run unless each is refused with ErrBadBackup.
func (h *harness) checkRefusals(ctx context.Context, dir string) bool {
	ok := true
	for _, damage := range []struct {
		what string
		do   func(copyDir string) error
	}{
		{"a flipped byte", func(d string) error { return flipByte(largestSegment(d)) }},
		{"a missing segment file", func(d string) error { return os.Remove(largestSegment(d)) }},
	} {
		copyDir := filepath.Join(h.dir, "damaged")
		os.RemoveAll(copyDir)
		err := os.CopyFS(copyDir, os.DirFS(dir))
		if err == nil {
			err = damage.do(copyDir)
		}
		if err == nil {
			_, err = h.lite.Restore(ctx, copyDir)
			if errors.Is(err, zaris.ErrBadBackup) {
				h.notes = append(h.notes, fmt.Sprintf("a backup with %s refused: %v", damage.what, err))
				continue
			}
		}
		h.failures = append(h.failures, fmt.Sprintf("a backup with %s: %v, want it refused as bad", damage.what, err))
		ok = false
	}
	return ok
}

// largestSegment returns the largest segment file of the backup in dir.
func largestSegment(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "segments", "*"))
	var best string
	var size int64 = -1
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.Size() > size {
			best, size = f, st.Size()
		}
	}
	return best
}

// flipByte flips one bit in the middle of file name.
func flipByte(name string) error {
	b, err := os.ReadFile(name)
	if err != nil || len(b) == 0 {
		return fmt.Errorf("%s: %d bytes, %v", name, len(b), err)
	}
	b[len(b)/2] ^= 1
	return os.WriteFile(name, b, 0o644)
}
