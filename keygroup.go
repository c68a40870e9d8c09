package zaris

import (
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// storeGroup is a keyGroup over a view of the store: an atomic group (store.atomically) or a read-only
// view (store.readAtomically) of segment seg.
type storeGroup struct {
	g    *store
	seg  int
	lim  opLimits
	read bool
}

func (sg *storeGroup) Apply(op transport.Op, req *kv.Request) (kv.Reply, bool) {
	k := lookupKeyOp(op)
	if k == nil || sg.read && !k.readOnly {
		return kv.Reply{Status: StatusInvalidRequest}, false
	}
	if refusal := refuseKeyOp(k, req.Key); refusal != nil {
		return *refusal, false
	}
	if sg.lim.refusesGrowth(k, sg.seg, req) {
		return kv.Reply{Status: StatusOutOfMemory}, false
	}
	sg.g.takeCreated()
	reply := k.apply(sg.g, sg.seg, *req, sg.lim)
	reply.Created = sg.g.takeCreated()
	if sg.g.takeRefusal() {
		return kv.Reply{Status: StatusTooLarge}, true
	}
	return reply, false
}

func (sg *storeGroup) Version(key string) uint64 {
	_, version, _ := sg.g.get(sg.seg, key)
	return version
}

func (sg *storeGroup) HasRoom(n int) bool { return sg.g.groupHasRoom(n) }

func (sg *storeGroup) Abandon() {
	if !sg.read {
		sg.g.group.rollback()
	}
}

func (sg *storeGroup) Mark() kv.GroupMark {
	if sg.read {
		return kv.GroupMark{}
	}
	g := sg.g.group
	return kv.GroupMark{Writes: len(g.undo), Bytes: g.bytes}
}

func (sg *storeGroup) RollbackTo(m kv.GroupMark) {
	if !sg.read {
		sg.g.group.rollbackTo(m.Writes, m.Bytes)
	}
}
