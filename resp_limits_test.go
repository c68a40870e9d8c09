package zaris

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaris-go/zaris/internal/resp"
	"github.com/zaris-go/zaris/internal/resptest"
)

// TestRESPIdleConnectionsClosed fills the endpoint with idle connections: one more is refused as Redis
// refuses it, the idle ones are closed once RESPIdleTimeout has passed, and then a real client gets in.
func TestRESPIdleConnectionsClosed(t *testing.T) {
	t.Parallel()
	const maxClients, idle = 8, 2 * time.Second
	c := startRESPCluster(t, 1, func(cfg *Config) {
		cfg.RESPMaxClients = maxClients
		cfg.RESPIdleTimeout = idle
	})
	node, addr := c.node(0), c.node(0).RESPAddr()
	opened := time.Now()
	conns := make([]*rawConn, maxClients)
	for i := range conns {
		conns[i] = dialRaw(t, addr)
	}
	waitFor(t, 5*time.Second, "every idle connection admitted", func() bool { return node.redis.srv.Clients() == maxClients })

	extra := dialRaw(t, addr)
	if got := extra.line(); got != "-ERR max number of clients reached" {
		t.Fatalf("connection over RESPMaxClients: %q", got)
	}
	extra.expectClosed()

	for _, r := range conns {
		r.expectClosed()
	}
	if elapsed := time.Since(opened); elapsed < idle*15/16 {
		t.Fatalf("idle connections closed after %v, before the %v timeout", elapsed, idle)
	}
	waitFor(t, 5*time.Second, "no connection left", func() bool { return node.redis.srv.Clients() == 0 })
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	if err := client.Set(bg(t), "after-idle", "v", 0).Err(); err != nil {
		t.Fatalf("a real client after the idle ones were closed: %v", err)
	}
}

// TestRESPTrickleCut checks RESPCommandTimeout: a command trickled a byte at a time is cut off and never
// runs, while a client whose commands keep completing is served however long it stays mid-command.
func TestRESPTrickleCut(t *testing.T) {
	const timeout = 500 * time.Millisecond
	c := startRESPCluster(t, 1, func(cfg *Config) {
		cfg.RESPCommandTimeout = timeout
		cfg.RESPIdleTimeout = time.Minute
	})
	node, addr := c.node(0), c.node(0).RESPAddr()

	t.Run("trickle", func(t *testing.T) {
		r := dialRaw(t, addr)
		cmd := []byte(respCmd("SET", "trickled", strings.Repeat("v", 64)))
		start := time.Now()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // one byte every 20 ms: the whole command would take about 2 s
			defer wg.Done()
			for _, b := range cmd[:len(cmd)-1] {
				if _, err := r.Net.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		r.expectClosed()
		elapsed := time.Since(start)
		wg.Wait()
		if elapsed < timeout*15/16 || elapsed > 10*timeout {
			t.Fatalf("trickling client closed after %v, want about %v", elapsed, timeout)
		}
		if _, err := node.Get(bg(t), "trickled"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the trickled command ran: %v", err)
		}
	})
	t.Run("steady pipeline", func(t *testing.T) {
		r := dialRaw(t, addr)
		// Every write ends in the middle of a PING but completes the one before: the client progresses.
		r.send("PI")
		pings := 0
		for start := time.Now(); time.Since(start) < 3*timeout; pings++ {
			time.Sleep(timeout / 5)
			r.send("NG\r\nPI")
		}
		r.send("NG\r\n")
		for i := range pings + 1 {
			if got := r.line(); got != "+PONG" {
				t.Fatalf("reply %d of %d: %q", i, pings+1, got)
			}
		}
	})
}

// TestRESPAuthTimeout checks that a client that does not log in within RESPAuthTimeout is closed, however
// busy it keeps the connection, and that a logged-in one is not.
func TestRESPAuthTimeout(t *testing.T) {
	const timeout = 400 * time.Millisecond
	c := startRESPCluster(t, 1, func(cfg *Config) {
		cfg.RESPPassword = "pw"
		cfg.RESPAuthTimeout = timeout
	})
	addr := c.node(0).RESPAddr()
	loggedIn := dialRaw(t, addr)
	loggedIn.send(respCmd("AUTH", "pw"))
	if got := loggedIn.line(); got != "+OK" {
		t.Fatalf("AUTH: %q", got)
	}
	r := dialRaw(t, addr)
	start := time.Now()
	for {
		if _, err := r.Net.Write([]byte(respCmd("PING"))); err != nil {
			break
		}
		line, err := r.R.ReadString('\n')
		if err != nil {
			break
		}
		if line != "-NOAUTH Authentication required.\r\n" {
			t.Fatalf("PING before AUTH: %q", line)
		}
		time.Sleep(timeout / 8)
	}
	if elapsed := time.Since(start); elapsed < timeout*15/16 || elapsed > 10*timeout {
		t.Fatalf("client that never logged in closed after %v, want about %v", elapsed, timeout)
	}
	loggedIn.send(respCmd("PING"))
	if got := loggedIn.line(); got != "+PONG" {
		t.Fatalf("logged-in client after the timeout: %q", got)
	}
}

// TestRESPUnreadRepliesClosed checks that a client that sends commands but reads none of the replies is
// closed after RESPIdleTimeout rather than holding its connection for ever.
func TestRESPUnreadRepliesClosed(t *testing.T) {
	c := startRESPCluster(t, 1, func(cfg *Config) { cfg.RESPIdleTimeout = 500 * time.Millisecond })
	node := c.node(0)
	if err := node.Put(bg(t), "big", make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, node.RESPAddr())
	r.send(strings.Repeat(respCmd("GET", "big"), 200)) // 200 MiB of replies, never read
	waitFor(t, 10*time.Second, "the server to close the connection", func() bool { return node.redis.srv.Clients() == 0 })
}

// TestRESPPreAuthMemoryBounded sends, from many connections that have not logged in, the largest command
// Redis lets such a client start, unfinished: each holds at most 256 KiB, whatever it announces.
func TestRESPPreAuthMemoryBounded(t *testing.T) {
	const conns = 24
	c := startRESPCluster(t, 1, func(cfg *Config) { cfg.RESPPassword = "pw" })
	node := c.node(0)
	arg := strings.Repeat("x", 16<<10)
	partial := "*10\r\n" + strings.Repeat("$16384\r\n"+arg+"\r\n", 9) + "$16384\r\n" + arg[:8<<10]
	for range conns {
		dialRaw(t, node.RESPAddr()).send(partial)
	}
	waitFor(t, 10*time.Second, "every connection to buffer its command", func() bool {
		all, _ := node.redis.srv.Buffers()
		return all.Used >= conns*(128<<10)
	})
	perConn := int64(resp.PreAuthConnBound)
	if all, _ := node.redis.srv.Buffers(); all.Peak > conns*perConn {
		t.Fatalf("%d unauthenticated connections hold %d bytes, more than %d each", conns, all.Peak, perConn)
	}
	for name, input := range map[string]string{
		"bulk":      "*2\r\n$3\r\nGET\r\n$67108864\r\n",
		"arguments": "*11\r\n",
	} {
		r := dialRaw(t, node.RESPAddr())
		r.send(input)
		if got := r.line(); !strings.HasPrefix(got, "-ERR Protocol error: unauthenticated") {
			t.Fatalf("%s over the pre-auth limit: %q", name, got)
		}
		r.expectClosed()
	}
}

// TestRESPQueryBuffersBounded sends large unfinished commands from many authenticated connections: their
// buffers together never pass RESPMaxQueryBufferTotal, the commands that did not fit are refused with an
// error once sent whole, the others run, and every byte is given back when the connections close.
func TestRESPQueryBuffersBounded(t *testing.T) {
	const conns, valueSize, total = 16, 1 << 20, 8 << 20
	c := startRESPCluster(t, 1, func(cfg *Config) {
		cfg.MaxValueSize = valueSize
		cfg.RESPMaxQueryBufferTotal = total
	})
	node := c.node(0)
	budget := func() resp.Buffers { all, _ := node.redis.srv.Buffers(); return all }
	raws := make([]*rawConn, conns)
	tails := make([]string, conns)
	value := strings.Repeat("v", valueSize)
	for i := range raws {
		raws[i] = dialRaw(t, node.RESPAddr())
		cmd := respCmd("SET", fmt.Sprintf("large-%d", i), value)
		cut := len(cmd) - 100<<10
		raws[i].send(cmd[:cut])
		tails[i] = cmd[cut:]
	}
	waitFor(t, 20*time.Second, "the buffers to fill the budget", func() bool { return budget().Used >= total/2 })

	stored, refused := 0, 0
	for i, r := range raws {
		r.send(tails[i])
		switch got := r.line(); got {
		case "+OK":
			stored++
		case "-ERR the server's query buffers are full; try again later":
			refused++
		default:
			t.Fatalf("SET of a large value: %q", got)
		}
	}
	if stored == 0 || refused == 0 {
		t.Fatalf("%d large SETs stored and %d refused; want both, the budget holding about half", stored, refused)
	}
	if peak := budget().Peak; peak > total {
		t.Fatalf("query buffers peaked at %d bytes, over the %d limit", peak, total)
	}
	for _, r := range raws {
		r.Net.Close()
	}
	waitFor(t, 10*time.Second, "every buffer given back", func() bool { return budget().Used == 0 })

	client := redis.NewClient(&redis.Options{Addr: node.RESPAddr()})
	defer client.Close()
	if err := client.Set(bg(t), "large", value, 0).Err(); err != nil {
		t.Fatalf("a value of MaxValueSize once the buffers are free: %v", err)
	}
	r := dialRaw(t, node.RESPAddr())
	for _, tc := range []struct{ input, want string }{
		{respCmd("SET", "k", value+"x"), "-ERR argument of 1048577 bytes exceeds the maximum value size (1048576 bytes)"},
		{respCmd("MSET", "{m}1", value, "{m}2", value, "{m}3", value), "-ERR command exceeds the query buffer limit (3145728 bytes)"},
		{respCmd("PING"), "+PONG"},
	} {
		r.send(tc.input)
		if got := r.line(); got != tc.want {
			t.Fatalf("reply %q, want %q", got, tc.want)
		}
	}
}

// TestRESPBufferedRepliesBounded sends small commands whose replies are huge: MGET of one large key many
// times, and an EXEC of writes and many GETs of it. Their replies are held until their segment's group
// ends, within the budget the query buffers share: MGET past it is refused with an error, EXEC past it is
// aborted with none of its writes applied, both connections serve on, the heap never holds the whole
// reply, and every byte is given back.
func TestRESPBufferedRepliesBounded(t *testing.T) {
	const valueSize, total, times = 1 << 20, 8 << 20, 256
	c := startRESPCluster(t, 1, func(cfg *Config) {
		cfg.MaxValueSize = valueSize
		cfg.RESPMaxQueryBufferTotal = total
	})
	node := c.node(0)
	budget := func() resp.Buffers { all, _ := node.redis.srv.Buffers(); return all }
	if err := node.Put(bg(t), "{m}big", make([]byte, valueSize)); err != nil {
		t.Fatal(err)
	}
	mget := func(n int) string {
		args := []string{"MGET"}
		for range n {
			args = append(args, "{m}big")
		}
		return respCmd(args...)
	}

	r := dialRaw(t, node.RESPAddr())
	r.send(mget(times))
	if got := r.line(); got != "-ERR the arguments or the reply exceed the size limits" {
		t.Fatalf("MGET of a %d MiB reply over a %d MiB budget: %q", times, total>>20, got)
	}
	r.send(mget(2) + respCmd("PING"))
	if got := r.line(); got != "*2" {
		t.Fatalf("MGET of two values after the refusal: %q", got)
	}
	for range 2 {
		if got := r.line(); got != fmt.Sprintf("$%d", valueSize) {
			t.Fatalf("MGET's value: %q", got[:min(len(got), 32)])
		}
		if _, err := io.ReadFull(r.R, make([]byte, valueSize+2)); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.line(); got != "+PONG" {
		t.Fatalf("PING after MGET: %q", got)
	}

	seed := respCmd("SET", "{m}s", "before") + respCmd("HSET", "{m}h", "f", "1") + respCmd("RPUSH", "{m}l", "a", "b", "c") +
		respCmd("SADD", "{m}set", "x") + respCmd("ZADD", "{m}z", "1", "x")
	writes := respCmd("SET", "{m}s", "after") + respCmd("INCR", "{m}n") + respCmd("HSET", "{m}h", "f", "2", "g", "3") +
		respCmd("HDEL", "{m}h", "f") + respCmd("LPOP", "{m}l") + respCmd("RPUSH", "{m}l", "d") + respCmd("LTRIM", "{m}l", "1", "1") +
		respCmd("SADD", "{m}set", "y") + respCmd("SREM", "{m}set", "x") + respCmd("ZADD", "{m}z", "5", "x", "2", "y") +
		respCmd("DEL", "{m}big2") + respCmd("EXPIRE", "{m}s", "100")
	const nWrites = 12
	x := dialRaw(t, node.RESPAddr())
	x.send(seed)
	for range 5 {
		x.line()
	}
	contents := respCmd("GET", "{m}s") + respCmd("GET", "{m}n") + respCmd("HGETALL", "{m}h") + respCmd("LRANGE", "{m}l", "0", "-1") +
		respCmd("SMEMBERS", "{m}set") + respCmd("ZRANGE", "{m}z", "0", "-1", "WITHSCORES") + respCmd("TTL", "{m}s")
	before := x.roundTrip(contents, 7)

	x.send(respCmd("MULTI") + writes + strings.Repeat(respCmd("GET", "{m}big"), times))
	for i := range 1 + nWrites + times {
		if got, want := x.line(), map[bool]string{true: "+OK", false: "+QUEUED"}[i == 0]; got != want {
			t.Fatalf("reply %d to MULTI and its commands: %q, want %q", i, got, want)
		}
	}
	heap := watchHeapPeak(t)
	x.send(respCmd("EXEC"))
	if got := x.line(); got != "-EXECABORT Transaction discarded because its reply exceeds the size limits" {
		t.Fatalf("EXEC of a %d MiB reply over a %d MiB budget: %q", times, total>>20, got)
	}
	if after := x.roundTrip(contents, 7); after != before {
		t.Fatalf("the aborted EXEC changed the keys it wrote:\nbefore %q\nafter  %q", before, after)
	}
	if peak := budget().Peak; peak > total {
		t.Fatalf("buffered replies peaked at %d bytes, over the %d limit", peak, total)
	}
	// The heap counts garbage until the collector runs, so the bound is loose; a reply held whole would take
	// the heap up by all of its 256 MiB.
	grew := heap()
	if grew > 12*total {
		t.Fatalf("the heap grew by %d MiB serving replies of %d MiB over a %d MiB budget", grew>>20, times, total>>20)
	}
	t.Logf("the heap rose by %d MiB at most while EXEC's %d MiB of replies were refused", grew>>20, times)

	x.send(respCmd("MULTI") + writes + respCmd("EXEC"))
	for range 1 + nWrites {
		x.line()
	}
	if got := x.line(); got != fmt.Sprintf("*%d", nWrites) {
		t.Fatalf("EXEC of the writes alone: %q", got)
	}
	for range nWrites {
		x.line()
	}
	if after := x.roundTrip(contents, 7); after == before {
		t.Fatalf("the EXEC that fits changed nothing: %q", after)
	}
	r.Net.Close()
	x.Net.Close()
	waitFor(t, 10*time.Second, "every byte given back", func() bool { return budget().Used == 0 })
}

// watchHeapPeak samples the heap's live objects until the test ends, and returns what reports how far the
// peak has risen over the heap at the start.
func watchHeapPeak(t *testing.T) func() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	runtime.GC()
	start := read()
	var peak atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			peak.Store(max(peak.Load(), read()))
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return func() int64 { return peak.Load() - start }
}

// dialFrom opens a raw RESP connection to addr from the loopback address from.
func dialFrom(t *testing.T, from, addr string) (*rawConn, error) {
	c, err := resptest.DialFrom(t, from, addr)
	if err != nil {
		return nil, err
	}
	return &rawConn{c}, nil
}

// TestRESPStrangersCannotStarveLoggedInClients opens 5,000 connections that never log in, from 20
// addresses: they take at most their share of the query buffer budget, so a logged-in client still sends
// commands that need the rest.
func TestRESPStrangersCannotStarveLoggedInClients(t *testing.T) {
	const value = 64 << 10
	c := startRESPCluster(t, 1, func(cfg *Config) {
		cfg.RESPPassword = "pw"
		cfg.MaxValueSize = value
		cfg.RESPMaxQueryBufferTotal = 4 << 20
		cfg.RESPMaxPreAuthPerAddr = 250
	})
	node := c.node(0)
	addr := node.RESPAddr()
	loggedIn := dialRaw(t, addr)
	loggedIn.send(respCmd("AUTH", "pw"))
	if got := loggedIn.line(); got != "+OK" {
		t.Fatalf("AUTH: %q", got)
	}
	for i := range 5000 {
		if _, err := dialFrom(t, fmt.Sprintf("127.0.0.%d", 2+i%20), addr); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "the connections not logged in to fill their share", func() bool {
		whole, gate := node.redis.srv.Buffers()
		return gate.Used > gate.Limit-resp.InitialBuffer || whole.Used > whole.Limit-resp.InitialBuffer
	})
	big := strings.Repeat("v", value)
	for i := range 20 {
		key := fmt.Sprintf("logged-in-%d", i)
		loggedIn.send(respCmd("SET", key, big))
		if got := loggedIn.line(); got != "+OK" {
			t.Fatalf("SET of %d bytes by a logged-in client beside 5,000 strangers: %q", value, got)
		}
	}
	if _, gate := node.redis.srv.Buffers(); gate.Peak > gate.Limit {
		t.Fatalf("connections not logged in held %d bytes, over their share of %d", gate.Peak, gate.Limit)
	}
}

// TestRESPPreAuthPerAddress checks that one address has at most RESPMaxPreAuthPerAddr connections that
// have not logged in, that another address is not held back by it, and that logging in frees a place.
func TestRESPPreAuthPerAddress(t *testing.T) {
	const perAddr = 8
	c := startRESPCluster(t, 1, func(cfg *Config) {
		cfg.RESPPassword = "pw"
		cfg.RESPMaxPreAuthPerAddr = perAddr
	})
	addr := c.node(0).RESPAddr()
	ping := func(from string) (*rawConn, string) {
		r, err := dialFrom(t, from, addr)
		if err != nil {
			t.Fatal(err)
		}
		r.send(respCmd("PING"))
		return r, r.line()
	}
	const askLogin, full = "-NOAUTH Authentication required.", "-ERR max number of clients not logged in reached for this address"
	var first *rawConn
	for i := range perAddr {
		r, got := ping("127.0.0.30")
		if got != askLogin {
			t.Fatalf("connection %d from one address: %q", i+1, got)
		}
		if first == nil {
			first = r
		}
	}
	if _, got := ping("127.0.0.30"); got != full {
		t.Fatalf("connection %d from one address: %q, want %q", perAddr+1, got, full)
	}
	if _, got := ping("127.0.0.31"); got != askLogin {
		t.Fatalf("another address beside a full one: %q", got)
	}
	first.send(respCmd("AUTH", "pw"))
	if got := first.line(); got != "+OK" {
		t.Fatalf("AUTH: %q", got)
	}
	if _, got := ping("127.0.0.30"); got != askLogin {
		t.Fatalf("a connection from the address once one logged in: %q", got)
	}
}
