package zaris

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// countingLoader loads "v:"+key after pause, counting its calls per key; fail, when set, decides a call's
// error.
type countingLoader struct {
	pause time.Duration
	mu    sync.Mutex
	calls map[string]int
	fail  func(key string, call int) error
}

func (l *countingLoader) load(ctx context.Context, key string) ([]byte, time.Duration, error) {
	l.mu.Lock()
	if l.calls == nil {
		l.calls = map[string]int{}
	}
	l.calls[key]++
	call := l.calls[key]
	fail := l.fail
	l.mu.Unlock()
	if l.pause > 0 {
		select {
		case <-time.After(l.pause):
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	if fail != nil {
		if err := fail(key, call); err != nil {
			return nil, 0, err
		}
	}
	return []byte("v:" + key), time.Hour, nil
}

func (l *countingLoader) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[key]
}

func (l *countingLoader) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		n += c
	}
	return n
}

// startLoaderCluster starts 3 nodes that load with l, keeping two copies of each partition.
func startLoaderCluster(t *testing.T, l *countingLoader, tweak func(*Config)) *testCluster {
	return startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.Loader = l.load
		cfg.FailoverTimeout = time.Second
		if tweak != nil {
			tweak(cfg)
		}
	}))
}

// TestLoaderOneLoadPerKey checks by counting that 300 concurrent Gets of one cold key from every node
// call the loader once, and that each gets the value, stored with its TTL and replicated: after its owner
// is killed, the new owner serves it without loading again.
func TestLoaderOneLoadPerKey(t *testing.T) {
	t.Parallel()
	l := &countingLoader{pause: 100 * time.Millisecond}
	c := startLoaderCluster(t, l, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for i := range 300 {
		n := c.live()[i%3]
		wg.Go(func() {
			v, err := n.Get(ctx, "cold")
			if err != nil || string(v) != "v:cold" {
				wrong.Add(1)
				t.Errorf("Get: %q, %v", v, err)
			}
		})
	}
	wg.Wait()
	if calls := l.count("cold"); calls != 1 || wrong.Load() != 0 {
		t.Fatalf("loader called %d times for 300 concurrent Gets (want 1); %d Gets wrong", calls, wrong.Load())
	}
	e, err := c.node(0).GetEntry(ctx, "cold")
	if err != nil || e.TTL <= 59*time.Minute {
		t.Fatalf("GetEntry after the load: %+v, %v; want the loader's TTL", e, err)
	}
	owner, other := ownerOf(c, "cold")
	if s := owner.LoaderStats(); s.Loads != 1 || s.Failures != 0 {
		t.Fatalf("owner's loader stats %+v, want one load", s)
	}
	for i := range 3 {
		if c.node(i) == owner {
			c.kill(i)
		}
	}
	c.waitFailedOver(owner.id, 20*time.Second)
	if v, err := other.Get(ctx, "cold"); err != nil || string(v) != "v:cold" {
		t.Fatalf("Get after failover: %q, %v", v, err)
	}
	if calls := l.count("cold"); calls != 1 {
		t.Fatalf("loader called %d times after failover; the replicated value should have served", calls)
	}
}

// TestLoaderErrors checks that a load's error reaches every caller waiting for it, with its text, and
// is not stored: the next Get loads again. A loader's ErrNotFound is a miss, remembered for
// LoaderNegativeTTL; a panicking loader is an error, and the node keeps serving.
func TestLoaderErrors(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	l := &countingLoader{fail: func(key string, call int) error {
		switch {
		case key == "flaky" && call == 1:
			<-release // until every Get waits for this load
			return errors.New("backend down\r\nfor now")
		case strings.HasPrefix(key, "none"):
			return fmt.Errorf("lookup: %w", ErrNotFound)
		case key == "boom":
			panic("loader bug")
		}
		return nil
	}}
	huge := &countingLoader{}
	c := startLoaderCluster(t, l, func(cfg *Config) {
		cfg.LoaderNegativeTTL = time.Hour
		cfg.MaxValueSize = 64
		load := cfg.Loader
		cfg.Loader = func(ctx context.Context, key string) ([]byte, time.Duration, error) {
			if key == "huge" {
				huge.load(ctx, key)
				return make([]byte, 65), 0, nil
			}
			return load(ctx, key)
		}
	})
	ctx := context.Background()

	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 30 {
		n := c.live()[i%3]
		wg.Go(func() {
			if _, err := n.Get(ctx, "flaky"); errors.Is(err, ErrLoadFailed) && strings.Contains(err.Error(), "backend down  for now") {
				failed.Add(1)
			} else {
				t.Errorf("Get during the failing load: %v", err)
			}
		})
	}
	owner := c.owner("flaky")
	waitFor(t, 10*time.Second, "every Get to wait for the failing load", func() bool { return owner.LoaderStats().Waiting == 30 })
	close(release)
	wg.Wait()
	if l.count("flaky") != 1 || failed.Load() != 30 {
		t.Fatalf("%d calls, %d of 30 Gets failed with the loader's error", l.count("flaky"), failed.Load())
	}
	if v, err := c.node(1).Get(ctx, "flaky"); err != nil || string(v) != "v:flaky" || l.count("flaky") != 2 {
		t.Fatalf("Get after the failure: %q, %v, %d calls; want a second load", v, err, l.count("flaky"))
	}

	for range 3 {
		if _, err := c.node(2).Get(ctx, "none"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of a key the loader does not know: %v", err)
		}
	}
	if calls := l.count("none"); calls != 1 {
		t.Fatalf("loader called %d times for a key it said is missing, within LoaderNegativeTTL", calls)
	}

	if _, err := c.node(1).Get(ctx, "huge"); !errors.Is(err, ErrLoadFailed) || huge.count("huge") != 1 {
		t.Fatalf("Get of a key loaded over MaxValueSize: %v", err)
	}
	if _, err := c.node(0).Get(ctx, "boom"); !errors.Is(err, ErrLoadFailed) || !strings.Contains(err.Error(), "loader bug") {
		t.Fatalf("Get with a panicking loader: %v", err)
	}
	if err := c.node(0).Put(ctx, "boom", []byte("x")); err != nil {
		t.Fatalf("Put after the loader panicked: %v", err)
	}
	if v, err := c.node(1).Get(ctx, "boom"); err != nil || string(v) != "x" {
		t.Fatalf("Get after the loader panicked: %q, %v", v, err)
	}
}

// TestLoaderGetMany checks that GetMany of 10,000 cold keys loads each exactly once, and that a batch's
// get of a key it also writes is not loaded.
func TestLoaderGetMany(t *testing.T) {
	t.Parallel()
	l := &countingLoader{}
	c := startLoaderCluster(t, l, nil)
	ctx := context.Background()
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("many:%d", i)
	}
	results, err := c.node(0).GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if r.Err != nil || string(r.Value) != "v:"+keys[r.Index] {
			t.Fatalf("item %d: %q, %v", i, r.Value, r.Err)
		}
	}
	if calls := l.total(); calls != len(keys) {
		t.Fatalf("loader called %d times for %d cold keys", calls, len(keys))
	}
	if _, err := c.node(1).GetMany(ctx, keys[:100]); err != nil || l.total() != len(keys) {
		t.Fatalf("GetMany again: %v, %d calls", err, l.total())
	}

	res, err := c.node(0).ExecuteBatch(ctx, []BatchItem{
		{Index: 0, Op: BatchGet, Key: "written"},
		{Index: 1, Op: BatchPut, Key: "written", Value: []byte("put")},
	})
	if err != nil || !errors.Is(res[0].Err, ErrNotFound) || res[1].Err != nil || l.count("written") != 0 {
		t.Fatalf("get then put of one key in a batch: %+v, %v, %d loads", res, err, l.count("written"))
	}
}

// TestLoaderWriteDuringLoad checks that a value written while its key loads is kept: the loaded value
// never overwrites it.
func TestLoaderWriteDuringLoad(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	loading := make(chan struct{}, 1)
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.Loader = func(ctx context.Context, key string) ([]byte, time.Duration, error) {
			loading <- struct{}{}
			<-release
			return []byte("loaded"), 0, nil
		}
	})
	ctx := context.Background()
	got := make(chan string, 1)
	go func() {
		v, err := c.node(0).Get(ctx, "raced")
		got <- fmt.Sprintf("%s %v", v, err)
	}()
	<-loading
	if err := c.node(1).Put(ctx, "raced", []byte("written")); err != nil {
		t.Fatal(err)
	}
	close(release)
	if g := <-got; g != "written <nil>" {
		t.Fatalf("Get that loaded while a Put landed: %s, want the Put's value", g)
	}
	if v, err := c.node(2).Get(ctx, "raced"); err != nil || string(v) != "written" {
		t.Fatalf("value after the load: %q, %v", v, err)
	}
}

// TestLoaderRESP checks that a RESP GET of a missing key loads it, and a failed load answers an error on
// one line.
func TestLoaderRESP(t *testing.T) {
	t.Parallel()
	l := &countingLoader{fail: func(key string, _ int) error {
		if key == "bad" {
			return errors.New("no\nbackend")
		}
		return nil
	}}
	c := startRESPCluster(t, 3, func(cfg *Config) { cfg.Loader = l.load })
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.node(0).RESPAddr()}})
	defer rdb.Close()
	if v, err := rdb.Get(ctx, "resp-cold").Result(); err != nil || v != "v:resp-cold" {
		t.Fatalf("GET of a cold key: %q, %v", v, err)
	}
	if _, err := rdb.Get(ctx, "bad").Result(); err == nil || err.Error() != "ERR load failed: no backend" {
		t.Fatalf("GET with a failing loader: %v", err)
	}
	if l.count("resp-cold") != 1 {
		t.Fatalf("loader called %d times", l.count("resp-cold"))
	}
}

// TestLoaderOwnerKilledMidLoad checks that callers waiting on a load whose owner dies each get the value
// or an error, and that the key is loaded at most twice in all: once by the dead owner, once by the new.
func TestLoaderOwnerKilledMidLoad(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	started := make(chan struct{}, 8)
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.FailoverTimeout = time.Second
		cfg.Loader = func(ctx context.Context, key string) ([]byte, time.Duration, error) {
			if calls.Add(1) == 1 {
				started <- struct{}{}
				<-ctx.Done() // the first owner dies mid-load
				return nil, 0, ctx.Err()
			}
			return []byte("v:" + key), 0, nil
		}
	}))
	ctx := context.Background()
	owner := c.owner("orphan")
	var callers []*Node
	for _, n := range c.live() {
		if n != owner {
			callers = append(callers, n)
		}
	}
	var wg sync.WaitGroup
	for i := range 20 {
		n := callers[i%len(callers)]
		wg.Go(func() {
			v, err := n.Get(ctx, "orphan")
			if err == nil && string(v) != "v:orphan" {
				t.Errorf("Get while the owner died: %q", v)
			}
		})
	}
	<-started
	for i := range 3 {
		if c.node(i) == owner {
			c.kill(i)
		}
	}
	wg.Wait()
	c.waitFailedOver(owner.id, 20*time.Second)
	if v, err := callers[0].Get(ctx, "orphan"); err != nil || string(v) != "v:orphan" {
		t.Fatalf("Get at the new owner: %q, %v", v, err)
	}
	if n := calls.Load(); n > 2 {
		t.Fatalf("loader called %d times, want at most 2", n)
	}
}

// TestLoaderDeleteDuringLoad checks that a key deleted while it loads stays deleted: the load, older than
// the delete, stores nothing.
func TestLoaderDeleteDuringLoad(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	loading := make(chan struct{}, 1)
	var calls atomic.Int64
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.Loader = func(ctx context.Context, key string) ([]byte, time.Duration, error) {
			if calls.Add(1) == 1 {
				loading <- struct{}{}
				<-release
				return []byte("stale"), 0, nil
			}
			return []byte("fresh"), 0, nil
		}
	})
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := c.node(0).Get(ctx, "evicted")
		done <- err
	}()
	<-loading
	if err := c.node(1).Put(ctx, "evicted", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.node(2).Delete(ctx, "evicted"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get whose load was superseded: %v", err)
	}
	if v, err := c.node(1).Get(ctx, "evicted"); err != nil || string(v) != "fresh" {
		t.Fatalf("Get after the delete: %q, %v; want a new load, not the superseded one", v, err)
	}
}

// TestLoaderCallerGivesUp checks that a caller whose context ends while a load runs gets its context's
// error, on the owner's node as on any other.
func TestLoaderCallerGivesUp(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	c := startCluster(t, 2, func(cfg *Config) {
		cfg.Loader = func(ctx context.Context, key string) ([]byte, time.Duration, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return []byte("late"), 0, nil
		}
	})
	defer close(release)
	owner, other := ownerOf(c, "slow")
	for _, n := range []*Node{owner, other} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := n.Get(ctx, "slow")
			done <- err
		}()
		waitFor(t, 10*time.Second, "the load to start", func() bool { return owner.LoaderStats().Loads > 0 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Get on %s whose caller gave up: %v, want context.Canceled", n.Name(), err)
		}
	}
}
