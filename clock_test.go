package zaris

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/internal/clocktest"
)

// TestClockFailoverAtFailoverTimeout kills an owner, with the nodes' shared clock standing still, and runs
// the leader's reconcile rounds while the clock creeps up to just short of FailoverTimeout: no round fails
// a partition over. Once the clock reaches FailoverTimeout, rounds at that instant fail every one of them over.
func TestClockFailoverAtFailoverTimeout(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Unix(1_000_000, 0))
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.Clock = clock }))
	timeout := c.cfgs[0].FailoverTimeout
	if timeout >= c.cfgs[0].EvictionTimeout || timeout >= c.cfgs[0].DeadServerTimeout {
		t.Fatalf("FailoverTimeout %v must come before eviction and server removal for this test", timeout)
	}
	leader := c.leaderNode()
	victim := (c.leader() + 1) % 3
	dead := c.node(victim).id
	before := leader.ClusterMap()
	owned := before.OwnedBy(dead)
	if owned == 0 {
		t.Fatal("the victim owns nothing")
	}

	c.kill(victim)
	waitFor(t, 20*time.Second, "gossip to report the victim failed", func() bool {
		return memberStatus(leader, dead) == serf.StatusFailed
	})
	reconcileRound(t, leader) // the suspicion starts now, on the clock

	creepTo(t, clock, leader, timeout, func(at time.Duration) {
		if got := leader.ClusterMap().OwnedBy(dead); got != owned {
			t.Fatalf("%v of FailoverTimeout %v on the clock: the dead owner holds %d partitions; want all %d",
				at, timeout, got, owned)
		}
	})

	// At FailoverTimeout, with the clock standing there, rounds fail every partition over. A loaded machine
	// may need many: a replica's answer to the leader's probe can miss its (wall-clock) deadline. It may also
	// lose the leader: a new one suspects the dead owner from its own first round, so the clock moves on by
	// FailoverTimeout once more for it.
	clock.Advance(time.Nanosecond)
	moved := func() int {
		after, n := leader.ClusterMap(), 0
		for p, st := range before.Runtime {
			if st.Owner == dead && after.Runtime[p].Owner != dead && after.Runtime[p].Owner != "" {
				n++
			}
		}
		return n
	}
	waitFor(t, 20*time.Second, "rounds at FailoverTimeout to fail the dead owner's partitions over", func() bool {
		if now := c.leaderNode(); now != leader {
			t.Logf("the control plane's leader moved from %s to %s", leader.id, now.id)
			leader = now
			reconcileRound(t, leader)
			clock.Advance(timeout)
		}
		reconcileRound(t, leader)
		return moved() == owned
	})
	if got := moved(); got != owned || leader.ClusterMap().OwnedBy(dead) != 0 {
		t.Fatalf("rounds at FailoverTimeout moved %d of the dead owner's %d partitions (%d left to it)",
			got, owned, leader.ClusterMap().OwnedBy(dead))
	}
}

// TestClockHealAtHealCooldown makes a partition Degraded by cutting its replica off during a write, lets
// the replica catch up and return to the in-sync set with the clock standing still, then runs the
// leader's reconcile rounds while the clock creeps up to just short of HealCooldown: the partition stays
// Degraded. The first round once the clock reaches HealCooldown heals it, under one new epoch.
func TestClockHealAtHealCooldown(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	var holdRejoin atomic.Bool
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.Clock = clock
		cfg.HealCooldown = 5 * time.Second
		cfg.hooks.holdRejoin = func(int, NodeID) bool { return holdRejoin.Load() }
	}))
	cooldown := c.cfgs[0].HealCooldown
	c.waitHealthy(20 * time.Second)
	leader, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	key := keyInPartition(leader.layout, "heal", p)

	holdRejoin.Store(true)
	dropReplicaOnClock(t, c, clock, leader, owner, replica, key, func() error { return owner.Put(bg(t), key, []byte("v")) })

	// From here the clock stands still until the partition is healable and the leader has seen it so.
	holdRejoin.Store(false)
	waitFor(t, 20*time.Second, "the replica back in the in-sync set", func() bool {
		owner.ctl.wakeControl() // nudges the link to the replica, which then rejoins it
		return slices.Contains(leader.ClusterMap().Runtime[p].InSync, replica.id)
	})
	reconcileRound(t, leader) // the cool-down starts now, on the clock
	degraded := leader.ClusterMap().Runtime[p]
	if degraded.Health != Degraded {
		t.Fatalf("partition %d is %v once its replica is back; want Degraded until the cool-down ends", p, degraded.Health)
	}

	creepTo(t, clock, leader, cooldown, func(at time.Duration) {
		if st := leader.ClusterMap().Runtime[p]; st.Health != Degraded || st.Epoch != degraded.Epoch {
			t.Fatalf("%v of HealCooldown %v on the clock: partition %d is %v at epoch %d; want Degraded at %d",
				at, cooldown, p, st.Health, st.Epoch, degraded.Epoch)
		}
	})

	clock.Advance(time.Nanosecond)
	reconcileRound(t, leader)
	if st := leader.ClusterMap().Runtime[p]; st.Health != Healthy || st.Epoch != degraded.Epoch+1 {
		t.Fatalf("one round at HealCooldown: partition %d is %v at epoch %d; want Healthy at %d",
			p, st.Health, st.Epoch, degraded.Epoch+1)
	}
}

// reconcileRound makes n's control loop run a whole round that starts after the call. The loop counts a
// round as it starts it, so once the count has gone up twice, the first of the two rounds has ended.
func reconcileRound(t *testing.T, n *Node) {
	t.Helper()
	start := n.ctl.controlTicks.Load()
	for want := start + 1; want <= start+2; want++ {
		n.ctl.wakeControl()
		waitFor(t, 10*time.Second, "a reconcile round", func() bool { return n.ctl.controlTicks.Load() >= want })
	}
}

// dropReplicaOnClock cuts replica off from key's owner and runs write, a write of key: it waits
// ReplicaAckTimeout on the clock, which the test advances, and drops the replica. Then the link heals and the
// clock advances until the replica has the write. The caller holds the replica's rejoin. It returns the
// partition's state once the replica was dropped.
func dropReplicaOnClock(t *testing.T, c *testCluster, clock *clocktest.Manual, leader, owner, replica *Node, key string, write func() error) PartitionState {
	t.Helper()
	p := leader.layout.KeyPartition(key)
	c.faults.Partition(string(owner.id), string(replica.id))
	written := make(chan error, 1)
	go func() { written <- write() }()
	if err := advanceUntilReturns(t, clock, c.cfgs[0].ReplicaAckTimeout/3, "the write to drop its replica", written); err != nil {
		t.Fatal(err)
	}
	dropped := leader.ClusterMap().Runtime[p]
	if dropped.Health != Degraded || slices.Contains(dropped.InSync, replica.id) {
		t.Fatalf("partition %d after its replica timed out: %+v; want Degraded without %s", p, dropped, replica.id)
	}
	c.faults.HealAll()
	seg := leader.layout.KeySegment(key)
	advanceUntil(t, clock, c.cfgs[0].RetryBackoff, "the replica to receive the write", func() bool {
		_, _, ok := replica.own.store.get(seg, key)
		return ok
	})
	return dropped
}

// advanceUntil moves clock forward by step at a time, letting the nodes act between steps, until cond
// holds.
func advanceUntil(t *testing.T, clock *clocktest.Manual, step time.Duration, what string, cond func() bool) {
	t.Helper()
	waitFor(t, 20*time.Second, what, func() bool {
		if cond() {
			return true
		}
		clock.Advance(step)
		return false
	})
}

// creepTo advances clock in five steps up to one nanosecond short of total, running two of leader's
// reconcile rounds after each step, then check with how far the clock has gone.
func creepTo(t *testing.T, clock *clocktest.Manual, leader *Node, total time.Duration, check func(at time.Duration)) {
	t.Helper()
	const steps = 5
	for i := 1; i <= steps; i++ {
		step := total / steps
		if i == steps {
			step -= time.Nanosecond
		}
		clock.Advance(step)
		reconcileRound(t, leader)
		reconcileRound(t, leader)
		check(time.Duration(i) * total / steps)
	}
}

// advanceUntilReturns advances clock by step at a time until a call reports its error on done, and returns it.
func advanceUntilReturns(t *testing.T, clock *clocktest.Manual, step time.Duration, what string, done <-chan error) error {
	t.Helper()
	var err error
	advanceUntil(t, clock, step, what, func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	return err
}

// TestClockTimeoutContext checks that a timeout context on a manual clock ends exactly when its timeout
// has passed on the clock, with the cause a deadline, and that cancelling it disarms its timer.
func TestClockTimeoutContext(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	ctx, cancel := timeoutContext(context.Background(), clock, time.Second)
	defer cancel()
	clock.Advance(time.Second - time.Nanosecond)
	if err := ctx.Err(); err != nil {
		t.Fatalf("context ended before its timeout: %v", err)
	}
	clock.Advance(time.Nanosecond)
	if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("context at its timeout: cause %v; want %v", err, context.DeadlineExceeded)
	}

	_, cancel = timeoutContext(context.Background(), clock, time.Second)
	if clock.Armed() != 1 {
		t.Fatalf("%d timers armed for one timeout context", clock.Armed())
	}
	cancel()
	if clock.Armed() != 0 {
		t.Fatalf("%d timers armed after cancel", clock.Armed())
	}
}
