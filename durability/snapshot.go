package durability

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// Entry is one live key in a segment snapshot. A collection's Value is its elements encoded by AppendArgs;
// a large one may be carried by several entries of the same key, each holding part of its elements.
type Entry struct {
	Key      string
	Value    []byte
	ExpireAt int64 // absolute expiry, Unix nanoseconds; 0 = none
	Version  uint64
	Kind     uint8 // 0 for a string value, else the kind of collection (the store's numbering)
}

// Snapshot is the whole state of one segment as of Revision: replaying the segment's ops above Revision
// on top of it gives the current state.
type Snapshot struct {
	Segment  uint32
	Revision uint64
	Epoch    uint64 // the epoch of the owner whose history the segment follows
	Entries  []Entry
}

const (
	snapshotFields = 4
	// entryFields is what every entry holds; entryFieldsKind adds the kind, which writers omit for a string
	// value so that snapshots of strings alone read the same as before kinds existed.
	entryFields     = 4
	entryFieldsKind = 5

	// minEntrySize is the fewest bytes an encoded entry takes (array header, empty key, empty bin, two
	// one-byte integers). It bounds the entry count a header may claim before anything is allocated.
	minEntrySize = 1 + 1 + 2 + 1 + 1

	// maxEntriesUpFront caps the entries allocated before any is decoded.
	maxEntriesUpFront = 4096
)

// snapshotSizeHint is an upper bound on the encoded size of s.
func snapshotSizeHint(s *Snapshot) int {
	n := msgp.ArrayHeaderSize + msgp.Uint32Size + 2*msgp.Uint64Size + msgp.ArrayHeaderSize
	for i := range s.Entries {
		e := &s.Entries[i]
		n += msgp.ArrayHeaderSize + msgp.StringPrefixSize + len(e.Key) + msgp.BytesPrefixSize + len(e.Value) +
			msgp.Int64Size + msgp.Uint64Size + msgp.Uint8Size
	}
	return n
}

// AppendSnapshot appends the msgpack encoding of s to dst: the array [segment, revision, epoch, entries],
// each entry the array [key, value, expireAt, version], with kind appended for a collection.
func AppendSnapshot(dst []byte, s *Snapshot) []byte {
	dst = msgp.Require(dst, snapshotSizeHint(s))
	dst = msgp.AppendArrayHeader(dst, snapshotFields)
	dst = msgp.AppendUint32(dst, s.Segment)
	dst = msgp.AppendUint64(dst, s.Revision)
	dst = msgp.AppendUint64(dst, s.Epoch)
	dst = msgp.AppendArrayHeader(dst, uint32(len(s.Entries)))
	for i := range s.Entries {
		e := &s.Entries[i]
		fields := uint32(entryFields)
		if e.Kind != 0 {
			fields = entryFieldsKind
		}
		dst = msgp.AppendArrayHeader(dst, fields)
		dst = msgp.AppendString(dst, e.Key)
		dst = msgp.AppendBytes(dst, e.Value)
		dst = msgp.AppendInt64(dst, e.ExpireAt)
		dst = msgp.AppendUint64(dst, e.Version)
		if e.Kind != 0 {
			dst = msgp.AppendUint8(dst, e.Kind)
		}
	}
	return dst
}

// DecodeSnapshot decodes a snapshot that fills all of b. Nothing in the result aliases b. Malformed input,
// trailing bytes included, returns an error wrapping ErrCorrupt.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	fields, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return Snapshot{}, corrupt("snapshot header", err)
	}
	if fields < snapshotFields {
		return Snapshot{}, corrupt(fmt.Sprintf("snapshot has %d fields, want at least %d", fields, snapshotFields), nil)
	}
	if s.Segment, b, err = msgp.ReadUint32Bytes(b); err != nil {
		return Snapshot{}, corrupt("snapshot segment", err)
	}
	if s.Revision, b, err = msgp.ReadUint64Bytes(b); err != nil {
		return Snapshot{}, corrupt("snapshot revision", err)
	}
	if s.Epoch, b, err = msgp.ReadUint64Bytes(b); err != nil {
		return Snapshot{}, corrupt("snapshot epoch", err)
	}
	if s.Entries, b, err = decodeEntries(b); err != nil {
		return Snapshot{}, err
	}
	if b, err = skipFields(b, fields-snapshotFields); err != nil {
		return Snapshot{}, corrupt("snapshot trailing fields", err)
	}
	if len(b) != 0 {
		return Snapshot{}, corrupt(fmt.Sprintf("%d bytes after the snapshot", len(b)), nil)
	}
	return s, nil
}

// decodeEntries reads the entries array. Each value gets its own allocation, so a caller that keeps a
// few of them does not keep the rest alive.
func decodeEntries(b []byte) ([]Entry, []byte, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, nil, corrupt("snapshot entries header", err)
	}
	if n == 0 {
		return nil, b, nil
	}
	if uint64(n) > uint64(len(b)/minEntrySize) {
		return nil, nil, corrupt(fmt.Sprintf("snapshot claims %d entries in %d bytes", n, len(b)), nil)
	}
	// Entries grow as they decode, so a header that lies costs no more than the bytes behind it.
	entries := make([]Entry, 0, min(n, maxEntriesUpFront))
	for i := range n {
		var e Entry
		if b, err = decodeEntry(b, &e); err != nil {
			return nil, nil, fmt.Errorf("snapshot entry %d: %w", i, err)
		}
		entries = append(entries, e)
	}
	return entries, b, nil
}

// decodeEntry reads one entry into e.
func decodeEntry(b []byte, e *Entry) (rest []byte, err error) {
	fields, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, corrupt("entry header", err)
	}
	if fields < entryFields {
		return nil, corrupt(fmt.Sprintf("entry has %d fields, want at least %d", fields, entryFields), nil)
	}
	key, b, err := msgp.ReadStringZC(b)
	if err != nil {
		return nil, corrupt("entry key", err)
	}
	e.Key = string(key)
	value, b, err := msgp.ReadBytesZC(b)
	if err != nil {
		return nil, corrupt("entry value", err)
	}
	e.Value = append(make([]byte, 0, len(value)), value...)
	if e.ExpireAt, b, err = msgp.ReadInt64Bytes(b); err != nil {
		return nil, corrupt("entry expiry", err)
	}
	if e.Version, b, err = msgp.ReadUint64Bytes(b); err != nil {
		return nil, corrupt("entry version", err)
	}
	if fields >= entryFieldsKind {
		if e.Kind, b, err = msgp.ReadUint8Bytes(b); err != nil {
			return nil, corrupt("entry kind", err)
		}
		fields--
	}
	if b, err = skipFields(b, fields-entryFields); err != nil {
		return nil, corrupt("entry trailing fields", err)
	}
	return b, nil
}
