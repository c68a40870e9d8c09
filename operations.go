package zaris

import (
	"errors"
	"strconv"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// keyOperation declares one key operation: what the owner serving it needs to know, and how it runs on
// the local store.
type keyOperation struct {
	name     string
	readOnly bool       // never writes, so it never waits for replicas nor for a sealed partition
	reveals  revelation // which replies tell the stored state (visibility.go)
	batch    BatchOp    // the batch item operation that runs it; 0 if none
	resp     []string   // the RESP commands that run it (internal/resp/commands.go)
	apply    applyFunc
	// ownLocks: the operation checks the transactions holding its keys itself, or writes only a record
	// that its key routes to, so the store does not check its request's key.
	ownLocks bool
	// txnOnly: the operation runs only as an item of a transaction (kv.OpTxn), whose atomic group holds the
	// segment from its lock checks to its writes.
	txnOnly bool
	// ownGroup: the operation writes in an atomic group of its own, so it is never an item of a transaction.
	ownGroup bool
	// grows: the operation may add data, so its owner refuses it once the partition holds its share of
	// MaxMemory (memory.go). Deletes, expiries and the later steps of a transaction never are.
	grows bool
}

// applyFunc runs a key operation on segment seg of the local store. The caller has checked ownership and,
// for a write, that the partition is not sealed. Every mutation goes through store.commit. The request is
// passed by value because a pointer passed through a function value escapes, costing an allocation.
type applyFunc func(s *store, seg int, req kv.Request, lim opLimits) kv.Reply

// opLimits are the limits of Config that key operations enforce.
type opLimits struct {
	memory *memoryBudget // refuses growing operations past MaxMemory; nil: no bound
	// deposed, checked under the segment's lock before a write and after a read, reports that this node no
	// longer owns the partition by the latest it knows, though the request was routed to it before; nil: never.
	deposed       func(p int) bool
	maxValueSize  int
	maxReplyBytes int    // what a collection read may answer
	layout        Layout // where keys live, for an operation on several keys
}

// deposedFrom reports whether this node no longer owns segment seg's partition (see deposed).
func (l opLimits) deposedFrom(seg int) bool {
	return l.deposed != nil && l.deposed(l.layout.SegmentPartition(seg))
}

// keyOps is every key operation, indexed by its wire number (wire.go). Every request looks its
// operation up here, so it is an array rather than a map.
var keyOps = [...]keyOperation{
	kv.OpGet:        {name: "get", readOnly: true, reveals: revealsAlways, batch: BatchGet, resp: []string{"get", "mget", "getrange", "strlen", "getbit", "bitcount"}, apply: applyGet},
	kv.OpPut:        {name: "put", grows: true, reveals: revealsNotFound, batch: BatchPut, resp: []string{"set", "mset", "setex", "psetex"}, apply: applyPut},
	kv.OpDelete:     {name: "delete", reveals: revealsNotFound, batch: BatchDelete, resp: []string{"del", "unlink"}, apply: applyDelete},
	kv.OpIncr:       {name: "incr", grows: true, reveals: revealsNotFound, resp: []string{"incr", "decr", "incrby", "decrby"}, apply: applyIncr},
	kv.OpExpire:     {name: "expire", reveals: revealsNotFound, resp: []string{"expire", "pexpire", "expireat", "pexpireat"}, apply: applyExpire},
	kv.OpPersist:    {name: "persist", reveals: revealsNotFound, resp: []string{"persist"}, apply: applyPersist},
	kv.OpTTL:        {name: "ttl", readOnly: true, reveals: revealsAlways, resp: []string{"ttl", "pttl"}, apply: applyTTL},
	kv.OpExpiryTime: {name: "expirytime", readOnly: true, reveals: revealsAlways, resp: []string{"expiretime", "pexpiretime"}, apply: applyExpiryTime},
	kv.OpExists:     {name: "exists", readOnly: true, reveals: revealsAlways, resp: []string{"exists", "touch"}, apply: applyExists},
	kv.OpPutIf:      {name: "putif", grows: true, reveals: revealsUnmetCondition, resp: []string{"set", "setnx", "getset"}, apply: applyPutIf},
	// getentry is get under a number of its own, so that an owner whose get replies carry no TTL refuses
	// it rather than answer without one.
	kv.OpGetEntry:        {name: "getentry", readOnly: true, reveals: revealsAlways, apply: applyGet},
	kv.OpNearGet:         {name: "nearget", readOnly: true, reveals: revealsAlways, apply: applyNearGet},
	kv.OpPutIfVersion:    {name: "putifversion", grows: true, reveals: revealsUnmetVersion, apply: applyPutIfVersion},
	kv.OpDeleteIfVersion: {name: "deleteifversion", reveals: revealsUnmetVersion, apply: applyDeleteIfVersion},

	kv.OpIncrByFloat: {name: "incrbyfloat", grows: true, reveals: revealsNotFound, resp: []string{"incrbyfloat"}, apply: applyIncrByFloat},
	kv.OpAppend:      {name: "append", grows: true, reveals: revealsNotFound, resp: []string{"append"}, apply: applyAppend},
	kv.OpGetDel:      {name: "getdel", reveals: revealsNotFound, resp: []string{"getdel"}, apply: applyGetDel},
	// getex reads without writing when it keeps the expiry: that success reveals the value.
	kv.OpGetEx:  {name: "getex", reveals: revealsUnmetCondition, resp: []string{"getex"}, apply: applyGetEx},
	kv.OpType:   {name: "type", readOnly: true, reveals: revealsAlways, resp: []string{"type"}, apply: applyType},
	kv.OpObject: {name: "object", readOnly: true, reveals: revealsAlways, resp: []string{"object", "memory"}, apply: applyObject},
	// setrange with an empty part writes nothing: its callers read the length with get instead.
	kv.OpSetRange: {name: "setrange", grows: true, reveals: revealsNotFound, resp: []string{"setrange"}, apply: applySetRange},

	kv.OpCheckVersion: {name: "checkversion", readOnly: true, reveals: revealsAlways, apply: applyCheckVersion},
	kv.OpTxn:          {name: "txn", reveals: revealsUnmetVersion, ownLocks: true, ownGroup: true}, // apply set by init: it runs the others
	kv.OpIntent:       {name: "intent", grows: true, reveals: revealsUnwritten, txnOnly: true, apply: applyIntent},
	kv.OpResolve:      {name: "resolve", reveals: revealsUnwritten, txnOnly: true, apply: applyResolve},
	kv.OpDecide:       {name: "decide", reveals: revealsUnwritten, ownLocks: true, apply: applyDecide},
	kv.OpForget:       {name: "forget", reveals: revealsNotFound, ownLocks: true, apply: applyForget},

	kv.OpHSet:    {name: "hset", grows: true, reveals: revealsUnwritten, resp: []string{"hset", "hmset"}, apply: collectionOp(applyHSet)},
	kv.OpHGet:    {name: "hget", readOnly: true, reveals: revealsAlways, resp: []string{"hget", "hstrlen"}, apply: applyHGet},
	kv.OpHMGet:   {name: "hmget", readOnly: true, reveals: revealsAlways, resp: []string{"hmget"}, apply: applyHMGet},
	kv.OpHDel:    {name: "hdel", reveals: revealsUnwritten, resp: []string{"hdel"}, apply: collectionOp(applyHDel)},
	kv.OpHGetAll: {name: "hgetall", readOnly: true, reveals: revealsAlways, resp: []string{"hgetall", "hkeys", "hvals", "hrandfield", "hscan"}, apply: applyHGetAll},
	kv.OpHLen:    {name: "hlen", readOnly: true, reveals: revealsAlways, resp: []string{"hlen"}, apply: applyHLen},
	kv.OpHIncrBy: {name: "hincrby", grows: true, reveals: revealsUnwritten, resp: []string{"hincrby"}, apply: collectionOp(applyHIncrBy)},
	kv.OpHExists: {name: "hexists", readOnly: true, reveals: revealsAlways, resp: []string{"hexists"}, apply: applyHExists},

	kv.OpSAdd:      {name: "sadd", grows: true, reveals: revealsUnwritten, resp: []string{"sadd"}, apply: collectionOp(applySAdd)},
	kv.OpSRem:      {name: "srem", reveals: revealsUnwritten, resp: []string{"srem"}, apply: collectionOp(applySRem)},
	kv.OpSMembers:  {name: "smembers", readOnly: true, reveals: revealsAlways, resp: []string{"smembers", "sscan"}, apply: applySMembers},
	kv.OpSIsMember: {name: "sismember", readOnly: true, reveals: revealsAlways, resp: []string{"sismember"}, apply: applySIsMember},
	kv.OpSCard:     {name: "scard", readOnly: true, reveals: revealsAlways, resp: []string{"scard"}, apply: applySCard},

	kv.OpLPush:  {name: "lpush", grows: true, reveals: revealsUnwritten, resp: []string{"lpush", "lpushx"}, apply: collectionOp(applyPush(true, "lpush"))},
	kv.OpRPush:  {name: "rpush", grows: true, reveals: revealsUnwritten, resp: []string{"rpush", "rpushx"}, apply: collectionOp(applyPush(false, "rpush"))},
	kv.OpLPop:   {name: "lpop", reveals: revealsUnwritten, resp: []string{"lpop"}, apply: collectionOp(applyPop(true, "lpop"))},
	kv.OpRPop:   {name: "rpop", reveals: revealsUnwritten, resp: []string{"rpop"}, apply: collectionOp(applyPop(false, "rpop"))},
	kv.OpLRange: {name: "lrange", readOnly: true, reveals: revealsAlways, resp: []string{"lrange"}, apply: applyLRange},
	kv.OpLLen:   {name: "llen", readOnly: true, reveals: revealsAlways, resp: []string{"llen"}, apply: applyLLen},
	kv.OpLIndex: {name: "lindex", readOnly: true, reveals: revealsAlways, resp: []string{"lindex"}, apply: applyLIndex},
	kv.OpLTrim:  {name: "ltrim", reveals: revealsUnwritten, resp: []string{"ltrim"}, apply: collectionOp(applyLTrim)},

	kv.OpZAdd:    {name: "zadd", grows: true, reveals: revealsUnwritten, resp: []string{"zadd"}, apply: collectionOp(applyZAdd)},
	kv.OpZRem:    {name: "zrem", reveals: revealsUnwritten, resp: []string{"zrem"}, apply: collectionOp(applyZRem)},
	kv.OpZScore:  {name: "zscore", readOnly: true, reveals: revealsAlways, resp: []string{"zscore"}, apply: applyZScore},
	kv.OpZRange:  {name: "zrange", readOnly: true, reveals: revealsAlways, resp: []string{"zrange", "zrevrange", "zrangebyscore", "zrevrangebyscore", "zrangebylex", "zrevrangebylex", "zrandmember", "zscan"}, apply: applyZRange},
	kv.OpZRank:   {name: "zrank", readOnly: true, reveals: revealsAlways, resp: []string{"zrank"}, apply: applyZRank},
	kv.OpZCard:   {name: "zcard", readOnly: true, reveals: revealsAlways, resp: []string{"zcard"}, apply: applyZCard},
	kv.OpZIncrBy: {name: "zincrby", grows: true, reveals: revealsUnwritten, resp: []string{"zincrby"}, apply: collectionOp(applyZIncrBy)},

	kv.OpSPop:    {name: "spop", reveals: revealsUnwritten, apply: applySPop},
	kv.OpZPopMin: {name: "zpopmin", reveals: revealsUnwritten, apply: applyZPop(false, "zpopmin")},
	kv.OpZPopMax: {name: "zpopmax", reveals: revealsUnwritten, apply: applyZPop(true, "zpopmax")},
	kv.OpHSetNX:  {name: "hsetnx", grows: true, reveals: revealsUnwritten, apply: collectionOp(applyHSetNX)},
	kv.OpLMove:   {name: "lmove", reveals: revealsUnwritten, ownGroup: true, apply: applyLMove},
}

// refusesGrowth reports whether the memory bound refuses operation k of req on segment seg.
func (lim *opLimits) refusesGrowth(k *keyOperation, seg int, req *kv.Request) bool {
	return k.grows && !lim.memory.admits(seg, requestFootprint(req))
}

// lookupKeyOp returns the key operation numbered op, or nil if op is not one.
func lookupKeyOp(op transport.Op) *keyOperation {
	if int(op) < len(keyOps) && keyOps[op].apply != nil {
		return &keyOps[op]
	}
	return nil
}

// readOnly reports whether op is a key operation that never writes.
func readOnly(op transport.Op) bool {
	k := lookupKeyOp(op)
	return k != nil && k.readOnly
}

// opName names op in errors and logs.
func opName(op transport.Op) string {
	if k := lookupKeyOp(op); k != nil {
		return k.name
	}
	return "operation " + strconv.Itoa(int(op))
}

// batchOps maps a BatchOp to the key operation the owner applies, 0 for none, as the key operations
// declare it.
var batchOps = batchOpsOf(keyOps[:])

func batchOpsOf(ops []keyOperation) (byBatch [1 << 8]transport.Op) {
	for op, k := range ops {
		if k.batch != 0 {
			byBatch[k.batch] = transport.Op(op)
		}
	}
	return byBatch
}

// revelation says which replies of a key operation tell something about the stored state without having
// written. Under the Sync concern those wait until the in-sync replicas hold that state (visibility.go).
type revelation uint8

const (
	revealsAlways         revelation = iota + 1 // every reply: the operation reads
	revealsNotFound                             // a not-found reply: the write found nothing to change
	revealsUnmetCondition                       // a not-found reply, or a success that wrote nothing
	revealsUnmetVersion                         // a not-found reply, or a version mismatch and its version
	revealsUnwritten                            // a reply without a new version: the write changed nothing
)

func (r revelation) reveals(reply *kv.Reply) bool {
	switch {
	case r == revealsAlways, reply.Status == StatusNotFound:
		return true
	case r == revealsUnmetCondition:
		return reply.Status == StatusSuccess && reply.Int == 0
	case r == revealsUnmetVersion:
		return reply.Status == StatusVersionMismatch
	case r == revealsUnwritten:
		return reply.Version == 0
	}
	return false
}

// applyGet sets Int to the nanoseconds the value has left, 0 when it never expires.
func applyGet(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	e, ttl, ok := s.getEntry(seg, req.Key)
	if !ok {
		return kv.Reply{Status: StatusNotFound}
	}
	if e.coll() != nil {
		return kv.Reply{Status: StatusWrongType}
	}
	return kv.Reply{Status: StatusSuccess, Value: e.value(), Version: e.version(), Int: int64(ttl)}
}

// applyNearGet is applyGet for a near cache: the reply carries the segment's revision read before the
// value, and when the key still has req.Version (non-zero), it leaves the value out and sets Existed.
func applyNearGet(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	revision := s.revision(seg)
	reply := applyGet(s, seg, req, lim)
	reply.Revision = revision
	if req.Version != 0 && reply.Status == StatusSuccess && reply.Version == req.Version {
		reply.Value, reply.Existed = nil, true
	}
	return reply
}

func applyPut(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	if len(req.Value) > lim.maxValueSize {
		return kv.Reply{Status: StatusInvalidRequest}
	}
	return kv.Reply{Status: StatusSuccess, Version: s.put(seg, req.Key, req.Value, expiryOf(&req))}
}

func applyDelete(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	return foundReply(s.remove(seg, req.Key))
}

// applyIncr answers a refused increment with StatusInvalidRequest, and Int set to kv.RefusedIncrOverflow when the
// sum would overflow.
func applyIncr(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	v, err := s.incr(seg, req.Key, req.Delta)
	switch {
	case errors.Is(err, errIncrOverflow):
		return kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedIncrOverflow}
	case errors.Is(err, errWrongType):
		return kv.Reply{Status: StatusWrongType}
	case err != nil:
		return kv.Reply{Status: StatusInvalidRequest}
	}
	return kv.Reply{Status: StatusSuccess, Int: v}
}

func applyExpire(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	set, _ := s.expireIf(seg, req.Key, expiryOf(&req), req.Cond)
	return foundReply(set)
}

// applyPersist sets Int to 1 when it dropped an expiry.
func applyPersist(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	existed, dropped := s.persist(seg, req.Key)
	reply := foundReply(existed)
	if dropped {
		reply.Int = 1
	}
	return reply
}

// applyTTL sets Int to the nanoseconds left, or to NoExpiry.
func applyTTL(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	ttl, ok := s.ttl(seg, req.Key)
	reply := foundReply(ok)
	reply.Int = int64(ttl)
	return reply
}

// applyExpiryTime sets Int to the key's expiry in Unix nanoseconds, or to NoExpiry.
func applyExpiryTime(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	e, _, ok := s.getEntry(seg, req.Key)
	reply := foundReply(ok)
	switch {
	case ok && e.expiry() != 0:
		reply.Int = e.expiry()
	case ok:
		reply.Int = int64(NoExpiry)
	}
	return reply
}

func applyExists(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	_, _, ok := s.get(seg, req.Key)
	return foundReply(ok)
}

// applyPutIf sets Int to 1 when it wrote, Existed when the key had a live value, and Value to that value
// when asked to return it. Asking for both IfAbsent and IfExists is invalid.
func applyPutIf(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	if len(req.Value) > lim.maxValueSize || req.Cond&(kv.CondIfAbsent|kv.CondIfExists) == kv.CondIfAbsent|kv.CondIfExists {
		return kv.Reply{Status: StatusInvalidRequest}
	}
	prev, written := s.putIf(seg, req.Key, req.Value, expiryOf(&req), req.Cond)
	if !written && prev != nil && prev.coll() != nil && req.Cond&kv.CondReturnPrev != 0 {
		return kv.Reply{Status: StatusWrongType}
	}
	reply := kv.Reply{Status: StatusSuccess, Existed: prev != nil}
	if written {
		reply.Int = 1
	}
	if prev != nil && req.Cond&kv.CondReturnPrev != 0 {
		reply.Value = prev.value()
	}
	return reply
}

// applyPutIfVersion writes when the key's version is req.Version, 0 standing for no live value. It sets
// Version to the new version or, refused with StatusVersionMismatch, to the key's current one. Of the
// conditions only KeepTTL applies: IfAbsent and IfExists are invalid beside a version.
func applyPutIfVersion(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	if len(req.Value) > lim.maxValueSize || req.Cond&^kv.CondKeepTTL != 0 {
		return kv.Reply{Status: StatusInvalidRequest}
	}
	version, written := s.putIfVersion(seg, req.Key, req.Value, time.Duration(req.TTL), req.Cond&kv.CondKeepTTL != 0, req.Version)
	if !written {
		return kv.Reply{Status: StatusVersionMismatch, Version: version}
	}
	return kv.Reply{Status: StatusSuccess, Version: version}
}

// applyDeleteIfVersion deletes the key when its version is req.Version. With req.Version 0 it answers
// StatusNotFound when the key has no live value, as there is nothing to delete. Refused, it answers
// StatusVersionMismatch with Version set to the key's current version.
func applyDeleteIfVersion(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	current, removed := s.removeIfVersion(seg, req.Key, req.Version)
	switch {
	case removed:
		return kv.Reply{Status: StatusSuccess}
	case current == req.Version:
		return kv.Reply{Status: StatusNotFound}
	}
	return kv.Reply{Status: StatusVersionMismatch, Version: current}
}

// applyIncrByFloat sets Value to the sum stored. Refused, it sets Int to kv.RefusedNotFloat, kv.RefusedNotFinite
// or kv.RefusedTooLarge.
func applyIncrByFloat(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	v, err := s.incrByFloat(seg, req.Key, req.Value, lim.maxValueSize)
	switch {
	case errors.Is(err, errWrongType):
		return kv.Reply{Status: StatusWrongType}
	case errors.Is(err, errNotFloat):
		return kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedNotFloat}
	case errors.Is(err, errNotFinite):
		return kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedNotFinite}
	case err != nil:
		return kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedTooLarge}
	}
	return kv.Reply{Status: StatusSuccess, Value: v}
}

// applyAppend sets Int to the value's new length. Refused, it sets Int to kv.RefusedTooLarge.
func applyAppend(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	n, err := s.appendValue(seg, req.Key, req.Value, lim.maxValueSize)
	if errors.Is(err, errWrongType) {
		return kv.Reply{Status: StatusWrongType}
	}
	if err != nil {
		return kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedTooLarge}
	}
	return kv.Reply{Status: StatusSuccess, Int: int64(n)}
}

func applyGetDel(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	value, found, err := s.getDel(seg, req.Key)
	if err != nil {
		return kv.Reply{Status: StatusWrongType}
	}
	reply := foundReply(found)
	reply.Value = value
	return reply
}

// applyGetEx sets Int to 1 when it changed the key. Of the conditions only KeepTTL applies.
func applyGetEx(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if req.Cond&^kv.CondKeepTTL != 0 {
		return kv.Reply{Status: StatusInvalidRequest}
	}
	value, found, written, err := s.getEx(seg, req.Key, expiryOf(&req), req.Cond&kv.CondKeepTTL != 0)
	if err != nil {
		return kv.Reply{Status: StatusWrongType}
	}
	reply := foundReply(found)
	reply.Value = value
	if written {
		reply.Int = 1
	}
	return reply
}

// applySetRange sets Int to the value's new length. Refused for a length beyond the limit, it sets Int to
// kv.RefusedTooLarge. A negative offset or an empty part is invalid.
func applySetRange(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	if req.Delta < 0 || len(req.Value) == 0 {
		return kv.Reply{Status: StatusInvalidRequest}
	}
	n, err := s.setRange(seg, req.Key, req.Delta, req.Value, lim.maxValueSize)
	if errors.Is(err, errWrongType) {
		return kv.Reply{Status: StatusWrongType}
	}
	if err != nil {
		return kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedTooLarge}
	}
	return kv.Reply{Status: StatusSuccess, Int: int64(n)}
}

// applyType sets Value to the name of the kind of the key's value, "none" when it has none.
func applyType(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	e, _, _ := s.getEntry(seg, req.Key)
	return kv.Reply{Status: StatusSuccess, Value: []byte(typeName(e))}
}

func foundReply(found bool) kv.Reply {
	if found {
		return kv.Reply{Status: StatusSuccess}
	}
	return kv.Reply{Status: StatusNotFound}
}

// refuseKeyOp refuses a request for operation k on key that no client may make: on a reserved key, or of
// an operation that runs only inside a transaction. It returns nil when the request may run: the path every
// request takes returns no reply to copy.
func refuseKeyOp(k *keyOperation, key string) *kv.Reply {
	var reason string
	switch {
	case isInternalKey(key):
		reason = "ERR keys starting with " + strconv.Quote(internalPrefix) + " are reserved"
	case k.txnOnly:
		reason = "ERR " + k.name + " runs only in a transaction"
	default:
		return nil
	}
	refusal := invalidArgs(reason)
	return &refusal
}
