package durability

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// OpKind says what an op does to its key.
type OpKind uint8

const (
	OpPut    OpKind = 1
	OpDelete OpKind = 2
)

// Collection ops change part of a hash, set, list or sorted set, so that a write to a large collection
// costs its arguments, not the collection. Their Value is the op's arguments, encoded by AppendArgs; what
// the arguments mean is the store's business. Kinds 3 to 15 are theirs.
const (
	OpHashSet  OpKind = 3  // set hash fields to values
	OpHashDel  OpKind = 4  // delete hash fields
	OpSetAdd   OpKind = 5  // add set members
	OpSetRem   OpKind = 6  // remove set members
	OpListPush OpKind = 7  // push list items at one end
	OpListPop  OpKind = 8  // pop list items from one end
	OpListTrim OpKind = 9  // keep a range of a list
	OpZAdd     OpKind = 10 // set sorted set members' scores
	OpZRem     OpKind = 11 // remove sorted set members
	OpExpireAt OpKind = 12 // set the key's expiry to ExpireAt, keeping its value
)

// Expiry and eviction. Numbers 16 to 19 are theirs.
const (
	// OpExpire deletes a key whose expiry time has passed. The owner records it, so that the key's end is
	// an event of the segment's history like any other delete.
	OpExpire OpKind = 16
	// OpEvict deletes a key its owner evicted to keep within its memory bound.
	OpEvict OpKind = 17
)

// Transactions. Numbers 20 to 23 are theirs.
const (
	// OpMulti applies several ops at one revision, all or none: the writes of a transaction. Its Value is
	// the ops, encoded by AppendMulti; its Key is the first op's.
	OpMulti OpKind = 20
)

var opKindNames = [...]string{
	OpPut: "put", OpDelete: "delete", OpHashSet: "hashset", OpHashDel: "hashdel", OpSetAdd: "setadd",
	OpSetRem: "setrem", OpListPush: "listpush", OpListPop: "listpop", OpListTrim: "listtrim", OpZAdd: "zadd",
	OpZRem: "zrem", OpExpireAt: "expireat", OpExpire: "expire", OpEvict: "evict", OpMulti: "multi",
}

func (k OpKind) valid() bool {
	return k >= OpPut && k <= OpExpireAt || k == OpExpire || k == OpEvict || k == OpMulti
}

// deletes reports whether an op of kind k removes its key, and so carries no value.
func (k OpKind) deletes() bool { return k == OpDelete || k == OpExpire || k == OpEvict }

// HasArgs reports whether ops of kind k carry encoded arguments rather than a value.
func (k OpKind) HasArgs() bool { return k >= OpHashSet && k <= OpExpireAt }

func (k OpKind) String() string {
	if k.valid() {
		return opKindNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is one write to one key of one segment, as the segment's owner applied it.
type Op struct {
	Segment  uint32
	Revision uint64 // the segment's revision after this op; strictly increasing per segment, starting at 1
	Epoch    uint64 // the epoch of the owner whose history it belongs to: it applied it, or sent it here
	Kind     OpKind
	Key      string
	Value    []byte // OpPut: the value; a collection op: its arguments (AppendArgs); OpDelete: none
	ExpireAt int64  // absolute expiry, Unix nanoseconds; 0 = none
	Version  uint64 // the key's version after the op
	Time     int64  // when the owner applied it, Unix nanoseconds (for age-based retention)
}

// opFields is the number of fields in an encoded op. Decoders skip any fields past these, so a later
// version can append fields without breaking older readers.
const opFields = 9

// opSizeHint is an upper bound on the encoded size of op, used to grow buffers once.
func opSizeHint(op *Op) int {
	return msgp.ArrayHeaderSize + msgp.Uint32Size + 3*msgp.Uint64Size + msgp.Uint8Size +
		msgp.StringPrefixSize + len(op.Key) + msgp.BytesPrefixSize + len(op.Value) + 2*msgp.Int64Size
}

// AppendOp appends the msgpack encoding of op to dst: the array [segment, revision, epoch, kind, key,
// value, expireAt, version, time]. The value is bin for a put or a collection op and nil for a delete or
// an expiry, whose Value is ignored.
func AppendOp(dst []byte, op *Op) []byte {
	dst = msgp.Require(dst, opSizeHint(op))
	dst = msgp.AppendArrayHeader(dst, opFields)
	dst = msgp.AppendUint32(dst, op.Segment)
	dst = msgp.AppendUint64(dst, op.Revision)
	dst = msgp.AppendUint64(dst, op.Epoch)
	dst = msgp.AppendUint8(dst, uint8(op.Kind))
	dst = msgp.AppendString(dst, op.Key)
	if op.Kind.deletes() {
		dst = msgp.AppendNil(dst)
	} else {
		dst = msgp.AppendBytes(dst, op.Value)
	}
	dst = msgp.AppendInt64(dst, op.ExpireAt)
	dst = msgp.AppendUint64(dst, op.Version)
	return msgp.AppendInt64(dst, op.Time)
}

// DecodeOp decodes the op at the start of b and returns the rest of b after it. The op's Key and Value
// are copies: nothing in it aliases b. Malformed input returns an error wrapping ErrCorrupt; lengths in
// the input are checked against len(b) before anything is allocated.
func DecodeOp(b []byte) (Op, []byte, error) {
	var op Op
	value, rest, err := decodeOp(b, &op)
	if err != nil {
		return Op{}, nil, err
	}
	if !op.Kind.deletes() {
		op.Value = append(make([]byte, 0, len(value)), value...)
	}
	return op, rest, nil
}

// decodeOp decodes into op everything but the value, which it returns aliasing b.
func decodeOp(b []byte, op *Op) (value []byte, rest []byte, err error) {
	fields, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, nil, corrupt("op header", err)
	}
	if fields < opFields {
		return nil, nil, corrupt(fmt.Sprintf("op has %d fields, want at least %d", fields, opFields), nil)
	}
	if op.Segment, b, err = msgp.ReadUint32Bytes(b); err != nil {
		return nil, nil, corrupt("op segment", err)
	}
	if op.Revision, b, err = msgp.ReadUint64Bytes(b); err != nil {
		return nil, nil, corrupt("op revision", err)
	}
	if op.Epoch, b, err = msgp.ReadUint64Bytes(b); err != nil {
		return nil, nil, corrupt("op epoch", err)
	}
	kind, b, err := msgp.ReadUint8Bytes(b)
	if err != nil {
		return nil, nil, corrupt("op kind", err)
	}
	if op.Kind = OpKind(kind); !op.Kind.valid() {
		return nil, nil, corrupt(fmt.Sprintf("unknown op kind %d", kind), nil)
	}
	key, b, err := msgp.ReadStringZC(b)
	if err != nil {
		return nil, nil, corrupt("op key", err)
	}
	op.Key = string(key)
	if value, b, err = decodeOpValue(b, op.Kind); err != nil {
		return nil, nil, err
	}
	if op.ExpireAt, b, err = msgp.ReadInt64Bytes(b); err != nil {
		return nil, nil, corrupt("op expiry", err)
	}
	if op.Version, b, err = msgp.ReadUint64Bytes(b); err != nil {
		return nil, nil, corrupt("op version", err)
	}
	if op.Time, b, err = msgp.ReadInt64Bytes(b); err != nil {
		return nil, nil, corrupt("op time", err)
	}
	if b, err = skipFields(b, fields-opFields); err != nil {
		return nil, nil, corrupt("op trailing fields", err)
	}
	return value, b, nil
}

// CheckOp reports whether op is one DecodeOp could have returned: a known kind, and for a collection op
// or a multi op a value that decodes. Ops decoded by other means (a replication message) are checked
// with it before they are applied. Errors wrap ErrCorrupt.
func CheckOp(op *Op) error {
	switch {
	case !op.Kind.valid():
		return corrupt(fmt.Sprintf("unknown op kind %d", op.Kind), nil)
	case op.Kind.HasArgs():
		_, err := DecodeArgs(op.Value)
		return err
	case op.Kind == OpMulti:
		_, err := DecodeMulti(op.Value)
		return err
	}
	return nil
}

// decodeOpValue reads the value field: bin for a put, nil for a delete or an expiry, and for a collection
// op the bin of well-formed arguments.
func decodeOpValue(b []byte, kind OpKind) (value []byte, rest []byte, err error) {
	if kind.deletes() {
		if rest, err = msgp.ReadNilBytes(b); err != nil {
			return nil, nil, corrupt("delete op value is not nil", err)
		}
		return nil, rest, nil
	}
	if value, rest, err = msgp.ReadBytesZC(b); err != nil {
		return nil, nil, corrupt(kind.String()+" op value", err)
	}
	if kind.HasArgs() {
		if _, err := DecodeArgs(value); err != nil {
			return nil, nil, err
		}
	}
	if kind == OpMulti {
		if _, err := DecodeMulti(value); err != nil {
			return nil, nil, err
		}
	}
	return value, rest, nil
}

// skipFields skips n msgpack objects.
func skipFields(b []byte, n uint32) ([]byte, error) {
	var err error
	for ; n > 0; n-- {
		if b, err = msgp.Skip(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// corrupt reports malformed encoded data.
func corrupt(what string, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, what, cause)
}
