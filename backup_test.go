package zaris

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// backupCluster tweaks a test cluster for backups: a small layout, RF 2, and transactions left alone by
// the owners' resolvers for the test's length.
func backupCluster(extra func(*Config)) func(*Config) {
	return replicated(2, func(cfg *Config) {
		cfg.Segments, cfg.Partitions = 64, 8
		cfg.TxnTimeout = time.Minute
		if extra != nil {
			extra(cfg)
		}
	})
}

// TestBackupRestoreUnderTransfers backs a 3-node cluster up while bank transfers over several segments and
// single-key writers run, destroys it, and restores the backup into 2 new nodes. Counted: every write
// acknowledged before the backup began reads back with its value or a later one, the bank's total is
// conserved (no transfer half in), a hash and a TTL come back, and versions are kept. A second restore is
// refused as the cluster holds data, and goes through when asked to replace it.
func TestBackupRestoreUnderTransfers(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, backupCluster(nil))
	ctx := bg(t)
	const accounts, balance = 24, 100
	for i := range accounts {
		must(t, c.node(0).Put(ctx, account(i), []byte(strconv.Itoa(balance))))
	}
	must(t, c.node(0).Put(ctx, "ttl-key", []byte("v"), WithTTL(time.Hour)))
	_, err := c.node(1).HSet(ctx, "hash", map[string][]byte{"a": []byte("1"), "b": []byte("2")})
	must(t, err)
	must(t, c.node(2).Put(ctx, "versioned", []byte("x")))
	versioned, err := c.node(2).GetEntry(ctx, "versioned")
	must(t, err)

	var stop atomic.Bool
	var wg sync.WaitGroup
	var transfers atomic.Int64
	acked := newCounterLedger()
	for g := range 3 {
		n := c.node(g)
		wg.Go(func() { // bank transfers between accounts of different segments
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for !stop.Load() {
				if transfer(ctx, n, account(rng.IntN(accounts)), account(rng.IntN(accounts)), rng.IntN(10)) == nil {
					transfers.Add(1)
				}
			}
		})
		wg.Go(func() { // counters, each key written by one writer with rising values
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("w%d-%d", g, i%300)
				if n.Put(ctx, key, []byte(strconv.Itoa(i))) == nil {
					acked.note(key, i)
				}
			}
		})
	}
	waitFor(t, 20*time.Second, "transfers and writes under way", func() bool { return transfers.Load() > 20 && acked.len() > 100 })
	before := acked.snapshot()
	dir := filepath.Join(t.TempDir(), "backup")
	rep, err := c.node(1).Backup(ctx, dir)
	must(t, err)
	moreTransfers := transfers.Load()
	waitFor(t, 20*time.Second, "transfers after the backup", func() bool { return transfers.Load() > moreTransfers+5 })
	stop.Store(true)
	wg.Wait()
	t.Logf("backup: %d entries, %d bytes in %v; %d transfers in all", rep.Keys, rep.Bytes, rep.Took, transfers.Load())
	c.stopAll()

	fresh := startCluster(t, 2, backupCluster(nil))
	res, err := fresh.node(0).Restore(ctx, dir)
	must(t, err)
	t.Logf("restore: %d keys, %d transactions committed, %d dropped, in %v", res.Keys, res.Committed, res.Dropped, res.Took)
	r := fresh.node(1)
	total := 0
	for i := range accounts {
		v, err := r.Get(ctx, account(i))
		must(t, err)
		n, _ := strconv.Atoi(string(v))
		total += n
	}
	if total != accounts*balance {
		t.Errorf("the bank holds %d after the restore, want %d: a transfer is half in", total, accounts*balance)
	}
	for key, value := range before {
		v, err := r.Get(ctx, key)
		got, _ := strconv.Atoi(string(v))
		if err != nil || got < value {
			t.Errorf("%s = %q, %v after the restore; acknowledged %d before the backup", key, v, err, value)
		}
	}
	if e, err := r.GetEntry(ctx, "ttl-key"); err != nil || e.TTL <= 0 || e.TTL > time.Hour {
		t.Errorf("ttl-key: %+v, %v", e, err)
	}
	if h, err := r.HGetAll(ctx, "hash"); err != nil || len(h) != 2 || string(h["b"]) != "2" {
		t.Errorf("hash: %q, %v", h, err)
	}
	if e, err := r.GetEntry(ctx, "versioned"); err != nil || e.Version != versioned.Version {
		t.Errorf("versioned: %+v, %v; want version %d", e, err, versioned.Version)
	}
	must(t, r.Put(ctx, "versioned", []byte("y")))
	if e, err := r.GetEntry(ctx, "versioned"); err != nil || e.Version <= versioned.Version {
		t.Errorf("versioned after a write: %+v, %v; want a version past %d", e, err, versioned.Version)
	}
	if _, err := r.Restore(ctx, dir); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a restore into a cluster with data: %v, want ErrNotEmpty", err)
	}
	must(t, r.Put(ctx, "w0-0", []byte("-1")))
	if _, err := r.Restore(ctx, dir, RestoreReplacing()); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Get(ctx, "w0-0"); err != nil || string(v) == "-1" {
		t.Fatalf("w0-0 = %q, %v after a replacing restore", v, err)
	}
}

func account(i int) string { return fmt.Sprintf("acct-%d", i) }

// accountsApart opens two accounts in different segments, holding 5 and 0.
func accountsApart(t *testing.T, c *testCluster, prefix string) (from, to string) {
	t.Helper()
	from, to = prefix+"-a", prefix+"-b"
	for i := 0; c.node(0).layout.KeySegment(from) == c.node(0).layout.KeySegment(to); i++ {
		to = fmt.Sprintf("%s-b%d", prefix, i)
	}
	must(t, c.node(0).Put(bg(t), from, []byte("5")))
	must(t, c.node(0).Put(bg(t), to, []byte("0")))
	return from, to
}

// transfer moves amount from one account to another in one transaction.
func transfer(ctx context.Context, n *Node, from, to string, amount int, opts ...TxnOption) error {
	if from == to {
		return nil
	}
	return n.Txn(ctx, func(tx *Tx) error {
		a, err := tx.Get(ctx, from)
		if err != nil {
			return err
		}
		b, err := tx.Get(ctx, to)
		if err != nil {
			return err
		}
		x, _ := strconv.Atoi(string(a))
		y, _ := strconv.Atoi(string(b))
		if err := tx.Put(from, []byte(strconv.Itoa(x-amount))); err != nil {
			return err
		}
		return tx.Put(to, []byte(strconv.Itoa(y+amount)))
	}, opts...)
}

// counterLedger records the last value acknowledged for each key.
type counterLedger struct {
	mu     sync.Mutex
	values map[string]int
}

func newCounterLedger() *counterLedger { return &counterLedger{values: map[string]int{}} }

func (l *counterLedger) note(key string, v int) {
	l.mu.Lock()
	l.values[key] = v
	l.mu.Unlock()
}

func (l *counterLedger) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.values)
}

func (l *counterLedger) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.values))
	for k, v := range l.values {
		out[k] = v
	}
	return out
}

// TestBackupTransactionWhollyInOrOut leaves two transactions over three segments in flight, one stopped
// before its decision and one after it, before any resolution, and checks that a restore of a backup taken
// then holds none of the first's writes and all of the second's.
func TestBackupTransactionWhollyInOrOut(t *testing.T) {
	t.Parallel()
	var stop atomic.Pointer[txnStep]
	c := startCluster(t, 2, backupCluster(func(cfg *Config) { cfg.hooks.txnStep = stopAt(&stop) }))
	ctx := bg(t)
	write := func(value string, keys ...string) error {
		return c.node(0).Txn(ctx, func(tx *Tx) error {
			for _, key := range keys {
				if err := tx.Put(key, []byte(value)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	undecided, decided := []string{"u-a", "u-b", "u-c"}, []string{"d-a", "d-b", "d-c"}
	must(t, write("old", append(undecided, decided...)...))
	stop.Store(&txnStep{"decide", 0})
	if err := write("new", undecided...); err == nil {
		t.Fatal("the transaction stopped before its decision committed")
	}
	stop.Store(&txnStep{"resolve", 0})
	must(t, write("new", decided...))
	stop.Store(nil)
	if intentsLeft(c, append(undecided, decided...)...) == 0 {
		t.Fatal("no intents left in place")
	}
	dir := filepath.Join(t.TempDir(), "backup")
	_, err := c.node(1).Backup(ctx, dir)
	must(t, err)

	fresh := startCluster(t, 3, backupCluster(nil))
	res, err := fresh.node(2).Restore(ctx, dir)
	must(t, err)
	if res.Committed != 1 || res.Dropped != 1 {
		t.Errorf("restore settled %d committed and %d dropped transactions, want 1 and 1", res.Committed, res.Dropped)
	}
	for keys, want := range map[*[]string]string{&undecided: "old", &decided: "new"} {
		for _, key := range *keys {
			if v, err := fresh.node(0).Get(ctx, key); err != nil || string(v) != want {
				t.Errorf("%s = %q, %v after the restore, want %q", key, v, err, want)
			}
		}
	}
	if n := intentsLeft(fresh, append(undecided, decided...)...); n != 0 {
		t.Errorf("%d intents restored", n)
	}
}

// TestBackupHoldsTransactions checks that a transaction over two segments waits while a backup holds,
// counted at the owner, and goes through once the hold is released.
func TestBackupHoldsTransactions(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, backupCluster(nil))
	ctx := bg(t)
	tool := newBackupTool(c.node(0).client, c.node(0).ctl.fsm)
	holds, err := tool.hold(ctx, "backup-test", ownersOf(c.currentMap()))
	must(t, err)
	from, to := accountsApart(t, c, "hold")
	done := make(chan error, 1)
	go func() { done <- transfer(ctx, c.node(1), from, to, 1, TxnRetries(1000)) }()
	waitFor(t, 20*time.Second, "a step held back by an owner", func() bool {
		for _, n := range c.live() {
			if n.own.backups.waiting.Load() > 0 {
				return true
			}
		}
		return false
	})
	select {
	case err := <-done:
		t.Fatalf("the transaction ended (%v) while its decision was held", err)
	default:
	}
	must(t, holds.finish(ctx))
	must(t, <-done)
	if v, err := c.node(0).Get(ctx, to); err != nil || string(v) != "1" {
		t.Fatalf("%s = %q, %v", to, v, err)
	}
}

// TestBackupRefusals checks what a backup and a restore refuse: a cluster whose protocol predates backups,
// a directory that holds files, and backups damaged in each way, with nothing restored.
func TestBackupRefusals(t *testing.T) {
	t.Parallel()
	ctx := bg(t)
	old := startCluster(t, 1, backupCluster(func(cfg *Config) { cfg.PreviousProtocol = true }))
	if _, err := old.node(0).Backup(ctx, filepath.Join(t.TempDir(), "b")); !errors.Is(err, ErrIncompatibleVersion) {
		t.Fatalf("a backup of a protocol-1 cluster: %v, want ErrIncompatibleVersion", err)
	}
	c := startCluster(t, 2, backupCluster(nil))
	for i := range 50 {
		must(t, c.node(0).Put(ctx, fmt.Sprintf("k%d", i), []byte("v")))
	}
	dir := filepath.Join(t.TempDir(), "b")
	_, err := c.node(0).Backup(ctx, dir)
	must(t, err)
	if _, err := c.node(0).Backup(ctx, dir); err == nil {
		t.Fatal("a backup into a directory holding one went through")
	}
	fresh := startCluster(t, 1, backupCluster(nil))
	for name, damage := range map[string]func(dir string){
		"a flipped byte":         func(dir string) { flipFileByte(t, largestFile(t, filepath.Join(dir, "segments")), 9) },
		"a missing segment file": func(dir string) { os.Remove(filepath.Join(dir, "segments", "00005")) },
	} {
		copyDir := filepath.Join(t.TempDir(), "damaged")
		copyTree(t, dir, copyDir)
		damage(copyDir)
		if _, err := fresh.node(0).Restore(ctx, copyDir); !errors.Is(err, ErrBadBackup) {
			t.Errorf("%s: %v, want ErrBadBackup", name, err)
		}
	}
	if n := fresh.node(0).own.store.segmentKeys(0); n != 0 {
		t.Fatalf("a damaged backup restored %d keys", n)
	}
	for i := range 50 {
		if _, err := fresh.node(0).Get(ctx, fmt.Sprintf("k%d", i)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("k%d after refused restores: %v", i, err)
		}
	}
}

func flipFileByte(t *testing.T, name string, at int) {
	b, err := os.ReadFile(name)
	if err != nil || len(b) <= at {
		t.Fatalf("%s: %d bytes, %v", name, len(b), err)
	}
	b[at] ^= 1
	must(t, os.WriteFile(name, b, 0o644))
}

// largestFile returns the largest file in dir.
func largestFile(t *testing.T, dir string) string {
	names, err := os.ReadDir(dir)
	must(t, err)
	var best string
	var size int64 = -1
	for _, e := range names {
		if info, err := e.Info(); err == nil && info.Size() > size {
			best, size = filepath.Join(dir, e.Name()), info.Size()
		}
	}
	return best
}

func copyTree(t *testing.T, from, to string) {
	must(t, os.CopyFS(to, os.DirFS(from)))
}

// TestBackupHoldLease checks the owner's hold: renewed within its lease it says so, and another backup
// is refused meanwhile; a step waits for it at most heldWait and is then turned away; left past its lease
// it ends; taken again it says it is new, and it waits for the steps admitted before it to finish.
func TestBackupHoldLease(t *testing.T) {
	clk := clocktest.New(time.Unix(1000, 0))
	h := newBackupHold(clk)
	ctx := bg(t)
	if renewed, err := h.hold("a", time.Second); err != nil || renewed {
		t.Fatalf("first hold: renewed %v, %v", renewed, err)
	}
	if _, err := h.hold("b", time.Second); !errors.Is(err, errBackupRunning) {
		t.Fatalf("a second backup's hold: %v", err)
	}
	clk.Advance(900 * time.Millisecond)
	if renewed, err := h.hold("a", time.Second); err != nil || !renewed {
		t.Fatalf("renewal within the lease: renewed %v, %v", renewed, err)
	}
	entered := make(chan bool, 1)
	go func() { entered <- h.enter(ctx) }()
	waitFor(t, 10*time.Second, "a step waiting on the hold", func() bool { return h.waiting.Load() == 1 })
	clk.Advance(heldWait)
	if <-entered {
		t.Fatal("a step went through a hold")
	}
	clk.Advance(time.Second - heldWait)
	if h.holding("a") {
		t.Fatal("the hold outlived its lease")
	}
	if !h.enter(ctx) {
		t.Fatal("a step turned away with no hold")
	}
	held := make(chan error, 1)
	go func() {
		renewed, err := h.hold("a", time.Second)
		if err == nil && renewed {
			err = errors.New("a hold taken again after it lapsed says it renewed one")
		}
		held <- err
	}()
	waitFor(t, 10*time.Second, "the new hold waiting for the step in progress", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.drained != nil
	})
	select {
	case err := <-held:
		t.Fatalf("the hold began (%v) with a step in progress", err)
	default:
	}
	h.leave()
	must(t, <-held)
}

// TestBackupFailsWhenAHoldLapses ends one owner's hold in the middle of a backup, as a lease running out
// would, and checks that the backup's holds report it.
func TestBackupFailsWhenAHoldLapses(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, backupCluster(nil))
	ctx := bg(t)
	tool := newBackupTool(c.node(0).client, c.node(0).ctl.fsm)
	holds, err := tool.hold(ctx, "backup-lapse", ownersOf(c.currentMap()))
	must(t, err)
	c.node(1).own.backups.release("backup-lapse")
	if err := holds.finish(ctx); err == nil || !strings.Contains(err.Error(), "lapsed") {
		t.Fatalf("a lapsed hold: %v", err)
	}
}

// TestBackupHoldWaitsForStepsInProgress pauses a transaction's resolution at its owner, past the hold's
// gate and before the store, and checks that a backup's hold on that owner begins only once the
// resolution has finished: none may land between the copies of two segments.
func TestBackupHoldWaitsForStepsInProgress(t *testing.T) {
	t.Parallel()
	var pausing atomic.Bool
	paused, resume := make(chan struct{}), make(chan struct{})
	c := startCluster(t, 2, backupCluster(func(cfg *Config) {
		cfg.hooks.txnStep = func(s txnStep) error {
			if s.phase == "resolve" {
				pausing.Store(true)
			}
			return nil
		}
		cfg.hooks.panicOp = func(op transport.Op, _ string) bool {
			if op == kv.OpTxn && pausing.CompareAndSwap(true, false) {
				close(paused)
				<-resume
			}
			return false
		}
	}))
	ctx := bg(t)
	from, to := accountsApart(t, c, "step")
	done := make(chan error, 1)
	go func() { done <- transfer(ctx, c.node(0), from, to, 1) }()
	<-paused
	tool := newBackupTool(c.node(1).client, c.node(1).ctl.fsm)
	held := make(chan error, 1)
	go func() {
		holds, err := tool.hold(ctx, "backup-steps", ownersOf(c.currentMap()))
		if err == nil {
			err = holds.finish(ctx)
		}
		held <- err
	}()
	waitFor(t, 10*time.Second, "a hold waiting for the resolution in progress", func() bool {
		for _, n := range c.live() {
			n.own.backups.mu.Lock()
			draining := n.own.backups.drained != nil
			n.own.backups.mu.Unlock()
			if draining {
				return true
			}
		}
		return false
	})
	select {
	case err := <-held:
		t.Fatalf("the hold was taken (%v) with a resolution in progress", err)
	default:
	}
	close(resume)
	must(t, <-held)
	must(t, <-done)
}

// TestBackupPath checks where BACKUP SAVE and LOAD may reach: under the backup directory, by a relative or
// an absolute path, and nowhere else, symbolic links followed.
func TestBackupPath(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(root, "escape")))
	must(t, os.Mkdir(filepath.Join(root, "kept"), 0o755))
	for _, tc := range []struct {
		dir string
		ok  bool
	}{
		{"nightly", true},
		{filepath.Join(root, "kept", "b1"), true},
		{"kept/b2", true},
		{"", false},
		{".", false},
		{"../x", false},
		{outside, false},
		{"escape", false},
		{"escape/b1", false},
		{"kept/../../x", false},
	} {
		path, err := backupPath(root, tc.dir)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %q, %v; want allowed %v", tc.dir, path, err, tc.ok)
		}
	}
	if _, err := backupPath("", "nightly"); err == nil {
		t.Error("a node without a backup directory took a path")
	}
}
