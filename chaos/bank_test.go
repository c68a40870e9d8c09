package chaos

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// memBank is an in-memory BankTarget whose faults a test chooses.
type memBank struct {
	mu       sync.Mutex
	balances []int
	receipts map[string]bool
	calls    int
	// faults
	halfEvery  int  // every halfEvery-th transfer debits without crediting
	dropEvery  int  // every dropEvery-th transfer is acknowledged but not applied
	tornSums   bool // Balances reads the first account before a transfer and the rest after
	conflictAt int  // every conflictAt-th transfer fails with errConflict, applying nothing
	heldReads  int  // the next heldReads reads of the balances fail with errConflict
}

var errConflict = errors.New("conflict")

func newMemBank(accounts, initial int) *memBank {
	b := &memBank{balances: make([]int, accounts), receipts: map[string]bool{}}
	for i := range b.balances {
		b.balances[i] = initial
	}
	return b
}

func (b *memBank) Transfer(_ context.Context, from, to, amount int, receipt string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	switch {
	case b.conflictAt > 0 && b.calls%b.conflictAt == 0:
		return errConflict
	case b.dropEvery > 0 && b.calls%b.dropEvery == 0:
		return nil
	}
	b.balances[from] -= amount
	if b.halfEvery == 0 || b.calls%b.halfEvery != 0 {
		b.balances[to] += amount
	}
	b.receipts[receipt] = true
	return nil
}

func (b *memBank) Balances(context.Context) ([]int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.heldReads > 0 {
		b.heldReads--
		return nil, errConflict
	}
	out := append([]int(nil), b.balances...)
	if b.tornSums {
		out[0] += 7 // as if read before a transfer that the other accounts already show
	}
	return out, nil
}

func (b *memBank) HasReceipt(_ context.Context, receipt string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.receipts[receipt], nil
}

// runBank runs a short bank workload against target and verifies it.
func runBank(t *testing.T, target *memBank) BankResult {
	t.Helper()
	bank := &Bank{Accounts: 4, Initial: 100, Clients: 3, Seed: 1, CallTimeout: time.Second,
		Target: func(int) BankTarget { return target }, Failed: func(err error) bool { return errors.Is(err, errConflict) }}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	bank.Run(ctx)
	return bank.Verify(context.Background(), target)
}

// TestBankChecks runs the bank workload against a correct bank, which passes, and against banks that break
// each promise, which the checker catches.
func TestBankChecks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(b *memBank)
		want  func(BankResult) bool
	}{
		{"correct, with conflicts", func(b *memBank) { b.conflictAt = 3 }, func(r BankResult) bool { return r.Ok() && r.Failed > 0 }},
		{"half applied", func(b *memBank) { b.halfEvery = 5 }, func(r BankResult) bool { return !r.Ok() && len(r.WrongBalances) > 0 }},
		{"acknowledged, not applied", func(b *memBank) { b.dropEvery = 5 }, func(r BankResult) bool { return !r.Ok() && len(r.LostTransfers) > 0 }},
		{"torn snapshots", func(b *memBank) { b.tornSums = true }, func(r BankResult) bool { return !r.Ok() && len(r.BadSums) > 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := newMemBank(4, 100)
			tc.fault(target)
			r := runBank(t, target)
			if r.Acked == 0 || r.Sums == 0 || !tc.want(r) {
				t.Fatalf("verdict: %s", r)
			}
		})
	}
}

// TestBankFinalReadWaitsForHeldAccounts: a final read that conflicts with a transaction still holding an
// account, many more times than a failed read is retried, is read again until the account is released.
func TestBankFinalReadWaitsForHeldAccounts(t *testing.T) {
	target := newMemBank(3, 100)
	target.heldReads = 4 * readRetries
	b := &Bank{Accounts: 3, Initial: 100, CallTimeout: time.Second, Failed: func(err error) bool { return errors.Is(err, errConflict) }}
	if r := b.Verify(context.Background(), target); !r.Ok() || target.heldReads != 0 {
		t.Fatalf("result %v with %d conflicting reads left; want ok after all of them", r, target.heldReads)
	}
}

// TestBankRecordsClientsElsewhere feeds a Bank the events of a client that ran in another process and died
// amid a transfer: the transfer it began and never ended counts as unknown, and applied or not, it leaves
// the check passing; an acknowledged transfer whose receipt is missing still fails it.
func TestBankRecordsClientsElsewhere(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		applyTheLast   bool
		dropAnAcked    bool
		unknown, acked int
		ok             bool
	}{
		{name: "killed before its transfer took effect", unknown: 1, acked: 2, ok: true},
		{name: "killed after its transfer took effect", applyTheLast: true, unknown: 1, acked: 2, ok: true},
		{name: "an acknowledged transfer lost", dropAnAcked: true, unknown: 1, acked: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := newMemBank(3, 100)
			b := &Bank{Accounts: 3, Initial: 100, CallTimeout: time.Second}
			transfer := func(ev BankEvent, outcome string, apply bool) {
				b.Record(ev)
				if apply {
					if err := target.Transfer(ctx, ev.From, ev.To, ev.Amount, ev.Receipt); err != nil {
						t.Fatal(err)
					}
				}
				if outcome != "" {
					b.Record(BankEvent{Receipt: ev.Receipt, Outcome: outcome})
				}
			}
			transfer(BankEvent{Receipt: "r-0-0-0", From: 0, To: 1, Amount: 5}, OutcomeAcked, true)
			transfer(BankEvent{Receipt: "r-0-0-1", From: 1, To: 2, Amount: 7}, OutcomeAcked, !tc.dropAnAcked)
			transfer(BankEvent{Receipt: "r-0-0-2", From: 2, To: 0, Amount: 9}, "", tc.applyTheLast)
			b.Record(BankEvent{Balances: []int{100, 100, 100}})
			r := b.Verify(ctx, target)
			if r.Ok() != tc.ok || r.Unknown != tc.unknown || r.Acked != tc.acked || r.Sums != 1 {
				t.Fatalf("result %v; want ok %v, %d acked, %d unknown, 1 snapshot", r, tc.ok, tc.acked, tc.unknown)
			}
		})
	}
}

// TestBankCut checks the verdict on a copy of the bank taken at a cut while the clients run: a whole copy
// passes with Cut set, the same copy fails without it (transfers acknowledged later are missing), and a copy
// whose receipts and balances were taken apart fails on its balances.
func TestBankCut(t *testing.T) {
	target := newMemBank(4, 100)
	bank := &Bank{Accounts: 4, Initial: 100, Clients: 3, Seed: 1, CallTimeout: time.Second,
		Target: func(int) BankTarget { return target }, Failed: func(err error) bool { return errors.Is(err, errConflict) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { bank.Run(ctx); close(done) }()
	copyOf := func() *memBank {
		for {
			target.mu.Lock()
			calls := target.calls
			target.mu.Unlock()
			if calls > 20 {
				break
			}
		}
		target.mu.Lock()
		defer target.mu.Unlock()
		c := newMemBank(4, 100)
		copy(c.balances, target.balances)
		for r := range target.receipts {
			c.receipts[r] = true
		}
		c.calls = target.calls
		return c
	}
	cut := time.Now() // before the copy: a transfer acknowledged by then was applied by then
	whole := copyOf()
	torn := copyOf()
	for {
		target.mu.Lock()
		calls := target.calls
		target.mu.Unlock()
		if calls > whole.calls+20 {
			break
		}
	}
	cancel()
	<-done
	torn.mu.Lock()
	copy(torn.balances, target.balances) // balances of later than the receipts
	torn.mu.Unlock()
	bank.Cut = cut
	if r := bank.Verify(context.Background(), whole); !r.Ok() {
		t.Fatalf("a whole copy at the cut: %s", r)
	}
	if r := bank.Verify(context.Background(), torn); r.Ok() || len(r.WrongBalances) == 0 {
		t.Fatalf("a torn copy passed: %s", r)
	}
	bank.Cut = time.Time{}
	if r := bank.Verify(context.Background(), whole); r.Ok() || len(r.LostTransfers) == 0 {
		t.Fatalf("a copy at the cut passed as the whole run: %s", r)
	}
}
