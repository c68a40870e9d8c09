package zaris

import (
	"bufio"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/resp"
	"github.com/zaris-go/zaris/internal/resptest"
)

// The differential fuzzer sends random command sequences to a real redis-server and to Zaris (one node, or
// three through a cluster client that follows MOVED) and compares every reply after the normalisation of
// fuzzSameReply, which docs/redis-differences.md describes with the differences that stay.
//
// The default run is brief and replays a fixed seed. ZARIS_DIFFFUZZ=60s runs for that long: half on the
// fixed seed, half on a random one that it prints. ZARIS_DIFFFUZZ_SEED=s replays seed s (with
// ZARIS_DIFFFUZZ_SEQ=i, only its sequence i). A divergence is shrunk to a short sequence printed as
// redis-cli lines.

const (
	diffFuzzFixedSeed = 20260
	diffFuzzBriefSeqs = 60 // sequences of the default run, per cluster size
	diffFuzzSeqLen    = 40 // commands of a generated sequence, at most
	diffFuzzPause     = 20 * time.Millisecond
)

// diffFuzzGroups are the hash tags of the key space: every multi-key command draws its keys from one group,
// so that they share a slot as Redis Cluster requires.
var diffFuzzGroups = []string{"{a}", "{b}"}

// diffFuzzKeys is the key space: few keys, so that commands collide on them and change their types.
var diffFuzzKeys = map[string][]string{"{a}": {"{a}x", "{a}y", "{a}z"}, "{b}": {"{b}x", "{b}y"}}

// fuzzCmd is one generated command.
type fuzzCmd struct {
	args  []string
	group string // the hash tag of its keys, or of the transaction it belongs to; "" for neither
	aside bool   // sent by a second client, as another application would
	pause bool   // may have set a TTL of a few milliseconds: wait past it before the next command
}

// TestRESPDiffFuzz runs the fuzzer against one Zaris node and against three, each beside a redis-server of
// its own.
func TestRESPDiffFuzz(t *testing.T) {
	longScenario(t)
	t.Parallel()
	budget, long := diffFuzzBudget(t)
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("%dnode", nodes), func(t *testing.T) {
			redisAddr := startRedisServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--notify-keyspace-events", fuzzNotifyClasses)
			claimAllSlots(t, redisAddr)
			zaris := startRESPCluster(t, nodes, diffFuzzConfig)
			var addrs []string
			for _, n := range zaris.live() {
				addrs = append(addrs, n.RESPAddr())
			}
			f := &diffFuzzer{t: t, redis: []string{redisAddr}, zaris: addrs}
			for _, run := range diffFuzzRuns(t, budget, long) {
				f.runSeed(run.seed, run.only, run.until, run.count)
				if t.Failed() {
					break
				}
			}
			t.Logf("%d sequences, %d commands, %d divergences", f.sequences, f.commands, f.divergences)
		})
	}
}

// diffFuzzConfig reaps expired keys often, so that DBSIZE counts them for a short while only, and
// publishes the keyspace notifications the fuzzer compares.
func diffFuzzConfig(cfg *Config) {
	cfg.ReapInterval = 100 * time.Millisecond
	cfg.NotifyKeyspaceEvents = fuzzNotifyClasses
}

// fuzzNotifyClasses are the keyspace notifications compared after each command: every class of the
// keyspace channels but expiries, which Redis publishes when a command meets an expired key and Zaris
// when its owner reaps it.
const fuzzNotifyClasses = "Kg$lshzn"

// fuzzEvents are subscribers of the keyspace notifications of every node of both servers.
type fuzzEvents struct {
	t        *testing.T
	seq      int
	redis    []*diffConn
	zaris    []*diffConn
	redisPub *diffConn
	zarisPub *diffConn
}

const fuzzMarker = "fuzz-events-marker"

// watchEvents subscribes to the keyspace notifications of every node.
func (f *diffFuzzer) watchEvents() *fuzzEvents {
	e := &fuzzEvents{t: f.t, redisPub: dialDiff(f.t, f.redis[0]), zarisPub: dialDiff(f.t, f.zaris[0])}
	subscribe := func(addr string) *diffConn {
		c := dialDiff(f.t, addr)
		c.do(f.t, []string{"PSUBSCRIBE", "__keyspace@0__:*"})
		c.do(f.t, []string{"SUBSCRIBE", fuzzMarker})
		return c
	}
	for _, addr := range f.redis {
		e.redis = append(e.redis, subscribe(addr))
	}
	for _, addr := range f.zaris {
		e.zaris = append(e.zaris, subscribe(addr))
	}
	return e
}

// since returns, for each server, the notifications received since the last call: key and event, in the
// order each node published them.
func (e *fuzzEvents) since() (redis, zaris string) {
	e.seq++
	marker := strconv.Itoa(e.seq)
	collect := func(pub *diffConn, subs []*diffConn) string {
		pub.do(e.t, []string{"PUBLISH", fuzzMarker, marker})
		var b strings.Builder
		for _, sub := range subs {
			for {
				msg, _ := bulkArray(sub.read(e.t, "a keyspace notification"))
				if len(msg) == 3 && msg[0] == "message" && msg[1] == fuzzMarker && msg[2] == marker {
					break
				}
				if len(msg) == 4 && msg[0] == "pmessage" {
					fmt.Fprintf(&b, "%q %s; ", strings.TrimPrefix(msg[2], "__keyspace@0__:"), msg[3])
				}
			}
		}
		return b.String()
	}
	return collect(e.redisPub, e.redis), collect(e.zarisPub, e.zaris)
}

func (e *fuzzEvents) close() {
	for _, c := range slices.Concat(e.redis, e.zaris, []*diffConn{e.redisPub, e.zarisPub}) {
		c.conn.Close()
	}
}

// TestRESPDiffFuzzFinds replays what the fuzzer found differing from Redis, each shrunk, on one node.
func TestRESPDiffFuzzFinds(t *testing.T) {
	t.Parallel()
	redisAddr := startRedisServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--notify-keyspace-events", fuzzNotifyClasses)
	claimAllSlots(t, redisAddr)
	zaris := startRESPCluster(t, 1, diffFuzzConfig)
	f := &diffFuzzer{t: t, redis: []string{redisAddr}, zaris: []string{zaris.node(0).RESPAddr()}}
	for _, find := range diffFuzzFinds() {
		t.Run(find.name, func(t *testing.T) {
			f.t = t
			if d := f.run(find.cmds); d.at >= 0 {
				t.Fatalf("command %d differs:\n%s\nredis: %q\nzaris: %q", d.at+1, redisCLILines(find.cmds), d.redis, d.zaris)
			}
		})
	}
}

// diffFuzzFind is a sequence the fuzzer found differing, kept as a regression case.
type diffFuzzFind struct {
	name string
	cmds []fuzzCmd
}

// fc is a command of a find; its keys are in group {a} unless they name {b}.
func fc(args ...string) fuzzCmd {
	group := "{a}"
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "{b}") {
			group = "{b}"
		}
	}
	return fuzzCmd{args: args, group: group}
}

func diffFuzzFinds() []diffFuzzFind {
	long := strings.Repeat("v", 200)
	aside := fc("SETBIT", "{b}y", "63", "1")
	aside.aside = true
	return []diffFuzzFind{
		{"setbit of a bit as it was changes nothing a watch sees", []fuzzCmd{fc("SET", "{b}y", "hello world"), fc("WATCH", "{b}y"),
			aside, fc("MULTI"), fc("GET", "{b}y"), fc("EXEC"), fc("SETBIT", "{b}y", "63", "0"), fc("GET", "{b}y")}},
		{"hscan of a hash in a hash table from a cursor of its own", []fuzzCmd{fc("HSETNX", "{b}y", "c", strings.Repeat("g", 106)),
			fc("HSCAN", "{b}y", "-1", "COUNT", "10")}},
		{"sscan of a small set of strings, one bucket at a time", []fuzzCmd{fc("SADD", "{b}y", "f f", "c"),
			fc("SSCAN", "{b}y", "0", "MATCH", "{a}[^x]", "COUNT", "1"), fc("SSCAN", "{b}y", "0", "COUNT", "1")}},
		{"zincrby of a negative zero", []fuzzCmd{fc("ZINCRBY", "{a}x", "-0", "m"), fc("ZSCORE", "{a}x", "m"), fc("ZADD", "{a}x", "INCR", "-0", "m"),
			fc("ZADD", "{a}x", "INCR", "-0", "n"), fc("ZRANGE", "{a}x", "0", "-1", "WITHSCORES")}},
		{"scores as strtod reads them", []fuzzCmd{fc("ZADD", "{a}x", "CH", "LT", "1e400", "", "0.1", "1"), fc("ZADD", "{a}x", "1e-400", "a"),
			fc("ZADD", "{a}x", "0x10", "b", "1e-320", "c", "0x1p1", "d", "1.", "e", ".5", "f", "infinity", "g"), fc("ZADD", "{a}x", " 1", "h"),
			fc("ZADD", "{a}x", "1 ", "h"), fc("ZINCRBY", "{a}x", "1e400", "b"), fc("ZRANGE", "{a}x", "0", "-1", "WITHSCORES")}},
		{"score bounds as strtod reads them", []fuzzCmd{fc("ZADD", "{a}x", "0", "a", "1", "b", "16", "c"), fc("ZRANGE", "{a}x", " 1", "20", "BYSCORE"),
			fc("ZRANGE", "{a}x", "", "", "BYSCORE"), fc("ZRANGE", "{a}x", "0x1", "20", "BYSCORE"), fc("ZRANGE", "{a}x", "(", "1", "BYSCORE"),
			fc("ZRANGE", "{a}x", "1 ", "1", "BYSCORE"), fc("ZRANGE", "{a}x", "1e400", "1", "BYSCORE"), fc("ZRANGE", "{a}x", "-nan", "1", "BYSCORE")}},
		{"zrange options given twice", []fuzzCmd{fc("ZADD", "{a}x", "1", "a"), fc("ZRANGE", "{a}x", "2", "1e308", "BYSCORE", "REV", "REV"),
			fc("ZRANGE", "{a}x", "1.5", "(", "BYSCORE", "BYSCORE"), fc("ZRANGE", "{a}x", "-5", "0", "LIMIT", "-5", "-1"),
			fc("ZRANGE", "{a}x", "0", "1", "BYSCORE", "BYLEX")}},
		{"lindex of a missing key before its index", []fuzzCmd{fc("LINDEX", "{a}x", "01"), fc("LINDEX", "{a}x", ""), fc("MULTI"),
			fc("LINDEX", "{a}x", ""), fc("EXEC"), fc("SADD", "{a}y", "m"), fc("LINDEX", "{a}y", "x")}},
		{"scan cursors as strtoul reads them", []fuzzCmd{fc("SET", "{a}x", "1"), fc("SCAN", "-1", "COUNT", "1"), fc("SCAN", ""), fc("SCAN", "+5"),
			fc("SCAN", " 1"), fc("SCAN", "-"), fc("SCAN", "18446744073709551616")}},
		{"pexpire of the smallest integer", []fuzzCmd{fc("PEXPIRE", "{a}x", "-9223372036854775808"), fc("SET", "{a}x", "v"),
			fc("EXPIRE", "{a}x", "-9223372036854775808"), fc("EXPIRE", "{a}x", "-9223372036854775"), fc("EXISTS", "{a}x"),
			fc("SET", "{a}x", "v"), fc("PEXPIRE", "{a}x", "-9223372036854775808"), fc("EXISTS", "{a}x")}},
		{"expire's unsupported option quoted whole", []fuzzCmd{fc("EXPIRE", "{a}x", "0", long), fc("EXPIRE", "{a}x", "-100", "\x00\xff\r\n")}},
		{"client subcommand arity", []fuzzCmd{fc("CLIENT", "SETNAME", "", "9223372036854775807"), fc("CLIENT", "GETNAME", "x"), fc("MULTI"),
			fc("CLIENT", "SETNAME", "x\n", "hello world"), fc("EXEC")}},
		{"unknown command quoting", []fuzzCmd{fc("NOSUCHCOMMAND", "1.5", long), fc("NOSUCHCOMMAND", "x", "\x00\xff\r\n"),
			fc("NOSUCHCOMMAND", "a\xffb", "c\td\re")}},
		{"hello option quoted whole", []fuzzCmd{fc("HELLO", "3", strings.Repeat("q", 150)), fc("HELLO", "2", "\x00\xff\r\n")}},
		{"getex and setrange check the type first", []fuzzCmd{fc("SADD", "{b}x", "2", "b"), fc("GETEX", "{b}x", "EXAT", "-1"),
			fc("GETEX", "{b}x", "EX", "x"), fc("RPUSH", "{b}y", "w"), fc("SETRANGE", "{b}y", "9223372036854775807", "10"),
			fc("SETRANGE", "{b}y", "536870912", "a"), fc("SETRANGE", "{a}x", "536870912", "a")}},
		{"expire options", []fuzzCmd{fc("EXPIRE", "{a}x", "100", "NX"), fc("SET", "{a}x", "v"), fc("EXPIRE", "{a}x", "100", "XX"),
			fc("EXPIRE", "{a}x", "100", "GT"), fc("EXPIRE", "{a}x", "100", "NX"), fc("EXPIRE", "{a}x", "100", "nx"), fc("TTL", "{a}x"),
			fc("EXPIRE", "{a}x", "1000", "XX"), fc("EXPIRE", "{a}x", "100", "GT"), fc("EXPIRE", "{a}x", "10000", "gt"),
			fc("PEXPIRE", "{a}x", "10000000", "LT"), fc("EXPIRE", "{a}x", "100", "LT", "XX"), fc("TTL", "{a}x"),
			fc("EXPIRE", "{a}x", "100", "NX", "XX"), fc("EXPIRE", "{a}x", "100", "GT", "LT"), fc("EXPIRE", "{a}x", "x", "GT", "LT"),
			fc("EXPIRE", "{a}x", "100", "BOGUS"), fc("PERSIST", "{a}x"), fc("EXPIRE", "{a}x", "100", "GT"), fc("EXPIRE", "{a}x", "100", "LT"),
			fc("TTL", "{a}x"), fc("EXPIRE", "{a}x", "-1", "GT"), fc("EXPIRE", "{a}x", "-1", "LT"), fc("EXISTS", "{a}x")}},
		{"mset checks slots before pairs", []fuzzCmd{fc("MSET", "{b}x", "007", "nan"), fc("MSET", "{b}x", "1", "{b}y")}},
		{"exec checks the slots queued before a refusal", []fuzzCmd{fc("MULTI"), fc("LINDEX", "{b}y", "-5"), fc("CLIENT", "SETNAME", "x\n", "y"),
			fc("UNLINK", "{a}y", "{a}y"), fc("EXEC"), fc("MULTI"), fc("EXPIRE", "{a}x", "1.5"), fc("RPUSH", "{b}x", "a"), fc("NOSUCHCOMMAND"), fc("EXEC")}},
		{"watch inside multi checks slots first", []fuzzCmd{fc("MULTI"), fc("WATCH", "{b}y", "{b}y", "1e308"), fc("GET", "{b}y"), fc("EXEC"),
			fc("MULTI"), fc("WATCH", "{b}y"), fc("GET", "{b}y"), fc("EXEC")}},
	}
}

// diffFuzzRun is one seed's share of a run: its sequences until a time or up to a count.
type diffFuzzRun struct {
	seed  uint64
	only  int // the one sequence to replay, or -1
	until time.Time
	count int
}

func diffFuzzBudget(t *testing.T) (time.Duration, bool) {
	v := os.Getenv("ZARIS_DIFFFUZZ")
	if v == "" {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("ZARIS_DIFFFUZZ=%q: %v", v, err)
	}
	return d, true
}

func diffFuzzRuns(t *testing.T, budget time.Duration, long bool) []diffFuzzRun {
	only := -1
	if v := os.Getenv("ZARIS_DIFFFUZZ_SEQ"); v != "" {
		only, _ = strconv.Atoi(v)
	}
	if v := os.Getenv("ZARIS_DIFFFUZZ_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("ZARIS_DIFFFUZZ_SEED=%q: %v", v, err)
		}
		if !long {
			return []diffFuzzRun{{seed: seed, only: only, count: diffFuzzBriefSeqs}}
		}
		return []diffFuzzRun{{seed: seed, only: only, until: time.Now().Add(budget)}}
	}
	if !long {
		return []diffFuzzRun{{seed: diffFuzzFixedSeed, only: -1, count: diffFuzzBriefSeqs}}
	}
	random := rand.Uint64() % 1_000_000_000
	t.Logf("fixed seed %d, then random seed %d (replay with ZARIS_DIFFFUZZ_SEED=%d)", diffFuzzFixedSeed, random, random)
	half := time.Now().Add(budget / 2)
	return []diffFuzzRun{
		{seed: diffFuzzFixedSeed, only: -1, until: half},
		{seed: random, only: -1, until: half.Add(budget / 2)},
	}
}

// claimAllSlots makes a redis-server started in cluster mode a one-node cluster serving every slot, so that
// it refuses what Redis Cluster refuses (CROSSSLOT, SELECT) as Zaris does.
func claimAllSlots(t *testing.T, addr string) {
	t.Helper()
	c := dialDiff(t, addr)
	if reply := c.roundTrip(t, []string{"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}); reply != "+OK\r\n" {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %q", reply)
	}
	waitFor(t, 10*time.Second, "redis-server's cluster state ok", func() bool {
		return strings.Contains(c.roundTrip(t, []string{"CLUSTER", "INFO"}), "cluster_state:ok")
	})
}

// diffFuzzer runs sequences against both servers and counts what it did.
type diffFuzzer struct {
	t           *testing.T
	redis       []string // the reference's address
	zaris       []string // every Zaris node's RESP address
	sequences   int
	commands    int
	divergences int
}

func (f *diffFuzzer) runSeed(seed uint64, only int, until time.Time, count int) {
	for i := 0; ; i++ {
		if only >= 0 && i != only {
			if i > only {
				return
			}
			continue
		}
		if (count > 0 && i >= count) || (!until.IsZero() && time.Now().After(until)) {
			return
		}
		if deadline, ok := f.t.Deadline(); ok && time.Until(deadline) < time.Minute {
			return
		}
		cmds := generateSequence(rand.New(rand.NewPCG(seed, uint64(i))))
		f.sequences++
		d := f.run(cmds)
		f.commands += d.ran
		if d.at < 0 {
			continue
		}
		f.divergences++
		short := f.shrink(cmds, d)
		final := f.run(short)
		f.t.Errorf("seed %d sequence %d (ZARIS_DIFFFUZZ_SEED=%d ZARIS_DIFFFUZZ_SEQ=%d) diverges at its command %d; shrunk from %d to %d commands:\n%s\nredis: %q\nzaris: %q",
			seed, i, seed, i, d.at+1, len(cmds), len(short), redisCLILines(short), final.redis, final.zaris)
		if f.divergences >= 10 {
			return
		}
	}
}

// divergence is the outcome of one run of a sequence: at is the index of the first command whose replies
// differ, or -1.
type divergence struct {
	at           int
	ran          int
	redis, zaris string
}

// run replays cmds on fresh connections to both servers, from an empty key space, and returns the first
// divergence.
func (f *diffFuzzer) run(cmds []fuzzCmd) divergence {
	f.wipe(f.redis)
	f.wipe(f.zaris)
	redis := [2]*fuzzClient{newFuzzClient(f.t, f.redis), nil}
	zaris := [2]*fuzzClient{newFuzzClient(f.t, f.zaris), nil}
	defer func() {
		for _, c := range append(redis[:], zaris[:]...) {
			if c != nil {
				c.close()
			}
		}
	}()
	events := f.watchEvents()
	defer events.close()
	for i, c := range cmds {
		side := 0
		if c.aside {
			side = 1
			if redis[1] == nil {
				redis[1], zaris[1] = newFuzzClient(f.t, f.redis), newFuzzClient(f.t, f.zaris)
			}
		}
		isExec := strings.EqualFold(c.args[0], "exec")
		unchanged := isExec && zaris[side].watchedUnchanged() // before EXEC writes
		want := redis[side].do(c)
		got := zaris[side].do(c)
		txn := redis[side].txnState(c)
		txn.refusedInMulti = zaris[side].refusedInMulti
		if strings.EqualFold(c.args[0], "dbsize") && want != got {
			txn.zarisLive = zaris[side].liveKeys()
		}
		txn.watchedUnchanged = unchanged && isNullArray(want) && !isNullArray(got)
		if !fuzzSameReply(c.args, txn, want, got) {
			return divergence{at: i, ran: i + 1, redis: want, zaris: got}
		}
		if want != got && isExec && (txn.crossWatch || txn.refusedInMulti || txn.watchedUnchanged) {
			// A transaction one server ran and the other refused, by a documented difference: the key
			// spaces differ from here on.
			return divergence{at: -1, ran: i + 1}
		}
		if want, got := events.since(); want != got {
			return divergence{at: i, ran: i + 1, redis: want, zaris: got}
		}
		redis[side].settle(c, want)
		zaris[side].settle(c, got)
		switch {
		case c.pause:
			time.Sleep(diffFuzzPause)
		case fuzzSetsExpiry[strings.ToLower(c.args[0])]:
			// Redis keeps expiries in milliseconds: a later EXPIRE ... GT of the same TTL must land in a
			// later millisecond on both servers to compare alike.
			time.Sleep(2 * time.Millisecond)
		}
	}
	return divergence{at: -1, ran: len(cmds)}
}

// wipe deletes every key of every node, whatever a sequence created.
func (f *diffFuzzer) wipe(addrs []string) {
	for _, addr := range addrs {
		c := dialDiff(f.t, addr)
		elems, ok := bulkArray(c.roundTrip(f.t, []string{"KEYS", "*"}))
		if !ok {
			f.t.Fatalf("KEYS * at %s did not answer an array", addr)
		}
		for _, k := range elems {
			c.roundTrip(f.t, []string{"DEL", k})
		}
		c.conn.Close()
	}
}

// shrink drops commands of cmds while the sequence still diverges at a command of the same name (delta
// debugging), and returns the shortest sequence it found.
func (f *diffFuzzer) shrink(cmds []fuzzCmd, d divergence) []fuzzCmd {
	name := strings.ToLower(cmds[d.at].args[0])
	still := func(try []fuzzCmd) bool {
		r := f.run(try)
		return r.at >= 0 && strings.ToLower(try[r.at].args[0]) == name
	}
	cur := slices.Clone(cmds[:d.at+1])
	for n, tries := 2, 0; len(cur) >= 2 && tries < 400; {
		chunk := (len(cur) + n - 1) / n
		reduced := false
		for start := 0; start < len(cur) && tries < 400; start += chunk {
			try := slices.Concat(cur[:start], cur[min(start+chunk, len(cur)):])
			tries++
			if len(try) > 0 && still(try) {
				cur, n, reduced = try, max(n-1, 2), true
				break
			}
		}
		if !reduced {
			if n >= len(cur) {
				break
			}
			n = min(2*n, len(cur))
		}
	}
	return cur
}

// redisCLILines prints cmds as input for redis-cli, one command a line.
func redisCLILines(cmds []fuzzCmd) string {
	var b strings.Builder
	for _, c := range cmds {
		if c.aside {
			b.WriteString("# on a second connection:\n")
		}
		quoted := make([]string, len(c.args))
		for i, a := range c.args {
			quoted[i] = redisCLIQuote(a)
		}
		b.WriteString(strings.Join(quoted, " "))
		b.WriteByte('\n')
		if c.pause {
			fmt.Fprintf(&b, "# wait %v\n", diffFuzzPause)
		}
	}
	return b.String()
}

func redisCLIQuote(a string) string {
	plain := a != ""
	for i := 0; i < len(a); i++ {
		if c := a[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '\\' {
			plain = false
		}
	}
	if plain {
		return a
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(a); i++ {
		switch c := a[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < ' ' || c >= 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// fuzzClient is a cluster client over raw RESP: a connection to every node, a command sent to the owner of
// its group's slot (found by following MOVED), connection state (HELLO, CLIENT SETNAME, UNWATCH, and an
// EXEC outside MULTI, which unwatches when refused) set on every connection, and the keyspace commands
// (DBSIZE, KEYS, SCAN from cursor 0 to its end) asked of every node and merged into the one reply a
// single server would give.
type fuzzClient struct {
	t       *testing.T
	addrs   []string
	conns   map[string]*diffConn
	owner   map[string]string // group → address of its owner
	multi   string            // the node holding an open MULTI, or ""
	queued  [][]string        // the commands queued since MULTI, for comparing EXEC's replies
	watched map[string]bool   // the groups of the keys watched
	// queuedGroups are the groups of the keys of the commands queued since MULTI.
	queuedGroups map[string]bool
	doomed       bool // a command was refused since MULTI: EXEC will abort
	// prints are the watched keys' contents when they were watched.
	prints map[string][2]string // key → its group and fingerprint
	// refusedInMulti: Zaris refused a command inside the open MULTI that Redis queues.
	refusedInMulti bool
}

// fuzzTxn is what the comparison of EXEC's reply needs to know of the transaction.
type fuzzTxn struct {
	queued [][]string
	// crossWatch: the keys queued and watched span slots, which Zaris refuses at EXEC even where Redis,
	// which checks only the keys queued, or stops queueing once a watched key changed, does not
	// (docs/redis-differences.md).
	crossWatch      bool
	queuedCrossSlot bool // the keys queued alone span slots
	inMulti         bool // a MULTI is open
	// refusedInMulti: Zaris refused a command of the transaction that it does not run inside MULTI
	// (fuzzZarisNoMulti); its EXEC answers EXECABORT where Redis runs the rest.
	refusedInMulti bool
	// watchedUnchanged: every watched key holds what it held when watched. Zaris's WATCH compares
	// versions of live values, so a key written without a change, or created and gone again, does not
	// abort EXEC as in Redis (docs/redis-differences.md).
	watchedUnchanged bool
	// zarisLive is how many keys Zaris holds live values of (KEYS *), when DBSIZE differs: Zaris's counts
	// keys past their expiry until its reaper deletes them.
	zarisLive int
}

// fuzzSetsExpiry are the commands that may set an expiry relative to now.
var fuzzSetsExpiry = map[string]bool{"expire": true, "pexpire": true, "set": true, "getex": true}

// fuzzZarisNoMulti are the commands Zaris refuses inside MULTI and Redis queues.
var fuzzZarisNoMulti = map[string]bool{"auth": true, "hello": true, "keys": true, "scan": true, "dbsize": true}

const notInMultiReply = "-ERR Command not allowed inside a transaction\r\n"

func (c *fuzzClient) txnState(cmd fuzzCmd) fuzzTxn {
	groups := maps.Clone(c.queuedGroups)
	maps.Copy(groups, c.watched)
	return fuzzTxn{queued: c.queued, crossWatch: len(groups) > 1, queuedCrossSlot: len(c.queuedGroups) > 1, inMulti: c.multi != ""}
}

func newFuzzClient(t *testing.T, addrs []string) *fuzzClient {
	c := &fuzzClient{t: t, addrs: addrs, conns: map[string]*diffConn{}, owner: map[string]string{}, watched: map[string]bool{}, queuedGroups: map[string]bool{}, prints: map[string][2]string{}}
	for _, g := range diffFuzzGroups {
		c.owner[g] = addrs[0]
		if reply := c.conn(addrs[0]).roundTrip(t, []string{"EXISTS", g}); strings.HasPrefix(reply, "-MOVED ") {
			fields := strings.Fields(reply)
			c.owner[g] = strings.TrimSpace(fields[len(fields)-1])
		}
	}
	return c
}

func (c *fuzzClient) conn(addr string) *diffConn {
	if conn, ok := c.conns[addr]; ok {
		return conn
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	c.conns[addr] = &diffConn{conn: conn, rd: bufio.NewReader(conn)}
	return c.conns[addr]
}

func (c *fuzzClient) close() {
	for _, conn := range c.conns {
		conn.conn.Close()
	}
}

// do sends cmd where a cluster client would and returns the reply.
func (c *fuzzClient) do(cmd fuzzCmd) string {
	name := strings.ToLower(cmd.args[0])
	switch {
	case c.multi != "":
		return c.conn(c.multi).roundTrip(c.t, cmd.args)
	case name == "hello" || name == "client" || name == "select" || name == "readonly" || name == "readwrite" || name == "unwatch" ||
		name == "exec": // outside MULTI: a refused EXEC unwatches its connection's keys, as UNWATCH does
		var first string
		for i, addr := range c.addrs {
			if reply := c.conn(addr).roundTrip(c.t, cmd.args); i == 0 {
				first = reply
			}
		}
		return first
	case name == "dbsize" && len(cmd.args) == 1:
		c.touchAll()
		var sum int64
		for _, addr := range c.addrs {
			reply := c.conn(addr).roundTrip(c.t, cmd.args)
			n, err := strconv.ParseInt(strings.TrimSpace(reply[1:]), 10, 64)
			if reply[0] != ':' || err != nil {
				return reply
			}
			sum += n
		}
		return fmt.Sprintf(":%d\r\n", sum)
	case name == "keys" && len(cmd.args) == 2:
		return c.union(func(addr string) (string, []string, bool) {
			reply := c.conn(addr).roundTrip(c.t, cmd.args)
			keys, ok := bulkArray(reply)
			return reply, keys, ok
		})
	case name == "scan" && len(cmd.args) >= 2 && cmd.args[1] == "0":
		return c.union(func(addr string) (string, []string, bool) { return c.scanAll(addr, cmd.args) })
	}
	addr := c.addrs[0]
	if cmd.group != "" {
		addr = c.owner[cmd.group]
	}
	reply := c.conn(addr).roundTrip(c.t, cmd.args)
	if strings.HasPrefix(reply, "-MOVED ") {
		fields := strings.Fields(reply)
		addr = strings.TrimSpace(fields[len(fields)-1])
		if cmd.group != "" {
			c.owner[cmd.group] = addr
		}
		reply = c.conn(addr).roundTrip(c.t, cmd.args)
	}
	if name == "multi" && reply == "+OK\r\n" {
		c.multi = addr
	}
	return reply
}

// liveKeys counts the keys every node answers KEYS * with, on connections of its own: those with a live
// value.
func (c *fuzzClient) liveKeys() int {
	keys, _ := bulkArray(c.union(func(addr string) (string, []string, bool) {
		conn := dialDiff(c.t, addr)
		defer conn.conn.Close()
		reply := conn.roundTrip(c.t, []string{"KEYS", "*"})
		keys, ok := bulkArray(reply)
		return reply, keys, ok
	}))
	return len(keys)
}

// touchAll reads every key of the key space on every node, so that a server that counts expired keys until
// they are read (Redis's DBSIZE) has dropped them.
func (c *fuzzClient) touchAll() {
	for _, addr := range c.addrs {
		for _, keys := range diffFuzzKeys {
			for _, k := range keys {
				c.conn(addr).roundTrip(c.t, []string{"EXISTS", k})
			}
		}
	}
}

// fingerprint returns key's type and content, read on a connection of its own.
func (c *fuzzClient) fingerprint(group, key string) string {
	conn := dialDiff(c.t, c.owner[group])
	defer conn.conn.Close()
	kind := conn.roundTrip(c.t, []string{"TYPE", key})
	read := map[string][]string{"+string\r\n": {"GET", key}, "+hash\r\n": {"HGETALL", key}, "+set\r\n": {"SMEMBERS", key},
		"+list\r\n": {"LRANGE", key, "0", "-1"}, "+zset\r\n": {"ZRANGE", key, "0", "-1", "WITHSCORES"}}[kind]
	if read == nil {
		return kind
	}
	content := conn.roundTrip(c.t, read)
	if kind == "+hash\r\n" || kind == "+set\r\n" {
		content = normUnordered(content, map[string]int{"+hash\r\n": 2, "+set\r\n": 1}[kind])
	}
	return kind + content
}

// watchedUnchanged reports whether some keys are watched and every one holds what it held when watched.
func (c *fuzzClient) watchedUnchanged() bool {
	if len(c.prints) == 0 {
		return false
	}
	for k, print := range c.prints {
		if c.fingerprint(print[0], k) != print[1] {
			return false
		}
	}
	return true
}

func isNullArray(reply string) bool { return reply == "*-1\r\n" || reply == "_\r\n" }

// settle tracks the transaction cmd opened, queued to or ended, given its reply.
func (c *fuzzClient) settle(cmd fuzzCmd, reply string) {
	switch name := strings.ToLower(cmd.args[0]); {
	case name == "multi" && reply == "+OK\r\n":
		c.queued, c.refusedInMulti, c.doomed = nil, false, false
		clear(c.queuedGroups)
	case (name == "exec" || name == "discard") && c.multi != "" && !strings.HasPrefix(reply, "-ERR wrong number"):
		c.multi, c.queued, c.refusedInMulti, c.doomed = "", nil, false, false
		clear(c.queuedGroups)
		clear(c.watched)
		clear(c.prints)
	case c.multi != "" && fuzzZarisNoMulti[name] && reply == notInMultiReply:
		c.refusedInMulti = true
	case name == "unwatch" && c.multi == "" && reply == "+OK\r\n",
		name == "exec" && c.multi == "" && strings.HasPrefix(reply, "-EXECABORT"):
		clear(c.watched)
		clear(c.prints)
	case name == "watch" && reply == "+OK\r\n":
		c.watched[cmd.group] = true
		for _, k := range cmd.args[1:] {
			if _, ok := c.prints[k]; !ok {
				c.prints[k] = [2]string{cmd.group, c.fingerprint(cmd.group, k)}
			}
		}
	case c.multi != "" && reply == "+QUEUED\r\n" && !c.doomed:
		c.queued = append(c.queued, cmd.args)
		if known, ok := respCommands[name]; ok && fuzzNamesKeys(known, cmd.args) && cmd.group != "" {
			c.queuedGroups[cmd.group] = true
		}
	case c.multi != "" && reply != "+QUEUED\r\n" && !respCommands[name].ControlsMulti:
		c.doomed = true // Redis queues nothing more, and Zaris does the same
	}
}

// fuzzCountAt is where the commands whose keys follow a count (ZDIFF numkeys key ...) have the count.
var fuzzCountAt = map[string]int{
	"sintercard": 1, "lmpop": 1, "zmpop": 1, "zunion": 1, "zinter": 1, "zdiff": 1, "zintercard": 1,
	"blmpop": 2, "bzmpop": 2, "zunionstore": 2, "zinterstore": 2, "zdiffstore": 2,
}

// fuzzNamesKeys reports whether Redis Cluster finds keys in args for its slot check: a command whose keys
// follow a count names none, not even a destination, when the count is not a positive integer that the
// arguments hold.
func fuzzNamesKeys(spec resp.CommandSpec, args []string) bool {
	if !spec.MovableKeys {
		return spec.FirstKey > 0
	}
	at, ok := fuzzCountAt[strings.ToLower(args[0])]
	if !ok {
		panic("fuzzCountAt lacks " + args[0])
	}
	if at >= len(args) {
		return false
	}
	n, err := strconv.Atoi(args[at])
	return err == nil && n >= 1 && n <= len(args)-at-1
}

// union merges the key lists every node answered into one sorted array; the first error answered wins.
func (c *fuzzClient) union(ask func(addr string) (string, []string, bool)) string {
	var all []string
	for _, addr := range c.addrs {
		reply, keys, ok := ask(addr)
		if !ok {
			return reply
		}
		all = append(all, keys...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(all))
	for _, k := range all {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(k), k)
	}
	return b.String()
}

// scanAll runs SCAN with args on one node from cursor 0 until it ends, and returns the keys it saw.
func (c *fuzzClient) scanAll(addr string, args []string) (string, []string, bool) {
	args = slices.Clone(args)
	var keys []string
	for range 10000 {
		reply := c.conn(addr).roundTrip(c.t, args)
		cursor, page, ok := parseScanPage(reply)
		if !ok {
			return reply, nil, false
		}
		keys = append(keys, page...)
		if cursor == "0" {
			return reply, keys, true
		}
		args[1] = cursor
	}
	c.t.Fatalf("SCAN at %s did not end in 10000 pages", addr)
	return "", nil, false
}

// partOfPage reports whether redis is a page of a scan that goes on (its cursor is not 0) whose elements
// all are in zaris's whole page (cursor 0).
func partOfPage(redis, zaris string) bool {
	rc, re, rok := parseScanPage(redis)
	zc, ze, zok := parseScanPage(zaris)
	if !rok || !zok || rc == "0" || zc != "0" {
		return false
	}
	for _, e := range re {
		if !slices.Contains(ze, e) {
			return false
		}
	}
	return true
}

// parseScanPage parses SCAN's reply: a cursor and an array of keys.
func parseScanPage(reply string) (string, []string, bool) {
	rd := bufio.NewReader(strings.NewReader(reply))
	header, err := rd.ReadString('\n')
	if err != nil || header != "*2\r\n" {
		return "", nil, false
	}
	cursor, err := resptest.ReadReply(rd)
	if err != nil || cursor[0] != '$' {
		return "", nil, false
	}
	rest, err := resptest.ReadReply(rd)
	if err != nil {
		return "", nil, false
	}
	keys, ok := bulkArray(rest)
	_, value, _ := strings.Cut(strings.TrimSuffix(cursor, "\r\n"), "\r\n")
	return value, keys, ok
}

// fuzzSameReply reports whether Zaris's reply to args matches Redis's once normalised: the order of a set's
// members and a hash's fields is not part of a reply, a TTL may have counted down, or a relative expiry
// been set, a second apart on the two, and HELLO describes each server.
func fuzzSameReply(args []string, txn fuzzTxn, redis, zaris string) bool {
	if redis == zaris {
		return true
	}
	name := strings.ToLower(args[0])
	if txn.inMulti && fuzzZarisNoMulti[name] && zaris == notInMultiReply {
		return true
	}
	switch name {
	case "dbsize":
		var z int
		_, err := fmt.Sscanf(zaris, ":%d\r\n", &z)
		return err == nil && redis == fmt.Sprintf(":%d\r\n", txn.zarisLive) && z > txn.zarisLive
	case "ttl", "expiretime": // a relative expiry set a moment apart on the two servers
		return closeInts(redis, zaris, 1)
	case "pttl", "pexpiretime":
		return closeInts(redis, zaris, 1000)
	case "smembers", "sinter", "sunion", "sdiff":
		return normUnordered(redis, 1) == normUnordered(zaris, 1)
	case "hgetall":
		return normUnordered(redis, 2) == normUnordered(zaris, 2)
	case "hscan", "sscan": // a small collection comes whole, in an order of each server's own
		if args[2] != "0" {
			// Redis 7.0 keeps a set of non-integers, and a hash with a field or value over 64 bytes, in a
			// hash table, whose own cursor it honours.
			return strings.HasPrefix(redis, "*2\r\n") && strings.HasPrefix(zaris, "*2\r\n")
		}
		if name == "sscan" && partOfPage(redis, zaris) {
			return true // and walks that table COUNT buckets at a time from cursor 0 too
		}
		stride := map[string]int{"hscan": 2, "sscan": 1}[name]
		const head = "*2\r\n$1\r\n0\r\n"
		return strings.HasPrefix(redis, head) && strings.HasPrefix(zaris, head) &&
			normUnordered(redis[len(head):], stride) == normUnordered(zaris[len(head):], stride)
	case "hello":
		return redis[0] != '-' && redis[0] == zaris[0]
	case "exec":
		if txn.refusedInMulti && strings.HasPrefix(zaris, "-EXECABORT ") || txn.watchedUnchanged {
			return true
		}
		if txn.crossWatch && zaris == "-CROSSSLOT Keys in request don't hash to the same slot\r\n" &&
			(!txn.queuedCrossSlot || isNullArray(redis) || strings.HasPrefix(redis, "-EXECABORT ")) {
			return true
		}
		return sameExec(txn.queued, redis, zaris)
	case "scan":
		// From a cursor other than 0, what a page holds depends on how each server numbers its cursors.
		return args[1] != "0" && redis[0] == '*' && zaris[0] == '*'
	}
	return false
}

// sameExec compares EXEC's replies element by element, each as the reply to its queued command.
func sameExec(queued [][]string, redis, zaris string) bool {
	r, okR := splitArray(redis)
	z, okZ := splitArray(zaris)
	if !okR || !okZ || len(r) != len(z) || len(r) != len(queued) {
		return false
	}
	for i := range r {
		if !fuzzSameReply(queued[i], fuzzTxn{}, r[i], z[i]) {
			return false
		}
	}
	return true
}

// splitArray returns the raw elements of an array reply.
func splitArray(reply string) ([]string, bool) {
	rd := bufio.NewReader(strings.NewReader(reply))
	header, err := rd.ReadString('\n')
	if err != nil || header[0] != '*' {
		return nil, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(header[1:]))
	if err != nil {
		return nil, false
	}
	elems := make([]string, 0, max(n, 0))
	for range max(n, 0) {
		e, err := resptest.ReadReply(rd)
		if err != nil {
			return nil, false
		}
		elems = append(elems, e)
	}
	return elems, true
}

func closeInts(a, b string, tolerance int64) bool {
	x, errX := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(a, ":")), 10, 64)
	y, errY := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(b, ":")), 10, 64)
	if errX != nil || errY != nil || a[0] != ':' || b[0] != ':' || x < 0 || y < 0 {
		return false
	}
	return x-y <= tolerance && y-x <= tolerance
}

func normUnordered(reply string, stride int) string {
	elems, ok := bulkArray(reply)
	if !ok || len(elems)%stride != 0 {
		return reply
	}
	groups := make([]string, 0, len(elems)/stride)
	for i := 0; i < len(elems); i += stride {
		groups = append(groups, strings.Join(elems[i:i+stride], "\x00"))
	}
	slices.Sort(groups)
	return fmt.Sprintf("%c %q", reply[0], groups)
}

// respCommands describes the endpoint's commands.
var respCommands = resp.Commands()
