package zaris

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// The generator of the differential fuzzer: random commands over the small key space of diffFuzzKeys, with
// valid and invalid arguments alike.

// fuzzGen draws the parts of commands from one random source.
type fuzzGen struct {
	rng   *rand.Rand
	group string // the group of the command being generated
	pause bool   // the command being generated may set a TTL of a few milliseconds
}

// generateSequence returns a random sequence of at most diffFuzzSeqLen commands.
func generateSequence(rng *rand.Rand) []fuzzCmd {
	g := &fuzzGen{rng: rng}
	n := 1 + rng.IntN(diffFuzzSeqLen)
	var cmds []fuzzCmd
	for len(cmds) < n {
		if rng.IntN(12) == 0 {
			cmds = append(cmds, g.transaction()...)
			continue
		}
		cmds = append(cmds, g.command(false))
	}
	return cmds
}

// command returns one command; inTxn leaves out those that a transaction refuses or that a cluster client
// cannot send to one node.
func (g *fuzzGen) command(inTxn bool) fuzzCmd {
	for {
		name, gen := g.pick()
		if inTxn && fuzzNotInTxn[name] {
			continue
		}
		g.pause = false
		if !inTxn {
			g.group = ""
		}
		args := append([]string{g.casing(name)}, gen(g)...)
		args = g.mangleArity(args)
		return fuzzCmd{args: args, group: g.group, pause: g.pause, aside: !inTxn && g.rng.IntN(15) == 0}
	}
}

// fuzzNotInTxn are the commands a generated transaction leaves out: they read across the key space, set the
// state of every connection of a cluster client, or are refused inside MULTI by Zaris alone
// (docs/redis-differences.md).
var fuzzNotInTxn = map[string]bool{"keys": true, "scan": true, "dbsize": true, "hello": true, "client": true,
	"select": true, "readonly": true, "readwrite": true, "multi": true, "exec": true, "discard": true,
	"auth": true}

// transaction returns MULTI, a few commands on keys of one group, and EXEC or DISCARD, sometimes after a
// WATCH and a write by another client.
func (g *fuzzGen) transaction() []fuzzCmd {
	group := diffFuzzGroups[g.rng.IntN(len(diffFuzzGroups))]
	g.group = group
	var cmds []fuzzCmd
	if g.rng.IntN(2) == 0 {
		cmds = append(cmds, fuzzCmd{args: append([]string{"WATCH"}, g.keys(1+g.rng.IntN(2))...), group: group})
		if g.rng.IntN(2) == 0 {
			c := g.command(true)
			c.aside, c.group = true, group
			cmds = append(cmds, c)
		}
	}
	cmds = append(cmds, fuzzCmd{args: []string{"MULTI"}, group: group})
	pause := false
	for range g.rng.IntN(5) {
		g.group = group
		c := g.command(true)
		c.group, pause = group, pause || c.pause
		cmds = append(cmds, c)
	}
	end := "EXEC"
	switch g.rng.IntN(8) {
	case 0:
		end = "DISCARD"
	case 1:
		end = "UNWATCH" // leaves the transaction open: its commands queue until the sequence ends
	}
	return append(cmds, fuzzCmd{args: []string{end}, group: group, pause: pause})
}

// pick returns a command name and its argument generator, uniformly over the table.
func (g *fuzzGen) pick() (string, func(*fuzzGen) []string) {
	i := g.rng.IntN(len(fuzzCommands))
	return fuzzCommands[i].name, fuzzCommands[i].args
}

// casing writes a command name in upper, lower or mixed case: names are case-insensitive.
func (g *fuzzGen) casing(name string) string {
	switch g.rng.IntN(6) {
	case 0:
		return name
	case 1:
		b := []byte(name)
		for i := range b {
			if g.rng.IntN(2) == 0 {
				b[i] = strings.ToUpper(string(b[i]))[0]
			}
		}
		return string(b)
	}
	return strings.ToUpper(name)
}

// mangleArity now and then drops the last arguments or adds one: wrong arity must be refused alike.
func (g *fuzzGen) mangleArity(args []string) []string {
	switch g.rng.IntN(25) {
	case 0:
		return args[:1+g.rng.IntN(len(args))]
	case 1:
		return append(args, g.value())
	}
	return args
}

// fuzzCommand is one command the endpoint serves and how to draw its arguments.
type fuzzCommand struct {
	name string
	args func(*fuzzGen) []string
}

var fuzzCommands = []fuzzCommand{
	// strings and keys
	{"get", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"set", (*fuzzGen).setArgs},
	{"set", func(g *fuzzGen) []string { return []string{g.key(), g.value()} }},
	{"del", func(g *fuzzGen) []string { return g.keys(1 + g.rng.IntN(3)) }},
	{"unlink", func(g *fuzzGen) []string { return g.keys(1 + g.rng.IntN(3)) }},
	{"exists", func(g *fuzzGen) []string { return g.keys(1 + g.rng.IntN(4)) }},
	{"mget", func(g *fuzzGen) []string { return g.keys(1 + g.rng.IntN(4)) }},
	{"mset", func(g *fuzzGen) []string {
		keys := g.keys(1 + g.rng.IntN(3))
		var args []string
		for _, k := range keys {
			args = append(args, k, g.value())
		}
		return args
	}},
	{"incr", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"decr", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"incrby", func(g *fuzzGen) []string { return []string{g.key(), g.integer()} }},
	{"decrby", func(g *fuzzGen) []string { return []string{g.key(), g.integer()} }},
	{"incrbyfloat", func(g *fuzzGen) []string { return []string{g.key(), g.float()} }},
	{"append", func(g *fuzzGen) []string { return []string{g.key(), g.value()} }},
	{"getdel", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"getex", (*fuzzGen).getexArgs},
	{"setrange", func(g *fuzzGen) []string { return []string{g.key(), g.offset(), g.value()} }},
	{"getrange", func(g *fuzzGen) []string { return []string{g.key(), g.integer(), g.integer()} }},
	{"strlen", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"type", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"expire", func(g *fuzzGen) []string { return append([]string{g.key(), g.seconds()}, g.expireOptions()...) }},
	{"pexpire", func(g *fuzzGen) []string { return append([]string{g.key(), g.millis()}, g.expireOptions()...) }},
	{"ttl", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"pttl", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"persist", func(g *fuzzGen) []string { return []string{g.key()} }},
	// hashes
	{"hset", func(g *fuzzGen) []string { return append([]string{g.key()}, g.pairs(g.field)...) }},
	{"hget", func(g *fuzzGen) []string { return []string{g.key(), g.field()} }},
	{"hmget", func(g *fuzzGen) []string { return append([]string{g.key()}, g.several(g.field)...) }},
	{"hdel", func(g *fuzzGen) []string { return append([]string{g.key()}, g.several(g.field)...) }},
	{"hgetall", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"hlen", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"hincrby", func(g *fuzzGen) []string { return []string{g.key(), g.field(), g.integer()} }},
	{"hexists", func(g *fuzzGen) []string { return []string{g.key(), g.field()} }},
	// sets
	{"sadd", func(g *fuzzGen) []string { return append([]string{g.key()}, g.several(g.field)...) }},
	{"srem", func(g *fuzzGen) []string { return append([]string{g.key()}, g.several(g.field)...) }},
	{"smembers", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"sismember", func(g *fuzzGen) []string { return []string{g.key(), g.field()} }},
	{"scard", func(g *fuzzGen) []string { return []string{g.key()} }},
	// lists
	{"lpush", func(g *fuzzGen) []string { return append([]string{g.key()}, g.several(g.value)...) }},
	{"rpush", func(g *fuzzGen) []string { return append([]string{g.key()}, g.several(g.value)...) }},
	{"lpop", (*fuzzGen).popArgs},
	{"rpop", (*fuzzGen).popArgs},
	{"lrange", func(g *fuzzGen) []string { return []string{g.key(), g.index(), g.index()} }},
	{"llen", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"lindex", func(g *fuzzGen) []string { return []string{g.key(), g.index()} }},
	{"ltrim", func(g *fuzzGen) []string { return []string{g.key(), g.index(), g.index()} }},
	// sorted sets
	{"zadd", (*fuzzGen).zaddArgs},
	{"zrem", func(g *fuzzGen) []string { return append([]string{g.key()}, g.several(g.field)...) }},
	{"zscore", func(g *fuzzGen) []string { return []string{g.key(), g.field()} }},
	{"zrange", (*fuzzGen).zrangeArgs},
	{"zrank", func(g *fuzzGen) []string { return []string{g.key(), g.field()} }},
	{"zcard", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"zincrby", func(g *fuzzGen) []string { return []string{g.key(), g.score(), g.field()} }},
	// commands composed of several key operations
	{"smismember", func(g *fuzzGen) []string { return append([]string{g.key()}, g.several(g.field)...) }},
	{"zmscore", func(g *fuzzGen) []string { return append([]string{g.key()}, g.several(g.field)...) }},
	{"hsetnx", func(g *fuzzGen) []string { return []string{g.key(), g.field(), g.value()} }},
	{"zrevrank", func(g *fuzzGen) []string { return []string{g.key(), g.field()} }},
	{"zpopmin", (*fuzzGen).popArgs},
	{"zpopmax", (*fuzzGen).popArgs},
	{"smove", func(g *fuzzGen) []string { return append(g.keys(2), g.field()) }},
	{"rpoplpush", func(g *fuzzGen) []string { return g.keys(2) }},
	{"lmove", func(g *fuzzGen) []string {
		end := g.oneOf("LEFT", "RIGHT", "left", "right", "up")
		return append(g.keys(2), end(), end())
	}},
	// blocking pops, with timeouts short enough to wait on an empty list, or invalid ones
	{"blpop", func(g *fuzzGen) []string { return append(g.keys(1+g.rng.IntN(3)), g.blockTimeout()) }},
	{"brpop", func(g *fuzzGen) []string { return append(g.keys(1+g.rng.IntN(3)), g.blockTimeout()) }},
	{"brpoplpush", func(g *fuzzGen) []string { return append(g.keys(2), g.blockTimeout()) }},
	{"blmove", func(g *fuzzGen) []string {
		end := g.oneOf("LEFT", "RIGHT", "left", "right", "up")
		return append(g.keys(2), end(), end(), g.blockTimeout())
	}},
	{"bzpopmin", func(g *fuzzGen) []string { return append(g.keys(1+g.rng.IntN(3)), g.blockTimeout()) }},
	{"bzpopmax", func(g *fuzzGen) []string { return append(g.keys(1+g.rng.IntN(3)), g.blockTimeout()) }},
	{"lmpop", func(g *fuzzGen) []string { return g.mpopArgs("LEFT", "RIGHT") }},
	{"zmpop", func(g *fuzzGen) []string { return g.mpopArgs("MIN", "MAX") }},
	{"blmpop", func(g *fuzzGen) []string { return append([]string{g.blockTimeout()}, g.mpopArgs("LEFT", "RIGHT")...) }},
	{"bzmpop", func(g *fuzzGen) []string { return append([]string{g.blockTimeout()}, g.mpopArgs("MIN", "MAX")...) }},
	{"zunion", func(g *fuzzGen) []string { return g.zcombineArgs(true, true) }},
	{"zinter", func(g *fuzzGen) []string { return g.zcombineArgs(true, true) }},
	{"zdiff", func(g *fuzzGen) []string { return g.zcombineArgs(false, true) }},
	{"zunionstore", func(g *fuzzGen) []string { return append([]string{g.key()}, g.zcombineArgs(true, false)...) }},
	{"zinterstore", func(g *fuzzGen) []string { return append([]string{g.key()}, g.zcombineArgs(true, false)...) }},
	{"zdiffstore", func(g *fuzzGen) []string { return append([]string{g.key()}, g.zcombineArgs(false, false)...) }},
	{"zrangestore", func(g *fuzzGen) []string { return append([]string{g.key()}, g.zrangeArgs()...) }},
	{"zintercard", func(g *fuzzGen) []string {
		keys := g.keys(1 + g.rng.IntN(3))
		args := append([]string{strconv.Itoa(len(keys))}, keys...)
		if g.rng.IntN(2) == 0 {
			args = append(args, g.oneOf("LIMIT", "limit", "nope")(), g.oneOf("0", "1", "2", "-1", "x")())
		}
		return args
	}},
	{"msetnx", func(g *fuzzGen) []string {
		var args []string
		for _, k := range g.keys(1 + g.rng.IntN(3)) {
			args = append(args, k, g.value())
		}
		return args
	}},
	{"sinter", func(g *fuzzGen) []string { return g.keys(1 + g.rng.IntN(3)) }},
	{"sunion", func(g *fuzzGen) []string { return g.keys(1 + g.rng.IntN(3)) }},
	{"sdiff", func(g *fuzzGen) []string { return g.keys(1 + g.rng.IntN(3)) }},
	{"sinterstore", func(g *fuzzGen) []string { return g.keys(2 + g.rng.IntN(3)) }},
	{"sunionstore", func(g *fuzzGen) []string { return g.keys(2 + g.rng.IntN(3)) }},
	{"sdiffstore", func(g *fuzzGen) []string { return g.keys(2 + g.rng.IntN(3)) }},
	{"sintercard", func(g *fuzzGen) []string {
		keys := g.keys(1 + g.rng.IntN(3))
		n := g.oneOf(strconv.Itoa(len(keys)), strconv.Itoa(len(keys)), "0", "-1", "x", strconv.Itoa(len(keys)+1))()
		args := append([]string{n}, keys...)
		if g.rng.IntN(2) == 0 {
			args = append(args, g.oneOf("LIMIT", "limit", "nope")(), g.oneOf("0", "1", "2", "-1", "x")())
		}
		return args
	}},
	{"hincrbyfloat", func(g *fuzzGen) []string { return []string{g.key(), g.field(), g.float()} }},
	{"zcount", func(g *fuzzGen) []string { return []string{g.key(), g.score(), g.score()} }},
	{"lpos", (*fuzzGen).lposArgs},
	{"lset", func(g *fuzzGen) []string { return []string{g.key(), g.index(), g.value()} }},
	{"linsert", func(g *fuzzGen) []string {
		return []string{g.key(), g.oneOf("BEFORE", "AFTER", "before", "after", "middle")(), g.value(), g.value()}
	}},
	{"lrem", func(g *fuzzGen) []string { return []string{g.key(), g.index(), g.value()} }},
	// copies of a whole key and its expiry
	{"rename", func(g *fuzzGen) []string { return g.keys(2) }},
	{"renamenx", func(g *fuzzGen) []string { return g.keys(2) }},
	{"copy", func(g *fuzzGen) []string {
		return append(g.keys(2), g.upTo(2, g.oneOf("REPLACE", "replace", "DB", "0", "1", "16", "x", "nope"))...)
	}},
	{"expiretime", func(g *fuzzGen) []string { return []string{g.key()} }},
	{"pexpiretime", func(g *fuzzGen) []string { return []string{g.key()} }},
	// the key space
	{"keys", func(g *fuzzGen) []string { return []string{g.pattern()} }},
	{"scan", (*fuzzGen).scanArgs},
	{"setbit", func(g *fuzzGen) []string {
		return []string{g.key(), g.oneOf("0", "1", "7", "8", "15", "63", "-1", "x")(), g.oneOf("0", "1", "1", "2", "x")()}
	}},
	{"getbit", func(g *fuzzGen) []string { return []string{g.key(), g.oneOf("0", "1", "7", "8", "40", "-1", "x")()} }},
	{"bitcount", (*fuzzGen).bitcountArgs},
	{"lcs", func(g *fuzzGen) []string {
		args := []string{g.key(), g.key()}
		for range g.rng.IntN(3) {
			args = append(args, g.oneOf("LEN", "IDX", "WITHMATCHLEN", "MINMATCHLEN", "1", "3", "-1", "x")())
		}
		return args
	}},
	{"hscan", func(g *fuzzGen) []string { return append([]string{g.key()}, g.scanArgs()...) }},
	{"sscan", func(g *fuzzGen) []string { return append([]string{g.key()}, g.scanArgs()...) }},
	{"zscan", func(g *fuzzGen) []string { return append([]string{g.key()}, g.scanArgs()...) }},
	{"dbsize", func(*fuzzGen) []string { return nil }},
	// connection
	{"ping", func(g *fuzzGen) []string { return g.upTo(1, g.value) }},
	{"echo", func(g *fuzzGen) []string { return []string{g.value()} }},
	{"hello", func(g *fuzzGen) []string { return g.upTo(1, g.oneOf("2", "3", "4", "1", "x", "-1")) }},
	{"select", func(g *fuzzGen) []string { return []string{g.oneOf("0", "1", "x", "-1", "99999999999999999999")()} }},
	{"client", func(g *fuzzGen) []string {
		if g.rng.IntN(2) == 0 {
			return []string{"GETNAME"}
		}
		return []string{"SETNAME", g.oneOf("app", "", "a b", "x\n", "ok-name")()}
	}},
	{"readonly", func(*fuzzGen) []string { return nil }},
	{"readwrite", func(*fuzzGen) []string { return nil }},
	{"asking", func(*fuzzGen) []string { return nil }},
	{"auth", func(g *fuzzGen) []string { return g.upTo(2, g.value) }},
	// transactions out of place: EXEC and DISCARD without MULTI, UNWATCH, WATCH alone
	{"exec", func(*fuzzGen) []string { return nil }},
	{"discard", func(*fuzzGen) []string { return nil }},
	{"unwatch", func(*fuzzGen) []string { return nil }},
	{"watch", func(g *fuzzGen) []string { return g.keys(1 + g.rng.IntN(2)) }},
	// not a command
	{"nosuchcommand", func(g *fuzzGen) []string { return g.upTo(2, g.value) }},
}

// key returns a key of the current group, choosing the group if none is set.
func (g *fuzzGen) key() string {
	if g.group == "" {
		g.group = diffFuzzGroups[g.rng.IntN(len(diffFuzzGroups))]
	}
	keys := diffFuzzKeys[g.group]
	return keys[g.rng.IntN(len(keys))]
}

// keys returns n keys of one group, repeats allowed.
func (g *fuzzGen) keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = g.key()
	}
	return out
}

func (g *fuzzGen) oneOf(choices ...string) func() string {
	return func() string { return choices[g.rng.IntN(len(choices))] }
}

// upTo returns between 0 and n values drawn by draw.
func (g *fuzzGen) upTo(n int, draw func() string) []string {
	out := make([]string, g.rng.IntN(n+1))
	for i := range out {
		out[i] = draw()
	}
	return out
}

// several returns 1 to 4 values drawn by draw, repeats likely.
func (g *fuzzGen) several(draw func() string) []string {
	out := make([]string, 1+g.rng.IntN(4))
	for i := range out {
		out[i] = draw()
	}
	return out
}

// pairs returns 1 to 3 pairs of a name drawn by name and a value.
func (g *fuzzGen) pairs(name func() string) []string {
	var out []string
	for range 1 + g.rng.IntN(3) {
		out = append(out, name(), g.value())
	}
	return out
}

var fuzzValues = []string{"", "0", "1", "-1", "10", "007", " 1", "1 ", "+1", "1.5", "-0.5", "3.0e3", "1e308", "abc", "hello world",
	"\x00\xff\r\n", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "inf", "-inf", "nan", "0x10",
	"a", "b", "x", "\xc3\xa9"}

// value returns a string value: numbers, text, empty, binary.
func (g *fuzzGen) value() string {
	if g.rng.IntN(10) == 0 {
		return strings.Repeat(string(rune('a'+g.rng.IntN(26))), 1+g.rng.IntN(200))
	}
	return fuzzValues[g.rng.IntN(len(fuzzValues))]
}

// field returns a hash field or set member from a small set, so that fields repeat.
func (g *fuzzGen) field() string {
	return g.oneOf("a", "b", "c", "", "1", "2", "\x00", "f f")()
}

var fuzzIntegers = []string{"0", "1", "2", "3", "5", "-1", "-2", "-3", "100", "-100", "9223372036854775807", "-9223372036854775808",
	"9223372036854775808", "-9223372036854775809", "x", "1.5", "", " 1", "+1", "01", "1e3", "0x1"}

func (g *fuzzGen) integer() string { return fuzzIntegers[g.rng.IntN(len(fuzzIntegers))] }

// index returns a list index or range bound, mostly small.
func (g *fuzzGen) index() string {
	if g.rng.IntN(4) == 0 {
		return g.integer()
	}
	return g.oneOf("0", "1", "2", "-1", "-2", "-5", "10")()
}

// offset returns a SETRANGE offset: small, past the end, negative, huge or not a number. None makes a value
// that Redis accepts and Zaris's smaller MaxValueSize refuses (docs/redis-differences.md).
func (g *fuzzGen) offset() string {
	return g.oneOf("0", "1", "3", "10", "-1", "536870912", "9223372036854775807", "x", "")()
}

var fuzzFloats = []string{"0", "1", "-1", "1.5", "-2.5", "0.1", "inf", "-inf", "+inf", "nan", "1e308", "-1e308", "1e400", "0x10",
	"abc", "", " 1", "3e-5", "17", "1e21", "5.0e3", "1.", ".5", "-0", "9223372036854775807"}

func (g *fuzzGen) float() string { return fuzzFloats[g.rng.IntN(len(fuzzFloats))] }

func (g *fuzzGen) score() string {
	if g.rng.IntN(3) == 0 {
		return g.float()
	}
	return g.oneOf("0", "1", "2", "3", "-1", "1.5")()
}

// scoreBound returns a ZRANGE BYSCORE bound: inclusive, exclusive or infinite.
func (g *fuzzGen) scoreBound() string {
	switch g.rng.IntN(4) {
	case 0:
		return "(" + g.score()
	case 1:
		return g.oneOf("-inf", "+inf", "(-inf", "(+inf", "(", "((1")()
	}
	return g.score()
}

// seconds returns an expiry in seconds that is either far, zero or in the past, or not a number: never
// one that may run out during the sequence at a different command on each server.
func (g *fuzzGen) seconds() string {
	return g.oneOf("100", "1000", "0", "-1", "-100", "x", "1.5", "", "9223372036854775807", "92233720368547758",
		"-9223372036854775808")()
}

// millis returns an expiry in milliseconds: far, zero, past, invalid, or so short that the command is
// marked to pause after it.
func (g *fuzzGen) millis() string {
	if g.rng.IntN(4) == 0 {
		g.pause = true
		return g.oneOf("1", "2")()
	}
	return g.oneOf("100000", "5000000", "0", "-1", "x", "9223372036854775807", "-9223372036854775808")()
}

// expiry returns SET or GETEX's expiry option and its argument.
func (g *fuzzGen) expiry() []string {
	switch g.rng.IntN(6) {
	case 0:
		return []string{"EX", g.seconds()}
	case 1:
		return []string{"PX", g.millis()}
	case 2:
		return []string{"EXAT", g.oneOf("1", "4102444800", "0", "-1", "x")()}
	case 3:
		return []string{"PXAT", g.oneOf("1000", "4102444800000", "0", "x")()}
	case 4:
		return []string{g.oneOf("ex", "px")()}
	}
	return []string{"EX", "100"}
}

// expireOptions returns none to two of EXPIRE's options, compatible or not.
func (g *fuzzGen) expireOptions() []string {
	return g.upTo(2, g.oneOf("NX", "XX", "GT", "LT", "gt", "BOGUS"))
}

func (g *fuzzGen) setArgs() []string {
	args := []string{g.key(), g.value()}
	for range g.rng.IntN(4) {
		switch g.rng.IntN(6) {
		case 0:
			args = append(args, g.oneOf("NX", "XX", "nx")())
		case 1:
			args = append(args, "GET")
		case 2:
			args = append(args, "KEEPTTL")
		case 3:
			args = append(args, g.oneOf("BOGUS", "EXX")())
		default:
			args = append(args, g.expiry()...)
		}
	}
	return args
}

func (g *fuzzGen) getexArgs() []string {
	args := []string{g.key()}
	for range g.rng.IntN(3) {
		switch g.rng.IntN(4) {
		case 0:
			args = append(args, "PERSIST")
		case 1:
			args = append(args, g.oneOf("KEEPTTL", "NX", "foo")())
		default:
			args = append(args, g.expiry()...)
		}
	}
	return args
}

// mpopArgs are LMPOP's or ZMPOP's arguments: numkeys, keys, an end (first or last) and maybe a count,
// now and then a bad one.
func (g *fuzzGen) mpopArgs(first, last string) []string {
	keys := g.keys(1 + g.rng.IntN(3))
	n := g.oneOf(strconv.Itoa(len(keys)), strconv.Itoa(len(keys)), strconv.Itoa(len(keys)), "0", "x", strconv.Itoa(len(keys)+2))()
	args := append(append([]string{n}, keys...), g.oneOf(first, last, strings.ToLower(first), "up")())
	if g.rng.IntN(2) == 0 {
		args = append(args, g.oneOf("COUNT", "count", "nope")(), g.oneOf("1", "2", "10", "0", "-1", "x")())
	}
	return args
}

// zcombineArgs are ZUNION's, ZINTER's or ZDIFF's arguments after any destination: numkeys, keys, and
// with weighted WEIGHTS and AGGREGATE, with replied WITHSCORES, now and then a bad one.
func (g *fuzzGen) zcombineArgs(weighted, replied bool) []string {
	keys := g.keys(1 + g.rng.IntN(3))
	args := append([]string{g.oneOf(strconv.Itoa(len(keys)), strconv.Itoa(len(keys)), strconv.Itoa(len(keys)), "0", "x")()}, keys...)
	if weighted && g.rng.IntN(2) == 0 {
		args = append(args, "WEIGHTS")
		for range keys {
			args = append(args, g.oneOf("1", "2", "-1", "0", "0.5", "inf", "x")())
		}
	}
	if weighted && g.rng.IntN(2) == 0 {
		args = append(args, "AGGREGATE", g.oneOf("SUM", "MIN", "max", "avg")())
	}
	if replied && g.rng.IntN(2) == 0 {
		args = append(args, "WITHSCORES")
	}
	return args
}

// blockTimeout is a blocking command's timeout: a few milliseconds, or one Redis refuses.
func (g *fuzzGen) blockTimeout() string {
	return g.oneOf("0.001", "0.005", "0.01", "-1", "x", "1e30", "inf", "-inf")()
}

func (g *fuzzGen) popArgs() []string {
	if g.rng.IntN(2) == 0 {
		return []string{g.key()}
	}
	return []string{g.key(), g.oneOf("0", "1", "2", "5", "-1", "x", "9223372036854775807", "-9223372036854775808")()}
}

func (g *fuzzGen) zaddArgs() []string {
	args := []string{g.key()}
	for range g.rng.IntN(3) {
		args = append(args, g.oneOf("NX", "XX", "GT", "LT", "CH", "INCR")())
	}
	for range 1 + g.rng.IntN(3) {
		args = append(args, g.score(), g.field())
	}
	return args
}

func (g *fuzzGen) zrangeArgs() []string {
	byScore := g.rng.IntN(2) == 0
	var args []string
	if byScore {
		args = []string{g.key(), g.scoreBound(), g.scoreBound(), "BYSCORE"}
	} else {
		args = []string{g.key(), g.index(), g.index()}
	}
	for range g.rng.IntN(3) {
		switch g.rng.IntN(4) {
		case 0:
			args = append(args, "REV")
		case 1:
			args = append(args, "WITHSCORES")
		case 2:
			args = append(args, "LIMIT", g.index(), g.index())
		default:
			args = append(args, g.oneOf("BYSCORE", "BOGUS", "LIMIT")())
		}
	}
	return args
}

// pattern returns a glob pattern for KEYS and SCAN's MATCH.
func (g *fuzzGen) pattern() string {
	return g.oneOf("*", "{a}*", "{b}?", "*x", "{[ab]}y", "nomatch*", "{a}[^x]", "\\{a}*", "")()
}

// scanArgs returns SCAN from cursor 0, whose pages the client follows to the end, or from an invalid cursor.
func (g *fuzzGen) scanArgs() []string {
	args := []string{g.oneOf("0", "0", "0", "x", "-1", "", "+5", " 1", "1.5", "18446744073709551616")()}
	for range g.rng.IntN(3) {
		switch g.rng.IntN(4) {
		case 0:
			args = append(args, "MATCH", g.pattern())
		case 1:
			args = append(args, "COUNT", g.oneOf("1", "10", "0", "-1", "x")())
		case 2:
			args = append(args, "TYPE", g.oneOf("string", "hash", "set", "list", "zset", "nosuchtype")())
		default:
			args = append(args, g.oneOf("BOGUS", "MATCH")())
		}
	}
	return args
}

// bitcountArgs are BITCOUNT key with a range in bytes or bits, good or bad.
func (g *fuzzGen) bitcountArgs() []string {
	args := []string{g.key()}
	if g.rng.IntN(3) == 0 {
		return args
	}
	args = append(args, g.index(), g.index())
	if g.rng.IntN(2) == 0 {
		args = append(args, g.oneOf("BIT", "byte", "bit", "FOO")())
	}
	return args
}

// lposArgs are LPOS key element with some of its options, good or bad.
func (g *fuzzGen) lposArgs() []string {
	args := []string{g.key(), g.value()}
	option := g.oneOf("RANK", "COUNT", "MAXLEN", "rank", "count", "maxlen", "FOO")
	for range g.rng.IntN(4) {
		args = append(args, option(), g.oneOf("1", "2", "-1", "-2", "0", "3", "x", "-9223372036854775808")())
	}
	return args
}
