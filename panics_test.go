package zaris

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// TestPanicInOpIsContained injects a panic into the put of one key on a 3-node cluster with RF 2: the Go
// API (from the owner and from another node) and a RESP client get an internal error, the owner keeps
// serving every other key and the poisoned key's stored value, no node gives up or dies, the leader stays,
// and the owner's zaris_panics_total{where="op"} counts each panic.
func TestPanicInOpIsContained(t *testing.T) {
	t.Parallel()
	const poison = "poisoned"
	var armed atomic.Bool
	c := startRESPCluster(t, 3, func(cfg *Config) {
		cfg.ReplicationFactor = 2
		cfg.hooks.panicOp = func(op transport.Op, key string) bool {
			return armed.Load() && op == kv.OpPut && key == poison
		}
	})
	c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	leader := c.leaderNode().id
	owner := c.owner(poison)
	var other *Node
	for _, n := range c.live() {
		if n != owner {
			other = n
		}
	}
	if err := other.Put(ctx, poison, []byte("before")); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)

	panics := 0
	for _, caller := range []*Node{owner, other} {
		err := caller.Put(ctx, poison, []byte("after"))
		if !errors.Is(err, ErrInternal) {
			t.Fatalf("a put that panics, called on %s: err %v, want ErrInternal", caller.id, err)
		}
		panics++
	}
	client := newClusterClient(t, c, 2)
	err := client.Set(ctx, poison, "after", 0).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "ERR internal error") {
		t.Fatalf("SET that panics over RESP: err %v, want ERR internal error", err)
	}
	panics++

	// The same connection, and the whole cluster, go on serving.
	for i := range 100 {
		key := fmt.Sprintf("other-%d", i)
		if err := client.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s after the panics: %v", key, err)
		}
		if err := c.node(i%3).Put(ctx, key+"-api", []byte("v")); err != nil {
			t.Fatalf("Put %s after the panics: %v", key, err)
		}
	}
	if got, err := client.Get(ctx, poison).Result(); err != nil || got != "before" {
		t.Fatalf("GET %s = %q, %v; want the value before the panics", poison, got, err)
	}
	if got, err := other.Get(ctx, poison); err != nil || string(got) != "before" {
		t.Fatalf("Get %s = %q, %v", poison, got, err)
	}
	for _, n := range c.live() {
		if n.panics.gaveUp.Load() {
			t.Fatalf("%s gave up after a panic that changed nothing", n.id)
		}
		if m := n.ClusterMap(); len(m.Nodes) != 3 || m.OwnedBy(n.id) == 0 {
			t.Fatalf("%s's map after the panics: %d nodes, %d partitions owned", n.id, len(m.Nodes), m.OwnedBy(n.id))
		}
		if n.ctl.leaderID() != leader {
			t.Fatalf("%s follows %q, the leader was %s", n.id, n.ctl.leaderID(), leader)
		}
	}
	if !c.allHealthy() {
		t.Fatal("a partition is no longer Healthy after the panics")
	}
	s := scrapeMetrics(t, metricsServer(t, owner))
	if got := s.value("zaris_panics_total", "where", "op"); got != float64(panics) {
		t.Fatalf(`zaris_panics_total{where="op"} = %v on the owner, want %d`, got, panics)
	}
	if got := s.value("zaris_panics_total"); got != float64(panics) {
		t.Fatalf("zaris_panics_total = %v on the owner, want %d", got, panics)
	}
}

// TestPanicMidWriteGivesUpTheNode injects a panic into a write after it changed the owner's segment and
// before replicas saw it: the owner gives up serving, its partitions fail over to their in-sync replicas,
// and the cluster serves the key with its last acknowledged value, and every other key.
func TestPanicMidWriteGivesUpTheNode(t *testing.T) {
	longScenario(t)
	t.Parallel()
	const poison = "torn"
	var armed atomic.Bool
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.ReplicationFactor = 2
		cfg.hooks.panicOnWrite = func(key string) bool { return armed.Load() && key == poison }
	})
	c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	owner := c.owner(poison)
	var others []*Node
	for _, n := range c.live() {
		if n != owner {
			others = append(others, n)
		}
	}
	for i := range 50 {
		if err := others[0].Put(ctx, fmt.Sprintf("k%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := others[0].Put(ctx, poison, []byte("acknowledged")); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if err := others[0].Put(ctx, poison, []byte("torn")); !errors.Is(err, ErrInternal) {
		t.Fatalf("a write that panics mid-way: err %v, want ErrInternal", err)
	}
	if !owner.panics.gaveUp.Load() {
		t.Fatal("the owner did not give up after a panic that left its segment torn")
	}
	if got := owner.panics.counts[panicInOp].Load(); got != 1 {
		t.Fatalf("the owner counted %d panics in an op, want 1", got)
	}
	for i := range c.live() {
		c.forget(i, owner) // it closes itself
	}
	c.waitFailedOver(owner.id, 30*time.Second)
	for _, n := range others {
		if got, err := n.Get(ctx, poison); err != nil || string(got) != "acknowledged" {
			t.Fatalf("Get %s from %s after the failover = %q, %v; want the acknowledged value", poison, n.id, got, err)
		}
		for i := range 50 {
			if _, err := n.Get(ctx, fmt.Sprintf("k%d", i)); err != nil {
				t.Fatalf("Get k%d from %s after the failover: %v", i, n.id, err)
			}
		}
	}
}

// TestPanicInReplicaApplyGivesUpTheReplica injects a panic into a replica's apply of its owner's stream,
// after the op changed its segment: the replica gives up serving, counting the panic where it happened, the
// owner drops it from the in-sync set and acknowledges the write, and the owner and the third node serve on.
func TestPanicInReplicaApplyGivesUpTheReplica(t *testing.T) {
	t.Parallel()
	const poison = "replicated"
	var replica atomic.Value // the name of the node whose apply panics
	replica.Store("")
	c := startCluster(t, 3, func(cfg *Config) {
		name := cfg.Name
		cfg.ReplicationFactor = 2
		cfg.hooks.panicOnWrite = func(key string) bool { return key == poison && replica.Load() == name }
	})
	c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	owner := c.owner(poison)
	st := owner.ClusterMap().Runtime[owner.layout.KeyPartition(poison)]
	if len(st.InSync) != 1 {
		t.Fatalf("partition of %s: in-sync replicas %v, want one", poison, st.InSync)
	}
	var victim, third *Node
	for _, n := range c.live() {
		switch n.id {
		case owner.id:
		case st.InSync[0]:
			victim = n
		default:
			third = n
		}
	}
	replica.Store(string(victim.id))
	if err := third.Put(ctx, poison, []byte("v")); err != nil {
		t.Fatalf("a write whose replica panics: %v", err)
	}
	if !victim.panics.gaveUp.Load() {
		t.Fatal("the replica did not give up after a panic that left its segment torn")
	}
	if got := victim.panics.counts[panicInReplication].Load(); got != 1 {
		t.Fatalf("the replica counted %d panics in replication, want 1", got)
	}
	for i := range c.live() {
		c.forget(i, victim)
	}
	for _, n := range []*Node{owner, third} {
		if got, err := n.Get(ctx, poison); err != nil || string(got) != "v" {
			t.Fatalf("Get %s from %s = %q, %v", poison, n.id, got, err)
		}
		if n.panics.gaveUp.Load() || n.panics.counts[panicInOp].Load() != 0 {
			t.Fatalf("%s gave up or counted a panic", n.id)
		}
	}
}

// TestHIncrByOfANewKeyOverRESP is the crash of a RESP HINCRBY on a key without a hash, which took down its
// owner and then the replica that took over: on 3 nodes with RF 2, it now starts a new hash, and every node
// stays up.
func TestHIncrByOfANewKeyOverRESP(t *testing.T) {
	c := startRESPCluster(t, 3, func(cfg *Config) { cfg.ReplicationFactor = 2 })
	ctx := bg(t)
	client := newClusterClient(t, c, 2)
	for i := range 20 {
		key := fmt.Sprintf("counter-%d", i)
		for want := int64(5); want <= 10; want += 5 {
			got, err := client.HIncrBy(ctx, key, "f", 5).Result()
			if err != nil || got != want {
				t.Fatalf("HINCRBY %s f 5 = %d, %v; want %d", key, got, err, want)
			}
		}
	}
	if got, err := client.HGet(ctx, "counter-0", "f").Result(); err != nil || got != "10" {
		t.Fatalf("HGET counter-0 f = %q, %v", got, err)
	}
	if _, err := client.HIncrBy(ctx, "counter-0", "f", 1<<62).Result(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.HIncrBy(ctx, "counter-0", "f", 1<<62).Result(); err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("HINCRBY past int64: err %v, want an overflow error", err)
	}
	for _, n := range c.live() {
		if n.panics.gaveUp.Load() || len(n.ClusterMap().Nodes) != 3 {
			t.Fatalf("%s after the HINCRBYs: gave up %v, %d nodes in its map", n.id, n.panics.gaveUp.Load(), len(n.ClusterMap().Nodes))
		}
		if got := n.panics.counts[panicInOp].Load(); got != 0 {
			t.Fatalf("%s recovered %d panics", n.id, got)
		}
	}
}

// TestStoreTornOnlyByAPanicMidWrite checks what the store tells of a panic: one while a write computes
// leaves the segment intact and unlocked; one after the write changed the segment and before its hook
// returned leaves it torn, until a snapshot replaces it, as does one in an atomic group's hook; one inside an
// atomic group between its writes undoes them.
func TestStoreTornOnlyByAPanicMidWrite(t *testing.T) {
	s := newStore(4, clocktest.New(time.Unix(1, 0)))
	var hookPanics atomic.Bool
	s.onWrite = func(int, uint64, uint64, string, *entry, writeChange) {
		if hookPanics.Load() {
			panic("hook")
		}
	}
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatalf("%s did not panic", what)
			}
		}()
		f()
	}
	s.put(1, "a", []byte("1"), forTTL(0))
	mustPanic("a collection write that panics while it computes", func() {
		s.writeCollection(1, "h", kindHash, func(collection) collOp { panic("compute") })
	})
	mustPanic("an update that panics while it computes", func() {
		s.update(1, "a", func(*entry, int64) (*entry, bool) { panic("compute") })
	})
	if torn := s.tornSegments(-1); len(torn) != 0 {
		t.Fatalf("torn segments %v after panics that changed nothing", torn)
	}
	if v, _, _ := s.get(1, "a"); string(v) != "1" {
		t.Fatalf("a = %q", v)
	}

	hookPanics.Store(true)
	mustPanic("a write whose hook panics", func() { s.put(2, "b", []byte("2"), forTTL(0)) })
	hookPanics.Store(false)
	mustPanic("an atomic group that panics after a write", func() {
		s.atomically(3, func(g *store) {
			g.put(3, "c", []byte("3"), forTTL(0))
			panic("group")
		})
	})
	if torn := s.tornSegments(3); len(torn) != 0 {
		t.Fatalf("torn segments %v after a group that panicked between its writes", torn)
	}
	if _, _, found := s.get(3, "c"); found || s.revision(3) != 0 {
		t.Fatalf("a group that panicked left its write: c found %v, revision %d", found, s.revision(3))
	}
	hookPanics.Store(true)
	mustPanic("an atomic group whose hook panics", func() {
		s.atomically(3, func(g *store) { g.put(3, "c", []byte("3"), forTTL(0)) })
	})
	hookPanics.Store(false)
	if torn := s.tornSegments(-1); fmt.Sprint(torn) != "[2 3]" {
		t.Fatalf("torn segments %v, want [2 3]", torn)
	}
	if torn := s.tornSegments(1); len(torn) != 0 {
		t.Fatalf("segment 1 reported torn: %v", torn)
	}
	s.restore(2, 0, []durability.Entry{})
	if torn := s.tornSegments(-1); fmt.Sprint(torn) != "[3]" {
		t.Fatalf("torn segments %v after a snapshot replaced segment 2, want [3]", torn)
	}
}

// TestPanicInBackgroundLoopsIsContained makes the leader's control loop panic as it commits a decision, an
// owner's hand-over panic once it has sealed a partition, and an owner's replica link panic as it admits
// a replica, each once, while a fourth node joins a 3-node cluster with RF 2: every panic is counted as
// a background one, no node gives up, and the loops go on until the new node holds its share and every
// partition is Healthy.
func TestPanicInBackgroundLoopsIsContained(t *testing.T) {
	t.Parallel()
	var armed atomic.Bool
	var decisionPanics, sealPanics, admitPanics atomic.Int32
	once := func(fired *atomic.Int32, what string) {
		if armed.Load() && fired.CompareAndSwap(0, 1) {
			panic("zaris: panic injected into " + what)
		}
	}
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.ReplicationFactor = 2
		cfg.hooks.beforeCommitDecision = func(decision) { once(&decisionPanics, "a decision") }
		cfg.hooks.afterSeal = func(int) { once(&sealPanics, "a hand-over") }
		cfg.hooks.beforeAdmit = func(int, NodeID) { once(&admitPanics, "an admission") }
	})
	c.waitHealthy(20 * time.Second)
	leader := c.leaderNode().id
	armed.Store(true)
	joined := c.add(3)
	waitFor(t, 30*time.Second, "the new node to own partitions, every one Healthy", func() bool {
		m := c.currentMap()
		return m.OwnedBy(joined.id) > 0 && !m.moving() && c.allHealthy()
	})
	c.waitHealthy(30 * time.Second)
	if decisionPanics.Load() == 0 || sealPanics.Load() == 0 {
		t.Fatalf("injected panics: %d in decisions, %d in hand-overs; want one of each", decisionPanics.Load(), sealPanics.Load())
	}
	want := float64(decisionPanics.Load() + sealPanics.Load() + admitPanics.Load())
	var counted float64
	for _, n := range c.live() {
		if n.panics.gaveUp.Load() {
			t.Fatalf("%s gave up after a panic in a background loop", n.id)
		}
		counted += scrapeMetrics(t, metricsServer(t, n)).value("zaris_panics_total", "where", "background")
	}
	if counted != want {
		t.Fatalf(`zaris_panics_total{where="background"} sums to %v over the nodes, want %v`, counted, want)
	}
	if got := c.leaderNode().id; got != leader {
		t.Logf("leader %s before the panics, %s after", leader, got)
	}
	if len(c.live()) != 4 {
		t.Fatalf("%d nodes live, want 4", len(c.live()))
	}
}
