package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/internal/ports"
)

// TestFormationServesAtOnce starts fresh clusters of 3 zaris processes (ZARIS_FORMATION=1; the number of
// starts in ZARIS_FORMATION_STARTS, 20 by default), every other one with the process joined through started
// last, and times each from the last process's start until every process has served a write and a read of
// its own key over RESP, following MOVED as a cluster client does.
// It fails when a start takes a second or more, and logs every figure.
func TestFormationServesAtOnce(t *testing.T) {
	if os.Getenv("ZARIS_FORMATION") == "" {
		t.Skip("set ZARIS_FORMATION=1 to time fresh starts of 3 processes")
	}
	starts := 20
	if s := os.Getenv("ZARIS_FORMATION_STARTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("ZARIS_FORMATION_STARTS=%q", s)
		}
		starts = n
	}
	bin := os.Getenv("ZARIS_FORMATION_BINARY") // another build to compare with; this package's by default
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "zaris")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
	}
	redis.SetLogger(quietRedis{})
	var times []time.Duration
	for i := range starts {
		d, err := formOnce(t, bin, i%2 == 1)
		if err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
		times = append(times, d)
	}
	var figures []string
	for _, d := range times {
		figures = append(figures, strconv.FormatInt(d.Milliseconds(), 10))
	}
	worst := slices.Max(times)
	t.Logf("every node served after (ms, from the last start): %s; max %v", strings.Join(figures, " "), worst.Round(time.Millisecond))
	if worst >= time.Second {
		t.Errorf("a start took %v until every node served, want under 1s", worst.Round(time.Millisecond))
	}
}

// formOnce starts 3 processes as the README does, the first without --join and the others joining through
// it, and returns how long after the last start every one of them served a write and a read. With seedLast,
// the one joined through starts last, as processes started together may come up in any order.
func formOnce(t *testing.T, bin string, seedLast bool) (time.Duration, error) {
	p, err := ports.Free(9)
	if err != nil {
		return 0, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(p[i]) }
	var procs []*exec.Cmd
	defer func() {
		for _, c := range procs {
			c.Process.Kill()
			c.Wait()
		}
	}()
	logs, err := os.MkdirTemp("", "zaris-formation-")
	if err != nil {
		return 0, err
	}
	order := []int{0, 1, 2}
	if seedLast {
		order = []int{1, 2, 0}
	}
	for _, i := range order {
		args := []string{"--name", fmt.Sprintf("n%d", i+1), "--resp-addr", addr(3 * i), "--gossip-addr", addr(3*i + 1),
			"--data-addr", addr(3*i + 2), "--bootstrap-expect", "3"}
		if i > 0 {
			args = append(args, "--join", addr(1))
		}
		c := exec.Command(bin, args...)
		out, err := os.Create(filepath.Join(logs, fmt.Sprintf("n%d.log", i+1)))
		if err != nil {
			return 0, err
		}
		defer out.Close()
		c.Stdout, c.Stderr = out, out
		if err := c.Start(); err != nil {
			return 0, err
		}
		procs = append(procs, c)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	served := make([]time.Duration, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			errs[i] = awaitServes(ctx, addr(3*i), fmt.Sprintf("formation:%d", i))
			served[i] = time.Since(start)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("%w (logs in %s)", err, logs)
	}
	took := slices.Max(served)
	if took >= time.Second {
		t.Logf("nodes served after %v: the processes' logs are in %s", served, logs)
	} else {
		os.RemoveAll(logs)
	}
	return took, nil
}

// awaitServes writes key through the node at addr and reads it back, following MOVED, until both succeed
// or ctx ends.
func awaitServes(ctx context.Context, addr, key string) error {
	var last error
	for ctx.Err() == nil {
		if last = writeRead(ctx, addr, key); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
	return fmt.Errorf("not served: %w", last)
}

func writeRead(ctx context.Context, addr, key string) error {
	if err := redirected(ctx, addr, func(c *redis.Client) error { return c.Set(ctx, key, addr, 0).Err() }); err != nil {
		return err
	}
	return redirected(ctx, addr, func(c *redis.Client) error {
		got, err := c.Get(ctx, key).Result()
		if err == nil && got != addr {
			return fmt.Errorf("read %q, wrote %q", got, addr)
		}
		return err
	})
}

// redirected runs do against the node at addr, and once more against the node a MOVED reply names.
func redirected(ctx context.Context, addr string, do func(*redis.Client) error) error {
	for range 2 {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		err := do(c)
		c.Close()
		var moved redis.Error
		if err == nil || !errors.As(err, &moved) || !strings.HasPrefix(err.Error(), "MOVED ") {
			return err
		}
		fields := strings.Fields(err.Error())
		if len(fields) != 3 {
			return err
		}
		addr = fields[2]
	}
	return errors.New("redirected twice")
}

// quietRedis drops the client's log lines: refused dials are expected while the processes start.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// TestJoinRetriesAtOnceAndOften checks the pauses of a node that starts before the member it joins through
// listens, as when the nodes of a new cluster are started together: it tries again within joinRetryFirst,
// and the pauses grow to joinRetryMax and no further.
func TestJoinRetriesAtOnceAndOften(t *testing.T) {
	const failures = 40
	var pauses []time.Duration
	tries := 0
	node, err := retryJoin(context.Background(), joinRetry{
		addrs: []string{"127.0.0.1:1"}, timeout: time.Hour, log: slog.New(slog.DiscardHandler),
		join: func() (*zaris.Node, error) {
			if tries++; tries <= failures {
				return nil, errors.New("connection refused")
			}
			return nil, nil
		},
		await: func(_ context.Context, d time.Duration) error { pauses = append(pauses, d); return nil },
	})
	if err != nil || node != nil {
		t.Fatalf("retryJoin = %v, %v; want the try that succeeded", node, err)
	}
	if tries != failures+1 || len(pauses) != failures {
		t.Fatalf("%d tries and %d pauses, want %d and %d", tries, len(pauses), failures+1, failures)
	}
	if pauses[0] > 20*time.Millisecond {
		t.Errorf("first pause %v: nodes started together wait that long for the one they join through", pauses[0])
	}
	if last := pauses[len(pauses)-1]; last != joinRetryMax {
		t.Errorf("last pause %v, want joinRetryMax", last)
	}
	for i, d := range pauses {
		if d <= 0 || d > joinRetryMax {
			t.Errorf("pause %d is %v, want (0, %v]", i+1, d, joinRetryMax)
		}
	}
}

// TestJoinPauseEndsWhenTheSeedListens checks that a pause between two tries of a join ends as soon as the
// member joined through accepts connections, and lasts its whole length while it does not, or while it
// already did when the pause began (the join failed for another reason).
func TestJoinPauseEndsWhenTheSeedListens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var up atomic.Bool
	probes := make(chan struct{}, 1)
	listening := func() bool { signalProbe(probes); return up.Load() }

	for _, already := range []bool{false, true} {
		up.Store(already)
		start := time.Now()
		if err := awaitListening(ctx, 50*time.Millisecond, time.Millisecond, listening); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < 50*time.Millisecond {
			t.Errorf("listening from the start %v: the pause ended after %v, want 50ms", already, waited)
		}
	}

	up.Store(false)
	woke := make(chan error, 1)
	go func() { woke <- awaitListening(ctx, time.Hour, time.Millisecond, listening) }()
	<-probes // the first probe, which may not have read up yet
	<-probes // a later one: the first found nothing listening
	up.Store(true)
	if err := <-woke; err != nil { // an hour's pause: only the seed's start ends it before the minute is up
		t.Fatalf("the pause ended with %v, want it to end once the seed listens", err)
	}
}

// signalProbe notes a probe in ch, a channel of capacity one.
func signalProbe(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// TestAnyListening checks the probe of the members to join through against a listener and a closed port.
func TestAnyListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ports.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	closed := "127.0.0.1:" + strconv.Itoa(p[0])
	ctx := context.Background()
	if !anyListening(ctx, []string{closed, ln.Addr().String()}, time.Second) {
		t.Error("a listener was not found")
	}
	ln.Close()
	if anyListening(ctx, []string{closed, ln.Addr().String()}, time.Second) {
		t.Error("closed ports were found listening")
	}
}

// TestJoinRetryStops checks that a join fails for good on a configuration error, with nothing to join
// through, and once the context ends.
func TestJoinRetryStops(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		addrs []string
		err   error
	}{
		{"invalid config", []string{"127.0.0.1:1"}, zaris.ErrInvalidConfig},
		{"cluster mismatch", []string{"127.0.0.1:1"}, zaris.ErrClusterMismatch},
		{"no address to join", nil, errors.New("refused")},
	} {
		tries := 0
		_, err := retryJoin(context.Background(), joinRetry{addrs: tc.addrs, timeout: time.Hour, log: quiet,
			join:  func() (*zaris.Node, error) { tries++; return nil, tc.err },
			await: func(context.Context, time.Duration) error { return nil }})
		if !errors.Is(err, tc.err) || tries != 1 {
			t.Errorf("%s: %d tries, err %v; want 1 try and %v", tc.name, tries, err, tc.err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := retryJoin(ctx, joinRetry{addrs: []string{"127.0.0.1:1"}, timeout: time.Hour, log: quiet,
		join: func() (*zaris.Node, error) { return nil, errors.New("refused") },
		await: func(ctx context.Context, d time.Duration) error {
			return awaitListening(ctx, d, d, func() bool { return false })
		}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("after the context ended: %v, want context.Canceled", err)
	}
}
