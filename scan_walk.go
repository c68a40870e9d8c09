package zaris

import (
	"strings"

	"github.com/zaris-go/zaris/internal/glob"
	"github.com/zaris-go/zaris/internal/kv"
)

// Scan positions. Every key has a position in one ordered space: its slot in the top 14 bits, then 50 bits
// of a hash of the whole key. Every node computes the same position for a key, so a cursor, the position
// where a scan resumes, means the same on whichever node owns that range next. Keys are visited in position
// order, so a scan walks the slots in order and each slot in hash order. The constants and the requests are
// internal/kv's (scan.go).

// scanPosition returns key's position in scan order.
func scanPosition(key string) uint64 {
	return uint64(KeySlot(key))<<kv.ScanHashBits | fnv64a(key)>>slotBits
}

// slotStart returns the first position of slot, and kv.ScanDone for the slot after the last.
func slotStart(slot int) uint64 { return uint64(slot) << kv.ScanHashBits }

// fnv64a is FNV-1a over key, without the allocation of hash/fnv.
func fnv64a(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return h
}

// scanFilter selects the keys a scan returns among the live ones it visits.
type scanFilter struct {
	match []byte // a Redis glob; nil matches every key
	kind  string // an entry type as TYPE names it; "" matches every type
}

// entryType names the type of e's value as Redis's TYPE does.
func entryType(e *entry) string { return e.kind().String() }

// scanBounds limit one walk of a segment: how many keys it may visit, and how many bytes of keys it may
// return. A walk stops only between positions, so that the next one can resume at a position: it finishes
// the keys of the position it is in, which may overshoot its bounds by the few keys that share one.
type scanBounds struct {
	visits int
	bytes  int
	// takeFirst makes the walk take its first position whatever its bounds, so that a page always advances.
	takeFirst bool
}

// scanWalk is what one walk of a segment found.
type scanWalk struct {
	keys     []string
	next     uint64 // the position to resume at; end when the walk reached it
	visited  int
	bytes    int
	revision uint64 // the segment's revision when the walk read it
}

// scan walks segment's keys from position from up to, but excluding, end (0: to the end of the key space),
// within bounds, and appends to keys the live ones f accepts. It holds the segment's read lock for the walk
// only, and reads nothing outside the bounds; a MATCH pattern is matched after the lock is released, so a
// long pattern costs its caller alone. Internal keys (intents, transaction records) count as visits, so
// that many of them cannot make one walk long, but are never returned.
func (s *store) scan(segment int, from, end uint64, bounds scanBounds, f *scanFilter, keys []string) scanWalk {
	w, candidates := s.visitSegment(segment, from, end, bounds, f.kind)
	for _, key := range candidates {
		if f.match == nil || glob.Match(f.match, []byte(key), false) {
			keys = append(keys, strings.Clone(key)) // the entry's own would keep its value alive
		}
	}
	w.keys = keys
	return w
}

// visitSegment is scan's walk under the segment's read lock: it returns the live keys of type kind (any
// when empty) it visited, still the entries' own strings. The bytes bound counts them, matched or not.
func (s *store) visitSegment(segment int, from, end uint64, bounds scanBounds, kind string) (w scanWalk, candidates []string) {
	now := s.now()
	seg := &s.segments[segment]
	seg.mu.RLock()
	defer seg.mu.RUnlock()
	w = scanWalk{next: end, revision: seg.revision}
	last, started := uint64(0), false
	for pos, e := range seg.entries.from(from) {
		if end != kv.ScanDone && pos >= end {
			break
		}
		key := e.key()
		cost := len(key) + kv.ScanKeyOverhead
		if isInternalKey(key) {
			cost = 0
		}
		newPosition := !started || pos != last
		if newPosition && (started || !bounds.takeFirst) && (w.visited >= bounds.visits || w.bytes+cost > bounds.bytes) {
			w.next = pos
			break
		}
		last, started = pos, true
		w.visited++
		if cost > 0 && !e.expired(now) && (kind == "" || entryType(e) == kind) {
			candidates = append(candidates, key)
			w.bytes += cost
		}
	}
	return w, candidates
}

// segmentLen counts the keys stored in segment, expired ones not yet reclaimed included, as DBSIZE does:
// internal keys left out.
func (s *store) segmentLen(segment int) int {
	seg := &s.segments[segment]
	seg.mu.RLock()
	defer seg.mu.RUnlock()
	return seg.entries.len() - seg.internal
}
