package zaris

import (
	"fmt"
	"strings"
	"time"

	"github.com/tinylib/msgp/msgp"

	"github.com/zaris-go/zaris/internal/kv"
)

// A transaction over several segments holds each of its keys with an intent from its prepare to its
// resolution, and decides in a record. Both are entries of the store under internal keys: an intent in its
// key's segment, a record in the segment of the transaction's anchor key. So they replicate, persist, move
// with their partition and survive failover as any value does, and the atomic groups that place and
// resolve them (store.atomically) change a key and its intent together.
const (
	internalPrefix = "\x00zaris:"
	intentPrefix   = internalPrefix + "intent:"
	recordPrefix   = internalPrefix + "txn:"
)

func isInternalKey(key string) bool { return strings.HasPrefix(key, internalPrefix) }
func isIntentKey(key string) bool   { return strings.HasPrefix(key, intentPrefix) }

// intentKey is where the intent on key is stored.
func intentKey(key string) string { return intentPrefix + key }

// recordKey is where transaction txn's record is stored.
func recordKey(txn string) string { return recordPrefix + txn }

// What an intent does to its key when its transaction commits.
const (
	intentHold   = 0 // nothing: the key was only read, and is held so that it cannot change
	intentPut    = 1 // store value, for ttl
	intentDelete = 2 // delete the key
)

// intent is a transaction's hold on a key.
type intent struct {
	txn      string // the transaction's id
	anchor   string // a key of the segment that holds the transaction's record
	deadline int64  // Unix nanoseconds on the owner's clock after which the owner resolves the intent itself
	action   uint8  // intentHold, intentPut or intentDelete
	value    []byte
	ttl      int64
}

const intentFields = 6

func (in *intent) encode() []byte {
	b := msgp.AppendArrayHeader(nil, intentFields)
	b = msgp.AppendString(b, in.txn)
	b = msgp.AppendString(b, in.anchor)
	b = msgp.AppendInt64(b, in.deadline)
	b = msgp.AppendUint8(b, in.action)
	b = msgp.AppendBytes(b, in.value)
	return msgp.AppendInt64(b, in.ttl)
}

// decodeIntent decodes what encode wrote. The value aliases b.
func decodeIntent(b []byte) (intent, error) {
	var in intent
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err == nil && n != intentFields {
		err = fmt.Errorf("%d fields, want %d", n, intentFields)
	}
	if err == nil {
		in.txn, b, err = msgp.ReadStringBytes(b)
	}
	if err == nil {
		in.anchor, b, err = msgp.ReadStringBytes(b)
	}
	if err == nil {
		in.deadline, b, err = msgp.ReadInt64Bytes(b)
	}
	if err == nil {
		in.action, b, err = msgp.ReadUint8Bytes(b)
	}
	if err == nil {
		in.value, b, err = msgp.ReadBytesZC(b)
	}
	if err == nil {
		in.ttl, b, err = msgp.ReadInt64Bytes(b)
	}
	switch {
	case err != nil:
		return intent{}, fmt.Errorf("intent: %w", err)
	case len(b) != 0:
		return intent{}, fmt.Errorf("intent: %d bytes after it", len(b))
	case in.txn == "" || in.action > intentDelete:
		return intent{}, fmt.Errorf("intent: transaction %q, action %d", in.txn, in.action)
	}
	return in, nil
}

// intentOn returns the intent on key in segment seg, if there is one.
func (s *store) intentOn(seg int, key string) (intent, bool) {
	ss := &s.segments[seg]
	if ss.intents.Load() == 0 {
		return intent{}, false
	}
	s.rlock(ss)
	defer s.runlock(ss)
	return ss.intentOf(key, s.now())
}

// intentOf returns the intent on key, if there is one. Called with seg.mu held.
func (seg *segmentStore) intentOf(key string, now int64) (intent, bool) {
	if seg.intents.Load() == 0 {
		return intent{}, false
	}
	e := seg.entries.get(intentKey(key))
	if e == nil || e.expired(now) {
		return intent{}, false
	}
	in, err := decodeIntent(e.value())
	return in, err == nil
}

// writeIntentOn reports whether a transaction that writes key holds it: a read must wait for its
// resolution, since the transaction may have committed already.
func (s *store) writeIntentOn(seg int, key string) bool {
	in, ok := s.intentOn(seg, key)
	return ok && in.action != intentHold
}

// lockedBy returns the id of the transaction that holds key, "" when none does.
func (s *store) lockedBy(seg int, key string) string {
	in, _ := s.intentOn(seg, key)
	return in.txn
}

// A transaction's record says whether it committed.
const (
	recordAborted   = 'a'
	recordCommitted = 'c'
)

// applyIntent places the intent in req.Value on req.Key for the transaction's timeout in req.Delta
// (nanoseconds). The key must not be held by another transaction; placing the same transaction's intent
// again succeeds.
func applyIntent(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	in, err := decodeIntent(req.Value)
	if err != nil || len(in.value) > lim.maxValueSize {
		return invalidArgs(fmt.Sprintf("ERR invalid intent: %v", err))
	}
	switch holder := s.lockedBy(seg, req.Key); {
	case holder == in.txn:
		return kv.Reply{Status: StatusSuccess}
	case holder != "":
		return kv.Reply{Status: StatusLocked}
	}
	in.deadline = addSaturating(s.now(), req.Delta)
	return kv.Reply{Status: StatusSuccess, Version: s.put(seg, intentKey(req.Key), in.encode(), expiryAsk{})}
}

// applyResolve ends the intent of transaction req.Value on req.Key: with req.Delta 1 the transaction
// committed and the intent's write applies, with 0 it aborted. Without that transaction's intent on the
// key it does nothing: the intent was resolved before.
func applyResolve(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	in, ok := s.intentOn(seg, req.Key)
	if !ok || in.txn != string(req.Value) {
		return kv.Reply{Status: StatusSuccess}
	}
	if req.Delta == 1 {
		switch in.action {
		case intentPut:
			s.put(seg, req.Key, in.value, forTTL(time.Duration(in.ttl))) // the store copies the value
		case intentDelete:
			s.remove(seg, req.Key)
		}
	}
	s.remove(seg, intentKey(req.Key))
	return kv.Reply{Status: StatusSuccess, Int: 1}
}

// applyDecide records the outcome of transaction req.Value in req.Key's segment, unless it is recorded
// already: commit with req.Delta 1, abort with 0. Int answers the recorded outcome, 1 for a commit. The
// record lives req.TTL. The first decision stands, so a coordinator committing and an owner aborting a
// transaction it gave up on cannot both succeed.
func applyDecide(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	key := recordKey(string(req.Value))
	if v, _, ok := s.get(seg, key); ok && len(v) == 1 {
		return kv.Reply{Status: StatusSuccess, Int: kv.BoolInt(v[0] == recordCommitted)}
	}
	outcome := byte(recordAborted)
	if req.Delta == 1 {
		outcome = recordCommitted
	}
	version := s.put(seg, key, []byte{outcome}, forTTL(time.Duration(req.TTL)))
	return kv.Reply{Status: StatusSuccess, Int: kv.BoolInt(outcome == recordCommitted), Version: version}
}

// applyForget drops transaction req.Value's record once none of its intents remains.
func applyForget(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	return foundReply(s.remove(seg, recordKey(string(req.Value))))
}
