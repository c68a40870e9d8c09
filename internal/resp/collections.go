package resp

import (
	"bytes"
	"slices"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// Collection commands run one collection operation with the arguments after the key, which the owner
// parses as Redis does, and write its reply in the command's shape.

// collectionReply writes a collection operation's reply for the command args.
type collectionReply func(c *respConn, args [][]byte, reply kv.Reply)

// collectionCommand returns the run function of a command served by op, answered by write.
func collectionCommand(op transport.Op, write collectionReply) func(c *respConn, args [][]byte) {
	return func(c *respConn, args [][]byte) {
		req := &kv.Request{Key: string(args[1]), Args: kv.CloneValues(args[2:])}
		if reply, ok := c.keyOp(op, req); ok {
			write(c, args, reply)
		}
	}
}

func intReply(c *respConn, _ [][]byte, reply kv.Reply) { c.wr.int(reply.Int) }

func bulkReply(c *respConn, _ [][]byte, reply kv.Reply) { c.valueReply(reply) }

// arrayReply writes Values as an array of bulks, a nil one as null.
func arrayReply(c *respConn, _ [][]byte, reply kv.Reply) { c.values(reply.Values) }

func (c *respConn) values(values [][]byte) {
	c.wr.array(len(values))
	for _, v := range values {
		if v == nil {
			c.wr.null()
		} else {
			c.wr.bulk(v)
		}
	}
}

// setReply writes Values as a set: a RESP3 set, an array in RESP2.
func setReply(c *respConn, _ [][]byte, reply kv.Reply) {
	if c.wr.proto == 3 {
		c.wr.header('~', len(reply.Values))
	} else {
		c.wr.array(len(reply.Values))
	}
	for _, v := range reply.Values {
		c.wr.bulk(v)
	}
}

// pairsReply writes Values, pairs of field and value, as a map: a flat array in RESP2.
func pairsReply(c *respConn, _ [][]byte, reply kv.Reply) {
	c.wr.mapOf(len(reply.Values) / 2)
	for _, v := range reply.Values {
		c.wr.bulk(v)
	}
}

func okReply(c *respConn, _ [][]byte, _ kv.Reply) { c.wr.ok() }

// popReply writes LPOP's and RPOP's reply: an item without a count, else an array, null without the key.
func popReply(c *respConn, args [][]byte, reply kv.Reply) {
	switch {
	case len(args) == 2:
		c.valueReply(reply)
	case reply.Status == kv.StatusNotFound:
		c.nullArray()
	default:
		c.values(reply.Values)
	}
}

// nullArray writes the absent array: a null array in RESP2, the null type in RESP3.
func (c *respConn) nullArray() {
	if c.wr.proto == 3 {
		c.wr.null()
		return
	}
	c.wr.buf = append(c.wr.buf, "*-1\r\n"...)
}

// zaddReply writes ZADD's reply: a count, or with INCR the new score, null when the options left it alone.
func zaddReply(c *respConn, args [][]byte, reply kv.Reply) {
	for _, arg := range args[2:] {
		if !isZAddOption(arg) {
			break
		}
		if bytes.EqualFold(arg, []byte("incr")) {
			c.score(reply.Value)
			return
		}
	}
	c.wr.int(reply.Int)
}

// rankReply writes a rank, null without the member.
func rankReply(c *respConn, _ [][]byte, reply kv.Reply) {
	if reply.Status == kv.StatusNotFound {
		c.wr.null()
		return
	}
	c.wr.int(reply.Int)
}

func isZAddOption(arg []byte) bool {
	for _, opt := range []string{"nx", "xx", "gt", "lt", "ch", "incr"} {
		if bytes.EqualFold(arg, []byte(opt)) {
			return true
		}
	}
	return false
}

// scoreReply writes a score: a double in RESP3, a bulk string in RESP2, null when Value is nil.
func scoreReply(c *respConn, _ [][]byte, reply kv.Reply) { c.score(reply.Value) }

func (c *respConn) score(score []byte) {
	switch {
	case score == nil:
		c.wr.null()
	case c.wr.proto == 3:
		c.wr.buf = append(c.wr.buf, ',')
		c.wr.buf = append(c.wr.buf, score...)
		c.wr.buf = append(c.wr.buf, '\r', '\n')
	default:
		c.wr.bulk(score)
	}
}

// zrangeReply writes ZRANGE's members; with WITHSCORES in RESP3, as pairs of member and double.
func zrangeReply(c *respConn, args [][]byte, reply kv.Reply) {
	if c.wr.proto != 3 || !slices.ContainsFunc(args[4:], func(arg []byte) bool { return bytes.EqualFold(arg, []byte("withscores")) }) {
		c.values(reply.Values)
		return
	}
	c.wr.array(len(reply.Values) / 2)
	for i := 0; i+1 < len(reply.Values); i += 2 {
		c.wr.array(2)
		c.wr.bulk(reply.Values[i])
		c.score(reply.Values[i+1])
	}
}
