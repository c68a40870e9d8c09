package zaris

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRESPMatchesRedisCollections compares the hash, set, list and sorted set commands, their errors and
// WRONGTYPE, with a real redis-server.
func TestRESPMatchesRedisCollections(t *testing.T) {
	newRESPDiff(t, nil).run(t, collectionSeqs())
}

// unordered returns the command with its array reply compared as a multiset of groups of stride elements:
// the order of a set's members or a hash's fields is not part of the reply.
func (d diffCmd) unordered(stride int) diffCmd {
	d.norm = func(reply string) string {
		elems, ok := bulkArray(reply)
		if !ok || len(elems)%stride != 0 {
			return reply
		}
		kind := reply[0]
		groups := make([]string, 0, len(elems)/stride)
		for i := 0; i < len(elems); i += stride {
			groups = append(groups, strings.Join(elems[i:i+stride], "\x00"))
		}
		slices.Sort(groups)
		return fmt.Sprintf("unordered %c %q", kind, groups)
	}
	return d
}

// bulkArray parses a raw reply of bulk strings: an array, a RESP3 set, or a RESP3 map of n pairs.
func bulkArray(reply string) ([]string, bool) {
	header, rest, ok := strings.Cut(reply, "\r\n")
	if !ok || header == "" || !strings.ContainsRune("*~%", rune(header[0])) {
		return nil, false
	}
	n, err := strconv.Atoi(header[1:])
	if err != nil || n < 0 {
		return nil, false
	}
	if header[0] == '%' {
		n *= 2
	}
	elems := make([]string, 0, n)
	for range n {
		var size string
		if size, rest, ok = strings.Cut(rest, "\r\n"); !ok || !strings.HasPrefix(size, "$") {
			return nil, false
		}
		length, err := strconv.Atoi(size[1:])
		if err != nil || length < 0 || len(rest) < length+2 {
			return nil, false
		}
		elems, rest = append(elems, rest[:length]), rest[length+2:]
	}
	return elems, rest == ""
}

func collectionSeqs() []diffSeq {
	const h, s, l, z, str = diffTag + "h", diffTag + "s", diffTag + "l", diffTag + "z", diffTag + "str"
	return []diffSeq{
		{name: "hash", cmds: []diffCmd{
			cmd("HSET", h, "a", "1", "b", "2", "a", "3"), cmd("HSET", h, "b", "20", "c", ""), cmd("HGET", h, "a"),
			cmd("HGET", h, "c"), cmd("HGET", h, "zz"), cmd("HGET", diffTag+"none", "a"), cmd("HMGET", h, "a", "zz", "c"),
			cmd("HMGET", diffTag+"none", "a", "b"), cmd("HLEN", h), cmd("HLEN", diffTag+"none"), cmd("HEXISTS", h, "b"),
			cmd("HEXISTS", h, "zz"), cmd("HINCRBY", h, "a", "5"), cmd("HINCRBY", h, "n", "-2"), cmd("HINCRBY", h, "b", "x"),
			cmd("HINCRBY", h, "c", "1"), cmd("HINCRBY", h, "a", "9223372036854775807"), cmd("HGETALL", h).unordered(2),
			cmd("HGETALL", diffTag+"none"), cmd("HDEL", h, "a", "zz", "a"), cmd("HDEL", h, "zz"), cmd("TYPE", h),
			cmd("HDEL", h, "b", "c", "n"), cmd("EXISTS", h), cmd("TYPE", h),
		}},
		{name: "hash errors", cmds: []diffCmd{
			cmd("HSET", h), cmd("HSET", h, "a"), cmd("HSET", h, "a", "1", "b"), cmd("HGET", h), cmd("HGET", h, "a", "b"),
			cmd("HMGET", h), cmd("HDEL", h), cmd("HGETALL"), cmd("HGETALL", h, "x"), cmd("HLEN"), cmd("HINCRBY", h, "a"),
			cmd("HINCRBY", h, "a", "1.5"), cmd("HEXISTS", h), cmd("EXISTS", h),
		}},
		{name: "set", cmds: []diffCmd{
			cmd("SADD", s, "x", "y", "x"), cmd("SADD", s, "y", "z"), cmd("SADD", s, "z"), cmd("SISMEMBER", s, "y"),
			cmd("SISMEMBER", s, "w"), cmd("SISMEMBER", diffTag+"none", "w"), cmd("SCARD", s), cmd("SCARD", diffTag+"none"),
			cmd("SMEMBERS", s).unordered(1), cmd("SMEMBERS", diffTag+"none"), cmd("SREM", s, "x", "w", "x"), cmd("TYPE", s),
			cmd("SREM", s, "y", "z"), cmd("EXISTS", s), cmd("SADD", s), cmd("SREM", s), cmd("SISMEMBER", s),
		}},
		{name: "list", cmds: []diffCmd{
			cmd("RPUSH", l, "a", "b", "c"), cmd("LPUSH", l, "z", "y"), cmd("LRANGE", l, "0", "-1"), cmd("LRANGE", l, "-2", "100"),
			cmd("LRANGE", l, "3", "1"), cmd("LRANGE", l, "-100", "1"), cmd("LRANGE", diffTag+"none", "0", "-1"), cmd("LINDEX", l, "-1"),
			cmd("LINDEX", l, "5"), cmd("LINDEX", l, "-6"), cmd("LLEN", l), cmd("LLEN", diffTag+"none"), cmd("LPOP", l), cmd("RPOP", l, "2"),
			cmd("LPOP", l, "0"), cmd("RPUSH", l, "d", "e", "f"), cmd("LTRIM", l, "1", "-2"), cmd("LRANGE", l, "0", "-1"),
			cmd("LTRIM", l, "0", "-1"), cmd("LPOP", l, "10"), cmd("EXISTS", l), cmd("LPOP", l), cmd("LPOP", l, "2"), cmd("RPOP", l),
			cmd("RPUSH", l, "a", "b"), cmd("LTRIM", l, "5", "10"), cmd("EXISTS", l), cmd("LTRIM", diffTag+"none", "0", "1"),
			cmd("RPUSH", l, "a", "b", "c", "d"), cmd("LTRIM", l, "-2", "-1"), cmd("LRANGE", l, "0", "-1"), cmd("TYPE", l),
		}},
		{name: "list errors", cmds: []diffCmd{
			cmd("LPUSH", l), cmd("RPUSH", l), cmd("RPUSH", l, "a"), cmd("LPOP", l, "-1"), cmd("LPOP", l, "x"), cmd("LPOP", l, "1", "2"),
			cmd("LRANGE", l, "a", "1"), cmd("LRANGE", l, "0"), cmd("LINDEX", l, "x"), cmd("LINDEX", l), cmd("LTRIM", l, "0", "x"),
			cmd("LLEN", l, "x"), cmd("LRANGE", l, "0", "-1"),
		}},
		{name: "sorted set", cmds: []diffCmd{
			cmd("ZADD", z, "1", "a", "2", "b", "3", "c"), cmd("ZADD", z, "CH", "1", "a", "5", "b", "0.5", "d"),
			cmd("ZADD", z, "NX", "9", "a", "9", "e"), cmd("ZADD", z, "XX", "4", "a", "4", "f"), cmd("ZADD", z, "GT", "CH", "1", "a", "10", "c"),
			cmd("ZADD", z, "LT", "7", "a", "1", "a"), cmd("ZADD", z, "INCR", "2", "a"), cmd("ZADD", z, "NX", "INCR", "2", "a"),
			cmd("ZADD", z, "XX", "INCR", "2", "nope"), cmd("ZADD", z, "1.1", "g", "-inf", "h", "+inf", "i", "1e21", "j"),
			cmd("ZRANGE", z, "0", "-1", "WITHSCORES"), cmd("ZRANGE", z, "0", "1", "REV"), cmd("ZRANGE", z, "-3", "-1"),
			cmd("ZRANGE", z, "(5", "+inf", "BYSCORE", "LIMIT", "1", "2"), cmd("ZRANGE", z, "9", "-inf", "BYSCORE", "REV"),
			cmd("ZRANGE", z, "9", "-inf", "BYSCORE", "REV", "LIMIT", "0", "2", "WITHSCORES"), cmd("ZRANGE", z, "(1", "(9", "BYSCORE"),
			cmd("ZRANGE", z, "5", "1", "BYSCORE"), cmd("ZRANGE", z, "1", "5", "BYSCORE", "LIMIT", "0", "-1"),
			cmd("ZRANGE", diffTag+"none", "0", "-1"), cmd("ZSCORE", z, "a"), cmd("ZSCORE", z, "g"), cmd("ZSCORE", z, "h"),
			cmd("ZSCORE", z, "zz"), cmd("ZRANK", z, "e"), cmd("ZRANK", z, "zz"), cmd("ZRANK", diffTag+"none", "a"),
			cmd("ZINCRBY", z, "1.5", "d"), cmd("ZINCRBY", z, "2", "new"), cmd("ZCARD", z), cmd("ZCARD", diffTag+"none"),
			cmd("ZREM", z, "a", "zz", "a"), cmd("ZRANGE", z, "0", "-1"), cmd("TYPE", z),
			cmd("ZREM", z, "b", "c", "d", "e", "g", "h", "i", "j", "new"), cmd("EXISTS", z),
		}},
		{name: "sorted set errors", cmds: []diffCmd{
			cmd("ZADD", z), cmd("ZADD", z, "1"), cmd("ZADD", z, "1", "a", "2"), cmd("ZADD", z, "x", "a"), cmd("ZADD", z, "nan", "a"),
			cmd("ZADD", z, "NX", "XX", "1", "a"), cmd("ZADD", z, "GT", "LT", "1", "a"), cmd("ZADD", z, "NX", "GT", "1", "a"),
			cmd("ZADD", z, "INCR", "1", "a", "2", "b"), cmd("ZADD", z, "NX"), cmd("ZADD", z, "1", "a"), cmd("ZADD", z, "INCR", "-inf", "a"),
			cmd("ZADD", z, "INCR", "+inf", "a"), cmd("ZRANGE", z, "0"), cmd("ZRANGE", z, "a", "1"), cmd("ZRANGE", z, "x", "1", "BYSCORE"),
			cmd("ZRANGE", z, "0", "1", "LIMIT", "0", "1"), cmd("ZRANGE", z, "0", "1", "BOGUS"), cmd("ZRANGE", z, "0", "1", "BYSCORE", "LIMIT", "x", "1"),
			cmd("ZINCRBY", z, "x", "a"), cmd("ZINCRBY", z, "1"), cmd("ZSCORE", z), cmd("ZRANK", z), cmd("ZREM", z), cmd("ZCARD", z),
		}},
		{name: "resp3", cmds: []diffCmd{
			{args: []string{"HELLO", "3"}, norm: func(string) string { return "the server's description" }},
			cmd("HSET", h, "a", "1", "b", "2"), cmd("HGETALL", h).unordered(2), cmd("HGET", h, "zz"), cmd("HMGET", h, "a", "zz"),
			cmd("SADD", s, "x", "y"), cmd("SMEMBERS", s).unordered(1), cmd("SISMEMBER", s, "x"),
			cmd("RPUSH", l, "a"), cmd("LPOP", l, "2"), cmd("LPOP", l, "2"), cmd("LPOP", l), cmd("LINDEX", l, "0"),
			cmd("ZADD", z, "1.5", "a", "2", "b", "inf", "c"), cmd("ZSCORE", z, "a"), cmd("ZSCORE", z, "c"), cmd("ZSCORE", z, "zz"),
			cmd("ZINCRBY", z, "0.1", "a"), cmd("ZADD", z, "INCR", "1", "b"), cmd("ZADD", z, "NX", "INCR", "1", "b"),
			cmd("ZRANGE", z, "0", "-1", "WITHSCORES"), cmd("ZRANGE", z, "0", "-1"), cmd("ZRANK", z, "zz"), cmd("TYPE", z),
		}},
		{name: "wrong type", cmds: []diffCmd{
			cmd("SET", str, "v"), cmd("HSET", str, "f", "v"), cmd("HGET", str, "f"), cmd("HGETALL", str), cmd("SADD", str, "m"),
			cmd("SMEMBERS", str), cmd("LPUSH", str, "i"), cmd("LRANGE", str, "0", "-1"), cmd("LPOP", str), cmd("ZADD", str, "1", "m"),
			cmd("ZRANGE", str, "0", "-1"), cmd("ZSCORE", str, "m"), cmd("TYPE", str),
			cmd("HSET", h, "f", "v"), cmd("GET", h), cmd("INCR", h), cmd("APPEND", h, "x"), cmd("GETDEL", h), cmd("SET", h, "v", "GET"),
			cmd("SADD", h, "m"), cmd("RPUSH", h, "i"), cmd("ZADD", h, "1", "m"), cmd("ZINCRBY", h, "1", "m"), cmd("LLEN", h),
			cmd("SCARD", h), cmd("ZCARD", h), cmd("HLEN", h), cmd("TYPE", h),
			cmd("SADD", s, "m"), cmd("HGET", s, "f"), cmd("LINDEX", s, "0"), cmd("TYPE", s),
			cmd("RPUSH", l, "i"), cmd("SISMEMBER", l, "i"), cmd("ZRANK", l, "i"), cmd("TYPE", l),
			cmd("ZADD", z, "1", "m"), cmd("HEXISTS", z, "m"), cmd("LTRIM", z, "0", "1"), cmd("TYPE", z),
			cmd("EXPIRE", h, "100"), cmd("TTL", h).within(95, 100), cmd("PERSIST", h), cmd("TTL", h),
			cmd("EXPIRE", z, "100"), cmd("TTL", z).within(95, 100), cmd("ZADD", z, "2", "n"), cmd("TTL", z).within(95, 100),
			cmd("MGET", h, str, s, diffTag+"none"), cmd("MSET", s, "x", l, "y"), cmd("MGET", s, l, z), cmd("TYPE", l),
			cmd("GETRANGE", z, "0", "1"), cmd("STRLEN", z), cmd("SETRANGE", z, "0", "x"), cmd("INCRBYFLOAT", z, "1"), cmd("GETEX", z),
			cmd("SET", h, "now a string"), cmd("TYPE", h), cmd("GET", h), cmd("DEL", s, l, z), cmd("EXISTS", s, l, z),
		}},
	}
}

// TestRESPMatchesRedisZSetCombinations compares ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD
// with a real redis-server: sets among the inputs, weights (infinite and negative ones), each aggregate,
// sums that meet inf and -inf, a destination that is an input or of another type, and the errors in
// Redis's order, in RESP2 and RESP3.
func TestRESPMatchesRedisZSetCombinations(t *testing.T) {
	a, b, s, d, str, none := diffTag+"a", diffTag+"b", diffTag+"s", diffTag+"d", diffTag+"str", diffTag+"none"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	seq := []diffCmd{
		cmd("ZADD", a, "1", "x", "2", "y", "3", "z", "inf", "i", "-2.5", "n"), cmd("ZADD", b, "10", "y", "0.1", "z", "-inf", "i", "7", "w"),
		cmd("SADD", s, "x", "w", "q"), cmd("SET", str, "v"),
		cmd("ZUNION", "2", a, b), cmd("ZUNION", "2", a, b, "WITHSCORES"), cmd("ZUNION", "3", a, b, s, "WITHSCORES"),
		cmd("ZINTER", "2", a, b, "WITHSCORES"), cmd("ZINTER", "3", a, b, s), cmd("ZINTER", "2", a, s, "WITHSCORES"),
		cmd("ZDIFF", "2", a, b, "WITHSCORES"), cmd("ZDIFF", "3", a, b, s), cmd("ZDIFF", "1", none), cmd("ZDIFF", "2", none, a),
		cmd("ZUNION", "2", a, b, "WEIGHTS", "2", "-1", "WITHSCORES"), cmd("ZUNION", "2", a, b, "WEIGHTS", "0", "inf", "WITHSCORES"),
		cmd("ZUNION", "2", a, b, "AGGREGATE", "MIN", "WITHSCORES"), cmd("ZUNION", "2", a, b, "aggregate", "max", "withscores"),
		cmd("ZINTER", "2", a, b, "WEIGHTS", "1e308", "10", "AGGREGATE", "SUM", "WITHSCORES"),
		cmd("ZUNION", "2", a, b, "WEIGHTS", "0x10", "1.5", "WITHSCORES"), cmd("ZUNION", "1", a, "WITHSCORES", "WITHSCORES"),
		cmd("ZUNIONSTORE", d, "2", a, b), cmd("ZRANGE", d, "0", "-1", "WITHSCORES"), cmd("ZINTERSTORE", d, "2", a, b, "WEIGHTS", "3", "3"),
		cmd("ZRANGE", d, "0", "-1", "WITHSCORES"), cmd("ZDIFFSTORE", d, "2", a, b), cmd("ZRANGE", d, "0", "-1", "WITHSCORES"),
		cmd("ZINTERSTORE", d, "2", a, none), cmd("EXISTS", d), cmd("ZUNIONSTORE", str, "1", a), cmd("TYPE", str),
		cmd("ZUNIONSTORE", a, "2", a, b, "AGGREGATE", "MAX"), cmd("ZRANGE", a, "0", "-1", "WITHSCORES"), cmd("ZDIFFSTORE", d, "1", s),
		cmd("ZRANGE", d, "0", "-1", "WITHSCORES"), cmd("SET", str, "v"),
		cmd("ZINTERCARD", "2", a, b), cmd("ZINTERCARD", "2", a, b, "LIMIT", "1"), cmd("ZINTERCARD", "2", a, b, "LIMIT", "0"),
		cmd("ZINTERCARD", "2", a, s), cmd("ZINTERCARD", "1", a, "LIMIT", "1", "LIMIT", "100"),
		cmd("ZUNION", "2", a, str), cmd("ZINTER", "2", str, a, "WEIGHTS", "x"), cmd("ZUNIONSTORE", d, "2", str, a), cmd("ZINTERCARD", "1", str),
		cmd("ZUNION", "0", a), cmd("ZUNION", "x", a), cmd("ZUNION", "-1", a), cmd("ZUNION", "3", a, b), cmd("ZUNION", "2", a, b, "WEIGHTS", "1"),
		cmd("ZUNION", "2", a, b, "WEIGHTS", "1", "x"), cmd("ZUNION", "2", a, b, "WEIGHTS", "1", "nan"), cmd("ZUNION", "2", a, b, "WEIGHTS", "1", " 1"),
		cmd("ZUNION", "2", a, b, "AGGREGATE", "AVG"), cmd("ZUNION", "2", a, b, "AGGREGATE"), cmd("ZDIFF", "2", a, b, "WEIGHTS", "1", "1"),
		cmd("ZDIFF", "2", a, b, "AGGREGATE", "SUM"), cmd("ZUNIONSTORE", d, "2", a, b, "WITHSCORES"), cmd("ZUNIONSTORE", d, "0", a),
		cmd("ZINTERCARD", "0", a), cmd("ZINTERCARD", "x", a), cmd("ZINTERCARD", "3", a), cmd("ZINTERCARD", "1", a, "LIMIT", "-1"),
		cmd("ZINTERCARD", "1", a, "LIMIT", "x"), cmd("ZINTERCARD", "1", a, "LIMIT"), cmd("ZINTERCARD", "1", a, "FOO", "1"),
		cmd("ZUNION", "1"), cmd("ZUNIONSTORE", d, "1"),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "zset combinations", cmds: seq},
		{name: "zset combinations resp3", cmds: append([]diffCmd{hello}, seq...)},
	})
}

// TestRESPMatchesRedisZRangeStore compares ZRANGESTORE with a real redis-server: by rank, by score, reversed,
// limited, empty results, a destination of another type or the source itself, and the errors.
func TestRESPMatchesRedisZRangeStore(t *testing.T) {
	src, dst, str, none := diffTag+"src", diffTag+"dst", diffTag+"str", diffTag+"none"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	seq := []diffCmd{
		cmd("ZADD", src, "1", "a", "2", "b", "3", "c", "-inf", "m", "inf", "p", "2", "bb"), cmd("SET", str, "v"),
		cmd("ZRANGESTORE", dst, src, "0", "-1"), cmd("ZRANGE", dst, "0", "-1", "WITHSCORES"),
		cmd("ZRANGESTORE", dst, src, "1", "2"), cmd("ZRANGE", dst, "0", "-1", "WITHSCORES"),
		cmd("ZRANGESTORE", dst, src, "(1", "3", "BYSCORE"), cmd("ZRANGE", dst, "0", "-1", "WITHSCORES"),
		cmd("ZRANGESTORE", dst, src, "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2"), cmd("ZRANGE", dst, "0", "-1", "WITHSCORES"),
		cmd("ZRANGESTORE", dst, src, "0", "0", "REV"), cmd("ZRANGE", dst, "0", "-1", "WITHSCORES"),
		cmd("ZRANGESTORE", dst, src, "5", "10"), cmd("EXISTS", dst), cmd("ZRANGESTORE", dst, none, "0", "-1"), cmd("EXISTS", dst),
		cmd("ZRANGESTORE", str, src, "0", "1"), cmd("TYPE", str), cmd("ZRANGESTORE", src, src, "0", "1"), cmd("ZRANGE", src, "0", "-1", "WITHSCORES"),
		cmd("SET", str, "v"), cmd("ZRANGESTORE", dst, str, "0", "1"), cmd("ZRANGESTORE", dst, src, "0", "1", "WITHSCORES"),
		cmd("ZRANGESTORE", dst, src, "x", "1"), cmd("ZRANGESTORE", dst, src, "0", "1", "LIMIT", "0", "1"),
		cmd("ZRANGESTORE", dst, src, "0", "1", "BYSCORE", "LIMIT", "x", "1"), cmd("ZRANGESTORE", dst, src, "0", "1", "FOO"),
		cmd("ZRANGESTORE", dst, src, "0"), cmd("ZRANGESTORE", dst, none, "0", "1", "WITHSCORES"),
		cmd("ZRANGESTORE", dst, src, "(1", "(1.5", "BYSCORE", "LIMIT", "REV"), cmd("ZRANGESTORE", dst, src, "100", "-1", "LIMIT", "REV"), cmd("ZRANGESTORE", src, src, "-5", "-5", "LIMIT", "+1", "-1", "WITHSCORES"),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "zrangestore", cmds: seq},
		{name: "zrangestore resp3", cmds: append([]diffCmd{hello}, seq...)},
	})
}

// TestRESPMatchesRedisLexRanges compares ZRANGE ... BYLEX, ZRANGEBYLEX, ZREVRANGEBYLEX, ZLEXCOUNT and
// ZRANGESTORE ... BYLEX with a real redis-server on members of one score, with every kind of bound, limits,
// empty and reversed ranges, and the errors in Redis's order, in RESP2 and RESP3.
func TestRESPMatchesRedisLexRanges(t *testing.T) {
	z, str, none, dst := diffTag+"z", diffTag+"str", diffTag+"none", diffTag+"dst"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	seq := []diffCmd{
		cmd("ZADD", z, "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "ab", "0", "", "0", "\xff", "0", "B"), cmd("SET", str, "v"),
		cmd("ZRANGE", z, "-", "+", "BYLEX"), cmd("ZRANGE", z, "[b", "[d", "BYLEX"), cmd("ZRANGE", z, "(a", "(d", "BYLEX"),
		cmd("ZRANGE", z, "[a", "(b", "BYLEX"), cmd("ZRANGE", z, "(a", "(a", "BYLEX"), cmd("ZRANGE", z, "[d", "[b", "BYLEX"),
		cmd("ZRANGE", z, "+", "-", "BYLEX"), cmd("ZRANGE", z, "-", "-", "BYLEX"), cmd("ZRANGE", z, "+", "+", "BYLEX"),
		cmd("ZRANGE", z, "[", "(", "BYLEX"), cmd("ZRANGE", z, "[", "+", "BYLEX"), cmd("ZRANGE", z, "[\xff", "+", "BYLEX"),
		cmd("ZRANGE", z, "+", "-", "BYLEX", "REV"), cmd("ZRANGE", z, "[d", "(a", "BYLEX", "REV"), cmd("ZRANGE", z, "-", "+", "BYLEX", "LIMIT", "1", "3"),
		cmd("ZRANGE", z, "+", "-", "BYLEX", "REV", "LIMIT", "2", "2"), cmd("ZRANGE", z, "-", "+", "BYLEX", "LIMIT", "0", "-1"),
		cmd("ZRANGE", z, "-", "+", "BYLEX", "LIMIT", "-1", "2"), cmd("ZRANGE", z, "-", "+", "BYLEX", "LIMIT", "20", "2"),
		cmd("ZRANGEBYLEX", z, "-", "+"), cmd("ZRANGEBYLEX", z, "[b", "+", "LIMIT", "0", "2"), cmd("ZREVRANGEBYLEX", z, "+", "-"),
		cmd("ZREVRANGEBYLEX", z, "[c", "(a", "LIMIT", "1", "1"), cmd("ZLEXCOUNT", z, "-", "+"), cmd("ZLEXCOUNT", z, "[b", "(d"),
		cmd("ZLEXCOUNT", z, "(e", "+"), cmd("ZLEXCOUNT", none, "-", "+"), cmd("ZRANGE", none, "-", "+", "BYLEX"),
		cmd("ZRANGESTORE", dst, z, "[b", "[d", "BYLEX"), cmd("ZRANGE", dst, "0", "-1", "WITHSCORES"),
		cmd("ZRANGE", z, "a", "+", "BYLEX"), cmd("ZRANGE", z, "-", "b", "BYLEX"), cmd("ZRANGE", z, "", "+", "BYLEX"),
		cmd("ZRANGE", z, "-", "+", "BYLEX", "WITHSCORES"), cmd("ZRANGE", z, "-", "+", "BYLEX", "BYSCORE"), cmd("ZRANGE", z, "0", "1", "BYSCORE", "BYLEX"),
		cmd("ZRANGE", z, "-", "+", "BYLEX", "BYLEX"), cmd("ZRANGE", z, "-", "+", "BYLEX", "LIMIT", "x", "1"),
		cmd("ZRANGEBYLEX", z, "-", "+", "WITHSCORES"), cmd("ZRANGEBYLEX", z, "x", "+"), cmd("ZRANGEBYLEX", z, "-", "+", "LIMIT", "1"),
		cmd("ZRANGEBYLEX", z, "-", "+", "BYLEX"), cmd("ZLEXCOUNT", z, "x", "+"), cmd("ZLEXCOUNT", str, "-", "+"),
		cmd("ZLEXCOUNT", str, "x", "+"), cmd("ZRANGE", str, "-", "+", "BYLEX"), cmd("ZLEXCOUNT", z, "-"),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "lex ranges", cmds: seq},
		{name: "lex ranges resp3", cmds: append([]diffCmd{hello}, seq...)},
	})
}
