package zaris

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestGetEntry checks that GetEntry returns the value, version and remaining TTL that the owner holds, from
// the owner itself and from the other nodes, and that a batch get reports the same version and TTL.
func TestGetEntry(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2))
	ctx := bg(t)
	n := c.node(0)
	if err := n.Put(ctx, "lasting", []byte("forever")); err != nil {
		t.Fatal(err)
	}
	if err := n.Put(ctx, "fleeting", []byte("soon gone"), WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, node := range c.live() {
		lasting, err := node.GetEntry(ctx, "lasting")
		if err != nil || string(lasting.Value) != "forever" || lasting.Version == 0 || lasting.TTL != 0 {
			t.Fatalf("%s: GetEntry(lasting) = %+v, %v; want its value, a version and no TTL", node.id, lasting, err)
		}
		fleeting, err := node.GetEntry(ctx, "fleeting")
		if err != nil || string(fleeting.Value) != "soon gone" || fleeting.Version == 0 || fleeting.TTL <= 0 || fleeting.TTL > time.Hour {
			t.Fatalf("%s: GetEntry(fleeting) = %+v, %v; want its value, a version and a TTL within the hour", node.id, fleeting, err)
		}
		if _, err := node.GetEntry(ctx, "absent"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: GetEntry(absent): err = %v; want ErrNotFound", node.id, err)
		}
		results, err := node.GetMany(ctx, []string{"lasting", "fleeting", "absent"})
		if err != nil {
			t.Fatal(err)
		}
		if r := results[0]; r.Err != nil || r.Version != lasting.Version || r.TTL != 0 {
			t.Fatalf("%s: batch get of lasting = %+v; want version %d and no TTL", node.id, r, lasting.Version)
		}
		if r := results[1]; r.Err != nil || r.Version != fleeting.Version || r.TTL <= 0 || r.TTL > fleeting.TTL {
			t.Fatalf("%s: batch get of fleeting = %+v; want version %d and a TTL within %v", node.id, r, fleeting.Version, fleeting.TTL)
		}
		if r := results[2]; !errors.Is(r.Err, ErrNotFound) || r.TTL != 0 {
			t.Fatalf("%s: batch get of absent = %+v; want ErrNotFound", node.id, r)
		}
	}
}

// TestVersionsGrowAcrossWritesAndDelete checks that each write of a key gives it a greater version, a
// delete and re-create included, and that the version a write returns is the one GetEntry then reads.
func TestVersionsGrowAcrossWritesAndDelete(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2))
	ctx := bg(t)
	const key = "counter"
	var last uint64
	grew := func(what string, node *Node) uint64 {
		t.Helper()
		e, err := node.GetEntry(ctx, key)
		if err != nil || e.Version <= last {
			t.Fatalf("after %s: GetEntry = %+v, %v; want a version above %d", what, e, err, last)
		}
		last = e.Version
		return e.Version
	}
	for i, node := range c.live() {
		if err := node.Put(ctx, key, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		grew(fmt.Sprintf("put %d", i), c.node((i+1)%3))
	}
	if _, err := c.node(1).Incr(ctx, key, 1); err != nil {
		t.Fatal(err)
	}
	grew("incr", c.node(2))
	if existed, err := c.node(2).Delete(ctx, key); err != nil || !existed {
		t.Fatalf("delete: %v, %v", existed, err)
	}
	if _, err := c.node(0).GetEntry(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetEntry after delete: %v; want ErrNotFound", err)
	}
	if err := c.node(0).Put(ctx, key, []byte("again")); err != nil {
		t.Fatal(err)
	}
	grew("re-create", c.node(1))
	v, err := c.node(1).CompareAndSwap(ctx, key, last, []byte("swapped"))
	if err != nil || v <= last {
		t.Fatalf("CompareAndSwap from %d = %d, %v; want a greater version", last, v, err)
	}
	if got := grew("compare-and-swap", c.node(2)); got != v {
		t.Fatalf("CompareAndSwap returned version %d, GetEntry reads %d", v, got)
	}
}

// TestCompareAndSwapConditions checks each conditional write against the key's state: IfVersion(0) creates
// only a missing key, a stale version writes nothing and reports the current one, and a conditional delete
// deletes only at its version.
func TestCompareAndSwapConditions(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, replicated(2))
	ctx := bg(t)
	remote, local := c.node(0), c.node(1)
	key := c.keyOwnedBy("cas", local) // remote sends it over the network, local serves it in process
	mismatch := func(what string, err error, current uint64) {
		t.Helper()
		var vm *VersionMismatchError
		if !errors.Is(err, ErrVersionMismatch) || !errors.As(err, &vm) || vm.Key != key || vm.Current != current {
			t.Fatalf("%s: err = %v; want a version mismatch of %q at version %d", what, err, key, current)
		}
	}
	entry := func() Entry {
		t.Helper()
		e, err := local.GetEntry(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	if err := remote.Put(ctx, key, []byte("first"), IfVersion(0)); err != nil {
		t.Fatalf("IfVersion(0) on a missing key: %v", err)
	}
	first := entry()
	if string(first.Value) != "first" {
		t.Fatalf("created %q", first.Value)
	}
	mismatch("IfVersion(0) on an existing key", remote.Put(ctx, key, []byte("second"), IfVersion(0)), first.Version)
	_, err := local.CompareAndSwap(ctx, key, 0, []byte("second"))
	mismatch("CompareAndSwap from 0 on an existing key", err, first.Version)
	mismatch("IfVersion of another version", remote.Put(ctx, key, []byte("second"), IfVersion(first.Version+1)), first.Version)
	if e := entry(); e.Version != first.Version || string(e.Value) != "first" {
		t.Fatalf("refused writes changed the key: %+v", e)
	}

	second, err := remote.CompareAndSwap(ctx, key, first.Version, []byte("second"), WithTTL(time.Hour))
	if err != nil || second <= first.Version {
		t.Fatalf("CompareAndSwap at the current version = %d, %v", second, err)
	}
	if e := entry(); e.Version != second || string(e.Value) != "second" || e.TTL <= 0 {
		t.Fatalf("after CompareAndSwap: %+v; want version %d, value second, a TTL", e, second)
	}
	if err := local.Put(ctx, key, []byte("third"), IfVersion(second), KeepTTL()); err != nil {
		t.Fatal(err)
	}
	third := entry()
	if third.Version <= second || string(third.Value) != "third" || third.TTL <= 0 {
		t.Fatalf("after Put IfVersion KeepTTL: %+v", third)
	}

	for what, err := range map[string]error{
		"IfVersion with IfAbsent": remote.Put(ctx, key, []byte("x"), IfVersion(third.Version), IfAbsent()),
		"IfVersion with IfExists": remote.Put(ctx, key, []byte("x"), IfExists(), IfVersion(third.Version)),
		"Swap with IfVersion":     swapErr(remote.Swap(ctx, key, []byte("x"), IfVersion(third.Version))),
	} {
		if !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%s: err = %v; want ErrInvalidRequest", what, err)
		}
	}
	if _, err := remote.CompareAndSwap(ctx, key, third.Version, make([]byte, remote.cfg.MaxValueSize+1)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("CompareAndSwap of an oversized value: %v; want ErrValueTooLarge", err)
	}

	mismatch("DeleteIfVersion of another version", remote.DeleteIfVersion(ctx, key, second), third.Version)
	mismatch("DeleteIfVersion(0) of an existing key", remote.DeleteIfVersion(ctx, key, 0), third.Version)
	if err := local.DeleteIfVersion(ctx, key, third.Version); err != nil {
		t.Fatalf("DeleteIfVersion at the current version: %v", err)
	}
	if _, err := remote.GetEntry(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after DeleteIfVersion: %v; want ErrNotFound", err)
	}
	mismatch("DeleteIfVersion of a deleted key", remote.DeleteIfVersion(ctx, key, third.Version), 0)
	if err := remote.DeleteIfVersion(ctx, key, 0); err != nil {
		t.Fatalf("DeleteIfVersion(0) of a missing key: %v", err)
	}
	_, err = remote.CompareAndSwap(ctx, key, third.Version, []byte("gone"))
	mismatch("CompareAndSwap on a deleted key", err, 0)
	again, err := remote.CompareAndSwap(ctx, key, 0, []byte("again"))
	if err != nil || again <= third.Version {
		t.Fatalf("re-create with CompareAndSwap from 0 = %d, %v; want a version above %d", again, err, third.Version)
	}
}

func swapErr(_ []byte, _ bool, err error) error { return err }

// TestCompareAndSwapContention runs goroutines on every node that, round after round, all read the same
// key and then all try to swap it from the version they read: each round exactly one wins, every other
// gets a version mismatch carrying the winner's version, and the key ends with the last winner's value.
func TestCompareAndSwapContention(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2))
	ctx := bg(t)
	const (
		key     = "contended"
		workers = 6
		rounds  = 25
	)
	type attempt struct {
		from    uint64 // the version read
		version uint64 // the new version, for a win
		value   string
		err     error
	}
	winsFrom := map[uint64]int{}
	var read uint64 // the version every worker reads at the start of the round; 0 while the key is missing
	var lastValue string
	for round := range rounds {
		attempts := make([]attempt, workers)
		var reads, done sync.WaitGroup
		start := make(chan struct{})
		for w := range workers {
			reads.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				node, a := c.node(w%3), &attempts[w]
				e, err := node.GetEntry(ctx, key)
				reads.Done()
				if err != nil && !errors.Is(err, ErrNotFound) {
					a.err = err
					return
				}
				<-start
				a.from, a.value = e.Version, fmt.Sprintf("round %d by worker %d", round, w)
				a.version, a.err = node.CompareAndSwap(ctx, key, a.from, []byte(a.value))
			}()
		}
		reads.Wait()
		close(start)
		done.Wait()

		var winner *attempt
		for w := range attempts {
			a := &attempts[w]
			if a.from != read {
				t.Fatalf("round %d: worker %d read version %d, the key was at %d", round, w, a.from, read)
			}
			if a.err == nil {
				if winner != nil {
					t.Fatalf("round %d: two winners from version %d: %+v and %+v", round, read, *winner, *a)
				}
				winner = a
				winsFrom[a.from]++
			}
		}
		if winner == nil || winner.version <= read {
			t.Fatalf("round %d: no winner from version %d: %+v", round, read, attempts)
		}
		for w, a := range attempts {
			var vm *VersionMismatchError
			if a.err != nil && (!errors.As(a.err, &vm) || vm.Current != winner.version) {
				t.Fatalf("round %d: worker %d lost with %v; want a mismatch at the winner's version %d", round, w, a.err, winner.version)
			}
		}
		read, lastValue = winner.version, winner.value
	}
	if len(winsFrom) != rounds {
		t.Fatalf("wins from %d distinct versions in %d rounds: %v", len(winsFrom), rounds, winsFrom)
	}
	for v, wins := range winsFrom {
		if wins != 1 {
			t.Fatalf("%d wins from version %d", wins, v)
		}
	}
	for _, node := range c.live() {
		e, err := node.GetEntry(ctx, key)
		if err != nil || e.Version != read || string(e.Value) != lastValue {
			t.Fatalf("%s reads %+v, %v; want the last winner's %q at version %d", node.id, e, err, lastValue, read)
		}
	}
}

// TestVersionSurvivesFailover kills an owner: the replicas promoted in its place report the same version
// for each of its keys, and a compare-and-swap from that version succeeds there.
func TestVersionSurvivesFailover(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	ctx := bg(t)
	victim := (c.leader() + 1) % 3
	dead := c.node(victim).id
	versions := writeVersioned(t, c, 300)
	var theirs []string
	for key := range versions {
		if c.owner(key).id == dead {
			theirs = append(theirs, key)
		}
	}
	if len(theirs) == 0 {
		t.Fatal("the victim owns none of the keys")
	}
	c.kill(victim)
	c.waitFailedOver(dead, 20*time.Second)
	assertVersions(t, c, versions)
	for _, key := range theirs {
		if v, err := c.owner(key).CompareAndSwap(ctx, key, versions[key], []byte("after failover")); err != nil || v <= versions[key] {
			t.Fatalf("CompareAndSwap of %s from %d on its new owner = %d, %v", key, versions[key], v, err)
		}
	}
}

// TestVersionSurvivesMove adds a node and lets partitions move to it: the new owners report the same
// version for each key they took.
func TestVersionSurvivesMove(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, elastic())
	versions := writeVersioned(t, c, 300)
	joined := c.add(1)
	c.waitHealthy(30 * time.Second)
	moved := 0
	for key := range versions {
		if c.owner(key) == joined {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no key moved to the new node")
	}
	assertVersions(t, c, versions)
}

// TestVersionMismatchRevealsOnlyReplicatedState cuts an owner off just as it applies a Sync write, as
// TestReadNeverSeesUnreplicatedWrite does: neither GetEntry nor a compare-and-swap refused for a version
// mismatch may then report the version of that write, which a failover would lose.
func TestVersionMismatchRevealsOnlyReplicatedState(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.ReplicaAckTimeout = time.Second }))
	c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	owner := c.node((c.leader() + 1) % 3)
	key := c.keyOwnedBy("revealed", owner)
	v1, err := owner.CompareAndSwap(ctx, key, 0, []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	seg := owner.layout.KeySegment(key)
	c.isolate(owner)
	put := make(chan error, 1)
	go func() { _, err := owner.CompareAndSwap(ctx, key, v1, []byte("v2")); put <- err }()
	var v2 uint64
	waitFor(t, 5*time.Second, "the owner to apply the write locally", func() bool {
		v, version, ok := owner.own.store.get(seg, key)
		v2 = version
		return ok && string(v) == "v2"
	})
	readCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if e, err := owner.GetEntry(readCtx, key); err == nil && e.Version == v2 {
		t.Fatal("GetEntry returned the version of a write no replica holds")
	}
	var vm *VersionMismatchError
	if _, err := owner.CompareAndSwap(readCtx, key, v1, []byte("v3")); errors.As(err, &vm) && vm.Current == v2 {
		t.Fatal("a version mismatch revealed the version of a write no replica holds")
	} else if err == nil {
		t.Fatal("a compare-and-swap from a version the owner no longer holds succeeded")
	}
	if err := <-put; err == nil {
		t.Fatal("a write no replica could receive was acknowledged")
	}
	c.faults.HealAll()
}

// writeVersioned writes count keys, some of them more than once or deleted and re-created, and returns
// each key's version as GetEntry reads it.
func writeVersioned(t *testing.T, c *testCluster, count int) map[string]uint64 {
	t.Helper()
	ctx := bg(t)
	versions := map[string]uint64{}
	for i := range count {
		key := fmt.Sprintf("versioned-%d", i)
		n := c.node(i % len(c.live()))
		for range i % 3 {
			if err := n.Put(ctx, key, []byte("draft")); err != nil {
				t.Fatal(err)
			}
		}
		if i%5 == 0 {
			if _, err := n.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.Put(ctx, key, []byte(key)); err != nil {
			t.Fatal(err)
		}
		e, err := n.GetEntry(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		versions[key] = e.Version
	}
	return versions
}

// assertVersions checks that every live node reads each key at its recorded version, with its value.
func assertVersions(t *testing.T, c *testCluster, versions map[string]uint64) {
	t.Helper()
	ctx := bg(t)
	for _, n := range c.live() {
		for key, want := range versions {
			e, err := n.GetEntry(ctx, key)
			if err != nil || e.Version != want || string(e.Value) != key {
				t.Fatalf("%s reads %s = %+v, %v; want version %d", n.id, key, e, err, want)
			}
		}
	}
}
