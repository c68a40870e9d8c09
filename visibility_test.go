package zaris

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestReadNeverSeesUnreplicatedWrite cuts an owner off from everyone just as it applies a Sync write. The
// write cannot reach the replica, so it must not be acknowledged, and a read through the owner meanwhile
// must not return it either: a failover to the replica would lose it, and the read would have seen a value
// that never was.
func TestReadNeverSeesUnreplicatedWrite(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.ReplicaAckTimeout = time.Second }))
	c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	owner := c.node((c.leader() + 1) % 3)
	key := c.keyOwnedBy("visible", owner)
	if err := owner.Put(ctx, key, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	seg := owner.layout.KeySegment(key)
	c.isolate(owner)
	put := make(chan error, 1)
	go func() { put <- owner.Put(ctx, key, []byte("v2")) }()
	waitFor(t, 5*time.Second, "the owner to apply the write locally", func() bool {
		v, _, ok := owner.own.store.get(seg, key)
		return ok && string(v) == "v2"
	})
	getCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	got, err := owner.Get(getCtx, key)
	if err == nil && string(got) == "v2" {
		t.Fatal("a read returned a write no replica holds")
	}
	if err := <-put; err == nil {
		t.Fatal("a write no replica could receive was acknowledged")
	}
	if err != nil && !errors.Is(err, ErrUnconfirmed) && !errors.Is(err, ErrOwnershipChanging) && !errors.Is(err, ErrPartitionUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read through the cut-off owner: err = %v", err)
	}
	c.faults.HealAll()
}

// TestReadsAfterHandOverKeepReplicasInSync reads every key once a rebalance has handed partitions to a new
// owner. The new owner does not know yet what its replicas hold, so its first read of each segment must
// make it ask them, rather than wait for a write that never comes and drop them from the in-sync set.
func TestReadsAfterHandOverKeepReplicasInSync(t *testing.T) {
	longScenario(t)
	c := startCluster(t, 2, replicated(2))
	ctx := bg(t)
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = fmt.Sprintf("handed-%d", i)
		if err := c.node(0).Put(ctx, keys[i], []byte(keys[i])); err != nil {
			t.Fatal(err)
		}
	}
	joiner := c.add(1)
	waitFor(t, 30*time.Second, "the plan to give the joiner partitions", func() bool {
		return slices.Contains(c.currentMap().plannedNodes(), joiner.id)
	})
	c.waitHealthy(30 * time.Second)
	before := c.currentMap()
	for _, k := range keys {
		if got, err := c.node(2).Get(ctx, k); err != nil || string(got) != k {
			t.Fatalf("get %q = %q, %v", k, got, err)
		}
	}
	// A stable cluster commits nothing unprompted: a newer map would be a replica dropped by a read.
	if after := c.currentMap(); after.Index != before.Index {
		for p, st := range after.Runtime {
			if !slices.Equal(st.InSync, before.Runtime[p].InSync) {
				t.Errorf("partition %d: in-sync set %v after the reads, %v before", p, st.InSync, before.Runtime[p].InSync)
			}
		}
		t.Fatalf("the map moved from index %d to %d during the reads", before.Index, after.Index)
	}
}
