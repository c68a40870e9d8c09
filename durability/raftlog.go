package durability

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// Encoding of a raft.Log, version 1:
//
//	version     1 byte, raftLogVersion
//	index       uvarint
//	term        uvarint
//	type        1 byte
//	data        uvarint length, then the bytes
//	extensions  uvarint length, then the bytes
//	appendedAt  1 byte: 0 for the zero time, or 1 followed by the Unix nanoseconds as a zigzag varint
//
// The encoding of a log is unique: decoders refuse varints longer than needed, presence bytes other
// than 0 and 1, and trailing bytes, so that whatever decodes re-encodes to the same bytes.
const (
	raftLogVersion byte = 1

	// raftLogMaxOverhead bounds the encoded size of a log beyond its data and extensions.
	raftLogMaxOverhead = 1 + 2*binary.MaxVarintLen64 + 1 + 2*binary.MaxVarintLen64 + 1 + binary.MaxVarintLen64
)

// appendRaftLog appends the encoding of l to dst. AppendedAt is kept to the nanosecond, without its
// location or monotonic reading; a non-zero time outside the years 1678-2262 does not survive.
func appendRaftLog(dst []byte, l *raft.Log) []byte {
	dst = slices.Grow(dst, raftLogMaxOverhead+len(l.Data)+len(l.Extensions))
	dst = append(dst, raftLogVersion)
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	dst = append(dst, byte(l.Type))
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	if l.AppendedAt.IsZero() {
		return append(dst, 0)
	}
	return binary.AppendVarint(append(dst, 1), l.AppendedAt.UnixNano())
}

// decodeRaftLog decodes a log that fills all of b into l, which it leaves alone on failure. Data and
// Extensions are copies, nil when empty. Malformed input returns an error wrapping ErrCorrupt.
func decodeRaftLog(b []byte, l *raft.Log) error {
	r := raftLogReader{b: b}
	if v := r.byte("version"); r.err == nil && v != raftLogVersion {
		return corrupt(fmt.Sprintf("raft log: unknown format version %d", v), nil)
	}
	var out raft.Log
	out.Index = r.uvarint("index")
	out.Term = r.uvarint("term")
	out.Type = raft.LogType(r.byte("type"))
	out.Data = r.bytes("data")
	out.Extensions = r.bytes("extensions")
	out.AppendedAt = r.time("appended at")
	if r.err == nil && len(r.b) != 0 {
		return corrupt(fmt.Sprintf("raft log: %d bytes after the log", len(r.b)), nil)
	}
	if r.err != nil {
		return r.err
	}
	*l = out
	return nil
}

// raftLogReader reads the fields of an encoded log in turn. The first failure sticks: later reads
// return zero values, and err says what was malformed.
type raftLogReader struct {
	b   []byte
	err error
}

func (r *raftLogReader) fail(what, problem string) {
	if r.err == nil {
		r.err = corrupt(fmt.Sprintf("raft log %s: %s", what, problem), nil)
	}
}

func (r *raftLogReader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail(what, "missing")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *raftLogReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if !r.varintOK(what, n) {
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *raftLogReader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if !r.varintOK(what, n) {
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varintOK checks the result n of decoding a varint at the start of r.b: it must have ended within
// the buffer, without overflow, and be as short as its value allows (no trailing zero byte).
func (r *raftLogReader) varintOK(what string, n int) bool {
	switch {
	case n == 0:
		r.fail(what, "cut short")
	case n < 0:
		r.fail(what, "overflows 64 bits")
	case n > 1 && r.b[n-1] == 0:
		r.fail(what, "varint longer than needed")
	default:
		return true
	}
	return false
}

// bytes reads a length and that many bytes, which it copies.
func (r *raftLogReader) bytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil || n == 0 {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(what, fmt.Sprintf("length %d beyond the %d bytes left", n, len(r.b)))
		return nil
	}
	out := slices.Clone(r.b[:n])
	r.b = r.b[n:]
	return out
}

func (r *raftLogReader) time(what string) time.Time {
	present := r.byte(what)
	if r.err != nil || present == 0 {
		return time.Time{}
	}
	if present != 1 {
		r.fail(what, fmt.Sprintf("presence byte %d", present))
		return time.Time{}
	}
	return time.Unix(0, r.varint(what))
}
