package zaris

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// TestKeyCommands runs the counters, expiry and conditional writes from every node of a cluster, so each
// key is served both in-process and over the data plane.
func TestKeyCommands(t *testing.T) {
	c := startCluster(t, 3, nil)
	ctx := bg(t)
	for i, n := range c.live() {
		key := func(name string) string { return fmt.Sprintf("%s-from-%d", name, i) }

		if v, err := n.Incr(ctx, key("counter"), 5); err != nil || v != 5 {
			t.Fatalf("Incr = %d, %v", v, err)
		}
		if v, err := n.Incr(ctx, key("counter"), -7); err != nil || v != -2 {
			t.Fatalf("Incr = %d, %v", v, err)
		}
		n.Put(ctx, key("text"), []byte("01"))
		if _, err := n.Incr(ctx, key("text"), 1); !errors.Is(err, ErrNotInteger) {
			t.Fatalf("Incr on a non-canonical integer: %v", err)
		}
		n.Put(ctx, key("max"), []byte(fmt.Sprint(int64(math.MaxInt64))))
		if _, err := n.Incr(ctx, key("max"), 1); !errors.Is(err, ErrNotInteger) {
			t.Fatalf("Incr overflow: %v", err)
		}

		if _, err := n.TTL(ctx, key("none")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("TTL of a missing key: %v", err)
		}
		if ttl, err := n.TTL(ctx, key("counter")); err != nil || ttl != NoExpiry {
			t.Fatalf("TTL without expiry = %v, %v", ttl, err)
		}
		if ok, err := n.Expire(ctx, key("counter"), time.Hour); err != nil || !ok {
			t.Fatalf("Expire = %v, %v", ok, err)
		}
		if ttl, err := n.TTL(ctx, key("counter")); err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
			t.Fatalf("TTL = %v, %v", ttl, err)
		}
		if v, err := n.Incr(ctx, key("counter"), 1); err != nil || v != -1 {
			t.Fatalf("Incr keeps the value: %d, %v", v, err)
		}
		if ttl, _ := n.TTL(ctx, key("counter")); ttl == NoExpiry {
			t.Fatal("Incr dropped the expiry")
		}
		if ok, err := n.Persist(ctx, key("counter")); err != nil || !ok {
			t.Fatalf("Persist = %v, %v", ok, err)
		}
		if ok, err := n.Persist(ctx, key("counter")); err != nil || ok {
			t.Fatalf("second Persist = %v, %v", ok, err)
		}
		if ok, err := n.Expire(ctx, key("none"), time.Hour); err != nil || ok {
			t.Fatalf("Expire of a missing key = %v, %v", ok, err)
		}
		if ok, err := n.Expire(ctx, key("counter"), 0); err != nil || !ok {
			t.Fatalf("Expire 0 = %v, %v", ok, err)
		}
		if ok, err := n.Exists(ctx, key("counter")); err != nil || ok {
			t.Fatalf("Exists after Expire 0 = %v, %v", ok, err)
		}

		if err := n.Put(ctx, key("cond"), []byte("a"), IfExists()); !errors.Is(err, ErrConditionNotMet) {
			t.Fatalf("Put IfExists on a missing key: %v", err)
		}
		if err := n.Put(ctx, key("cond"), []byte("a"), IfAbsent(), WithTTL(time.Hour)); err != nil {
			t.Fatalf("Put IfAbsent: %v", err)
		}
		if err := n.Put(ctx, key("cond"), []byte("b"), IfAbsent()); !errors.Is(err, ErrConditionNotMet) {
			t.Fatalf("second Put IfAbsent: %v", err)
		}
		prev, existed, err := n.Swap(ctx, key("cond"), []byte("c"), IfExists(), KeepTTL())
		if err != nil || !existed || string(prev) != "a" {
			t.Fatalf("Swap = %q, %v, %v", prev, existed, err)
		}
		if ttl, _ := n.TTL(ctx, key("cond")); ttl == NoExpiry {
			t.Fatal("KeepTTL dropped the expiry")
		}
		if ok, err := n.Exists(ctx, key("cond")); err != nil || !ok {
			t.Fatalf("Exists = %v, %v", ok, err)
		}
	}
}

// TestConditionalPutKeepsItsWriteConcern writes conditionally under the Async concern while the owner
// cannot reach its replica: the writes are acknowledged without waiting for the replica, so the replica
// stays in the in-sync set, where a Sync write would have dropped it.
func TestConditionalPutKeepsItsWriteConcern(t *testing.T) {
	c := startCluster(t, 3, replicated(2))
	c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	_, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	c.faults.Blackhole(string(owner.id), string(replica.id))
	for i, opt := range []PutOption{IfAbsent(), KeepTTL()} {
		key := keyInPartition(owner.layout, fmt.Sprintf("async-%d", i), p)
		if err := owner.Put(ctx, key, []byte("v"), opt, WithWriteConcern(Async)); err != nil {
			t.Fatalf("conditional Async put %d: %v", i, err)
		}
	}
	if st := owner.ClusterMap().Runtime[p]; !slices.Contains(st.InSync, replica.id) {
		t.Fatalf("partition %d dropped its replica for an Async write: %+v", p, st)
	}
	c.faults.HealAll()
}
