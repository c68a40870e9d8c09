package zaris

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/zaris-go/zaris/transport"
)

// putCond holds the conditions and options of a conditional put. The bits are part of the wire format.
type putCond uint8

const (
	condIfAbsent   putCond = 1 << iota // write only if the key has no live value
	condIfExists                       // write only if the key has a live value
	condKeepTTL                        // keep the current expiry instead of setting a new one
	condReturnPrev                     // reply with the previous value

	// The conditions of an expire (Redis's EXPIRE options), compared with the key's current expiry, none
	// counting as infinite.
	condExpiryNone    // NX: only if the key has no expiry
	condExpiryExists  // XX: only if the key has an expiry
	condExpiryGreater // GT: only if the new expiry is later
	condExpiryLess    // LT: only if the new expiry is sooner
)

// Data-plane operations. The numbers are part of the wire format: append, never renumber. Each key
// operation is declared in keyOps (operations.go).
const (
	opGet transport.Op = iota + 1
	opPut
	opDelete
	opGetMap
)

// Batch of key operations, grouped for one owner (batch.go).
const (
	opBatch transport.Op = 5
)

// Key commands beyond get, put and delete (commands.go). Numbers 10 to 19 are theirs.
const (
	opIncr    transport.Op = 10 // add Delta to an integer value
	opExpire  transport.Op = 11 // set a key's TTL; a non-positive TTL deletes the key
	opPersist transport.Op = 12 // drop a key's expiry
	opTTL     transport.Op = 13 // read a key's remaining TTL
	opExists  transport.Op = 14 // test a key without shipping its value
	opPutIf   transport.Op = 15 // put under the conditions in Cond, optionally returning the previous value

	opGetEntry        transport.Op = 16 // read a key's value, version and TTL
	opPutIfVersion    transport.Op = 17 // put if the key's version is Version (0: the key has no live value)
	opDeleteIfVersion transport.Op = 18 // delete if the key's version is Version
	opObject          transport.Op = 19 // describe a key's value as OBJECT does (object.go)
)

// String commands (strings.go). Numbers 40 to 47 are theirs.
const (
	opIncrByFloat transport.Op = 40 // add the float written in Value to a value
	opAppend      transport.Op = 41 // append Value to a value, creating the key
	opGetDel      transport.Op = 42 // read a value and delete the key
	opGetEx       transport.Op = 43 // read a value and set its expiry as opPut does; KeepTTL keeps it, TTL < 0 deletes
	opType        transport.Op = 44 // name the kind of a key's value
	opSetRange    transport.Op = 45 // overwrite a value with Value from offset Delta, padding with zero bytes
)

// Collection operations (hash.go, set.go, list.go, zset.go). Numbers 48 to 79 are theirs. Each takes the
// arguments after the key, as the Redis command of its name does, in kvRequest.Args.
const (
	opHSet    transport.Op = 48
	opHGet    transport.Op = 49
	opHMGet   transport.Op = 50
	opHDel    transport.Op = 51
	opHGetAll transport.Op = 52
	opHLen    transport.Op = 53
	opHIncrBy transport.Op = 54
	opHExists transport.Op = 55

	opSAdd      transport.Op = 56
	opSRem      transport.Op = 57
	opSMembers  transport.Op = 58
	opSIsMember transport.Op = 59
	opSCard     transport.Op = 60

	opLPush  transport.Op = 61
	opRPush  transport.Op = 62
	opLPop   transport.Op = 63
	opRPop   transport.Op = 64
	opLRange transport.Op = 65
	opLLen   transport.Op = 66
	opLIndex transport.Op = 67
	opLTrim  transport.Op = 68

	opZAdd    transport.Op = 69
	opZRem    transport.Op = 70
	opZScore  transport.Op = 71
	opZRange  transport.Op = 72
	opZRank   transport.Op = 73
	opZCard   transport.Op = 74
	opZIncrBy transport.Op = 75
)

// Scans of the key space (scan.go, scan_serve.go). Numbers 80 to 84 are theirs.
const (
	opScan transport.Op = 80 // one page of keys from a scan position
)

// Replication and control operations. Numbers 20 to 39 are theirs.
const (
	opReplicate transport.Op = 20 // owner -> replica: ops, snapshots and probes (replication.go)
	opPropose   transport.Op = 21 // any node -> leader: commit a control decision (control.go)
	// opServerProgress: leader -> non-voter, and any node -> leader: how far the process's control-plane
	// server has applied and committed the log (voters.go)
	opServerProgress transport.Op = 22
)

// Transactions (txn.go, txn_ops.go). Numbers 90 to 99 are theirs.
const (
	opTxn          transport.Op = 90 // the operations of a transaction on one segment, applied atomically
	opCheckVersion transport.Op = 91 // succeed if a key is at Version (0: no live value), else a mismatch
	opIntent       transport.Op = 92 // hold a key for a transaction being prepared (txn_intent.go)
	opResolve      transport.Op = 93 // end a transaction's hold on a key, applying its write if it committed
	opDecide       transport.Op = 94 // record a transaction's outcome, unless recorded already
	opForget       transport.Op = 95 // drop a transaction's record once its keys are resolved
)

// Key watches (watch.go, watchfeed.go) and near caches (nearcache.go, nearcache_feed.go). Numbers 85 to 89
// are theirs.
const (
	opWatch     transport.Op = 85 // watcher's node -> owner: a long poll for a key's or slot's events
	opNearGet   transport.Op = 86 // a read for a near cache: value, version, TTL and the segment's revision
	opNearWatch transport.Op = 87 // caching node -> owner: a long poll for the keys changed in segments
)

// kvRequest is a single-key operation. The receiver derives the segment from Key itself and never trusts
// the sender's placement.
type kvRequest struct {
	_msgpack struct{} `msgpack:",as_array"`
	Key      string
	Value    []byte
	TTL      int64        // nanoseconds; 0 = no expiry
	Delta    int64        // opIncr: the amount to add; opSetRange: the offset
	Cond     putCond      // opPutIf: the conditions and options of the put
	Concern  WriteConcern // writes: when to acknowledge; 0 = the owner's Config.WriteConcern
	Version  uint64       // opPutIfVersion, opDeleteIfVersion: the version the key must have; 0 = no live value
	// Args are a collection operation's arguments after the key, as the Redis command takes them.
	Args [][]byte
}

// kvReply answers a kvRequest. For Moved-like statuses, Owner, Epoch and MapIndex describe the receiver's
// view so the sender can tell whether its own map is older.
type kvReply struct {
	_msgpack struct{} `msgpack:",as_array"`
	Status   Status
	Value    []byte
	Version  uint64 // the version read or written; with StatusVersionMismatch, the key's current one
	Owner    NodeID
	Epoch    uint64
	MapIndex uint64
	// Int is, for opIncr, the new value; opTTL: nanoseconds left, or -1 without expiry; opGet and
	// opGetEntry: nanoseconds left, or 0 without expiry; opPersist and opGetEx: 1 if written; opAppend and
	// opSetRange: the new length. Beside StatusInvalidRequest, a refusal code (strings.go).
	Int int64
	// Existed: for opPutIf, the key had a live value (then Value holds it, if asked for); for opNearGet, the
	// key still has the version the request named, and Value is left out.
	Existed bool
	// Values are a collection operation's array reply, a nil element for a missing one.
	Values [][]byte
	// Revision is, for opNearGet, the segment's revision just before the read: every later change of the
	// key comes after it in the segment's op log.
	Revision uint64
}

func encode(v any) ([]byte, error) { return msgpack.Marshal(v) }

// decode reads a message with the reflective codec. The bytes are first checked to be well-formed msgpack
// with no array or map claiming more elements than the bytes left can hold. The reflective codec sizes a
// slice by its header before reading the elements, so a five-byte header could otherwise allocate gigabytes.
func decode(data []byte, v any) error {
	if _, err := msgp.Skip(data); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if err := msgpack.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}

// boolInt is a reply's Int for a yes or no: 1 or 0.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
