package zaris

import (
	"fmt"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// applyTxn looks up the operations it runs in keyOps, so it joins the table after initialization.
func init() { keyOps[kv.OpTxn].apply = applyTxn }

// txnItem is one operation of a transaction, as the owner of the transaction's segment receives it: a key
// operation and its request. A transaction request carries its items in kv.Request.Args, one encoded item
// each (appendTxnItem).
type txnItem struct {
	op  transport.Op
	req kv.Request
}

// appendTxnItem appends it to dst: its operation's wire number in two bytes, then its encoded request.
func appendTxnItem(dst []byte, it *txnItem) []byte {
	dst = append(dst, byte(it.op>>8), byte(it.op))
	return appendRequest(&it.req, dst)
}

// encodeTxnItems encodes items as a transaction request's arguments.
func encodeTxnItems(items []txnItem) [][]byte {
	args := make([][]byte, len(items))
	for i := range items {
		args[i] = appendTxnItem(nil, &items[i])
	}
	return args
}

// decodeTxnItems decodes a transaction's items. The requests alias args.
func decodeTxnItems(args [][]byte) ([]txnItem, error) {
	items := make([]txnItem, len(args))
	for i, b := range args {
		if len(b) < 2 {
			return nil, fmt.Errorf("transaction item %d: %d bytes", i, len(b))
		}
		items[i].op = transport.Op(b[0])<<8 | transport.Op(b[1])
		if err := decodeRequest(&items[i].req, b[2:]); err != nil {
			return nil, fmt.Errorf("transaction item %d: %w", i, err)
		}
	}
	return items, nil
}

// applyCheckVersion succeeds when req.Key's live version is req.Version, 0 standing for no live value, and
// otherwise answers a mismatch with the current version.
func applyCheckVersion(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	_, version, _ := s.get(seg, req.Key)
	if version != req.Version {
		return kv.Reply{Status: StatusVersionMismatch, Version: version}
	}
	return kv.Reply{Status: StatusSuccess, Version: version}
}

// applyTxn runs a transaction's items on segment seg, whose keys they must all be in, as one atomic write
// for transaction req.Value (empty for a transaction of one segment, which holds no keys)
// (store.atomically): first every version check, then, if all hold, every other item in order. A failed
// check writes nothing and answers a mismatch with the check's index in Int and the key's current version.
// Otherwise the reply is a success whose Values are the other items' encoded replies, in order; a read
// whose reply would overrun the transaction's reply budget answers StatusTooLarge instead, and so does a
// write past the group's bound (store.admits), except in a step of a two-phase commit. Replies without a
// value are a few bytes each, as many as the request has items.
func applyTxn(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	items, err := decodeTxnItems(req.Args)
	if err != nil {
		return invalidArgs("ERR " + err.Error())
	}
	for i := range items {
		k, key := lookupKeyOp(items[i].op), items[i].req.Key
		switch {
		case k == nil || k.ownGroup:
			return invalidArgs(fmt.Sprintf("ERR transaction item %d: operation %d cannot run in a transaction", i, items[i].op))
		case isInternalKey(key):
			return invalidArgs(fmt.Sprintf("ERR transaction item %d: key %q is reserved", i, key))
		case lim.layout.KeySegment(key) != seg:
			return invalidArgs(fmt.Sprintf("ERR transaction item %d: key %q is in another segment than %q", i, key, req.Key))
		case lim.refusesGrowth(k, seg, &items[i].req):
			return kv.Reply{Status: StatusOutOfMemory, Int: int64(i)} // nothing is written
		}
	}
	var reply kv.Reply
	s.atomically(seg, func(g *store) {
		if len(req.Value) > 0 {
			g.liftBound() // a step of a two-phase commit
		}
		reply = runTxn(g, seg, string(req.Value), items, lim)
	})
	return reply
}

// runTxn is applyTxn's work under the segment's lock, for transaction txn ("" for one that holds no keys
// of its own). A key held by another transaction answers StatusLocked with the item's index in Int.
func runTxn(g *store, seg int, txn string, items []txnItem, lim opLimits) kv.Reply {
	for i := range items {
		if holder := g.lockedBy(seg, items[i].req.Key); holder != "" && holder != txn {
			return kv.Reply{Status: StatusLocked, Int: int64(i)}
		}
	}
	for i := range items {
		if items[i].op != kv.OpCheckVersion {
			continue
		}
		if r := applyCheckVersion(g, seg, items[i].req, lim); r.Status != StatusSuccess {
			r.Int = int64(i)
			return r
		}
	}
	reply := kv.Reply{Status: StatusSuccess, Values: make([][]byte, 0, len(items))}
	budget := lim.maxReplyBytes
	for i := range items {
		if items[i].op == kv.OpCheckVersion {
			continue
		}
		sub := lim
		sub.maxReplyBytes = budget
		r := lookupKeyOp(items[i].op).apply(g, seg, items[i].req, sub)
		if g.takeRefusal() {
			r = kv.Reply{Status: StatusTooLarge}
		}
		encoded := appendReply(&r, nil)
		if len(encoded) > budget && (r.Value != nil || r.Values != nil) {
			encoded = appendReply(&kv.Reply{Status: StatusTooLarge}, nil)
		}
		budget -= len(encoded)
		reply.Values = append(reply.Values, encoded)
	}
	return reply
}
