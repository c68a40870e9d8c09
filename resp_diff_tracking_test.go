package zaris

import "testing"

// TestRESPMatchesRedisTracking compares CLIENT TRACKING, CLIENT CACHING and CLIENT TRACKINGINFO with a real
// redis-server, in RESP3: the replies, the errors of CLIENT CACHING out of place, and the invalidation
// pushes a connection receives for its own writes of keys it read and for another client's, as one reply
// stream.
func TestRESPMatchesRedisTracking(t *testing.T) {
	newRESPDiff(t, nil).run(t, trackingSeqs())
}

func trackingSeqs() []diffSeq {
	const k, other = diffTag + "k", diffTag + "other"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	return []diffSeq{
		{name: "default mode", cmds: []diffCmd{
			hello, cmd("SET", k, "1"), cmd("CLIENT", "TRACKINGINFO"), cmd("CLIENT", "CACHING", "YES"),
			cmd("CLIENT", "TRACKING", "ON"), cmd("CLIENT", "TRACKINGINFO"), cmd("GET", k), cmd("SET", other, "x"),
			cmd("SET", k, "2"), cmd("PING"), cmd("GET", k), cmd("CLIENT", "TRACKING", "OFF"), cmd("SET", k, "3"), cmd("PING"),
		}},
		{name: "optin", cmds: []diffCmd{
			hello, cmd("SET", k, "1"), cmd("SET", other, "1"), cmd("CLIENT", "TRACKING", "ON", "OPTIN"),
			cmd("CLIENT", "TRACKINGINFO"), cmd("CLIENT", "CACHING", "NO"), cmd("GET", k), cmd("CLIENT", "CACHING", "YES"),
			cmd("CLIENT", "TRACKINGINFO"), cmd("GET", other), cmd("SET", k, "2"), cmd("SET", other, "2"), cmd("PING"),
			cmd("CLIENT", "TRACKING", "ON", "OPTOUT"), cmd("CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"),
		}},
		{name: "optout", cmds: []diffCmd{
			hello, cmd("SET", k, "1"), cmd("SET", other, "1"), cmd("CLIENT", "TRACKING", "ON", "OPTOUT"),
			cmd("CLIENT", "CACHING", "YES"), cmd("CLIENT", "CACHING", "NO"), cmd("GET", k), cmd("GET", other),
			cmd("SET", k, "2"), cmd("SET", other, "2"), cmd("PING"),
		}},
		{name: "another client's write", cmds: []diffCmd{
			hello, cmd("SET", k, "1"), cmd("CLIENT", "TRACKING", "ON"), cmd("GET", k), cmd("SET", k, "2").elsewhere(),
			cmd("PING"), cmd("PING"),
		}},
		{name: "a transaction", cmds: []diffCmd{
			hello, cmd("SET", k, "1"), cmd("CLIENT", "TRACKING", "ON", "OPTIN"), cmd("CLIENT", "CACHING", "YES"),
			cmd("MULTI"), cmd("GET", k), cmd("EXEC"), cmd("MSET", k, "2", other, "3").elsewhere(), cmd("PING"), cmd("PING"),
		}},
	}
}

// TestRESPMatchesRedisReset compares RESET with a real redis-server: inside a transaction, with watched keys,
// with tracking on, subscribed, in RESP3 and with a client name, each followed by what shows the state
// was reset.
func TestRESPMatchesRedisReset(t *testing.T) {
	const k, ch = diffTag + "k", diffTag + "ch"
	hello := cmd("HELLO", "3")
	hello.norm = anyHello
	newRESPDiff(t, nil).run(t, []diffSeq{
		{name: "reset", cmds: []diffCmd{
			cmd("RESET"), cmd("RESET", "x"), cmd("SET", k, "1"), cmd("MULTI"), cmd("SET", k, "2"), cmd("RESET"),
			cmd("EXEC"), cmd("GET", k), cmd("WATCH", k), cmd("RESET"), cmd("SET", k, "3").elsewhere(), cmd("MULTI"),
			cmd("GET", k), cmd("EXEC"), cmd("CLIENT", "SETNAME", "app"), cmd("RESET"), cmd("CLIENT", "GETNAME"),
			cmd("SUBSCRIBE", ch), cmd("RESET"), cmd("PING"), cmd("PUBLISH", ch, "m").elsewhere(), cmd("PING"),
		}},
		{name: "reset resp3", cmds: []diffCmd{
			hello, cmd("CLIENT", "TRACKING", "ON"), cmd("GET", k), cmd("RESET"), cmd("CLIENT", "TRACKINGINFO"),
			cmd("SET", k, "4").elsewhere(), cmd("PING"), cmd("HGETALL", k+"h"), cmd("SUBSCRIBE", ch), cmd("RESET"),
			cmd("PUBLISH", ch, "m").elsewhere(), cmd("PING"), cmd("CONFIG", "GET", "maxmemory-policy"),
		}},
	})
}
