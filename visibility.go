package zaris

import (
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// Read visibility. An owner applies a write to its own copy before its replicas have it, so a read served
// in between could return a value that a failover then loses, and a later read would go back in time.
// Under the Sync concern an owner therefore answers a read only once every in-sync replica holds the state
// the read saw. It keeps, per segment, a revision known to be on every in-sync replica. A read of a segment
// beyond it waits for the replicas exactly as a Sync write does, and shares its outcome. Under the Async
// concern reads never wait: a write acknowledged Async may be lost anyway.

// unconfirmed returns the revision a reply of op on seg reveals and whether the in-sync replicas must
// confirm it before the reply is sent. Writes that wait for their replicas confirm themselves.
func (o *owner) unconfirmed(op transport.Op, seg int, reply *kv.Reply) (revision uint64, wait bool) {
	if !o.confirmsReply(op, reply) {
		return 0, false
	}
	revision = o.store.revision(seg)
	return revision, o.repl.unconfirmedAt(seg, revision)
}

// unconfirmedAt is unconfirmed for a reply of op that revealed seg at revision, read with the state it
// reveals.
func (o *owner) unconfirmedAt(op transport.Op, seg int, revision uint64, reply *kv.Reply) bool {
	return o.confirmsReply(op, reply) && o.repl.unconfirmedAt(seg, revision)
}

// confirmsReply reports whether a reply of op waits for the replicas to confirm the state it reveals.
func (o *owner) confirmsReply(op transport.Op, reply *kv.Reply) bool {
	return o.cfg.WriteConcern == Sync && revealsState(op, reply)
}

// unconfirmedAt reports whether some in-sync replica may not yet hold segment up to revision.
func (r *replication) unconfirmedAt(segment int, revision uint64) bool {
	return revision > r.committed[segment].Load()
}

// revealsState reports whether the reply tells something about the stored state without having written:
// a read, a not-found answer, or a conditional put that found its condition false.
func revealsState(op transport.Op, reply *kv.Reply) bool {
	k := lookupKeyOp(op)
	return k != nil && k.reveals.reveals(reply)
}

// confirm records that every in-sync replica holds segment up to revision.
func (r *replication) confirm(segment int, revision uint64) {
	for {
		cur := r.committed[segment].Load()
		if revision <= cur || r.committed[segment].CompareAndSwap(cur, revision) {
			return
		}
	}
}

// forgetConfirmed drops what this node knew to be confirmed of partition p. It is called when this node
// becomes p's owner, before its in-sync replicas have shown what they hold.
func (r *replication) forgetConfirmed(p int) {
	first, end := r.layout.PartitionSegments(p)
	for s := first; s < end; s++ {
		r.committed[s].Store(0)
	}
}
