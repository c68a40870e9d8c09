package zaris

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// putKeys writes keys through n in batches and fails the test on any error.
func putKeys(t testing.TB, ctx context.Context, n *Node, keys []string) {
	t.Helper()
	for start := 0; start < len(keys); start += 500 {
		var entries []KeyValue
		for _, k := range keys[start:min(start+500, len(keys))] {
			entries = append(entries, KeyValue{Key: k, Value: []byte("v:" + k)})
		}
		results, err := n.PutMany(ctx, entries)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Err != nil {
				t.Fatalf("put %s: %v", r.Key, r.Err)
			}
		}
	}
}

// TestScanFollowsJoinAndFailover scans a cluster while a node joins (its partitions move to it) and
// another is killed (its partitions fail over), with writes of other keys going on throughout. Every key
// written before the scan must come at least once, and no key that was never written may come.
func TestScanFollowsJoinAndFailover(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	c.waitHealthy(20 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 3000
	before := numberedKeys("before:", n)
	scanner := c.leaderNode()
	putKeys(t, ctx, scanner, before)

	victim, writer := -1, (*Node)(nil)
	for i, node := range c.live() {
		switch {
		case node == scanner:
		case victim < 0:
			victim = i
		default:
			writer = node
		}
	}
	victimID := c.node(victim).id

	// Writes of keys of their own go on during the scan, through a node that is neither the scanner nor the
	// victim; every key tried is recorded before its write.
	var mu sync.Mutex
	tried := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprintf("during:%d", i)
			mu.Lock()
			tried[k] = true
			mu.Unlock()
			wctx, wcancel := context.WithTimeout(ctx, time.Second)
			writer.Put(wctx, k, []byte("v")) // may fail while partitions fail over: the key is tried all the same
			wcancel()
		}
	})

	seen := map[string]int{}
	yielded, joined, killed := 0, false, false
	var retriesAtKill uint64
	for key, err := range scanner.Scan(ctx, ScanCount(20)) {
		if err != nil {
			t.Fatalf("scan after %d keys: %v", yielded, err)
		}
		seen[key]++
		yielded++
		switch {
		case !joined && yielded >= n/4:
			c.add(1)
			joined = true
		case !killed && yielded >= n/2:
			retriesAtKill = scanner.stats.retries.Load()
			c.kill(victim)
			killed = true
		}
	}
	close(stop)
	wg.Wait()
	if !joined || !killed {
		t.Fatalf("the scan ended after %d keys, before the join and the kill", yielded)
	}
	if c.currentMap().OwnedBy(victimID) > 0 {
		c.waitFailedOver(victimID, 20*time.Second)
	}
	for _, node := range c.live() {
		checkTable(t, string(node.id), node.own.store)
	}

	got, duplicates, during := 0, 0, 0
	for _, k := range before {
		if seen[k] > 0 {
			got++
		}
	}
	for k, times := range seen {
		duplicates += times - 1
		switch {
		case strings.HasPrefix(k, "before:"):
		case tried[k]:
			during++
		default:
			t.Errorf("the scan returned %q, which was never written", k)
		}
	}
	retried := scanner.stats.retries.Load() - retriesAtKill
	t.Logf("expected %d keys written before the scan, got %d distinct; %d duplicates; %d keys written during it; "+
		"%d pages retried after the kill", n, got, duplicates, during, retried)
	if retried == 0 {
		t.Error("no page went again after the kill: the scan did not meet the dead owner")
	}
	if got != n {
		for _, k := range before {
			if seen[k] == 0 {
				t.Errorf("key %q (slot %d) missing", k, KeySlot(k))
			}
		}
		t.Fatalf("expected %d keys, got %d distinct", n, got)
	}
}

// TestScanMatchAcrossNodes scans a three-node cluster with a pattern from each node: every node sees every
// matching key exactly once, and none other.
func TestScanMatchAcrossNodes(t *testing.T) {
	c := startCluster(t, 3, nil)
	ctx := bg(t)
	users, orders := numberedKeys("user:", 1000), numberedKeys("order:", 1000)
	putKeys(t, ctx, c.node(0), append(append([]string(nil), users...), orders...))
	for _, node := range c.live() {
		seen := map[string]int{}
		for key, err := range node.Scan(ctx, ScanMatch("user:*"), ScanCount(64)) {
			if err != nil {
				t.Fatal(err)
			}
			seen[key]++
		}
		checkEachOnce(t, seen, users)
	}
	// Breaking out of the loop stops the scan.
	count := 0
	for _, err := range c.node(1).Scan(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if count++; count == 10 {
			break
		}
	}
	if count != 10 {
		t.Fatalf("stopped after %d keys; want 10", count)
	}
}
