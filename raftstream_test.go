package zaris

import (
	"errors"
	"io"
	"net"
	"os"
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
	stream := newRaftStream(rawRaftListener{ln}, nil, self, idle)
	defer stream.Close()
	dialer := newRaftStream(nil, nil, raftID("node-0", 1), idle)
	to := raftAddress(ln.Addr().String(), self)

	pooled, err := dialer.Dial(to, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer pooled.Close()
	if _, err := pooled.Write([]byte("req1")); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	expectRead(t, first, "req1")
	if _, err := first.Write([]byte("rep1")); err != nil {
		t.Fatal(err)
	}
	expectRead(t, pooled, "rep1")

	// The accepting end gives up on the stream once it is quiet for idle.
	quiet := make([]byte, 1)
	if _, err := first.Read(quiet); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a quiet stream's read: %v, want its deadline", err)
	}
	first.Close() // as raft's handler does once a read fails
	// The next request goes out on a new stream.
	if _, err := pooled.Write([]byte("req2")); err != nil {
		t.Fatalf("a request on a stream quiet past its idle time: %v", err)
	}
	second, err := stream.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	expectRead(t, second, "req2")
	if _, err := second.Write([]byte("rep2")); err != nil {
		t.Fatal(err)
	}
	expectRead(t, pooled, "rep2")
}

func expectRead(t *testing.T, r io.Reader, want string) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}
