package zaris

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The tests of this file move amounts between the two keys of a ledger, which share a hash tag and hold
// ledgerTotal between them, by transactions, while other clients read both keys in one command. A read
// whose total is not ledgerTotal saw part of a transaction: a torn read.

const ledgerTotal = 1000

// ledgerReads is how many reads a test makes, and the time it has for them: 100,000 with
// ZARIS_ATOMIC_READS=1 (a CI step of its own), fewer by default, so that the suite stays short under the
// race detector.
func ledgerReads() (reads int64, deadline time.Duration) {
	if os.Getenv("ZARIS_ATOMIC_READS") != "" {
		return 100_000, 15 * time.Minute
	}
	return 2_500, 2 * time.Minute
}

// ledger counts what a run of transfers and reads did.
type ledger struct {
	reads, torn, failedReads         atomic.Int64
	transfers, conflicts, failedMove atomic.Int64
	afterFault                       atomic.Int64 // transfers committed after the fault
	faulted                          atomic.Bool
	firstTorn                        atomic.Pointer[string]
}

// observe checks one read of both keys.
func (l *ledger) observe(a, b int64) {
	l.reads.Add(1)
	if a+b != ledgerTotal {
		if l.torn.Add(1) == 1 {
			s := fmt.Sprintf("a=%d b=%d", a, b)
			l.firstTorn.Store(&s)
		}
	}
}

func (l *ledger) committed() {
	l.transfers.Add(1)
	if l.faulted.Load() {
		l.afterFault.Add(1)
	}
}

func (l *ledger) String() string {
	first := ""
	if s := l.firstTorn.Load(); s != nil {
		first = " (first: " + *s + ")"
	}
	return fmt.Sprintf("%d reads, %d torn%s, %d failed; %d transfers committed (%d after the fault), %d conflicts, %d failed",
		l.reads.Load(), l.torn.Load(), first, l.failedReads.Load(), l.transfers.Load(), l.afterFault.Load(),
		l.conflicts.Load(), l.failedMove.Load())
}

// ledgerWorkload is how a test moves amounts and reads the ledger, through worker number w. move reports
// whether its transaction committed; read returns both keys' values.
type ledgerWorkload struct {
	writers, readers int
	move             func(ctx context.Context, w int, amount int64) (committed bool, err error)
	read             func(ctx context.Context, w int) (a, b int64, err error)
	// fault, when set, runs once half the reads are made; the run then goes on until transfers committed
	// after it too.
	fault func()
}

// run runs the workload until the readers made ledgerReads reads and the writers committed
// minLedgerTransfers transfers (and, with a fault, some after it), within ledgerReads's time, and returns
// the counts.
func (wl ledgerWorkload) run(t *testing.T) *ledger {
	t.Helper()
	want, limit := ledgerReads()
	l := &ledger{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w := range wl.writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				committed, err := wl.move(ctx, w, rng.Int64N(200)-100)
				switch {
				case ctx.Err() != nil:
				case err != nil:
					l.failedMove.Add(1)
					sleepBriefly(ctx) // a failover under way: let it finish rather than spin
				case committed:
					l.committed()
				default:
					l.conflicts.Add(1)
				}
			}
		})
	}
	for r := range wl.readers {
		wg.Go(func() {
			for ctx.Err() == nil {
				a, b, err := wl.read(ctx, r)
				switch {
				case ctx.Err() != nil:
				case err != nil:
					l.failedReads.Add(1)
					sleepBriefly(ctx)
				default:
					l.observe(a, b)
				}
			}
		})
	}
	deadline := time.Now().Add(limit)
	done := func() bool {
		return l.reads.Load() >= want && l.transfers.Load() >= minLedgerTransfers &&
			(wl.fault == nil || l.afterFault.Load() > 0)
	}
	for !done() && time.Now().Before(deadline) {
		if wl.fault != nil && !l.faulted.Load() && l.reads.Load() >= want/2 {
			wl.fault()
			l.faulted.Store(true)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	t.Log(l)
	if !done() {
		t.Fatalf("the run did not finish within its deadline: %v", l)
	}
	return l
}

// minLedgerTransfers is how many transfers a run commits at least: fewer would prove little.
const minLedgerTransfers = 100

// check fails the test on a torn read, or when the run moved too little to prove anything.
func (l *ledger) check(t *testing.T) {
	t.Helper()
	if l.torn.Load() > 0 {
		t.Fatalf("%d of %d reads saw a total other than %d: %v", l.torn.Load(), l.reads.Load(), ledgerTotal, l)
	}
	if l.transfers.Load() < minLedgerTransfers {
		t.Fatalf("only %d transfers committed: %v", l.transfers.Load(), l)
	}
}

// checkFailedOver fails the test unless the tag's partition has another owner than the node at index dead.
func checkFailedOver(t *testing.T, c *testCluster, tag string, dead int) {
	t.Helper()
	m := c.currentMap()
	if st := m.Runtime[m.Layout().KeyPartition(tag)]; st.Owner == NodeID(c.cfgs[dead].Name) {
		t.Fatalf("the killed owner %s still owns the ledger's partition: %+v", st.Owner, st)
	}
}

func sleepBriefly(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Millisecond):
	}
}

// ledgerTag returns a hash tag whose slot is owned by a node that does not lead the control plane, so that
// killing the owner does not also cost an election, and that node's index.
func ledgerTag(t *testing.T, c *testCluster) (tag string, owner int) {
	t.Helper()
	leader := c.leaderNode()
	for i := 0; ; i++ {
		tag = fmt.Sprintf("{ledger%d}", i)
		if o := c.owner(tag); o != nil && o != leader {
			c.mu.Lock()
			defer c.mu.Unlock()
			return tag, slices.Index(c.nodes, o)
		}
	}
}

// respLedgerCluster starts 3 nodes with RF 2 and RESP endpoints, and a cluster client that knows them all.
func respLedgerCluster(t *testing.T) (*testCluster, *redis.ClusterClient) {
	c := startRESPCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	var addrs []string
	for _, n := range c.live() {
		addrs = append(addrs, n.RESPAddr())
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16, PoolSize: 32})
	t.Cleanup(func() {
		client.Close()
		// A pool that failed to dial the killed node retries in the background, and checks every second
		// whether it was closed.
		waitFor(t, 10*time.Second, "the client's dialers to stop", func() bool {
			buf := make([]byte, 1<<20)
			return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("ConnPool).tryDial"))
		})
	})
	return c, client
}

// respLedger is the WATCH/MULTI/EXEC workload over keys a and b, read by MGET.
func respLedger(t *testing.T, client *redis.ClusterClient, a, b string) ledgerWorkload {
	ctx := bg(t)
	if err := client.MSet(ctx, a, ledgerTotal/2, b, ledgerTotal/2).Err(); err != nil {
		t.Fatal(err)
	}
	return ledgerWorkload{
		writers: 4,
		readers: 4,
		move: func(ctx context.Context, _ int, amount int64) (bool, error) {
			err := client.Watch(ctx, func(tx *redis.Tx) error {
				va, err := tx.Get(ctx, a).Int64()
				if err != nil {
					return err
				}
				vb, err := tx.Get(ctx, b).Int64()
				if err != nil {
					return err
				}
				_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
					pipe.Set(ctx, a, va-amount, 0)
					pipe.Set(ctx, b, vb+amount, 0)
					return nil
				})
				return err
			}, a, b)
			switch {
			case errors.Is(err, redis.TxFailedErr):
				return false, nil
			case err != nil:
				// WATCH goes to the slot's owner as the client last saw it, and the client reloads the
				// slots only when a command of another kind fails: reload them, as after a failover.
				client.ReloadState(ctx)
			}
			return err == nil, err
		},
		read: func(ctx context.Context, _ int) (int64, int64, error) {
			vals, err := client.MGet(ctx, a, b).Result()
			if err != nil {
				return 0, 0, err
			}
			return ledgerValue(vals[0]), ledgerValue(vals[1]), nil
		},
	}
}

// ledgerValue parses a value MGET returned; a missing key counts as a value that no ledger total allows.
func ledgerValue(v any) int64 {
	s, ok := v.(string)
	if !ok {
		return -10 * ledgerTotal
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -10 * ledgerTotal
	}
	return n
}

// TestRESPExecAtomicToMGet moves amounts between two keys with WATCH/MULTI/EXEC while other clients read
// both with MGET, on 3 nodes with RF 2 under the Sync concern: no MGET may see one SET of an EXEC without
// the other.
func TestRESPExecAtomicToMGet(t *testing.T) {
	c, client := respLedgerCluster(t)
	tag, _ := ledgerTag(t, c)
	wl := respLedger(t, client, tag+"a", tag+"b")
	wl.run(t).check(t)
}

// TestRESPExecAtomicToMGetAcrossFailover is TestRESPExecAtomicToMGet with the keys' owner killed halfway:
// its replica takes over, and neither the transactions it received nor those after see a torn read.
func TestRESPExecAtomicToMGetAcrossFailover(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c, client := respLedgerCluster(t)
	tag, owner := ledgerTag(t, c)
	wl := respLedger(t, client, tag+"a", tag+"b")
	wl.fault = func() { c.kill(owner) }
	wl.run(t).check(t)
	checkFailedOver(t, c, tag, owner)
}

// apiLedger is the Go API's workload over keys a and b: Txn moves amounts, GetMany reads both. Workers use
// the nodes in turn, skipping the one at index skip (-1: none), so that reads are served both in process
// and by a peer.
func apiLedger(t *testing.T, c *testCluster, a, b string, skip int) ledgerWorkload {
	ctx := bg(t)
	if _, err := c.node(0).PutMany(ctx, []KeyValue{{Key: a, Value: ledgerAmount(ledgerTotal / 2)}, {Key: b, Value: ledgerAmount(ledgerTotal / 2)}}); err != nil {
		t.Fatal(err)
	}
	var nodes []*Node
	for i, n := range c.live() {
		if i != skip {
			nodes = append(nodes, n)
		}
	}
	return ledgerWorkload{
		writers: 4,
		readers: 4,
		move: func(ctx context.Context, w int, amount int64) (bool, error) {
			err := nodes[w%len(nodes)].Txn(ctx, func(tx *Tx) error {
				va, err := tx.Get(ctx, a)
				if err != nil {
					return err
				}
				vb, err := tx.Get(ctx, b)
				if err != nil {
					return err
				}
				if err := tx.Put(a, ledgerAmount(parseAmount(va)-amount)); err != nil {
					return err
				}
				return tx.Put(b, ledgerAmount(parseAmount(vb)+amount))
			})
			if errors.Is(err, ErrConflict) {
				return false, nil
			}
			return err == nil, err
		},
		read: func(ctx context.Context, r int) (int64, int64, error) {
			res, err := nodes[r%len(nodes)].GetMany(ctx, []string{a, b})
			if err != nil {
				return 0, 0, err
			}
			for _, x := range res {
				if x.Err != nil {
					return 0, 0, x.Err
				}
			}
			return parseAmount(res[0].Value), parseAmount(res[1].Value), nil
		},
	}
}

func ledgerAmount(n int64) []byte { return strconv.AppendInt(nil, n, 10) }

func parseAmount(b []byte) int64 {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return -10 * ledgerTotal
	}
	return n
}

// TestTxnAtomicToGetMany is TestRESPExecAtomicToMGet through the Go API: Txn writers, GetMany readers on
// every node.
func TestTxnAtomicToGetMany(t *testing.T) {
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	tag, _ := ledgerTag(t, c)
	apiLedger(t, c, tag+"a", tag+"b", -1).run(t).check(t)
}

// TestTxnAtomicToGetManyAcrossFailover is TestTxnAtomicToGetMany with the keys' owner killed halfway.
func TestTxnAtomicToGetManyAcrossFailover(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	tag, owner := ledgerTag(t, c)
	wl := apiLedger(t, c, tag+"a", tag+"b", owner)
	wl.fault = func() { c.kill(owner) }
	wl.run(t).check(t)
	checkFailedOver(t, c, tag, owner)
}
