package zaris

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/longdouble"
)

// TestIncrByFloatText checks the sums and refusals of incrByFloat against replies a redis-server gave on
// x86-64; the differential test (resp_diff_test.go) compares many more with a live one.
func TestIncrByFloatText(t *testing.T) {
	cases := []struct {
		value, delta string // value "" for a missing key
		want         string // "" for a refusal
		err          error
	}{
		{"", "0.1", "0.1", nil},
		{"0.1", "10.5", "10.6", nil},
		{"10.6", "-0.2", "10.4", nil},
		{"1", "-1.0", "0", nil},
		{"-0", "-0.0", "0", nil},
		{"0", "1e-30", "0", nil},
		{"0", "0x10", "16", nil},
		{"1e3", "-0X1P-2", "999.75", nil},
		{"1e308", "1e308", "199999999999999999993371759311691291321120199694831134415594095989843469737676123744200253843777078640893494450108026446304269499187921167194841628860392837535918200039206381557326219209014213335878306791577877829121087126122536729803237260434173178506889763247582601711514636284849020905456510092687857156096", nil},
		{"1.1e4932", "1e4932", "", errNotFinite},
		{"1", "inf", "", errNotFinite},
		{"-Infinity", "1", "", errNotFinite},
		{"1", "nan", "", errNotFloat},
		{"1", " 1", "", errNotFloat},
		{"1", "1e", "", errNotFloat},
		{"1", "1e5000", "", errNotFloat},
		{"1", "1e-5000", "", errNotFloat},
		{"1", "0e5000", "1", nil},
		{"1", strings.Repeat("1", longdouble.MaxChars), "", errNotFloat},
		{"1 ", "1", "", errNotFloat},
	}
	for _, tc := range cases {
		s, _ := newTestStore()
		if tc.value != "" {
			s.put(0, "k", []byte(tc.value), forTTL(0))
		}
		got, err := s.incrByFloat(0, "k", []byte(tc.delta), 1<<20)
		if string(got) != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%q + %q = %q, %v; want %q, %v", tc.value, tc.delta, got, err, tc.want, tc.err)
		}
	}
}

// TestStringCommandsReplicate runs each string method from a node that does not own the key: it returns
// what Redis's command would, and once it is acknowledged every in-sync replica holds the result.
func TestStringCommandsReplicate(t *testing.T) {
	t.Parallel()
	const limit = 400
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.MaxValueSize = limit }))
	ctx := bg(t)
	owner := c.node(0)
	remote := c.node(1)
	key := c.keyOwnedBy("strings", owner)

	if v, err := remote.IncrByFloat(ctx, key, 0.1); err != nil || v != 0.1 {
		t.Fatalf("IncrByFloat of a missing key = %v, %v", v, err)
	}
	if err := remote.Put(ctx, key, []byte("10.50"), WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if v, err := remote.IncrByFloat(ctx, key, 0.1); err != nil || v != 10.6 {
		t.Fatalf("IncrByFloat(10.50, 0.1) = %v, %v", v, err)
	}
	assertOnCopies(t, c, key, "10.6", true)
	for _, delta := range []float64{math.NaN(), math.Inf(1)} {
		if _, err := remote.IncrByFloat(ctx, key, delta); !errors.Is(err, ErrNotFloat) {
			t.Fatalf("IncrByFloat by %v: %v; want ErrNotFloat", delta, err)
		}
	}
	if _, err := remote.IncrByFloat(ctx, key, 1e308); err != nil {
		t.Fatal(err)
	}
	if v, err := remote.IncrByFloat(ctx, key, 1e308); err != nil || !math.IsInf(v, 1) {
		t.Fatalf("IncrByFloat beyond float64 = %v, %v; want +Inf, stored exactly", v, err)
	}

	if err := remote.Put(ctx, key, []byte("1e400")); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.IncrByFloat(ctx, key, 0); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("IncrByFloat to a sum of %d digits: %v; want ErrValueTooLarge", 401, err)
	}
	assertOnCopies(t, c, key, "1e400", false)
	if err := remote.Put(ctx, key, []byte("abc"), WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.IncrByFloat(ctx, key, 1); !errors.Is(err, ErrNotFloat) {
		t.Fatalf("IncrByFloat of text: %v; want ErrNotFloat", err)
	}
	if n, err := remote.Append(ctx, key, []byte("def")); err != nil || n != 6 {
		t.Fatalf("Append = %d, %v; want 6", n, err)
	}
	assertOnCopies(t, c, key, "abcdef", true)
	if _, err := remote.Append(ctx, key, bytes.Repeat([]byte("x"), limit-5)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("Append past MaxValueSize: %v; want ErrValueTooLarge", err)
	}
	if _, err := remote.Append(ctx, key, bytes.Repeat([]byte("x"), limit+1)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("Append of more than MaxValueSize: %v; want ErrValueTooLarge", err)
	}
	assertOnCopies(t, c, key, "abcdef", true)
	if n, err := remote.Append(ctx, key, bytes.Repeat([]byte("x"), limit-6)); err != nil || n != limit {
		t.Fatalf("Append up to MaxValueSize = %d, %v", n, err)
	}

	if err := remote.Put(ctx, key, []byte("ab"), WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, err := remote.SetRange(ctx, key, 3, []byte("cd")); err != nil || n != 5 {
		t.Fatalf("SetRange past the end = %d, %v; want 5", n, err)
	}
	assertOnCopies(t, c, key, "ab\x00cd", true)
	before, err := remote.GetEntry(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := remote.SetRange(ctx, key, limit, nil); err != nil || n != 5 {
		t.Fatalf("SetRange of nothing = %d, %v; want the length, 5", n, err)
	}
	if after, err := remote.GetEntry(ctx, key); err != nil || after.Version != before.Version {
		t.Fatalf("SetRange of nothing wrote: version %d, then %+v, %v", before.Version, after, err)
	}
	if _, err := remote.SetRange(ctx, key, -1, []byte("x")); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("SetRange at a negative offset: %v; want ErrInvalidRequest", err)
	}
	if _, err := remote.SetRange(ctx, key, limit, []byte("x")); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("SetRange past MaxValueSize: %v; want ErrValueTooLarge", err)
	}
	if n, err := remote.SetRange(ctx, key, 0, []byte("AB")); err != nil || n != 5 {
		t.Fatalf("SetRange inside = %d, %v; want 5", n, err)
	}
	assertOnCopies(t, c, key, "AB\x00cd", true)

	if err := remote.Put(ctx, key, []byte("v"), WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if v, err := remote.GetAndPersist(ctx, key); err != nil || string(v) != "v" {
		t.Fatalf("GetAndPersist = %q, %v", v, err)
	}
	assertOnCopies(t, c, key, "v", false)
	if v, err := remote.GetAndExpire(ctx, key, time.Minute); err != nil || string(v) != "v" {
		t.Fatalf("GetAndExpire = %q, %v", v, err)
	}
	assertOnCopies(t, c, key, "v", true)
	if ttl, err := remote.TTL(ctx, key); err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL after GetAndExpire = %v, %v", ttl, err)
	}
	if v, err := remote.GetAndDelete(ctx, key); err != nil || string(v) != "v" {
		t.Fatalf("GetAndDelete = %q, %v", v, err)
	}
	assertOnCopies(t, c, key, "", false)
	for name, get := range map[string]func() ([]byte, error){
		"GetAndDelete":  func() ([]byte, error) { return remote.GetAndDelete(ctx, key) },
		"GetAndExpire":  func() ([]byte, error) { return remote.GetAndExpire(ctx, key, time.Minute) },
		"GetAndPersist": func() ([]byte, error) { return remote.GetAndPersist(ctx, key) },
	} {
		if _, err := get(); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s of a missing key: %v; want ErrNotFound", name, err)
		}
	}
	if err := remote.Put(ctx, key, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := remote.GetAndExpire(ctx, key, 0); err != nil || string(v) != "v" {
		t.Fatalf("GetAndExpire(0) = %q, %v", v, err)
	}
	assertOnCopies(t, c, key, "", false)
}

// TestGetAndPersistNeverSeesUnreplicatedWrite cuts an owner off just as it applies a write: GetAndPersist
// of a key without an expiry writes nothing, so like a read it must not return that write, which a failover
// would lose. Its reply waits for the replicas as a write's does, and as one that reveals the stored state
// (operations.go) when a request's own concern is Async.
func TestGetAndPersistNeverSeesUnreplicatedWrite(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := startCluster(t, 3, replicated(2, func(cfg *Config) { cfg.ReplicaAckTimeout = time.Second }))
	c.waitHealthy(20 * time.Second)
	ctx := bg(t)
	owner := c.node((c.leader() + 1) % 3)
	key := c.keyOwnedBy("persisted", owner)
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
	if got, err := owner.GetAndPersist(getCtx, key); err == nil && string(got) == "v2" {
		t.Fatal("GetAndPersist returned a write no replica holds")
	}
	if err := <-put; err == nil {
		t.Fatal("a write no replica could receive was acknowledged")
	}
	c.faults.HealAll()
}

// assertOnCopies checks that the owner and every in-sync replica of key's partition hold value, with an
// expiry or not; value "" stands for no live value.
func assertOnCopies(t *testing.T, c *testCluster, key, value string, expires bool) {
	t.Helper()
	m := c.currentMap()
	st := m.Runtime[m.Layout().KeyPartition(key)]
	if len(st.InSync) == 0 {
		t.Fatalf("key %q's partition has no in-sync replica", key)
	}
	seg := m.Layout().KeySegment(key)
	for _, id := range append([]NodeID{st.Owner}, st.InSync...) {
		e, _, ok := c.nodeByID(id).own.store.getEntry(seg, key)
		switch {
		case value == "" && ok:
			t.Fatalf("%s holds %q under %q; want nothing", id, e.value(), key)
		case value == "":
		case !ok || string(e.value()) != value || (e.expiry() != 0) != expires:
			var got []byte
			if e != nil {
				got = e.value()
			}
			t.Fatalf("%s holds %q under %q (live %v, expiring %v); want %q, expiring %v", id, got, key, ok,
				e != nil && e.expiry() != 0, value, expires)
		}
	}
}
