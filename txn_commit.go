package zaris

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/zaris-go/zaris/internal/kv"
)

// A transaction whose keys span several segments commits in two phases, coordinated by the node that runs
// it. Prepare: each segment's owner checks the versions read there and places an intent on each of the
// segment's keys, in one atomic write per segment; an intent holds the key against every other writer and
// carries the key's new value. Decide: the outcome is recorded in the segment of the transaction's first
// key, and the first outcome recorded stands (applyDecide), which is the commit point. Resolve: each
// segment applies or drops its intents in one atomic write. Every step replicates like any write, so
// failover and migration keep intents and records. An owner resolves intents whose coordinator vanished
// once TxnTimeout has passed, recording an abort unless the commit was recorded first (txn_resolver.go).

// txnStep is a point where a coordinator is about to send a request, for the txnStep test hook: the
// prepare or the resolve of its segment number segment (in the order of Tx.segments), or the decide.
type txnStep struct {
	phase   string // "prepare", "decide" or "resolve"
	segment int
}

// errCoordinatorStopped is what the txnStep test hook's error becomes: the coordinator stops there, sending
// nothing more and cleaning nothing up, as if it died.
var errCoordinatorStopped = errors.New("zaris: transaction coordinator stopped")

// txnSegment is the part of a transaction in one segment: its keys, the first of which routes requests.
type txnSegment struct {
	segment int
	keys    []string
}

// segments groups the transaction's keys by segment, the anchor's segment first, each in a stable order.
func (tx *Tx) segments() []txnSegment {
	bySeg := map[int][]string{}
	add := func(key string) {
		seg := tx.c.layout.KeySegment(key)
		if !slices.Contains(bySeg[seg], key) {
			bySeg[seg] = append(bySeg[seg], key)
		}
	}
	add(tx.anchor)
	for _, key := range slices.Sorted(maps.Keys(tx.reads)) {
		add(key)
	}
	for _, key := range tx.order {
		add(key)
	}
	out := []txnSegment{{segment: tx.segment, keys: bySeg[tx.segment]}}
	for _, seg := range slices.Sorted(maps.Keys(bySeg)) {
		if seg != tx.segment {
			out = append(out, txnSegment{segment: seg, keys: bySeg[seg]})
		}
	}
	return out
}

// newTxnID returns a random transaction id.
func newTxnID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// commitAcross commits a transaction whose keys span several segments, in two phases. It returns nil once
// the commit is recorded (its keys resolve even if this node dies then), a conflict or another error when
// the transaction certainly did not commit, and an error matching ErrUnconfirmed when its outcome could not
// be learned.
func (tx *Tx) commitAcross(ctx context.Context) error {
	id, parts := newTxnID(), tx.segments()
	if err := tx.prepare(ctx, id, parts); err != nil {
		if !errors.Is(err, errCoordinatorStopped) {
			tx.releaseLater(id, parts)
		}
		return err
	}
	if len(tx.order) == 0 { // read-only: everything read held at once; release the keys
		tx.releaseLater(id, parts)
		return nil
	}
	committed, err := tx.decide(ctx, id)
	if err != nil {
		return err
	}
	if !committed {
		tx.releaseLater(id, parts)
		return fmt.Errorf("%w: transaction timed out in its prepare and was aborted", ErrConflict)
	}
	if tx.resolveAll(ctx, id, parts, true) {
		tx.c.forgetLater(tx.anchor, id)
	}
	return nil
}

// step asks the txnStep test hook whether the coordinator may send the request of step.
func (tx *Tx) step(phase string, segment int) error {
	if hook := tx.c.step; hook != nil {
		if err := hook(txnStep{phase: phase, segment: segment}); err != nil {
			return fmt.Errorf("%w before %s %d: %w", errCoordinatorStopped, phase, segment, err)
		}
	}
	return nil
}

// prepare sends each segment its version checks and intents, all in parallel, and returns the first
// failure.
func (tx *Tx) prepare(ctx context.Context, id string, parts []txnSegment) error {
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		if errs[i] = tx.step("prepare", i); errs[i] != nil {
			break
		}
		wg.Go(func() { errs[i] = tx.prepareSegment(ctx, id, part) })
	}
	wg.Wait()
	if i := slices.IndexFunc(errs, func(err error) bool { return errors.Is(err, errCoordinatorStopped) }); i >= 0 {
		return errs[i] // stopped: no clean-up either
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// prepareSegment checks the versions read in one segment and places an intent on each of its keys.
func (tx *Tx) prepareSegment(ctx context.Context, id string, part txnSegment) error {
	var items []txnItem
	for _, key := range part.keys {
		if r, read := tx.reads[key]; read {
			items = append(items, txnItem{op: kv.OpCheckVersion, req: kv.Request{Key: key, Version: r.version}})
		}
	}
	for _, key := range part.keys {
		in := intent{txn: id, anchor: tx.anchor, action: intentHold}
		if w, written := tx.writes[key]; written {
			in.action, in.value, in.ttl = intentPut, w.value, int64(w.ttl)
			if w.del {
				in.action, in.value = intentDelete, nil
			}
		}
		items = append(items, txnItem{op: kv.OpIntent, req: kv.Request{Key: key, Value: in.encode(), Delta: int64(tx.c.timeout)}})
	}
	reply, err := tx.c.send(ctx, id, part.keys[0], items, false)
	switch {
	case errors.Is(err, ErrLocked):
		return fmt.Errorf("%w: a key of %q is held by another transaction", ErrConflict, part.keys[0])
	case err != nil:
		return fmt.Errorf("zaris: transaction aborted: prepare at %q: %w", part.keys[0], err)
	}
	return tx.conflict(items, reply)
}

// decide records the commit in the anchor's segment, unless an owner recorded an abort first, and returns
// the outcome recorded. The request is sent again until it is answered: the first outcome stands, so a
// resend cannot change it.
func (tx *Tx) decide(ctx context.Context, id string) (committed bool, err error) {
	if err := tx.step("decide", 0); err != nil {
		return false, err
	}
	req := &kv.Request{Key: tx.anchor, Value: []byte(id), Delta: 1, TTL: int64(tx.c.retention), Concern: Sync}
	for {
		reply, err := tx.c.execute(ctx, kv.OpDecide, req)
		if err == nil {
			err = statusErr(reply.Status)
		}
		switch {
		case err == nil:
			return reply.Int == 1, nil
		case ctx.Err() != nil:
			return false, fmt.Errorf("%w: the outcome of transaction %s is not known: %w", ErrUnconfirmed, id, err)
		}
		if err := sleepCtx(ctx, tx.c.clock, tx.c.backoff); err != nil {
			return false, fmt.Errorf("%w: the outcome of transaction %s is not known: %w", ErrUnconfirmed, id, err)
		}
	}
}

// resolveAll ends the transaction's intents in every segment, in parallel, applying its writes if it
// committed, and reports whether every segment confirmed. A segment that does not is resolved by its owner
// once TxnTimeout has passed.
func (tx *Tx) resolveAll(ctx context.Context, id string, parts []txnSegment, commit bool) bool {
	ok := make([]bool, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		if tx.step("resolve", i) != nil {
			break
		}
		wg.Go(func() { ok[i] = tx.c.resolve(ctx, id, part.keys, commit) == nil })
	}
	wg.Wait()
	return !slices.Contains(ok, false)
}

// releaseLater drops the intents of transaction id, which did not commit, without holding the caller, and
// even when the caller's context has ended: the sooner they go, the sooner others may write their keys.
func (tx *Tx) releaseLater(id string, parts []txnSegment) {
	tx.c.background(func() {
		ctx, cancel := context.WithTimeout(tx.c.life, tx.c.timeout)
		defer cancel()
		tx.resolveAll(ctx, id, parts, false)
	})
}

// forgetLater drops the record of transaction id, kept in the segment of anchor, once every segment
// resolved its intents. The commit does not wait for it: a record left behind expires after
// TxnRecordRetention.
func (c *txnClient) forgetLater(anchor, id string) {
	c.background(func() {
		ctx, cancel := context.WithTimeout(c.life, c.timeout)
		defer cancel()
		c.execute(ctx, kv.OpForget, &kv.Request{Key: anchor, Value: []byte(id), Concern: Sync})
	})
}

// resolveIntents ends transaction id's intents on keys, all in one segment, in one atomic write.
func (c *client) resolveIntents(ctx context.Context, id string, keys []string, commit bool) error {
	items := make([]txnItem, len(keys))
	for i, key := range keys {
		items[i] = txnItem{op: kv.OpResolve, req: kv.Request{Key: key, Value: []byte(id), Delta: kv.BoolInt(commit)}}
	}
	_, err := c.sendTxn(ctx, id, keys[0], items, true)
	return err
}

// sendTxn sends items, the work of transaction id in the segment of key, to that segment's owner as one
// atomic write under the Sync concern, and returns the owner's reply, failing on any status but success
// and a version mismatch. Without waitLocks, a key held by another transaction fails it with ErrLocked at
// once: a prepare that waited for another could wait for one that waits for it.
func (c *client) sendTxn(ctx context.Context, id, key string, items []txnItem, waitLocks bool) (kv.Reply, error) {
	reply, err := c.route(ctx, kv.OpTxn, &kv.Request{Key: key, Value: []byte(id), Args: encodeTxnItems(items), Concern: Sync}, waitLocks)
	switch {
	case err != nil:
		return reply, err
	case reply.Status == StatusVersionMismatch && reply.Int >= 0 && reply.Int < int64(len(items)):
		return reply, nil
	case reply.Status != StatusSuccess:
		return reply, statusErr(reply.Status)
	}
	return reply, checkTxnReplies(reply.Values)
}
