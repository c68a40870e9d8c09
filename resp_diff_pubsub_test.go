package zaris

import "testing"

// TestRESPMatchesRedisPubSub compares pub/sub on one node with a real redis-server: (un)subscribe replies
// and their counts, the commands a RESP2 subscriber may run, messages by channel, pattern and shard
// channel, PUBSUB's introspection and the errors, in RESP2 and RESP3. Messages are published from a
// second connection; across nodes, TestPubSubDeliversEveryMessageOnceInOrder counts them.
func TestRESPMatchesRedisPubSub(t *testing.T) {
	c1, c2, s1, s2, k, none := diffTag+"c1", diffTag+"c2", diffTag+"s1", diffTag+"s2", diffTag+"k", diffTag+"none"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	resp2 := []diffCmd{
		cmd("PUBSUB", "NUMPAT"), cmd("SET", k, "v"), cmd("PUBLISH", c1, "nobody"),
		cmd("SUBSCRIBE", c1, c2).replies(2), cmd("SUBSCRIBE", c1).replies(1), cmd("PING"), cmd("PING", "x"), cmd("PING", "x", "y"),
		cmd("GET", k), cmd("SET", k, "w"), cmd("ECHO", "x"), cmd("NOPE"), cmd("GET"),
		cmd("PUBLISH", c1, "m1").elsewhere(), receive(),
		cmd("PSUBSCRIBE", diffTag+"c*").replies(1),
		cmd("PUBLISH", c2, "m2").elsewhere(), receive(), receive(),
		cmd("PUBLISH", diffTag+"cx", "").elsewhere(), receive(),
		cmd("PUBSUB", "NUMSUB", c1, c2, none).elsewhere(), cmd("PUBSUB", "NUMPAT").elsewhere(),
		cmd("PUBSUB", "CHANNELS", diffTag+"*").elsewhere().sorted(), cmd("PUBSUB", "CHANNELS", diffTag+"c1").elsewhere(),
		cmd("UNSUBSCRIBE", c1), cmd("UNSUBSCRIBE", none), cmd("PUNSUBSCRIBE"), cmd("PUNSUBSCRIBE"), cmd("UNSUBSCRIBE", c2),
		cmd("UNSUBSCRIBE"), cmd("SUNSUBSCRIBE"), cmd("PING"), cmd("GET", k),
		cmd("SSUBSCRIBE", s1, s2).replies(2), cmd("SUBSCRIBE", c1), cmd("SPUBLISH", s1, "s").elsewhere(), receive(),
		cmd("PUBLISH", s1, "not a shard message").elsewhere(), cmd("SPUBLISH", c1, "not a channel message").elsewhere(),
		cmd("PUBSUB", "SHARDNUMSUB", s1, s2, none).elsewhere(), cmd("PUBSUB", "SHARDCHANNELS", diffTag+"s*").elsewhere().sorted(),
		cmd("PUBSUB", "SHARDNUMSUB").elsewhere(), cmd("SUNSUBSCRIBE", s2), cmd("SUNSUBSCRIBE", s1), cmd("PING"),
		cmd("UNSUBSCRIBE", c1), cmd("PING"),
		cmd("SUBSCRIBE"), cmd("PSUBSCRIBE"), cmd("SSUBSCRIBE"), cmd("PUBLISH", c1), cmd("PUBLISH", c1, "a", "b"),
		cmd("SPUBLISH", c1), cmd("PUBSUB"), cmd("PUBSUB", "FOO"), cmd("PUBSUB", "CHANNELS", "a", "b"),
		cmd("PUBSUB", "NUMPAT", "x"), cmd("PUBSUB", "SHARDCHANNELS", "a", "b"),
	}
	resp3 := []diffCmd{
		hello, cmd("SET", k, "v"), cmd("SUBSCRIBE", c1).replies(1), cmd("GET", k), cmd("PING"),
		cmd("PUBLISH", c1, "m1").elsewhere(), receive(), cmd("PSUBSCRIBE", diffTag+"c?"),
		cmd("PUBLISH", c1, "m2").elsewhere(), receive(), receive(), cmd("SSUBSCRIBE", s1),
		cmd("SPUBLISH", s1, "m3").elsewhere(), receive(),
		cmd("UNSUBSCRIBE"), cmd("UNSUBSCRIBE"), cmd("PUNSUBSCRIBE", diffTag+"c?"), cmd("SUNSUBSCRIBE", s1), cmd("SUNSUBSCRIBE"),
	}
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "pubsub resp2", cmds: resp2},
		{name: "pubsub resp3", cmds: resp3},
	})
}

// TestRESPMatchesRedisChannelPermissions compares users' channel permissions (Redis's &pattern) with a real
// redis-server given the same users: PUBLISH, SPUBLISH, SUBSCRIBE and SSUBSCRIBE of channels a user's
// patterns allow or not, PSUBSCRIBE of its pattern as written or of a narrower one, a refusal inside MULTI,
// and a user without channels.
func TestRESPMatchesRedisChannelPermissions(t *testing.T) {
	news, other := "news:"+diffTag+"a", "other:"+diffTag+"a"
	users := []RESPUser{
		{Name: "alice", Passwords: []string{"pw"}, Channels: []string{"news:*", "ops"}},
		{Name: "bob", Passwords: []string{"pw"}, Channels: []string{}},
		{Name: "carl", Passwords: []string{"pw"}, Channels: []string{"*"}},
	}
	d := newRESPDiff(t, func(cfg *Config) { cfg.RESPUsers = users },
		"--user", "alice", "on", ">pw", "~*", "&news:*", "&ops", "+@all",
		"--user", "bob", "on", ">pw", "~*", "resetchannels", "+@all",
		"--user", "carl", "on", ">pw", "~*", "allchannels", "+@all")
	d.run(t, []diffSeq{
		{name: "patterns", cmds: []diffCmd{
			cmd("AUTH", "alice", "pw"), cmd("PUBLISH", news, "m"), cmd("PUBLISH", other, "m"), cmd("PUBLISH", "ops", "m"),
			cmd("SPUBLISH", news, "m"), cmd("SPUBLISH", other, "m"), cmd("PUBLISH", "opsx", "m"),
			cmd("MULTI"), cmd("PUBLISH", other, "m"), cmd("EXEC"),
			cmd("SUBSCRIBE", news, other), cmd("PSUBSCRIBE", "news:a*"), cmd("PSUBSCRIBE", "n*"),
			cmd("SSUBSCRIBE", other), cmd("PING"), cmd("UNSUBSCRIBE", other),
			cmd("PSUBSCRIBE", "news:*"), cmd("PUBLISH", news, "hello").elsewhere(), receive(),
			cmd("PUNSUBSCRIBE"), cmd("SSUBSCRIBE", news), cmd("SUNSUBSCRIBE"), cmd("SUBSCRIBE", news, "ops").replies(2),
			cmd("UNSUBSCRIBE", news, "ops").replies(2), cmd("PUBSUB", "NUMSUB", news),
		}},
		{name: "none", cmds: []diffCmd{
			cmd("AUTH", "bob", "pw"), cmd("PUBLISH", news, "m"), cmd("SUBSCRIBE", news), cmd("PSUBSCRIBE", "*"),
			cmd("SPUBLISH", news, "m"), cmd("PUBSUB", "CHANNELS", "zzz"), cmd("UNSUBSCRIBE", news),
		}},
		{name: "all", cmds: []diffCmd{
			cmd("AUTH", "carl", "pw"), cmd("PUBLISH", other, "m"), cmd("PSUBSCRIBE", "x*y"), cmd("PUNSUBSCRIBE"),
		}},
	})
}
