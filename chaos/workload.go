package chaos

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	targetPause        = 10 * time.Millisecond // wait when no node can serve a call
	defaultCallTimeout = time.Second           // used when Workload.CallTimeout is zero
	pcgStream          = 0x5a17c4a05           // second PCG word, fixed so a seed replays the same choices
)

// Target is what a client calls; the driver decides which node serves each call.
type Target interface {
	Put(ctx context.Context, key string, value []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	// ReadVersion returns key's value and version, or a not-found error.
	ReadVersion(ctx context.Context, key string) (value []byte, version uint64, err error)
	// CompareAndSwap writes value if key's version is version, 0 meaning the key has no value, and
	// otherwise fails with an error IsMismatch recognizes.
	CompareAndSwap(ctx context.Context, key string, version uint64, value []byte) error
}

// Classifier turns an error from Target into an outcome: for a get, any error other than not-found is
// Failed; for a write, DefinitelyFailed says whether it is Failed (definitely not applied) or Unknown,
// and for a cas IsMismatch says the key held another version.
type Classifier struct {
	IsNotFound       func(error) bool // a get error that means the key has no value
	DefinitelyFailed func(error) bool // a write error that proves the write was not applied
	IsMismatch       func(error) bool // a cas error that means the key held another version
}

// get classifies the error of a get.
func (c Classifier) get(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case c.IsNotFound != nil && c.IsNotFound(err):
		return NotFound
	}
	return Failed
}

// put classifies the error of a put; without proof of failure a put's outcome is unknown.
func (c Classifier) put(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case c.DefinitelyFailed != nil && c.DefinitelyFailed(err):
		return Failed
	}
	return Unknown
}

// cas classifies the error of a compare-and-swap: a mismatch, or like a put.
func (c Classifier) cas(err error) Outcome {
	if err != nil && c.IsMismatch != nil && c.IsMismatch(err) {
		return Mismatch
	}
	return c.put(err)
}

// Workload runs Clients goroutines until ctx ends. Each client loops: with probability LedgerShare it
// writes the next unique ledger key "ledger-<client>-<seq>" (its value is LedgerValue of the key and
// ValueSize), otherwise it does a get, put or cas (40/40/20) on a random one of Registers keys "reg-<i>",
// writing a unique value "<client>-<seq>". A cas reads the key's value and version, recorded as a get,
// then swaps that version for its new value. Each call gets its own context with CallTimeout. Calls are recorded in
// History and Ledger, which must be set.
type Workload struct {
	Clients     int
	Registers   int           // at least one register is used
	LedgerShare float64       // share of calls that are ledger writes, in [0, 1]
	ValueSize   int           // size of each ledger value in bytes; at most the key's length means the key itself
	CallTimeout time.Duration // zero means one second
	Seed        uint64        // client c draws from a PCG seeded with Seed+c
	// Target is called per op (lets the driver pick a live node); it may return nil when no node is
	// available, then the client pauses 10ms and retries.
	Target   func(client int) Target
	Classify Classifier
	History  *History
	Ledger   *Ledger

	counts [Cas][Mismatch]atomic.Int64 // ops by kind and outcome, indexed from zero
}

// Run drives the clients and returns when every client has stopped. Calls in flight when ctx ends run to
// completion or CallTimeout, so their outcomes are as definite as possible.
func (w *Workload) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for id := range w.Clients {
		wg.Go(func() { w.runClient(ctx, id) })
	}
	wg.Wait()
}

// Outcomes returns the number of ops so far by kind and outcome, keyed like "put OK" or "get NotFound".
func (w *Workload) Outcomes() map[string]int {
	m := make(map[string]int)
	for k := Get; k <= Cas; k++ {
		for o := OK; o <= Mismatch; o++ {
			if n := w.counts[k-1][o-1].Load(); n > 0 {
				m[k.String()+" "+o.String()] = int(n)
			}
		}
	}
	return m
}

// client is one workload goroutine's state.
type client struct {
	w   *Workload
	id  int
	rng *rand.Rand
	seq int
}

// runClient issues calls until ctx ends.
func (w *Workload) runClient(ctx context.Context, id int) {
	c := &client{w: w, id: id, rng: rand.New(rand.NewPCG(w.Seed+uint64(id), pcgStream))}
	for ctx.Err() == nil {
		t := w.Target(id)
		if t == nil {
			Sleep(ctx, targetPause)
			continue
		}
		c.step(ctx, t)
	}
}

// step makes one call on t, chosen at random.
func (c *client) step(ctx context.Context, t Target) {
	c.seq++
	if c.rng.Float64() < c.w.LedgerShare {
		c.ledgerPut(ctx, t)
		return
	}
	switch n := c.rng.IntN(5); {
	case n < 2:
		c.get(ctx, t, c.register())
	case n < 4:
		c.put(ctx, t, c.register(), c.value())
	default:
		c.cas(ctx, t, c.register(), c.value())
	}
}

// value is the client's unique register value for its current step.
func (c *client) value() string {
	return strconv.Itoa(c.id) + "-" + strconv.Itoa(c.seq)
}

// register picks one of the shared register keys.
func (c *client) register() string {
	return "reg-" + strconv.Itoa(c.rng.IntN(max(1, c.w.Registers)))
}

// ledgerPut writes the client's next unique ledger key, tracking it in the ledger.
func (c *client) ledgerPut(ctx context.Context, t Target) {
	key := "ledger-" + strconv.Itoa(c.id) + "-" + strconv.Itoa(c.seq)
	value := LedgerValue(key, c.w.ValueSize)
	c.w.Ledger.Attempt(key, value)
	switch c.put(ctx, t, key, value) {
	case OK:
		c.w.Ledger.Ack(key)
	case Failed:
		c.w.Ledger.Fail(key)
	default:
		c.w.Ledger.Unknown(key)
	}
}

// put writes value to key and records the call.
func (c *client) put(ctx context.Context, t Target, key, value string) Outcome {
	cctx, cancel := c.w.callContext(ctx)
	defer cancel()
	start := time.Now()
	err := t.Put(cctx, key, []byte(value))
	end := time.Now()
	return c.w.record(Op{Client: c.id, Kind: Put, Key: key, Value: value, Outcome: c.w.Classify.put(err), Start: start, End: end})
}

// get reads key and records the call.
func (c *client) get(ctx context.Context, t Target, key string) {
	cctx, cancel := c.w.callContext(ctx)
	defer cancel()
	start := time.Now()
	v, err := t.Get(cctx, key)
	end := time.Now()
	op := Op{Client: c.id, Kind: Get, Key: key, Outcome: c.w.Classify.get(err), Start: start, End: end}
	if op.Outcome == OK {
		op.Value = string(v)
	}
	c.w.record(op)
}

// cas reads key's value and version, recording the read as a get, then swaps that version for value and
// records the swap with the value read as the one it expected. A failed read ends it.
func (c *client) cas(ctx context.Context, t Target, key, value string) {
	read, version := c.readVersion(ctx, t, key)
	if c.w.record(read) == Failed {
		return
	}
	cctx, cancel := c.w.callContext(ctx)
	defer cancel()
	start := time.Now()
	err := t.CompareAndSwap(cctx, key, version, []byte(value))
	end := time.Now()
	c.w.record(Op{Client: c.id, Kind: Cas, Key: key, Value: value, Expected: read.Value, Outcome: c.w.Classify.cas(err), Start: start, End: end})
}

// readVersion reads key's value and version as a get op; the version is 0 unless the get is OK.
func (c *client) readVersion(ctx context.Context, t Target, key string) (Op, uint64) {
	cctx, cancel := c.w.callContext(ctx)
	defer cancel()
	start := time.Now()
	v, version, err := t.ReadVersion(cctx, key)
	end := time.Now()
	op := Op{Client: c.id, Kind: Get, Key: key, Outcome: c.w.Classify.get(err), Start: start, End: end}
	if op.Outcome != OK {
		return op, 0
	}
	op.Value = string(v)
	return op, version
}

// callContext returns the context for one call: ctx's values, not its cancellation, and CallTimeout.
func (w *Workload) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := w.CallTimeout
	if d <= 0 {
		d = defaultCallTimeout
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// record adds op to the history and the counts, returning its outcome.
func (w *Workload) record(op Op) Outcome {
	w.History.Record(op)
	w.counts[op.Kind-1][op.Outcome-1].Add(1)
	return op.Outcome
}
