package zaris

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkTxnCommit measures the commit of a transaction that writes four keys with 64-byte values, held
// by one segment (a hash tag: one round trip), or spread over two or four owners (two phases), against the
// same four writes as one batch. Four in-process nodes on loopback sockets, RF 2 under Sync; one commit at a
// time, from a node that owns none of the keys where it can.
func BenchmarkTxnCommit(b *testing.B) {
	c := startSocketCluster(b, 4, replicated(2, func(cfg *Config) { cfg.Dialer = nil }))
	ctx := context.Background()
	value := make([]byte, 64)
	for _, owners := range []int{1, 2, 4} {
		keys := benchTxnKeys(c, owners)
		b.Run(fmt.Sprintf("txn-owners-%d", owners), func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				err := c.node(0).Txn(ctx, func(tx *Tx) error {
					for _, key := range keys {
						if err := tx.Put(key, value); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			reportLatency(b, took)
		})
		b.Run(fmt.Sprintf("batch-owners-%d", owners), func(b *testing.B) {
			items := make([]KeyValue, len(keys))
			for i, key := range keys {
				items[i] = KeyValue{Key: key, Value: value}
			}
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				results, err := c.node(0).PutMany(ctx, items)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range results {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				took = append(took, time.Since(start))
			}
			reportLatency(b, took)
		})
	}
}

// benchTxnKeys returns four keys: of one segment for one owner, else spread evenly over that many owners.
func benchTxnKeys(c *testCluster, owners int) []string {
	if owners == 1 {
		return []string{"{bench}:a", "{bench}:b", "{bench}:c", "{bench}:d"}
	}
	var keys []string
	used := map[NodeID]int{}
	for i := 0; len(keys) < 4; i++ {
		key := "bench-txn-" + strconv.Itoa(i)
		id := c.owner(key).id
		if _, seen := used[id]; !seen && len(used) == owners || used[id] == 4/owners {
			continue
		}
		used[id]++
		keys = append(keys, key)
	}
	return keys
}

// BenchmarkTxnContention runs eight workers that each move one unit between two of hotKeys counters, spread
// over the owners of a 4-node cluster (RF 2, Sync), and reports the share of commits that conflicted.
func BenchmarkTxnContention(b *testing.B) {
	c := startSocketCluster(b, 4, replicated(2, func(cfg *Config) { cfg.Dialer = nil }))
	ctx := context.Background()
	for _, hotKeys := range []int{4, 64} {
		b.Run(fmt.Sprintf("keys-%d", hotKeys), func(b *testing.B) {
			key := func(i int) string { return "contended-" + strconv.Itoa(i) }
			for i := range hotKeys {
				if err := c.node(0).Put(ctx, key(i), []byte("0")); err != nil {
					b.Fatal(err)
				}
			}
			var commits, conflicts atomic.Int64
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for w := range 8 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 2))
					for next.Add(1) <= int64(b.N) {
						from, to := rng.IntN(hotKeys), rng.IntN(hotKeys)
						if from == to {
							to = (to + 1) % hotKeys
						}
						err := c.node(w%4).Txn(ctx, func(tx *Tx) error { return benchMove(ctx, tx, key(from), key(to)) })
						switch {
						case err == nil:
							commits.Add(1)
						case errors.Is(err, ErrConflict) || errors.Is(err, ErrLocked):
							conflicts.Add(1)
						default:
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
			b.ReportMetric(float64(commits.Load())/elapsed.Seconds(), "commits/s")
		})
	}
}

// benchMove moves one unit from one counter to another in tx.
func benchMove(ctx context.Context, tx *Tx, from, to string) error {
	a, err := tx.Get(ctx, from)
	if err != nil {
		return err
	}
	c, err := tx.Get(ctx, to)
	if err != nil {
		return err
	}
	x, _ := strconv.Atoi(string(a))
	y, _ := strconv.Atoi(string(c))
	if err := tx.Put(from, []byte(strconv.Itoa(x-1))); err != nil {
		return err
	}
	return tx.Put(to, []byte(strconv.Itoa(y+1)))
}
