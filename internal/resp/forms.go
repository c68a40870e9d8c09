package resp

import (
	"slices"
	"strconv"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
)

// Redis commands that are other forms of commands already served: older names (SETNX, SETEX, PSETEX,
// GETSET, HMSET, ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, TOUCH and EXPIREAT served by cmdExpire),
// narrower reads (HKEYS, HVALS, HSTRLEN) and conditional pushes (LPUSHX, RPUSHX). Each runs the operation of the command it is a
// form of, so it behaves as that command does, replies aside.

// cmdSetNX serves SETNX key value: SET key value NX, answering 1 if it wrote and 0 if not.
func (c *respConn) cmdSetNX(args [][]byte) {
	req := c.request(args[1])
	req.Value, req.Cond = args[2], kv.CondIfAbsent
	if reply, ok := c.keyOp(kv.OpPutIf, req); ok {
		c.wr.int(reply.Int)
	}
}

// cmdSetEx serves SETEX key seconds value and PSETEX key milliseconds value: SET key value EX|PX.
func (c *respConn) cmdSetEx(args [][]byte) {
	name, unit := "setex", "EX"
	if isSubcommand(args[0], "psetex") {
		name, unit = "psetex", "PX"
	}
	e, refusal := c.parseExpiry(name, unit, args[2])
	if refusal != "" {
		c.wr.error(refusal)
		return
	}
	req := c.request(args[1])
	req.Value = args[3]
	e.set(req)
	if _, ok := c.keyOp(kv.OpPut, req); ok {
		c.wr.ok()
	}
}

// cmdGetSet serves GETSET key value: SET key value GET, dropping any expiry.
func (c *respConn) cmdGetSet(args [][]byte) {
	req := c.request(args[1])
	req.Value, req.Cond = args[2], kv.CondReturnPrev
	reply, ok := c.keyOp(kv.OpPutIf, req)
	switch {
	case !ok:
	case reply.Existed:
		c.wr.bulk(reply.Value)
	default:
		c.wr.null()
	}
}

// cmdHMSet serves HMSET key field value [field value ...]: HSET answering OK.
func (c *respConn) cmdHMSet(args [][]byte) {
	if len(args)%2 != 0 {
		c.wr.error("ERR wrong number of arguments for 'hmset' command")
		return
	}
	hsetAnsweringOK(c, args)
}

var hsetAnsweringOK = collectionCommand(kv.OpHSet, okReply)

// fieldsReply writes the fields of HGETALL's pairs, for HKEYS.
func fieldsReply(c *respConn, _ [][]byte, reply kv.Reply) { c.everyOther(reply.Values, 0) }

// hashValuesReply writes the values of HGETALL's pairs, for HVALS.
func hashValuesReply(c *respConn, _ [][]byte, reply kv.Reply) { c.everyOther(reply.Values, 1) }

// everyOther writes, as an array, the elements of pairs at from, from+2...
func (c *respConn) everyOther(pairs [][]byte, from int) {
	c.wr.array(len(pairs) / 2)
	for i := from; i < len(pairs); i += 2 {
		c.wr.bulk(pairs[i])
	}
}

// lengthReply writes the length of HGET's value, 0 for a missing field or key, for HSTRLEN.
func lengthReply(c *respConn, _ [][]byte, reply kv.Reply) {
	if reply.Status == kv.StatusNotFound {
		c.wr.int(0)
		return
	}
	c.wr.int(int64(len(reply.Value)))
}

// cmdTime serves TIME: the server's clock as seconds and microseconds.
func (c *respConn) cmdTime([][]byte) {
	now := c.srv.clock.Now()
	c.wr.array(2)
	c.wr.bulk(strconv.AppendInt(nil, now.Unix(), 10))
	c.wr.bulk(strconv.AppendInt(nil, int64(now.Nanosecond())/int64(time.Microsecond), 10))
}

// cmdPushX serves LPUSHX and RPUSHX: a push onto a list that exists, answering 0 without one.
func (c *respConn) cmdPushX(args [][]byte) {
	op := kv.OpRPush
	if isSubcommand(args[0], "lpushx") {
		op = kv.OpLPush
	}
	req := &kv.Request{Key: string(args[1]), Args: kv.CloneValues(args[2:]), Cond: kv.CondIfExists}
	if reply, ok := c.keyOp(op, req); ok {
		c.wr.int(reply.Int)
	}
}

// zrangeForm serves a form of ZRANGE whose direction or kind of range is in its name (ZREVRANGE,
// ZRANGEBYSCORE, ZREVRANGEBYSCORE): ZRANGE with those keywords added, which the client may then not give.
func zrangeForm(fixed ...string) func(c *respConn, args [][]byte) {
	run := collectionCommand(kv.OpZRange, zrangeReply)
	return func(c *respConn, args [][]byte) {
		for _, arg := range args[4:] {
			if isSubcommand(arg, "rev") || isSubcommand(arg, "byscore") || isSubcommand(arg, "bylex") {
				if _, ok := c.ownKey(string(args[1])); ok { // a key owned elsewhere is redirected first
					c.syntaxError()
				}
				return
			}
		}
		all := slices.Clone(args[:4]) // the keywords before the client's options, which may end short
		for _, kw := range fixed {
			all = append(all, []byte(kw))
		}
		run(c, append(all, args[4:]...))
	}
}
