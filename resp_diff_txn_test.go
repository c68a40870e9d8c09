package zaris

import (
	"strings"
	"testing"
)

// TestRESPMatchesRedisTransactions compares MULTI, EXEC, DISCARD, WATCH and UNWATCH with a real
// redis-server: queued replies, runtime errors inside EXEC, commands refused while queueing, watched keys
// changed by another client or by the same one, in RESP2 and RESP3.
func TestRESPMatchesRedisTransactions(t *testing.T) {
	newRESPDiff(t, nil).run(t, txnSeqs())
}

// anyHello maps HELLO's reply, which names the server's mode and the connection's id, to one canonical
// reply. Any reply that is not a map is kept as it is.
func anyHello(reply string) string {
	if strings.HasPrefix(reply, "%") {
		return "hello"
	}
	return reply
}

func txnSeqs() []diffSeq {
	const k, h, l, s = diffTag + "k", diffTag + "h", diffTag + "l", diffTag + "s"
	return []diffSeq{
		{name: "exec", cmds: []diffCmd{
			cmd("MULTI"), cmd("SET", k, "1"), cmd("INCR", k), cmd("GET", k), cmd("HSET", h, "f", "v", "g", "w"),
			cmd("LPUSH", l, "a", "b"), cmd("HGET", h, "f"), cmd("LRANGE", l, "0", "-1"), cmd("EXISTS", k, h, l),
			cmd("EXEC"), cmd("GET", k), cmd("HGETALL", h).unordered(2), cmd("LLEN", l),
		}},
		{name: "several keys", cmds: []diffCmd{
			cmd("MULTI"), cmd("MSET", k, "a", s, "b"), cmd("MGET", k, s, h), cmd("DEL", k, h), cmd("UNLINK", s), cmd("EXEC"),
			cmd("EXISTS", k, s),
		}},
		{name: "runtime errors", cmds: []diffCmd{
			cmd("SET", s, "text"), cmd("MULTI"), cmd("INCR", s), cmd("LPUSH", s, "x"), cmd("SET", k, "v"), cmd("HSET", s, "f", "v"),
			cmd("INCRBY", k, "x"), cmd("GET", k), cmd("MSET", k, "a", s), cmd("EXEC"), cmd("GET", s), cmd("GET", k),
		}},
		{name: "errors while queueing", cmds: []diffCmd{
			cmd("SET", k, "0"), cmd("MULTI"), cmd("SET", k, "1"), cmd("NOSUCHCOMMAND", k, "x"), cmd("INCR", k), cmd("GET"),
			cmd("EXEC"), cmd("GET", k), cmd("EXEC"),
		}},
		{name: "wrong arity", cmds: []diffCmd{
			cmd("MULTI"), cmd("SET", k), cmd("SET", k, "1"), cmd("EXEC"), cmd("EXISTS", k),
			cmd("MULTI"), cmd("DISCARD", "x"), cmd("SET", k, "2"), cmd("EXEC"), cmd("EXISTS", k),
			cmd("MULTI"), cmd("MULTI", "x"), cmd("EXEC"), cmd("MULTI"), cmd("WATCH"), cmd("EXEC"),
		}},
		{name: "exec with arguments", cmds: []diffCmd{
			cmd("MULTI"), cmd("SET", k, "1"), cmd("EXEC", "x"), cmd("EXEC"), cmd("EXISTS", k), cmd("EXEC", "x"),
		}},
		{name: "discard", cmds: []diffCmd{
			cmd("MULTI"), cmd("SET", k, "1"), cmd("INCR", k), cmd("DISCARD"), cmd("EXISTS", k), cmd("DISCARD"), cmd("EXEC"),
			cmd("MULTI"), cmd("EXEC"),
		}},
		{name: "nested multi", cmds: []diffCmd{
			cmd("MULTI"), cmd("SET", k, "1"), cmd("MULTI"), cmd("INCR", k), cmd("EXEC"), cmd("GET", k),
		}},
		{name: "no keys", cmds: []diffCmd{
			cmd("MULTI"), cmd("PING"), cmd("ECHO", "hi"), cmd("PING", "x"), cmd("CLIENT", "SETNAME", "txn"), cmd("EXEC"),
			cmd("CLIENT", "GETNAME"),
		}},
		{name: "watch and a change elsewhere", cmds: []diffCmd{
			cmd("SET", k, "0"), cmd("WATCH", k), cmd("GET", k), cmd("SET", k, "other").elsewhere(), cmd("MULTI"),
			cmd("SET", k, "mine"), cmd("EXEC"), cmd("GET", k), cmd("MULTI"), cmd("SET", k, "again"), cmd("EXEC"), cmd("GET", k),
		}},
		{name: "watch a missing key created elsewhere", cmds: []diffCmd{
			cmd("WATCH", k, s), cmd("SET", s, "1").elsewhere(), cmd("MULTI"), cmd("SET", k, "1"), cmd("EXEC"), cmd("EXISTS", k),
		}},
		{name: "watch unchanged", cmds: []diffCmd{
			cmd("SET", k, "1"), cmd("WATCH", k, s), cmd("DEL", s).elsewhere(), cmd("GET", k).elsewhere(), cmd("MULTI"),
			cmd("INCR", k), cmd("EXEC"), cmd("GET", k),
		}},
		{name: "watch and a change of a collection", cmds: []diffCmd{
			cmd("HSET", h, "f", "1"), cmd("WATCH", h), cmd("HINCRBY", h, "f", "1").elsewhere(), cmd("MULTI"),
			cmd("HINCRBY", h, "f", "10"), cmd("EXEC"), cmd("HGET", h, "f"),
		}},
		{name: "watch and a change by the same client", cmds: []diffCmd{
			cmd("WATCH", k), cmd("SET", k, "1"), cmd("MULTI"), cmd("GET", k), cmd("EXEC"), cmd("GET", k),
		}},
		{name: "unwatch", cmds: []diffCmd{
			cmd("WATCH", k), cmd("SET", k, "other").elsewhere(), cmd("UNWATCH"), cmd("MULTI"), cmd("SET", k, "mine"),
			cmd("EXEC"), cmd("GET", k),
		}},
		{name: "unwatch inside multi", cmds: []diffCmd{
			cmd("WATCH", k), cmd("MULTI"), cmd("UNWATCH"), cmd("SET", k, "other").elsewhere(), cmd("SET", k, "mine"),
			cmd("EXEC"), cmd("GET", k),
		}},
		{name: "watch inside multi", cmds: []diffCmd{
			cmd("MULTI"), cmd("SET", k, "1"), cmd("WATCH", k), cmd("INCR", k), cmd("EXEC"), cmd("GET", k),
		}},
		{name: "exec and discard forget the watches", cmds: []diffCmd{
			cmd("WATCH", k), cmd("MULTI"), cmd("EXEC"), cmd("SET", k, "1").elsewhere(), cmd("MULTI"), cmd("INCR", k), cmd("EXEC"),
			cmd("WATCH", k), cmd("MULTI"), cmd("DISCARD"), cmd("SET", k, "5").elsewhere(), cmd("MULTI"), cmd("INCR", k),
			cmd("EXEC"), cmd("WATCH", k), cmd("SET", k, "9").elsewhere(), cmd("EXEC"), cmd("MULTI"), cmd("INCR", k),
			cmd("EXEC"),
		}},
		{name: "resp3", cmds: []diffCmd{
			{args: []string{"HELLO", "3"}, norm: anyHello}, cmd("HSET", h, "f", "1"), cmd("SADD", s, "m"), cmd("MULTI"),
			cmd("HGETALL", h), cmd("SMEMBERS", s), cmd("ZADD", diffTag+"z", "1.5", "m"), cmd("ZSCORE", diffTag+"z", "m"),
			cmd("GET", k), cmd("EXEC"), cmd("WATCH", k), cmd("SET", k, "1").elsewhere(), cmd("MULTI"), cmd("GET", k),
			cmd("EXEC"),
		}},
	}
}
