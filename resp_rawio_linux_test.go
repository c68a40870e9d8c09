package zaris

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TestRawSocketWritesTakeTurns has two goroutines write large buffers at once through one raw socket, as a
// connection's replies and its pusher's pushes may, to a peer that reads slowly enough for the writes to
// wait on the poller: each buffer arrives whole and unmixed.
func TestRawSocketWritesTakeTurns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	client.SetReadDeadline(time.Now().Add(30 * time.Second)) // a lost or cut write fails the test, not hangs it
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	sock := newSocketIO(server)
	if _, raw := sock.(*rawSocket); !raw {
		t.Fatalf("a TCP connection got %T, not raw I/O", sock)
	}
	const size, writes = 1 << 20, 4
	payloads := [][]byte{bytes.Repeat([]byte{'a'}, size), bytes.Repeat([]byte{'b'}, size)}
	var wg sync.WaitGroup
	for _, payload := range payloads {
		wg.Go(func() {
			for range writes {
				if n, err := sock.Write(payload); n != len(payload) || err != nil {
					t.Errorf("write of %d bytes: %d written, %v", len(payload), n, err)
				}
			}
		})
	}
	got := make([]byte, size)
	for i := range len(payloads) * writes {
		if _, err := io.ReadFull(client, got); err != nil {
			t.Fatalf("buffer %d: %v", i, err)
		}
		if got[0] != 'a' && got[0] != 'b' || bytes.Count(got, got[:1]) != size {
			t.Fatalf("buffer %d arrived mixed with another, or cut", i)
		}
	}
	wg.Wait()
}
