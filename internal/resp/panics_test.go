package resp

import (
	"io"
	"maps"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestRESPCommandPanicAnsweredAndClosed has a RESP command panic outside any key operation, after it began
// its reply: the client gets the replies before it and an internal error instead of the partial reply,
// then the connection closes, and the endpoint serves new connections.
func TestRESPCommandPanicAnsweredAndClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(newFakeNode(), fakeOptions())
	var recovered atomic.Int32
	s.contain = func(any, string) { recovered.Add(1) }
	s.commands = maps.Clone(respCommandTable)
	boom := *s.commands["ping"]
	boom.name = "boom"
	boom.run = func(c *respConn, _ [][]byte) {
		c.wr.simple("half a reply")
		panic("boom")
	}
	s.commands["boom"] = &boom
	s.Serve(ln)
	t.Cleanup(func() { s.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("PING\r\nBOOM\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if want := "+PONG\r\n-" + respInternalError + "\r\n"; string(got) != want || err != nil {
		t.Fatalf("replies %q, %v; want %q and the connection closed", got, err, want)
	}
	if recovered.Load() != 1 {
		t.Fatalf("%d panics handed to the node, want 1", recovered.Load())
	}
	again, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	again.SetDeadline(time.Now().Add(10 * time.Second))
	again.Write([]byte("PING\r\n"))
	reply := make([]byte, 7)
	if _, err := io.ReadFull(again, reply); err != nil || string(reply) != "+PONG\r\n" {
		t.Fatalf("a new connection after the panic: %q, %v", reply, err)
	}
}
