package zaris

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/kv"
)

// recordedWrite is one call of the store's write hook.
type recordedWrite struct {
	segment         int
	revision, epoch uint64
	key             string
	deleted         bool
}

// TestStoreOrdersWritesThroughTheHook checks that every mutation moves its segment's revision by one,
// stamps the key's version with it, and reaches the write hook once, in revision order, while a write that
// changes nothing (deleting a missing key) moves nothing.
func TestStoreOrdersWritesThroughTheHook(t *testing.T) {
	s := newStore(2, clocktest.New(time.Unix(1_000, 0)))
	var seen []recordedWrite
	s.onWrite = func(seg int, rev, epoch uint64, key string, next *entry, _ writeChange) {
		seen = append(seen, recordedWrite{seg, rev, epoch, key, next == nil})
	}
	if v := s.put(0, "a", []byte("1"), forTTL(0)); v != 1 {
		t.Fatalf("first put: version %d; want 1", v)
	}
	if v := s.put(0, "a", []byte("2"), forTTL(0)); v != 2 {
		t.Fatalf("second put: version %d; want 2", v)
	}
	if v := s.put(1, "b", []byte("1"), forTTL(0)); v != 1 {
		t.Fatalf("put in another segment: version %d; want 1, segments count apart", v)
	}
	if s.remove(0, "missing") {
		t.Fatal("removing a missing key reported it existed")
	}
	if !s.remove(0, "a") {
		t.Fatal("removing a live key reported it missing")
	}
	if v := s.put(0, "a", []byte("3"), forTTL(0)); v != 4 {
		t.Fatalf("re-created key: version %d; want 4: versions grow across delete and re-create", v)
	}
	want := []recordedWrite{{0, 1, 0, "a", false}, {0, 2, 0, "a", false}, {1, 1, 0, "b", false}, {0, 3, 0, "a", true}, {0, 4, 0, "a", false}}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("hook saw %v; want %v", seen, want)
	}
	if s.revision(0) != 4 || s.revision(1) != 1 {
		t.Fatalf("revisions %d, %d; want 4, 1", s.revision(0), s.revision(1))
	}
}

// TestStoreAppliesReplicatedWritesInOrder checks a replica's side: applyAt takes only the next revision,
// refusing a duplicate and a gap, and passes the owner's epoch to the hook.
func TestStoreAppliesReplicatedWritesInOrder(t *testing.T) {
	s := newStore(1, clocktest.New(time.Unix(1_000, 0)))
	var epochs []uint64
	s.onWrite = func(_ int, _, epoch uint64, _ string, _ *entry, _ writeChange) { epochs = append(epochs, epoch) }
	put := func(rev uint64, value string) (bool, uint64) {
		return s.applyAt(0, 7, &durability.Op{Revision: rev, Kind: durability.OpPut, Key: "k", Value: []byte(value), Version: rev})
	}
	for _, step := range []struct {
		rev     uint64
		applied bool
		have    uint64
	}{{1, true, 1}, {1, false, 1}, {3, false, 1}, {2, true, 2}} {
		applied, have := put(step.rev, fmt.Sprint(step.rev))
		if applied != step.applied || have != step.have {
			t.Fatalf("applyAt revision %d: applied %v at %d; want %v at %d", step.rev, applied, have, step.applied, step.have)
		}
	}
	if v, version, ok := s.get(0, "k"); !ok || string(v) != "2" || version != 2 {
		t.Fatalf("get = %q version %d, %v; want the revision-2 write", v, version, ok)
	}
	if len(epochs) != 2 || epochs[0] != 7 || epochs[1] != 7 {
		t.Fatalf("hook saw epochs %v; want the owner's 7 for each applied write", epochs)
	}
}

// TestStoreExpiresOnItsClock checks that an entry is invisible from its expiry instant on the store's
// clock, that a write meeting an expired entry treats it as absent, and that the owner's reaping reclaims
// it by a write of its own, which the hook sees as an expiry at the segment's next revision.
func TestStoreExpiresOnItsClock(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000, 0))
	s := newStore(1, clock)
	var expiries []recordedWrite
	s.onWrite = func(seg int, rev, epoch uint64, key string, next *entry, change writeChange) {
		if change.expired {
			expiries = append(expiries, recordedWrite{seg, rev, epoch, key, next == nil})
		}
	}
	s.put(0, "ttl", []byte("v"), forTTL(time.Second))
	s.put(0, "forever", []byte("v"), forTTL(0))
	clock.Advance(time.Second - time.Nanosecond)
	if _, _, ok := s.get(0, "ttl"); !ok {
		t.Fatal("entry gone before its expiry")
	}
	if n := s.expireSegment(0); n != 0 {
		t.Fatalf("expired %d entries before any expired", n)
	}
	clock.Advance(time.Nanosecond)
	if _, _, ok := s.get(0, "ttl"); ok {
		t.Fatal("entry visible at its expiry instant")
	}
	if s.remove(0, "ttl") {
		t.Fatal("removing an expired entry reported it live")
	}
	s.put(0, "ttl2", []byte("v"), forTTL(time.Second))
	clock.Advance(time.Second)
	if s.len() != 3 {
		t.Fatalf("store holds %d entries; want the permanent one and the two expired ones, not yet reaped", s.len())
	}
	if n := s.expireSegment(0); n != 2 || s.len() != 1 {
		t.Fatalf("expired %d, %d left; want 2 expired and the permanent entry left", n, s.len())
	}
	if s.revision(0) != 5 || len(expiries) != 2 || expiries[0].revision+expiries[1].revision != 4+5 {
		t.Fatalf("revision %d, expiries %v; want the two expiries at revisions 4 and 5", s.revision(0), expiries)
	}
	if s.reapKey(0, "forever") {
		t.Fatal("reapKey deleted an entry without expiry")
	}
}

// TestStoreSnapshotRestoresEqualDigest checks that a segment restored from another's snapshot has the same
// digest, and that the digest tells copies with different content apart.
func TestStoreSnapshotRestoresEqualDigest(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000, 0))
	a, b := newStore(1, clock), newStore(1, clock)
	for i := range 50 {
		a.put(0, fmt.Sprintf("k%d", i), []byte(fmt.Sprint(i)), forTTL(time.Duration(i)*time.Second))
	}
	rev, entries := a.snapshot(0)
	b.restore(0, rev, entries)
	if a.digest(0) != b.digest(0) {
		t.Fatalf("digests differ after restore: %+v, %+v", a.digest(0), b.digest(0))
	}
	b.put(0, "k1", []byte("changed"), forTTL(0))
	b.restore(0, a.revision(0), nil)
	if da, db := a.digest(0), b.digest(0); da.Hash == db.Hash || db.Keys != 0 {
		t.Fatalf("an empty copy at the same revision has the digest %+v of a full one %+v", db, da)
	}
}

// TestStoreBytesFollowCollections checks the store's byte count through writes that change collections in
// place, expire them and empty them, on an owner and on the replica applying its ops: after every step it
// equals the estimate of the live entries computed afresh, and it is zero once every key is gone.
func TestStoreBytesFollowCollections(t *testing.T) {
	p := newReplicatedPair(t)
	fresh := func(s *store) (n int64) {
		for key, e := range s.segments[0].entries.all() {
			n += e.size(key)
		}
		return n
	}
	steps := []struct {
		what string
		do   func()
	}{
		{"a string", func() { p.owner.put(0, "s", []byte("value"), forTTL(0)) }},
		{"a hash of one field", func() { p.do(kv.OpHSet, "h", "f1", "v1") }},
		{"fields added in place", func() { p.do(kv.OpHSet, "h", "f2", "v2", "f3", "v3") }},
		{"a set", func() { p.do(kv.OpSAdd, "set", "a", "b", "c") }},
		{"an expiry on the hash", func() { p.owner.expire(0, "h", time.Hour) }},
		{"a field removed in place", func() { p.do(kv.OpHDel, "h", "f1") }},
		{"a member removed in place", func() { p.do(kv.OpSRem, "set", "a") }},
		{"the string overwritten", func() { p.owner.put(0, "s", []byte("a longer value"), forTTL(0)) }},
		{"the hash emptied", func() { p.do(kv.OpHDel, "h", "f2", "f3") }},
		{"the set emptied", func() { p.do(kv.OpSRem, "set", "b", "c") }},
		{"the string deleted", func() { p.owner.remove(0, "s") }},
	}
	for _, step := range steps {
		step.do()
		for name, s := range map[string]*store{"owner": p.owner, "replica": p.replica} {
			if got, want := s.bytes(), fresh(s); got != want {
				t.Fatalf("after %s, the %s counts %d bytes; its live entries take %d", step.what, name, got, want)
			}
		}
	}
	if n := p.owner.bytes() + p.replica.bytes(); n != 0 || p.owner.len() != 0 || p.replica.len() != 0 {
		t.Fatalf("every key gone: %d bytes counted, %d keys left", n, p.owner.len())
	}
	p.same(t)
}

// TestEntryHoldsItsKeyAndValue checks a string's entry: one allocation that gives back its key, value,
// version and expiry, whose value cannot be appended to over anything else, and which copies the value it
// was made from. A collection's entry gives back its key and collection, and no value.
func TestEntryHoldsItsKeyAndValue(t *testing.T) {
	for _, tc := range []struct{ key, value string }{{"k", "v"}, {"", "v"}, {"k", ""}, {"", ""}, {"key:000000123456", string(make([]byte, 64))}} {
		value := []byte(tc.value)
		e := newStringEntry(tc.key, value, 7, 99)
		if e.key() != tc.key || string(e.value()) != tc.value || e.version() != 7 || e.expiry() != 99 || e.coll() != nil {
			t.Fatalf("entry of %q, %q: key %q, value %q, version %d, expiry %d", tc.key, tc.value, e.key(), e.value(), e.version(), e.expiry())
		}
		if e.value() == nil || cap(e.value()) != len(tc.value) {
			t.Fatalf("value of %q: nil %v, cap %d", tc.value, e.value() == nil, cap(e.value()))
		}
		if len(value) > 0 {
			value[0]++
			if string(e.value()) != tc.value {
				t.Fatalf("the entry shares its caller's value")
			}
		}
		for _, at := range []int64{5, 0, -1} { // an entry without expiry holds none: its key starts earlier
			if later := e.withExpiry(at); later == e || later.key() != tc.key || string(later.value()) != tc.value || later.expiry() != at || later.version() != 7 {
				t.Fatalf("withExpiry(%d): key %q, value %q, expiry %d", at, later.key(), later.value(), later.expiry())
			}
		}
	}
	var kept *entry
	if n := testing.AllocsPerRun(100, func() { kept = newStringEntry("key", []byte("value"), 1, 0) }); n != 1 || kept == nil {
		t.Fatalf("a string's entry takes %v allocations, want 1", n)
	}
	cv := &collValue{c: newCollection(kindHash)}
	e := newCollEntry("h", cv, 3, 0)
	if e.key() != "h" || e.coll() != cv || e.value() != nil || e.kind() != kindHash || e.version() != 3 {
		t.Fatalf("collection entry: key %q, value %q, kind %v", e.key(), e.value(), e.kind())
	}
	if later := e.withExpiry(8); later.coll() != cv || later.key() != "h" || later.expiry() != 8 {
		t.Fatal("withExpiry on a collection lost its collection or key")
	}
}

// TestTTLPastTheEndOfTime checks that a TTL beyond what a Unix time in nanoseconds holds keeps the key
// rather than overflowing into an expiry in the past.
func TestTTLPastTheEndOfTime(t *testing.T) {
	s := newStore(1, clocktest.New(time.Unix(1_000_000, 0)))
	s.put(0, "k", []byte("v"), forTTL(math.MaxInt64))
	if _, _, ok := s.get(0, "k"); !ok {
		t.Fatal("a put with the longest TTL is gone at once")
	}
	if !s.expire(0, "k", math.MaxInt64) {
		t.Fatal("expire found no key")
	}
	if ttl, ok := s.ttl(0, "k"); !ok || ttl <= 0 {
		t.Fatalf("after an expire with the longest TTL: ttl %v, found %v", ttl, ok)
	}
}
