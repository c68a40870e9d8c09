package zaris

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// Tx is a transaction in progress, handed to the function Txn runs. Reads go to the keys' owners and
// record the version they saw; writes are buffered until the function returns. Keys sharing a hash tag
// ("{user1}:balance", "{user1}:history") are in one segment, and a transaction within one segment commits
// in a single round trip; others commit in two phases. A Tx is not safe for concurrent use.
type Tx struct {
	c       *txnClient
	segment int // the segment of the transaction's first key; -1 before the first
	anchor  string
	spans   bool // the keys are in more than one segment
	reads   map[string]txRead
	writes  map[string]txWrite
	order   []string // the written keys, in the order of their first write
	size    int      // the encoded size of the buffered writes
}

// txnClient is what a transaction uses of its node: the requests it sends, the near cache its writes
// invalidate, and the settings it runs under.
type txnClient struct {
	getEntry   func(ctx context.Context, key string) (Entry, error)
	execute    func(ctx context.Context, op transport.Op, req *kv.Request) (kv.Reply, error)
	send       func(ctx context.Context, id, key string, items []txnItem, waitLocks bool) (kv.Reply, error)
	resolve    func(ctx context.Context, id string, keys []string, commit bool) error
	forgetNear func(key string) // nil without a near cache
	step       func(step txnStep) error
	background func(fn func()) bool // runs fn in a goroutine the node's Close waits for, unless closing
	life       context.Context      // ends when the node closes
	layout     Layout
	clock      Clock
	backoff    time.Duration // Config.RetryBackoff
	maxValue   int           // Config.MaxValueSize
	maxFrame   int           // Config.MaxFrameSize
	timeout    time.Duration // Config.TxnTimeout
	retention  time.Duration // Config.TxnRecordRetention
}

// newTxnClient wires a node's side of its transactions.
func newTxnClient(n *Node) *txnClient {
	c := &txnClient{getEntry: n.GetEntry, execute: n.client.execute, send: n.client.sendTxn, resolve: n.client.resolveIntents,
		step: n.cfg.hooks.txnStep, background: n.goBackground, life: n.life.ctx, layout: n.layout, clock: n.cfg.Clock,
		backoff: n.cfg.RetryBackoff, maxValue: n.cfg.MaxValueSize, maxFrame: n.cfg.MaxFrameSize,
		timeout: n.cfg.TxnTimeout, retention: n.cfg.TxnRecordRetention}
	if n.client.near != nil {
		c.forgetNear = n.client.near.forget
	}
	return c
}

// txRead is what a transaction read of a key: the value and its version, 0 when the key had no live value.
type txRead struct {
	value   []byte
	version uint64
}

// txWrite is a buffered write: a put of value for ttl, or a delete.
type txWrite struct {
	value []byte
	ttl   time.Duration
	del   bool
}

// TxnOption configures Txn.
type TxnOption func(*txnOptions)

type txnOptions struct {
	retries int
}

// TxnRetries makes Txn run the function again, up to n more times, when it or its commit fails with
// ErrConflict or ErrLocked, pausing a little longer each time (from Config.RetryBackoff, doubling, with
// jitter).
func TxnRetries(n int) TxnOption { return func(o *txnOptions) { o.retries = n } }

// Txn runs fn, then commits the writes fn buffered in its Tx, all or none, provided that no key fn read
// has changed since it was read; otherwise it writes nothing and fails with an error matching ErrConflict
// (a *ConflictError names the key that changed). The transaction is serializable: it takes effect at one
// instant, at which everything it read still held. Within one segment the commit is one atomic write,
// replicated as one op. Over several segments it is a two-phase commit whose outcome is recorded in the
// segment of the first key; until every key is resolved, readers and writers of the transaction's keys
// wait (their calls retry), and they never see part of it. Every observer, and every copy after a failover,
// sees all of the transaction's writes or none: each read of a key, and each GetMany of keys of one segment,
// which reads them at one revision. Reads of several segments are made at several instants, so a GetMany
// over segments, like two Gets, may see a transaction over those segments in part. An error fn returns aborts the transaction and is returned
// as it is. A commit that fails with ErrUnconfirmed may or may not have taken effect, as for any write.
func (n *Node) Txn(ctx context.Context, fn func(tx *Tx) error, opts ...TxnOption) error {
	var o txnOptions
	for _, opt := range opts {
		opt(&o)
	}
	backoff := n.cfg.RetryBackoff
	c := newTxnClient(n)
	for attempt := 0; ; attempt++ {
		tx := &Tx{c: c, segment: -1, reads: make(map[string]txRead), writes: make(map[string]txWrite)}
		err := fn(tx)
		if err == nil {
			err = tx.commit(ctx)
			tx.forgetWrites()
		}
		if !errors.Is(err, ErrConflict) && !errors.Is(err, ErrLocked) || attempt >= o.retries {
			return err
		}
		if err := sleepCtx(ctx, n.cfg.Clock, backoff/2+rand.N(backoff)); err != nil {
			return err
		}
		backoff *= 2
	}
}

// join adds key to the transaction's keys: the first one is its anchor, whose segment keeps the record of
// a transaction over several segments.
func (tx *Tx) join(key string) {
	seg := tx.c.layout.KeySegment(key)
	switch {
	case tx.segment < 0:
		tx.segment, tx.anchor = seg, key
	case seg != tx.segment:
		tx.spans = true
	}
}

// Get returns key's value as the transaction sees it: what the transaction wrote, or else the value read
// from the owner the first time, with its version recorded. It fails with ErrNotFound when there is none.
func (tx *Tx) Get(ctx context.Context, key string) ([]byte, error) {
	if w, ok := tx.writes[key]; ok {
		if w.del {
			return nil, ErrNotFound
		}
		return w.value, nil
	}
	r, ok := tx.reads[key]
	if !ok {
		tx.join(key)
		e, err := tx.c.getEntry(ctx, key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		r = txRead{value: e.Value, version: e.Version}
		tx.reads[key] = r
	}
	if r.version == 0 {
		return nil, ErrNotFound
	}
	return r.value, nil
}

// Put buffers a write of value under key. Of the put options, only WithTTL applies; the others fail with
// ErrInvalidRequest.
func (tx *Tx) Put(key string, value []byte, opts ...PutOption) error {
	o := putOptionsOf(opts)
	if o.cond != 0 || o.ifVersion || o.concern != 0 {
		return fmt.Errorf("%w: a transaction's put takes no condition nor write concern", ErrInvalidRequest)
	}
	if len(value) > tx.c.maxValue {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(value), tx.c.maxValue)
	}
	return tx.buffer(key, txWrite{value: value, ttl: o.ttl})
}

// Delete buffers a delete of key.
func (tx *Tx) Delete(key string) error { return tx.buffer(key, txWrite{del: true}) }

// buffer records w as the transaction's write of key, replacing an earlier one, within the size a request
// may take.
func (tx *Tx) buffer(key string, w txWrite) error {
	tx.join(key)
	if _, again := tx.writes[key]; !again {
		tx.order = append(tx.order, key)
	}
	tx.size += max(kvRequestOverhead, kv.GroupOpOverhead) + len(key) + len(w.value) // also bounds the owner's atomic group
	if tx.size > tx.c.maxFrame/2 {
		return fmt.Errorf("%w: the transaction's writes exceed %d bytes", ErrValueTooLarge, tx.c.maxFrame/2)
	}
	tx.writes[key] = w
	return nil
}

// forgetWrites drops the keys the transaction wrote from the node's near cache, whatever its outcome.
func (tx *Tx) forgetWrites() {
	if tx.c.forgetNear != nil {
		for _, key := range tx.order {
			tx.c.forgetNear(key)
		}
	}
}

// commit commits the transaction: over several segments in two phases (commitAcross), and otherwise in
// one request to the owner of its segment, which checks the version of every key read and applies the
// writes in one atomic write.
func (tx *Tx) commit(ctx context.Context) error {
	switch {
	case tx.segment < 0:
		return nil
	case tx.spans:
		return tx.commitAcross(ctx)
	}
	items := make([]txnItem, 0, len(tx.reads)+len(tx.order))
	for key, r := range tx.reads {
		items = append(items, txnItem{op: kv.OpCheckVersion, req: kv.Request{Key: key, Version: r.version}})
	}
	for _, key := range tx.order {
		w := tx.writes[key]
		it := txnItem{op: kv.OpPut, req: kv.Request{Key: key, Value: w.value, TTL: int64(w.ttl)}}
		if w.del {
			it = txnItem{op: kv.OpDelete, req: kv.Request{Key: key}}
		}
		items = append(items, it)
	}
	reply, err := tx.c.send(ctx, "", tx.anchor, items, true)
	if err != nil {
		return fmt.Errorf("zaris: transaction on %q: %w", tx.anchor, err)
	}
	return tx.conflict(items, reply)
}

// conflict returns the *ConflictError of a transaction request refused by the version check of one of its
// items, and nil for a request that succeeded.
func (tx *Tx) conflict(items []txnItem, reply kv.Reply) error {
	if reply.Status != StatusVersionMismatch {
		return nil
	}
	key := items[reply.Int].req.Key
	return &ConflictError{Key: key, Read: tx.reads[key].version, Current: reply.Version}
}

// checkTxnReplies returns the first failure among a committed transaction's write replies. Puts and deletes
// checked by Put have none to give: one would be a bug, reported rather than hidden.
func checkTxnReplies(values [][]byte) error {
	for i, b := range values {
		var r kv.Reply
		if err := decodeReply(&r, b); err != nil {
			return fmt.Errorf("%w: transaction reply %d: %w", ErrDecode, i, err)
		}
		if r.Status != StatusSuccess && r.Status != StatusNotFound {
			return fmt.Errorf("zaris: transaction write %d: %w", i, statusErr(r.Status))
		}
	}
	return nil
}
