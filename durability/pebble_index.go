package durability

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// loadIndex rebuilds the in-memory index of a store at open: the floors, the snapshot marks, and for
// each segment's log its first and last op, found with seeks rather than a scan. It checks the shape of
// every key it meets and that each log starts where its floor says.
func loadIndex(db *pebble.DB) (map[uint32]*pebbleSegment, error) {
	if err := checkPrefixes(db); err != nil {
		return nil, err
	}
	segs := make(map[uint32]*pebbleSegment)
	get := func(segment uint32) *pebbleSegment {
		if segs[segment] == nil {
			segs[segment] = &pebbleSegment{}
		}
		return segs[segment]
	}
	floors, err := loadFloors(db)
	if err != nil {
		return nil, err
	}
	if err := loadSnapshotMarks(db, get); err != nil {
		return nil, err
	}
	if err := loadLogs(db, get); err != nil {
		return nil, err
	}
	for segment, floor := range floors {
		if err := applyFloor(get(segment), segment, floor); err != nil {
			return nil, err
		}
	}
	for segment, seg := range segs {
		if _, ok := floors[segment]; !ok && !seg.empty() && seg.first != 1 {
			return nil, corrupt(fmt.Sprintf("segment %d: log starts at revision %d with no truncation", segment, seg.first), nil)
		}
	}
	return segs, nil
}

// applyFloor combines segment's truncation floor with what loadLogs found.
func applyFloor(seg *pebbleSegment, segment uint32, floor uint64) error {
	if seg.empty() {
		seg.logBounds = logBounds{first: floor, last: floor - 1}
		return nil
	}
	if seg.first != floor {
		return corrupt(fmt.Sprintf("segment %d: log starts at revision %d, truncation floor is %d", segment, seg.first, floor), nil)
	}
	return nil
}

// withIter runs fn on an iterator over [lower, upper) and folds in the iterator's own error.
func withIter(db *pebble.DB, lower, upper []byte, fn func(*pebble.Iterator) error) error {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return storageError("index", err)
	}
	err = fn(it)
	if err == nil {
		err = it.Error()
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return storageError("index", err)
	}
	return nil
}

// checkPrefixes fails on a key whose prefix byte is none of this package's, hopping from prefix to
// prefix.
func checkPrefixes(db *pebble.DB) error {
	return withIter(db, nil, nil, func(it *pebble.Iterator) error {
		for ok := it.First(); ok; {
			k := it.Key()
			if len(k) == 0 || (k[0] != opPrefix && k[0] != snapshotPrefix && k[0] != floorPrefix) {
				return corrupt(fmt.Sprintf("unexpected key %x", k), nil)
			}
			if k[0] == math.MaxUint8 {
				break
			}
			ok = it.SeekGE([]byte{k[0] + 1})
		}
		return nil
	})
}

// loadFloors reads every segment's truncation floor.
func loadFloors(db *pebble.DB) (map[uint32]uint64, error) {
	floors := make(map[uint32]uint64)
	err := withIter(db, []byte{floorPrefix}, []byte{floorPrefix + 1}, func(it *pebble.Iterator) error {
		for ok := it.First(); ok; ok = it.Next() {
			segment, err := parseSegmentKey(floorPrefix, it.Key())
			if err != nil {
				return err
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			if len(v) != 8 || binary.BigEndian.Uint64(v) == 0 {
				return corrupt(fmt.Sprintf("segment %d: malformed truncation floor %x", segment, v), nil)
			}
			floors[segment] = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return floors, err
}

// loadSnapshotMarks notes which segments have a snapshot, reading keys only; LoadSnapshot checks the
// values.
func loadSnapshotMarks(db *pebble.DB, get func(uint32) *pebbleSegment) error {
	return withIter(db, []byte{snapshotPrefix}, []byte{snapshotPrefix + 1}, func(it *pebble.Iterator) error {
		for ok := it.First(); ok; ok = it.Next() {
			segment, err := parseSegmentKey(snapshotPrefix, it.Key())
			if err != nil {
				return err
			}
			get(segment).snapshot = true
		}
		return nil
	})
}

// loadLogs finds each segment's first and last op: a seek to the segment's first key, one back from the
// next segment's first key, then on to the next segment.
func loadLogs(db *pebble.DB, get func(uint32) *pebbleSegment) error {
	return withIter(db, []byte{opPrefix}, []byte{opPrefix + 1}, func(it *pebble.Iterator) error {
		for ok := it.First(); ok; {
			segment, first, startOffset, _, err := opPosition(it)
			if err != nil {
				return err
			}
			if !it.SeekLT(opSegmentUpper(segment)) {
				if err := it.Error(); err != nil {
					return err
				}
				return corrupt(fmt.Sprintf("segment %d: last op vanished", segment), nil)
			}
			lastSegment, last, lastOffset, lastSize, err := opPosition(it)
			if err != nil {
				return err
			}
			if lastSegment != segment || last < first || lastOffset < startOffset {
				return corrupt(fmt.Sprintf("segment %d: inconsistent log ends: revisions %d..%d, offsets %d..%d",
					segment, first, last, startOffset, lastOffset), nil)
			}
			endOffset := lastOffset + lastSize
			if (endOffset-startOffset)/minStoredOpSize < last-first+1 {
				return corrupt(fmt.Sprintf("segment %d: revisions %d..%d cannot fit in %d bytes",
					segment, first, last, endOffset-startOffset), nil)
			}
			seg := get(segment)
			seg.logBounds = logBounds{first: first, last: last}
			seg.startOffset, seg.endOffset = startOffset, endOffset
			if segment == math.MaxUint32 {
				break
			}
			ok = it.SeekGE(opSegmentUpper(segment))
		}
		return nil
	})
}

// opPosition reads where the op under the iterator sits: segment, revision, offset and record size.
func opPosition(it *pebble.Iterator) (segment uint32, rev, offset, size uint64, err error) {
	k := it.Key()
	if segment, rev, err = parseOpKey(k); err != nil {
		return 0, 0, 0, 0, err
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	if offset, _, err = splitOpValue(segment, rev, v); err != nil {
		return 0, 0, 0, 0, err
	}
	return segment, rev, offset, uint64(len(k) + len(v)), nil
}
