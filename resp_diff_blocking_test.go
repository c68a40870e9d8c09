package zaris

import "testing"

// TestRESPMatchesRedisBlockingPops compares BLPOP, BRPOP, BLMOVE and BRPOPLPUSH with a real redis-server
// where they answer without waiting, or after a short timeout: elements, types, timeouts as Redis reads
// them, the order of its checks, inside MULTI, in RESP2 and RESP3. TestRESPBlockedClientsSharePushes
// counts what blocked clients receive.
func TestRESPMatchesRedisBlockingPops(t *testing.T) {
	t.Parallel()
	l, l2, s, none, dst := diffTag+"l", diffTag+"l2", diffTag+"s", diffTag+"none", diffTag+"dst"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	seq := []diffCmd{
		cmd("BLPOP", none, "0.01"), cmd("BRPOP", none, l, "0.001"), cmd("RPUSH", l, "a", "b", "c"),
		cmd("BLPOP", none, l, "0"), cmd("BRPOP", l, "0"), cmd("BLPOP", l, none, "1.5"), cmd("BLPOP", l, "0.01"),
		cmd("SET", s, "v"), cmd("BLPOP", s, "0"), cmd("BLPOP", l, s, "0.01"), cmd("RPUSH", l, "x", "y", "z"),
		cmd("BLPOP", l, s, "0"), cmd("BLPOP", l, "-1"), cmd("BLPOP", l, "-0.0001"), cmd("BLPOP", l, "abc"),
		cmd("BLPOP", l, ""), cmd("BLPOP", l, "inf"), cmd("BLPOP", l, "-inf"), cmd("BLPOP", l, "nan"),
		cmd("BLPOP", l, "1e30"), cmd("BLPOP", l, "9223372036854775807"), cmd("BLPOP", l, "0x10"), cmd("BLPOP", l, " 1"),
		cmd("BLPOP", l, "1e-300"), cmd("BLPOP", s, "abc"), cmd("BLPOP", l), cmd("BLPOP"),
		cmd("RPUSH", l2, "p", "q", "r"), cmd("BLMOVE", none, dst, "LEFT", "RIGHT", "0.01"), cmd("BLMOVE", l2, dst, "LEFT", "RIGHT", "0"),
		cmd("BLMOVE", l2, dst, "right", "left", "0"), cmd("LRANGE", dst, "0", "-1"), cmd("BLMOVE", l2, s, "LEFT", "LEFT", "0"),
		cmd("BLMOVE", s, dst, "LEFT", "LEFT", "0"), cmd("BLMOVE", l2, dst, "UP", "LEFT", "0"), cmd("BLMOVE", l2, dst, "LEFT", "LEFT", "x"),
		cmd("BLMOVE", l2, dst, "UP", "LEFT", "x"), cmd("BLMOVE", none, dst, "LEFT", "LEFT", "-1"), cmd("BLMOVE", l2, l2, "LEFT", "RIGHT", "0"),
		cmd("LRANGE", l2, "0", "-1"), cmd("BRPOPLPUSH", l2, dst, "0"), cmd("BRPOPLPUSH", none, dst, "0.01"), cmd("RPUSH", l2, "w"), cmd("BRPOPLPUSH", l2, s, "0"),
		cmd("BRPOPLPUSH", l2, dst, "-5"), cmd("LRANGE", dst, "0", "-1"), cmd("BLMOVE", l2, dst, "LEFT", "RIGHT"),
		cmd("MULTI"), cmd("BLPOP", none, "0"), cmd("BRPOPLPUSH", none, dst, "0"), cmd("BLPOP", dst, "0"), cmd("EXEC"),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "blocking pops", cmds: seq},
		{name: "blocking pops resp3", cmds: append([]diffCmd{hello}, seq...)},
	})
}

// TestRESPMatchesRedisMultiPops compares LMPOP, ZMPOP, BLMPOP, BZMPOP, BZPOPMIN and BZPOPMAX with a real
// redis-server: what they pop and answer, their checks in Redis's order, timeouts, inside MULTI, in RESP2
// and RESP3.
func TestRESPMatchesRedisMultiPops(t *testing.T) {
	t.Parallel()
	l, l2, z, z2, s, none := diffTag+"l", diffTag+"l2", diffTag+"z", diffTag+"z2", diffTag+"s", diffTag+"none"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	seq := []diffCmd{
		cmd("LMPOP", "1", none, "LEFT"), cmd("RPUSH", l, "a", "b", "c", "d"), cmd("SET", s, "v"),
		cmd("LMPOP", "2", none, l, "LEFT"), cmd("LMPOP", "2", none, l, "right", "COUNT", "2"), cmd("LMPOP", "1", l, "left", "count", "9"),
		cmd("LMPOP", "2", s, l, "LEFT"), cmd("RPUSH", l2, "x"), cmd("LMPOP", "2", l2, s, "LEFT"), cmd("LMPOP", "1", none, "LEFT"),
		cmd("LMPOP", "0", l, "LEFT"), cmd("LMPOP", "x", l, "LEFT"), cmd("LMPOP", "-1", l, "LEFT"), cmd("LMPOP", "1", l, "UP"),
		cmd("LMPOP", "1", l, "LEFT", "COUNT", "0"), cmd("LMPOP", "1", l, "LEFT", "COUNT", "-2"), cmd("LMPOP", "1", l, "LEFT", "COUNT", "x"),
		cmd("LMPOP", "1", l, "LEFT", "COUNT"), cmd("LMPOP", "1", l, "LEFT", "FOO", "1"), cmd("LMPOP", "1", l, "LEFT", "COUNT", "1", "COUNT", "2"),
		cmd("LMPOP", "5", l, l2, "LEFT"), cmd("LMPOP", "99999999999", l, "LEFT"), cmd("LMPOP", "1", l), cmd("LMPOP", "2", l, l2),
		cmd("ZADD", z, "1", "a", "2", "b", "3", "c", "-inf", "m"), cmd("ZMPOP", "1", z, "MIN"), cmd("ZMPOP", "2", none, z, "max", "COUNT", "2"),
		cmd("ZMPOP", "1", z, "MIN", "COUNT", "10"), cmd("ZMPOP", "1", z, "MIN"), cmd("ZMPOP", "2", s, z, "MIN"), cmd("ZMPOP", "1", z, "MINX"),
		cmd("ZMPOP", "0", z, "MIN"), cmd("ZMPOP", "1", z, "MIN", "COUNT", "0"),
		cmd("ZADD", z2, "5", "p", "1.5", "q", "inf", "r"), cmd("BZPOPMIN", none, z2, "0"), cmd("BZPOPMAX", z2, "0"), cmd("BZPOPMIN", none, "0.01"),
		cmd("BZPOPMIN", s, "0"), cmd("BZPOPMIN", z2, "-1"), cmd("BZPOPMAX", z2, "x"), cmd("BZPOPMIN", z2, "0"), cmd("BZPOPMAX", z2, "0.001"),
		cmd("RPUSH", l, "e", "f"), cmd("BLMPOP", "0", "1", l, "LEFT"), cmd("BLMPOP", "0.01", "1", none, "LEFT"),
		cmd("BLMPOP", "0", "2", none, l, "RIGHT", "COUNT", "5"), cmd("BLMPOP", "x", "1", l, "LEFT"), cmd("BLMPOP", "-1", "1", l, "LEFT"),
		cmd("BLMPOP", "0", "0", l, "LEFT"), cmd("BLMPOP", "0", "1", l, "UP"), cmd("BLMPOP", "x", "0", l, "UP"), cmd("BLMPOP", "0", "1", s, "LEFT"),
		cmd("BLMPOP", "0", "9", l, "LEFT"), cmd("BLMPOP", "0", "1", l, "LEFT", "COUNT", "0"),
		cmd("ZADD", z, "7", "w"), cmd("BZMPOP", "0", "1", z, "MAX"), cmd("BZMPOP", "0.01", "1", z, "MIN"), cmd("BZMPOP", "x", "1", z, "MIN"),
		cmd("BZMPOP", "0", "1", z, "NOPE"), cmd("BZMPOP", "0", "1", s, "MIN"),
		cmd("MULTI"), cmd("LMPOP", "1", none, "LEFT"), cmd("BLMPOP", "0", "1", none, "LEFT"), cmd("BZMPOP", "0", "1", none, "MIN"),
		cmd("BZPOPMIN", none, "0"), cmd("EXEC"),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "multi pops", cmds: seq},
		{name: "multi pops resp3", cmds: append([]diffCmd{hello}, seq...)},
	})
}
