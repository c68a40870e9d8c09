package zaris

import (
	"encoding/binary"
	"hash/fnv"
	"sync"
	"time"
)

// entry is one stored value. expireAt is a Unix time in nanoseconds; zero means no expiry.
type entry struct {
	value    []byte
	version  uint64
	expireAt int64
}

func (e *entry) expired(now int64) bool { return e.expireAt != 0 && now >= e.expireAt }

// segmentStore holds the entries of one segment. Writes to different segments never contend.
type segmentStore struct {
	mu      sync.RWMutex
	entries map[string]*entry
	// revision counts the segment's writes. A key's version is the revision of its last write, so
	// versions grow across delete and re-create.
	revision uint64
}

// writeHook observes every write of the store, under the segment's lock, so it sees a segment's writes in
// revision order. next is nil for a delete, and expired marks a delete that expired the key. epoch is the
// epoch a replicated write carried, or 0 for a write this node made as owner (the hook knows the owner's
// epoch).
type writeHook func(segment int, revision, epoch uint64, key string, next *entry, expired bool)

// store is a node's local data: one map per segment, with TTLs that are checked on every read. The owner
// of a segment reclaims its expired entries in the background by writes of their own (expireSegment).
type store struct {
	clock    Clock
	segments []segmentStore
	onWrite  writeHook // nil: nobody listens
}

func newStore(segments int, clock Clock) *store {
	s := &store{clock: clock, segments: make([]segmentStore, segments)}
	for i := range s.segments {
		s.segments[i].entries = make(map[string]*entry)
	}
	return s
}

func (s *store) now() int64 { return s.clock.Now().UnixNano() }

// get returns the stored value without copying it: callers must not modify it. Expired entries are invisible.
func (s *store) get(segment int, key string) (value []byte, version uint64, ok bool) {
	seg := &s.segments[segment]
	seg.mu.RLock()
	e, found := seg.entries[key]
	seg.mu.RUnlock()
	if !found || e.expired(s.now()) {
		return nil, 0, false
	}
	return e.value, e.version, true
}

// getEntry returns key's live entry, which callers must not modify, and the time it has left, zero when it
// never expires.
func (s *store) getEntry(segment int, key string) (e *entry, ttl time.Duration, ok bool) {
	seg := &s.segments[segment]
	seg.mu.RLock()
	e, found := seg.entries[key]
	seg.mu.RUnlock()
	now := s.now()
	if !found || e.expired(now) {
		return nil, 0, false
	}
	if e.expireAt != 0 {
		ttl = time.Duration(e.expireAt - now)
	}
	return e, ttl, true
}

// update runs fn on key's live entry (nil when absent or expired) under the segment's lock. When fn says
// write, the store replaces the entry with next (nil deletes it), stamping next with the key's new version.
// Every mutation of the store goes through here, so there is one place that orders a segment's writes.
// Entries are never modified once stored: fn must build a new one.
func (s *store) update(segment int, key string, fn func(cur *entry, now int64) (next *entry, write bool)) *entry {
	now := s.now()
	seg := &s.segments[segment]
	seg.mu.Lock()
	defer seg.mu.Unlock()
	cur := seg.entries[key]
	if cur != nil && cur.expired(now) {
		cur = nil
	}
	next, write := fn(cur, now)
	if !write {
		return cur
	}
	s.commit(segment, key, next, false)
	return next
}

// commit makes next (nil to delete) key's entry at the segment's next revision, which it stamps as next's
// version, and tells the write hook. It is the one place that orders a segment's own writes. Called with
// the segment's lock held.
func (s *store) commit(segment int, key string, next *entry, expired bool) {
	seg := &s.segments[segment]
	seg.revision++
	if next != nil {
		next.version = seg.revision
	}
	seg.set(key, next)
	if s.onWrite != nil {
		s.onWrite(segment, seg.revision, 0, key, next, expired)
	}
}

// reapKey deletes key if its entry has expired, by a write of its own that the hook sees as an expiry, and
// reports whether it did.
func (s *store) reapKey(segment int, key string) bool {
	now := s.now()
	seg := &s.segments[segment]
	seg.mu.Lock()
	defer seg.mu.Unlock()
	if cur := seg.entries[key]; cur == nil || !cur.expired(now) {
		return false
	}
	s.commit(segment, key, nil, true)
	return true
}

// expireSegment expires every entry of segment whose time has passed, one write each, and returns how
// many it expired. Only the segment's owner calls it: its replicas and watchers learn of each expiry from
// the op it writes.
func (s *store) expireSegment(segment int) int {
	expired := 0
	for _, key := range s.expiredKeys(segment) {
		if s.reapKey(segment, key) {
			expired++
		}
	}
	return expired
}

// expiredKeys lists the keys of segment whose entries have expired.
func (s *store) expiredKeys(segment int) []string {
	now := s.now()
	seg := &s.segments[segment]
	seg.mu.RLock()
	defer seg.mu.RUnlock()
	var keys []string
	for key, e := range seg.entries {
		if e.expired(now) {
			keys = append(keys, key)
		}
	}
	return keys
}

// set stores e under key, or deletes key when e is nil. Called with seg.mu held.
func (seg *segmentStore) set(key string, e *entry) {
	if e == nil {
		delete(seg.entries, key)
	} else {
		seg.entries[key] = e
	}
}

// put stores value under key with an optional ttl and returns the key's new version.
// The store keeps value as given: callers pass a slice they no longer modify.
func (s *store) put(segment int, key string, value []byte, ttl time.Duration) uint64 {
	e := s.update(segment, key, func(_ *entry, now int64) (*entry, bool) {
		return &entry{value: value, expireAt: expiryFrom(now, ttl)}, true
	})
	return e.version
}

// remove deletes key and reports whether a live (unexpired) entry existed.
func (s *store) remove(segment int, key string) bool {
	existed := false
	s.update(segment, key, func(cur *entry, _ int64) (*entry, bool) {
		existed = cur != nil
		return nil, existed
	})
	return existed
}

// expiryFrom turns a TTL into an absolute expiry; zero or negative means none.
func expiryFrom(now int64, ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	return now + int64(ttl)
}

// len counts stored entries, expired ones not yet reclaimed included.
func (s *store) len() int {
	n := 0
	for i := range s.segments {
		seg := &s.segments[i]
		seg.mu.RLock()
		n += len(seg.entries)
		seg.mu.RUnlock()
	}
	return n
}

// applyAt installs a write that the segment's owner made at revision, on a replica. It applies only the
// next revision in order: an older one is a duplicate (already applied) and a later one reveals a gap.
// It returns whether it applied and the segment's revision afterwards.
func (s *store) applyAt(segment int, revision, epoch uint64, key string, next *entry, expired bool) (applied bool, have uint64) {
	seg := &s.segments[segment]
	seg.mu.Lock()
	defer seg.mu.Unlock()
	if revision != seg.revision+1 {
		return false, seg.revision
	}
	seg.revision = revision
	seg.set(key, next)
	if s.onWrite != nil {
		s.onWrite(segment, revision, epoch, key, next, expired)
	}
	return true, revision
}

// revision returns the segment's current revision.
func (s *store) revision(segment int) uint64 {
	seg := &s.segments[segment]
	seg.mu.RLock()
	defer seg.mu.RUnlock()
	return seg.revision
}

// snapshot copies the segment's entries (expired ones included: every copy expires them at the same
// instant) and its revision, consistently.
func (s *store) snapshot(segment int) (revision uint64, keys []string, entries []*entry) {
	seg := &s.segments[segment]
	seg.mu.RLock()
	defer seg.mu.RUnlock()
	keys = make([]string, 0, len(seg.entries))
	entries = make([]*entry, 0, len(seg.entries))
	for k, e := range seg.entries {
		keys = append(keys, k)
		entries = append(entries, e)
	}
	return seg.revision, keys, entries
}

// restore replaces the segment's whole content with a snapshot taken at revision.
func (s *store) restore(segment int, revision uint64, keys []string, entries []*entry) {
	seg := &s.segments[segment]
	seg.mu.Lock()
	defer seg.mu.Unlock()
	seg.entries = make(map[string]*entry, len(keys))
	for i, k := range keys {
		seg.entries[k] = entries[i]
	}
	seg.revision = revision
}

// Digest summarises one segment's content so copies can be compared cheaply: the revision plus an
// order-independent hash of every entry.
type Digest struct {
	Segment  int
	Revision uint64
	Hash     uint64
	Keys     int
}

// digest computes the segment's Digest.
func (s *store) digest(segment int) Digest {
	seg := &s.segments[segment]
	seg.mu.RLock()
	defer seg.mu.RUnlock()
	d := Digest{Segment: segment, Revision: seg.revision, Keys: len(seg.entries)}
	for k, e := range seg.entries {
		d.Hash ^= entryHash(k, e)
	}
	return d
}

// entryHash is FNV-1a over the key, the value, the expiry and the version, mixed so that XOR-combining
// many of them stays sensitive to every field.
func entryHash(key string, e *entry) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(e.value)
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(e.expireAt))
	binary.LittleEndian.PutUint64(b[8:], e.version)
	h.Write(b[:])
	x := h.Sum64()
	// A final avalanche (splitmix64) so XOR of many hashes does not cancel structure.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
