package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
