package zaris

import (
	"github.com/tinylib/msgp/msgp"

	"github.com/zaris-go/zaris/internal/kv"
)

// kv.Request and kv.Reply carry every single-key operation, so they are encoded by hand, field by field,
// like the batch messages (batch_wire.go). The layout is the one the reflective codec writes for the two
// structs (a msgpack array of the fields in declaration order, a nil Value as msgpack nil), with integers
// in their shortest form rather than full width, so either codec reads the other's output. A request is
// [key, value, ttl, delta, cond, concern, version, args, expire at]. A reply is
// [status, value, version, owner, epoch, map index, int, existed]. Readers skip fields past those they
// know, so fields can be appended, and read appended fields only when present, so an older writer's
// messages still decode. The reflective codec refuses an array of another length than its struct, so only
// these readers read the messages of other versions. Collection operations append Args to the request and
// Values to the reply: arrays of values, or nil; the reply then ends with the segment's revision.
const (
	kvRequestFields = 9
	// kvRequestFieldsArgs is the fewest fields of a request with Args.
	kvRequestFieldsArgs = 8
	kvReplyFields       = 12
	// kvReplyFieldsValues, kvReplyFieldsRevision, kvReplyFieldsEmptied are the fewest fields of a reply
	// with Values, with a revision, with Emptied.
	kvReplyFieldsValues   = 9
	kvReplyFieldsRevision = 10
	kvReplyFieldsEmptied  = 11
	// kvRequestFieldsVersion is the fewest fields of a request with a version.
	kvRequestFieldsVersion = 7
	// kvRequestFieldsLeast and kvReplyFieldsLeast are what every writer sends: messages with fewer fields
	// than the others come from older nodes.
	kvRequestFieldsLeast = 6
	kvReplyFieldsLeast   = 8

	// kvRequestOverhead bounds a request's bytes beyond its key and value: array header, key header,
	// value header, ttl, delta, cond, concern, version, expire at.
	kvRequestOverhead = 1 + 5 + 5 + 9 + 9 + 2 + 2 + 9 + 9
	// kvReplyOverhead bounds a reply's bytes beyond its value and owner name: array header, status,
	// value header, version, owner header, epoch, map index, int, existed, revision, emptied, created.
	kvReplyOverhead = 1 + 2 + 5 + 9 + 5 + 9 + 9 + 9 + 1 + 9 + 1 + 1
)

// sizeBound bounds the encoded size of r.
func requestSizeBound(r *kv.Request) int {
	return kvRequestOverhead + len(r.Key) + len(r.Value) + valuesSize(r.Args)
}

// sizeBound bounds the encoded size of r.
func replySizeBound(r *kv.Reply) int {
	return kvReplyOverhead + len(r.Value) + len(r.Owner) + valuesSize(r.Values)
}

// valuesSize bounds the encoded size of values: an array header and each value's header and bytes.
func valuesSize(values [][]byte) int {
	n := 5
	for _, v := range values {
		n += 5 + len(v)
	}
	return n
}

// appendMsg appends the encoded request to dst.
func appendRequest(r *kv.Request, dst []byte) []byte {
	dst = msgp.AppendArrayHeader(dst, kvRequestFields)
	dst = msgp.AppendString(dst, r.Key)
	dst = appendValue(dst, r.Value)
	dst = msgp.AppendInt64(dst, r.TTL)
	dst = msgp.AppendInt64(dst, r.Delta)
	dst = msgp.AppendUint8(dst, uint8(r.Cond))
	dst = msgp.AppendUint8(dst, uint8(r.Concern))
	dst = msgp.AppendUint64(dst, r.Version)
	dst = appendValues(dst, r.Args)
	return msgp.AppendInt64(dst, r.ExpireAt)
}

// marshal returns the encoded request in a buffer of its own.
func marshalRequest(r *kv.Request) []byte {
	return appendRequest(r, make([]byte, 0, requestSizeBound(r)))
}

// decodeMsg replaces r with the request encoded in b. Errors wrap ErrInvalidRequest. Value aliases b, capped
// so appending to it cannot overwrite b. The transport never reuses a frame's payload, so this is safe
// there; a caller whose b is reused must copy Value.
func decodeRequest(r *kv.Request, b []byte) error {
	w := wireReader{b: b}
	n := w.fields(kvRequestFieldsLeast)
	*r = kv.Request{
		Key:     w.string(),
		Value:   w.value(),
		TTL:     w.int64(),
		Delta:   w.int64(),
		Cond:    kv.Cond(w.uint8()),
		Concern: WriteConcern(w.uint8()),
	}
	if n >= kvRequestFieldsVersion {
		r.Version = w.uint64()
	}
	if n >= kvRequestFieldsArgs {
		r.Args = w.values()
	}
	if n >= kvRequestFields {
		r.ExpireAt = w.int64()
	}
	w.skip(n - kvRequestFields)
	if err := w.done("kv request"); err != nil {
		*r = kv.Request{}
		return err
	}
	return nil
}

// appendMsg appends the encoded reply to dst.
func appendReply(r *kv.Reply, dst []byte) []byte {
	dst = msgp.AppendArrayHeader(dst, kvReplyFields)
	dst = msgp.AppendUint8(dst, uint8(r.Status))
	dst = appendValue(dst, r.Value)
	dst = msgp.AppendUint64(dst, r.Version)
	dst = msgp.AppendString(dst, string(r.Owner))
	dst = msgp.AppendUint64(dst, r.Epoch)
	dst = msgp.AppendUint64(dst, r.MapIndex)
	dst = msgp.AppendInt64(dst, r.Int)
	dst = msgp.AppendBool(dst, r.Existed)
	dst = appendValues(dst, r.Values)
	dst = msgp.AppendUint64(dst, r.Revision)
	dst = msgp.AppendBool(dst, r.Emptied)
	return msgp.AppendBool(dst, r.Created)
}

// marshal returns the encoded reply in a buffer of its own.
func marshalReply(r *kv.Reply) []byte {
	return appendReply(r, make([]byte, 0, replySizeBound(r)))
}

// decodeMsg replaces r with the reply encoded in b. Value aliases b, as for kv.Request.decodeMsg. Errors
// wrap ErrInvalidRequest.
func decodeReply(r *kv.Reply, b []byte) error {
	w := wireReader{b: b}
	n := w.fields(kvReplyFieldsLeast)
	*r = kv.Reply{
		Status:   Status(w.uint8()),
		Value:    w.value(),
		Version:  w.uint64(),
		Owner:    NodeID(w.string()),
		Epoch:    w.uint64(),
		MapIndex: w.uint64(),
		Int:      w.int64(),
		Existed:  w.bool(),
	}
	if n >= kvReplyFieldsValues {
		r.Values = w.values()
	}
	if n >= kvReplyFieldsRevision {
		r.Revision = w.uint64()
	}
	if n >= kvReplyFieldsEmptied {
		r.Emptied = w.bool()
	}
	if n >= kvReplyFields {
		r.Created = w.bool()
	}
	w.skip(n - kvReplyFields)
	if err := w.done("kv reply"); err != nil {
		*r = kv.Reply{}
		return err
	}
	return nil
}

// appendValue writes a nil value as msgpack nil and any other, even an empty one, as bin, so a decoded
// value is nil exactly when the encoded one was.
func appendValue(dst, v []byte) []byte {
	if v == nil {
		return msgp.AppendNil(dst)
	}
	return msgp.AppendBytes(dst, v)
}

// value reads what appendValue wrote: nil, or a bin value in place (see sharedBytes).
func (r *wireReader) value() []byte {
	if r.readNil() {
		return nil
	}
	return r.sharedBytes()
}

// appendValues writes nil values as msgpack nil and any others as an array of what appendValue writes.
func appendValues(dst []byte, values [][]byte) []byte {
	if values == nil {
		return msgp.AppendNil(dst)
	}
	dst = msgp.AppendArrayHeader(dst, uint32(len(values)))
	for _, v := range values {
		dst = appendValue(dst, v)
	}
	return dst
}

// values reads what appendValues wrote, each value in place, refusing a count the bytes left cannot hold.
func (r *wireReader) values() [][]byte {
	return readArray(r, 1, func(v *[]byte) { *v = r.value() })
}
