package zaris

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/zaris-go/zaris/transport"
)

// Both nodes fill each other's data-port caps with Sync writes at once. Each write's handler waits for the
// other node's copy, so the replication requests must still get through to the node whose caps are full.
func TestSaturatedDataPortsKeepReplicating(t *testing.T) {
	c := startCluster(t, 2, func(cfg *Config) {
		cfg.ReplicationFactor = 2
		cfg.DataMaxConnRequests = 2
		cfg.DataMaxRequests = 2
	})
	c.waitHealthy(20 * time.Second)
	const writers, writes = 16, 20
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for _, pair := range [][2]*Node{{c.node(0), c.node(1)}, {c.node(1), c.node(0)}} {
		from, owner := pair[0], pair[1]
		for w := range writers {
			key := c.keyOwnedBy(fmt.Sprintf("%s-%d-", from.Name(), w), owner)
			wg.Go(func() {
				for i := range writes {
					if err := from.Put(ctx, key, []byte{byte(i)}); err != nil {
						errs <- fmt.Errorf("put %s from %s: %w", key, from.Name(), err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, n := range c.live() {
		if d := n.ReplicationStats().InSyncDecisions; d != 0 {
			t.Fatalf("%s dropped replicas %d times: their acknowledgements were stuck behind full caps", n.Name(), d)
		}
	}
}

// peerClientStats sums the counters of n's clients to its peers, both lanes.
func peerClientStats(n *Node) transport.ClientStats {
	n.client.router.mu.Lock()
	defer n.client.router.mu.Unlock()
	var sum transport.ClientStats
	for _, p := range n.client.router.peers {
		if p.local {
			continue
		}
		for _, c := range []*transport.Client{p.client, p.internal} {
			st := c.Stats()
			sum.Calls += st.Calls
			sum.ConnLosses += st.ConnLosses
			sum.IdleClosed += st.IdleClosed
		}
	}
	return sum
}

// Data-port connections idle past DataIdleTimeout are closed and redialled without a failed call, and the
// control plane, whose quiet streams are closed and dialed anew too, is not disturbed.
func TestIdleDataConnectionsCloseQuietly(t *testing.T) {
	const idle = 100 * time.Millisecond
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.ReplicationFactor = 2
		cfg.DataIdleTimeout = idle
	})
	c.waitHealthy(20 * time.Second)
	term := c.node(0).ctl.raft.Stats()["term"]
	ctx := bg(t)
	writeAll := func(round int) {
		for _, from := range c.live() {
			for _, owner := range c.live() {
				key := c.keyOwnedBy(fmt.Sprintf("idle-%d-%s-", round, from.Name()), owner)
				if err := from.Put(ctx, key, []byte("v")); err != nil {
					t.Fatalf("round %d: put %s from %s: %v", round, key, from.Name(), err)
				}
			}
		}
	}
	for round := range 3 {
		writeAll(round)
		waitFor(t, 10*time.Second, "idle data connections closed", func() bool {
			for _, n := range c.live() {
				if n.port.data.Stats().Conns != 0 {
					return false
				}
			}
			return true
		})
	}
	for _, n := range c.live() {
		if st := peerClientStats(n); st.ConnLosses != 0 || st.IdleClosed == 0 {
			t.Fatalf("%s's peer clients: %+v: idle closes must be seen, and not as losses", n.Name(), st)
		}
	}
	if now := c.node(0).ctl.raft.Stats()["term"]; now != term {
		t.Fatalf("the control plane was disturbed: term %s -> %s", term, now)
	}
}

// A control-plane stream that never speaks is closed after DataIdleTimeout, as a data-plane connection is.
func TestSilentRaftStreamIsClosed(t *testing.T) {
	c := startCluster(t, 1, func(cfg *Config) { cfg.DataIdleTimeout = 100 * time.Millisecond })
	n := c.node(0)
	conn, err := transport.DialMux(bg(t), n.port.dialer, n.DataAddr(), muxRaft, new(greeting(&n.cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a silent control-plane stream stayed open: %v", err)
	}
}
