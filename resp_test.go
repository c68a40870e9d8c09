package zaris

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaris-go/zaris/internal/resp"
	"github.com/zaris-go/zaris/internal/resptest"
)

// withRESP is the startCluster tweak that gives every node a RESP endpoint on a free port.
func withRESP(cfg *Config) { cfg.RESPAddr = "127.0.0.1:0" }

// startRESPCluster starts n nodes with RESP endpoints and waits until every node's map knows every
// endpoint, so CLUSTER SLOTS covers the whole key space.
func startRESPCluster(t testing.TB, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	c := startCluster(t, n, func(cfg *Config) {
		withRESP(cfg)
		if tweak != nil {
			tweak(cfg)
		}
	})
	waitFor(t, 20*time.Second, "every RESP address in every map", func() bool {
		for _, node := range c.live() {
			m := node.ClusterMap()
			if len(m.Nodes) != n || !slices.ContainsFunc(m.Runtime, func(st PartitionState) bool { return st.Owner != "" }) {
				return false
			}
			for _, info := range m.Nodes {
				if info.RESPAddr == "" {
					return false
				}
			}
		}
		return true
	})
	return c
}

func newClusterClient(t *testing.T, c *testCluster, proto int) *redis.ClusterClient {
	t.Helper()
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        []string{c.node(0).RESPAddr()},
		Protocol:     proto,
		MaxRedirects: 8,
	})
	t.Cleanup(func() { client.Close() })
	return client
}

// TestRESPGoRedisCluster drives a three-node cluster with the unmodified go-redis ClusterClient over RESP2
// and RESP3: single keys, pipelines, hash-tagged multi-key commands, counters, TTLs, conditional sets, and
// MOVED after the owners change under a client with a stale slot map.
func TestRESPGoRedisCluster(t *testing.T) {
	c := startRESPCluster(t, 3, nil)
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			ctx := bg(t)
			client := newClusterClient(t, c, proto)
			prefix := fmt.Sprintf("p%d:", proto)
			checkSetGet(t, ctx, client, prefix)
			checkPipeline(t, ctx, client, prefix)
			checkHashTag(t, ctx, client, prefix)
			checkCounters(t, ctx, client, prefix)
			checkTTL(t, ctx, client, prefix)
			checkConditionalSet(t, ctx, client, prefix)
			checkIntrospection(t, ctx, client, c)
		})
	}
	t.Run("moved", func(t *testing.T) { checkFollowsMoved(t, c) })
}

func checkSetGet(t *testing.T, ctx context.Context, client *redis.ClusterClient, prefix string) {
	t.Helper()
	for i := range 200 {
		key := fmt.Sprintf("%skey-%d", prefix, i)
		if err := client.Set(ctx, key, fmt.Sprintf("value-%d", i), 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
	}
	for i := range 200 {
		key := fmt.Sprintf("%skey-%d", prefix, i)
		if got, err := client.Get(ctx, key).Result(); err != nil || got != fmt.Sprintf("value-%d", i) {
			t.Fatalf("GET %s = %q, %v", key, got, err)
		}
	}
	if _, err := client.Get(ctx, prefix+"missing").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET missing: err %v, want redis.Nil", err)
	}
}

func checkPipeline(t *testing.T, ctx context.Context, client *redis.ClusterClient, prefix string) {
	t.Helper()
	const n = 300
	if _, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			p.Set(ctx, fmt.Sprintf("%spipe-%d", prefix, i), i, 0)
		}
		return nil
	}); err != nil {
		t.Fatalf("pipelined SET: %v", err)
	}
	gets := make([]*redis.StringCmd, n)
	if _, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			gets[i] = p.Get(ctx, fmt.Sprintf("%spipe-%d", prefix, i))
		}
		return nil
	}); err != nil {
		t.Fatalf("pipelined GET: %v", err)
	}
	for i, g := range gets {
		if got := g.Val(); got != fmt.Sprint(i) {
			t.Fatalf("pipelined GET %d = %q", i, got)
		}
	}
}

func checkHashTag(t *testing.T, ctx context.Context, client *redis.ClusterClient, prefix string) {
	t.Helper()
	tag := "{" + prefix + "user7}"
	if err := client.MSet(ctx, tag+":name", "ada", tag+":lang", "go").Err(); err != nil {
		t.Fatalf("MSET: %v", err)
	}
	got, err := client.MGet(ctx, tag+":name", tag+":missing", tag+":lang").Result()
	if err != nil || !slices.Equal(got, []any{"ada", nil, "go"}) {
		t.Fatalf("MGET = %v, %v", got, err)
	}
	if n, err := client.Exists(ctx, tag+":name", tag+":lang", tag+":missing").Result(); err != nil || n != 2 {
		t.Fatalf("EXISTS = %d, %v", n, err)
	}
	if n, err := client.Del(ctx, tag+":name", tag+":lang", tag+":missing").Result(); err != nil || n != 2 {
		t.Fatalf("DEL = %d, %v", n, err)
	}
}

func checkCounters(t *testing.T, ctx context.Context, client *redis.ClusterClient, prefix string) {
	t.Helper()
	key := prefix + "counter"
	steps := []struct {
		cmd  func() *redis.IntCmd
		want int64
	}{
		{func() *redis.IntCmd { return client.Incr(ctx, key) }, 1},
		{func() *redis.IntCmd { return client.IncrBy(ctx, key, 41) }, 42},
		{func() *redis.IntCmd { return client.Decr(ctx, key) }, 41},
		{func() *redis.IntCmd { return client.DecrBy(ctx, key, 50) }, -9},
	}
	for i, s := range steps {
		if got, err := s.cmd().Result(); err != nil || got != s.want {
			t.Fatalf("counter step %d = %d, %v; want %d", i, got, err, s.want)
		}
	}
	client.Set(ctx, prefix+"text", "abc", 0)
	if err := client.Incr(ctx, prefix+"text").Err(); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("INCR on text: %v", err)
	}
}

func checkTTL(t *testing.T, ctx context.Context, client *redis.ClusterClient, prefix string) {
	t.Helper()
	key := prefix + "ttl"
	if err := client.Set(ctx, key, "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if ttl, err := client.TTL(ctx, key).Result(); err != nil || ttl < 58*time.Second || ttl > time.Minute {
		t.Fatalf("TTL = %v, %v", ttl, err)
	}
	if ok, err := client.Expire(ctx, key, 2*time.Hour).Result(); err != nil || !ok {
		t.Fatalf("EXPIRE = %v, %v", ok, err)
	}
	if ttl, err := client.PTTL(ctx, key).Result(); err != nil || ttl < time.Hour || ttl > 2*time.Hour {
		t.Fatalf("PTTL = %v, %v", ttl, err)
	}
	if ok, err := client.Persist(ctx, key).Result(); err != nil || !ok {
		t.Fatalf("PERSIST = %v, %v", ok, err)
	}
	if ttl, err := client.TTL(ctx, key).Result(); err != nil || ttl != -1 {
		t.Fatalf("TTL after PERSIST = %v, %v; want -1 (no expiry)", ttl, err)
	}
	if ttl, err := client.TTL(ctx, prefix+"nothing").Result(); err != nil || ttl != -2 {
		t.Fatalf("TTL of missing key = %v, %v; want -2", ttl, err)
	}
	if err := client.Set(ctx, key, "v", 30*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the key to expire", func() bool {
		return errors.Is(client.Get(ctx, key).Err(), redis.Nil)
	})
}

func checkConditionalSet(t *testing.T, ctx context.Context, client *redis.ClusterClient, prefix string) {
	t.Helper()
	key := prefix + "cond"
	if ok, err := client.SetNX(ctx, key, "first", 0).Result(); err != nil || !ok {
		t.Fatalf("SET NX on a new key = %v, %v", ok, err)
	}
	if ok, err := client.SetNX(ctx, key, "second", 0).Result(); err != nil || ok {
		t.Fatalf("SET NX on an existing key = %v, %v", ok, err)
	}
	if ok, err := client.SetXX(ctx, prefix+"absent", "x", 0).Result(); err != nil || ok {
		t.Fatalf("SET XX on a missing key = %v, %v", ok, err)
	}
	prev, err := client.SetArgs(ctx, key, "third", redis.SetArgs{Get: true, KeepTTL: true}).Result()
	if err != nil || prev != "first" {
		t.Fatalf("SET GET = %q, %v", prev, err)
	}
	if got := client.Get(ctx, key).Val(); got != "third" {
		t.Fatalf("after SET GET the value is %q", got)
	}
}

func checkIntrospection(t *testing.T, ctx context.Context, client *redis.ClusterClient, c *testCluster) {
	t.Helper()
	slots, err := client.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	covered := 0
	for _, s := range slots {
		covered += s.End - s.Start + 1
		if len(s.Nodes) != 1 || len(s.Nodes[0].ID) != 40 {
			t.Fatalf("CLUSTER SLOTS range %+v", s)
		}
	}
	if covered != NumSlots {
		t.Fatalf("CLUSTER SLOTS covers %d slots, want %d", covered, NumSlots)
	}
	shards, err := client.ClusterShards(ctx).Result()
	if err != nil || len(shards) != 3 {
		t.Fatalf("CLUSTER SHARDS = %d shards, %v", len(shards), err)
	}
	if info := client.ClusterInfo(ctx).Val(); !strings.Contains(info, "cluster_state:ok") {
		t.Fatalf("CLUSTER INFO = %q", info)
	}
	if slot, err := client.ClusterKeySlot(ctx, "{user1000}.following").Result(); err != nil || slot != int64(KeySlot("user1000")) {
		t.Fatalf("CLUSTER KEYSLOT = %d, %v", slot, err)
	}
	if n, err := client.ClusterCountKeysInSlot(ctx, 1).Result(); err == nil {
		t.Fatalf("CLUSTER COUNTKEYSINSLOT answered %d; it is not served", n)
	}
}

// checkFollowsMoved hands every partition to another node through the control plane while a client holds
// the old slot map, then checks that the client follows MOVED and each write lands on the new owner.
func checkFollowsMoved(t *testing.T, c *testCluster) {
	ctx := bg(t)
	client := newClusterClient(t, c, 3)
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("moving-%d", i)
		if err := client.Set(ctx, keys[i], "before", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]NodeID{}
	for _, k := range keys {
		before[k] = c.owner(k).id
	}
	redirects := totalRedirectsSent(c)
	rotateOwners(t, c)
	for _, k := range keys {
		if c.owner(k).id == before[k] {
			t.Fatalf("key %s kept its owner %s", k, before[k])
		}
		if err := client.Set(ctx, k, "after", 0).Err(); err != nil {
			t.Fatalf("SET %s after the move: %v", k, err)
		}
		owner := c.owner(k)
		if v, _, ok := owner.own.store.get(owner.layout.KeySegment(k), k); !ok || string(v) != "after" {
			t.Fatalf("key %s: new owner %s holds %q, %v", k, owner.id, v, ok)
		}
	}
	if totalRedirectsSent(c) == redirects {
		t.Fatal("no node answered MOVED: the client's map was not stale")
	}
}

func totalRedirectsSent(c *testCluster) uint64 {
	var n uint64
	for _, node := range c.live() {
		n += node.Stats().RedirectsSent
	}
	return n
}

// rotateOwners commits, on the leader, a partition map in which every partition's primary is the next node
// in name order, and waits until every node has applied it. Data does not move; only ownership does.
func rotateOwners(t *testing.T, c *testCluster) {
	t.Helper()
	leader := c.leaderNode()
	m := leader.ClusterMap()
	var ids []NodeID
	for id := range m.Nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	next := make(Assignment, len(m.Assignment))
	for p, nodes := range m.Assignment {
		i := slices.Index(ids, nodes[0])
		next[p] = []NodeID{ids[(i+1)%len(ids)]}
	}
	if err := leader.ctl.commit(&command{Kind: cmdAssign, Assignment: next}); err != nil {
		t.Fatalf("commit rotated assignment: %v", err)
	}
	want := leader.ClusterMap().Index
	waitFor(t, 10*time.Second, "every node to apply the rotated map", func() bool {
		for _, n := range c.live() {
			if n.ClusterMap().Index < want {
				return false
			}
		}
		return true
	})
}

// rawConn is a plain TCP connection speaking RESP by hand.
type rawConn struct{ *resptest.Conn }

func dialRaw(t *testing.T, addr string) *rawConn { return &rawConn{resptest.Dial(t, addr)} }

func (r *rawConn) send(s string)                       { r.Send(s) }
func (r *rawConn) line() string                        { return r.Line() }
func (r *rawConn) roundTrip(cmds string, n int) string { return r.RoundTrip(cmds, n) }
func (r *rawConn) expectClosed()                       { r.ExpectClosed() }

func respCmd(args ...string) string { return resptest.Cmd(args...) }

// ownerOf returns the node that owns key and one that does not.
func ownerOf(c *testCluster, key string) (owner, other *Node) {
	owner = c.owner(key)
	for _, n := range c.live() {
		if n != owner {
			return owner, n
		}
	}
	return owner, nil
}

// TestRESPBadInput sends malformed and hostile input over raw sockets: each gets an error reply, or the
// connection is closed, and the node keeps serving.
func TestRESPBadInput(t *testing.T) {
	c := startRESPCluster(t, 3, func(cfg *Config) { cfg.MaxValueSize = 4096 })
	owner, other := ownerOf(c, "k")
	addr := owner.RESPAddr()

	protocolErrors := map[string]string{
		"huge bulk length":           "*2\r\n$3\r\nGET\r\n$99999999999999999999\r\n",
		"negative bulk length":       "*2\r\n$3\r\nGET\r\n$-5\r\n",
		"huge multibulk count":       "*9223372036854775807\r\n",
		"multibulk count overflow":   "*99999999999999999999999\r\n",
		"not a bulk":                 "*1\r\n:5\r\n",
		"bulk without CRLF":          "*1\r\n$4\r\nPINGxx",
		"length line without end":    "*2\r\n$3" + strings.Repeat("3", 100),
		"inline line over the limit": strings.Repeat("a", 64<<10+10),
	}
	for name, input := range protocolErrors {
		t.Run(name, func(t *testing.T) {
			r := dialRaw(t, addr)
			r.send(input)
			if got := r.line(); !strings.HasPrefix(got, "-ERR Protocol error") {
				t.Fatalf("reply %q, want a protocol error", got)
			}
			r.expectClosed()
		})
	}

	replies := []struct{ name, input, want string }{
		{"unknown command", respCmd("SWAPDB", "0", "1"), "-ERR unknown command 'SWAPDB', with args beginning with: '0' '1' "},
		{"wrong arity", respCmd("GET"), "-ERR wrong number of arguments for 'get' command"},
		{"mset across slots before its arity", respCmd("MSET", "{a}1", "x", "b"), "-CROSSSLOT Keys in request don't hash to the same slot"},
		{"cross slot", respCmd("MGET", "a", "b"), "-CROSSSLOT Keys in request don't hash to the same slot"},
		{"empty multibulk skipped", "*0\r\n" + respCmd("PING"), "+PONG"},
		{"inline", "PING\r\n", "+PONG"},
		{"syntax", respCmd("SET", "k", "v", "EX"), "-ERR syntax error"},
		{"bad expire", respCmd("SET", "k", "v", "EX", "0"), "-ERR invalid expire time in 'set' command"},
		{"bad integer", respCmd("INCRBY", "k", "1x"), "-ERR value is not an integer or out of range"},
		{"unknown command with binary name", respCmd("a\x00\r\n"), "-ERR unknown command 'a', with args beginning with: "},
		{"noauth needs a password", respCmd("AUTH", "x"), "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"},
		{"protocol 4", respCmd("HELLO", "4"), "-NOPROTO unsupported protocol version"},
		{"bulk over the value limit", respCmd("SET", "k", strings.Repeat("v", 4097)), "-ERR argument of 4097 bytes exceeds the maximum value size (4096 bytes)"},
	}
	for _, tc := range replies {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, addr)
			r.send(tc.input)
			if got := r.line(); got != tc.want {
				t.Fatalf("reply %q, want %q", got, tc.want)
			}
			r.send(respCmd("PING"))
			if got := r.line(); got != "+PONG" {
				t.Fatalf("after the error: %q", got)
			}
		})
	}

	t.Run("half-sent command then close", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.send("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nval")
		r.Net.(*net.TCPConn).CloseWrite()
		r.expectClosed()
	})
	t.Run("command trickled byte by byte", func(t *testing.T) {
		r := dialRaw(t, addr)
		for _, b := range []byte(respCmd("SET", "k", "trickled")) {
			r.send(string(b))
		}
		if got := r.line(); got != "+OK" {
			t.Fatalf("reply %q", got)
		}
	})
	t.Run("announced bulk never sent", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.send("*2\r\n$3\r\nGET\r\n$4096\r\nabc")
		r.Net.Close()
		// The node still serves others.
		r2 := dialRaw(t, addr)
		r2.send(respCmd("PING"))
		if got := r2.line(); got != "+PONG" {
			t.Fatalf("reply %q", got)
		}
	})
	t.Run("binary key and value", func(t *testing.T) {
		key, value := "bin\x00\xff\r\nkey", "v\x00\r\n\xfe"
		o, _ := ownerOf(c, key)
		r := dialRaw(t, o.RESPAddr())
		r.send(respCmd("SET", key, value) + respCmd("GET", key))
		if got := r.line(); got != "+OK" {
			t.Fatalf("SET reply %q", got)
		}
		if got := r.line(); got != fmt.Sprintf("$%d", len(value)) {
			t.Fatalf("GET header %q", got)
		}
		buf := make([]byte, len(value)+2)
		if _, err := io.ReadFull(r.R, buf); err != nil || string(buf) != value+"\r\n" {
			t.Fatalf("GET payload %q, %v", buf, err)
		}
	})
	t.Run("moved", func(t *testing.T) {
		r := dialRaw(t, other.RESPAddr())
		r.send(respCmd("GET", "k"))
		want := fmt.Sprintf("-MOVED %d %s", KeySlot("k"), owner.RESPAddr())
		if got := r.line(); got != want {
			t.Fatalf("reply %q, want %q", got, want)
		}
	})
	t.Run("pipeline in one write", func(t *testing.T) {
		var b strings.Builder
		for range 500 {
			b.WriteString(respCmd("INCR", "k-pipe{k}"))
		}
		o, _ := ownerOf(c, "k-pipe{k}")
		r := dialRaw(t, o.RESPAddr())
		r.send(b.String())
		for i := 1; i <= 500; i++ {
			if got := r.line(); got != fmt.Sprintf(":%d", i) {
				t.Fatalf("reply %d = %q", i, got)
			}
		}
	})
}

// TestRESPAuth checks that a node with a password refuses commands until AUTH or HELLO AUTH succeeds, and
// that go-redis authenticates with both protocols.
func TestRESPAuth(t *testing.T) {
	c := startRESPCluster(t, 1, func(cfg *Config) { cfg.RESPPassword = "s3cret" })
	addr := c.node(0).RESPAddr()
	r := dialRaw(t, addr)
	steps := []struct{ input, want string }{
		{respCmd("GET", "k"), "-NOAUTH Authentication required."},
		{respCmd("HELLO", "3"), "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"},
		{respCmd("AUTH", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled."},
		{respCmd("AUTH", "default", "s3cret"), "+OK"},
		{respCmd("SET", "k", "v"), "+OK"},
	}
	for _, s := range steps {
		r.send(s.input)
		if got := r.line(); got != s.want {
			t.Fatalf("%q: reply %q, want %q", s.input, got, s.want)
		}
	}
	for _, proto := range []int{2, 3} {
		client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, Protocol: proto, Password: "s3cret"})
		defer client.Close()
		if got, err := client.Get(bg(t), "k").Result(); err != nil || got != "v" {
			t.Fatalf("RESP%d GET with password = %q, %v", proto, got, err)
		}
	}
}

// BenchmarkRESPPipeline measures the endpoint's cost per command: batches of 16 pipelined SETs or GETs of
// 64-byte values over one loopback connection to a single node, over plain TCP and over TLS in one run.
func BenchmarkRESPPipeline(b *testing.B) {
	pki := newTestPKI(b)
	for _, transport := range []string{"tcp", "tls"} {
		c := startSocketCluster(b, 1, func(cfg *Config) {
			withRESP(cfg)
			cfg.Dialer = nil
			if transport == "tls" {
				cfg.RESPTLS = pki.serverConfig(false)
			}
		})
		var conn net.Conn
		var err error
		if transport == "tls" {
			conn, err = tls.Dial("tcp", c.node(0).RESPAddr(), pki.clientConfig(false))
		} else {
			conn, err = net.Dial("tcp", c.node(0).RESPAddr())
		}
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		rd := bufio.NewReader(conn)
		for _, op := range []string{"SET", "GET"} {
			b.Run(transport+"/"+op, func(b *testing.B) { benchPipelined(b, conn, rd, op) })
		}
	}
}

// benchPipelined sends batches of 16 op commands and reads their replies.
func benchPipelined(b *testing.B, conn net.Conn, rd *bufio.Reader, op string) {
	value := strings.Repeat("v", 64)
	var batch strings.Builder
	for i := range 16 {
		args := []string{op, fmt.Sprintf("key:%06d", i)}
		if op == "SET" {
			args = append(args, value)
		}
		batch.WriteString(respCmd(args...))
	}
	payload := []byte(batch.String())
	for b.Loop() {
		if _, err := conn.Write(payload); err != nil {
			b.Fatal(err)
		}
		for range 16 {
			line, err := rd.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if line[0] == '$' && line[1] != '-' { // a value, not a missing key's null
				rd.Discard(len(value) + 2)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(16*b.N), "ns/cmd")
}

// TestRESPClusterNodesAfterLeave checks that a member that left the cluster is no longer listed by CLUSTER
// NODES, SHARDS and INFO, and that one that crashed is listed as failed until it is evicted.
func TestRESPClusterNodesAfterLeave(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 4, elastic())
	ctx := bg(t)
	client := redis.NewClient(&redis.Options{Addr: c.node(0).RESPAddr()})
	defer client.Close()
	nodeLines := func() []string {
		out, err := client.ClusterNodes(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	if lines := nodeLines(); len(lines) != 4 {
		t.Fatalf("CLUSTER NODES before the leave: %q", lines)
	}
	leaver := c.node(3)
	leaveCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := leaver.Leave(leaveCtx); err != nil {
		t.Fatal(err)
	}
	c.kill(3)
	gone := resp.RedisNodeID(leaver.id)
	waitFor(t, 20*time.Second, "CLUSTER NODES without the member that left", func() bool {
		lines := nodeLines()
		return len(lines) == 3 && !strings.Contains(strings.Join(lines, "\n"), gone)
	})
	if shards, err := client.ClusterShards(ctx).Result(); err != nil || len(shards) != 3 {
		t.Fatalf("CLUSTER SHARDS after the leave: %d shards, %v", len(shards), err)
	}
	if info := client.ClusterInfo(ctx).Val(); !strings.Contains(info, "cluster_known_nodes:3\r\n") {
		t.Fatalf("CLUSTER INFO after the leave: %q", info)
	}

	crashed := c.node(2)
	c.kill(2)
	waitFor(t, 20*time.Second, "CLUSTER NODES to flag the crashed member", func() bool {
		for _, line := range nodeLines() {
			if strings.HasPrefix(line, resp.RedisNodeID(crashed.id)+" ") {
				return strings.Contains(line, " master,fail ") && strings.Contains(line, " disconnected")
			}
		}
		return false
	})
}
