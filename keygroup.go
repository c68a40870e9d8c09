package zaris

import (
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// keyGroup is an owned segment held for one atomic group of key operations, or a read-only view of it:
// what an EXEC or a command on several keys runs on. Its operations take the op registry's path, with the
// checks every key operation gets.
type keyGroup interface {
	// apply runs one key operation in the group. full reports that the write did not fit in the group
	// (it changed nothing); a write in a read-only view is refused as an invalid request.
	apply(op transport.Op, req *kv.Request) (reply kv.Reply, full bool)
	// version returns key's version as the group sees it, zero when it holds no live value.
	version(key string) uint64
	// hasRoom reports whether writes taking n bytes (groupWriteBytes) fit in the group, for a command that
	// must write all of its keys or none.
	hasRoom(n int) bool
	// abandon undoes the group's writes so far: unless it writes again, the group ends having written
	// nothing, for a transaction whose reply cannot be sent.
	abandon()
}

// storeGroup is a keyGroup over a view of the store: an atomic group (store.atomically) or a read-only
// view (store.readAtomically) of segment seg.
type storeGroup struct {
	g    *store
	seg  int
	lim  opLimits
	read bool
}

func (sg *storeGroup) apply(op transport.Op, req *kv.Request) (kv.Reply, bool) {
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
	reply := k.apply(sg.g, sg.seg, *req, sg.lim)
	if sg.g.takeRefusal() {
		return kv.Reply{Status: StatusTooLarge}, true
	}
	return reply, false
}

func (sg *storeGroup) version(key string) uint64 {
	_, version, _ := sg.g.get(sg.seg, key)
	return version
}

func (sg *storeGroup) hasRoom(n int) bool { return sg.g.groupHasRoom(n) }

func (sg *storeGroup) abandon() {
	if !sg.read {
		sg.g.group.rollback()
	}
}
