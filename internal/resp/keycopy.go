package resp

import (
	"bytes"
	"math"

	"github.com/zaris-go/zaris/internal/kv"
)

// RENAME, RENAMENX and COPY: a key's whole value, of any type, and its expiry, read and written to another
// key of the same slot in one group of its segment, so no other command sees the copy half made.

// redisDatabases is how many databases COPY's DB option may name, as a Redis server has by default; in
// cluster mode only database 0 serves.
const redisDatabases = 16

// keyValue is a key's whole value, read to be written under another key.
type keyValue struct {
	typ    string   // as TYPE names it, "none" for a missing key
	value  []byte   // a string's value
	items  [][]byte // a hash's field-value pairs, a list's items, a set's members, a sorted set's score-member pairs
	expiry int64    // when it expires, in Unix nanoseconds; 0 for never
}

// setExpiry asks req for v's expiry: the same deadline, however long the copy took. One already past
// still writes the key, expired.
func (c *respConn) setExpiry(req *kv.Request, v keyValue) {
	req.TTL = max(v.expiry-c.srv.clock.Now().UnixNano(), 1)
	req.ExpireAt = v.expiry
}

// writeBytes bounds what copying v from src to dst takes in an atomic group: deleting both keys, writing
// dst and setting its expiry.
func (v keyValue) writeBytes(src, dst string) int {
	return 2*(len(src)+len(dst)) + 4*kv.GroupOpOverhead + len(v.value) + itemsBytes(v.items)
}

// itemsBytes bounds what a collection op carrying items takes besides its key: each item with its length
// header (at most 5 bytes), and the op's own header.
func itemsBytes(items [][]byte) int {
	n := 8
	for _, item := range items {
		n += len(item) + 5
	}
	return n
}

// vacant reports whether key holds no value, and otherwise answers 0, as RENAMENX and COPY do when their
// destination holds one. A refusal is answered too.
func (c *respConn) vacant(key string) bool {
	exists, ok := c.keyOp(kv.OpExists, &kv.Request{Key: key})
	if ok && exists.Status == kv.StatusSuccess {
		c.wr.int(0)
		return false
	}
	return ok
}

// readValue reads key's whole value and the time it has left. A refusal is answered and reported false.
func (c *respConn) readValue(key string) (keyValue, bool) {
	typ, ok := c.keyType([]byte(key))
	v := keyValue{typ: typ}
	if !ok || typ == "none" {
		return v, ok
	}
	req := &kv.Request{Key: key}
	var reply kv.Reply
	switch typ {
	case "string":
		reply, ok = c.keyOp(kv.OpGet, req)
		v.value = bytes.Clone(reply.Value)
	case "hash":
		reply, ok = c.keyOp(kv.OpHGetAll, req)
	case "list":
		reply, ok = c.readList(key)
	case "set":
		reply, ok = c.keyOp(kv.OpSMembers, req)
	case "zset":
		req.Args = [][]byte{[]byte("0"), []byte("-1"), []byte("WITHSCORES")}
		reply, ok = c.keyOp(kv.OpZRange, req)
		for i := 0; i+1 < len(reply.Values); i += 2 { // ZADD takes score before member
			reply.Values[i], reply.Values[i+1] = reply.Values[i+1], reply.Values[i]
		}
	default:
		c.wr.error("ERR cannot copy a value of type " + typ)
		return v, false
	}
	if !ok {
		return v, false
	}
	v.items = kv.CloneValues(reply.Values)
	at, ok := c.keyOp(kv.OpExpiryTime, &kv.Request{Key: key})
	if at.Int > 0 {
		v.expiry = at.Int
	}
	return v, ok
}

// writeValue replaces whatever key holds with v. The caller has checked that the group has room for it.
func (c *respConn) writeValue(key string, v keyValue) bool {
	if _, ok := c.keyOp(kv.OpDelete, &kv.Request{Key: key}); !ok {
		return false
	}
	req := &kv.Request{Key: key, Args: v.items}
	var ok bool
	switch v.typ {
	case "string":
		req.Value = v.value
		if v.expiry != 0 {
			c.setExpiry(req, v)
		}
		_, ok = c.keyOp(kv.OpPut, req)
		return ok
	case "hash":
		_, ok = c.keyOp(kv.OpHSet, req)
	case "list":
		_, ok = c.keyOp(kv.OpRPush, req)
	case "set":
		_, ok = c.keyOp(kv.OpSAdd, req)
	case "zset":
		_, ok = c.keyOp(kv.OpZAdd, req)
	}
	if ok && v.expiry != 0 {
		req := &kv.Request{Key: key}
		c.setExpiry(req, v)
		_, ok = c.keyOp(kv.OpExpire, req)
	}
	return ok
}

// cmdRename serves RENAME and RENAMENX key newkey: key's value and expiry move to newkey, replacing what
// it held (RENAME) or only if it holds nothing (RENAMENX, answering 1 if it moved).
func (c *respConn) cmdRename(args [][]byte) {
	c.muteOps()
	nx := isSubcommand(args[0], "renamenx")
	src, dst := string(args[1]), string(args[2])
	v, ok := c.readValue(src)
	switch {
	case !ok:
		return
	case v.typ == "none":
		c.wr.error("ERR no such key")
		return
	case src == dst && nx:
		c.wr.int(0)
		return
	case src == dst:
		c.wr.ok()
		return
	}
	if nx && !c.vacant(dst) {
		return
	}
	if !c.groupHasRoom(v.writeBytes(src, dst)) || !c.writeValue(dst, v) {
		return
	}
	if _, ok := c.keyOp(kv.OpDelete, &kv.Request{Key: src}); !ok {
		return
	}
	c.notify(notifyNew, "new", args[2]) // as Redis, which deletes a destination it replaces and adds it again
	c.notify(notifyGeneric, "rename_from", args[1])
	c.notify(notifyGeneric, "rename_to", args[2])
	if nx {
		c.wr.int(1)
	} else {
		c.wr.ok()
	}
}

// cmdCopy serves COPY source destination [DB db] [REPLACE]: source's value and expiry copied to
// destination unless it holds a value (REPLACE replaces it), answering 1 if it copied. Only database 0
// serves, as in a Redis cluster.
func (c *respConn) cmdCopy(args [][]byte) {
	c.muteOps()
	replace, db := false, int64(0)
	for i := 3; i < len(args); i++ {
		switch {
		case isSubcommand(args[i], "replace"):
			replace = true
		case isSubcommand(args[i], "db") && i+1 < len(args):
			i++
			n, ok := kv.ParseCanonicalInt(args[i])
			switch {
			case !ok:
				c.notInteger()
				return
			case n < math.MinInt32 || n > math.MaxInt32:
				c.wr.error("ERR value is out of range, value must between -2147483648 and 2147483647")
				return
			case n < 0 || n >= redisDatabases:
				c.wr.error("ERR DB index is out of range")
				return
			}
			db = n
		default:
			c.syntaxError()
			return
		}
	}
	src, dst := string(args[1]), string(args[2])
	switch {
	case db != 0:
		c.wr.error("ERR Copying to another database is not allowed in cluster mode")
		return
	case src == dst:
		c.wr.error("ERR source and destination objects are the same")
		return
	}
	v, ok := c.readValue(src)
	if !ok || v.typ == "none" {
		if ok {
			c.wr.int(0)
		}
		return
	}
	if !replace && !c.vacant(dst) {
		return
	}
	if c.groupHasRoom(v.writeBytes(src, dst)) && c.writeValue(dst, v) {
		c.notify(notifyNew, "new", args[2]) // as for RENAME
		c.notify(notifyGeneric, "copy_to", args[2])
		c.wr.int(1)
	}
}
