package zaris

import (
	"strconv"

	"github.com/zaris-go/zaris/internal/kv"
)

// applyObject describes key's value as Redis's OBJECT does, without counting as an access. Args[0] names
// what: "freq", the LFU counter, or "idletime", seconds since the last access, in Int; "encoding", the
// encoding Redis would give the value as it is now, in Value; "memory", the bytes the entry takes, as the
// node counts them against its memory bound, in Int.
func applyObject(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) != 1 {
		return kv.Reply{Status: StatusInvalidRequest}
	}
	now := s.now()
	e := s.peek(seg, req.Key, now)
	if e == nil {
		return kv.Reply{Status: StatusNotFound}
	}
	mode := s.accessMode()
	switch string(req.Args[0]) {
	case "freq":
		if mode != accessLFU {
			return kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedNoFrequency}
		}
		return kv.Reply{Status: StatusSuccess, Int: int64(lfuDecayed(e.access(), now))}
	case "idletime":
		switch mode {
		case accessLFU:
			return kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedIdleTimeLFU}
		case accessNone:
			return kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedNoIdleTime}
		}
		return kv.Reply{Status: StatusSuccess, Int: int64(evictionRank(mode, e.access(), now))}
	case "encoding":
		return kv.Reply{Status: StatusSuccess, Value: []byte(encodingOf(e))}
	case "memory":
		return kv.Reply{Status: StatusSuccess, Int: e.size(req.Key)}
	}
	return kv.Reply{Status: StatusInvalidRequest}
}

// peek returns key's live entry at now, nil if none, without touching its access stamp.
func (s *store) peek(segment int, key string, now int64) *entry {
	seg := &s.segments[segment]
	s.rlock(seg)
	defer s.runlock(seg)
	if e := seg.entries.get(key); e != nil && !e.expired(now) {
		return e
	}
	return nil
}

// Redis keeps small collections and strings compactly, within these bounds (its defaults).
const (
	compactEntries    = 128 // hash-max-listpack-entries, zset-max-listpack-entries
	compactValueBytes = 64  // hash-max-listpack-value, zset-max-listpack-value
	intsetEntries     = 512 // set-max-intset-entries
	embeddedBytes     = 44  // a string stored in its object's allocation
)

// encodingOf names the encoding Redis gives a value like e's content.
func encodingOf(e *entry) string {
	cv := e.coll()
	if cv == nil {
		switch v := e.value(); {
		case len(v) <= 20 && isCanonicalInt(v):
			return "int"
		case len(v) <= embeddedBytes:
			return "embstr"
		}
		return "raw"
	}
	switch c := cv.c.(type) {
	case *listColl:
		return "quicklist"
	case *setColl:
		if c.len() <= intsetEntries && allElements(c.elements(), 1, isCanonicalInt) {
			return "intset"
		}
		return "hashtable"
	case *hashColl:
		if c.len() <= compactEntries && allElements(c.elements(), 1, isCompact) {
			return "listpack"
		}
		return "hashtable"
	case *zsetColl:
		if c.len() <= compactEntries && allElements(c.elements()[1:], 2, isCompact) {
			return "listpack"
		}
		return "skiplist"
	}
	return "raw"
}

// allElements reports whether ok holds for every step-th of elems.
func allElements(elems [][]byte, step int, ok func([]byte) bool) bool {
	for i := 0; i < len(elems); i += step {
		if !ok(elems[i]) {
			return false
		}
	}
	return true
}

func isCompact(b []byte) bool { return len(b) <= compactValueBytes }

// isCanonicalInt reports whether b is a 64-bit integer written as Redis writes one.
func isCanonicalInt(b []byte) bool {
	n, err := strconv.ParseInt(string(b), 10, 64)
	return err == nil && strconv.FormatInt(n, 10) == string(b)
}
