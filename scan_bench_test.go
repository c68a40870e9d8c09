package zaris

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkScan measures how fast Scan walks a 3-node in-process cluster on loopback sockets (RF 1), in keys
// per second, with the default page and with smaller ones, and how fast go-redis scans it on every master.
// The cluster holds 100,000 keys, or ZARIS_SCAN_KEYS of them (1000000 for the figure in BENCHMARKS.md).
func BenchmarkScan(b *testing.B) {
	keys := 100_000
	if s := os.Getenv("ZARIS_SCAN_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("ZARIS_SCAN_KEYS=%q: want a positive number", s)
		}
		keys = n
	}
	// The plain dialer: fault injection is for tests, not for measuring.
	c := startSocketCluster(b, 3, func(cfg *Config) { cfg.Dialer = nil; withRESP(cfg) })
	ctx := context.Background()
	caller := c.node(0)
	start := time.Now()
	fillForScan(b, ctx, caller, keys)
	b.Logf("wrote %d keys in %v", keys, time.Since(start).Round(time.Millisecond))

	for _, count := range []int{DefaultScanCount, 100} {
		b.Run(fmt.Sprintf("node-count-%d", count), func(b *testing.B) {
			found := 0
			for b.Loop() {
				for _, err := range caller.Scan(ctx, ScanCount(count)) {
					if err != nil {
						b.Fatal(err)
					}
					found++
				}
			}
			reportKeys(b, found, keys)
		})
	}
	b.Run("resp-masters-count-1000", func(b *testing.B) {
		client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{caller.RESPAddr()}})
		defer client.Close()
		var found atomic.Int64 // ForEachMaster scans the masters at once
		for b.Loop() {
			err := client.ForEachMaster(ctx, func(ctx context.Context, master *redis.Client) error {
				n, err := scanMaster(ctx, master)
				found.Add(int64(n))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		reportKeys(b, int(found.Load()), keys)
	})
}

// scanMaster scans every key of one master with SCAN COUNT 1000 and returns how many came. A page refused
// with TRYAGAIN, while a partition of the master is changing, goes again from the same cursor.
func scanMaster(ctx context.Context, master *redis.Client) (int, error) {
	found := 0
	for cursor, tries := uint64(0), 0; ; {
		page, next, err := master.Scan(ctx, cursor, "", 1000).Result()
		if err != nil && strings.HasPrefix(err.Error(), "TRYAGAIN") && tries < 100 {
			tries++
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			return found, err
		}
		found += len(page)
		if next == 0 {
			return found, nil
		}
		cursor, tries = next, 0
	}
}

// fillForScan writes keys keys of 16-byte values through n, a thousand per batch.
func fillForScan(b *testing.B, ctx context.Context, n *Node, keys int) {
	value := make([]byte, 16)
	for start := 0; start < keys; start += 1000 {
		var entries []KeyValue
		for i := start; i < min(start+1000, keys); i++ {
			entries = append(entries, KeyValue{Key: "scan-bench:" + strconv.Itoa(i), Value: value})
		}
		results, err := n.PutMany(ctx, entries)
		if err != nil {
			b.Fatal(err)
		}
		failIfAny(b, results)
	}
}

// reportKeys checks that each scan found every key and reports the keys scanned per second.
func reportKeys(b *testing.B, found, keys int) {
	if found != keys*b.N {
		b.Fatalf("%d scans found %d keys; want %d each", b.N, found, keys)
	}
	b.ReportMetric(float64(found)/b.Elapsed().Seconds(), "keys/s")
}
