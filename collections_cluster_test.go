package zaris

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// collectionFixture is what a test wrote to the collections of one key prefix, read back from any node.
type collectionFixture struct {
	hash  map[string][]byte
	set   []string
	list  [][]byte
	zset  []ZMember
	count int // keys of each kind
}

func writeCollections(t *testing.T, n *Node, count, fields int) *collectionFixture {
	t.Helper()
	ctx := bg(t)
	f := &collectionFixture{hash: map[string][]byte{}, count: count}
	for i := range fields {
		f.hash[fmt.Sprintf("field-%d", i)] = []byte(strings.Repeat("v", i%50))
		f.set = append(f.set, fmt.Sprintf("member-%d", i))
		f.list = append(f.list, []byte(fmt.Sprintf("item-%d", i)))
		f.zset = append(f.zset, ZMember{Member: fmt.Sprintf("z-%d", i), Score: float64(i) / 4})
	}
	slices.Sort(f.set)
	for k := range count {
		if _, err := n.HSet(ctx, fmt.Sprintf("hash-%d", k), f.hash); err != nil {
			t.Fatal(err)
		}
		if _, err := n.SAdd(ctx, fmt.Sprintf("set-%d", k), f.set...); err != nil {
			t.Fatal(err)
		}
		if _, err := n.RPush(ctx, fmt.Sprintf("list-%d", k), f.list...); err != nil {
			t.Fatal(err)
		}
		if _, err := n.ZAdd(ctx, fmt.Sprintf("zset-%d", k), f.zset...); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// check reads every collection through n and compares it with what was written.
func (f *collectionFixture) check(t *testing.T, n *Node, when string) {
	t.Helper()
	ctx := bg(t)
	for k := range f.count {
		hash, err := n.HGetAll(ctx, fmt.Sprintf("hash-%d", k))
		if err != nil || !maps.EqualFunc(hash, f.hash, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("%s: hash-%d through %s: %d fields, %v; want %d", when, k, n.id, len(hash), err, len(f.hash))
		}
		set, err := n.SMembers(ctx, fmt.Sprintf("set-%d", k))
		slices.Sort(set)
		if err != nil || !slices.Equal(set, f.set) {
			t.Fatalf("%s: set-%d through %s: %d members, %v; want %d", when, k, n.id, len(set), err, len(f.set))
		}
		list, err := n.LRange(ctx, fmt.Sprintf("list-%d", k), 0, -1)
		if err != nil || !slices.EqualFunc(list, f.list, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("%s: list-%d through %s: %d items, %v; want %d", when, k, n.id, len(list), err, len(f.list))
		}
		zset, err := n.ZRange(ctx, fmt.Sprintf("zset-%d", k), 0, -1)
		if err != nil || !slices.Equal(zset, f.zset) {
			t.Fatalf("%s: zset-%d through %s: %d members, %v; want %d", when, k, n.id, len(zset), err, len(f.zset))
		}
	}
}

// TestCollectionsSurviveMigrationAndFailover writes collections across a replicated cluster, checks that a
// write to a large hash sends replicas its field rather than the hash, then adds a node and kills an owner,
// and reads every collection back from every node each time: from the new node's partitions, then from
// the failed-over owners.
func TestCollectionsSurviveMigrationAndFailover(t *testing.T) {
	c := startCluster(t, 3, elastic(func(cfg *Config) {
		cfg.FailoverTimeout, cfg.WriteConcern, cfg.ReplicaAckTimeout = time.Second, Sync, 5*time.Second
	}))
	c.waitHealthy(30 * time.Second)
	ctx := bg(t)
	f := writeCollections(t, c.node(0), 24, 300)

	big := "large-hash"
	fields, batch := map[string][]byte{}, map[string][]byte{}
	for i := range 20_000 {
		batch[fmt.Sprintf("f%d", i)] = []byte(strings.Repeat("x", 100))
		if len(batch) == 2000 {
			if _, err := c.node(1).HSet(ctx, big, batch); err != nil {
				t.Fatal(err)
			}
			maps.Copy(fields, batch)
			clear(batch)
		}
	}
	c.waitHealthy(30 * time.Second)
	owner := c.owner(big)
	before := owner.ReplicationStats().BytesSent
	if _, err := owner.HSet(ctx, big, map[string][]byte{"f7": []byte("changed")}); err != nil {
		t.Fatal(err)
	}
	if sent := owner.ReplicationStats().BytesSent - before; sent == 0 || sent > 4096 {
		t.Fatalf("setting one field of a 2 MB hash sent replicas %d bytes", sent)
	}
	fields["f7"] = []byte("changed")
	checkBig := func(when string) {
		t.Helper()
		for _, n := range c.live() {
			if got, err := n.HGet(ctx, big, "f7"); err != nil || string(got) != "changed" {
				t.Fatalf("%s: %s reads f7 = %q, %v", when, n.id, got, err)
			}
			if size, err := n.HLen(ctx, big); err != nil || size != len(fields) {
				t.Fatalf("%s: %s reads %d fields, %v", when, n.id, size, err)
			}
		}
	}

	joined := c.add(1)
	c.waitHealthy(30 * time.Second)
	moved := 0
	for k := range f.count {
		for _, kind := range []string{"hash", "set", "list", "zset"} {
			if c.owner(fmt.Sprintf("%s-%d", kind, k)) == joined {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Fatal("no collection moved to the node that joined")
	}
	for _, n := range c.live() {
		f.check(t, n, "after migration")
	}
	checkBig("after migration")
	assertReplicasMatch(t, c)
	t.Logf("%d of %d collections moved to %s", moved, 4*f.count, joined.id)

	owner = c.owner(big)
	c.kill(slices.Index(c.live(), owner))
	c.waitFailedOver(owner.id, 20*time.Second)
	for _, n := range c.live() {
		f.check(t, n, "after failover")
	}
	checkBig("after failover")
}

// TestCollectionsSurviveRestart checks that collections come back from the data dir after a restart: from
// segment snapshots written with part of them, and from the collection ops logged after.
func TestCollectionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	c := startCluster(t, 1, func(cfg *Config) { cfg.DataDir, cfg.DiskDurability = dir, DiskSynced })
	n := c.node(0)
	ctx := bg(t)
	f := writeCollections(t, n, 8, 100)
	for seg := range n.layout.Segments {
		n.repl.disk.enqueue(diskItem{snap: n.repl.diskSnapshot(seg)})
	}
	for k := range f.count {
		if _, err := n.HDel(ctx, fmt.Sprintf("hash-%d", k), "field-3"); err != nil {
			t.Fatal(err)
		}
		if _, err := n.LPop(ctx, fmt.Sprintf("list-%d", k), 2); err != nil {
			t.Fatal(err)
		}
		if _, err := n.ZIncrBy(ctx, fmt.Sprintf("zset-%d", k), "z-5", 100); err != nil {
			t.Fatal(err)
		}
		if _, err := n.SRem(ctx, fmt.Sprintf("set-%d", k), "member-7"); err != nil {
			t.Fatal(err)
		}
	}
	delete(f.hash, "field-3")
	f.list = f.list[2:]
	f.zset = append(slices.Delete(f.zset, 5, 6), ZMember{Member: "z-5", Score: 5.0/4 + 100})
	f.set = slices.DeleteFunc(f.set, func(m string) bool { return m == "member-7" })
	f.check(t, n, "before the restart")
	before := n.store.digest(0)

	c.kill(0)
	n = c.restart(0)
	c.waitStable(20 * time.Second)
	if got := n.ReplicationStats().RecoveredOps; got == 0 {
		t.Fatal("the restart replayed no op: the snapshots hid the ops logged after them")
	}
	if after := n.store.digest(0); after != before {
		t.Fatalf("segment 0 after the restart: %+v, before: %+v", after, before)
	}
	f.check(t, n, "after the restart")
}
