package zaris

import (
	"context"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
)

// Set operations: a key holding distinct members. A write ships the members it changes.

// applySAdd adds members and answers in Int how many are new.
func applySAdd(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) < 1 {
		return wrongArgCount("sadd")
	}
	var added [][]byte
	w := s.writeCollection(seg, req.Key, kindSet, func(c collection) collOp {
		set, _ := c.(*setColl)
		for _, m := range distinct(req.Args) {
			if !set.has(m) {
				added = append(added, m)
			}
		}
		if len(added) == 0 {
			return collOp{}
		}
		return collOp{kind: durability.OpSetAdd, args: added}
	})
	return w.reply(len(added))
}

// applySRem removes members and answers in Int how many there were.
func applySRem(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) < 1 {
		return wrongArgCount("srem")
	}
	var removed [][]byte
	w := s.writeCollection(seg, req.Key, kindSet, func(c collection) collOp {
		set, _ := c.(*setColl)
		for _, m := range distinct(req.Args) {
			if set.has(m) {
				removed = append(removed, m)
			}
		}
		if len(removed) == 0 {
			return collOp{}
		}
		return collOp{kind: durability.OpSetRem, args: removed}
	})
	return w.reply(len(removed))
}

// applySMembers answers every member, in no particular order.
func applySMembers(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	var members [][]byte
	status := s.readCollection(seg, req.Key, kindSet, func(c collection) { members = c.elements() })
	return readReply(status, members, lim)
}

// applySIsMember answers 1 in Int when the member is in the set.
func applySIsMember(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) != 1 {
		return wrongArgCount("sismember")
	}
	var found bool
	status := s.readCollection(seg, req.Key, kindSet, func(c collection) { found = c.(*setColl).has(req.Args[0]) })
	return kv.Reply{Status: status, Int: kv.BoolInt(found)}
}

// applySCard answers the number of members in Int.
func applySCard(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	var n int
	status := s.readCollection(seg, req.Key, kindSet, func(c collection) { n = c.len() })
	return kv.Reply{Status: status, Int: int64(n)}
}

// applySPop removes members chosen at random: one, answered in Value, or as many as the optional count says,
// answered in Values. A missing key answers StatusNotFound. The owner chooses; replicas remove what it chose.
func applySPop(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	count, refused := popCount(req.Args, "spop")
	if refused.Status != StatusSuccess {
		return refused
	}
	var popped [][]byte
	w := s.writeCollection(seg, req.Key, kindSet, func(c collection) collOp {
		set, _ := c.(*setColl)
		if set == nil {
			return collOp{}
		}
		popped = make([][]byte, 0, min(count, int64(set.len())))
		for m := range set.members { // Go's map order starts at a random place
			if int64(len(popped)) == count {
				break
			}
			popped = append(popped, []byte(m))
		}
		if len(popped) == 0 {
			return collOp{}
		}
		return collOp{kind: durability.OpSetRem, args: popped}
	})
	return poppedReply(w, req.Args, popped)
}

// has reports whether m is a member; s may be nil, as for a key without a set.
func (s *setColl) has(m []byte) bool {
	if s == nil {
		return false
	}
	_, ok := s.members[string(m)]
	return ok
}

// SAdd adds members to the set under key, creating it if need be, and returns how many are new.
func (n *Node) SAdd(ctx context.Context, key string, members ...string) (int, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpSAdd, key, stringArgs(members)...)
	return int(reply.Int), err
}

// SRem removes members from the set under key and returns how many it held. A set left empty is deleted.
func (n *Node) SRem(ctx context.Context, key string, members ...string) (int, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpSRem, key, stringArgs(members)...)
	return int(reply.Int), err
}

// SMembers returns the members of the set under key, in no particular order: none without the key.
func (n *Node) SMembers(ctx context.Context, key string) ([]string, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpSMembers, key)
	return stringsOf(reply.Values), err
}

// SPop removes up to count members of the set under key, chosen at random, and returns them: none without
// the key. A set left empty is deleted.
func (n *Node) SPop(ctx context.Context, key string, count int) ([]string, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpSPop, key, intArg(int64(count)))
	return stringsOf(reply.Values), err
}

// SIsMember reports whether member is in the set under key.
func (n *Node) SIsMember(ctx context.Context, key, member string) (bool, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpSIsMember, key, []byte(member))
	return reply.Int == 1, err
}

// SCard returns the number of members of the set under key, 0 without the key.
func (n *Node) SCard(ctx context.Context, key string) (int, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpSCard, key)
	return int(reply.Int), err
}
