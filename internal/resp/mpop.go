package resp

import (
	"bytes"
	"strconv"

	"github.com/zaris-go/zaris/internal/kv"
)

// LMPOP and ZMPOP pop from the first non-empty of several lists (sorted sets); BLMPOP, BZMPOP, BZPOPMIN
// and BZPOPMAX wait for one as BLPOP does (blocking.go).

// mpop is what LMPOP and ZMPOP pop: up to count items from one end of the first non-empty of keys.
type mpop struct {
	keys  [][]byte
	first bool // LEFT, or MIN
	count int64
}

// parseMPop reads numkeys key [key ...] END [COUNT count] from args[at:], END one of ends (first, last),
// with Redis's errors and in its order of checks. It answers a bad argument and reports false.
func (c *respConn) parseMPop(args [][]byte, at int, ends [2]string) (mpop, bool) {
	n, ok := kv.ParseCanonicalInt(args[at])
	if !ok || n < 1 {
		c.wr.error("ERR numkeys should be greater than 0")
		return mpop{}, false
	}
	where := at + 1 + int(min(n, int64(len(args))))
	if n > int64(len(args)-at-1) || where >= len(args) {
		c.syntaxError()
		return mpop{}, false
	}
	p := mpop{keys: args[at+1 : where], count: -1}
	switch {
	case bytes.EqualFold(args[where], []byte(ends[0])):
		p.first = true
	case !bytes.EqualFold(args[where], []byte(ends[1])):
		c.syntaxError()
		return mpop{}, false
	}
	for j := where + 1; j < len(args); j++ {
		if p.count != -1 || !bytes.EqualFold(args[j], []byte("count")) || j+1 == len(args) {
			c.syntaxError()
			return mpop{}, false
		}
		j++
		if p.count, ok = kv.ParseCanonicalInt(args[j]); !ok || p.count < 1 {
			c.wr.error("ERR count should be greater than 0")
			return mpop{}, false
		}
	}
	if p.count == -1 {
		p.count = 1
	}
	return p, true
}

// cmdLMPop serves LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count].
func (c *respConn) cmdLMPop(args [][]byte) {
	if p, ok := c.parseMPop(args, 1, [2]string{"left", "right"}); ok && !c.lmpop(p) {
		c.nullArray()
	}
}

// cmdBLMPop serves BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count].
func (c *respConn) cmdBLMPop(args [][]byte) {
	if p, ok := c.parseBlockingMPop(args, [2]string{"left", "right"}); ok {
		c.block(p.keys, args[1], (*respConn).nullArray, func() bool { return c.lmpop(p) })
	}
}

// parseBlockingMPop reads BLMPOP's or BZMPOP's arguments, in Redis Cluster's order: the keys' slot, then
// the arguments after the timeout; block reads the timeout last.
func (c *respConn) parseBlockingMPop(args [][]byte, ends [2]string) (mpop, bool) {
	if keys := keysAfterCount(2)(args); len(keys) > 0 {
		if _, ok := c.ownKeys(keys); !ok {
			return mpop{}, false
		}
	}
	return c.parseMPop(args, 2, ends)
}

// lmpop pops from the first non-empty list of p's keys and answers [key, [item ...]]. It reports false,
// having written nothing, when every key is missing.
func (c *respConn) lmpop(p mpop) bool {
	op := kv.OpRPop
	if p.first {
		op = kv.OpLPop
	}
	key, found := c.firstHolding(p.keys, "list")
	if !found || key == nil {
		return found
	}
	reply, ok := c.keyOp(op, &kv.Request{Key: string(key), Args: [][]byte{strconv.AppendInt(nil, p.count, 10)}})
	if ok {
		c.wr.array(2)
		c.wr.bulk(key)
		c.values(reply.Values)
	}
	return true
}

// firstHolding returns the first of keys that holds a value, which must be of type want. It reports
// false when none does; when one holds another type, or a refusal, it answers and returns a nil key.
func (c *respConn) firstHolding(keys [][]byte, want string) ([]byte, bool) {
	for _, key := range keys {
		typ, ok := c.keyType(key)
		switch {
		case !ok:
			return nil, true
		case typ == "none" || typ != want && c.exec.retry:
			continue
		case typ != want:
			c.wr.error(wrongTypeMessage)
			return nil, true
		}
		return key, true
	}
	return nil, false
}

// cmdZMPop serves ZMPOP numkeys key [key ...] MIN|MAX [COUNT count].
func (c *respConn) cmdZMPop(args [][]byte) {
	if p, ok := c.parseMPop(args, 1, [2]string{"min", "max"}); ok && !c.zmpop(p) {
		c.nullArray()
	}
}

// cmdBZMPop serves BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count].
func (c *respConn) cmdBZMPop(args [][]byte) {
	if p, ok := c.parseBlockingMPop(args, [2]string{"min", "max"}); ok {
		c.block(p.keys, args[1], (*respConn).nullArray, func() bool { return c.zmpop(p) })
	}
}

// zmpop pops from the first non-empty sorted set of p's keys and answers [key, [[member, score] ...]].
// It reports false, having written nothing, when every key is missing.
func (c *respConn) zmpop(p mpop) bool {
	key, found := c.firstHolding(p.keys, "zset")
	if !found || key == nil {
		return found
	}
	pairs, ok := c.zpop(key, p.count, !p.first)
	if ok {
		c.wr.array(2)
		c.wr.bulk(key)
		c.wr.array(len(pairs) / 2)
		for i := 0; i+1 < len(pairs); i += 2 {
			c.wr.array(2)
			c.wr.bulk(pairs[i])
			c.score(pairs[i+1])
		}
	}
	return true
}

// cmdBZPop serves BZPOPMIN and BZPOPMAX key [key ...] timeout: [key, member, score] of the lowest
// (highest) score of the first non-empty sorted set.
func (c *respConn) cmdBZPop(args [][]byte) {
	highest := isSubcommand(args[0], "bzpopmax")
	keys := args[1 : len(args)-1]
	c.block(keys, args[len(args)-1], (*respConn).nullArray, func() bool {
		key, found := c.firstHolding(keys, "zset")
		if !found || key == nil {
			return found
		}
		if pairs, ok := c.zpop(key, 1, highest); ok && len(pairs) == 2 {
			c.wr.array(3)
			c.wr.bulk(key)
			c.wr.bulk(pairs[0])
			c.score(pairs[1])
		}
		return true
	})
}

// zpop removes the count members of lowest (highest) score of the sorted set at key and returns them
// with their scores, member and score pairs; a refusal is answered and reported false.
func (c *respConn) zpop(key []byte, count int64, highest bool) ([][]byte, bool) {
	c.muteOps()
	rangeArgs := [][]byte{[]byte("0"), strconv.AppendInt(nil, count-1, 10), []byte("WITHSCORES")}
	if highest {
		rangeArgs = append(rangeArgs, []byte("REV"))
	}
	reply, ok := c.keyOp(kv.OpZRange, &kv.Request{Key: string(key), Args: rangeArgs})
	if !ok || len(reply.Values) == 0 {
		return nil, ok
	}
	members := make([][]byte, 0, len(reply.Values)/2)
	for i := 0; i < len(reply.Values); i += 2 {
		members = append(members, reply.Values[i])
	}
	removed, ok := c.keyOp(kv.OpZRem, &kv.Request{Key: string(key), Args: kv.CloneValues(members)})
	if ok {
		event := "zpopmin"
		if highest {
			event = "zpopmax"
		}
		c.popped(notifyZSet, event, key, removed)
	}
	return reply.Values, ok
}
