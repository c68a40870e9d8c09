package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// startMux runs a Mux on a fresh loopback listener and closes it when the test ends.
func startMux(t *testing.T, opts ...MuxOption) (*Mux, string) {
	t.Helper()
	ln := listen(t)
	m := NewMux(ln, opts...)
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	t.Cleanup(func() {
		m.Close()
		if err := <-served; err != nil {
			t.Errorf("Mux.Serve returned %v after Close, want nil", err)
		}
	})
	return m, ln.Addr().String()
}

// serveEcho copies every connection accepted on ln back to itself until ln closes.
func serveEcho(t *testing.T, ln net.Listener) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				io.Copy(conn, conn)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
}

func TestMuxRoutesByFirstByte(t *testing.T) {
	m, addr := startMux(t)
	data, other := m.Listener('D'), m.Listener('R')
	if m.Listener('D') != data {
		t.Fatal("Listener returned a second listener for the same byte")
	}
	if data.Addr().String() != addr {
		t.Fatalf("Addr() = %v, want %v", data.Addr(), addr)
	}
	serveOn(t, data, echo, Options{})
	serveEcho(t, other)

	c := newClient(t, addr, Options{MuxByte: 'D'})
	if resp, err := c.Call(testContext(t), 1, []byte("data plane")); err != nil || string(resp) != "data plane" {
		t.Fatalf("data plane through the mux: %q, %v", resp, err)
	}

	conn, err := DialMux(testContext(t), nil, addr, 'R', nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	if _, err := conn.Write([]byte("other protocol")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("other protocol"))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "other protocol" {
		t.Fatalf("second protocol through the mux: %q, %v", got, err)
	}
}

func TestMuxClosesUnknownByte(t *testing.T) {
	m, addr := startMux(t)
	serveOn(t, m.Listener('D'), echo, Options{})
	conn, err := DialMux(testContext(t), nil, addr, 'X', nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	if n, err := conn.Read(make([]byte, 1)); err == nil || n != 0 {
		t.Fatalf("read %d bytes, %v from a connection with an unknown first byte", n, err)
	}
}

func TestMuxDropsSilentConnection(t *testing.T) {
	_, addr := startMux(t, WithHandshakeTimeout(50*time.Millisecond))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("a silent connection was not dropped")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("mux kept a silent connection past its handshake timeout")
	}
}

func TestMuxCloseEndsListenersAndServers(t *testing.T) {
	ln := listen(t)
	m := NewMux(ln)
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	srv := NewServer(echo, Options{})
	dataServed := make(chan error, 1)
	data := m.Listener('D') // registered before the client dials: a byte of no listener is refused
	go func() { dataServed <- srv.Serve(data) }()

	c := newClient(t, ln.Addr().String(), Options{MuxByte: 'D'})
	if _, err := c.Call(testContext(t), 1, nil); err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", ln.Addr().String()) // still in its handshake when the mux closes
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	m.Close()
	if err := receive(t, served, "Mux.Serve"); err != nil {
		t.Fatalf("Mux.Serve returned %v", err)
	}
	if err := receive(t, dataServed, "Server.Serve"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Server.Serve on a closed mux listener returned %v, want net.ErrClosed", err)
	}
	srv.Close()
}

func TestMuxListenerClose(t *testing.T) {
	m, addr := startMux(t)
	l := m.Listener('D')
	accepted := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		accepted <- err
	}()
	l.Close()
	if err := receive(t, accepted, "Accept"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close returned %v", err)
	}
	if m.Listener('D') == l {
		t.Fatal("a closed listener was handed out again")
	}
	conn, err := DialMux(testContext(t), nil, addr, 'R', nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

func TestDialMuxHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DialMux(ctx, nil, "127.0.0.1:1", 'D', nil); err == nil {
		t.Fatal("DialMux with a cancelled context succeeded")
	}
}

func TestMuxCapsHandshakes(t *testing.T) {
	_, addr := startMux(t, WithMaxHandshakes(2), WithHandshakeTimeout(testTimeout))
	silent := make([]net.Conn, 2)
	for i := range silent {
		silent[i] = dialRaw(t, addr)
	}
	extra := dialRaw(t, addr)
	if n, err := extra.Read(make([]byte, 1)); n != 0 || isTimeout(err) {
		t.Fatalf("a connection beyond the cap on handshakes was kept: %d bytes, %v", n, err)
	}
	silent[0].Close()
	waitUntil(t, "a place frees for a new handshake", func() bool {
		conn := dialRaw(t, addr)
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := conn.Read(make([]byte, 1))
		return isTimeout(err) // held for its first byte, not closed
	})
}

// TestMuxCapsHandshakesPerAddress holds silent connections from one address up to its cap: one more from
// it is closed at once, while another address still gets a place and is routed.
func TestMuxCapsHandshakesPerAddress(t *testing.T) {
	m, addr := startMux(t, WithMaxHandshakes(100), WithMaxHandshakesPerAddr(4), WithHandshakeTimeout(time.Minute))
	from := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	for range 4 {
		from("127.0.0.2")
	}
	waitUntil(t, "the silent connections to be held", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.waiting) == 4
	})
	extra := from("127.0.0.2")
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); n != 0 || isTimeout(err) {
		t.Fatalf("a connection beyond its address's cap was kept: %d bytes, %v", n, err)
	}
	lane := m.Listener('a')
	other := from("127.0.0.3")
	if _, err := other.Write([]byte{'a'}); err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		conn, err := lane.Accept()
		if err == nil {
			conn.Close()
		}
		accepted <- err
	}()
	select {
	case err := <-accepted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a connection from another address was not routed beside a full one")
	}
}
