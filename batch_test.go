package zaris

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"

	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// addClient adds a lite node, which owns nothing and acts as a pure client: every key it touches costs a
// request to another node.
func addClient(t *testing.T, c *testCluster) *Node {
	t.Helper()
	client := c.addWith(len(c.live()), func(cfg *Config) { cfg.Lite = true })
	c.waitStable(20 * time.Second)
	if owned := client.ClusterMap().OwnedBy(client.id); owned != 0 {
		t.Fatalf("lite node %s owns %d partitions; want none", client.id, owned)
	}
	return client
}

// keysOwnedBy counts keys per owner according to the committed map.
func keysOwnedBy(c *testCluster, keys []string) map[NodeID]uint64 {
	counts := map[NodeID]uint64{}
	for _, key := range keys {
		counts[c.owner(key).id]++
	}
	return counts
}

func statsOf(nodes []*Node) map[NodeID]Stats {
	out := map[NodeID]Stats{}
	for _, n := range nodes {
		out[n.id] = n.Stats()
	}
	return out
}

func putEntries(keys []string) []KeyValue {
	entries := make([]KeyValue, len(keys))
	for i, key := range keys {
		entries[i] = KeyValue{Key: key, Value: []byte("value-of-" + key)}
	}
	return entries
}

// requireAll fails the test unless every result succeeded, in the order of keys.
func requireAll(t *testing.T, what string, results []BatchResult, err error, keys []string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if len(results) != len(keys) {
		t.Fatalf("%s: %d results for %d keys", what, len(results), len(keys))
	}
	for i, r := range results {
		if r.Index != i || r.Key != keys[i] || r.Err != nil || r.Status != StatusSuccess {
			t.Fatalf("%s: result %d = %+v; want success for key %q", what, i, r, keys[i])
		}
	}
}

// TestBatchOneRequestPerOwner checks, by counting at both ends, that a batch costs one request per distinct
// owner however many keys it holds, and that the caller's own keys cost none.
func TestBatchOneRequestPerOwner(t *testing.T) {
	c := startCluster(t, 4, nil)
	client := addClient(t, c)
	ctx := bg(t)
	keys := randomKeys(rand.New(rand.NewPCG(4, 1000)), 1000)
	want := keysOwnedBy(c, keys)
	if len(want) != 4 {
		t.Fatalf("keys spread over %d owners; want 4", len(want))
	}

	checkFanOut := func(what string, caller *Node, call func() ([]BatchResult, error)) []BatchResult {
		t.Helper()
		before := statsOf(c.live())
		results, err := call()
		requireAll(t, what, results, err, keys)
		after := statsOf(c.live())
		cb, ca := before[caller.id], after[caller.id]
		for id, items := range want {
			sent := ca.RequestsSent[id] - cb.RequestsSent[id]
			served := after[id].RequestsServed - before[id].RequestsServed
			batchItems := after[id].BatchItemsServed - before[id].BatchItemsServed
			if id == caller.id {
				if local := ca.LocalOps - cb.LocalOps; local != items || served != 0 {
					t.Errorf("%s: caller served %d own items locally and %d requests; want %d and 0", what, local, served, items)
				}
				continue
			}
			if sent != 1 || served != 1 || batchItems != items {
				t.Errorf("%s: owner %s: %d requests sent, %d served, %d items; want 1, 1, %d",
					what, id, sent, served, batchItems, items)
			}
		}
		if ca.Retries != cb.Retries || ca.RedirectsReceived != cb.RedirectsReceived {
			t.Errorf("%s: %d retries, %d redirects; want none", what,
				ca.Retries-cb.Retries, ca.RedirectsReceived-cb.RedirectsReceived)
		}
		return results
	}

	checkFanOut("put many", client, func() ([]BatchResult, error) { return client.PutMany(ctx, putEntries(keys)) })
	got := checkFanOut("get many", client, func() ([]BatchResult, error) { return client.GetMany(ctx, keys) })
	for i, r := range got {
		if want := "value-of-" + keys[i]; string(r.Value) != want || r.Version == 0 {
			t.Fatalf("get %q = %q version %d; want %q", keys[i], r.Value, r.Version, want)
		}
	}
	checkFanOut("get many from an owner", c.node(0), func() ([]BatchResult, error) { return c.node(0).GetMany(ctx, keys) })
	checkFanOut("delete many", client, func() ([]BatchResult, error) { return client.DeleteMany(ctx, keys) })
	gone, err := client.GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range gone {
		if r.Status != StatusNotFound || !errors.Is(r.Err, ErrNotFound) {
			t.Fatalf("get of deleted %q = %+v; want NotFound", r.Key, r)
		}
	}
}

// batchModel replays items one after another in Index order, which is what a batch must be equivalent to
// for every single key.
type batchModel struct {
	values   map[string][]byte
	versions map[string]uint64 // last version seen per key, to check that versions grow
}

func (m *batchModel) check(t *testing.T, items []BatchItem, results []BatchResult) {
	t.Helper()
	sorted := slices.Clone(items)
	slices.SortStableFunc(sorted, func(a, b BatchItem) int { return a.Index - b.Index })
	if len(results) != len(sorted) {
		t.Fatalf("%d results for %d items", len(results), len(sorted))
	}
	for i, it := range sorted {
		r := results[i]
		if r.Index != it.Index || r.Key != it.Key || r.Op != it.Op {
			t.Fatalf("result %d is for %d %s %q; want %d %s %q", i, r.Index, r.Op, r.Key, it.Index, it.Op, it.Key)
		}
		value, exists := m.values[it.Key]
		wantStatus := StatusSuccess
		switch it.Op {
		case BatchGet:
			if !exists {
				wantStatus = StatusNotFound
			} else if !bytes.Equal(r.Value, value) {
				t.Fatalf("item %d: get %q = %q; want %q", it.Index, it.Key, r.Value, value)
			}
		case BatchPut:
			m.values[it.Key] = it.Value
			if r.Version <= m.versions[it.Key] {
				t.Fatalf("item %d: put %q got version %d after %d", it.Index, it.Key, r.Version, m.versions[it.Key])
			}
			m.versions[it.Key] = r.Version
		case BatchDelete:
			if !exists {
				wantStatus = StatusNotFound
			}
			delete(m.values, it.Key)
		}
		if r.Status != wantStatus || !errors.Is(r.Err, statusErr(wantStatus)) || (wantStatus == StatusSuccess) != (r.Err == nil) {
			t.Fatalf("item %d: %s %q = %s, %v; want %s", it.Index, it.Op, it.Key, r.Status, r.Err, wantStatus)
		}
	}
}

// randomMix returns n items over a few hot keys (so most keys repeat), with Index a shuffled permutation
// of 0..n-1: the slice order is not the Index order.
func randomMix(rng *rand.Rand, n, hotKeys, valueSize int) []BatchItem {
	items := make([]BatchItem, n)
	for i, idx := range rng.Perm(n) {
		key := fmt.Sprintf("mix-%d", rng.IntN(hotKeys))
		op := BatchOp(1 + rng.IntN(3))
		items[i] = BatchItem{Index: idx, Op: op, Key: key}
		if op == BatchPut {
			items[i].Value = bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, 1+rng.IntN(valueSize))
		}
	}
	return items
}

// TestBatchResultsInCallerOrder checks, against a sequential replay, that results come back sorted by
// Index for random mixes of gets, puts and deletes in which most keys repeat, from a pure client and from
// an owner (whose own items are served in-process), with the owner's workers racing.
func TestBatchResultsInCallerOrder(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *Config) { cfg.BatchParallelism = 8 })
	client := addClient(t, c)
	ctx := bg(t)
	model := &batchModel{values: map[string][]byte{}, versions: map[string]uint64{}}
	rng := rand.New(rand.NewPCG(9, 9))
	for round := 0; round < 20; round++ {
		caller := []*Node{client, c.node(0)}[round%2]
		items := randomMix(rng, 1600, 40, 64) // several lanes of minLaneItems on each owner
		results, err := caller.ExecuteBatch(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		model.check(t, items, results)
	}
}

// TestBatchDuplicateKeysApplyInIndexOrder spells out the duplicate-key rule on one key: a get sees the
// puts and deletes of lower Index in the same batch, and equal Indexes keep the caller's order.
func TestBatchDuplicateKeysApplyInIndexOrder(t *testing.T) {
	c := startCluster(t, 2, nil)
	client := addClient(t, c)
	ctx := bg(t)
	items := []BatchItem{ // deliberately not in Index order
		{Index: 5, Op: BatchGet, Key: "dup"},
		{Index: 4, Op: BatchDelete, Key: "dup"},
		{Index: 3, Op: BatchGet, Key: "dup"},
		{Index: 2, Op: BatchPut, Key: "dup", Value: []byte("two")},
		{Index: 1, Op: BatchGet, Key: "dup"},
		{Index: 0, Op: BatchPut, Key: "dup", Value: []byte("one")},
		{Index: 6, Op: BatchPut, Key: "dup", Value: []byte("three")},
		{Index: 6, Op: BatchGet, Key: "dup"}, // same Index: after the put above it
	}
	results, err := client.ExecuteBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		op     BatchOp
		status Status
		value  string
	}{
		{BatchPut, StatusSuccess, ""}, {BatchGet, StatusSuccess, "one"}, {BatchPut, StatusSuccess, ""},
		{BatchGet, StatusSuccess, "two"}, {BatchDelete, StatusSuccess, ""}, {BatchGet, StatusNotFound, ""},
		{BatchPut, StatusSuccess, ""}, {BatchGet, StatusSuccess, "three"},
	}
	for i, w := range want {
		r := results[i]
		if r.Op != w.op || r.Status != w.status || string(r.Value) != w.value {
			t.Errorf("result %d (Index %d) = %s %s %q; want %s %s %q", i, r.Index, r.Op, r.Status, r.Value, w.op, w.status, w.value)
		}
	}
	if results[1].Version != results[0].Version || results[3].Version != results[2].Version {
		t.Errorf("gets did not see the versions of the puts before them: %+v", results)
	}
}

// TestBatchReplansMovedItems gives the caller a stale table for one partition: that partition's items are
// refused by the wrong node, re-planned after one refresh and resent to the real owner, and no other item
// is sent twice.
func TestBatchReplansMovedItems(t *testing.T) {
	c := startCluster(t, 4, nil)
	client := addClient(t, c)
	ctx := bg(t)
	keys := randomKeys(rand.New(rand.NewPCG(5, 5)), 1000)
	results, err := client.PutMany(ctx, putEntries(keys))
	requireAll(t, "put many", results, err, keys)
	p := client.layout.KeyPartition(keys[0])
	owner := c.owner(keys[0])
	var wrong *Node
	for _, n := range c.live() {
		if n != owner && n != client {
			wrong = n
			break
		}
	}
	var moved uint64
	for _, key := range keys {
		if client.layout.KeyPartition(key) == p {
			moved++
		}
	}
	owned := keysOwnedBy(c, keys)
	installStaleTable(client, p, wrong.id)
	before := statsOf(c.live())

	results, err = client.GetMany(ctx, keys)
	requireAll(t, "get many through a stale table", results, err, keys)
	for i, r := range results {
		if string(r.Value) != "value-of-"+keys[i] {
			t.Fatalf("get %q = %q", keys[i], r.Value)
		}
	}

	after := statsOf(c.live())
	cb, ca := before[client.id], after[client.id]
	delta := func(id NodeID, f func(Stats) uint64) uint64 { return f(after[id]) - f(before[id]) }
	items := func(s Stats) uint64 { return s.BatchItemsServed }
	var servedItems uint64
	for id := range owned {
		servedItems += delta(id, items)
	}
	checks := []struct {
		what      string
		got, want uint64
	}{
		{"items resent", ca.Retries - cb.Retries, moved},
		{"redirected items", ca.RedirectsReceived - cb.RedirectsReceived, moved},
		{"reactive refreshes", ca.Refreshes.React - cb.Refreshes.React, 1},
		{"items refused by the wrong node", delta(wrong.id, func(s Stats) uint64 { return s.RedirectsSent }), moved},
		{"items served in all (each once, the moved ones twice)", servedItems, uint64(len(keys)) + moved},
		{"items served by the wrong node", delta(wrong.id, items), owned[wrong.id] + moved},
		{"items served by the owner", delta(owner.id, items), owned[owner.id]},
		{"requests to the wrong node", ca.RequestsSent[wrong.id] - cb.RequestsSent[wrong.id], 1},
		{"requests to the owner (first plan, then the resend)", ca.RequestsSent[owner.id] - cb.RequestsSent[owner.id], 2},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %d; want %d", ch.what, ch.got, ch.want)
		}
	}
	if moved == 0 {
		t.Fatal("no key in the stale partition")
	}
}

// TestBatchRetriesExhaustedPerItem checks that items that keep landing on non-owners fail alone, with a
// RoutingError naming their partition, while the rest of the batch succeeds.
func TestBatchRetriesExhaustedPerItem(t *testing.T) {
	c := startCluster(t, 2, func(cfg *Config) { cfg.MaxRetries = 2 })
	ctx := bg(t)
	a, b := c.node(0), c.node(1)
	var bounce, fine []string
	p := -1
	for i := 0; len(bounce) < 5 || len(fine) < 40; i++ {
		key := fmt.Sprintf("k%d", i)
		switch kp := a.layout.KeyPartition(key); {
		case p < 0 && c.owner(key) == a:
			p = kp
			bounce = append(bounce, key)
		case kp == p:
			bounce = append(bounce, key)
		case len(fine) < 40:
			fine = append(fine, key)
		}
	}
	// As in TestRetriesExhaustedNamesPartition: a's committed view says b owns p, b's says a does.
	m := a.ClusterMap().clone()
	m.Runtime[p].Owner = b.id
	a.ctl.fsm.current.Store(m)
	installStaleTable(a, p, b.id)

	keys := append(slices.Clone(fine), bounce...)
	results, err := a.PutMany(ctx, putEntries(keys))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if i < len(fine) {
			if r.Err != nil {
				t.Fatalf("put %q: %v", r.Key, r.Err)
			}
			continue
		}
		var rerr *RoutingError
		if !errors.As(r.Err, &rerr) || !errors.Is(r.Err, ErrRetriesExhausted) || !errors.Is(r.Err, ErrMoved) {
			t.Fatalf("put %q: err = %v; want a RoutingError matching ErrRetriesExhausted and ErrMoved", r.Key, r.Err)
		}
		if rerr.Partition != p || rerr.Attempts != 3 || r.Status != StatusMoved {
			t.Fatalf("put %q: %+v, status %s; want partition %d after 3 attempts, Moved", r.Key, rerr, r.Status, p)
		}
	}
}

// TestBatchPartialFailure checks that an owner the caller cannot reach fails only its own items, with an
// error naming it, while the other owners' items succeed.
func TestBatchPartialFailure(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (c *testCluster, client, lost *Node, keys []string) {
		c = startCluster(t, 4, nil)
		client = addClient(t, c)
		keys = randomKeys(rand.New(rand.NewPCG(6, 6)), 400)
		results, err := client.PutMany(bg(t), putEntries(keys))
		requireAll(t, "put many", results, err, keys)
		for _, n := range c.live() { // not the leader: cutting it off must not move the control plane
			if n != client && !n.IsLeader() {
				lost = n
				break
			}
		}
		return c, client, lost, keys
	}
	checkSplit := func(t *testing.T, c *testCluster, lost NodeID, results []BatchResult, lostErr func(error) bool) {
		t.Helper()
		var failed int
		for _, r := range results {
			if owner := c.owner(r.Key); owner != nil && owner.id != lost {
				if r.Err != nil || string(r.Value) != "value-of-"+r.Key {
					t.Fatalf("get %q from a reachable owner = %q, %v", r.Key, r.Value, r.Err)
				}
				continue
			}
			failed++
			if r.Err == nil || errors.Is(r.Err, ErrNotFound) || !lostErr(r.Err) {
				t.Fatalf("get %q from the lost owner: status %s, err = %v", r.Key, r.Status, r.Err)
			}
		}
		if failed == 0 {
			t.Fatal("no key on the lost owner")
		}
	}

	t.Run("partitioned", func(t *testing.T) {
		c, client, lost, keys := setup(t)
		c.faults.Partition(string(client.id), string(lost.id))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		results, err := client.GetMany(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Fatalf("batch returned after %v", elapsed)
		}
		checkSplit(t, c, lost.id, results, func(err error) bool {
			return errors.Is(err, ErrNoReply) && errors.Is(err, context.DeadlineExceeded) &&
				strings.Contains(err.Error(), string(lost.id))
		})
		c.faults.HealAll()
		results, err = client.GetMany(bg(t), keys)
		requireAll(t, "get many after heal", results, err, keys)
	})

	t.Run("killed", func(t *testing.T) {
		c, client, lost, keys := setup(t)
		for i := 0; c.node(i) != client; i++ {
			if c.node(i) == lost {
				c.kill(i)
			}
		}
		results, err := client.GetMany(bg(t), keys)
		if err != nil {
			t.Fatal(err)
		}
		// The control plane may already have marked the dead node's partitions Unavailable.
		checkSplit(t, c, lost.id, results, func(err error) bool {
			transportErr := errors.Is(err, transport.ErrUnreachable) || errors.Is(err, transport.ErrConnectionLost)
			return (errors.Is(err, ErrNoReply) && transportErr && strings.Contains(err.Error(), string(lost.id))) ||
				errors.Is(err, ErrPartitionUnavailable)
		})
	})
}

// TestBatchBadInput checks that a bad item fails alone and that calls that cannot start fail as a whole.
func TestBatchBadInput(t *testing.T) {
	c := startCluster(t, 2, func(cfg *Config) { cfg.MaxValueSize = 1024 })
	client := addClient(t, c)
	ctx := bg(t)

	items := []BatchItem{
		{Index: 0, Op: BatchPut, Key: "small", Value: []byte("ok")},
		{Index: 1, Op: BatchPut, Key: "big", Value: make([]byte, 1025)},
		{Index: 2, Op: BatchOp(9), Key: "odd"},
		{Index: 3, Op: BatchGet, Key: "small"},
	}
	results, err := client.ExecuteBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Err != nil || results[3].Err != nil || string(results[3].Value) != "ok" {
		t.Fatalf("good items: %+v, %+v", results[0], results[3])
	}
	if !errors.Is(results[1].Err, ErrValueTooLarge) || results[1].Status != StatusInvalidRequest {
		t.Fatalf("oversized put: %s, %v; want InvalidRequest, ErrValueTooLarge", results[1].Status, results[1].Err)
	}
	if !errors.Is(results[2].Err, ErrInvalidRequest) {
		t.Fatalf("unknown op: err = %v; want ErrInvalidRequest", results[2].Err)
	}
	if _, err := client.Get(ctx, "big"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("oversized value was stored: err = %v", err)
	}

	before := client.Stats()
	if results, err := client.ExecuteBatch(ctx, nil); err != nil || len(results) != 0 {
		t.Fatalf("empty batch = %v, %v", results, err)
	}
	after := client.Stats()
	for id, sent := range after.RequestsSent {
		if sent != before.RequestsSent[id] {
			t.Fatalf("empty batch sent a request to %s", id)
		}
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if results, err := client.GetMany(cancelled, []string{"small"}); !errors.Is(err, context.Canceled) || results != nil {
		t.Fatalf("cancelled batch = %v, %v; want context.Canceled", results, err)
	}
	if _, err := client.PutMany(ctx, putEntries([]string{"x"}), IfAbsent()); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("conditional PutMany: err = %v; want ErrInvalidRequest", err)
	}
	client.Close()
	if _, err := client.GetMany(ctx, []string{"small"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("batch on a closed node: err = %v; want ErrClosed", err)
	}
}

// TestBatchSplitsUnderFrameLimit uses small frames: a batch too big for one frame goes in several requests,
// replies whose values would overflow a frame come back in parts, and every item is still answered once,
// in order, with duplicate keys applied in order.
func TestBatchSplitsUnderFrameLimit(t *testing.T) {
	const frame, valueSize = 8192, 1024
	c := startCluster(t, 2, func(cfg *Config) { cfg.MaxFrameSize, cfg.MaxValueSize = frame, valueSize })
	client := addClient(t, c)
	ctx := bg(t)
	owner := c.owner("{one}")
	keys := make([]string, 300)
	entries := make([]KeyValue, len(keys))
	var requestBytes int
	for i := range keys {
		keys[i] = fmt.Sprintf("{one}:%d", i) // one owner, so only the frame limit splits the batch
		entries[i] = KeyValue{Key: keys[i], Value: bytes.Repeat([]byte{byte(i)}, 200)}
		requestBytes += len(keys[i]) + 200
	}

	before := client.Stats()
	results, err := client.PutMany(ctx, entries)
	requireAll(t, "put many", results, err, keys)
	mid := client.Stats()
	if puts := mid.RequestsSent[owner.id] - before.RequestsSent[owner.id]; puts < uint64(requestBytes/frame+1) {
		t.Fatalf("%d bytes of keys and values went in %d requests of at most %d bytes", requestBytes, puts, frame)
	}

	results, err = client.GetMany(ctx, keys)
	requireAll(t, "get many", results, err, keys)
	// Values of one reply share memory; appending to one must not overwrite its neighbours.
	_ = append(results[0].Value, bytes.Repeat([]byte{'x'}, 500)...)
	for i, r := range results {
		if !bytes.Equal(r.Value, entries[i].Value) {
			t.Fatalf("get %q = %d bytes; want its 200", keys[i], len(r.Value))
		}
	}
	after := client.Stats()
	if gets := after.RequestsSent[owner.id] - mid.RequestsSent[owner.id]; gets < uint64(len(keys)*200/frame+1) {
		t.Fatalf("%d bytes of values came back in %d replies of at most %d bytes", len(keys)*200, gets, frame)
	}
	if after.Retries != before.Retries {
		t.Fatalf("%d routing retries; splitting is not a retry", after.Retries-before.Retries)
	}

	model := &batchModel{values: map[string][]byte{}, versions: map[string]uint64{}}
	for _, r := range results {
		model.values[r.Key], model.versions[r.Key] = r.Value, r.Version
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for round := 0; round < 5; round++ {
		items := randomMix(rng, 300, 30, valueSize)
		for i := range items {
			items[i].Key = "{one}:" + strings.TrimPrefix(items[i].Key, "mix-")
		}
		results, err := client.ExecuteBatch(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		model.check(t, items, results)
	}
}

// TestGetManyTyped checks that typed batch reads decode through the same helper as GetTyped and that a
// value that does not decode fails its item only.
func TestGetManyTyped(t *testing.T) {
	c := startCluster(t, 2, nil)
	ctx := bg(t)
	type point struct{ X, Y int }
	var keys []string
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("point:%d", i)
		keys = append(keys, key)
		if err := PutTyped(ctx, c.node(0), key, point{i, -i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.node(0).Put(ctx, keys[7], []byte{0xc1}); err != nil {
		t.Fatal(err)
	}
	results, err := GetManyTyped[point](ctx, c.node(1), append(keys, "point:missing"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results[:len(keys)] {
		switch {
		case i == 7:
			if !errors.Is(r.Err, ErrDecode) {
				t.Fatalf("undecodable value: err = %v; want ErrDecode", r.Err)
			}
		case r.Err != nil || r.Value != (point{i, -i}):
			t.Fatalf("result %d = %+v", i, r)
		}
	}
	if last := results[len(keys)]; !errors.Is(last.Err, ErrNotFound) {
		t.Fatalf("missing key: err = %v; want ErrNotFound", last.Err)
	}
}

// TestBatchWireOverheads checks the per-item byte bounds the splitting relies on, with every field at its
// widest, and that an encoded batch decodes to what was sent.
func TestBatchWireOverheads(t *testing.T) {
	key, value := strings.Repeat("k", 70000), make([]byte, 70000) // 32-bit length headers
	req := batchItemWire{Index: math.MaxInt64, Op: 65535, Req: kv.Request{Key: key, Value: value, TTL: math.MinInt64}}
	encoded := appendBatchRequestItem(appendBatchHeader(nil, 1), &req)
	if extra := len(encoded) - len(key) - len(value); extra > batchHeaderOverhead+batchRequestItemOverhead {
		t.Fatalf("request item takes %d bytes beyond key and value; the bound is %d", extra, batchRequestItemOverhead)
	}
	var w batchWork
	err := w.decodeRequest(encoded)
	if decoded := w.items; err != nil || len(decoded) != 1 || decoded[0].Index != req.Index || decoded[0].Req.Key != key ||
		decoded[0].Req.TTL != math.MinInt64 || !bytes.Equal(decoded[0].Req.Value, value) {
		t.Fatalf("request round trip: %v", err)
	}

	owner := NodeID(strings.Repeat("n", 70000))
	reply := []batchItemReply{{Index: math.MaxInt64, Withheld: true, Reply: kv.Reply{
		Status: Status(255), Value: value, Version: math.MaxUint64, Owner: owner, Epoch: math.MaxUint64, MapIndex: math.MaxUint64,
		Int: math.MinInt64,
	}}}
	encoded = appendBatchReply(nil, reply)
	if extra := len(encoded) - len(value) - len(owner); extra > batchHeaderOverhead+batchReplyItemOverhead {
		t.Fatalf("reply item takes %d bytes beyond value and owner; the bound is %d", extra, batchReplyItemOverhead)
	}
	var back []batchItemReply
	collect := func(r *batchItemReply) error { back = append(back, *r); return nil }
	err = decodeBatchReply(encoded, collect)
	if err != nil || len(back) != 1 || back[0].Index != math.MaxInt64 || !back[0].Withheld ||
		back[0].Reply.Owner != owner || back[0].Reply.MapIndex != math.MaxUint64 || back[0].Reply.Int != math.MinInt64 {
		t.Fatalf("reply round trip: %v", err)
	}
	if err := decodeBatchReply(encoded[:len(encoded)-1], collect); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("truncated reply: err = %v; want ErrInvalidRequest", err)
	}
	// A count larger than the bytes that follow is refused before anything is allocated.
	if err := w.decodeRequest([]byte{0xdd, 0x7f, 0xff, 0xff, 0xff}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("oversized count: err = %v; want ErrInvalidRequest", err)
	}
}

// TestBatchWireOlderAndNewerWriters checks that reply items without the ttl, from an owner of an older
// version, decode with none, one after another, and that items with a field past the ttl decode too.
func TestBatchWireOlderAndNewerWriters(t *testing.T) {
	item := func(fields int, index int, ttl int64) []byte {
		b := msgp.AppendArrayHeader(nil, uint32(fields))
		b = msgp.AppendInt(b, index)
		b = msgp.AppendBool(b, false)
		b = msgp.AppendUint8(b, uint8(StatusSuccess))
		b = msgp.AppendBytes(b, []byte("v"))
		b = msgp.AppendUint64(b, 7)
		b = msgp.AppendString(b, "")
		b = msgp.AppendUint64(b, 3)
		b = msgp.AppendUint64(b, 4)
		if fields > 8 {
			b = msgp.AppendInt64(b, ttl)
		}
		if fields > 9 {
			b = msgp.AppendString(b, "a field of a later version")
		}
		return b
	}
	encoded := appendBatchHeader(nil, 4)
	encoded = append(encoded, item(9, 0, int64(time.Minute))...)
	encoded = append(encoded, item(8, 1, 0)...) // older owner: no ttl, and it must not keep item 0's
	encoded = append(encoded, item(10, 2, int64(time.Hour))...)
	encoded = append(encoded, item(8, 3, 0)...)
	want := []int64{int64(time.Minute), 0, int64(time.Hour), 0}
	var got []int64
	err := decodeBatchReply(encoded, func(r *batchItemReply) error {
		if r.Index != len(got) || r.Reply.Version != 7 || string(r.Reply.Value) != "v" || r.Reply.MapIndex != 4 {
			t.Errorf("item %d decoded as %+v", len(got), r)
		}
		got = append(got, r.Reply.Int)
		return nil
	})
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ttls %v, %v; want %v", got, err, want)
	}
	short := item(8, 0, 0)
	short[0], short = 0x97, short[:len(short)-1] // without its map index, a fixint
	if err := decodeBatchReply(append(appendBatchHeader(nil, 1), short...), func(*batchItemReply) error { return nil }); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("item of 7 fields: err = %v; want ErrInvalidRequest", err)
	}
}

func TestBatchParallelismValidated(t *testing.T) {
	cfg := testConfig("invalid")
	cfg.BatchParallelism = 0
	if n, err := Join(bg(t), cfg); !errors.Is(err, ErrInvalidConfig) {
		if n != nil {
			n.Close()
		}
		t.Fatalf("Join with BatchParallelism 0: err = %v; want ErrInvalidConfig", err)
	}
}

// TestBatchResultsOutliveLaterCalls checks that the memory batches reuse never reaches a result: results a
// caller holds keep their values through later batches that read new values of the same keys, from the
// caller's own keys (served in-process) and from other owners.
func TestBatchResultsOutliveLaterCalls(t *testing.T) {
	c := startCluster(t, 3, nil)
	ctx := bg(t)
	caller := c.node(0)
	keys := randomKeys(rand.New(rand.NewPCG(7, 7)), 300)
	if owners := keysOwnedBy(c, keys); len(owners) != 3 {
		t.Fatalf("keys spread over %d owners; want 3", len(owners))
	}
	// Each round's values differ in length too, so bytes left over from a longer value would show.
	valueOf := func(round, i int) []byte {
		return []byte(strings.Repeat(fmt.Sprint(round), 1+(i*7+round*13)%90) + keys[i])
	}
	var held [][]BatchResult
	for round := range 4 {
		entries := make([]KeyValue, len(keys))
		for i, key := range keys {
			entries[i] = KeyValue{Key: key, Value: valueOf(round, i)}
		}
		results, err := caller.PutMany(ctx, entries)
		requireAll(t, "put many", results, err, keys)
		results, err = caller.GetMany(ctx, keys)
		requireAll(t, "get many", results, err, keys)
		held = append(held, results)
	}
	for round, results := range held {
		for i, r := range results {
			if want := valueOf(round, i); !bytes.Equal(r.Value, want) {
				t.Fatalf("round %d: get %q now holds %q; want %q", round, keys[i], r.Value, want)
			}
			clear(r.Value) // the caller's to change: the stored value must not follow
		}
	}
	results, err := caller.GetMany(ctx, keys)
	requireAll(t, "get many after the caller changed its results", results, err, keys)
	for i, r := range results {
		if want := valueOf(len(held)-1, i); !bytes.Equal(r.Value, want) {
			t.Fatalf("get %q = %q after the caller changed an earlier result; want %q", keys[i], r.Value, want)
		}
	}
}

// TestBatchConcurrentCallsKeepTheirOwn runs batches at once from several goroutines, each over keys of its
// own: every result must hold its own key's value, never one of another batch served with reused memory.
func TestBatchConcurrentCallsKeepTheirOwn(t *testing.T) {
	c := startCluster(t, 3, nil)
	ctx := bg(t)
	caller := c.node(0)
	const callers, rounds = 4, 15
	keySets := make([][]string, callers)
	for g := range keySets {
		keySets[g] = randomKeys(rand.New(rand.NewPCG(8, uint64(g))), 200)
		results, err := caller.PutMany(ctx, putEntries(keySets[g]))
		requireAll(t, "put many", results, err, keySets[g])
	}
	errs := make(chan error, callers)
	for _, keys := range keySets {
		go func() {
			errs <- func() error {
				for range rounds {
					results, err := caller.GetMany(ctx, keys)
					if err != nil {
						return err
					}
					for i, r := range results {
						if r.Err != nil || r.Key != keys[i] || string(r.Value) != "value-of-"+keys[i] {
							return fmt.Errorf("result %d for %q = %q, %v", i, keys[i], r.Value, r.Err)
						}
					}
				}
				return nil
			}()
		}()
	}
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestBatchGetExpiresAtTheBatchInstant stops the nodes' clock: one nanosecond before its expiry an entry is
// a hit with exactly that nanosecond left, and at its expiry it is a miss, from its owner in-process and
// from other owners, as for a single get.
func TestBatchGetExpiresAtTheBatchInstant(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	c := startCluster(t, 3, func(cfg *Config) { cfg.Clock = clock })
	ctx := bg(t)
	caller := c.node(0)
	keys := randomKeys(rand.New(rand.NewPCG(10, 10)), 60)
	if owners := keysOwnedBy(c, keys); len(owners) != 3 {
		t.Fatalf("keys spread over %d owners; want 3", len(owners))
	}
	const ttl = 10 * time.Second
	results, err := caller.PutMany(ctx, putEntries(keys), WithTTL(ttl))
	requireAll(t, "put many", results, err, keys)

	clock.Advance(ttl - time.Nanosecond)
	results, err = caller.GetMany(ctx, keys)
	requireAll(t, "get many a nanosecond before expiry", results, err, keys)
	for _, r := range results {
		if r.TTL != time.Nanosecond {
			t.Fatalf("get %q a nanosecond before expiry: TTL %v; want 1ns", r.Key, r.TTL)
		}
	}
	if e, err := caller.GetEntry(ctx, keys[0]); err != nil || e.TTL != time.Nanosecond {
		t.Fatalf("single get a nanosecond before expiry = %+v, %v; want a TTL of 1ns", e, err)
	}

	clock.Advance(time.Nanosecond)
	results, err = caller.GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Status != StatusNotFound || !errors.Is(r.Err, ErrNotFound) || r.Value != nil {
			t.Fatalf("get %q at its expiry = %s %#v, %v; want a miss with a nil value, from any owner", r.Key, r.Status, r.Value, r.Err)
		}
	}
}

// TestBatchGetAnswersAsGet checks that an owner answers a batch's get exactly as a single get, for every
// state of the key: a value, one with a TTL, none, a collection, a reserved key, and a key a transaction
// is writing.
func TestBatchGetAnswersAsGet(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	c := startCluster(t, 2, func(cfg *Config) { cfg.Clock = clock })
	ctx := bg(t)
	n := c.node(0)
	key := func(name string) string {
		for i := 0; ; i++ {
			if k := fmt.Sprintf("%s-%d", name, i); c.owner(k) == n {
				return k
			}
		}
	}
	plain, lasting, absent, hash, locked := key("plain"), key("lasting"), key("absent"), key("hash"), key("locked")
	var elsewhere []string
	for i := 0; len(elsewhere) < 2; i++ {
		if k := fmt.Sprintf("elsewhere-%d", i); c.owner(k) != n {
			elsewhere = append(elsewhere, k)
		}
	}
	reserved := key(internalPrefix + "reserved")
	for k, opts := range map[string][]PutOption{plain: nil, lasting: {WithTTL(time.Minute)}, locked: nil} {
		if err := n.Put(ctx, k, []byte("value of "+k), opts...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.HSet(ctx, hash, map[string][]byte{"f": []byte("v")}); err != nil {
		t.Fatal(err)
	}
	in := intent{txn: "writer", anchor: locked, deadline: clock.Now().Add(time.Hour).UnixNano(), action: intentPut, value: []byte("next")}
	n.own.store.put(n.layout.KeySegment(locked), intentKey(locked), in.encode(), forTTL(0))
	clock.Advance(time.Second)

	keys := []string{plain, lasting, absent, hash, reserved, locked, elsewhere[0], elsewhere[1]}
	w := getBatchWork()
	defer w.release()
	for i, k := range keys {
		w.items = append(w.items, batchItemWire{Index: i, Op: kv.OpGet, Req: kv.Request{Key: k}})
	}
	redirects := n.stats.redirectsSent.Load()
	n.own.serveBatchItems(ctx, w, unlimitedReply)
	if got := n.stats.redirectsSent.Load() - redirects; got != 2 {
		t.Errorf("the batch counted %d redirects; want one for each of its 2 items owned elsewhere", got)
	}
	statuses := map[Status]bool{}
	for i, k := range keys {
		single := n.own.serveKV(ctx, kv.OpGet, &kv.Request{Key: k})
		if got := w.replies[i]; got.Index != i || got.Withheld || !reflect.DeepEqual(got.Reply, single) {
			t.Errorf("batch get of %q = %+v; a single get answers %+v", k, got, single)
		}
		statuses[single.Status] = true
	}
	for _, want := range []Status{StatusSuccess, StatusNotFound, StatusWrongType, StatusInvalidRequest, StatusLocked, StatusMoved} {
		if !statuses[want] {
			t.Errorf("no key answered %s: the states do not cover it", want)
		}
	}
}

// TestBatchGetVerdictConfirmedAfterRead checks that a get served from its partition's verdict, taken when
// the batch began, is answered only if the verdict still holds after the read: a partition sealed for a
// hand-over since, a newer map that moved it, or a lapse of the lease noticed since, sends the get to a
// check of its own, which refuses it.
func TestBatchGetVerdictConfirmedAfterRead(t *testing.T) {
	c := startCluster(t, 2, nil)
	ctx := bg(t)
	other := c.leaderNode()
	n := c.node(0) // a follower of the control plane, whose lease can lapse
	if n == other {
		n = c.node(1)
	}
	key := "judged"
	for i := 0; c.owner(key) != n; i++ {
		key = fmt.Sprintf("judged-%d", i)
	}
	if err := n.Put(ctx, key, []byte("v")); err != nil {
		t.Fatal(err)
	}
	p := n.layout.KeyPartition(key)
	serve := func(change func() (undo func())) kv.Reply {
		t.Helper()
		w := getBatchWork()
		defer w.release()
		w.items = append(w.items, batchItemWire{Op: kv.OpGet, Req: kv.Request{Key: key}})
		w.replies = resize(w.replies, 1)
		n.own.judgeReads(w)
		if w.reads.owned[p] != verdictOwned {
			t.Fatalf("partition %d judged %d; want owned", p, w.reads.owned[p])
		}
		undo := change()
		defer undo()
		n.own.serveBatchItem(ctx, w, &w.items[0], 0, n.own.store.now(), &w.replies[0])
		return w.replies[0].Reply
	}

	if r := serve(func() func() { return func() {} }); r.Status != StatusSuccess || string(r.Value) != "v" {
		t.Fatalf("get under a verdict that holds = %+v; want the value", r)
	}
	r := serve(func() func() {
		n.own.cut.sealed[p].Store(true)
		return func() { n.own.cut.sealed[p].Store(false) }
	})
	if r.Status != StatusOwnershipChanging {
		t.Fatalf("get of a partition sealed after its verdict = %s; want %s", r.Status, StatusOwnershipChanging)
	}
	r = serve(func() func() {
		m := n.ctl.fsm.clusterMap()
		moved := m.clone()
		moved.Runtime[p].Owner = other.id
		n.ctl.fsm.current.Store(moved)
		return func() { n.ctl.fsm.current.CompareAndSwap(moved, m) }
	})
	if r.Status != StatusMoved || r.Owner != other.id {
		t.Fatalf("get of a partition a newer map moved after its verdict = %s to %q; want %s to %s", r.Status, r.Owner, StatusMoved, other.id)
	}
	r = serve(func() func() {
		// As holdsLease records a lapse it notices; the node then serves again once it has caught up.
		n.ctl.lease.held.Store(false)
		n.ctl.lease.lapses.Add(1)
		return func() {}
	})
	if r.Status != StatusOwnershipChanging && !n.IsLeader() { // a leader holds its lease whatever it noticed
		t.Fatalf("get after a lease lapse noticed since its verdict = %s; want %s", r.Status, StatusOwnershipChanging)
	}
	waitFor(t, 10*time.Second, "the node to catch up after the lapse", n.ctl.holdsLease)
}

// TestBatchWorkReuse checks that decoding into reused memory gives each request its own items, leaves the
// keys of an earlier request intact, and that releasing the memory drops what its items and replies hold.
func TestBatchWorkReuse(t *testing.T) {
	encode := func(items ...batchItemWire) []byte {
		b := appendBatchHeader(nil, len(items))
		for i := range items {
			b = appendBatchRequestItem(b, &items[i])
		}
		return b
	}
	first := []batchItemWire{
		{Index: 0, Op: kv.OpGet, Req: kv.Request{Key: "a-long-key-read-first"}},
		{Index: 1, Op: kv.OpPut, Req: kv.Request{Key: "a-long-key-written", Value: []byte("v1"), TTL: 5}},
		{Index: 2, Op: kv.OpDelete, Req: kv.Request{Key: "a-long-key-deleted"}},
		{Index: 3, Op: kv.OpGet, Req: kv.Request{Key: "another-long-key-read"}},
	}
	second := []batchItemWire{
		{Index: 7, Op: kv.OpGet, Req: kv.Request{Key: "b"}},
		{Index: 8, Op: kv.OpPut, Req: kv.Request{Key: "c", Value: []byte("v2")}},
	}
	w := &batchWork{}
	check := func(want []batchItemWire) {
		t.Helper()
		if len(w.items) != len(want) {
			t.Fatalf("%d items decoded; want %d", len(w.items), len(want))
		}
		for i := range want {
			got := w.items[i]
			if got.Index != want[i].Index || got.Op != want[i].Op || got.Req.Key != want[i].Req.Key ||
				!bytes.Equal(got.Req.Value, want[i].Req.Value) || got.Req.TTL != want[i].Req.TTL {
				t.Fatalf("item %d decoded as %+v; want %+v", i, got, want[i])
			}
		}
	}
	if err := w.decodeRequest(encode(first...)); err != nil {
		t.Fatal(err)
	}
	check(first)
	var firstKeys []string
	for _, it := range w.items {
		firstKeys = append(firstKeys, it.Req.Key)
	}
	if err := w.decodeRequest(encode(second...)); err != nil {
		t.Fatal(err)
	}
	check(second)
	for i, k := range firstKeys {
		if k != first[i].Req.Key {
			t.Fatalf("key %d of the first request now reads %q; want %q", i, k, first[i].Req.Key)
		}
	}

	w.replies = append(w.replies[:0], batchItemReply{Index: 7, Reply: kv.Reply{Value: []byte("stored")}})
	items, replies := w.items[:cap(w.items)], w.replies[:cap(w.replies)]
	w.reset()
	for i := range items {
		if !reflect.DeepEqual(items[i], batchItemWire{}) {
			t.Fatalf("released item %d still holds %+v", i, items[i])
		}
	}
	for i := range replies {
		if !reflect.DeepEqual(replies[i], batchItemReply{}) {
			t.Fatalf("released reply %d still holds %+v", i, replies[i])
		}
	}
	huge := &batchWork{items: make([]batchItemWire, 0, maxPooledItems+1)}
	if huge.reusable() || !(&batchWork{}).reusable() {
		t.Fatal("memory above the cap is kept for reuse, or memory within it is not")
	}
}

// TestBatchGetsOfASegmentAnswerTogether checks that a batch's gets of one segment are answered alike, so
// that those that go again go together and are read again at one revision: a transaction's intent on one
// key holds them all, and a reply with room for only part of them holds them all back, while the gets of
// another segment are answered on their own.
func TestBatchGetsOfASegmentAnswerTogether(t *testing.T) {
	c := startCluster(t, 1, nil)
	n, ctx := c.node(0), bg(t)
	keys := []string{"{alone}", "{group}a", "{group}b", "{group}c"}
	for _, key := range keys {
		if err := n.Put(ctx, key, bytes.Repeat([]byte("v"), 100)); err != nil {
			t.Fatal(err)
		}
	}
	serve := func(budget int) []batchItemReply {
		t.Helper()
		w := getBatchWork()
		defer w.release()
		for i, key := range keys {
			w.items = append(w.items, batchItemWire{Index: i, Op: kv.OpGet, Req: kv.Request{Key: key}})
		}
		n.own.serveBatchItems(ctx, w, budget)
		return slices.Clone(w.replies)
	}
	for i, r := range serve(unlimitedReply) {
		if r.Withheld || r.Reply.Status != StatusSuccess {
			t.Fatalf("get %q = %+v; want its value", keys[i], r)
		}
	}
	// Room for the first get and one more value: the first is always answered, the group goes again whole.
	for i, r := range serve(250) {
		if want := i > 0; r.Withheld != want {
			t.Fatalf("get %q withheld: %v; want %v", keys[i], r.Withheld, want)
		}
	}
	seg := n.layout.KeySegment("{group}b")
	in := intent{txn: "t", anchor: "{group}b", deadline: n.own.store.now() + int64(time.Minute), action: intentPut, value: []byte("w")}
	if r := applyIntent(n.own.store, seg, kv.Request{Key: "{group}b", Value: in.encode(), Delta: int64(time.Minute)}, n.own.opLimits()); r.Status != StatusSuccess {
		t.Fatalf("placing the intent: %+v", r)
	}
	for i, r := range serve(unlimitedReply) {
		if want := map[bool]Status{false: StatusSuccess, true: StatusLocked}[i > 0]; r.Reply.Status != want {
			t.Fatalf("get %q with an intent on {group}b = %s; want %s", keys[i], r.Reply.Status, want)
		}
	}
}

// TestBatchSplitKeepsSegmentsWhole checks that a batch too large for one request is cut between segments,
// so that each segment's gets reach its owner in one request, and that each request keeps the batch's order.
func TestBatchSplitKeepsSegmentsWhole(t *testing.T) {
	c := startCluster(t, 1, func(cfg *Config) { cfg.MaxFrameSize, cfg.MaxValueSize = 8192, 1024 })
	n := c.node(0)
	var items []BatchItem
	for i := range 80 {
		tag := []string{"{x}", "{y}"}[i%2] // interleaved, as a caller may list them
		items = append(items, BatchItem{Index: i, Op: BatchGet, Key: tag + strings.Repeat("k", 40) + strconv.Itoa(i)})
	}
	b := newBatchRun(&n.client.batch, items)
	seqs := make([]int, len(items))
	for i := range seqs {
		seqs[i] = i
	}
	chunks := b.split(seqs)
	if len(chunks) < 2 {
		t.Fatalf("%d requests; want the batch split", len(chunks))
	}
	seen := map[int]int{}
	for i, chunk := range chunks {
		if !slices.IsSorted(chunk) {
			t.Fatalf("request %d out of order: %v", i, chunk)
		}
		for _, seq := range chunk {
			seen[seq]++
			if other, ok := seen[-1-n.layout.KeySegment(items[seq].Key)]; ok && other != i {
				t.Fatalf("the gets of %q's segment went in requests %d and %d", items[seq].Key, other, i)
			}
			seen[-1-n.layout.KeySegment(items[seq].Key)] = i
		}
	}
	for seq := range items {
		if seen[seq] != 1 {
			t.Fatalf("item %d sent %d times", seq, seen[seq])
		}
	}
}
