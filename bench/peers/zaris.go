package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/zaris-go/zaris"
)

// zarisCluster is a Zaris cluster started in this process.
type zarisCluster struct {
	nodes []*zaris.Node
}

// startZaris starts a cluster of members Zaris nodes on loopback with ReplicationFactor copies; writes are
// acknowledged with the default Sync write concern, once every in-sync replica has applied them.
func startZaris(ctx context.Context, copies int, sink *logSink) (cluster, error) {
	c := &zarisCluster{}
	logger := slog.New(sink.slogHandler("zaris"))
	for i := range members {
		cfg := zaris.DefaultConfig()
		cfg.Name = fmt.Sprintf("zaris-%d", i+1)
		cfg.BootstrapExpect = members
		cfg.ReplicationFactor = copies
		cfg.WriteConcern = zaris.Sync
		cfg.Timing = zaris.LocalTiming()
		cfg.Logger = logger
		if i > 0 {
			cfg.Join = []string{c.nodes[0].GossipAddr()}
		}
		n, err := zaris.Join(ctx, cfg)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("zaris member %d: %w", i+1, err), c.close())
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := n.Ready(ctx); err != nil {
			return nil, errors.Join(fmt.Errorf("zaris %s not ready: %w", n.Name(), err), c.close())
		}
	}
	return c, nil
}

func (c *zarisCluster) client(m int) (client, error) { return zarisClient{c.nodes[m]}, nil }

// close closes every node; Close waits for the goroutines each node started.
func (c *zarisCluster) close() error {
	var errs []error
	for i := len(c.nodes) - 1; i >= 0; i-- {
		errs = append(errs, c.nodes[i].Close())
	}
	return errors.Join(errs...)
}

// zarisNotes sums the counters that show a cluster off its fast path: redirects and retries (a stale
// routing table or an owner changing), replication gaps and in-sync set changes (a replica dropped).
func zarisNotes(cl cluster) []string {
	var redirects, retries, gaps, inSync uint64
	for _, n := range cl.(*zarisCluster).nodes {
		s := n.Stats()
		redirects += s.RedirectsReceived
		retries += s.Retries
		r := n.ReplicationStats()
		gaps += r.Gaps
		inSync += r.InSyncDecisions
	}
	return []string{fmt.Sprintf("zaris counters: %d redirects, %d retries, %d replication gaps, %d in-sync set changes",
		redirects, retries, gaps, inSync)}
}

type zarisClient struct{ node *zaris.Node }

func (z zarisClient) put(ctx context.Context, key string, value []byte) error {
	return z.node.Put(ctx, key, value)
}

func (z zarisClient) get(ctx context.Context, key string) ([]byte, error) {
	return z.node.Get(ctx, key)
}

func (z zarisClient) getMany(ctx context.Context, keys []string) (int, error) {
	results, err := z.node.GetMany(ctx, keys)
	if err != nil {
		return len(keys), err
	}
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
		}
	}
	return failed, nil
}

func (zarisClient) close() {}
