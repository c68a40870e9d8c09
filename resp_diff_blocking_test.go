package zaris

import "testing"

// TestRESPMatchesRedisBlockingPops compares BLPOP, BRPOP, BLMOVE and BRPOPLPUSH with a real redis-server
// where they answer without waiting, or after a short timeout: elements, types, timeouts as Redis reads
// them, the order of its checks, inside MULTI, in RESP2 and RESP3. TestRESPBlockedClientsSharePushes
// counts what blocked clients receive.
func TestRESPMatchesRedisBlockingPops(t *testing.T) {
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
