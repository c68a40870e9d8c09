package chaos

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	errNotFound = errors.New("not found")
	errRefused  = errors.New("refused")
	errTimeout  = errors.New("timeout")
	errMismatch = errors.New("version mismatch")
)

// fakeStore is a linearizable in-memory Target that can inject errors and lose acknowledged writes.
type fakeStore struct {
	faults    bool // refuse or time out some calls
	dropEvery int  // if > 0, every n-th put is acknowledged without being applied

	mu       sync.Mutex
	data     map[string]string
	versions map[string]uint64
	rng      *rand.Rand
	puts     int
	revision uint64 // last version given to a write
}

func newFakeStore(faults bool, dropEvery int) *fakeStore {
	return &fakeStore{faults: faults, dropEvery: dropEvery, data: map[string]string{}, versions: map[string]uint64{},
		rng: rand.New(rand.NewPCG(1, 2))}
}

// latency sleeps a little so calls from different clients overlap.
func latency() { time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond) }

func (f *fakeStore) Put(_ context.Context, key string, value []byte) error {
	latency()
	defer latency()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.write(key, value)
}

// CompareAndSwap writes like Put when key's version is version, and otherwise fails with errMismatch.
func (f *fakeStore) CompareAndSwap(_ context.Context, key string, version uint64, value []byte) error {
	latency()
	defer latency()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.versions[key] != version {
		return errMismatch
	}
	return f.write(key, value)
}

// write stores value under key with a new version, save for the injected faults and losses.
func (f *fakeStore) write(key string, value []byte) error {
	f.puts++
	if f.faults {
		switch f.rng.IntN(100) {
		case 0, 1, 2:
			return errRefused
		case 3:
			f.set(key, value)
			return errTimeout
		case 4:
			return errTimeout
		}
	}
	if f.dropEvery > 0 && f.puts%f.dropEvery == 0 {
		return nil
	}
	f.set(key, value)
	return nil
}

func (f *fakeStore) set(key string, value []byte) {
	f.revision++
	f.data[key], f.versions[key] = string(value), f.revision
}

func (f *fakeStore) Get(ctx context.Context, key string) ([]byte, error) {
	v, _, err := f.ReadVersion(ctx, key)
	return v, err
}

func (f *fakeStore) ReadVersion(_ context.Context, key string) ([]byte, uint64, error) {
	latency()
	defer latency()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.faults && f.rng.IntN(100) < 3 {
		return nil, 0, errTimeout
	}
	v, ok := f.data[key]
	if !ok {
		return nil, 0, errNotFound
	}
	return []byte(v), f.versions[key], nil
}

func (f *fakeStore) read(_ context.Context, key string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.data[key]
	return v, ok, nil
}

// runWorkload drives store for d with ledger values of valueSize bytes and returns the workload.
func runWorkload(t *testing.T, store *fakeStore, d time.Duration, valueSize int) *Workload {
	t.Helper()
	var calls atomic.Int64
	w := &Workload{
		Clients:     8,
		Registers:   4,
		LedgerShare: 0.3,
		ValueSize:   valueSize,
		CallTimeout: time.Second,
		Seed:        42,
		Target: func(int) Target {
			if calls.Add(1)%50 == 0 {
				return nil // no node available now and then
			}
			return store
		},
		Classify: Classifier{
			IsNotFound:       func(err error) bool { return errors.Is(err, errNotFound) },
			DefinitelyFailed: func(err error) bool { return errors.Is(err, errRefused) },
			IsMismatch:       func(err error) bool { return errors.Is(err, errMismatch) },
		},
		History: &History{},
		Ledger:  &Ledger{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	w.Run(ctx)
	return w
}

func TestWorkloadHealthyStore(t *testing.T) {
	for _, size := range []int{0, 1024} {
		store := newFakeStore(true, 0)
		w := runWorkload(t, store, 200*time.Millisecond, size)
		ops := w.History.Ops()
		if len(ops) < 100 {
			t.Fatalf("only %d ops in 200ms", len(ops))
		}
		checkOpShapes(t, ops, size)
		checkCounts(t, w, ops)
		if n := w.Outcomes(); n["cas OK"] == 0 || n["cas Mismatch"] == 0 {
			t.Fatalf("want swapped and mismatched cas: %v", n)
		}
		if lin := CheckLinearizable(ops, 3*time.Second); !lin.Ok || lin.FalseNotFound != 0 {
			t.Fatalf("healthy store not linearizable: %+v", lin)
		}
		if p := Phantoms(ops); len(p) > 0 {
			t.Fatalf("healthy store has phantoms: %+v", p[0])
		}
		res := w.Ledger.Verify(context.Background(), store.read)
		if res.Acked == 0 || res.Lost != 0 || res.Phantom != 0 || res.Unreadable != 0 {
			t.Fatalf("healthy store ledger with %d-byte values: %+v", size, res)
		}
	}
}

func TestWorkloadLossyStore(t *testing.T) {
	store := newFakeStore(false, 7)
	w := runWorkload(t, store, 200*time.Millisecond, 1024)
	res := w.Ledger.Verify(context.Background(), store.read)
	lin := CheckLinearizable(w.History.Ops(), 3*time.Second)
	if res.Lost == 0 || len(res.LostKeys) == 0 {
		t.Errorf("lossy store lost nothing: ledger %+v", res)
	}
	if lin.Ok {
		t.Errorf("lossy store linearizable: %+v", lin)
	}
}

// checkOpShapes checks keys and values follow the documented naming, ledger values being valueSize bytes.
func checkOpShapes(t *testing.T, ops []Op, valueSize int) {
	t.Helper()
	seen := map[string]bool{}
	for _, op := range ops {
		switch {
		case strings.HasPrefix(op.Key, "ledger-"):
			if op.Kind != Put || op.Value != LedgerValue(op.Key, valueSize) || len(op.Value) < valueSize {
				t.Fatalf("bad ledger op %+v", op)
			}
		case op.Key >= "reg-0" && op.Key <= "reg-3" && len(op.Key) == 5:
		default:
			t.Fatalf("unexpected key in %+v", op)
		}
		if isWrite(op.Kind) {
			if seen[op.Value] {
				t.Fatalf("value %q written twice", op.Value)
			}
			seen[op.Value] = true
		}
	}
}

// checkCounts checks the workload's counters agree with its history.
func checkCounts(t *testing.T, w *Workload, ops []Op) {
	t.Helper()
	want := map[string]int{}
	for _, op := range ops {
		want[op.Kind.String()+" "+op.Outcome.String()]++
	}
	got := w.Outcomes()
	if len(got) != len(want) {
		t.Fatalf("Outcomes = %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("Outcomes = %v, want %v", got, want)
		}
	}
}

func TestWorkloadPadsLedgerValues(t *testing.T) {
	w := &Workload{Clients: 2, LedgerShare: 1, ValueSize: 256, Seed: 1, Target: func(int) Target { return newFakeStore(false, 0) },
		History: &History{}, Ledger: &Ledger{}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	w.Run(ctx)
	ops := w.History.Ops()
	if len(ops) == 0 {
		t.Fatal("no ledger writes")
	}
	for _, op := range ops {
		if op.Value != LedgerValue(op.Key, 256) {
			t.Fatalf("ledger write %s carries %.20q..., want its padded value", op.Key, op.Value)
		}
	}
}
