package kv

// Cond holds the conditions and options of a conditional put. The bits are part of the wire format.
type Cond uint8

const (
	CondIfAbsent   Cond = 1 << iota // write only if the key has no live value
	CondIfExists                    // write only if the key has a live value
	CondKeepTTL                     // keep the current expiry instead of setting a new one
	CondReturnPrev                  // reply with the previous value

	// The conditions of an expire (Redis's EXPIRE options), compared with the key's current expiry, none
	// counting as infinite.
	CondExpiryNone    // NX: only if the key has no expiry
	CondExpiryExists  // XX: only if the key has an expiry
	CondExpiryGreater // GT: only if the new expiry is later
	CondExpiryLess    // LT: only if the new expiry is sooner
)

// Request is a single-key operation. The receiver derives the segment from Key itself and never trusts
// the sender's placement.
type Request struct {
	_msgpack struct{} `msgpack:",as_array"`
	Key      string
	Value    []byte
	TTL      int64        // nanoseconds; 0 = no expiry
	Delta    int64        // OpIncr: the amount to add; OpSetRange: the offset
	Cond     Cond         // OpPutIf: the conditions and options of the put
	Concern  WriteConcern // writes: when to acknowledge; 0 = the owner's Config.WriteConcern
	Version  uint64       // OpPutIfVersion, OpDeleteIfVersion: the version the key must have; 0 = no live value
	// Args are a collection operation's arguments after the key, as the Redis command takes them.
	Args [][]byte
	// ExpireAt, when not zero, is the expiry as a Unix time in nanoseconds, in place of TTL: a deadline the
	// client named (EXPIREAT, SET PXAT), which no delay on the way to the owner may move.
	ExpireAt int64
}

// Reply answers a Request. For Moved-like statuses, Owner, Epoch and MapIndex describe the receiver's
// view so the sender can tell whether its own map is older.
type Reply struct {
	_msgpack struct{} `msgpack:",as_array"`
	Status   Status
	Value    []byte
	Version  uint64 // the version read or written; with StatusVersionMismatch, the key's current one
	Owner    NodeID
	Epoch    uint64
	MapIndex uint64
	// Int is, for OpIncr, the new value; OpTTL: nanoseconds left, or -1 without expiry; OpExpiryTime: the
	// expiry in Unix nanoseconds, or -1 without one; OpGet and
	// OpGetEntry: nanoseconds left, or 0 without expiry; OpPersist and OpGetEx: 1 if written; OpAppend and
	// OpSetRange: the new length. Beside StatusInvalidRequest, a refusal code (refusal.go).
	Int int64
	// Existed: for OpPutIf, the key had a live value (then Value holds it, if asked for); for OpNearGet, the
	// key still has the version the request named, and Value is left out.
	Existed bool
	// Values are a collection operation's array reply, a nil element for a missing one.
	Values [][]byte
	// Revision is, for OpNearGet, the segment's revision just before the read: every later change of the
	// key comes after it in the segment's op log.
	Revision uint64
	// Emptied: a collection write removed the last item, which deleted the key.
	Emptied bool
	// Created: the write gave a value to a key that had no live one (keyspace notifications of new keys).
	Created bool
}

// BoolInt is a reply's Int for a yes or no: 1 or 0.
func BoolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// CloneValues copies values into one buffer of their own, keeping nil ones nil.
func CloneValues(values [][]byte) [][]byte {
	if values == nil {
		return nil
	}
	size := 0
	for _, v := range values {
		size += len(v)
	}
	buf := make([]byte, 0, size)
	out := make([][]byte, len(values))
	for i, v := range values {
		if v != nil {
			buf = append(buf, v...)
			out[i] = buf[len(buf)-len(v) : len(buf) : len(buf)]
		}
	}
	return out
}
