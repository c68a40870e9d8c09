package zaris

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestPopsDeliverEachItemOnce pops a set, a sorted set and a list from every node of three at once, the
// list by LMove onto a second list, and counts: no item reaches two callers, every item reaches one but
// those a pop answered ErrUnconfirmed may have taken (its owner changed before the replicas confirmed,
// which a starved machine brings about), the sorted set's members come out of each ZPopMin in score
// order, and the moved list holds every item once whatever the callers were told.
func TestPopsDeliverEachItemOnce(t *testing.T) {
	t.Parallel()
	const items, callersPerNode = 600, 4
	c := startCluster(t, 3, replicated(2))
	c.waitStable(10 * time.Second)
	ctx := bg(t)
	n0 := c.node(0)
	var members []string
	var scored []ZMember
	var listed [][]byte
	for i := range items {
		members = append(members, strconv.Itoa(i))
		scored = append(scored, ZMember{Member: strconv.Itoa(i), Score: float64(i)})
		listed = append(listed, []byte(strconv.Itoa(i)))
	}
	if _, err := served(t, func() (int, error) { return n0.SAdd(ctx, "pops:set", members...) }); err != nil {
		t.Fatal(err)
	}
	if _, err := served(t, func() (int, error) { return n0.ZAdd(ctx, "pops:zset", scored...) }); err != nil {
		t.Fatal(err)
	}
	if _, err := served(t, func() (int, error) { return n0.RPush(ctx, "{q}pending", listed...) }); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	got := map[string][]string{}    // per collection, the items callers received
	unconfirmed := map[string]int{} // per collection, the items unconfirmed pops may have taken
	record := func(kind string, item string) {
		mu.Lock()
		got[kind] = append(got[kind], item)
		mu.Unlock()
	}
	outcome := func(kind string, asked, popped int, err error) (empty int) {
		if errors.Is(err, ErrUnconfirmed) {
			mu.Lock()
			unconfirmed[kind] += asked
			mu.Unlock()
			return 0
		}
		return countEmpty(t, popped, err)
	}
	var wg sync.WaitGroup
	for i := range 3 * callersPerNode {
		n := c.node(i % 3)
		wg.Go(func() {
			for done := 0; done < 3; {
				done = 0
				popped, err := n.SPop(ctx, "pops:set", 1+i%3)
				for _, m := range popped {
					record("set", m)
				}
				done += outcome("set", 1+i%3, len(popped), err)
				zpopped, err := n.ZPopMin(ctx, "pops:zset", 1+i%2)
				for j, m := range zpopped {
					if j > 0 && m.Score < zpopped[j-1].Score {
						t.Errorf("ZPopMin answered %v: not in score order", zpopped)
					}
					record("zset", m.Member)
				}
				done += outcome("zset", 1+i%2, len(zpopped), err)
				item, err := n.LMove(ctx, "{q}pending", "{q}running", true, false)
				if errors.Is(err, ErrNotFound) {
					done++
					continue
				}
				if errors.Is(err, ErrUnconfirmed) {
					outcome("list", 1, 0, err)
					continue
				}
				if err != nil {
					t.Errorf("LMove: %v", err)
					return
				}
				record("list", string(item))
			}
		})
	}
	wg.Wait()
	for _, kind := range []string{"set", "zset", "list"} {
		checkOnce(t, kind, got[kind], members, unconfirmed[kind])
	}
	running, err := n0.LRange(ctx, "{q}running", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	checkOnce(t, "the moved list", stringsOf(running), members, 0)
	if n := unconfirmed["set"] + unconfirmed["zset"] + unconfirmed["list"]; n > 0 {
		t.Logf("pops answered ErrUnconfirmed, for up to %d items", n)
	}
}

// countEmpty reports 1 when a pop found nothing, failing the test on an error.
func countEmpty(t *testing.T, popped int, err error) int {
	t.Helper()
	if err != nil {
		t.Errorf("pop: %v", err)
		return 1
	}
	if popped == 0 {
		return 1
	}
	return 0
}

// checkOnce checks that got holds items of want only, none twice, and all of them but at most maybeLost.
func checkOnce(t *testing.T, what string, got, want []string, maybeLost int) {
	t.Helper()
	wanted := map[string]bool{}
	for _, w := range want {
		wanted[w] = true
	}
	seen := map[string]int{}
	twice, foreign := 0, 0
	for _, g := range got {
		if seen[g]++; seen[g] == 2 {
			twice++
		}
		if !wanted[g] {
			foreign++
		}
	}
	if missing := len(wanted) - (len(seen) - foreign); twice > 0 || foreign > 0 || missing > maybeLost {
		t.Errorf("%s: %d items received, %d of them more than once, %d never stored, %d missing; want each of %d once (up to %d missing)",
			what, len(got), twice, foreign, missing, len(want), maybeLost)
	}
}

// TestHSetNXSetsOnce has callers on every node race to set one field: exactly one of them sets it, and
// the field holds that caller's value.
func TestHSetNXSetsOnce(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2))
	c.waitStable(10 * time.Second)
	ctx := bg(t)
	var mu sync.Mutex
	var winners []string
	var wg sync.WaitGroup
	for i := range 30 {
		n := c.node(i % 3)
		wg.Go(func() {
			value := fmt.Sprintf("caller-%d", i)
			set, err := n.HSetNX(ctx, "locks", "leader", []byte(value))
			if err != nil {
				t.Errorf("HSetNX: %v", err)
				return
			}
			if set {
				mu.Lock()
				winners = append(winners, value)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d callers set the field: %v", len(winners), winners)
	}
	held, err := c.node(1).HGet(ctx, "locks", "leader")
	if err != nil || string(held) != winners[0] {
		t.Fatalf("the field holds %q, %v; want the winner's %q", held, err, winners[0])
	}
	keys, err := c.node(2).HKeys(ctx, "locks")
	values, err2 := c.node(2).HVals(ctx, "locks")
	if err != nil || err2 != nil || !slices.Equal(keys, []string{"leader"}) || len(values) != 1 || string(values[0]) != winners[0] {
		t.Fatalf("HKeys %v, %v; HVals %q, %v", keys, err, values, err2)
	}
}

// TestLMoveRefusesKeysOfTwoSegments: the Go API refuses keys without a shared hash tag before sending.
func TestLMoveRefusesKeysOfTwoSegments(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	n := c.node(0)
	src, dst := "a", "b"
	for i := 0; n.layout.KeySegment(src) == n.layout.KeySegment(dst); i++ {
		dst = "b" + strconv.Itoa(i)
	}
	if _, err := n.LMove(bg(t), src, dst, true, true); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("LMove across segments: %v, want ErrInvalidRequest", err)
	}
	if _, err := n.LPush(bg(t), "{t}a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ZAdd(bg(t), "{t}z", ZMember{Member: "m", Score: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.LMove(bg(t), "{t}a", "{t}z", true, true); !errors.Is(err, ErrWrongType) {
		t.Fatalf("LMove onto a sorted set: %v, want ErrWrongType", err)
	}
	if left, err := n.LRange(bg(t), "{t}a", 0, -1); err != nil || len(left) != 1 {
		t.Fatalf("the source after a refused move: %q, %v; want its one item", left, err)
	}
	top, err := n.ZRevRange(bg(t), "{t}z", 0, 0)
	if err != nil || len(top) != 1 || top[0].Member != "m" {
		t.Fatalf("ZRevRange: %v, %v", top, err)
	}
}
