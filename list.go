package zaris

import (
	"bytes"
	"context"
	"fmt"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
)

// List operations: a key holding a sequence of items, pushed and popped at either end. A write ships the
// items it pushes, or how many it pops or trims.

// applyPush pushes items at one end, in order, and answers the list's new length in Int. With
// kv.CondIfExists in Cond (LPUSHX, RPUSHX) it pushes only onto an existing list, and answers 0 without one.
func applyPush(left bool, cmd string) applyFunc {
	return func(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
		if len(req.Args) < 1 {
			return wrongArgCount(cmd)
		}
		length := 0
		w := s.writeCollection(seg, req.Key, kindList, func(c collection) collOp {
			if c == nil && req.Cond&kv.CondIfExists != 0 {
				return collOp{}
			}
			if c != nil {
				length = c.len()
			}
			length += len(req.Args)
			return collOp{kind: durability.OpListPush, flags: sideFlag(left), args: req.Args}
		})
		return w.reply(length)
	}
}

// applyPop pops items from one end: one, answered in Value, or as many as the optional count says,
// answered in Values. A missing key answers StatusNotFound.
func applyPop(left bool, cmd string) applyFunc {
	return func(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
		count, refused := popCount(req.Args, cmd)
		if refused.Status != StatusSuccess {
			return refused
		}
		var popped [][]byte
		w := s.writeCollection(seg, req.Key, kindList, func(c collection) collOp {
			l, _ := c.(*listColl)
			if l == nil {
				return collOp{}
			}
			n := int(min(count, int64(l.len())))
			popped = make([][]byte, n)
			for i := range popped {
				if left {
					popped[i] = l.at(i)
				} else {
					popped[i] = l.at(l.len() - 1 - i)
				}
			}
			if n == 0 {
				return collOp{}
			}
			return collOp{kind: durability.OpListPop, flags: sideFlag(left), args: [][]byte{countBytes(n)}}
		})
		return poppedReply(w, req.Args, popped)
	}
}

// applyLMove pops an item from one end of the list under the key and pushes it onto one end of the list
// under Args[0], in one atomic write, as LMOVE source destination LEFT|RIGHT LEFT|RIGHT does. It answers the
// item in Value, StatusNotFound without a source list whatever the destination holds, and StatusWrongType,
// having moved nothing, when either key holds another kind. Both keys must be in one segment.
func applyLMove(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	if len(req.Args) != 3 {
		return wrongArgCount("lmove")
	}
	fromLeft, ok := listSide(req.Args[1])
	toLeft, ok2 := listSide(req.Args[2])
	if !ok || !ok2 {
		return invalidArgs(msgSyntax)
	}
	dst := string(req.Args[0])
	switch {
	case isInternalKey(dst):
		return invalidArgs(fmt.Sprintf("ERR key %q is reserved", dst))
	case lim.layout.Segments > 0 && lim.layout.KeySegment(dst) != seg:
		return invalidArgs(fmt.Sprintf("ERR key %q is in another segment than %q", dst, req.Key))
	case s.lockedBy(seg, dst) != "":
		return kv.Reply{Status: StatusLocked}
	}
	var reply kv.Reply
	s.atomically(seg, func(g *store) {
		if status := g.readCollection(seg, req.Key, kindList, func(collection) {}); status != StatusSuccess {
			reply = kv.Reply{Status: status} // as Redis: a missing source answers before the destination's kind
			return
		}
		if g.readCollection(seg, dst, kindList, func(collection) {}) == StatusWrongType {
			reply = kv.Reply{Status: StatusWrongType}
			return
		}
		popped := applyPop(fromLeft, "lmove")(g, seg, kv.Request{Key: req.Key}, lim)
		if popped.Status != StatusSuccess {
			reply = popped
			return
		}
		pushed := applyPush(toLeft, "lmove")(g, seg, kv.Request{Key: dst, Args: [][]byte{popped.Value}}, lim)
		if pushed.Status != StatusSuccess {
			g.group.rollback()
			reply = pushed
			return
		}
		reply = kv.Reply{Status: StatusSuccess, Value: popped.Value, Version: pushed.Version}
	})
	return reply
}

// listSide reads LEFT or RIGHT, in any case, and reports whether it is LEFT.
func listSide(b []byte) (left, ok bool) {
	switch {
	case bytes.EqualFold(b, []byte("left")):
		return true, true
	case bytes.EqualFold(b, []byte("right")):
		return false, true
	}
	return false, false
}

func sideFlag(left bool) byte {
	if left {
		return collLeft
	}
	return 0
}

// listRange turns Redis's start and stop, negative ones counting from the end, into the items from start
// to stop, exclusive, of a list of length n.
func listRange(start, stop int64, n int) (int, int) {
	if start < 0 {
		start += int64(n)
	}
	if stop < 0 {
		stop += int64(n)
	}
	start = max(start, 0)
	stop = min(stop, int64(n)-1)
	if start > stop {
		return 0, 0
	}
	return int(start), int(stop) + 1
}

// rangeArgs parses the start and stop arguments of LRANGE and LTRIM.
func rangeArgs(args [][]byte, cmd string) (start, stop int64, refused kv.Reply) {
	if len(args) != 2 {
		return 0, 0, wrongArgCount(cmd)
	}
	start, ok1 := parseInt(args[0])
	stop, ok2 := parseInt(args[1])
	if !ok1 || !ok2 {
		return 0, 0, invalidArgs(msgNotInteger)
	}
	return start, stop, kv.Reply{}
}

// applyLRange answers the items from start to stop, inclusive.
func applyLRange(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	start, stop, refused := rangeArgs(req.Args, "lrange")
	if refused.Status != StatusSuccess {
		return refused
	}
	items := [][]byte{}
	status := s.readCollection(seg, req.Key, kindList, func(c collection) {
		l := c.(*listColl)
		from, to := listRange(start, stop, l.len())
		for i := from; i < to; i++ {
			items = append(items, l.at(i))
		}
	})
	return readReply(status, items, lim)
}

// applyLLen answers the list's length in Int.
func applyLLen(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	var n int
	status := s.readCollection(seg, req.Key, kindList, func(c collection) { n = c.len() })
	return kv.Reply{Status: status, Int: int64(n)}
}

// applyLIndex answers the item at an index, negative ones counting from the end, or StatusNotFound.
func applyLIndex(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) != 1 {
		return wrongArgCount("lindex")
	}
	index, ok := parseInt(req.Args[0])
	if !ok {
		// Redis looks the key up first: a missing key or another type answers before a bad index.
		if status := s.readCollection(seg, req.Key, kindList, func(collection) {}); status != StatusSuccess {
			return kv.Reply{Status: status}
		}
		return invalidArgs(msgNotInteger)
	}
	var item []byte
	status := s.readCollection(seg, req.Key, kindList, func(c collection) {
		l := c.(*listColl)
		if index < 0 {
			index += int64(l.len())
		}
		if index >= 0 && index < int64(l.len()) {
			item = l.at(int(index))
		}
	})
	if status == StatusSuccess && item == nil {
		status = StatusNotFound
	}
	return kv.Reply{Status: status, Value: item}
}

// applyLTrim keeps the items from start to stop, inclusive, deleting the list when none is left.
func applyLTrim(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	start, stop, refused := rangeArgs(req.Args, "ltrim")
	if refused.Status != StatusSuccess {
		return refused
	}
	w := s.writeCollection(seg, req.Key, kindList, func(c collection) collOp {
		if c == nil {
			return collOp{}
		}
		from, to := listRange(start, stop, c.len())
		if from == 0 && to == c.len() {
			return collOp{}
		}
		return collOp{kind: durability.OpListTrim, args: [][]byte{countBytes(from), countBytes(to)}}
	})
	return w.reply(0)
}

// LPush pushes values at the head of the list under key, creating it if need be, each before the previous
// one, and returns the list's length.
func (n *Node) LPush(ctx context.Context, key string, values ...[]byte) (int, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpLPush, key, values...)
	return int(reply.Int), err
}

// RPush pushes values at the tail of the list under key, creating it if need be, and returns its length.
func (n *Node) RPush(ctx context.Context, key string, values ...[]byte) (int, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpRPush, key, values...)
	return int(reply.Int), err
}

// LPop pops up to count items from the head of the list under key: none without the key. A list left
// empty is deleted.
func (n *Node) LPop(ctx context.Context, key string, count int) ([][]byte, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpLPop, key, intArg(int64(count)))
	return reply.Values, err
}

// RPop pops up to count items from the tail of the list under key, the last first.
func (n *Node) RPop(ctx context.Context, key string, count int) ([][]byte, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpRPop, key, intArg(int64(count)))
	return reply.Values, err
}

// LMove pops an item from the list under src, from its head with fromLeft and its tail otherwise, pushes
// it onto the list under dst, at its head with toLeft, and returns it, in one atomic write: an error
// matching ErrNotFound without a source list. src and dst must be in one segment: give them one hash tag
// ("{jobs}:pending", "{jobs}:running"). With src and dst the same, it rotates the list.
func (n *Node) LMove(ctx context.Context, src, dst string, fromLeft, toLeft bool) ([]byte, error) {
	if n.layout.KeySegment(src) != n.layout.KeySegment(dst) {
		return nil, fmt.Errorf("%w: keys %q and %q are in different segments; give them one hash tag", ErrInvalidRequest, src, dst)
	}
	reply, err := n.client.collectionCall(ctx, kv.OpLMove, src, []byte(dst), sideArg(fromLeft), sideArg(toLeft))
	if err == nil && reply.Status == StatusNotFound {
		err = ErrNotFound
	}
	return reply.Value, err
}

func sideArg(left bool) []byte {
	if left {
		return []byte("left")
	}
	return []byte("right")
}

// LRange returns the items of the list under key from start to stop, inclusive; negative indexes count
// from the end, -1 being the last item.
func (n *Node) LRange(ctx context.Context, key string, start, stop int64) ([][]byte, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpLRange, key, intArg(start), intArg(stop))
	return reply.Values, err
}

// LLen returns the length of the list under key, 0 without the key.
func (n *Node) LLen(ctx context.Context, key string) (int, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpLLen, key)
	return int(reply.Int), err
}

// LIndex returns the item at index of the list under key, negative indexes counting from the end, or an
// error matching ErrNotFound.
func (n *Node) LIndex(ctx context.Context, key string, index int64) ([]byte, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpLIndex, key, intArg(index))
	if err == nil && reply.Status == StatusNotFound {
		err = ErrNotFound
	}
	return reply.Value, err
}

// LTrim keeps the items of the list under key from start to stop, inclusive, deleting the list when none
// is left.
func (n *Node) LTrim(ctx context.Context, key string, start, stop int64) error {
	_, err := n.client.collectionCall(ctx, kv.OpLTrim, key, intArg(start), intArg(stop))
	return err
}
