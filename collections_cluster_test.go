package zaris

import (
	"errors"
	"fmt"
	"maps"
	"math"
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
		hash, err := served(t, func() (map[string][]byte, error) { return n.HGetAll(ctx, fmt.Sprintf("hash-%d", k)) })
		if err != nil || !maps.EqualFunc(hash, f.hash, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("%s: hash-%d through %s: %d fields, %v; want %d", when, k, n.id, len(hash), err, len(f.hash))
		}
		set, err := served(t, func() ([]string, error) { return n.SMembers(ctx, fmt.Sprintf("set-%d", k)) })
		slices.Sort(set)
		if err != nil || !slices.Equal(set, f.set) {
			t.Fatalf("%s: set-%d through %s: %d members, %v; want %d", when, k, n.id, len(set), err, len(f.set))
		}
		list, err := served(t, func() ([][]byte, error) { return n.LRange(ctx, fmt.Sprintf("list-%d", k), 0, -1) })
		if err != nil || !slices.EqualFunc(list, f.list, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("%s: list-%d through %s: %d items, %v; want %d", when, k, n.id, len(list), err, len(f.list))
		}
		zset, err := served(t, func() ([]ZMember, error) { return n.ZRange(ctx, fmt.Sprintf("zset-%d", k), 0, -1) })
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
	longScenario(t)
	t.Parallel()
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
			if got, err := served(t, func() ([]byte, error) { return n.HGet(ctx, big, "f7") }); err != nil || string(got) != "changed" {
				t.Fatalf("%s: %s reads f7 = %q, %v", when, n.id, got, err)
			}
			if size, err := served(t, func() (int, error) { return n.HLen(ctx, big) }); err != nil || size != len(fields) {
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
	t.Parallel()
	dir := t.TempDir()
	c := startCluster(t, 1, func(cfg *Config) { cfg.DataDir, cfg.DiskDurability = dir, DiskSynced })
	n := c.node(0)
	ctx := bg(t)
	f := writeCollections(t, n, 8, 100)
	for seg := range n.layout.Segments {
		n.own.repl.checkpointToDisk(seg)
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
	before := n.own.store.digest(0)

	c.kill(0)
	n = c.restart(0)
	c.waitStable(20 * time.Second)
	if got := n.ReplicationStats().RecoveredOps; got == 0 {
		t.Fatal("the restart replayed no op: the snapshots hid the ops logged after them")
	}
	if after := n.own.store.digest(0); after != before {
		t.Fatalf("segment 0 after the restart: %+v, before: %+v", after, before)
	}
	f.check(t, n, "after the restart")
}

// TestCollectionGoAPI runs every collection method through the key's owner, in process, and through
// another node, over the wire, and checks results and errors.
func TestCollectionGoAPI(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, nil)
	ctx := bg(t)
	owner := c.owner("{api}")
	other := c.node(0)
	if other == owner {
		other = c.node(1)
	}
	for _, n := range []*Node{owner, other} {
		key := func(kind string) string { return fmt.Sprintf("{api}%s-%s", kind, n.id) }
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("through %s: %v", n.id, err)
			}
		}
		h := key("hash")
		added, err := n.HSet(ctx, h, map[string][]byte{"a": []byte("1"), "b": {}})
		must(err)
		values, err := n.HMGet(ctx, h, "a", "zz", "b")
		must(err)
		if added != 2 || len(values) != 3 || string(values[0]) != "1" || values[1] != nil || values[2] == nil || len(values[2]) != 0 {
			t.Fatalf("HSet added %d, HMGet = %q", added, values)
		}
		sum, err := n.HIncrBy(ctx, h, "a", 41)
		must(err)
		exists, err := n.HExists(ctx, h, "b")
		must(err)
		if sum != 42 || !exists {
			t.Fatalf("HIncrBy = %d, HExists = %v", sum, exists)
		}
		if _, err := n.HGet(ctx, h, "zz"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("HGet of a missing field: %v", err)
		}
		if _, err := n.HIncrBy(ctx, h, "a", math.MaxInt64); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("HIncrBy overflowing: %v", err)
		}

		s := key("set")
		_, err = n.SAdd(ctx, s, "x", "y")
		must(err)
		member, err := n.SIsMember(ctx, s, "y")
		must(err)
		card, err := n.SCard(ctx, s)
		must(err)
		if !member || card != 2 {
			t.Fatalf("SIsMember = %v, SCard = %d", member, card)
		}

		l := key("list")
		_, err = n.LPush(ctx, l, []byte("b"), []byte("a"))
		must(err)
		_, err = n.RPush(ctx, l, []byte("c"), []byte("d"))
		must(err)
		must(n.LTrim(ctx, l, 0, 2))
		last, err := n.RPop(ctx, l, 1)
		must(err)
		item, err := n.LIndex(ctx, l, -1)
		must(err)
		length, err := n.LLen(ctx, l)
		must(err)
		if len(last) != 1 || string(last[0]) != "c" || string(item) != "b" || length != 2 {
			t.Fatalf("RPop = %q, LIndex = %q, LLen = %d", last, item, length)
		}
		if _, err := n.LIndex(ctx, l, 5); !errors.Is(err, ErrNotFound) {
			t.Fatalf("LIndex out of range: %v", err)
		}

		z := key("zset")
		_, err = n.ZAdd(ctx, z, ZMember{"a", 1.5}, ZMember{"b", -2}, ZMember{"c", math.Inf(1)})
		must(err)
		score, err := n.ZScore(ctx, z, "a")
		must(err)
		rank, err := n.ZRank(ctx, z, "c")
		must(err)
		byScore, err := n.ZRangeByScore(ctx, z, -10, 10, 0, -1)
		must(err)
		removed, err := n.ZRem(ctx, z, "b", "zz")
		must(err)
		zcard, err := n.ZCard(ctx, z)
		must(err)
		if score != 1.5 || rank != 2 || len(byScore) != 2 || byScore[0] != (ZMember{"b", -2}) || removed != 1 || zcard != 2 {
			t.Fatalf("ZScore = %v, ZRank = %d, ZRangeByScore = %v, ZRem = %d, ZCard = %d", score, rank, byScore, removed, zcard)
		}
		changed, err := n.ZAddWith(ctx, z, ZAddOptions{GreaterThan: true, CountChanged: true}, ZMember{"a", 1}, ZMember{"c", 0}, ZMember{"d", 3})
		must(err)
		if score, _ := n.ZScore(ctx, z, "a"); changed != 1 || score != 1.5 {
			t.Fatalf("ZAddWith GT CH counted %d and left a at %v; want 1 (d added) and 1.5", changed, score)
		}
		if _, err := n.ZAddWith(ctx, z, ZAddOptions{IfAbsent: true, IfExists: true}, ZMember{"a", 1}); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("ZAddWith NX XX: %v", err)
		}
		if _, err := n.ZRank(ctx, z, "zz"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ZRank of a missing member: %v", err)
		}

		for k, want := range map[string]string{h: "hash", s: "set", l: "list", z: "zset", key("none"): "none"} {
			if got, err := n.Type(ctx, k); err != nil || got != want {
				t.Fatalf("Type(%s) = %q, %v; want %q", k, got, err, want)
			}
		}
		if _, err := n.Get(ctx, h); !errors.Is(err, ErrWrongType) {
			t.Fatalf("Get of a hash: %v", err)
		}
		if _, err := n.SAdd(ctx, h, "m"); !errors.Is(err, ErrWrongType) {
			t.Fatalf("SAdd to a hash: %v", err)
		}
		if _, err := n.HSet(ctx, h, map[string][]byte{"big": make([]byte, n.cfg.MaxValueSize)}); !errors.Is(err, ErrValueTooLarge) {
			t.Fatalf("HSet beyond MaxValueSize: %v", err)
		}
	}
}
