package rawio

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
	client, server := pair(t)
	_, sock := Of(server)
	if sock == nil {
		t.Fatal("a TCP connection got no raw I/O")
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

// TestWriteNowStopsWhenTheSocketIsFull writes more than a socket holds to a peer that does not read:
// WriteNow returns at once with what the socket took, and the rest, written after it, arrives in order.
func TestWriteNowStopsWhenTheSocketIsFull(t *testing.T) {
	client, server := pair(t)
	_, sock := Of(server)
	if sock == nil {
		t.Fatal("a TCP connection got no raw I/O")
	}
	payload := make([]byte, 64<<20) // beyond any loopback socket's buffers
	for i := range payload {
		payload[i] = byte(i % 251)
	}
	n, err := sock.WriteNow(payload)
	if err != nil || n == 0 || n >= len(payload) {
		t.Fatalf("WriteNow to a peer that reads nothing: %d of %d bytes, %v; want some, not all, no error", n, len(payload), err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if m, err := sock.Write(payload[n:]); m != len(payload)-n || err != nil {
			t.Errorf("the rest: %d of %d bytes, %v", m, len(payload)-n, err)
		}
	})
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !bytes.Equal(got, payload) {
		t.Fatal("the bytes arrived out of order or changed")
	}
}

// pair returns the two ends of a loopback TCP connection, the client's reads bounded so that a lost write
// fails the test rather than hangs it.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	client.SetReadDeadline(time.Now().Add(30 * time.Second))
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}
