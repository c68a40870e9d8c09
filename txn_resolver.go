package zaris

import (
	"context"

	"github.com/zaris-go/zaris/internal/kv"
)

// staleIntent is an intent whose deadline has passed, as its owner finds it.
type staleIntent struct {
	key    string
	txn    string
	anchor string
}

// staleIntents lists the intents of segment seg whose deadline is at or before now.
func (s *store) staleIntents(seg int, now int64) []staleIntent {
	ss := &s.segments[seg]
	s.rlock(ss)
	defer s.runlock(ss)
	if ss.intents.Load() == 0 {
		return nil
	}
	var out []staleIntent
	for k, e := range ss.entries.all() {
		if !isIntentKey(k) {
			continue
		}
		if in, err := decodeIntent(e.value()); err == nil && in.deadline <= now {
			out = append(out, staleIntent{key: k[len(intentPrefix):], txn: in.txn, anchor: in.anchor})
		}
	}
	return out
}

// resolveStaleIntents resolves the intents in this node's partitions whose coordinator did not resolve them
// within TxnTimeout: it records an abort for their transaction, unless its record holds a commit already,
// and applies the outcome recorded. A transaction whose record cannot be reached now is tried again at the
// next round.
func (o *owner) resolveStaleIntents() {
	m := o.view.clusterMap()
	now := o.store.now()
	for p, st := range m.Runtime {
		if !o.ownsIn(m, p) || st.Health == Recovering {
			continue
		}
		first, end := o.layout.PartitionSegments(p)
		for seg := first; seg < end; seg++ {
			o.resolveSegment(o.store.staleIntents(seg, now))
		}
	}
}

// resolveSegment resolves the stale intents of one segment, transaction by transaction.
func (o *owner) resolveSegment(stale []staleIntent) {
	byTxn := map[string][]staleIntent{}
	for _, si := range stale {
		byTxn[si.txn] = append(byTxn[si.txn], si)
	}
	for txn, intents := range byTxn {
		ctx, cancel := context.WithTimeout(o.life, o.cfg.TxnTimeout)
		committed, err := o.decideAbort(ctx, txn, intents[0].anchor)
		if err == nil {
			keys := make([]string, len(intents))
			for i := range intents {
				keys[i] = intents[i].key
			}
			err = o.client.resolveIntents(ctx, txn, keys, committed)
		}
		cancel()
		if err != nil {
			o.log.Debug("transaction intents left for the next round", "txn", txn, "err", err)
		}
	}
}

// decideAbort records an abort for transaction txn in the segment of anchor, unless an outcome is recorded
// already, and reports whether the outcome recorded is a commit.
func (o *owner) decideAbort(ctx context.Context, txn, anchor string) (committed bool, err error) {
	req := &kv.Request{Key: anchor, Value: []byte(txn), TTL: int64(o.cfg.TxnRecordRetention), Concern: Sync}
	reply, err := o.client.execute(ctx, kv.OpDecide, req)
	if err == nil {
		err = statusErr(reply.Status)
	}
	return reply.Int == 1, err
}
