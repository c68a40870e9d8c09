package zaris

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/resptest"
)

// A differential test runs the same command sequences against a real redis-server and against the RESP
// endpoint of a three-node Zaris cluster, and compares the raw replies one by one.

// diffTag is the placeholder that every key of a sequence carries. The harness replaces it with a hash tag
// of the sequence's own, so that a sequence starts from keys no other sequence touched and all its keys
// share one slot, served by one owner.
const diffTag = "{tag}"

// diffSeq is a named sequence of commands, sent one at a time on one connection to each server.
type diffSeq struct {
	name string
	cmds []diffCmd
	// x86Float marks replies that depend on the precision of C's long double, which Zaris reproduces as it
	// is on x86-64: a redis-server built for another architecture computes them differently.
	x86Float bool
}

// diffCmd is one command of a sequence. When norm is set, both replies pass through it before they are
// compared: it maps a reply whose content legitimately differs (a TTL counting down) to a canonical form,
// and must leave any other reply as it is.
type diffCmd struct {
	args []string
	norm func(reply string) string
	// aside sends the command on a second connection to the same server, as another client would.
	aside bool
	// more is the number of replies the command has besides its first (SUBSCRIBE a b has two), read and
	// compared together; receive sends nothing and reads one reply, a message pushed to a subscriber.
	more    int
	receive bool
}

// replies returns the command with n replies, compared together.
func (d diffCmd) replies(n int) diffCmd {
	d.more = n - 1
	return d
}

// receive reads one reply nothing was sent for: a message pushed to a subscriber.
func receive() diffCmd { return diffCmd{receive: true} }

// cmd is a command whose replies must be byte for byte the same.
func cmd(args ...string) diffCmd { return diffCmd{args: args} }

// elsewhere returns the command sent on the sequence's second connection.
func (d diffCmd) elsewhere() diffCmd {
	d.aside = true
	return d
}

// within returns the command with its integer reply compared only for lying in [lo, hi].
func (d diffCmd) within(lo, hi int64) diffCmd {
	d.norm = intWithin(lo, hi)
	return d
}

// sorted returns the command with the elements of its array reply compared in any order: Redis and Zaris
// list a hash's or a set's elements in orders of their own.
func (d diffCmd) sorted() diffCmd {
	d.norm = sortedElements
	return d
}

// sortedElements sorts the bulk strings of a flat array reply; any other reply is kept as it is.
func sortedElements(reply string) string {
	head, rest, ok := strings.Cut(reply, "\r\n")
	if !ok || !strings.HasPrefix(head, "*") {
		return reply
	}
	var items []string
	for rest != "" {
		size, after, ok := strings.Cut(rest, "\r\n")
		n, err := strconv.Atoi(strings.TrimPrefix(size, "$"))
		if !ok || err != nil || !strings.HasPrefix(size, "$") || n < 0 || len(after) < n+2 {
			return reply
		}
		items = append(items, size+"\r\n"+after[:n+2])
		rest = after[n+2:]
	}
	slices.Sort(items)
	return head + "\r\n" + strings.Join(items, "")
}

// intWithin maps an integer reply in [lo, hi] to one canonical reply. Any other reply, an integer outside
// the range included, is kept as it is and so still has to match.
func intWithin(lo, hi int64) func(string) string {
	return func(reply string) string {
		if !strings.HasPrefix(reply, ":") || !strings.HasSuffix(reply, "\r\n") {
			return reply
		}
		n, err := strconv.ParseInt(reply[1:len(reply)-2], 10, 64)
		if err != nil || n < lo || n > hi {
			return reply
		}
		return fmt.Sprintf(":<%d..%d>\r\n", lo, hi)
	}
}

// respDiff holds the two servers a differential test compares.
type respDiff struct {
	redisAddr string
	cluster   *testCluster
}

// newRESPDiff starts a redis-server with redisArgs and a three-node Zaris cluster with RESP endpoints;
// tweak, if not nil, changes the nodes' config.
func newRESPDiff(t *testing.T, tweak func(*Config), redisArgs ...string) *respDiff {
	t.Helper()
	redisAddr := startRedisServer(t, redisArgs...)
	return &respDiff{redisAddr: redisAddr, cluster: startRESPCluster(t, 3, tweak)}
}

// run runs every sequence as a subtest, each under its own hash tag, and fails a subtest on the first reply
// that differs.
func (d *respDiff) run(t *testing.T, seqs []diffSeq) {
	t.Helper()
	for i, seq := range seqs {
		t.Run(seq.name, func(t *testing.T) {
			if seq.x86Float && runtime.GOARCH != "amd64" {
				t.Skip("the replies depend on x86-64's long double")
			}
			tag := fmt.Sprintf("{s%d}", i)
			redis := dialDiff(t, d.redisAddr)
			zaris := dialDiff(t, d.cluster.owner(tag).RESPAddr())
			if mismatch := diffSequence(t, redis, zaris, seq, tag); mismatch != "" {
				t.Fatal(mismatch)
			}
		})
	}
}

// diffSequence sends seq's commands, with diffTag replaced by tag, to both connections and compares the
// replies. It returns a description of the first mismatch, or "" when every reply matched.
func diffSequence(t *testing.T, redis, zaris *diffConn, seq diffSeq, tag string) string {
	t.Helper()
	sent := make([]string, 0, len(seq.cmds))
	var redisAside, zarisAside *diffConn
	for _, c := range seq.cmds {
		args := make([]string, len(c.args))
		for i, a := range c.args {
			args[i] = strings.ReplaceAll(a, diffTag, tag)
		}
		sent = append(sent, quoteArgs(args))
		r, z := redis, zaris
		if c.aside {
			if redisAside == nil {
				redisAside, zarisAside = dialDiff(t, redis.conn.RemoteAddr().String()), dialDiff(t, zaris.conn.RemoteAddr().String())
			}
			r, z = redisAside, zarisAside
			sent[len(sent)-1] = "(second connection) " + sent[len(sent)-1]
		}
		var want, got string
		switch {
		case c.receive:
			sent[len(sent)-1] = "(a reply pushed)"
			want, got = r.read(t, "a push"), z.read(t, "a push")
		default:
			want, got = r.do(t, args), z.do(t, args)
			for range c.more {
				want, got = want+r.read(t, quoteArgs(args)), got+z.read(t, quoteArgs(args))
			}
		}
		if c.norm != nil {
			want, got = c.norm(want), c.norm(got)
		}
		if want != got {
			return fmt.Sprintf("sequence %q, command %d: %s\nredis: %q\nzaris: %q\nsequence:\n  %s",
				seq.name, len(sent), sent[len(sent)-1], want, got, strings.Join(sent, "\n  "))
		}
	}
	return ""
}

func quoteArgs(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = strconv.Quote(a)
	}
	return strings.Join(quoted, " ")
}

// diffConn is a connection that sends one command and reads its reply. Answered MOVED, it dials the node
// named and sends the command there: that a key's owner serves it is not what a differential test compares.
// The new connection starts afresh (RESP2, no name), which run avoids by dialing the tag's owner first.
type diffConn struct {
	conn net.Conn
	rd   *bufio.Reader
}

func dialDiff(t *testing.T, addr string) *diffConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &diffConn{conn: conn, rd: bufio.NewReader(conn)}
}

// do sends args and returns the raw reply, following one MOVED.
func (c *diffConn) do(t *testing.T, args []string) string {
	t.Helper()
	reply := c.roundTrip(t, args)
	if strings.HasPrefix(reply, "-MOVED ") {
		fields := strings.Fields(reply)
		c.conn.Close()
		*c = *dialDiff(t, fields[len(fields)-1])
		reply = c.roundTrip(t, args)
	}
	return reply
}

func (c *diffConn) roundTrip(t *testing.T, args []string) string {
	t.Helper()
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.conn.Write([]byte(respCmd(args...))); err != nil {
		t.Fatalf("sending %s: %v", quoteArgs(args), err)
	}
	return c.read(t, quoteArgs(args))
}

// read reads one reply, to what names.
func (c *diffConn) read(t *testing.T, what string) string {
	t.Helper()
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	reply, err := resptest.ReadReply(c.rd)
	if err != nil {
		t.Fatalf("reading the reply to %s: %v", what, err)
	}
	return reply
}

// TestRESPDiffBites checks that the differential harness reports a reply that differs: the same sequence
// run on two servers whose key states differ, and a TTL outside its normaliser's range.
func TestRESPDiffBites(t *testing.T) {
	d := newRESPDiff(t, nil)
	const tag = "{bites}"
	redis := dialDiff(t, d.redisAddr)
	zaris := dialDiff(t, d.cluster.owner(tag).RESPAddr())
	redis.do(t, []string{"SET", tag + "k", "only on redis"})

	mismatch := diffSequence(t, redis, zaris, diffSeq{name: "different state", cmds: []diffCmd{
		cmd("SET", diffTag+"other", "same"),
		cmd("GET", diffTag+"k"),
		cmd("GET", diffTag+"other"),
	}}, tag)
	for _, want := range []string{`command 2: "GET" "{bites}k"`, `redis: "$13\r\nonly on redis\r\n"`, `zaris: "$-1\r\n"`,
		`"SET" "{bites}other" "same"`} {
		if !strings.Contains(mismatch, want) {
			t.Fatalf("mismatch report %q lacks %q", mismatch, want)
		}
	}

	redis.do(t, []string{"EXPIRE", tag + "other", "100"})
	mismatch = diffSequence(t, redis, zaris, diffSeq{name: "ttl", cmds: []diffCmd{
		cmd("TTL", diffTag+"other").within(90, 100),
	}}, tag)
	if !strings.Contains(mismatch, `redis: ":<90..100>\r\n"`) || !strings.Contains(mismatch, `zaris: ":-1\r\n"`) {
		t.Fatalf("a TTL outside the normaliser's range was not reported: %q", mismatch)
	}
	zaris.do(t, []string{"EXPIRE", tag + "other", "95"})
	if mismatch := diffSequence(t, redis, zaris, diffSeq{name: "ttl", cmds: []diffCmd{
		cmd("TTL", diffTag+"other").within(90, 100),
		cmd("GET", diffTag+"other"),
	}}, tag); mismatch != "" {
		t.Fatalf("TTLs within the normaliser's range reported: %s", mismatch)
	}
}

// TestRESPMatchesRedisStrings compares the string and key commands with a real redis-server.
func TestRESPMatchesRedisStrings(t *testing.T) {
	newRESPDiff(t, nil).run(t, stringSeqs())
}

// TestRESPMatchesRedisObject compares OBJECT with a real redis-server: the encodings of each kind of
// value, and the access counter and idle time under the LFU and LRU policies, which it must not change.
func TestRESPMatchesRedisObject(t *testing.T) {
	k, missing := diffTag+"k", diffTag+"missing"
	long := strings.Repeat("x", 65)
	policy := func(name string) diffCmd { return cmd("CONFIG", "SET", "maxmemory-policy", name) }
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "encoding", cmds: []diffCmd{
			cmd("OBJECT", "ENCODING", missing), cmd("SET", k, "12"), cmd("OBJECT", "ENCODING", k), cmd("SET", k, "-9223372036854775808"),
			cmd("OBJECT", "ENCODING", k), cmd("SET", k, "9223372036854775808"), cmd("OBJECT", "ENCODING", k), cmd("SET", k, "012"),
			cmd("OBJECT", "ENCODING", k), cmd("SET", k, strings.Repeat("y", 44)), cmd("OBJECT", "ENCODING", k),
			cmd("SET", k, strings.Repeat("y", 45)), cmd("OBJECT", "ENCODING", k), cmd("SET", k, ""), cmd("OBJECT", "ENCODING", k),
			cmd("OBJECT", "REFCOUNT", k), cmd("OBJECT", "REFCOUNT", missing),
			cmd("RPUSH", diffTag+"l", "a"), cmd("OBJECT", "ENCODING", diffTag+"l"),
			cmd("SADD", diffTag+"s", "1", "-2"), cmd("OBJECT", "ENCODING", diffTag+"s"), cmd("SADD", diffTag+"s", "x"),
			cmd("OBJECT", "ENCODING", diffTag+"s"),
			cmd("HSET", diffTag+"h", "f", "v"), cmd("OBJECT", "ENCODING", diffTag+"h"), cmd("HSET", diffTag+"h", "g", long),
			cmd("OBJECT", "ENCODING", diffTag+"h"),
			cmd("ZADD", diffTag+"z", "1", "m"), cmd("OBJECT", "ENCODING", diffTag+"z"), cmd("ZADD", diffTag+"z", "2", long),
			cmd("OBJECT", "ENCODING", diffTag+"z"),
			cmd("OBJECT", "ENCODING"), cmd("OBJECT"), cmd("OBJECT", "NOPE", k), cmd("OBJECT", "ENCODING", k, k),
		}},
		{name: "lfu", cmds: []diffCmd{
			policy("allkeys-lfu"), cmd("SET", k, "v"), cmd("OBJECT", "FREQ", k), cmd("OBJECT", "FREQ", k), cmd("GET", k),
			cmd("OBJECT", "FREQ", k), cmd("OBJECT", "FREQ", missing), cmd("OBJECT", "IDLETIME", k), policy("noeviction"),
		}},
		{name: "lru", cmds: []diffCmd{
			policy("allkeys-lru"), cmd("SET", k, "v"), cmd("OBJECT", "IDLETIME", k), cmd("GET", k), cmd("OBJECT", "IDLETIME", k),
			cmd("OBJECT", "IDLETIME", missing), cmd("OBJECT", "FREQ", k), policy("noeviction"), cmd("OBJECT", "FREQ", k),
		}},
	})
}

// TestRESPMatchesRedisOlderForms compares the commands that are other forms of served ones (SETNX, SETEX,
// PSETEX, GETSET, HMSET, HKEYS, HVALS, HSTRLEN) with a real redis-server, on missing keys, wrong types and
// bad arguments too.
func TestRESPMatchesRedisOlderForms(t *testing.T) {
	k, h, l, z := diffTag+"k", diffTag+"h", diffTag+"l", diffTag+"z"
	future := func(s int64) string { return strconv.FormatInt(time.Now().Unix()+s, 10) }
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "setnx", cmds: []diffCmd{
			cmd("SETNX", k, "a"), cmd("SETNX", k, "b"), cmd("GET", k), cmd("RPUSH", l, "x"), cmd("SETNX", l, "c"), cmd("SETNX", k),
			cmd("SETNX", k, ""), cmd("DEL", k), cmd("SETNX", k, ""), cmd("GET", k),
		}},
		{name: "setex", cmds: []diffCmd{
			cmd("SETEX", k, "100", "v"), cmd("GET", k), cmd("TTL", k).within(99, 100), cmd("SETEX", k, "0", "v"), cmd("SETEX", k, "-1", "v"),
			cmd("SETEX", k, "x", "v"), cmd("SETEX", k, "9223372036854775807", "v"), cmd("PSETEX", k, "100000", "w"), cmd("GET", k),
			cmd("PTTL", k).within(99000, 100000), cmd("PSETEX", k, "0", "v"), cmd("PSETEX", k, "9223372036854775807", "v"),
			cmd("RPUSH", l, "x"), cmd("SETEX", l, "10", "v"), cmd("TYPE", l), cmd("SETEX", k, "10"),
		}},
		{name: "getset", cmds: []diffCmd{
			cmd("GETSET", k, "a"), cmd("SET", k, "b", "EX", "100"), cmd("GETSET", k, "c"), cmd("TTL", k), cmd("GET", k),
			cmd("RPUSH", l, "x"), cmd("GETSET", l, "v"), cmd("GETSET", k),
		}},
		{name: "hmset", cmds: []diffCmd{
			cmd("HMSET", h, "f", "1", "g", "2"), cmd("HGETALL", h).sorted(), cmd("HMSET", h, "f"), cmd("HMSET", h, "f", "1", "g"),
			cmd("HMSET", h, "f", "3"), cmd("HGET", h, "f"), cmd("SET", k, "v"), cmd("HMSET", k, "f", "1"),
		}},
		{name: "pushx", cmds: []diffCmd{
			cmd("LPUSHX", l, "a"), cmd("RPUSHX", l, "a", "b"), cmd("EXISTS", l), cmd("RPUSH", l, "x"), cmd("LPUSHX", l, "a", "b"),
			cmd("RPUSHX", l, "c"), cmd("LRANGE", l, "0", "-1"), cmd("SET", k, "v"), cmd("LPUSHX", k, "a"), cmd("RPUSHX", k), cmd("LPUSHX", diffTag+"none", ""),
		}},
		{name: "zrevrange zrangebyscore", cmds: []diffCmd{
			cmd("ZREVRANGE", z, "0", "-1"), cmd("ZADD", z, "1", "a", "2", "b", "3", "c", "3", "d"), cmd("ZREVRANGE", z, "0", "-1"),
			cmd("ZREVRANGE", z, "1", "2", "WITHSCORES"), cmd("ZREVRANGE", z, "0", "-1", "REV"), cmd("ZREVRANGE", z, "0", "-1", "BYSCORE"),
			cmd("ZREVRANGE", z, "0", "-1", "LIMIT", "0", "1"), cmd("ZREVRANGE", z, "x", "1"),
			cmd("ZRANGEBYSCORE", z, "-inf", "+inf"), cmd("ZRANGEBYSCORE", z, "(1", "3", "WITHSCORES"), cmd("ZRANGEBYSCORE", z, "1", "3", "LIMIT", "1", "2"),
			cmd("ZRANGEBYSCORE", z, "3", "1"), cmd("ZRANGEBYSCORE", z, "1", "3", "REV"), cmd("ZRANGEBYSCORE", z, "x", "3"),
			cmd("ZRANGEBYSCORE", z, "1", "3", "LIMIT", "0"), cmd("ZRANGEBYSCORE", z, "1", "3", "BYSCORE"),
			cmd("ZREVRANGEBYSCORE", z, "+inf", "-inf"), cmd("ZREVRANGEBYSCORE", z, "3", "(1", "WITHSCORES", "LIMIT", "0", "2"),
			cmd("ZREVRANGEBYSCORE", z, "1", "3"), cmd("ZREVRANGEBYSCORE", diffTag+"none", "1", "3"), cmd("SET", k, "v"),
			cmd("ZREVRANGE", k, "0", "-1"), cmd("ZRANGEBYSCORE", k, "0", "1"),
		}},
		{name: "touch expireat", cmds: []diffCmd{
			cmd("TOUCH", k), cmd("SET", k, "v"), cmd("TOUCH", k, k, diffTag+"none"), cmd("EXPIREAT", k, future(100)), cmd("TTL", k).within(98, 100),
			cmd("PEXPIREAT", k, future(200)+"000"), cmd("PTTL", k).within(198000, 200000), cmd("EXPIREAT", k, future(300), "XX"),
			cmd("EXPIREAT", k, future(50), "GT"), cmd("EXPIREAT", k, future(50), "LT"), cmd("TTL", k).within(48, 50),
			cmd("EXPIREAT", diffTag+"none", future(100)), cmd("EXPIREAT", k, "x"), cmd("EXPIREAT", k, "1"), cmd("EXISTS", k),
			cmd("SET", k, "v"), cmd("PEXPIREAT", k, "-5"), cmd("EXISTS", k), cmd("SET", k, "v"), cmd("EXPIREAT", k, "9223372036854775807"),
			cmd("EXPIREAT", k, "0"), cmd("EXISTS", k),
		}},
		{name: "hkeys hvals hstrlen", cmds: []diffCmd{
			cmd("HKEYS", h), cmd("HVALS", h), cmd("HSTRLEN", h, "f"), cmd("HSET", h, "f", "hello", "g", "", "h", "12"),
			cmd("HKEYS", h).sorted(), cmd("HVALS", h).sorted(), cmd("HSTRLEN", h, "f"), cmd("HSTRLEN", h, "g"), cmd("HSTRLEN", h, "x"),
			cmd("SET", k, "v"), cmd("HKEYS", k), cmd("HVALS", k), cmd("HSTRLEN", k, "f"), cmd("HKEYS"), cmd("HSTRLEN", h),
		}},
	})
}

// TestRESPMatchesRedisComposedCommands compares the commands composed of served key operations (SMISMEMBER,
// ZMSCORE, HSETNX, ZREVRANK, ZPOPMIN, ZPOPMAX, SMOVE, RPOPLPUSH, LMOVE, MSETNX, SINTER, SUNION, SDIFF and
// their STORE forms) with a real redis-server, on missing keys, wrong types and bad arguments too.
func TestRESPMatchesRedisComposedCommands(t *testing.T) {
	k, h, l, l2, s, s2, s3, z := diffTag+"k", diffTag+"h", diffTag+"l", diffTag+"l2", diffTag+"s", diffTag+"s2", diffTag+"s3", diffTag+"z"
	none := diffTag + "none"
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "smismember zmscore", cmds: []diffCmd{
			cmd("SMISMEMBER", s, "a", "b"), cmd("SADD", s, "a", "c"), cmd("SMISMEMBER", s, "a", "b", "c", "a"), cmd("SMISMEMBER", s),
			cmd("ZMSCORE", z, "a"), cmd("ZADD", z, "1.5", "a", "-2", "b"), cmd("ZMSCORE", z, "a", "x", "b"), cmd("ZMSCORE", z),
			cmd("SET", k, "v"), cmd("SMISMEMBER", k, "a"), cmd("ZMSCORE", k, "a"),
		}},
		{name: "hsetnx", cmds: []diffCmd{
			cmd("HSETNX", h, "f", "1"), cmd("HSETNX", h, "f", "2"), cmd("HGET", h, "f"), cmd("HSETNX", h, "g", ""), cmd("HGETALL", h).sorted(),
			cmd("SET", k, "v"), cmd("HSETNX", k, "f", "1"), cmd("HSETNX", h, "f"), cmd("HSETNX", h, "f", "1", "x"),
		}},
		{name: "zrevrank", cmds: []diffCmd{
			cmd("ZREVRANK", z, "a"), cmd("ZADD", z, "1", "a", "2", "b", "3", "c"), cmd("ZREVRANK", z, "a"), cmd("ZREVRANK", z, "c"),
			cmd("ZREVRANK", z, "x"), cmd("SET", k, "v"), cmd("ZREVRANK", k, "a"), cmd("ZREVRANK", z),
		}},
		{name: "zpopmin zpopmax", cmds: []diffCmd{
			cmd("ZPOPMIN", z), cmd("ZPOPMAX", z, "2"), cmd("ZADD", z, "1", "a", "2", "b", "3", "c", "4", "d"), cmd("ZPOPMIN", z),
			cmd("ZPOPMAX", z), cmd("ZPOPMIN", z, "0"), cmd("ZPOPMIN", z, "-1"), cmd("ZPOPMIN", z, "x"), cmd("ZPOPMAX", z, "10"),
			cmd("EXISTS", z), cmd("ZPOPMIN", z, "1", "2"), cmd("SET", k, "v"), cmd("ZPOPMIN", k), cmd("ZPOPMAX", k, "0"),
		}},
		{name: "smove", cmds: []diffCmd{
			cmd("SMOVE", s, s2, "a"), cmd("SADD", s, "a", "b"), cmd("SMOVE", s, s2, "a"), cmd("SMOVE", s, s2, "x"), cmd("SMEMBERS", s2),
			cmd("SMOVE", s, s, "b"), cmd("SMOVE", s, s, "x"), cmd("SMOVE", s, s2, "b"), cmd("EXISTS", s), cmd("SET", k, "v"),
			cmd("SMOVE", s2, k, "a"), cmd("SMEMBERS", s2).sorted(), cmd("SMOVE", k, s2, "a"), cmd("SMOVE", none, k, "a"),
		}},
		{name: "rpoplpush lmove", cmds: []diffCmd{
			cmd("RPOPLPUSH", l, l2), cmd("RPUSH", l, "a", "b", "c"), cmd("RPOPLPUSH", l, l2), cmd("LMOVE", l, l2, "LEFT", "RIGHT"),
			cmd("LRANGE", l2, "0", "-1"), cmd("LMOVE", l2, l2, "left", "right"), cmd("LRANGE", l2, "0", "-1"), cmd("LMOVE", l, l2, "UP", "LEFT"),
			cmd("LMOVE", l, l2, "LEFT", "DOWN"), cmd("LMOVE", l, l, "RIGHT", "LEFT"), cmd("SET", k, "v"), cmd("RPOPLPUSH", l, k),
			cmd("LRANGE", l, "0", "-1"), cmd("RPOPLPUSH", k, l), cmd("LMOVE", none, k, "LEFT", "LEFT"), cmd("RPOPLPUSH", l),
		}},
		{name: "msetnx", cmds: []diffCmd{
			cmd("MSETNX", k, "1", l, "2"), cmd("MSETNX", k, "3", h, "4"), cmd("GET", h), cmd("MGET", k, l), cmd("MSETNX", k),
			cmd("MSETNX", k, "1", h), cmd("MSETNX", h, "5", h, "6"), cmd("GET", h),
		}},
		{name: "sinter sunion sdiff", cmds: []diffCmd{
			cmd("SADD", s, "a", "b", "c"), cmd("SADD", s2, "b", "c", "d"), cmd("SINTER", s, s2).sorted(), cmd("SUNION", s, s2).sorted(),
			cmd("SDIFF", s, s2).sorted(), cmd("SDIFF", s2, s).sorted(), cmd("SINTER", s, none), cmd("SUNION", s, none).sorted(),
			cmd("SDIFF", none, s), cmd("SINTER", s).sorted(), cmd("SET", k, "v"), cmd("SINTER", s, k), cmd("SUNION", k), cmd("SDIFF", s).sorted(),
		}},
		{name: "hincrbyfloat", cmds: []diffCmd{
			cmd("HINCRBYFLOAT", h, "f", "1.5"), cmd("HINCRBYFLOAT", h, "f", "-0.25"), cmd("HINCRBYFLOAT", h, "f", "1e3"), cmd("HGET", h, "f"),
			cmd("HSET", h, "g", "abc", "i", "10"), cmd("HINCRBYFLOAT", h, "g", "1"), cmd("HINCRBYFLOAT", h, "i", "0.1"),
			cmd("HINCRBYFLOAT", h, "f", "x"), cmd("HINCRBYFLOAT", h, "f", "inf"), cmd("HINCRBYFLOAT", h, "f", "1.7e308"),
			cmd("HINCRBYFLOAT", h, "f", "1.7e308"), cmd("HINCRBYFLOAT", h, "f", ""), cmd("HSET", h, "j", "inf"), cmd("HINCRBYFLOAT", h, "j", "1"),
			cmd("SET", k, "v"), cmd("HINCRBYFLOAT", k, "f", "1"), cmd("HINCRBYFLOAT", k, "f", "x"), cmd("HINCRBYFLOAT", h, "f"),
		}},
		{name: "zcount", cmds: []diffCmd{
			cmd("ZCOUNT", z, "-inf", "+inf"), cmd("ZADD", z, "1", "a", "2", "b", "3", "c"), cmd("ZCOUNT", z, "-inf", "+inf"),
			cmd("ZCOUNT", z, "(1", "3"), cmd("ZCOUNT", z, "2", "(3"), cmd("ZCOUNT", z, "3", "1"), cmd("ZCOUNT", z, "x", "1"),
			cmd("SET", k, "v"), cmd("ZCOUNT", k, "0", "1"), cmd("ZCOUNT", z, "0"),
		}},
		{name: "spop srandmember", cmds: []diffCmd{
			cmd("SPOP", s), cmd("SPOP", s, "2"), cmd("SRANDMEMBER", s), cmd("SRANDMEMBER", s, "3"), cmd("SRANDMEMBER", s, "-3"),
			cmd("SADD", s, "a", "b", "c"), cmd("SRANDMEMBER", s, "5").sorted(), cmd("SRANDMEMBER", s, "0"), cmd("SRANDMEMBER", s, "x"),
			cmd("SPOP", s, "-1"), cmd("SPOP", s, "x"), cmd("SPOP", s, "0"), cmd("SPOP", s, "1", "2"), cmd("SRANDMEMBER", s, "1", "2"),
			cmd("SCARD", s), cmd("SPOP", s, "10").sorted(), cmd("EXISTS", s), cmd("SADD", s, "z"), cmd("SPOP", s), cmd("SRANDMEMBER", s),
			cmd("SADD", s, "y"), cmd("SRANDMEMBER", s, "-2"), cmd("SRANDMEMBER", s), cmd("SET", k, "v"), cmd("SPOP", k), cmd("SPOP", k, "0"),
			cmd("SRANDMEMBER", k), cmd("SRANDMEMBER", k, "-5"),
		}},
		{name: "set algebra store", cmds: []diffCmd{
			cmd("SADD", s, "a", "b", "c"), cmd("SADD", s2, "b", "c", "d"), cmd("SINTERSTORE", s3, s, s2), cmd("SMEMBERS", s3).sorted(),
			cmd("SUNIONSTORE", s3, s, s2), cmd("SCARD", s3), cmd("SDIFFSTORE", s3, s, s2), cmd("SMEMBERS", s3), cmd("SET", k, "v"),
			cmd("SINTERSTORE", k, s, s2), cmd("TYPE", k), cmd("SINTERSTORE", k, s, none), cmd("EXISTS", k), cmd("SUNIONSTORE", s3, s, l),
			cmd("RPUSH", l, "x"), cmd("SUNIONSTORE", s3, s, l), cmd("SDIFFSTORE", s3), cmd("SDIFFSTORE", s3, none), cmd("EXISTS", s3),
		}},
	})
}

// TestRESPMatchesRedisValueLimit compares the refusal of a string grown past the largest value, Redis's
// proto-max-bulk-len and Zaris's MaxValueSize set alike.
func TestRESPMatchesRedisValueLimit(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	d := newRESPDiff(t, func(cfg *Config) { cfg.MaxValueSize = limit }, "--proto-max-bulk-len", strconv.Itoa(limit))
	const k = diffTag + "k"
	d.run(t, []diffSeq{{name: "append past the limit", cmds: []diffCmd{
		cmd("SET", k, strings.Repeat("v", limit-2)), cmd("APPEND", k, "ab"), cmd("APPEND", k, "c"), cmd("APPEND", k, ""),
		cmd("SET", k, "1e308"), cmd("INCRBYFLOAT", k, "1e308"), cmd("EXISTS", k), cmd("SETRANGE", k, strconv.Itoa(limit-1), "x"),
		cmd("SETRANGE", k, strconv.Itoa(limit-1), "xy"), cmd("SETRANGE", k, strconv.Itoa(limit), "x"), cmd("SETRANGE", k, strconv.Itoa(limit), ""),
		cmd("STRLEN", k), cmd("SETRANGE", diffTag+"new", strconv.Itoa(limit), "x"), cmd("EXISTS", diffTag+"new"),
	}}})
}

func stringSeqs() []diffSeq {
	const k = diffTag + "k"
	return []diffSeq{
		{name: "incrby decrby", cmds: []diffCmd{
			cmd("INCRBY", k, "5"), cmd("INCRBY", k, "-7"), cmd("DECRBY", k, "3"), cmd("DECRBY", k, "-10"), cmd("GET", k),
			cmd("INCRBY", k, "0"), cmd("DECRBY", k, "0"), cmd("INCR", k), cmd("DECR", k), cmd("GET", k),
		}},
		{name: "incrby errors", cmds: []diffCmd{
			cmd("INCRBY", k), cmd("INCRBY", k, "1", "2"), cmd("DECRBY", k), cmd("INCR"), cmd("DECR", k, "1"),
			cmd("INCRBY", k, "x"), cmd("INCRBY", k, "1.5"), cmd("INCRBY", k, " 1"), cmd("INCRBY", k, "+1"), cmd("INCRBY", k, "01"),
			cmd("INCRBY", k, "9223372036854775808"), cmd("DECRBY", k, "-9223372036854775809"), cmd("DECRBY", k, "abc"),
			cmd("EXISTS", k),
		}},
		{name: "incrby overflow", cmds: []diffCmd{
			cmd("SET", k, "9223372036854775800"), cmd("INCRBY", k, "7"), cmd("INCRBY", k, "1"), cmd("DECRBY", k, "-1"),
			cmd("GET", k), cmd("SET", k, "-9223372036854775800"), cmd("DECRBY", k, "8"), cmd("DECRBY", k, "1"),
			cmd("INCRBY", k, "-1"), cmd("DECRBY", k, "-9223372036854775808"), cmd("DECRBY", k, "9223372036854775807"),
			cmd("DECRBY", k, "-9223372036854775807"), cmd("GET", k),
		}},
		{name: "incrby of text", cmds: []diffCmd{
			cmd("SET", k, "abc"), cmd("INCRBY", k, "1"), cmd("DECRBY", k, "1"), cmd("SET", k, "007"), cmd("INCRBY", k, "1"),
			cmd("SET", k, ""), cmd("DECRBY", k, "1"), cmd("GET", k),
		}},
		{name: "incrby keeps the ttl", cmds: []diffCmd{
			cmd("SET", k, "1", "EX", "100"), cmd("INCRBY", k, "2"), cmd("TTL", k).within(95, 100), cmd("DECRBY", k, "1"),
			cmd("GET", k), cmd("PERSIST", k), cmd("TTL", k),
		}},

		{name: "incrbyfloat", cmds: []diffCmd{
			cmd("INCRBYFLOAT", k, "0.1"), cmd("INCRBYFLOAT", k, "10.5"), cmd("INCRBYFLOAT", k, "-0.2"), cmd("GET", k),
			cmd("INCRBYFLOAT", k, "5.0e3"), cmd("INCRBYFLOAT", k, "-5.0E+3"), cmd("INCRBYFLOAT", k, "+1"), cmd("INCRBYFLOAT", k, "1."),
			cmd("INCRBYFLOAT", k, ".25"), cmd("INCRBYFLOAT", k, "0x10"), cmd("INCRBYFLOAT", k, "0x.8p1"), cmd("INCRBYFLOAT", k, "-0X1P-2"),
			cmd("INCRBYFLOAT", k, "1e-30"), cmd("INCRBYFLOAT", k, "0"), cmd("INCRBYFLOAT", k, "-29.65"), cmd("GET", k),
			cmd("INCRBYFLOAT", k, "-0.0"), cmd("INCRBYFLOAT", k, "3"), cmd("INCRBYFLOAT", k, "0.3333333333333333333333"),
			cmd("INCRBYFLOAT", k, "1234567890.123456789"), cmd("INCRBYFLOAT", k, "-1e-17"), cmd("INCRBYFLOAT", k, "5e-18"),
			cmd("INCRBYFLOAT", k, "123456789012345678901234567890"), cmd("INCRBYFLOAT", k, "-123456789012345678901234567890"),
		}, x86Float: true},
		{name: "incrbyfloat of integers and text", cmds: []diffCmd{
			cmd("SET", k, "10"), cmd("INCRBYFLOAT", k, "1.5"), cmd("INCR", k), cmd("SET", k, "007"), cmd("INCRBYFLOAT", k, "1"),
			cmd("SET", k, "1e3"), cmd("INCRBYFLOAT", k, "1"), cmd("SET", k, " 1"), cmd("INCRBYFLOAT", k, "1"),
			cmd("SET", k, "1 "), cmd("INCRBYFLOAT", k, "1"), cmd("SET", k, ""), cmd("INCRBYFLOAT", k, "1"),
			cmd("SET", k, "abc"), cmd("INCRBYFLOAT", k, "1"), cmd("SET", k, "nan"), cmd("INCRBYFLOAT", k, "1"),
			cmd("SET", k, "inf"), cmd("INCRBYFLOAT", k, "1"), cmd("SET", k, "-Infinity"), cmd("INCRBYFLOAT", k, "1"),
			cmd("GET", k),
		}},
		{name: "incrbyfloat errors", cmds: []diffCmd{
			cmd("INCRBYFLOAT", k), cmd("INCRBYFLOAT", k, "1", "2"), cmd("INCRBYFLOAT", k, "x"), cmd("INCRBYFLOAT", k, ""),
			cmd("INCRBYFLOAT", k, " 1"), cmd("INCRBYFLOAT", k, "1 "), cmd("INCRBYFLOAT", k, "1e"), cmd("INCRBYFLOAT", k, "1e+"),
			cmd("INCRBYFLOAT", k, "."), cmd("INCRBYFLOAT", k, "0x"), cmd("INCRBYFLOAT", k, "0x1p"), cmd("INCRBYFLOAT", k, "1.2.3"),
			cmd("INCRBYFLOAT", k, "nan"), cmd("INCRBYFLOAT", k, "-nan"), cmd("INCRBYFLOAT", k, "inf"), cmd("INCRBYFLOAT", k, "-INFINITY"),
			cmd("INCRBYFLOAT", k, "infi"), cmd("INCRBYFLOAT", k, "1e5000"), cmd("INCRBYFLOAT", k, "1e-5000"), cmd("INCRBYFLOAT", k, "0e5000"),
			cmd("INCRBYFLOAT", k, "1e-4940"), cmd("INCRBYFLOAT", k, "1e99999999999999999999"), cmd("INCRBYFLOAT", k, "1/2"),
			cmd("INCRBYFLOAT", k, strings.Repeat("1", 5119)), cmd("INCRBYFLOAT", k, strings.Repeat("1", 5120)), cmd("GET", k),
		}},
		{name: "incrbyfloat overflow", cmds: []diffCmd{
			cmd("INCRBYFLOAT", k, "1e308"), cmd("INCRBYFLOAT", k, "1e308"), cmd("SET", k, "1e4932"), cmd("INCRBYFLOAT", k, "1e4932"),
			cmd("INCRBYFLOAT", k, "1.18973149535723176e4932"), cmd("INCRBYFLOAT", k, "-1e4932"), cmd("INCRBYFLOAT", k, "1.2e4932"),
			cmd("SET", k, "-1.18973149535723176e4932"), cmd("INCRBYFLOAT", k, "-1e4932"), cmd("INCRBYFLOAT", k, "1"), cmd("GET", k),
		}, x86Float: true},
		{name: "incrbyfloat keeps the ttl", cmds: []diffCmd{
			cmd("SET", k, "1.5", "EX", "100"), cmd("INCRBYFLOAT", k, "2.25"), cmd("TTL", k).within(95, 100), cmd("GET", k),
		}},

		{name: "append", cmds: []diffCmd{
			cmd("APPEND", k, "hello"), cmd("APPEND", k, " world"), cmd("GET", k), cmd("APPEND", k, ""), cmd("APPEND", diffTag+"new", ""),
			cmd("EXISTS", diffTag+"new"), cmd("GET", diffTag+"new"), cmd("SET", k, "1"), cmd("APPEND", k, "2"), cmd("INCR", k), cmd("GET", k),
			cmd("APPEND", k, "\x00\r\n"), cmd("GET", k), cmd("APPEND", k), cmd("APPEND", k, "a", "b"),
		}},
		{name: "append keeps the ttl", cmds: []diffCmd{
			cmd("SET", k, "a", "EX", "100"), cmd("APPEND", k, "b"), cmd("TTL", k).within(95, 100), cmd("GET", k),
		}},

		{name: "getdel", cmds: []diffCmd{
			cmd("GETDEL", k), cmd("SET", k, "v", "EX", "100"), cmd("GETDEL", k), cmd("GETDEL", k), cmd("EXISTS", k), cmd("TTL", k),
			cmd("SET", k, ""), cmd("GETDEL", k), cmd("GETDEL"), cmd("GETDEL", k, k),
		}},

		{name: "getex without options", cmds: []diffCmd{
			cmd("GETEX", k), cmd("SET", k, "v", "EX", "100"), cmd("GETEX", k), cmd("TTL", k).within(95, 100), cmd("GETEX"),
		}},
		{name: "getex expiries", cmds: []diffCmd{
			cmd("SET", k, "v"), cmd("GETEX", k, "EX", "100"), cmd("TTL", k).within(95, 100), cmd("GETEX", k, "px", "200000"),
			cmd("TTL", k).within(195, 200), cmd("GETEX", k, "PERSIST"), cmd("TTL", k), cmd("GETEX", k, "PERSIST"), cmd("TTL", k),
			cmd("GETEX", k, "EXAT", "4102444800"), cmd("TTL", k).within(1, 1<<40), cmd("GETEX", k, "PXAT", "4102444800000"),
			cmd("TTL", k).within(1, 1<<40), cmd("GETEX", k, "ex", "10", "EX", "300"), cmd("TTL", k).within(295, 300),
			cmd("GETEX", k, "persist", "PERSIST"), cmd("TTL", k), cmd("GETEX", diffTag+"missing", "EX", "100"),
			cmd("EXISTS", diffTag+"missing"),
		}},
		{name: "getex in the past deletes", cmds: []diffCmd{
			cmd("SET", k, "v"), cmd("GETEX", k, "EXAT", "1"), cmd("EXISTS", k), cmd("SET", k, "w", "EX", "100"),
			cmd("GETEX", k, "PXAT", "1000"), cmd("GET", k),
		}},
		{name: "getex bad expiries", cmds: []diffCmd{
			cmd("SET", k, "v", "EX", "100"), cmd("GETEX", k, "EX", "0"), cmd("GETEX", k, "EX", "-5"), cmd("GETEX", k, "PX", "0"),
			cmd("GETEX", k, "EXAT", "0"), cmd("GETEX", k, "PXAT", "-1"), cmd("GETEX", k, "EX", "abc"), cmd("GETEX", k, "EX", "1.5"),
			cmd("GETEX", k, "EX", "01"), cmd("GETEX", k, "EX", "9223372036854775807"), cmd("GETEX", k, "PX", "9223372036854775807"),
			cmd("GETEX", k, "EX", "9223372036854775808"), cmd("TTL", k).within(95, 100),
			cmd("GETEX", diffTag+"missing", "EX", "0"), cmd("GETEX", diffTag+"missing", "EX", "abc"),
			cmd("GETEX", diffTag+"missing", "PX", "-1"),
		}},
		{name: "getex syntax", cmds: []diffCmd{
			cmd("SET", k, "v"), cmd("GETEX", k, "EX"), cmd("GETEX", k, "EX", "10", "PX", "100"), cmd("GETEX", k, "PERSIST", "EX", "10"),
			cmd("GETEX", k, "EX", "10", "PERSIST"), cmd("GETEX", k, "KEEPTTL"), cmd("GETEX", k, "NX"), cmd("GETEX", k, "GET"),
			cmd("GETEX", k, "EXAT", "10", "EX", "10"), cmd("GETEX", k, "foo"), cmd("GETEX", diffTag+"missing", "foo"),
			cmd("GETEX", diffTag+"missing", "EX"), cmd("TTL", k),
		}},

		{name: "set expiry options", cmds: []diffCmd{
			cmd("SET", k, "v", "EX", "10", "EX", "300"), cmd("TTL", k).within(295, 300),
			cmd("SET", k, "v", "PX", "abc", "PX", "300000"), cmd("TTL", k).within(295, 300),
			cmd("SET", k, "v", "EX", "10", "PX", "100"), cmd("SET", k, "v", "EX", "10", "KEEPTTL"),
			cmd("SET", k, "v", "KEEPTTL", "EX", "10"), cmd("SET", k, "v", "EX", "10", "EX", "0"),
			cmd("SET", k, "v", "EX", "abc", "NX", "XX"), cmd("SET", k, "v", "EXAT", "1", "EXAT"), cmd("TTL", k).within(295, 300),
			cmd("SET", k, "v", "GET", "GET", "KEEPTTL", "KEEPTTL"), cmd("TTL", k).within(295, 300),
		}},
		{name: "setrange", cmds: []diffCmd{
			cmd("SETRANGE", k, "0", ""), cmd("EXISTS", k), cmd("SETRANGE", k, "3", "ab"), cmd("GET", k), cmd("SETRANGE", k, "0", "xyz!"),
			cmd("GET", k), cmd("SETRANGE", k, "1", "Q"), cmd("SETRANGE", k, "10", ""), cmd("SETRANGE", k, "1000000000000", ""),
			cmd("GET", k), cmd("STRLEN", k), cmd("SET", k, "12", "EX", "100"), cmd("SETRANGE", k, "1", "9"), cmd("INCR", k),
			cmd("TTL", k).within(95, 100),
		}},
		{name: "setrange errors", cmds: []diffCmd{
			cmd("SETRANGE", k, "-1", "a"), cmd("SETRANGE", k, "-1", ""), cmd("SETRANGE", k, "x", "a"), cmd("SETRANGE", k, "1.0", "a"),
			cmd("SETRANGE", k, "9223372036854775808", "a"), cmd("SETRANGE", k, "9223372036854775807", "a"),
			cmd("SETRANGE", k, "536870912", "a"), cmd("SETRANGE", k, "0"), cmd("SETRANGE", k, "0", "a", "b"), cmd("EXISTS", k),
		}},
		{name: "getrange", cmds: []diffCmd{
			cmd("GETRANGE", k, "0", "-1"), cmd("SET", k, "This is a string"), cmd("GETRANGE", k, "0", "3"), cmd("GETRANGE", k, "-3", "-1"),
			cmd("GETRANGE", k, "0", "-1"), cmd("GETRANGE", k, "10", "100"), cmd("GETRANGE", k, "5", "3"), cmd("GETRANGE", k, "-1", "-5"),
			cmd("GETRANGE", k, "-100", "2"), cmd("GETRANGE", k, "-100", "-50"), cmd("GETRANGE", k, "16", "20"), cmd("GETRANGE", k, "15", "15"),
			cmd("GETRANGE", k, "-9223372036854775808", "9223372036854775807"), cmd("GETRANGE", k, "x", "1"), cmd("GETRANGE", k, "0", "1.5"),
			cmd("GETRANGE", k, "0"), cmd("SET", k, ""), cmd("GETRANGE", k, "0", "-1"), cmd("GETRANGE", k, "0", "0"),
			cmd("SET", k, "12345"), cmd("INCR", k), cmd("GETRANGE", k, "1", "-2"),
		}},
		{name: "strlen", cmds: []diffCmd{
			cmd("STRLEN", k), cmd("SET", k, "hello"), cmd("STRLEN", k), cmd("SET", k, ""), cmd("STRLEN", k), cmd("SET", k, "-123"),
			cmd("INCR", k), cmd("STRLEN", k), cmd("STRLEN"), cmd("STRLEN", k, k),
		}},

		{name: "type", cmds: []diffCmd{
			cmd("TYPE", k), cmd("SET", k, "v"), cmd("TYPE", k), cmd("SET", k, "1"), cmd("INCR", k), cmd("TYPE", k), cmd("DEL", k),
			cmd("TYPE", k), cmd("SET", k, "v", "PX", "1"), cmd("TYPE", k, k), cmd("TYPE"),
		}},
	}
}
