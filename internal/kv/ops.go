package kv

import "github.com/zaris-go/zaris/transport"

// The numbers of the operations nodes send each other. They are part of the wire format: append, never
// renumber. The files named beside each group are the root package's.

// Data-plane operations.
const (
	OpGet transport.Op = iota + 1
	OpPut
	OpDelete
	OpGetMap
)

// Batch of key operations, grouped for one owner (batch.go).
const (
	OpBatch transport.Op = 5
)

// Key commands beyond get, put and delete (commands.go). Numbers 10 to 19 are theirs.
const (
	OpIncr    transport.Op = 10 // add Delta to an integer value
	OpExpire  transport.Op = 11 // set a key's TTL; a non-positive TTL deletes the key
	OpPersist transport.Op = 12 // drop a key's expiry
	OpTTL     transport.Op = 13 // read a key's remaining TTL
	OpExists  transport.Op = 14 // test a key without shipping its value
	OpPutIf   transport.Op = 15 // put under the conditions in Cond, optionally returning the previous value

	OpGetEntry        transport.Op = 16 // read a key's value, version and TTL
	OpPutIfVersion    transport.Op = 17 // put if the key's version is Version (0: the key has no live value)
	OpDeleteIfVersion transport.Op = 18 // delete if the key's version is Version
	OpObject          transport.Op = 19 // describe a key's value as OBJECT does (object.go)
)

// String commands (strings.go), and key commands past 19's. Numbers 40 to 47 are theirs.
const (
	OpIncrByFloat transport.Op = 40 // add the float written in Value to a value
	OpAppend      transport.Op = 41 // append Value to a value, creating the key
	OpGetDel      transport.Op = 42 // read a value and delete the key
	OpGetEx       transport.Op = 43 // read a value and set its expiry as OpPut does; KeepTTL keeps it, TTL < 0 deletes
	OpType        transport.Op = 44 // name the kind of a key's value
	OpSetRange    transport.Op = 45 // overwrite a value with Value from offset Delta, padding with zero bytes
	OpExpiryTime  transport.Op = 46 // read when a key expires, as a Unix time
)

// Collection operations (hash.go, set.go, list.go, zset.go). Numbers 48 to 79 are theirs. Each takes the
// arguments after the key, as the Redis command of its name does, in Request.Args.
const (
	OpHSet    transport.Op = 48
	OpHGet    transport.Op = 49
	OpHMGet   transport.Op = 50
	OpHDel    transport.Op = 51
	OpHGetAll transport.Op = 52
	OpHLen    transport.Op = 53
	OpHIncrBy transport.Op = 54
	OpHExists transport.Op = 55

	OpSAdd      transport.Op = 56
	OpSRem      transport.Op = 57
	OpSMembers  transport.Op = 58
	OpSIsMember transport.Op = 59
	OpSCard     transport.Op = 60

	OpLPush  transport.Op = 61
	OpRPush  transport.Op = 62
	OpLPop   transport.Op = 63
	OpRPop   transport.Op = 64
	OpLRange transport.Op = 65
	OpLLen   transport.Op = 66
	OpLIndex transport.Op = 67
	OpLTrim  transport.Op = 68

	OpZAdd    transport.Op = 69
	OpZRem    transport.Op = 70
	OpZScore  transport.Op = 71
	OpZRange  transport.Op = 72
	OpZRank   transport.Op = 73
	OpZCard   transport.Op = 74
	OpZIncrBy transport.Op = 75

	// Pops and conditional writes the Go API runs at the owner in one step; the RESP endpoint composes
	// its commands of the same names from the operations above.
	OpSPop    transport.Op = 76 // remove and answer members chosen at random
	OpZPopMin transport.Op = 77 // remove and answer the members of lowest score
	OpZPopMax transport.Op = 78 // remove and answer the members of highest score
	OpHSetNX  transport.Op = 79 // set a hash field unless it exists
)

// List moves (list.go). Numbers 100 to 109 are theirs.
const (
	OpLMove transport.Op = 100 // pop an item from one end of a list and push it onto an end of another
)

// Scans of the key space (scan.go, scan_serve.go). Numbers 80 to 84 are theirs.
const (
	OpScan transport.Op = 80 // one page of keys from a scan position
)

// Replication and control operations. Numbers 20 to 39 are theirs.
const (
	OpReplicate transport.Op = 20 // owner -> replica: ops, snapshots and probes (replication.go)
	OpPropose   transport.Op = 21 // any node -> leader: commit a control decision (control.go)
	// OpServerProgress: leader -> non-voter, and any node -> leader: how far the process's control-plane
	// server has applied and committed the log (voters.go)
	OpServerProgress transport.Op = 22

	// Recovery of a lost quorum (recover.go), on the internal lane: a survey of a member's control plane,
	// and a new start for it.
	OpRecoverySurvey  transport.Op = 30
	OpRecoveryInstall transport.Op = 31

	// OpPublish: any node -> any node, on the internal lane: published messages for the receiver's
	// subscribers, in the sender's order (pubsub.go)
	OpPublish transport.Op = 32

	// Backups (backup.go, backup_serve.go, restore.go), from protocol 2. OpBackup: a backup's coordinator
	// -> every owner, on the internal lane: hold transactions' decisions, release them, or read a piece of
	// a segment. OpRestore: a restore's coordinator -> a segment's owner, on the data lane: install a piece
	// of the segment, or say whether it holds data.
	OpBackup  transport.Op = 33
	OpRestore transport.Op = 34
)

// Transactions (txn.go, txn_ops.go). Numbers 90 to 99 are theirs.
const (
	OpTxn          transport.Op = 90 // the operations of a transaction on one segment, applied atomically
	OpCheckVersion transport.Op = 91 // succeed if a key is at Version (0: no live value), else a mismatch
	OpIntent       transport.Op = 92 // hold a key for a transaction being prepared (txn_intent.go)
	OpResolve      transport.Op = 93 // end a transaction's hold on a key, applying its write if it committed
	OpDecide       transport.Op = 94 // record a transaction's outcome, unless recorded already
	OpForget       transport.Op = 95 // drop a transaction's record once its keys are resolved
)

// Key watches (watch.go, watchfeed.go) and near caches (nearcache.go, nearcache_feed.go). Numbers 85 to 89
// are theirs.
const (
	OpWatch     transport.Op = 85 // watcher's node -> owner: a long poll for a key's or slot's events
	OpNearGet   transport.Op = 86 // a read for a near cache: value, version, TTL and the segment's revision
	OpNearWatch transport.Op = 87 // caching node -> owner: a long poll for the keys changed in segments
)
