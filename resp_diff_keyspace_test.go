package zaris

import (
	"strings"
	"testing"
)

// TestRESPMatchesRedisKeyCopies compares RENAME, RENAMENX, COPY, EXPIRETIME and PEXPIRETIME with a real
// redis-server: every type copied with its expiry, missing keys, the same key twice, COPY's options, in
// RESP2 and RESP3. (COPY to a database other than 0 is refused, as by a Redis cluster: the server compared
// with is not one.)
func TestRESPMatchesRedisKeyCopies(t *testing.T) {
	k, k2, h, l, s, z, none := diffTag+"k", diffTag+"k2", diffTag+"h", diffTag+"l", diffTag+"s", diffTag+"z", diffTag+"none"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	copies := []diffCmd{
		cmd("RENAME", none, k), cmd("RENAMENX", none, k), cmd("RENAME", none, none), cmd("RENAMENX", none, none),
		cmd("SET", k, "v"), cmd("RENAME", k, k), cmd("RENAMENX", k, k), cmd("RENAME", k, k2), cmd("EXISTS", k), cmd("GET", k2),
		cmd("HSET", h, "f", "1", "g", "2"), cmd("RENAME", k2, h), cmd("TYPE", h), cmd("GET", h),
		cmd("RPUSH", l, "a", "b", "a", ""), cmd("RENAMENX", l, h), cmd("RENAMENX", l, k), cmd("LRANGE", k, "0", "-1"), cmd("EXISTS", l),
		cmd("SADD", s, "x", "y"), cmd("RENAME", s, l), cmd("SMEMBERS", l).unordered(1),
		cmd("ZADD", z, "1.5", "a", "-inf", "b", "inf", "c", "0", "d"), cmd("RENAME", z, s), cmd("ZRANGE", s, "0", "-1", "WITHSCORES"),
		cmd("HSET", z, "f", "1", "g", "2"), cmd("RENAME", z, k2), cmd("HGETALL", k2).unordered(2),
		cmd("COPY", none, k), cmd("COPY", k, k), cmd("COPY", k, h), cmd("COPY", k, h, "REPLACE"), cmd("LRANGE", h, "0", "-1"),
		cmd("COPY", s, l, "replace"), cmd("ZRANGE", l, "0", "-1", "WITHSCORES"), cmd("COPY", k2, z), cmd("HGETALL", z).unordered(2),
		cmd("COPY", k, h, "DB", "0"), cmd("COPY", k, h, "DB", "16"), cmd("COPY", k, h, "DB", "-1"),
		cmd("COPY", k, h, "DB", "x"), cmd("COPY", k, h, "DB", "01"), cmd("COPY", k, h, "DB", "99999999999"), cmd("COPY", k, h, "DB"),
		cmd("COPY", k, h, "REPLACE", "REPLACE", "DB", "0", "DB", "0"), cmd("COPY", k, h, "NOPE"),
		cmd("COPY", none, k, "DB", "99"), cmd("COPY", k), cmd("RENAME", k), cmd("RENAME", k, h, l),
		cmd("EXPIRETIME", none), cmd("PEXPIRETIME", none), cmd("EXPIRETIME", k), cmd("PEXPIRETIME", h), cmd("EXPIRETIME"),
		cmd("SET", k, "v", "PXAT", "4102444800123"), cmd("PEXPIRETIME", k), cmd("EXPIRETIME", k), cmd("RENAME", k, k2),
		cmd("PEXPIRETIME", k2), cmd("COPY", k2, k), cmd("PEXPIRETIME", k), cmd("RPUSH", l, "x"), cmd("EXPIREAT", l, "4102444801"),
		cmd("COPY", l, h, "REPLACE"), cmd("EXPIRETIME", h), cmd("PEXPIRETIME", h), cmd("RENAME", h, s), cmd("EXPIRETIME", s),
		cmd("SET", k, "v", "PXAT", "4102444800500"), cmd("EXPIRETIME", k), cmd("PEXPIRETIME", k), cmd("PEXPIREAT", k, "4102444800499"),
		cmd("EXPIRETIME", k), cmd("SET", k, "v", "EX", "100"), cmd("RENAME", k, h), cmd("TTL", h).within(99, 100), cmd("COPY", h, k), cmd("TTL", k).within(99, 100),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "rename copy expiretime", cmds: copies},
		{name: "rename copy expiretime resp3", cmds: append([]diffCmd{hello}, copies...)},
	})
}

// TestRESPMatchesRedisLPosHRandField compares LPOS, with each option and bad ones, and HRANDFIELD on replies
// chance cannot change, with a real redis-server, in RESP2 and RESP3.
func TestRESPMatchesRedisLPosHRandField(t *testing.T) {
	k, l, h, none := diffTag+"k", diffTag+"l", diffTag+"h", diffTag+"none"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	seq := []diffCmd{
		cmd("LPOS", none, "a"), cmd("LPOS", none, "a", "COUNT", "1"), cmd("RPUSH", l, "a", "b", "c", "a", "d", "a", ""),
		cmd("LPOS", l, "a"), cmd("LPOS", l, "a", "COUNT", "0"), cmd("LPOS", l, "a", "RANK", "-1", "COUNT", "2"),
		cmd("LPOS", l, "a", "RANK", "2"), cmd("LPOS", l, "a", "RANK", "-2"), cmd("LPOS", l, "a", "RANK", "4"), cmd("LPOS", l, "x"),
		cmd("LPOS", l, "x", "COUNT", "3"), cmd("LPOS", l, "", "COUNT", "0"), cmd("LPOS", l, "a", "MAXLEN", "3"),
		cmd("LPOS", l, "a", "MAXLEN", "3", "COUNT", "0"), cmd("LPOS", l, "a", "RANK", "-1", "MAXLEN", "1", "COUNT", "0"),
		cmd("LPOS", l, "a", "RANK", "-1", "MAXLEN", "2"), cmd("LPOS", l, "a", "RANK", "2", "MAXLEN", "4"),
		cmd("LPOS", l, "a", "COUNT", "2", "MAXLEN", "100"), cmd("LPOS", l, "a", "rank", "1", "count", "1", "maxlen", "0"),
		cmd("LPOS", l, "a", "RANK", "-9223372036854775808"), cmd("LPOS", l, "a", "RANK", "-9223372036854775808", "COUNT", "2"),
		cmd("LPOS", l, "a", "RANK", "9223372036854775807"), cmd("LPOS", l, "a", "RANK", "0"), cmd("LPOS", l, "a", "RANK", "x"),
		cmd("LPOS", l, "a", "COUNT", "-1"), cmd("LPOS", l, "a", "COUNT", "x"), cmd("LPOS", l, "a", "MAXLEN", "-1"),
		cmd("LPOS", l, "a", "MAXLEN", "x"), cmd("LPOS", l, "a", "RANK"), cmd("LPOS", l, "a", "FOO"), cmd("LPOS", l),
		cmd("SET", k, "v"), cmd("LPOS", k, "a"), cmd("LPOS", k, "a", "RANK", "0"), cmd("LPOS", k, "a", "COUNT", "1"),
		cmd("HRANDFIELD", none), cmd("HRANDFIELD", none, "2"), cmd("HRANDFIELD", none, "0", "WITHVALUES"), cmd("HRANDFIELD", none, "x"),
		cmd("HRANDFIELD", k), cmd("HRANDFIELD", k, "1"), cmd("HRANDFIELD", k, "0"), cmd("HSET", h, "f", "1"),
		cmd("HRANDFIELD", h), cmd("HRANDFIELD", h, "1"), cmd("HRANDFIELD", h, "5", "WITHVALUES"), cmd("HRANDFIELD", h, "-3"),
		cmd("HRANDFIELD", h, "-2", "WITHVALUES"), cmd("HRANDFIELD", h, "0"), cmd("HRANDFIELD", h, "1", "withvalues"),
		cmd("HRANDFIELD", h, "5", "FOO"), cmd("HRANDFIELD", h, "5", "WITHVALUES", "x"), cmd("HRANDFIELD", h, "01"),
		cmd("HRANDFIELD", h, "-9223372036854775808"), cmd("HRANDFIELD", h, "9223372036854775807", "WITHVALUES"),
		cmd("HRANDFIELD", h, "-4611686018427387904", "WITHVALUES"), cmd("HSET", h, "g", "2", "i", "3"),
		cmd("HRANDFIELD", h, "3").unordered(1), cmd("HRANDFIELD", h, "10").unordered(1), cmd("HRANDFIELD", h, "-5").lengthOnly(), cmd("HRANDFIELD", h, "-4", "WITHVALUES").lengthOnly(),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "lpos hrandfield", cmds: seq},
		{name: "lpos hrandfield resp3", cmds: append([]diffCmd{hello}, seq...)},
	})
}

// lengthOnly returns the command with only the header of its reply compared: an array's length, for
// elements chance picks.
func (d diffCmd) lengthOnly() diffCmd {
	d.norm = func(reply string) string {
		header, _, _ := strings.Cut(reply, "\r\n")
		return header
	}
	return d
}

// TestRESPMatchesRedisListEdits compares LSET, LINSERT and LREM with a real redis-server: edits at either
// end and in the middle, of a one-item list, removals emptying the list, the expiry kept, bad arguments
// and their order against the key's type, in RESP2 and RESP3.
func TestRESPMatchesRedisListEdits(t *testing.T) {
	k, l, none := diffTag+"k", diffTag+"l", diffTag+"none"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	all := cmd("LRANGE", l, "0", "-1")
	seq := []diffCmd{
		cmd("LSET", none, "0", "a"), cmd("LSET", none, "x", "a"), cmd("LINSERT", none, "BEFORE", "a", "b"), cmd("LREM", none, "0", "a"),
		cmd("RPUSH", l, "a"), cmd("PEXPIRE", l, "100000"), cmd("LSET", l, "0", "z"), cmd("LSET", l, "-1", "y"), all,
		cmd("PTTL", l).within(99000, 100000), cmd("LSET", l, "1", "q"), cmd("LSET", l, "-2", "q"), cmd("LSET", l, "x", "q"),
		cmd("RPUSH", l, "b", "c", "d", "e", "f"), cmd("LSET", l, "1", "B"), cmd("LSET", l, "-2", "E"), cmd("LSET", l, "3", ""), all,
		cmd("LSET", l, "9223372036854775807", "q"), cmd("LSET", l, "-9223372036854775808", "q"),
		cmd("LINSERT", l, "BEFORE", "y", "h"), cmd("LINSERT", l, "after", "f", "t"), cmd("LINSERT", l, "AFTER", "B", "m"),
		cmd("LINSERT", l, "before", "E", "n"), cmd("LINSERT", l, "BEFORE", "nope", "x"), cmd("LINSERT", l, "MIDDLE", "y", "x"), all,
		cmd("LINSERT", l, "AFTER", "", "empty"), all, cmd("PTTL", l).within(99000, 100000),
		cmd("RPUSH", l, "a", "b", "a", "c", "a"), cmd("LREM", l, "1", "a"), all, cmd("LREM", l, "-1", "a"), all,
		cmd("LREM", l, "0", "nope"), cmd("LREM", l, "x", "a"), cmd("LREM", l, "0", "a"), all, cmd("LREM", l, "-2", "y"),
		cmd("LREM", l, "2", "B"), all, cmd("LREM", l, "-9223372036854775808", "h"), cmd("LREM", l, "9223372036854775807", "t"), all,
		cmd("PTTL", l).within(99000, 100000), cmd("DEL", l), cmd("RPUSH", l, "x", "x", "y", "x"), cmd("LREM", l, "0", "x"), all,
		cmd("LREM", l, "0", "y"), cmd("EXISTS", l), cmd("RPUSH", l, "a", "b"), cmd("EXPIRE", l, "100"), cmd("LREM", l, "1", "a"),
		cmd("TTL", l).within(99, 100), cmd("LINSERT", l, "BEFORE", "b", "a"), cmd("LREM", l, "-1", "b"), cmd("TTL", l).within(99, 100), all,
		cmd("SET", k, "v"), cmd("LSET", k, "0", "a"), cmd("LSET", k, "x", "a"), cmd("LINSERT", k, "BEFORE", "a", "b"),
		cmd("LINSERT", k, "SIDEWAYS", "a", "b"), cmd("LREM", k, "0", "a"), cmd("LREM", k, "x", "a"), cmd("LSET", l, "0"),
		cmd("LINSERT", l, "BEFORE", "a"), cmd("LREM", l, "0"),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "list edits", cmds: seq},
		{name: "list edits resp3", cmds: append([]diffCmd{hello}, seq...)},
	})
}

// TestRESPMatchesRedisSInterCard compares SINTERCARD, whose keys follow their count, with a real
// redis-server: limits, missing keys, wrong types, and counts that do not name the keys right.
func TestRESPMatchesRedisSInterCard(t *testing.T) {
	k, s, s2, none := diffTag+"k", diffTag+"s", diffTag+"s2", diffTag+"none"
	newRESPDiff(t, nil).run(t, []diffSeq{{name: "sintercard", cmds: []diffCmd{
		cmd("SINTERCARD", "1", none), cmd("SADD", s, "a", "b", "c"), cmd("SADD", s2, "b", "c", "d"), cmd("SINTERCARD", "1", s),
		cmd("SINTERCARD", "2", s, s2), cmd("SINTERCARD", "2", s, s2, "LIMIT", "1"), cmd("SINTERCARD", "2", s, s2, "limit", "0"),
		cmd("SINTERCARD", "2", s, s2, "LIMIT", "5"), cmd("SINTERCARD", "2", s, none), cmd("SINTERCARD", "3", s, s2, s),
		cmd("SINTERCARD", "0", s), cmd("SINTERCARD", "-1", s), cmd("SINTERCARD", "x", s), cmd("SINTERCARD", "3", s, s2),
		cmd("SINTERCARD", "1", s, s2), cmd("SINTERCARD", "1", s, "LIMIT"), cmd("SINTERCARD", "1", s, "LIMIT", "-1"),
		cmd("SINTERCARD", "1", s, "LIMIT", "x"), cmd("SINTERCARD", "1", s, "LIMIT", "1", "LIMIT", "2"), cmd("SET", k, "v"),
		cmd("SINTERCARD", "2", s, k), cmd("SINTERCARD", "2", none, k), cmd("SINTERCARD", "1", k, "LIMIT", "x"), cmd("SINTERCARD", "1"),
	}}})
}

// TestRESPRefusesDeadlinesPast2262 checks that a relative expiry whose deadline Zaris cannot keep (past 2262
// in nanoseconds) is refused, never kept as a nearer one: SET PX, GETEX PX, PEXPIRE and EXPIRE, where Redis,
// keeping milliseconds, accepts them (docs/redis-differences.md). The key keeps its value and no expiry.
func TestRESPRefusesDeadlinesPast2262(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 1, nil)
	conn := dialRaw(t, c.node(0).RESPAddr())
	for _, tc := range []struct{ args []string }{
		{[]string{"SET", "k", "v", "PX", "9000000000000"}},
		{[]string{"SET", "k", "v", "EX", "9000000000"}},
		{[]string{"GETEX", "k", "PX", "9000000000000"}},
		{[]string{"PEXPIRE", "k", "9000000000000"}},
		{[]string{"EXPIRE", "k", "9000000000"}},
	} {
		conn.send(respCmd("SET", "k", "v") + respCmd(tc.args...) + respCmd("PTTL", "k") + respCmd("EXPIRETIME", "k"))
		want := []string{"+OK", "-ERR invalid expire time in '" + strings.ToLower(tc.args[0]) + "' command", ":-1", ":-1"}
		for _, w := range want {
			if got := conn.line(); got != w {
				t.Fatalf("%q: reply %q; want %q", tc.args, got, w)
			}
		}
	}
}

// TestRESPMatchesRedisFlush compares FLUSHALL and FLUSHDB with a real redis-server, on the keys of one
// node: every type gone, the options, the errors, in RESP2 and RESP3.
func TestRESPMatchesRedisFlush(t *testing.T) {
	k, l, h, z := diffTag+"k", diffTag+"l", diffTag+"h", diffTag+"z"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	fill := []diffCmd{cmd("SET", k, "v"), cmd("RPUSH", l, "a"), cmd("HSET", h, "f", "v"), cmd("ZADD", z, "1", "m")}
	seq := append(append([]diffCmd{}, fill...), cmd("FLUSHALL"), cmd("EXISTS", k, l, h, z), cmd("DBSIZE"), cmd("KEYS", "*"))
	seq = append(append(seq, fill...), cmd("FLUSHDB", "ASYNC"), cmd("EXISTS", k, l, h, z), cmd("SET", k, "again"), cmd("GET", k))
	seq = append(append(seq, fill...), cmd("FLUSHALL", "sync"), cmd("FLUSHDB"), cmd("EXISTS", k, l, h, z))
	seq = append(seq, cmd("FLUSHALL", "x"), cmd("FLUSHDB", "async", "sync"), cmd("FLUSHALL", "ASYNC", "x"))
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "flush", cmds: seq},
		{name: "flush resp3", cmds: append([]diffCmd{hello}, seq...)},
	})
}

// TestRESPMatchesRedisCollectionScans compares HSCAN, SSCAN and ZSCAN of small collections (whole in one
// page, as Redis's compact encodings are), their options and bad ones, and ZRANDMEMBER on replies chance
// cannot change, with a real redis-server, in RESP2 and RESP3.
func TestRESPMatchesRedisCollectionScans(t *testing.T) {
	h, s, z, k, none := diffTag+"h", diffTag+"s", diffTag+"z", diffTag+"k", diffTag+"none"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	seq := []diffCmd{
		cmd("HSCAN", none, "0"), cmd("SSCAN", none, "0"), cmd("ZSCAN", none, "0"), cmd("SET", k, "v"),
		cmd("HSCAN", k, "0"), cmd("SSCAN", k, "0"), cmd("ZSCAN", k, "0"), cmd("ZRANDMEMBER", k), cmd("ZRANDMEMBER", k, "0"),
		cmd("HSET", h, "a", "1", "b", "", "ab", "3"), cmd("SADD", s, "x", "y", "xy", ""), cmd("ZADD", z, "1", "a", "2.5", "b", "-inf", "c", "3", "ab"),
		cmd("HSCAN", h, "0").scanned(2), cmd("SSCAN", s, "0").scanned(1), cmd("ZSCAN", z, "0"),
		cmd("HSCAN", h, "0", "MATCH", "a*").scanned(2), cmd("SSCAN", s, "0", "match", "x?").scanned(1), cmd("ZSCAN", z, "0", "MATCH", "[a-]*"),
		cmd("ZSCAN", z, "0", "COUNT", "1"), cmd("ZSCAN", z, "0", "COUNT", "1", "MATCH", "*"), cmd("ZSCAN", z, "5"), cmd("ZSCAN", z, "-1"),
		cmd("ZSCAN", z, "18446744073709551615"), cmd("ZSCAN", z, "18446744073709551616"), cmd("ZSCAN", z, "x"), cmd("ZSCAN", z, ""),
		cmd("ZSCAN", z, "0", "COUNT", "0"), cmd("ZSCAN", z, "0", "COUNT", "-1"), cmd("ZSCAN", z, "0", "COUNT", "x"),
		cmd("ZSCAN", z, "0", "MATCH"), cmd("ZSCAN", z, "0", "FOO", "bar"), cmd("ZSCAN", z, "0", "TYPE", "string"), cmd("ZSCAN", z),
		cmd("HSCAN", s, "0"), cmd("SSCAN", z, "0"), cmd("ZSCAN", h, "0"),
		cmd("ZRANDMEMBER", none), cmd("ZRANDMEMBER", none, "3"), cmd("ZRANDMEMBER", none, "0", "WITHSCORES"), cmd("ZRANDMEMBER", none, "x"),
		cmd("ZRANDMEMBER", z, "0"), cmd("ZRANDMEMBER", z, "x"), cmd("ZRANDMEMBER", z, "1", "WITHVALUES"), cmd("ZRANDMEMBER", z, "1", "WITHSCORES", "x"),
		cmd("ZRANDMEMBER", z, "-9223372036854775808"), cmd("ZRANDMEMBER", z, "9223372036854775807", "WITHSCORES"),
		cmd("ZRANDMEMBER", z, "-4611686018427387904", "WITHSCORES"), cmd("ZRANDMEMBER", z, "4").unordered(1),
		cmd("ZRANDMEMBER", z, "-7").lengthOnly(),
		cmd("ZRANDMEMBER", z, "-3", "withscores").lengthOnly(), cmd("ZREM", z, "a", "b", "c", "ab"), cmd("ZRANDMEMBER", z),
		cmd("ZSCAN", z, "0"),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "collection scans", cmds: append(seq, cmd("ZADD", z, "1", "a", "2", "b"), cmd("ZRANDMEMBER", z, "10", "WITHSCORES").unordered(2))},
		{name: "collection scans resp3", cmds: append([]diffCmd{hello}, seq...)},
	})
}

// scanned returns a scan command with the elements of its page compared as a multiset of groups of
// stride: Redis and Zaris keep a hash's fields and a set's members in orders of their own.
func (d diffCmd) scanned(stride int) diffCmd {
	page := d.unordered(stride).norm
	d.norm = func(reply string) string {
		const head = "*2\r\n$1\r\n0\r\n"
		if !strings.HasPrefix(reply, head) {
			return reply
		}
		return head + page(reply[len(head):])
	}
	return d
}

// TestRESPMatchesRedisBits compares SETBIT, GETBIT and BITCOUNT, with byte and bit ranges, bad arguments,
// missing keys and keys of another type, with a real redis-server. SETBIT keeps the key's expiry.
func TestRESPMatchesRedisBits(t *testing.T) {
	b, h, e, s, none := diffTag+"b", diffTag+"h", diffTag+"e", diffTag+"s", diffTag+"none"
	seq := []diffCmd{
		cmd("HSET", h, "a", "1"), cmd("SETBIT", b, "7", "1"), cmd("SETBIT", b, "7", "1"), cmd("SETBIT", b, "7", "0"),
		cmd("SETBIT", b, "0", "1"), cmd("SETBIT", b, "100", "1"), cmd("GET", b), cmd("STRLEN", b),
		cmd("GETBIT", b, "0"), cmd("GETBIT", b, "1"), cmd("GETBIT", b, "100"), cmd("GETBIT", b, "1000000"),
		cmd("GETBIT", none, "5"), cmd("GETBIT", h, "5"), cmd("SETBIT", h, "5", "1"), cmd("SETBIT", b, "-1", "1"),
		cmd("SETBIT", b, "x", "1"), cmd("SETBIT", b, "4294967296", "0"), cmd("SETBIT", b, "1", "2"), cmd("SETBIT", b, "1", "-1"),
		cmd("SETBIT", b, "1", "01"), cmd("SETBIT", b, "1", ""), cmd("SETBIT", h, "-1", "x"), cmd("SETBIT", h, "1", "x"),
		cmd("GETBIT", b, "-1"), cmd("GETBIT", b, "4294967296"), cmd("GETBIT", h, "x"),
		cmd("BITCOUNT", b), cmd("BITCOUNT", none), cmd("BITCOUNT", h), cmd("BITCOUNT", h, "0"), cmd("BITCOUNT", none, "0"),
		cmd("BITCOUNT", none, "x", "y"), cmd("BITCOUNT", h, "x", "y"), cmd("BITCOUNT", b, "0"), cmd("BITCOUNT", b, "0", "0"),
		cmd("BITCOUNT", b, "0", "-1"), cmd("BITCOUNT", b, "1", "1"), cmd("BITCOUNT", b, "-2", "-1"), cmd("BITCOUNT", b, "-1", "-2"),
		cmd("BITCOUNT", b, "5", "100"), cmd("BITCOUNT", b, "0", "-1", "bit"), cmd("BITCOUNT", b, "0", "6", "BIT"),
		cmd("BITCOUNT", b, "1", "7", "bit"), cmd("BITCOUNT", b, "7", "7", "bit"), cmd("BITCOUNT", b, "8", "8", "bit"),
		cmd("BITCOUNT", b, "100", "100", "bit"), cmd("BITCOUNT", b, "-3", "-1", "bit"), cmd("BITCOUNT", b, "0", "-1", "byte"),
		cmd("BITCOUNT", b, "0", "-1", "foo"), cmd("BITCOUNT", b, "x", "1"), cmd("BITCOUNT", b, "0", "x"),
		cmd("BITCOUNT", b, "0", "1", "bit", "x"), cmd("BITCOUNT", b, "-9223372036854775808", "9223372036854775807", "bit"),
		cmd("BITCOUNT", b, "9223372036854775807", "-9223372036854775808"), cmd("SET", e, ""), cmd("BITCOUNT", e, "0", "-1", "bit"),
		cmd("BITCOUNT", e), cmd("GETBIT", e, "0"), cmd("SETBIT", e, "3", "1"), cmd("GET", e), cmd("SET", s, "abc"),
		cmd("EXPIRE", s, "100"), cmd("SETBIT", s, "2", "1"), cmd("TTL", s).within(99, 100), cmd("GET", s),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{{name: "bits", cmds: seq}})
}

// TestRESPMatchesRedisLCS compares LCS with Redis: the subsequence, its length and its matches (with and
// without their lengths, above a minimum length), missing keys, other types and bad options, in both
// protocols.
func TestRESPMatchesRedisLCS(t *testing.T) {
	a, b, e, h, none := diffTag+"a", diffTag+"b", diffTag+"e", diffTag+"h", diffTag+"none"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	seq := []diffCmd{
		cmd("SET", a, "ohmytext"), cmd("SET", b, "mynewtext"), cmd("SET", e, ""), cmd("HSET", h, "f", "v"),
		cmd("LCS", a, b), cmd("LCS", b, a), cmd("LCS", a, b, "LEN"), cmd("LCS", a, b, "len"), cmd("LCS", a, b, "IDX"),
		cmd("LCS", a, b, "IDX", "WITHMATCHLEN"), cmd("LCS", a, b, "IDX", "MINMATCHLEN", "4"),
		cmd("LCS", a, b, "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"), cmd("LCS", a, b, "IDX", "MINMATCHLEN", "-3"),
		cmd("LCS", a, b, "WITHMATCHLEN"), cmd("LCS", a, b, "MINMATCHLEN", "2"), cmd("LCS", a, b, "IDX", "LEN"),
		cmd("LCS", a, b, "MINMATCHLEN"), cmd("LCS", a, b, "MINMATCHLEN", "x"), cmd("LCS", a, b, "FOO"),
		cmd("LCS", a, none), cmd("LCS", none, none), cmd("LCS", none, a, "LEN"), cmd("LCS", a, e, "IDX"),
		cmd("LCS", a, h), cmd("LCS", h, a, "LEN"), cmd("LCS", h, none, "FOO"), cmd("LCS", none, h),
		cmd("LCS", a, a, "IDX", "WITHMATCHLEN"), cmd("LCS", a),
		cmd("SET", a, "aaaabbbbaaaa"), cmd("SET", b, "abababab"), cmd("LCS", a, b), cmd("LCS", a, b, "IDX", "WITHMATCHLEN"),
		cmd("SET", a, "\x00\xff\x00x"), cmd("SET", b, "x\x00\xff"), cmd("LCS", a, b), cmd("LCS", a, b, "IDX"),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{{name: "lcs", cmds: seq}, {name: "lcs resp3", cmds: append([]diffCmd{hello}, seq...)}})
}

// TestRESPMatchesRedisMemoryUsage compares MEMORY USAGE's answers that do not depend on how each server lays
// values out: a missing key, bad options checked before the key, unknown subcommands and wrong arity.
func TestRESPMatchesRedisMemoryUsage(t *testing.T) {
	k, none := diffTag+"k", diffTag+"none"
	newRESPDiff(t, nil).run(t, []diffSeq{{name: "memory usage", cmds: []diffCmd{
		cmd("SET", k, "v"), cmd("MEMORY", "USAGE", none), cmd("MEMORY", "USAGE", none, "SAMPLES", "5"),
		cmd("MEMORY", "USAGE", k, "SAMPLES"), cmd("MEMORY", "USAGE", k, "SAMPLES", "-1"), cmd("MEMORY", "USAGE", k, "SAMPLES", "x"),
		cmd("MEMORY", "USAGE", none, "FOO", "1"), cmd("MEMORY", "USAGE"), cmd("MEMORY", "NOPE"), cmd("MEMORY"),
		cmd("MEMORY", "HELP", "x"),
	}}})
}
