package zaris

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/killfs"
	"github.com/zaris-go/zaris/internal/kv"
)

// TestAtomicGroupIsOneWrite runs three writes in one atomic group: the hook sees one multi op at one
// revision, every written key takes it as its version, and a replica applying that op ends with the same
// entries.
func TestAtomicGroupIsOneWrite(t *testing.T) {
	owner, replica := newStore(1, systemClock{}), newStore(1, systemClock{})
	owner.put(0, "gone", []byte("x"), forTTL(0))
	replica.put(0, "gone", []byte("x"), forTTL(0))
	var ops []durability.Op
	owner.onWrite = func(segment int, revision, _ uint64, key string, next *entry, change writeChange) {
		ops = append(ops, opOfWrite(segment, revision, key, next, change))
	}
	rev := owner.atomically(0, func(g *store) {
		g.put(0, "a", []byte("1"), forTTL(0))
		g.remove(0, "gone")
		applyHSet(g, 0, collReq("f", "v"), opLimits{maxValueSize: 64})
		g.put(0, "a", []byte("2"), forTTL(0))
	})
	if rev != 2 || len(ops) != 1 || ops[0].Kind != durability.OpMulti || ops[0].Revision != 2 {
		t.Fatalf("revision %d, ops %+v; want one multi op at revision 2", rev, ops)
	}
	for _, key := range []string{"a", "k"} {
		if e, _, ok := owner.getEntry(0, key); !ok || e.version() != 2 {
			t.Fatalf("%s: %+v, %v; want version 2", key, e, ok)
		}
	}
	op, _, err := durability.DecodeOp(durability.AppendOp(nil, &ops[0]))
	if err != nil {
		t.Fatal(err)
	}
	if applied, have := replica.applyAt(0, 1, &op); !applied || have != 2 {
		t.Fatalf("replica applied %v, at %d", applied, have)
	}
	if owner.digest(0) != replica.digest(0) {
		t.Fatalf("replica digest %+v, owner %+v", replica.digest(0), owner.digest(0))
	}
	if v, _, _ := replica.get(0, "a"); string(v) != "2" {
		t.Fatalf("replica has a = %q, want the group's last write", v)
	}
	if empty := owner.atomically(0, func(g *store) { g.remove(0, "absent") }); empty != 2 {
		t.Fatalf("a group that wrote nothing moved the revision to %d", empty)
	}
}

// TestAtomicGroupIsNeverSeenHalfDone has readers check, while groups write two keys together, that they
// never see one key written without the other.
func TestAtomicGroupIsNeverSeenHalfDone(t *testing.T) {
	s := newStore(1, systemClock{})
	var done atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	var started sync.WaitGroup
	started.Add(2)
	for range 2 {
		wg.Go(func() {
			started.Done()
			for !done.Load() {
				a, _, _ := s.get(0, "a")
				b, _, _ := s.get(0, "b")
				if len(b) < len(a) { // b is read after a: it may be newer, never older
					t.Errorf("read a = %q before b = %q", a, b)
					done.Store(true)
					return
				}
				reads.Add(1)
			}
		})
	}
	started.Wait()
	// The groups go on until the readers have run alongside them, however the two are scheduled.
	for i := 0; !done.Load() && (i < 2000 || reads.Load() < 2000); i++ {
		v := []byte(strconv.Itoa(i))
		s.atomically(0, func(g *store) {
			g.put(0, "a", v, forTTL(0))
			g.put(0, "b", v, forTTL(0))
		})
	}
	done.Store(true)
	wg.Wait()
}

// TestTxnSemantics checks a transaction's reads and writes on one node: read-your-writes, all or nothing
// on a conflict, blind writes, the error of fn, and the refusals.
func TestTxnSemantics(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, nil)
	n, ctx := c.node(0), bg(t)
	must(t, n.Put(ctx, "{t}:a", []byte("1")))

	err := n.Txn(ctx, func(tx *Tx) error {
		if v, err := tx.Get(ctx, "{t}:a"); err != nil || string(v) != "1" {
			return fmt.Errorf("Get a = %q, %v", v, err)
		}
		if _, err := tx.Get(ctx, "{t}:b"); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("Get b: %v, want ErrNotFound", err)
		}
		must(t, tx.Put("{t}:b", []byte("2"), WithTTL(time.Hour)))
		must(t, tx.Delete("{t}:a"))
		if v, err := tx.Get(ctx, "{t}:b"); err != nil || string(v) != "2" {
			return fmt.Errorf("Get of its own write b = %q, %v", v, err)
		}
		if _, err := tx.Get(ctx, "{t}:a"); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("Get of its own delete: %v", err)
		}
		return nil
	})
	must(t, err)
	ea, errA := n.GetEntry(ctx, "{t}:a")
	eb, errB := n.GetEntry(ctx, "{t}:b")
	if !errors.Is(errA, ErrNotFound) || errB != nil || string(eb.Value) != "2" || eb.TTL <= 0 {
		t.Fatalf("after commit: a %+v, %v; b %+v, %v", ea, errA, eb, errB)
	}

	// A conflict writes nothing, and names the key.
	err = n.Txn(ctx, func(tx *Tx) error {
		if _, err := tx.Get(ctx, "{t}:b"); err != nil {
			return err
		}
		must(t, c.node(1).Put(ctx, "{t}:b", []byte("changed")))
		return tx.Put("{t}:c", []byte("3"))
	})
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) || ce.Key != "{t}:b" || ce.Read != eb.Version || ce.Current <= eb.Version {
		t.Fatalf("Txn after a concurrent write: %v; want a conflict on {t}:b from version %d", err, eb.Version)
	}
	if _, err := n.Get(ctx, "{t}:c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a conflicting transaction wrote {t}:c: %v", err)
	}

	// A key read as absent conflicts when it appears.
	err = n.Txn(ctx, func(tx *Tx) error {
		if _, err := tx.Get(ctx, "{t}:new"); !errors.Is(err, ErrNotFound) {
			return err
		}
		must(t, c.node(1).Put(ctx, "{t}:new", []byte("x")))
		return tx.Put("{t}:c", []byte("3"))
	})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("Txn after its absent key appeared: %v; want ErrConflict", err)
	}

	// fn's error aborts; blind writes commit without checks.
	stop := errors.New("stop")
	if err := n.Txn(ctx, func(tx *Tx) error { must(t, tx.Put("{t}:c", []byte("3"))); return stop }); err != stop {
		t.Fatalf("Txn returned %v, want fn's error", err)
	}
	must(t, n.Txn(ctx, func(tx *Tx) error { return tx.Put("{t}:c", []byte("4")) }))
	if v, err := n.Get(ctx, "{t}:c"); err != nil || string(v) != "4" {
		t.Fatalf("c = %q, %v after a blind write", v, err)
	}

	// Refusals.
	err = n.Txn(ctx, func(tx *Tx) error { return tx.Put("{t}:a", nil, IfAbsent()) })
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a transaction's conditional put: %v", err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTxnTransfersKeepTheTotal runs money transfers between accounts of one hash tag, all in one segment,
// from every node of a replicated cluster (transfers).
func TestTxnTransfersKeepTheTotal(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2))
	transfers(t, c, func(i int) string { return fmt.Sprintf("{bank}:account-%d", i) })
}

// TestTxnTransfersAcrossSegmentsKeepTheTotal is TestTxnTransfersKeepTheTotal with accounts spread over
// every node, so that transfers and sums commit in two phases. Records are kept for the least retention
// allowed: one whose coordinator could not resolve every intent (a busy machine) is dropped by its expiry.
func TestTxnTransfersAcrossSegmentsKeepTheTotal(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.TxnRecordRetention = 10 * cfg.TxnTimeout }))
	account := func(i int) string { return fmt.Sprintf("account-%d", i) }
	owners := map[NodeID]bool{}
	for i := range txnAccounts {
		owners[c.owner(account(i)).id] = true
	}
	if len(owners) < 2 {
		t.Fatalf("the accounts are on %d node(s)", len(owners))
	}
	transfers(t, c, account)
}

const txnAccounts = 6

// transfers runs money transfers between accounts from every node, and read-only transactions that sum
// the accounts. Every sum is the initial total, and each account ends at its initial balance plus what the
// committed transfers moved: no transfer is lost, applied twice or applied in part.
func transfers(t *testing.T, c *testCluster, account func(int) string) {
	// 240 transfers and their sums, each a transaction over replicated writes: a few seconds alone, far
	// longer in a loaded suite.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const (
		initial   = 100
		perWorker = 40
		workers   = 6
	)
	for i := range txnAccounts {
		must(t, c.node(0).Put(ctx, account(i), []byte(strconv.Itoa(initial))))
	}
	balance := func(tx *Tx, i int) (int, error) {
		v, err := tx.Get(ctx, account(i))
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(string(v))
	}
	var mu sync.Mutex
	moved := make([]int, txnAccounts)
	var commits, conflicts, sums atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			node, rng := c.node(w%3), rand.New(rand.NewPCG(uint64(w), 1))
			// Past perWorker, until the workers have contended at least once: a loaded machine may run
			// them one after the other for a while.
			for i := 0; i < perWorker || conflicts.Load() == 0 && i < 10*perWorker; i++ {
				from, to, amount := rng.IntN(txnAccounts), rng.IntN(txnAccounts), 1+rng.IntN(10)
				if from == to {
					continue
				}
				err := node.Txn(ctx, func(tx *Tx) error {
					a, err := balance(tx, from)
					if err != nil {
						return err
					}
					b, err := balance(tx, to)
					if err != nil {
						return err
					}
					must(t, tx.Put(account(from), []byte(strconv.Itoa(a-amount))))
					return tx.Put(account(to), []byte(strconv.Itoa(b+amount)))
				})
				switch {
				case errors.Is(err, ErrConflict) || errors.Is(err, ErrLocked):
					conflicts.Add(1)
				case err != nil:
					t.Errorf("transfer: %v", err)
					return
				default:
					commits.Add(1)
					mu.Lock()
					moved[from] -= amount
					moved[to] += amount
					mu.Unlock()
				}
				sum := 0
				err = node.Txn(ctx, func(tx *Tx) error {
					sum = 0
					for i := range txnAccounts {
						b, err := balance(tx, i)
						if err != nil {
							return err
						}
						sum += b
					}
					return nil
				}, TxnRetries(50))
				switch {
				case err != nil:
					t.Errorf("sum: %v", err)
					return
				case sum != txnAccounts*initial:
					t.Errorf("a transaction read a total of %d, want %d", sum, txnAccounts*initial)
					return
				}
				sums.Add(1)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if commits.Load() == 0 || conflicts.Load() == 0 {
		t.Fatalf("%d commits and %d conflicts: the workload did not contend", commits.Load(), conflicts.Load())
	}
	for i := range txnAccounts {
		for _, node := range c.live() {
			v, err := node.Get(ctx, account(i))
			if err != nil || string(v) != strconv.Itoa(initial+moved[i]) {
				t.Fatalf("%s reads account %d = %q, %v; the committed transfers leave %d", node.id, i, v, err, initial+moved[i])
			}
		}
	}
	wait := 10 * time.Second
	if retention := c.cfgs[0].TxnRecordRetention; retention < time.Minute { // a record left expires meanwhile
		wait += retention
	}
	waitFor(t, wait, "every intent resolved and every record dropped or expired", func() bool { return internalEntries(c) == 0 })
	t.Logf("%d transfers committed, %d conflicts, %d sums read", commits.Load(), conflicts.Load(), sums.Load())
}

// internalEntries counts the intents and transaction records the live nodes hold.
func internalEntries(c *testCluster) int {
	n := 0
	for _, node := range c.live() {
		for i := range node.own.store.segments {
			seg := &node.own.store.segments[i]
			seg.mu.RLock()
			for key := range seg.entries.all() {
				if isInternalKey(key) {
					n++
				}
			}
			seg.mu.RUnlock()
		}
	}
	return n
}

// TestTxnAllOrNothingAcrossFailover commits transactions that write the same counter into five keys of one
// tag, kills their owner while they run, and checks that after the failover the five keys still agree and
// hold at least the last acknowledged counter.
func TestTxnAllOrNothingAcrossFailover(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	ctx := bg(t)
	victim := (c.leader() + 1) % 3
	tag := 0
	for c.owner(fmt.Sprintf("{txn-%d}", tag)) != c.node(victim) {
		tag++
	}
	key := func(i int) string { return fmt.Sprintf("{txn-%d}:%d", tag, i) }
	writer := c.node((victim + 1) % 3)
	var acked atomic.Int64
	var killed atomic.Bool
	stopped := make(chan struct{})
	go func() { // writes until the kill, so that no later transaction hides one applied in part
		defer close(stopped)
		for i := int64(1); !killed.Load(); i++ {
			err := writer.Txn(ctx, func(tx *Tx) error {
				for k := range 5 {
					if err := tx.Put(key(k), []byte(strconv.FormatInt(i, 10))); err != nil {
						return err
					}
				}
				return nil
			})
			if err == nil {
				acked.Store(i)
			}
		}
	}()
	waitFor(t, 10*time.Second, "transactions committed", func() bool { return acked.Load() >= 50 })
	dead := c.node(victim).id
	c.kill(victim)
	killed.Store(true)
	<-stopped
	c.waitFailedOver(dead, 20*time.Second)
	for _, node := range c.live() {
		var first string
		for k := range 5 {
			v, err := node.Get(ctx, key(k))
			if err != nil {
				t.Fatalf("%s: Get %s: %v", node.id, key(k), err)
			}
			if k == 0 {
				first = string(v)
			} else if string(v) != first {
				t.Fatalf("%s reads %s = %q but %s = %q: a transaction applied in part", node.id, key(0), first, key(k), v)
			}
		}
		if got, _ := strconv.ParseInt(first, 10, 64); got < acked.Load() {
			t.Fatalf("%s reads counter %d, below the last acknowledged %d", node.id, got, acked.Load())
		}
	}
	t.Logf("the owner was killed after %d transactions were acknowledged", acked.Load())
}

// TestApplyTxn checks the owner's side of a transaction: refusals before anything runs, a failed check that
// writes nothing and names its item, and replies held to the reply budget.
func TestApplyTxn(t *testing.T) {
	layout := Layout{Segments: 4, Partitions: 4}
	other := "x"
	for layout.KeySegment(other) == layout.KeySegment("k") {
		other += "x"
	}
	seg := layout.KeySegment("k")
	put := func(key, value string) txnItem {
		return txnItem{op: kv.OpPut, req: kv.Request{Key: key, Value: []byte(value)}}
	}
	check := func(key string, version uint64) txnItem {
		return txnItem{op: kv.OpCheckVersion, req: kv.Request{Key: key, Version: version}}
	}
	lim := opLimits{maxValueSize: 64, maxReplyBytes: 64, layout: layout}
	for _, tc := range []struct {
		name   string
		items  []txnItem
		status Status
		index  int64
	}{
		{"key in another segment", []txnItem{put("k", "1"), put(other, "1")}, StatusInvalidRequest, 0},
		{"nested transaction", []txnItem{{op: kv.OpTxn, req: kv.Request{Key: "k"}}}, StatusInvalidRequest, 0},
		{"unknown operation", []txnItem{{op: 999, req: kv.Request{Key: "k"}}}, StatusInvalidRequest, 0},
		{"second check fails", []txnItem{put("k", "1"), check("k", 1), check("{k}", 7)}, StatusVersionMismatch, 2},
		{"all checks hold", []txnItem{check("k", 1), put("k", "2"), check("{k}a", 0)}, StatusSuccess, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(4, systemClock{})
			s.put(seg, "k", []byte("0"), forTTL(0))
			before := s.revision(seg)
			r := applyTxn(s, seg, kv.Request{Key: "k", Args: txnArgs(tc.items...)}, lim)
			if r.Status != tc.status || tc.status == StatusVersionMismatch && r.Int != tc.index {
				t.Fatalf("status %v, item %d; want %v, item %d", r.Status, r.Int, tc.status, tc.index)
			}
			if wrote := s.revision(seg) != before; wrote != (tc.status == StatusSuccess) {
				t.Fatalf("revision %d -> %d for status %v", before, s.revision(seg), r.Status)
			}
		})
	}
	s := newStore(4, systemClock{})
	s.put(seg, "k", bytes40(), forTTL(0))
	r := applyTxn(s, seg, kv.Request{Key: "k", Args: txnArgs(
		txnItem{op: kv.OpGet, req: kv.Request{Key: "k"}}, txnItem{op: kv.OpGet, req: kv.Request{Key: "k"}}, put("k", "w"),
	)}, lim)
	statuses := make([]Status, len(r.Values))
	for i, b := range r.Values {
		var sub kv.Reply
		must(t, decodeReply(&sub, b))
		statuses[i] = sub.Status
	}
	if r.Status != StatusSuccess || fmt.Sprint(statuses) != fmt.Sprint([]Status{StatusSuccess, StatusTooLarge, StatusSuccess}) {
		t.Fatalf("two reads of 40 bytes and a put under a 64-byte budget: %v %v", r.Status, statuses)
	}
	if v, _, _ := s.get(seg, "k"); string(v) != "w" {
		t.Fatalf("the put after an oversized read did not apply: %q", v)
	}
}

func bytes40() []byte { return []byte("0123456789012345678901234567890123456789") }

// TestTxnCoordinatorCrashPoints stops a transaction's coordinator at each point of its two-phase commit, as
// if it died there, and checks that the owners of its keys resolve them once TxnTimeout has passed: aborted
// when it stopped before its commit was recorded, committed after, and never one key without the other.
func TestTxnCoordinatorCrashPoints(t *testing.T) {
	t.Parallel()
	var crashAt atomic.Pointer[txnStep]
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.TxnTimeout, cfg.TxnRecordRetention = time.Second, time.Minute
		cfg.hooks.txnStep = stopAt(&crashAt)
	}))
	ctx, coordinator, reader := bg(t), c.node(0), c.node(1)
	a, b := "crash-a", "crash-b"
	for c.owner(b) == c.owner(a) || coordinator.layout.KeySegment(a) == coordinator.layout.KeySegment(b) {
		b += "!"
	}
	for i, tc := range []struct {
		name      string
		at        txnStep
		committed bool
	}{
		{"before the prepare of the second segment", txnStep{"prepare", 1}, false},
		{"before the decision", txnStep{"decide", 0}, false},
		{"before any resolve", txnStep{"resolve", 0}, true},
		{"before the resolve of the second segment", txnStep{"resolve", 1}, true},
	} {
		old, next := fmt.Sprintf("old-%d", i), fmt.Sprintf("new-%d", i)
		must(t, reader.Put(ctx, a, []byte(old)))
		must(t, reader.Put(ctx, b, []byte(old)))
		crashAt.Store(&tc.at)
		err := coordinator.Txn(ctx, func(tx *Tx) error {
			for _, key := range []string{a, b} {
				if _, err := tx.Get(ctx, key); err != nil {
					return err
				}
				must(t, tx.Put(key, []byte(next)))
			}
			return nil
		})
		crashAt.Store(nil)
		// Once the commit is recorded, Txn succeeds whether or not the resolves went out.
		if stopped := errors.Is(err, errCoordinatorStopped); !stopped && !(tc.committed && err == nil) {
			t.Fatalf("%s: Txn returned %v", tc.name, err)
		}
		want := old
		if tc.committed {
			want = next
		}
		for _, key := range []string{a, b} {
			v, err := reader.Get(ctx, key) // waits while the key is held
			if err != nil || string(v) != want {
				t.Fatalf("%s: %s = %q, %v; want %q", tc.name, key, v, err, want)
			}
		}
		waitFor(t, 5*time.Second, "every intent resolved on every copy", func() bool { return intentsLeft(c, a, b) == 0 })
	}
}

// intentsOn counts the intents node holds.
func intentsOn(node *Node) int64 {
	var n int64
	for i := range node.own.store.segments {
		n += node.own.store.segments[i].intents.Load()
	}
	return n
}

// stopAt is a txnStep hook that stops the coordinator at the step at points to, if any.
func stopAt(at *atomic.Pointer[txnStep]) func(txnStep) error {
	return func(step txnStep) error {
		if p := at.Load(); p != nil && *p == step {
			return errors.New("stopped by the test")
		}
		return nil
	}
}

// intentsLeft counts the intents that the live nodes hold in the segments of keys.
func intentsLeft(c *testCluster, keys ...string) int64 {
	var n int64
	for _, node := range c.live() {
		for _, key := range keys {
			n += node.own.store.segments[node.layout.KeySegment(key)].intents.Load()
		}
	}
	return n
}

// TestTxnSurvivesFullRestart commits transactions in one segment and over several on a 3-node RF 2
// cluster with data dirs, leaves one more committed but unresolved (its coordinator stopped after the
// decision), kills every node at once and starts them again: the committed writes read back, and the
// owners resolve the unresolved one, from their disks, as committed.
func TestTxnSurvivesFullRestart(t *testing.T) {
	t.Parallel()
	var sw killfs.Switch
	var stop atomic.Pointer[txnStep]
	base := t.TempDir()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.WriteConcern = Sync
		cfg.DataDir = filepath.Join(base, cfg.Name)
		cfg.hooks.diskFS = killfs.FS(vfs.Default, &sw)
		cfg.FailoverTimeout = time.Second
		cfg.TxnTimeout, cfg.TxnRecordRetention = time.Second, time.Minute
		cfg.hooks.txnStep = stopAt(&stop)
	}))
	ctx, n := bg(t), c.node(0)
	write := func(value string, keys ...string) error {
		return n.Txn(ctx, func(tx *Tx) error {
			for _, key := range keys {
				if err := tx.Put(key, []byte(value)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	one, across, unresolved := []string{"{r}:a", "{r}:b"}, []string{"restart-a", "restart-b", "restart-c"}, []string{"left-a", "left-b"}
	must(t, write("one", one...))
	must(t, write("across", across...))
	stop.Store(&txnStep{"resolve", 0})
	must(t, write("unresolved", unresolved...)) // committed: the decision was recorded
	stop.Store(nil)
	sw.Kill()
	for i := range 3 {
		c.kill(i)
	}
	for i := range 3 {
		c.cfgs[i].hooks.diskFS = nil
		c.restart(i)
	}
	for value, keys := range map[string][]string{"one": one, "across": across, "unresolved": unresolved} {
		for _, key := range keys {
			var v []byte
			var err error
			waitFor(t, 20*time.Second, "a read of "+key+" after the restart", func() bool {
				v, err = c.node(1).Get(ctx, key)
				return err == nil || errors.Is(err, ErrNotFound)
			})
			if string(v) != value {
				t.Fatalf("%s = %q, %v after the full restart; want %q", key, v, err, value)
			}
		}
	}
}

// TestTxnInternalKeysStayHidden leaves a transaction's intents and record in place (its coordinator stopped
// before resolving) and checks that watches, scans and DBSIZE's count show only the keys users wrote, and
// that a transaction in one segment is one event per key, all at one version.
func TestTxnInternalKeysStayHidden(t *testing.T) {
	t.Parallel()
	var stop atomic.Pointer[txnStep]
	c := startCluster(t, 2, func(cfg *Config) {
		cfg.TxnTimeout, cfg.TxnRecordRetention = 2*time.Second, time.Minute
		cfg.hooks.txnStep = stopAt(&stop)
	})
	ctx, n := bg(t), c.node(0)
	events, err := n.WatchTag(ctx, "w")
	must(t, err)
	put := func(keys ...string) error {
		return n.Txn(ctx, func(tx *Tx) error {
			for _, key := range keys {
				if err := tx.Put(key, []byte("v")); err != nil {
					return err
				}
			}
			return nil
		})
	}
	must(t, put("{w}:a", "{w}:b"))
	first, second := <-events, <-events
	if first.Key != "{w}:a" || second.Key != "{w}:b" || first.Version != second.Version || first.Kind != WatchPut {
		t.Fatalf("events %+v, %+v; want puts of {w}:a and {w}:b at one version", first, second)
	}
	stop.Store(&txnStep{"resolve", 0})
	must(t, put("{w}:c", "elsewhere")) // committed, its intents and record left in place
	if intentsLeft(c, "{w}:c", "elsewhere") == 0 {
		t.Fatal("the stopped transaction left no intent")
	}
	var keys []string
	for key, err := range n.Scan(ctx) {
		must(t, err)
		keys = append(keys, key)
	}
	slices.Sort(keys)
	if want := []string{"{w}:a", "{w}:b"}; !slices.Equal(keys, want) {
		t.Fatalf("scan found %q; want %q", keys, want)
	}
	if count := c.node(0).own.ownedKeyCount() + c.node(1).own.ownedKeyCount(); count != 2 {
		t.Fatalf("the owners count %d keys; want 2", count)
	}
	select {
	case ev := <-events:
		if ev.Key != "{w}:c" {
			t.Fatalf("the watch delivered %+v before the transaction's key", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the resolved transaction's key never reached the watch")
	}
}

// TestTxnIntentsSurviveFailover commits a transaction over two segments whose coordinator stops before any
// resolve, kills the owner of one of its keys, and checks that the new owner, from the intent it holds as a
// replica, resolves the key as committed.
func TestTxnIntentsSurviveFailover(t *testing.T) {
	t.Parallel()
	var stop atomic.Pointer[txnStep]
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.FailoverTimeout = time.Second
		cfg.TxnTimeout, cfg.TxnRecordRetention = time.Second, time.Minute
		cfg.hooks.txnStep = stopAt(&stop)
	}))
	ctx := bg(t)
	victim := (c.leader() + 1) % 3
	coordinator := c.node((victim + 1) % 3)
	held := c.keyOwnedBy("failover-held", c.node(victim))
	other := c.keyOwnedBy("failover-other", coordinator)
	stop.Store(&txnStep{"resolve", 0})
	err := coordinator.Txn(ctx, func(tx *Tx) error {
		must(t, tx.Put(other, []byte("committed")))
		return tx.Put(held, []byte("committed"))
	})
	stop.Store(nil)
	must(t, err)
	if intentsLeft(c, held) == 0 {
		t.Fatal("no intent on the victim's key")
	}
	dead := c.node(victim).id
	c.kill(victim)
	c.waitFailedOver(dead, 20*time.Second)
	for _, key := range []string{held, other} {
		var v []byte
		var err error
		waitFor(t, 10*time.Second, key+" resolved", func() bool {
			v, err = coordinator.Get(ctx, key)
			return !errors.Is(err, ErrLocked)
		})
		if err != nil || string(v) != "committed" {
			t.Fatalf("%s = %q, %v after the failover; want the committed value", key, v, err)
		}
	}
}

// TestTxnIntentsMoveWithTheirPartition commits a transaction over many segments whose coordinator stops
// before any resolve, then adds a node so that partitions move to it: the intents move with them, and the
// new owners resolve the keys as committed.
func TestTxnIntentsMoveWithTheirPartition(t *testing.T) {
	t.Parallel()
	var stop atomic.Pointer[txnStep]
	c := startCluster(t, 2, elastic(func(cfg *Config) {
		cfg.TxnTimeout, cfg.TxnRecordRetention = 4*time.Second, time.Minute // outlasts the move
		cfg.hooks.txnStep = stopAt(&stop)
	}))
	ctx := bg(t)
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("moving-%d", i)
	}
	stop.Store(&txnStep{"resolve", 0})
	err := c.node(0).Txn(ctx, func(tx *Tx) error {
		for _, key := range keys {
			must(t, tx.Put(key, []byte("committed")))
		}
		return nil
	})
	stop.Store(nil)
	must(t, err)
	joined := c.add(1)
	c.waitHealthy(30 * time.Second)
	if intentsOn(joined) == 0 {
		t.Fatal("no intent moved to the new node")
	}
	moved := 0
	for _, key := range keys {
		if c.owner(key) == joined {
			moved++
		}
		var v []byte
		waitFor(t, 10*time.Second, key+" resolved", func() bool {
			v, err = joined.Get(ctx, key)
			return !errors.Is(err, ErrLocked)
		})
		if err != nil || string(v) != "committed" {
			t.Fatalf("%s = %q, %v after the move; want the committed value", key, v, err)
		}
	}
	if moved == 0 {
		t.Fatal("no key moved to the new node")
	}
}
