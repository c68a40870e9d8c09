package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"
)

// BankTarget is the system under test as the bank workload drives it: accounts holding integer balances,
// changed only by transactions.
type BankTarget interface {
	// Transfer moves amount from account from to account to and records receipt, in one transaction.
	Transfer(ctx context.Context, from, to, amount int, receipt string) error
	// Balances reads every account in one transaction.
	Balances(ctx context.Context) ([]int, error)
	// HasReceipt reports whether receipt was recorded.
	HasReceipt(ctx context.Context, receipt string) (bool, error)
}

// Bank is a workload of money transfers between Accounts accounts that start at Initial each, run by
// Clients clients, each of which also reads every balance in one transaction between its transfers. Every
// transfer records a receipt of its own in the same transaction, so that afterwards the transfers that
// took effect are known: those whose receipt exists. Verify then checks that every snapshot read summed to
// the initial total, that every acknowledged transfer took effect, and that the final balances are exactly
// what the transfers that took effect made of them: none applied twice or in part.
type Bank struct {
	Accounts, Initial, Clients int
	Seed                       uint64
	CallTimeout                time.Duration
	// Target returns the node a client's next call goes to, nil when none is up.
	Target func(client int) BankTarget
	// Failed reports a transfer error that proves the transfer did not take effect (a conflict).
	Failed func(error) bool
	// Cut, when set, makes Verify check a copy of the data taken then, such as a restored backup begun at
	// Cut: only the transfers acknowledged before it must have taken effect.
	Cut time.Time

	mu        sync.Mutex
	transfers []transfer
	begun     map[string]int // receipt to index in transfers
	sums      int
	badSums   []string
}

// transfer is one transfer a client attempted and how it ended, as the client saw it.
type transfer struct {
	from, to, amount int
	receipt          string
	state            ledgerState
	ended            time.Time // when its outcome was recorded
}

// BankResult is what verifying a bank run found.
type BankResult struct {
	Acked, Unknown, Failed int // transfers by outcome, as the clients saw them
	Applied                int // transfers whose receipt exists
	Sums                   int // snapshots read by transactions
	BadSums                []string
	LostTransfers          []string // acknowledged transfers whose receipt is missing
	PhantomTransfers       []string // transfers that failed for certain yet left a receipt
	WrongBalances          []string // accounts whose final balance is not what the applied transfers made
	Err                    error    // the final read failed
	// Unverifiable says why the final read stopped at a key whose every copy died, beyond the failure
	// model (ErrOutsideFailureModel): what it checked until then stands, the rest is not judged.
	Unverifiable string
}

// fail records why the final read stopped: beyond the failure model, or a failure.
func (r *BankResult) fail(err error) {
	if errors.Is(err, ErrOutsideFailureModel) {
		r.Unverifiable = err.Error()
		return
	}
	r.Err = err
}

// Ok reports whether the run kept every promise of transactions.
func (r BankResult) Ok() bool {
	return r.Err == nil && len(r.BadSums) == 0 && len(r.LostTransfers) == 0 && len(r.PhantomTransfers) == 0 &&
		len(r.WrongBalances) == 0
}

func (r BankResult) String() string {
	s := fmt.Sprintf("%d acked, %d unknown, %d failed; %d applied; %d snapshots, %d with a wrong total; "+
		"%d acked transfers lost, %d failed ones applied, %d wrong balances",
		r.Acked, r.Unknown, r.Failed, r.Applied, r.Sums, len(r.BadSums), len(r.LostTransfers),
		len(r.PhantomTransfers), len(r.WrongBalances))
	for _, list := range [][]string{r.BadSums, r.LostTransfers, r.PhantomTransfers, r.WrongBalances} {
		for _, line := range list[:min(len(list), maxKeysPrinted)] {
			s += "\n  " + line
		}
	}
	if r.Err != nil {
		s += "\n  final read: " + r.Err.Error()
	}
	if r.Unverifiable != "" {
		s += "\n  final read stopped, beyond the failure model: " + r.Unverifiable
	}
	return s
}

// BankEvent is one step of a bank client as it happens: a transfer begun (Amount set), a transfer ended
// (Outcome set), or a snapshot read (Balances set). A client that runs in another process sends its events
// to the Bank that verifies the run (Record); one begun and never ended has an unknown outcome.
type BankEvent struct {
	Receipt  string `json:",omitempty"`
	From     int    `json:",omitempty"`
	To       int    `json:",omitempty"`
	Amount   int    `json:",omitempty"`
	Outcome  string `json:",omitempty"` // "acked", "failed" or "unknown"
	Balances []int  `json:",omitempty"`
}

// Bank outcomes of a transfer, as BankEvent.Outcome names them.
const (
	OutcomeAcked   = "acked"
	OutcomeFailed  = "failed"
	OutcomeUnknown = "unknown"
)

// Record takes one event of a client.
func (b *Bank) Record(ev BankEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case ev.Balances != nil:
		b.sums++
		if total := sum(ev.Balances); total != b.Accounts*b.Initial {
			b.badSums = append(b.badSums, fmt.Sprintf("a snapshot read a total of %d, not %d: %v", total, b.Accounts*b.Initial, ev.Balances))
		}
	case ev.Outcome != "":
		if i, ok := b.begun[ev.Receipt]; ok {
			b.transfers[i].state, b.transfers[i].ended = outcomeState(ev.Outcome), time.Now()
		}
	case ev.Receipt != "":
		if b.begun == nil {
			b.begun = map[string]int{}
		}
		b.begun[ev.Receipt] = len(b.transfers)
		b.transfers = append(b.transfers, transfer{from: ev.From, to: ev.To, amount: ev.Amount, receipt: ev.Receipt, state: unknown})
	}
}

func outcomeState(outcome string) ledgerState {
	switch outcome {
	case OutcomeAcked:
		return acked
	case OutcomeFailed:
		return failed
	}
	return unknown
}

// Run runs the clients until ctx ends.
func (b *Bank) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for id := range b.Clients {
		wg.Go(func() { b.RunClient(ctx, id, 0, b.Record) })
	}
	wg.Wait()
}

// RunClient runs client id until ctx ends, sending each step to emit before and after it happens. A
// client restarted in a new process takes a new incarnation: its receipts differ from its predecessor's.
func (b *Bank) RunClient(ctx context.Context, id, incarnation int, emit func(BankEvent)) {
	rng := rand.New(rand.NewPCG(b.Seed, uint64(id)<<32|uint64(incarnation)+1000))
	for seq := 0; ctx.Err() == nil; seq++ {
		target := b.Target(id)
		if target == nil {
			Sleep(ctx, 50*time.Millisecond)
			continue
		}
		from, to := rng.IntN(b.Accounts), rng.IntN(b.Accounts)
		if from == to {
			continue
		}
		ev := BankEvent{From: from, To: to, Amount: 1 + rng.IntN(20), Receipt: fmt.Sprintf("receipt-%d-%d-%d", id, incarnation, seq)}
		emit(ev)
		callCtx, cancel := context.WithTimeout(ctx, b.CallTimeout)
		err := target.Transfer(callCtx, ev.From, ev.To, ev.Amount, ev.Receipt)
		cancel()
		switch {
		case err == nil:
			emit(BankEvent{Receipt: ev.Receipt, Outcome: OutcomeAcked})
		case b.Failed(err):
			emit(BankEvent{Receipt: ev.Receipt, Outcome: OutcomeFailed})
		default:
			emit(BankEvent{Receipt: ev.Receipt, Outcome: OutcomeUnknown})
		}
		b.readSnapshot(ctx, target, emit)
	}
}

// readSnapshot reads every balance in one transaction and emits what it read.
func (b *Bank) readSnapshot(ctx context.Context, target BankTarget, emit func(BankEvent)) {
	callCtx, cancel := context.WithTimeout(ctx, b.CallTimeout)
	balances, err := target.Balances(callCtx)
	cancel()
	if err == nil {
		emit(BankEvent{Balances: balances})
	}
}

func sum(xs []int) int {
	total := 0
	for _, x := range xs {
		total += x
	}
	return total
}

// Verify reads every receipt and the final balances through target, once the clients have stopped and the
// faults are over, and checks them against what the clients saw.
func (b *Bank) Verify(ctx context.Context, target BankTarget) BankResult {
	b.mu.Lock()
	transfers := slices.Clone(b.transfers)
	r := BankResult{Sums: b.sums, BadSums: slices.Clone(b.badSums)}
	b.mu.Unlock()
	want := make([]int, b.Accounts)
	for i := range want {
		want[i] = b.Initial
	}
	for _, t := range transfers {
		r.count(t)
		found, err := b.receipt(ctx, target, t.receipt)
		if err != nil {
			r.fail(fmt.Errorf("receipt %s: %w", t.receipt, err))
			return r
		}
		switch {
		case !found && t.state == acked && (b.Cut.IsZero() || t.ended.Before(b.Cut)):
			r.LostTransfers = append(r.LostTransfers, fmt.Sprintf("%s: %d from %d to %d, acknowledged", t.receipt, t.amount, t.from, t.to))
		case found && t.state == failed:
			r.PhantomTransfers = append(r.PhantomTransfers, fmt.Sprintf("%s: %d from %d to %d, failed", t.receipt, t.amount, t.from, t.to))
		}
		if found {
			r.Applied++
			want[t.from] -= t.amount
			want[t.to] += t.amount
		}
	}
	got, err := b.balances(ctx, target)
	if err != nil {
		r.fail(fmt.Errorf("final balances: %w", err))
		return r
	}
	for i := range want {
		if got[i] != want[i] {
			r.WrongBalances = append(r.WrongBalances, fmt.Sprintf("account %d holds %d, the applied transfers leave %d", i, got[i], want[i]))
		}
	}
	return r
}

func (r *BankResult) count(t transfer) {
	switch t.state {
	case acked:
		r.Acked++
	case unknown:
		r.Unknown++
	default:
		r.Failed++
	}
}

// receipt reads one receipt, retrying failed reads a few times.
func (b *Bank) receipt(ctx context.Context, target BankTarget, receipt string) (found bool, err error) {
	for attempt := 0; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, b.CallTimeout)
		found, err = target.HasReceipt(callCtx, receipt)
		cancel()
		if err == nil || attempt == readRetries || !Sleep(ctx, readPause) {
			return found, err
		}
	}
}

// balances reads the final balances, retrying failed reads a few times, and reads that conflict with a
// transaction still holding an account for up to heldAccountWait.
func (b *Bank) balances(ctx context.Context, target BankTarget) (got []int, err error) {
	heldUntil := time.Now().Add(heldAccountWait)
	for attempt := 0; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, b.CallTimeout)
		got, err = target.Balances(callCtx)
		cancel()
		held := err != nil && b.Failed != nil && b.Failed(err) && time.Now().Before(heldUntil)
		if err == nil || !held && attempt >= readRetries || !Sleep(ctx, readPause) {
			return got, err
		}
	}
}

// heldAccountWait bounds how long the final read waits for the transactions that hold accounts: a
// transfer its client gave up on at the end of the run keeps its accounts until its timeout passes and an
// owner aborts it, later when its record's partition is moving or failing over. An account held longer
// fails the run.
const heldAccountWait = 30 * time.Second

// TxnStore is a key-value store with transactions, as TxnBank drives it.
type TxnStore struct {
	// Txn runs fn as one transaction, in which get reads a key and put buffers a write; an error of fn
	// aborts it.
	Txn func(ctx context.Context, fn func(tx TxnOps) error) error
	// Get reads a key outside any transaction; found is false when it has no value.
	Get func(ctx context.Context, key string) (value []byte, found bool, err error)
}

// TxnOps are the reads and writes of one transaction.
type TxnOps struct {
	Get func(key string) ([]byte, error)
	Put func(key string, value []byte) error
}

// BankAccount is the key of account i in a TxnBank.
func BankAccount(i int) string { return "bank-" + strconv.Itoa(i) }

// TxnBank is the bank on a TxnStore: each account a key holding its balance in decimal, each receipt a key
// of its own holding the amount.
func TxnBank(s TxnStore, accounts int) BankTarget { return txnBank{s: s, accounts: accounts} }

type txnBank struct {
	s        TxnStore
	accounts int
}

func (b txnBank) Transfer(ctx context.Context, from, to, amount int, receipt string) error {
	return b.s.Txn(ctx, func(tx TxnOps) error {
		a, err := balance(tx, from)
		if err != nil {
			return err
		}
		c, err := balance(tx, to)
		if err != nil {
			return err
		}
		if err := tx.Put(BankAccount(from), []byte(strconv.Itoa(a-amount))); err != nil {
			return err
		}
		if err := tx.Put(BankAccount(to), []byte(strconv.Itoa(c+amount))); err != nil {
			return err
		}
		return tx.Put(receipt, []byte(strconv.Itoa(amount)))
	})
}

func (b txnBank) Balances(ctx context.Context) ([]int, error) {
	out := make([]int, b.accounts)
	err := b.s.Txn(ctx, func(tx TxnOps) error {
		for i := range out {
			v, err := balance(tx, i)
			if err != nil {
				return err
			}
			out[i] = v
		}
		return nil
	})
	return out, err
}

func (b txnBank) HasReceipt(ctx context.Context, receipt string) (bool, error) {
	_, found, err := b.s.Get(ctx, receipt)
	return found, err
}

// balance reads account i's balance in tx.
func balance(tx TxnOps, i int) (int, error) {
	v, err := tx.Get(BankAccount(i))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(v))
}

// Open writes every account's initial balance through put, before the run.
func (b *Bank) Open(ctx context.Context, put func(ctx context.Context, key string, value []byte) error) error {
	for i := range b.Accounts {
		if err := put(ctx, BankAccount(i), []byte(strconv.Itoa(b.Initial))); err != nil {
			return fmt.Errorf("open account %d: %w", i, err)
		}
	}
	return nil
}
