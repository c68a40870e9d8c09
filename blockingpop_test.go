package zaris

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBLPopDeliversEachItemOnce has 30 callers wait in BLPop on one list through the two nodes that do not
// own it, pushes 400 items through one of them, and kills the list's owner half way. Counted: no item
// reaches two callers, and every item pushed reaches one, but for as many as pops failed unconfirmed.
func TestBLPopDeliversEachItemOnce(t *testing.T) {
	longScenario(t)
	t.Parallel()
	const list, callers, items = "{jobs}queue", 30, 400
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	owner := c.owner(list)
	var others []*Node
	for _, n := range c.live() {
		if n != owner {
			others = append(others, n)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	received := make(chan string, items+callers)
	var unconfirmed, retried atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		n := others[i%len(others)]
		wg.Go(func() {
			for {
				_, item, err := n.BLPop(ctx, "{jobs}empty", list)
				switch {
				case errors.Is(err, ErrUnconfirmed):
					unconfirmed.Add(1)
					continue
				case err != nil && ctx.Err() == nil:
					if retried.Add(1) == 1 {
						t.Logf("first error: %v", err)
					}
					continue
				case err != nil:
					t.Errorf("caller %d: %v", i, err)
					return
				}
				received <- string(item)
				if string(item) == "stop" {
					return
				}
			}
		})
	}
	push := func(item string) {
		for {
			_, err := others[0].RPush(ctx, list, []byte(item))
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("push %s: %v", item, err)
			}
		}
	}
	seen := map[string]int{}
	for i := range items / 2 {
		push(strconv.Itoa(i))
	}
	for range items / 2 {
		seen[<-received]++
	}
	c.kill(c.indexOf(owner.id))
	for i := items / 2; i < items; i++ {
		push(strconv.Itoa(i))
	}
	for range callers {
		push("stop")
	}
	wg.Wait()
	close(received)
	for item := range received {
		seen[item]++
	}
	missing := 0
	for i := range items {
		switch n := seen[strconv.Itoa(i)]; {
		case n > 1:
			t.Errorf("item %d reached %d callers", i, n)
		case n == 0:
			missing++
		}
	}
	if missing > int(unconfirmed.Load()) || seen["stop"] > callers {
		t.Errorf("%d items reached no caller, %d stops of %d; %d pops failed unconfirmed", missing, seen["stop"], callers, unconfirmed.Load())
	}
	t.Logf("%d items, %d reached no caller; %d pops unconfirmed, %d tried again after an error", items, missing, unconfirmed.Load(), retried.Load())
}

// TestBLPopWaitsForAPushAndEnds checks BLPop's edges on one node: an item pushed while it waits is
// returned with its key, keys are tried in order, a key of another kind fails with ErrWrongType, no key is
// refused, and a wait ends with its context.
func TestBLPopWaitsForAPushAndEnds(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	n := c.node(0)
	ctx := bg(t)
	got := make(chan string, 1)
	go func() {
		key, item, err := n.BRPop(ctx, "a", "b")
		if err != nil {
			got <- err.Error()
			return
		}
		got <- key + "=" + string(item)
	}()
	waitFor(t, 10*time.Second, "the caller watching its keys", func() bool { return n.client.pops.watched() == 2 })
	if _, err := n.RPush(ctx, "b", []byte("1"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != "b=2" {
		t.Fatalf("BRPop = %s, want b=2", g)
	}
	if _, err := n.RPush(ctx, "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if key, item, err := n.BLPop(ctx, "a", "b"); err != nil || key != "a" || string(item) != "x" {
		t.Fatalf("BLPop = %s, %s, %v; want a, x", key, item, err)
	}
	if err := n.Put(ctx, "s", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.BLPop(ctx, "none", "s", "b"); !errors.Is(err, ErrWrongType) {
		t.Fatalf("BLPop of a string: %v, want ErrWrongType", err)
	}
	if _, _, err := n.BLPop(ctx); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("BLPop of no key: %v, want ErrInvalidRequest", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := n.BLPop(short, "none"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("BLPop of an empty list: %v, want the context's deadline", err)
	}
}

// TestBLPopCallersShareAWatch has 50 callers of one node wait on one list while its owner serves at most
// 2 watchers: they share one watch, and each of 50 items pushed reaches one of them.
func TestBLPopCallersShareAWatch(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, func(cfg *Config) { cfg.MaxWatchers = 2 })
	n := c.node(0)
	ctx := bg(t)
	const callers = 50
	got := make(chan string, callers)
	for range callers {
		go func() {
			_, item, err := n.BLPop(ctx, "q")
			if err != nil {
				got <- err.Error()
				return
			}
			got <- string(item)
		}()
	}
	waitFor(t, 10*time.Second, "the callers waiting", func() bool { return n.client.pops.waiting("q") == callers })
	if w := n.client.pops.watched(); w != 1 {
		t.Fatalf("%d keys watched for %d callers of one key", w, callers)
	}
	for i := range callers {
		if _, err := n.RPush(ctx, "q", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for range callers {
		item := <-got
		if _, err := strconv.Atoi(item); err != nil || seen[item] {
			t.Fatalf("a caller got %q (seen before: %v)", item, seen[item])
		}
		seen[item] = true
	}
	waitFor(t, 10*time.Second, "the shared watch ended with its last caller", func() bool { return n.client.pops.watched() == 0 })
}
