package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/chaos"
)

// Under -nemesis replace the servers are replaced one at a time, for good: the oldest running one is
// SIGKILLed and never returns, and a new server with the next name and fresh ports joins. Once as many
// servers as the cluster started with are replaced, none of its first control-plane voters is left, so
// the cluster serves only if dead voters leave the control plane and new servers are promoted.

// safeVictimBound bounds how long a replacement waits for the oldest server to hold no partition's only
// live copy (its partners still catching up after the previous replacement); past it, the round is skipped.
const safeVictimBound = 30 * time.Second

// retirement is one server replaced for good.
type retirement struct {
	s *server
	// held says whether the map listed a copy on s when it was killed: if none is listed at the end, the
	// control plane decided after s died.
	held bool
}

// runReplace replaces the oldest server after each pause, drawn within ±20% of replaceEvery, until ctx ends.
func (n *nemesis) runReplace(ctx context.Context) {
	for {
		if !chaos.Sleep(ctx, jitter(n.replaceEvery, n.rng.Float64())) {
			return
		}
		n.replaceOldest(ctx)
	}
}

// jitter returns mean scaled by 0.8 + 0.4u: within ±20% of it for u in [0, 1).
func jitter(mean time.Duration, u float64) time.Duration {
	return time.Duration(float64(mean) * (0.8 + 0.4*u))
}

// replaceOldest kills the oldest running server for good, once that loses no partition's last live copy,
// and starts a new server that joins through the live ones and the lite member.
func (n *nemesis) replaceOldest(ctx context.Context) {
	victim := oldestRunning(n.c)
	if victim == nil {
		n.step("no replacement: no server runs")
		return
	}
	m, err := n.awaitSafeVictim(ctx, victim)
	if err != nil {
		n.step("no replacement: %v", err)
		return
	}
	owned := n.sigkill(m, victim)
	n.mu.Lock()
	n.retired = append(n.retired, retirement{s: victim, held: holdsCopy(m, zaris.NodeID(victim.name))})
	n.mu.Unlock()
	s, err := n.c.addServer()
	if err == nil {
		err = n.c.start(s, n.liveJoinAddrs())
	}
	if err != nil {
		n.step("kill %s for good (owner of %d partitions); no new server: %v", victim.name, owned, err)
		return
	}
	n.step("replace %s (owner of %d partitions, killed for good) with %s", victim.name, owned, s.name)
}

// oldestRunning returns the first server started that still runs, or nil.
func oldestRunning(c *cluster) *server {
	for _, s := range c.list() {
		if c.running(s) {
			return s
		}
	}
	return nil
}

// awaitSafeVictim waits, up to safeVictimBound, until killing s leaves every partition a live in-sync
// copy, and returns the map that says so. It logs a wait, so the schedule's delays are visible.
func (n *nemesis) awaitSafeVictim(ctx context.Context, s *server) (*zaris.ClusterMap, error) {
	ctx, cancel := context.WithTimeout(ctx, safeVictimBound)
	defer cancel()
	start, waited := time.Now(), false
	for {
		m := n.lite.ClusterMap()
		if !n.c.running(s) {
			return nil, fmt.Errorf("%s stopped by itself", s.name)
		}
		if n.othersHoldAll(m, zaris.NodeID(s.name)) {
			if waited {
				n.step("%s safe to kill after %v", s.name, time.Since(start).Round(time.Millisecond))
			}
			return m, nil
		}
		if !waited {
			n.step("wait: %s holds the only live copy of some partition", s.name)
			waited = true
		}
		if !chaos.Sleep(ctx, pollPause) {
			return nil, fmt.Errorf("%s still held the only live copy of some partition after %v", s.name,
				time.Since(start).Round(time.Millisecond))
		}
	}
}

// liveJoinAddrs returns the gossip addresses of the running servers and the lite member's.
func (n *nemesis) liveJoinAddrs() []string {
	var addrs []string
	for _, s := range n.c.list() {
		if n.c.running(s) {
			addrs = append(addrs, s.gossip)
		}
	}
	return append(addrs, n.lite.GossipAddr())
}

// retirements returns the servers replaced so far, in the order they were killed.
func (n *nemesis) retirements() []retirement {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.retired)
}

// holdsCopy reports whether m lists a copy of some partition on id: as its owner, an assigned node, an
// in-sync replica or a move's target.
func holdsCopy(m *zaris.ClusterMap, id zaris.NodeID) bool {
	for p, st := range m.Runtime {
		if st.Owner == id || slices.Contains(st.InSync, id) || slices.Contains(st.Target, id) ||
			(p < len(m.Assignment) && slices.Contains(m.Assignment[p], id)) {
			return true
		}
	}
	return false
}
