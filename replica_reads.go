package zaris

import (
	"slices"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// Reads of a replica's copy, which a RESP client asks for with READONLY, as a Redis Cluster replica serves
// them: a replica in the partition's in-sync set holds every write its owner acknowledged under the Sync
// concern, but may not yet hold a newer one, nor see one the owner applied and has not acknowledged.

// checkReplica returns key's segment and reports whether this node holds an in-sync copy of its partition
// as a replica.
func (o *owner) checkReplica(key string) (segment int, ok bool) {
	segment = o.layout.KeySegment(key)
	return segment, o.replicates(o.layout.SegmentPartition(segment))
}

// replicates reports whether the latest map names this node an in-sync replica of partition p.
func (o *owner) replicates(p int) bool {
	m := o.view.clusterMap()
	if m.Version == 0 || p >= len(m.Runtime) {
		return false
	}
	st := m.Runtime[p]
	return st.Owner != o.id && st.Health != Unavailable && slices.Contains(st.InSync, o.id)
}

// replicaLimits are opLimits for reads of a replica's copy: a read that raced the map taking the copy out
// of the in-sync set is refused, as an owner's read that raced its deposition is.
func (o *owner) replicaLimits() opLimits {
	lim := o.opLimits()
	lim.deposed = func(p int) bool { return !o.replicates(p) }
	return lim
}

// readReplica runs the read-only key operation op on this node's replica copy of segment seg.
func (o *owner) readReplica(op transport.Op, seg int, req *kv.Request) (reply kv.Reply) {
	k := lookupKeyOp(op)
	if k == nil || !k.readOnly {
		return kv.Reply{Status: StatusInvalidRequest}
	}
	defer o.panics.recoverOp(op, seg, &reply.Status)
	if refusal := refuseKeyOp(k, req.Key); refusal != nil {
		return *refusal
	}
	return o.readCopy(seg, k, req, o.replicaLimits())
}

// readReplicaAtomically runs fn on a read-only view of this node's replica copy of segment seg, which sees
// one revision of it.
func (o *owner) readReplicaAtomically(seg int, keys []string, fn func(kv.Group)) Status {
	_, status := o.readViewOf(seg, keys, fn, o.replicaLimits())
	return status
}
