package zaris

import (
	"context"
	"strconv"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
)

// Hash operations: a key holding fields and their values. A write ships the fields it changes, never the
// hash.

// applyHSet sets field and value pairs and answers in Int how many fields are new.
func applyHSet(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) < 2 || len(req.Args)%2 != 0 {
		return wrongArgCount("hset")
	}
	added := 0
	w := s.writeCollection(seg, req.Key, kindHash, func(c collection) collOp {
		h, _ := c.(*hashColl)
		seen := map[string]struct{}{}
		for i := 0; i < len(req.Args); i += 2 {
			f := string(req.Args[i])
			if _, dup := seen[f]; dup {
				continue
			}
			seen[f] = struct{}{}
			if _, ok := h.lookup(f); !ok {
				added++
			}
		}
		return collOp{kind: durability.OpHashSet, args: req.Args}
	})
	return w.reply(added)
}

// applyHSetNX sets a field unless the hash holds it, and answers in Int 1 if it did.
func applyHSetNX(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) != 2 {
		return wrongArgCount("hsetnx")
	}
	set := false
	w := s.writeCollection(seg, req.Key, kindHash, func(c collection) collOp {
		h, _ := c.(*hashColl)
		if _, held := h.lookup(string(req.Args[0])); held {
			return collOp{}
		}
		set = true
		return collOp{kind: durability.OpHashSet, args: req.Args}
	})
	return w.reply(int(kv.BoolInt(set)))
}

// applyHGet answers the field's value, StatusNotFound without it.
func applyHGet(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) != 1 {
		return wrongArgCount("hget")
	}
	var value []byte
	found := false
	status := s.readCollection(seg, req.Key, kindHash, func(c collection) {
		value, found = c.(*hashColl).lookup(string(req.Args[0]))
	})
	if status == StatusSuccess && !found {
		status = StatusNotFound
	}
	return kv.Reply{Status: status, Value: value}
}

// applyHMGet answers the fields' values, nil for a missing one.
func applyHMGet(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	if len(req.Args) < 1 {
		return wrongArgCount("hmget")
	}
	values := make([][]byte, len(req.Args))
	status := s.readCollection(seg, req.Key, kindHash, func(c collection) {
		for i, f := range req.Args {
			values[i] = c.(*hashColl).fields[string(f)]
		}
	})
	return readReply(status, values, lim) // a missing key answers a nil per field, with StatusNotFound
}

// applyHDel deletes fields and answers in Int how many there were.
func applyHDel(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) < 1 {
		return wrongArgCount("hdel")
	}
	var present [][]byte
	w := s.writeCollection(seg, req.Key, kindHash, func(c collection) collOp {
		if c == nil {
			return collOp{}
		}
		for _, f := range distinct(req.Args) {
			if _, ok := c.(*hashColl).fields[string(f)]; ok {
				present = append(present, f)
			}
		}
		if len(present) == 0 {
			return collOp{}
		}
		return collOp{kind: durability.OpHashDel, args: present}
	})
	return w.reply(len(present))
}

// applyHGetAll answers every field and value, in pairs.
func applyHGetAll(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	var values [][]byte
	status := s.readCollection(seg, req.Key, kindHash, func(c collection) { values = c.elements() })
	return readReply(status, values, lim)
}

// applyHLen answers the number of fields in Int.
func applyHLen(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	var n int
	status := s.readCollection(seg, req.Key, kindHash, func(c collection) { n = c.len() })
	return kv.Reply{Status: status, Int: int64(n)}
}

// applyHExists answers 1 in Int when the field exists.
func applyHExists(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) != 1 {
		return wrongArgCount("hexists")
	}
	var found bool
	status := s.readCollection(seg, req.Key, kindHash, func(c collection) {
		_, found = c.(*hashColl).fields[string(req.Args[0])]
	})
	return kv.Reply{Status: status, Int: kv.BoolInt(found)}
}

// applyHIncrBy adds to a field's integer value (a missing field counts as 0) and answers the sum in Int.
// Replicas receive the field's new value.
func applyHIncrBy(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) != 2 {
		return wrongArgCount("hincrby")
	}
	delta, ok := parseInt(req.Args[1])
	if !ok {
		return invalidArgs(msgNotInteger)
	}
	var sum int64
	var refused kv.Reply
	w := s.writeCollection(seg, req.Key, kindHash, func(c collection) collOp {
		var base int64
		h, _ := c.(*hashColl) // nil when the key has no hash yet
		if v, found := h.lookup(string(req.Args[0])); found {
			if base, ok = parseInt(v); !ok {
				refused = invalidArgs("ERR hash value is not an integer")
				return collOp{}
			}
		}
		if addOverflows(base, delta) {
			refused = invalidArgs(msgOverflow)
			return collOp{}
		}
		sum = base + delta
		return collOp{kind: durability.OpHashSet, args: [][]byte{req.Args[0], strconv.AppendInt(nil, sum, 10)}}
	})
	if refused.Status != StatusSuccess {
		return refused
	}
	reply := w.reply(0)
	reply.Int = sum
	return reply
}

// HSet sets fields of the hash under key, creating it if need be, and returns how many fields are new.
func (n *Node) HSet(ctx context.Context, key string, fields map[string][]byte) (int, error) {
	args := make([][]byte, 0, 2*len(fields))
	for f, v := range fields {
		args = append(args, []byte(f), v)
	}
	reply, err := n.client.collectionCall(ctx, kv.OpHSet, key, args...)
	return int(reply.Int), err
}

// HGet returns a field of the hash under key, or an error matching ErrNotFound without the key or field.
func (n *Node) HGet(ctx context.Context, key, field string) ([]byte, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpHGet, key, []byte(field))
	if err == nil && reply.Status == StatusNotFound {
		err = ErrNotFound
	}
	return reply.Value, err
}

// HMGet returns fields of the hash under key, nil for each one missing.
func (n *Node) HMGet(ctx context.Context, key string, fields ...string) ([][]byte, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpHMGet, key, stringArgs(fields)...)
	return reply.Values, err
}

// HDel deletes fields of the hash under key and returns how many it held. A hash left empty is deleted.
func (n *Node) HDel(ctx context.Context, key string, fields ...string) (int, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpHDel, key, stringArgs(fields)...)
	return int(reply.Int), err
}

// HGetAll returns every field of the hash under key: an empty map without the key.
func (n *Node) HGetAll(ctx context.Context, key string) (map[string][]byte, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpHGetAll, key)
	if err != nil {
		return nil, err
	}
	fields := make(map[string][]byte, len(reply.Values)/2)
	for i := 0; i+1 < len(reply.Values); i += 2 {
		fields[string(reply.Values[i])] = reply.Values[i+1]
	}
	return fields, nil
}

// HKeys returns the fields of the hash under key, in no particular order: none without the key.
func (n *Node) HKeys(ctx context.Context, key string) ([]string, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpHGetAll, key)
	return stringsOf(everyOther(reply.Values, 0)), err
}

// HVals returns the values of the hash under key, in the order HKeys would list their fields.
func (n *Node) HVals(ctx context.Context, key string) ([][]byte, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpHGetAll, key)
	return everyOther(reply.Values, 1), err
}

// everyOther returns the pairs' first (from 0) or second (from 1) halves.
func everyOther(pairs [][]byte, from int) [][]byte {
	out := make([][]byte, 0, len(pairs)/2)
	for i := from; i < len(pairs); i += 2 {
		out = append(out, pairs[i])
	}
	return out
}

// HSetNX sets field of the hash under key, creating the hash if need be, unless the field exists; it
// reports whether it set it.
func (n *Node) HSetNX(ctx context.Context, key, field string, value []byte) (bool, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpHSetNX, key, []byte(field), value)
	return reply.Int == 1, err
}

// HLen returns the number of fields of the hash under key, 0 without the key.
func (n *Node) HLen(ctx context.Context, key string) (int, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpHLen, key)
	return int(reply.Int), err
}

// HExists reports whether the hash under key has field.
func (n *Node) HExists(ctx context.Context, key, field string) (bool, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpHExists, key, []byte(field))
	return reply.Int == 1, err
}

// HIncrBy adds delta to the integer in a field of the hash under key (a missing field counts as 0) and
// returns the sum. A value that is not an integer, or a sum that overflows, fails with ErrInvalidRequest.
func (n *Node) HIncrBy(ctx context.Context, key, field string, delta int64) (int64, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpHIncrBy, key, []byte(field), intArg(delta))
	return reply.Int, err
}
