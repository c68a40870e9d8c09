package kv

import "github.com/zaris-go/zaris/transport"

// GroupOpOverhead is what an operation of an atomic group takes besides its key and value: its fixed fields
// as the op log writes them, rounded up.
const GroupOpOverhead = 64

// Group is an owned segment held for one atomic group of key operations, or a read-only view of it: what
// an EXEC or a command on several keys runs on. Its operations get the checks every key operation gets.
type Group interface {
	// Apply runs one key operation in the group. full reports that the write did not fit in the group
	// (it changed nothing); a write in a read-only view is refused as an invalid request.
	Apply(op transport.Op, req *Request) (reply Reply, full bool)
	// Version returns key's version as the group sees it, zero when it holds no live value.
	Version(key string) uint64
	// HasRoom reports whether writes taking n bytes fit in the group, for a command that must write all of
	// its keys or none.
	HasRoom(n int) bool
	// Abandon undoes the group's writes so far: unless it writes again, the group ends having written
	// nothing, for a transaction whose reply cannot be sent.
	Abandon()
	// Mark returns the point the group's writes have reached, and RollbackTo undoes every write after it:
	// a command of a transaction that answers an error writes nothing, though others before it did.
	Mark() GroupMark
	RollbackTo(GroupMark)
}

// GroupMark is a point in a group's writes: how many it had made, and the bytes they took.
type GroupMark struct {
	Writes, Bytes int
}
