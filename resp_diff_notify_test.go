package zaris

import (
	"strings"
	"testing"
)

// TestRESPMatchesRedisKeyspaceNotifications runs the same writes on a real redis-server and on the owner
// of their keys, each publishing every class of keyspace notification (KEA), and compares, besides the
// replies, the events a subscriber of both kinds of channel receives: which, in which order, for which key.
func TestRESPMatchesRedisKeyspaceNotifications(t *testing.T) {
	d := newRESPDiff(t, func(cfg *Config) { cfg.NotifyKeyspaceEvents = "KEAn" })
	redisMain := dialDiff(t, d.redisAddr)
	if reply := redisMain.do(t, []string{"CONFIG", "SET", "notify-keyspace-events", "KEAn"}); reply != "+OK\r\n" {
		t.Fatalf("CONFIG SET notify-keyspace-events on redis: %q", reply)
	}
	for i, seq := range notifySeqs() {
		t.Run(seq.name, func(t *testing.T) {
			tag := "{n" + string(rune('a'+i)) + "}"
			redis := runWithEvents(t, d.redisAddr, tag, seq.cmds)
			zaris := runWithEvents(t, d.cluster.owner(tag).RESPAddr(), tag, seq.cmds)
			for j := range max(len(redis), len(zaris)) {
				r, z := at(redis, j), at(zaris, j)
				if r != z {
					t.Fatalf("%s, line %d:\nredis: %q\nzaris: %q\nredis saw:\n  %s\nzaris saw:\n  %s", seq.name, j, r, z,
						strings.Join(redis, "\n  "), strings.Join(zaris, "\n  "))
				}
			}
		})
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(nothing)"
}

type notifySeq struct {
	name string
	cmds [][]string
}

// notifySeqs are the writes compared, keys under diffTag.
func notifySeqs() []notifySeq {
	k, k2, k3 := diffTag+"k", diffTag+"k2", diffTag+"k3"
	c := func(args ...string) []string { return args }
	return []notifySeq{
		{"strings", [][]string{
			c("SET", k, "v"), c("SET", k, "v", "EX", "100"), c("SET", k, "w", "NX"), c("SET", k2, "w", "XX"),
			c("SET", k, "x", "KEEPTTL"), c("SETNX", k, "y"), c("SETNX", k2, "y"), c("SETEX", k2, "100", "z"),
			c("PSETEX", k2, "100000", "z"), c("GETSET", k, "g"), c("MSET", k, "1", k2, "2"), c("MSETNX", k, "1", k3, "3"),
			c("MSETNX", k3, "3"), c("APPEND", k, "a"), c("APPEND", diffTag+"new", ""), c("SETRANGE", k, "0", "x"),
			c("SETRANGE", k, "0", ""), c("SETRANGE", diffTag+"none", "3", ""), c("SET", k, "5"), c("INCR", k),
			c("DECRBY", k, "3"), c("INCRBYFLOAT", k, "1.5"), c("SETBIT", k2, "3", "1"), c("SETBIT", k2, "3", "1"),
			c("GETDEL", k2), c("GETDEL", k2), c("GETEX", k, "EX", "100"), c("GETEX", k, "PERSIST"), c("GETEX", k, "PERSIST"),
			c("GETEX", k), c("GETEX", k, "PXAT", "1"), c("SET", k, "v", "EXAT", "1"),
		}},
		{"keys", [][]string{
			c("SET", k, "v"), c("SET", k2, "v"), c("DEL", k, k2, k3), c("SET", k, "v"), c("UNLINK", k),
			c("SET", k, "v"), c("EXPIRE", k, "100"), c("PEXPIRE", k, "100000", "NX"), c("EXPIRE", k, "50", "GT"),
			c("PERSIST", k), c("PERSIST", k), c("EXPIREAT", k, "1"), c("EXPIRE", k, "10"), c("SET", k, "v"),
			c("PEXPIREAT", k, "4102444800000"), c("EXPIRE", k, "0"), c("SET", k, "v"), c("RENAME", k, k2),
			c("SET", k, "v"), c("RENAME", k, k2), c("RENAMENX", k2, k3), c("SET", k, "v"), c("RENAMENX", k, k3),
			c("RENAME", k3, k3), c("COPY", k3, k), c("COPY", k3, k), c("COPY", k3, k, "REPLACE"), c("EXISTS", k),
		}},
		{"lists", [][]string{
			c("LPUSH", k, "a", "b"), c("RPUSH", k, "c"), c("LPUSHX", k2, "x"), c("RPUSHX", k, "d"), c("LPOP", k),
			c("RPOP", k, "2"), c("LPOP", k, "0"), c("RPUSH", k, "1", "2", "3", "4"), c("LTRIM", k, "0", "-1"),
			c("LTRIM", k, "1", "2"), c("LSET", k, "0", "x"), c("LINSERT", k, "BEFORE", "x", "y"),
			c("LINSERT", k, "AFTER", "nope", "z"), c("LREM", k, "0", "nope"), c("LREM", k, "1", "y"),
			c("RPUSH", k2, "q"), c("LMOVE", k2, k, "RIGHT", "LEFT"), c("RPOPLPUSH", k, k3), c("LMPOP", "2", k2, k, "LEFT", "COUNT", "10"),
			c("BLPOP", k3, "1"), c("RPUSH", k, "a"), c("BRPOP", k, "1"), c("RPUSH", k, "a", "b"), c("LTRIM", k, "5", "6"),
			c("RPUSH", k, "a"), c("BLMOVE", k, k, "LEFT", "RIGHT", "1"), c("LREM", k, "0", "a"), c("RPUSH", k, "a"),
			c("BLMPOP", "1", "1", k, "RIGHT"),
		}},
		{"hashes", [][]string{
			c("HSET", k, "f", "1", "g", "2"), c("HSET", k, "f", "1"), c("HSETNX", k, "f", "2"), c("HSETNX", k, "h", "3"),
			c("HMSET", k, "i", "4"), c("HINCRBY", k, "f", "5"), c("HINCRBYFLOAT", k, "f", "1.5"), c("HDEL", k, "nope"),
			c("HDEL", k, "f", "g"), c("HDEL", k, "h", "i"),
		}},
		{"sets", [][]string{
			c("SADD", k, "a", "b", "c"), c("SADD", k, "a"), c("SREM", k, "nope"), c("SREM", k, "a", "b"), c("SPOP", k),
			c("SADD", k, "x"), c("SPOP", k, "0"), c("SPOP", k, "10"), c("SADD", k, "w"), c("SPOP", k, "1"), c("SADD", k, "a", "b"), c("SADD", k2, "b", "c"),
			c("SMOVE", k, k2, "a"), c("SMOVE", k, k2, "nope"), c("SMOVE", k, k3, "b"), c("SINTERSTORE", k, k2, k3),
			c("SADD", k, "z"), c("SINTERSTORE", k, k2, k3), c("SUNIONSTORE", k, k2, k3), c("SDIFFSTORE", k, k2, k3),
			c("SDIFFSTORE", k, k, k), c("SINTERSTORE", k, diffTag+"none"),
		}},
		{"sorted sets", [][]string{
			c("ZADD", k, "1", "a", "2", "b", "3", "c"), c("ZADD", k, "1", "a"), c("ZADD", k, "5", "a"),
			c("ZADD", k, "INCR", "1", "a"), c("ZADD", k, "NX", "INCR", "1", "a"), c("ZADD", k, "XX", "1", "incr"),
			c("ZINCRBY", k, "2", "b"), c("ZREM", k, "nope"), c("ZREM", k, "b"), c("ZPOPMIN", k), c("ZPOPMAX", k, "0"),
			c("ZADD", k, "1", "x", "2", "y"), c("ZPOPMAX", k, "5"), c("ZADD", k, "1", "x", "2", "y"), c("ZMPOP", "1", k, "MIN"),
			c("BZPOPMAX", k, "1"), c("ZADD", k2, "1", "p", "2", "q"), c("ZADD", k3, "2", "q"), c("ZUNIONSTORE", k, "2", k2, k3),
			c("ZINTERSTORE", k, "2", k2, k3), c("ZDIFFSTORE", k, "2", k2, k3), c("ZDIFFSTORE", k, "1", diffTag+"none"),
			c("ZRANGESTORE", k, k2, "0", "0"), c("ZRANGESTORE", k, k2, "5", "6"), c("ZADD", k, "1", "a"),
			c("BZMPOP", "1", "1", k, "MAX", "COUNT", "2"),
		}},
		{"key misses", [][]string{
			c("CONFIG", "SET", "notify-keyspace-events", "Km"), c("CONFIG", "GET", "notify-keyspace-events"), c("GET", k),
			c("SET", k, "v"), c("GET", k), c("MGET", k, k2, k3), c("EXISTS", k2), c("TTL", k2), c("HGET", k2, "f"),
			c("LRANGE", k2, "0", "-1"), c("SMEMBERS", k2), c("ZSCORE", k2, "m"), c("STRLEN", k2), c("TYPE", k2),
			c("SINTER", k, k2), c("LINDEX", k2, "0"), c("ZRANGE", k2, "0", "-1"), c("HGETALL", k2),
			c("CONFIG", "SET", "notify-keyspace-events", "KEA"), c("CONFIG", "GET", "notify-keyspace-events"),
		}},
		{"transactions", [][]string{
			c("MULTI"), c("SET", k, "1"), c("INCR", k), c("LPUSH", k, "x"), c("SET", k2, "2"), c("EXEC"),
			c("MULTI"), c("DEL", k), c("EXPIRE", k2, "100"), c("DISCARD"), c("GET", k),
		}},
	}
}

// runWithEvents sends cmds, with diffTag replaced by tag, to the server at addr, and returns each reply
// followed by the keyspace notifications of tag's keys a second connection received for it (for a
// transaction's commands, at its EXEC).
func runWithEvents(t *testing.T, addr, tag string, cmds [][]string) []string {
	t.Helper()
	sub, main := dialDiff(t, addr), dialDiff(t, addr)
	done := tag + "done"
	sub.do(t, []string{"PSUBSCRIBE", "__key*__:*"})
	sub.do(t, []string{"SUBSCRIBE", done})
	var out []string
	inMulti := false
	for _, args := range cmds {
		args = tagged(args, tag)
		out = append(out, quoteArgs(args)+" -> "+main.do(t, args))
		switch strings.ToUpper(args[0]) {
		case "MULTI":
			inMulti = true
		case "EXEC", "DISCARD":
			inMulti = false
		}
		if inMulti {
			continue
		}
		main.do(t, []string{"PUBLISH", done, "x"})
		for {
			msg := sub.read(t, "a keyspace notification")
			if strings.Contains(msg, done) {
				break
			}
			if strings.Contains(msg, tag) {
				out = append(out, "  event "+notification(msg))
			}
		}
	}
	return out
}

// notification is the channel and payload of a pmessage as RESP2 carries it.
func notification(msg string) string {
	parts := strings.Split(msg, "\r\n")
	if len(parts) < 9 {
		return msg
	}
	return parts[6] + " " + parts[8]
}

func tagged(args []string, tag string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, diffTag, tag)
	}
	return out
}
