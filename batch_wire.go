package zaris

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// The kv.OpBatch messages are encoded by hand, field by field, because a batch holds thousands of items and
// reflection would cost more than serving them. A request is a msgpack array of items, each
// [index, op, key, value, ttl]. A reply is an array of items in the same order, each
// [index, withheld, status, value, version, owner, epoch, map index, int], int being a get's ttl. Readers skip fields past those
// they know, so fields can be appended, and read appended fields only when present, so an older writer's
// items still decode.
const (
	batchRequestFields = 5
	batchReplyFields   = 9
	// batchReplyFieldsLeast is what every writer sends: items without the ttl come from older owners.
	batchReplyFieldsLeast = 8

	// batchHeaderOverhead bounds the array header of a request or a reply.
	batchHeaderOverhead = 5
	// batchRequestItemOverhead bounds a request item's bytes beyond its key and value: array header,
	// index, op, key header, value header, ttl.
	batchRequestItemOverhead = 1 + 9 + 3 + 5 + 5 + 9
	// batchReplyItemOverhead bounds a reply item's bytes beyond its value and owner name: array header,
	// index, withheld, status, value header, version, owner header, epoch, map index, ttl.
	batchReplyItemOverhead = 1 + 9 + 1 + 2 + 5 + 9 + 5 + 9 + 9 + 9
)

// batchItemWire is one item of a batch as its owner receives it. Index is the sender's sequence number
// for the item: it orders items of one key and matches the reply to the item.
type batchItemWire struct {
	Index int
	Op    transport.Op
	Req   kv.Request
}

// batchItemReply answers one batch item. Withheld means the owner did not answer the item (and changed
// nothing) to keep the reply within a frame; the sender sends it again.
type batchItemReply struct {
	Index    int
	Withheld bool
	Reply    kv.Reply
}

func appendBatchHeader(dst []byte, items int) []byte {
	return msgp.AppendArrayHeader(dst, uint32(items))
}

func appendBatchRequestItem(dst []byte, it *batchItemWire) []byte {
	dst = msgp.AppendArrayHeader(dst, batchRequestFields)
	dst = msgp.AppendInt(dst, it.Index)
	dst = msgp.AppendUint16(dst, uint16(it.Op))
	dst = msgp.AppendString(dst, it.Req.Key)
	dst = msgp.AppendBytes(dst, it.Req.Value)
	return msgp.AppendInt64(dst, it.Req.TTL)
}

// decodeRequest decodes a batch request into w.items, in w's memory. A write's key gets a string of its
// own, since the store keeps it; the other items' keys share one string, so a batch of reads costs one
// allocation for all its keys. Values are copied: nothing decoded pins data.
func (w *batchWork) decodeRequest(data []byte) error {
	r := wireReader{b: data}
	w.items = resize(w.items, r.items())
	w.sharedKeys, w.keyEnds = w.sharedKeys[:0], w.keyEnds[:0]
	for i := range w.items {
		n := r.fields(batchRequestFields)
		index, op := r.int(), transport.Op(r.uint16())
		key := r.stringBytes()
		value, ttl := r.bytes(), r.int64()
		r.skip(n - batchRequestFields)
		w.items[i] = batchItemWire{Index: index, Op: op, Req: kv.Request{Value: value, TTL: ttl}}
		if keepsKey(op) {
			w.items[i].Req.Key = string(key)
		} else {
			w.sharedKeys = append(w.sharedKeys, key...)
			w.keyEnds = append(w.keyEnds, len(w.sharedKeys))
		}
	}
	if err := r.done("batch request"); err != nil {
		return err
	}
	w.shareKeys()
	return nil
}

// keepsKey reports whether serving an item of op may keep its key beyond the request: any write may.
func keepsKey(op transport.Op) bool { return !readOnly(op) }

// shareKeys gives the items whose key decodeRequest set aside their key, all cut from one string.
func (w *batchWork) shareKeys() {
	if len(w.keyEnds) == 0 {
		return
	}
	shared := string(w.sharedKeys)
	start, next := 0, 0
	for i := range w.items {
		it := &w.items[i]
		if keepsKey(it.Op) {
			continue
		}
		end := w.keyEnds[next]
		it.Req.Key, start, next = shared[start:end], end, next+1
	}
}

// batchReplySize bounds the encoded size of replies.
func batchReplySize(replies []batchItemReply) int {
	size := batchHeaderOverhead + len(replies)*batchReplyItemOverhead
	for i := range replies {
		size += len(replies[i].Reply.Value) + len(replies[i].Reply.Owner)
	}
	return size
}

func appendBatchReply(dst []byte, replies []batchItemReply) []byte {
	dst = appendBatchHeader(dst, len(replies))
	for i := range replies {
		r := &replies[i]
		dst = msgp.AppendArrayHeader(dst, batchReplyFields)
		dst = msgp.AppendInt(dst, r.Index)
		dst = msgp.AppendBool(dst, r.Withheld)
		dst = msgp.AppendUint8(dst, uint8(r.Reply.Status))
		dst = msgp.AppendBytes(dst, r.Reply.Value)
		dst = msgp.AppendUint64(dst, r.Reply.Version)
		dst = msgp.AppendString(dst, string(r.Reply.Owner))
		dst = msgp.AppendUint64(dst, r.Reply.Epoch)
		dst = msgp.AppendUint64(dst, r.Reply.MapIndex)
		dst = msgp.AppendInt64(dst, r.Reply.Int)
	}
	return dst
}

// decodeBatchReply reads a reply item by item, handing each to visit, which may stop the reading with an
// error. The item passed to visit is reused for the next one.
func decodeBatchReply(data []byte, visit func(*batchItemReply) error) error {
	r := wireReader{b: data}
	var it batchItemReply
	for range r.items() {
		n := r.fields(batchReplyFieldsLeast)
		it.Index = r.int()
		it.Withheld = r.bool()
		it.Reply.Status = Status(r.uint8())
		it.Reply.Value = r.sharedBytes()
		it.Reply.Version = r.uint64()
		it.Reply.Owner = NodeID(r.string())
		it.Reply.Epoch = r.uint64()
		it.Reply.MapIndex = r.uint64()
		it.Reply.Int = 0
		if n > batchReplyFieldsLeast {
			it.Reply.Int = r.int64()
		}
		r.skip(n - batchReplyFields)
		if r.err != nil {
			break
		}
		if r.err = visit(&it); r.err != nil {
			break
		}
	}
	return r.done("batch reply")
}

// wireReader reads msgpack values in sequence and keeps the first error, so decoders read straight
// through and check once at the end. After an error every read returns a zero value.
type wireReader struct {
	b   []byte
	err error
}

// items reads the outer array header, refusing counts the remaining bytes cannot hold.
func (r *wireReader) items() int {
	n := r.arrayHeader()
	if r.err == nil && int(n) > len(r.b) {
		r.err = fmt.Errorf("%d items in %d bytes", n, len(r.b))
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// fields reads an item's array header and returns how many fields it has, refusing fewer than least.
// Fields past least are read only when the count says they are there, and fields past those the reader
// knows are skipped.
func (r *wireReader) fields(least int) int {
	n := int(r.arrayHeader())
	if r.err == nil && n < least {
		r.err = fmt.Errorf("item has %d fields, want at least %d", n, least)
	}
	if r.err != nil {
		return 0
	}
	return n
}

func (r *wireReader) arrayHeader() uint32 {
	if r.err != nil {
		return 0
	}
	var n uint32
	n, r.b, r.err = msgp.ReadArrayHeaderBytes(r.b)
	return n
}

// readNil reads a msgpack nil if one comes next and reports whether it did.
func (r *wireReader) readNil() bool {
	if r.err == nil && msgp.IsNil(r.b) {
		r.b = r.b[1:]
		return true
	}
	return false
}

// arrayLen reads what precedes a slice: msgpack nil, for which it returns -1, or an array header, whose
// count it refuses when the bytes left cannot hold that many elements of at least least bytes each. It
// returns -1 after an error too.
func (r *wireReader) arrayLen(least int) int {
	if r.readNil() {
		return -1
	}
	n := r.arrayHeader()
	if r.err == nil && uint64(n)*uint64(least) > uint64(len(r.b)) {
		r.err = fmt.Errorf("%d elements of at least %d bytes in %d bytes", n, least, len(r.b))
	}
	if r.err != nil {
		return -1
	}
	return int(n)
}

// readArray reads an array whose elements take at least least bytes each, each element by read, or nil for
// msgpack nil. Its length is checked against the bytes left before anything is allocated (arrayLen).
func readArray[T any](r *wireReader, least int, read func(*T)) []T {
	n := r.arrayLen(least)
	if n < 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		read(&out[i])
	}
	return out
}

// skip skips fields values; none when fields is not positive.
func (r *wireReader) skip(fields int) {
	for ; fields > 0 && r.err == nil; fields-- {
		r.b, r.err = msgp.Skip(r.b)
	}
}

// read applies one msgp reader unless an error has already occurred.
func readField[T any](r *wireReader, fn func([]byte) (T, []byte, error)) T {
	var v T
	if r.err == nil {
		v, r.b, r.err = fn(r.b)
	}
	return v
}

func (r *wireReader) int() int       { return readField(r, msgp.ReadIntBytes) }
func (r *wireReader) int64() int64   { return readField(r, msgp.ReadInt64Bytes) }
func (r *wireReader) uint8() uint8   { return readField(r, msgp.ReadUint8Bytes) }
func (r *wireReader) uint16() uint16 { return readField(r, msgp.ReadUint16Bytes) }
func (r *wireReader) uint64() uint64 { return readField(r, msgp.ReadUint64Bytes) }
func (r *wireReader) bool() bool     { return readField(r, msgp.ReadBoolBytes) }
func (r *wireReader) string() string { return readField(r, msgp.ReadStringBytes) }
func (r *wireReader) bytes() []byte  { return readField(r, readBytesCopy) }

// stringBytes reads a str value in place: the bytes alias the message.
func (r *wireReader) stringBytes() []byte { return readField(r, msgp.ReadStringZC) }

// readBytesCopy reads a bin value into its own memory, so it does not pin the frame it came in: a stored
// value must not keep a whole request alive.
func readBytesCopy(b []byte) ([]byte, []byte, error) { return msgp.ReadBytesBytes(b, nil) }

// sharedBytes reads a bin value in place, capped so that appending to it cannot overwrite what follows.
func (r *wireReader) sharedBytes() []byte {
	v := readField(r, msgp.ReadBytesZC)
	return v[:len(v):len(v)]
}

// done reports the first error, or trailing bytes, as an invalid request.
func (r *wireReader) done(what string) error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidRequest, what, r.err)
	}
	return nil
}
