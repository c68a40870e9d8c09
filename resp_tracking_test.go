package zaris

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// TestRueidisClientSideCaching reads keys through rueidis's client-side cache against a 3-node cluster:
// the second read of a key is a hit in the client's memory, and once the key is written through another
// node, the owner's invalidation push makes the client read the new value.
func TestRueidisClientSideCaching(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 3, nil)
	ctx := bg(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{c.node(0).RESPAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	for _, n := range c.live() {
		key := c.keyOwnedBy("cached", n)
		writer := c.node((c.indexOf(n.id) + 1) % 3)
		must(t, writer.Put(ctx, key, []byte("v1")))
		read := func() (string, bool) {
			r := client.DoCache(ctx, client.B().Get().Key(key).Cache(), time.Minute)
			v, err := r.ToString()
			if err != nil {
				t.Fatalf("GET %s: %v", key, err)
			}
			return v, r.IsCacheHit()
		}
		if v, hit := read(); v != "v1" || hit {
			t.Fatalf("first read of %s: %q, hit %v", key, v, hit)
		}
		if v, hit := read(); v != "v1" || !hit {
			t.Fatalf("second read of %s: %q, hit %v; want a hit in the client's cache", key, v, hit)
		}
		must(t, writer.Put(ctx, key, []byte("v2")))
		waitFor(t, 10*time.Second, "the client to read the new value of "+key, func() bool {
			v, _ := read()
			return v == "v2"
		})
		if v, hit := read(); v != "v2" || !hit {
			t.Fatalf("read of %s after the change: %q, hit %v; want the new value cached again", key, v, hit)
		}
	}
}

// TestClientTrackingPushes drives CLIENT TRACKING by hand in RESP3: a tracked read, then a write of the key
// from another connection, brings an invalidation push while the reader waits; an untracked OPTIN read
// brings none; CLIENT CACHING and unsupported options answer Redis's errors.
func TestClientTrackingPushes(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 1, nil)
	addr := c.node(0).RESPAddr()
	reader, writer := dialRESP(t, addr), dialRESP(t, addr)
	reader.do(t, "HELLO", "3")
	writer.do(t, "SET", "k", "v1")
	writer.do(t, "SET", "other", "o1")
	if got := reader.do(t, "CLIENT", "CACHING", "YES"); !strings.HasPrefix(got, "-ERR CLIENT CACHING can be called only") {
		t.Fatalf("CLIENT CACHING without tracking: %q", got)
	}
	if got := reader.do(t, "CLIENT", "TRACKING", "ON", "BCAST"); !strings.HasPrefix(got, "-ERR CLIENT TRACKING BCAST is not supported") {
		t.Fatalf("BCAST: %q", got)
	}
	reader.expect(t, "+OK", "CLIENT", "TRACKING", "ON")
	reader.expect(t, "$2", "GET", "k")
	writer.do(t, "SET", "k", "v2")
	reader.expectPush(t, "k", "after a write of a tracked key")
	reader.expect(t, "+OK", "CLIENT", "TRACKING", "OFF")
	reader.expect(t, "+OK", "CLIENT", "TRACKING", "ON", "OPTIN")
	reader.expect(t, "$2", "GET", "k") // not opted in: not tracked
	reader.expect(t, "+OK", "CLIENT", "CACHING", "YES")
	reader.expect(t, "$2", "GET", "other")
	writer.do(t, "SET", "k", "v3")
	writer.do(t, "SET", "other", "o2")
	reader.expectPush(t, "other", "after writes of an untracked key and one read after CLIENT CACHING YES")

	// A transaction's write is one atomic write of several keys: each tracked one is invalidated.
	reader.expect(t, "+OK", "CLIENT", "CACHING", "YES")
	reader.expect(t, "$2", "GET", "k")
	writer.expect(t, "+OK", "MULTI")
	writer.expect(t, "+QUEUED", "SET", "k", "v4")
	writer.expect(t, "+QUEUED", "SET", "{k}untracked", "u")
	writer.expect(t, "*2", "EXEC")
	reader.expectPush(t, "k", "after EXEC")
}

// respLine is a raw RESP connection for tests that read replies line by line.
type respLine struct {
	conn net.Conn
	rd   *bufio.Reader
}

func dialRESP(t *testing.T, addr string) *respLine {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &respLine{conn: conn, rd: bufio.NewReader(conn)}
}

// send writes one command.
func (r *respLine) send(t *testing.T, args ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	if _, err := r.conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
}

// line reads one line of the reply stream, without its CRLF.
func (r *respLine) line(t *testing.T) string {
	t.Helper()
	r.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	s, err := r.rd.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return strings.TrimSuffix(s, "\r\n")
}

// do sends a command and returns the first line of its reply, skipping the rest of a simple reply it
// knows the shape of: a bulk string's payload, and HELLO's map.
func (r *respLine) do(t *testing.T, args ...string) string {
	t.Helper()
	r.send(t, args...)
	first := r.line(t)
	switch {
	case strings.HasPrefix(first, "$") && first != "$-1":
		r.line(t)
	case strings.HasPrefix(first, "%"):
		r.skipAggregate(t, first)
	}
	return first
}

// skipAggregate reads the rest of a map or array reply whose header is first.
func (r *respLine) skipAggregate(t *testing.T, first string) {
	n, _ := strconv.Atoi(first[1:])
	if first[0] == '%' {
		n *= 2
	}
	for range n {
		if l := r.do2(t); strings.HasPrefix(l, "*") || strings.HasPrefix(l, "%") {
			r.skipAggregate(t, l)
		}
	}
}

// do2 reads one element: a line, and a bulk's payload.
func (r *respLine) do2(t *testing.T) string {
	l := r.line(t)
	if strings.HasPrefix(l, "$") && l != "$-1" {
		r.line(t)
	}
	return l
}

// expectPush reads an invalidation push of key, which what came after is to have brought.
func (r *respLine) expectPush(t *testing.T, key, after string) {
	t.Helper()
	for _, want := range []string{">2", "$10", "invalidate", "*1", "$" + strconv.Itoa(len(key)), key} {
		if got := r.line(t); got != want {
			t.Fatalf("%s: push line %q, want %q", after, got, want)
		}
	}
}

// expect sends a command and fails unless its reply starts with want.
func (r *respLine) expect(t *testing.T, want string, args ...string) {
	t.Helper()
	if got := r.do(t, args...); got != want {
		t.Fatalf("%v: %q, want %q", args, got, want)
	}
}
