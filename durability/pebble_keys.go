package durability

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Key layout in Pebble. Every key starts with a prefix byte naming its kind, then the big-endian
// segment, so that one segment's records are contiguous and ordered:
//
//	'o' segment(4) revision(8)  an op; value = offset(8) + AppendOp bytes
//	's' segment(4)              the segment's snapshot; value = AppendSnapshot bytes
//	'f' segment(4)              the segment's truncation floor; value = revision(8)
//
// An op's offset is the number of log bytes (keys plus values) its segment held before it since the log
// began. LogBytes is the end offset of the last retained op minus the offset of the first, which needs no
// scan after a restart or truncation. The floor is the rev of the last effective TruncateBefore, keeping
// the log's place when truncation emptied it.
const (
	opPrefix       byte = 'o'
	snapshotPrefix byte = 's'
	floorPrefix    byte = 'f'

	opKeyLen      = 1 + 4 + 8
	segmentKeyLen = 1 + 4
	offsetLen     = 8

	// minStoredOpSize is the fewest bytes an op record takes: its key, its offset, and an encoded op of
	// nine one-byte fields behind a one-byte header.
	minStoredOpSize = opKeyLen + offsetLen + 1 + opFields
)

// appendOpKey appends the key of segment's op at rev.
func appendOpKey(dst []byte, segment uint32, rev uint64) []byte {
	dst = append(dst, opPrefix)
	dst = binary.BigEndian.AppendUint32(dst, segment)
	return binary.BigEndian.AppendUint64(dst, rev)
}

func opKey(segment uint32, rev uint64) []byte {
	return appendOpKey(make([]byte, 0, opKeyLen), segment, rev)
}

// opSegmentUpper is the smallest key above every op key of segment.
func opSegmentUpper(segment uint32) []byte {
	if segment == math.MaxUint32 {
		return []byte{opPrefix + 1}
	}
	return binary.BigEndian.AppendUint32([]byte{opPrefix}, segment+1)
}

// parseOpKey splits an op key.
func parseOpKey(k []byte) (segment uint32, rev uint64, err error) {
	if len(k) != opKeyLen || k[0] != opPrefix {
		return 0, 0, corrupt(fmt.Sprintf("malformed op key %x", k), nil)
	}
	return binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint64(k[5:]), nil
}

// segmentKey is the key of a per-segment record: a snapshot or a floor.
func segmentKey(prefix byte, segment uint32) []byte {
	return binary.BigEndian.AppendUint32(append(make([]byte, 0, segmentKeyLen), prefix), segment)
}

// parseSegmentKey returns the segment of a per-segment key with the given prefix.
func parseSegmentKey(prefix byte, k []byte) (uint32, error) {
	if len(k) != segmentKeyLen || k[0] != prefix {
		return 0, corrupt(fmt.Sprintf("malformed %q key %x", prefix, k), nil)
	}
	return binary.BigEndian.Uint32(k[1:]), nil
}

// splitOpValue splits an op value into its offset and its encoded op.
func splitOpValue(segment uint32, rev uint64, v []byte) (offset uint64, encoded []byte, err error) {
	if len(v) < offsetLen {
		return 0, nil, corrupt(fmt.Sprintf("segment %d revision %d: op value of %d bytes", segment, rev, len(v)), nil)
	}
	return binary.BigEndian.Uint64(v), v[offsetLen:], nil
}

// decodeStoredOp decodes the op stored under key, which must be segment's op at rev. The value is
// copied: v may be reused by the iterator.
func decodeStoredOp(key, v []byte, segment uint32, rev uint64) (Op, error) {
	gotSegment, gotRev, err := parseOpKey(key)
	if err != nil {
		return Op{}, err
	}
	if gotSegment != segment || gotRev != rev {
		return Op{}, corrupt(fmt.Sprintf("segment %d: revision %d missing (next key is segment %d revision %d)",
			segment, rev, gotSegment, gotRev), nil)
	}
	_, encoded, err := splitOpValue(segment, rev, v)
	if err != nil {
		return Op{}, err
	}
	op, rest, err := DecodeOp(encoded)
	if err != nil {
		return Op{}, fmt.Errorf("segment %d revision %d: %w", segment, rev, err)
	}
	if len(rest) != 0 || op.Segment != segment || op.Revision != rev {
		return Op{}, corrupt(fmt.Sprintf("segment %d revision %d: value holds segment %d revision %d and %d extra bytes",
			segment, rev, op.Segment, op.Revision, len(rest)), nil)
	}
	return op, nil
}
