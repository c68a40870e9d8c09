package zaris

import (
	"sync"
	"time"
)

// Clock tells the time. The store reads it for TTLs; tests substitute a manual clock.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// entry is one stored value. expireAt is a Unix time in nanoseconds; zero means no expiry.
type entry struct {
	value    []byte
	version  uint64
	expireAt int64
}

func (e *entry) expired(now int64) bool { return e.expireAt != 0 && now >= e.expireAt }

// segmentStore holds the entries of one segment. Writes to different segments never contend.
type segmentStore struct {
	mu          sync.RWMutex
	entries     map[string]*entry
	lastVersion uint64 // per-segment counter, so a key's version grows even across delete and re-create
}

// store is a node's local data: one map per segment, with TTLs that are checked on every read and
// reclaimed in the background.
type store struct {
	clock    Clock
	segments []segmentStore
}

func newStore(segments int, clock Clock) *store {
	s := &store{clock: clock, segments: make([]segmentStore, segments)}
	for i := range s.segments {
		s.segments[i].entries = make(map[string]*entry)
	}
	return s
}

func (s *store) now() int64 { return s.clock.Now().UnixNano() }

// get returns a copy-free view of the value; callers must not modify it. Expired entries are invisible.
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
	seg.lastVersion++
	if next == nil {
		delete(seg.entries, key)
		return nil
	}
	next.version = seg.lastVersion
	seg.entries[key] = next
	return next
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

// reapExpired removes expired entries from every segment and returns how many it removed.
// It holds one segment's lock at a time, so readers of other segments are never blocked.
func (s *store) reapExpired() int {
	removed := 0
	for i := range s.segments {
		removed += s.segments[i].reap(s.now())
	}
	return removed
}

func (seg *segmentStore) reap(now int64) int {
	seg.mu.Lock()
	defer seg.mu.Unlock()
	removed := 0
	for key, e := range seg.entries {
		if e.expired(now) {
			delete(seg.entries, key)
			removed++
		}
	}
	return removed
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
