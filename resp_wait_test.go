package zaris

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRESPMatchesRedisWait compares WAIT with a real redis-server that has no replica, as a one-node Zaris
// has none: counts, timeouts, errors, and WAIT inside MULTI.
func TestRESPMatchesRedisWait(t *testing.T) {
	k := diffTag + "k"
	newRESPDiff(t, nil).run(t, []diffSeq{{name: "wait", cmds: []diffCmd{
		cmd("WAIT", "0", "0"), cmd("SET", k, "v"), cmd("WAIT", "0", "0"), cmd("WAIT", "1", "20"), cmd("WAIT", "-1", "0"),
		cmd("WAIT", "x", "0"), cmd("WAIT", "0", "x"), cmd("WAIT", "0", "-1"), cmd("WAIT", "1"), cmd("WAIT", "0", "1.5"),
		cmd("MULTI"), cmd("SET", k, "w"), cmd("WAIT", "5", "0"), cmd("EXEC"),
	}}})
}

// TestRESPWaitCountsInSyncReplicas checks WAIT against what the cluster holds: with Sync writes and RF 3,
// both replicas of the partition a client wrote to hold its write, asked for or not; a third is waited
// for until the timeout; once a replica is dropped from the partition's in-sync set, WAIT counts one.
func TestRESPWaitCountsInSyncReplicas(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startRESPCluster(t, 3, replicated(3))
	ctx := bg(t)
	owner := c.owner("k")
	client := redis.NewClient(&redis.Options{Addr: owner.RESPAddr(), Protocol: 2})
	defer client.Close()
	wait := func(n int, timeout time.Duration) int64 {
		t.Helper()
		got, err := client.Wait(ctx, n, timeout).Result()
		if err != nil {
			t.Fatalf("WAIT %d %v: %v", n, timeout, err)
		}
		return got
	}
	if err := client.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := wait(2, time.Second); got != 2 {
		t.Fatalf("WAIT 2 after a Sync write with RF 3 = %d, want 2", got)
	}
	start := time.Now()
	if got := wait(3, 200*time.Millisecond); got != 2 || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("WAIT 3 = %d after %v, want 2 after its 200 ms timeout", got, time.Since(start))
	}

	for i, n := range c.live() {
		if n != owner {
			c.kill(i)
			break
		}
	}
	if err := client.Set(ctx, "k", "w", 0).Err(); err != nil { // drops the dead replica, after ReplicaAckTimeout
		t.Fatal(err)
	}
	if got := wait(1, 0); got != 1 {
		t.Fatalf("WAIT 1 with one replica left in sync = %d, want 1", got)
	}
	if got := wait(2, 100*time.Millisecond); got != 1 {
		t.Fatalf("WAIT 2 with one replica left in sync = %d, want 1", got)
	}
}

// TestRESPWaitWithAsyncWrites checks that WAIT counts no replica when writes are acknowledged before any
// replica holds them.
func TestRESPWaitWithAsyncWrites(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 2, replicated(2, func(cfg *Config) { cfg.WriteConcern = Async }))
	ctx := bg(t)
	client := redis.NewClient(&redis.Options{Addr: c.owner("k").RESPAddr(), Protocol: 2})
	defer client.Close()
	if err := client.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := client.Wait(ctx, 1, 50*time.Millisecond).Result(); err != nil || got != 0 {
		t.Fatalf("WAIT 1 after an Async write = %d, %v; want 0", got, err)
	}
}
