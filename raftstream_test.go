package zaris

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestQuietRaftStreamIsClosed checks both halves of a control-plane stream's idle time: the accepting end
// closes a stream that stays quiet for it, and a stream raft keeps in its pool, quiet that long, carries
// its next request on a stream dialed anew, so raft never writes to a stream the other end closed.
func TestQuietRaftStreamIsClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := raftID("node-1", 1)
	stream := newRaftStream(rawRaftListener{ln}, nil, nil, self, idle)
	defer stream.Close()
	dialer := newRaftStream(nil, nil, nil, raftID("node-0", 1), idle)
	to := raftAddress(ln.Addr().String(), self)

	pooled, err := dialer.Dial(to, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer pooled.Close()
	first := exchangeOnNewStream(t, pooled, stream, "req1", "rep1")

	// The accepting end ends the stream once it is quiet for idle, as if closed, so raft does not log it as
	// a failed command.
	quiet := make([]byte, 1)
	if _, err := first.Read(quiet); err != io.EOF {
		t.Fatalf("a quiet stream's read: %v, want its end", err)
	}
	first.Close() // as raft's handler does once a read fails
	// The next request goes out on a new stream.
	exchangeOnNewStream(t, pooled, stream, "req2", "rep2")
}

// exchangeOnNewStream sends req on the dialed stream, which the listening stream must accept as a new
// connection, answers rep on it and reads rep back. It returns the accepted connection.
func exchangeOnNewStream(t *testing.T, dialed net.Conn, listening *raftStream, req, rep string) net.Conn {
	t.Helper()
	if _, err := dialed.Write([]byte(req)); err != nil {
		t.Fatalf("request %q: %v", req, err)
	}
	accepted, err := listening.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { accepted.Close() })
	expectRead(t, accepted, req)
	if _, err := accepted.Write([]byte(rep)); err != nil {
		t.Fatal(err)
	}
	expectRead(t, dialed, rep)
	return accepted
}

func expectRead(t *testing.T, r io.Reader, want string) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}
