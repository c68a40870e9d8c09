// Command zaris-demo starts a three-node Zaris cluster inside one process on loopback, writes and reads
// 100,000 keys from every node, prints throughput, ownership and hop counts, adds a fourth node while
// printing how partitions move to it, reads every key again, then leaves gracefully.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris"
)

func main() {
	nodes := flag.Int("nodes", 3, "nodes in the cluster")
	keys := flag.Int("keys", 100_000, "keys to write and read")
	workers := flag.Int("workers", 16, "concurrent workers per node")
	verbose := flag.Bool("v", false, "log cluster events")
	flag.Parse()
	if err := run(*nodes, *keys, *workers, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "zaris-demo:", err)
		os.Exit(1)
	}
}

func run(size, keys, workers int, verbose bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cluster, err := startCluster(ctx, size, verbose)
	if err != nil {
		return err
	}
	defer func() {
		for _, n := range cluster {
			n.Close()
		}
	}()
	fmt.Printf("cluster of %d nodes ready (map version %d)\n", size, cluster[0].ClusterMap().Version)

	start := time.Now()
	if err := phase(ctx, "write", cluster, keys, workers, writeKey); err != nil {
		return err
	}
	if err := phase(ctx, "read", cluster, keys, workers, readKey); err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Printf("%d operations in %v: %.0f ops/s\n", 2*keys, elapsed.Round(time.Millisecond), float64(2*keys)/elapsed.Seconds())
	if err := report(cluster); err != nil {
		return err
	}
	if cluster, err = scaleOut(ctx, cluster, verbose); err != nil {
		return err
	}
	if err := phase(ctx, "read", cluster, keys, workers, readKey); err != nil {
		return err
	}
	printOwnership(cluster)

	for i := len(cluster) - 1; i >= 0; i-- {
		if err := cluster[i].Leave(ctx); err != nil {
			return fmt.Errorf("%s leave: %w", cluster[i].Name(), err)
		}
		fmt.Printf("%s left\n", cluster[i].Name())
	}
	return nil
}

func startCluster(ctx context.Context, size int, verbose bool) ([]*zaris.Node, error) {
	var cluster []*zaris.Node
	for i := 0; i < size; i++ {
		n, err := join(ctx, cluster, size, verbose)
		if err != nil {
			return cluster, err
		}
		cluster = append(cluster, n)
	}
	for _, n := range cluster {
		if err := n.Ready(ctx); err != nil {
			return cluster, err
		}
	}
	return cluster, nil
}

// join starts node number len(cluster)+1 and joins it to the cluster.
func join(ctx context.Context, cluster []*zaris.Node, bootstrapExpect int, verbose bool) (*zaris.Node, error) {
	logger := slog.New(slog.DiscardHandler)
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	cfg := zaris.DefaultConfig()
	cfg.Name = fmt.Sprintf("demo-%d", len(cluster)+1)
	cfg.BootstrapExpect = bootstrapExpect
	cfg.ReplicationFactor = 2 // every write acknowledged once its replica has it (Sync)
	cfg.Timing = zaris.LocalTiming()
	cfg.Logger = logger
	if len(cluster) > 0 {
		cfg.Join = []string{cluster[0].GossipAddr()}
	}
	return zaris.Join(ctx, cfg)
}

// scaleOut adds one node and prints the rebalance as it goes, until no partition is moving.
func scaleOut(ctx context.Context, cluster []*zaris.Node, verbose bool) ([]*zaris.Node, error) {
	n, err := join(ctx, cluster, len(cluster), verbose)
	if err != nil {
		return cluster, err
	}
	cluster = append(cluster, n)
	fmt.Printf("%s joined; rebalancing\n", n.Name())
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		moves := cluster[0].Migrations()
		if len(moves) == 0 && cluster[0].ClusterMap().OwnedBy(n.Name()) > 0 {
			break
		}
		if len(moves) > 0 {
			fmt.Println(describeMoves(moves))
		}
		select {
		case <-ctx.Done():
			return cluster, fmt.Errorf("rebalance: %w", ctx.Err())
		case <-tick.C:
		}
	}
	var cutOvers uint64
	var sealed []time.Duration
	for _, n := range cluster {
		s := n.CutoverStats()
		cutOvers += s.CutOvers
		sealed = append(sealed, s.Sealed...)
	}
	longest := slices.Max(append(sealed, 0))
	fmt.Printf("rebalanced in %v: %d partitions moved, %d owners handed over (longest pause %v)\n",
		time.Since(start).Round(time.Millisecond), cluster[0].ClusterMap().Moved, cutOvers, longest.Round(time.Microsecond))
	return cluster, nil
}

// describeMoves summarises the partitions on the move, the first few in detail.
func describeMoves(moves []zaris.Migration) string {
	var b strings.Builder
	copying := 0
	for _, m := range moves {
		if m.Copying {
			copying++
		}
	}
	fmt.Fprintf(&b, "  %d partitions moving, %d copying:", len(moves), copying)
	for _, m := range moves[:min(3, len(moves))] {
		state := "waiting"
		if m.Copying {
			state = fmt.Sprintf("%d/%d in sync", m.Synced, m.Incoming)
		}
		fmt.Fprintf(&b, " p%d %v->%v %s;", m.Partition, m.From, m.To, state)
	}
	return b.String()
}

// printOwnership prints how many partitions each node owns and holds a copy of.
func printOwnership(cluster []*zaris.Node) {
	m := cluster[0].ClusterMap()
	fmt.Println("node      owns  copies")
	for _, n := range cluster {
		copies := 0
		for _, nodes := range m.Assignment {
			if slices.Contains(nodes, n.Name()) {
				copies++
			}
		}
		fmt.Printf("%-9s %4d %7d\n", n.Name(), m.OwnedBy(n.Name()), copies)
	}
}

func keyName(i int) string { return fmt.Sprintf("demo:key:%d", i) }

func value(i int) []byte { return []byte(fmt.Sprintf("value-%d", i)) }

func writeKey(ctx context.Context, n *zaris.Node, i int) error {
	return n.Put(ctx, keyName(i), value(i))
}

// readKey reads key i through a different node from the one that wrote it.
func readKey(ctx context.Context, n *zaris.Node, i int) error {
	got, err := n.Get(ctx, keyName(i))
	if err != nil {
		return err
	}
	if !bytes.Equal(got, value(i)) {
		return fmt.Errorf("key %d: read %q", i, got)
	}
	return nil
}

// phase spreads keys over every node's workers and prints a progress line as it goes.
func phase(ctx context.Context, name string, cluster []*zaris.Node, keys, workers int,
	op func(context.Context, *zaris.Node, int) error) error {
	var next, done atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	shift := 0
	if name == "read" {
		shift = 1
	}
	for w := 0; w < workers*len(cluster); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= keys || firstErr.Load() != nil {
					return
				}
				n := cluster[(i+shift)%len(cluster)]
				if err := op(ctx, n, i); err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("%s key %d via %s: %w", name, i, n.Name(), err))
					return
				}
				done.Add(1)
			}
		}()
	}
	stop := make(chan struct{})
	progress := make(chan struct{})
	go func() {
		defer close(progress)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				fmt.Printf("\r%-5s %d/%d\n", name, done.Load(), keys)
				return
			case <-tick.C:
				fmt.Printf("\r%-5s %d/%d", name, done.Load(), keys)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-progress
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	return nil
}

// report prints how many partitions each node owns and how its operations travelled, and checks that
// every remote operation took exactly one hop.
func report(cluster []*zaris.Node) error {
	m := cluster[0].ClusterMap()
	var totalSent, totalServed, totalRedirects uint64
	fmt.Println("node      partitions  local ops  requests sent  requests served  redirects")
	for _, n := range cluster {
		s := n.Stats()
		var sent uint64
		for _, c := range s.RequestsSent {
			sent += c
		}
		fmt.Printf("%-9s %10d %10d %14d %16d %10d\n", n.Name(), m.OwnedBy(n.Name()), s.LocalOps, sent, s.RequestsServed, s.RedirectsReceived)
		totalSent += sent
		totalServed += s.RequestsServed
		totalRedirects += s.RedirectsReceived
	}
	if totalSent != totalServed || totalRedirects != 0 {
		return fmt.Errorf("hops: %d requests sent, %d served, %d redirects", totalSent, totalServed, totalRedirects)
	}
	fmt.Printf("hops: %d remote requests, each served by the first node it reached (0 redirects)\n", totalSent)
	var replicated uint64
	for _, n := range cluster {
		replicated += n.ReplicationStats().OpsApplied
	}
	fmt.Printf("replication: %d ops applied on replicas (RF %d, Sync)\n", replicated, m.ReplicationFactor)
	return nil
}
