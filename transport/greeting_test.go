package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestGreetingCompatible(t *testing.T) {
	for _, tc := range []struct {
		a, b Greeting
		want bool
	}{
		{Greeting{1, 0}, Greeting{1, 0}, true},
		{Greeting{1, 0}, Greeting{0, 0}, true},  // the previous release, during an upgrade
		{Greeting{2, 1}, Greeting{1, 0}, true},  // adjacent releases
		{Greeting{3, 2}, Greeting{1, 0}, false}, // two releases apart: the newer accepts 2 and up
		{Greeting{1, 0}, Greeting{3, 2}, false}, // the same pair seen from the older
		{Greeting{5, 5}, Greeting{5, 5}, true},
		{Greeting{5, 5}, Greeting{4, 4}, false},
	} {
		if got := tc.a.Compatible(tc.b); got != tc.want {
			t.Errorf("%v.Compatible(%v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := tc.b.Compatible(tc.a); got != tc.want {
			t.Errorf("compatibility is not symmetric: %v.Compatible(%v) = %v", tc.b, tc.a, got)
		}
	}
}

// TestMuxGreetings dials a Mux that greets: a compatible client calls through it, an incompatible one gets
// a VersionError naming both versions and no connection, and one that sends no greeting is cut off.
func TestMuxGreetings(t *testing.T) {
	server := Greeting{Version: 3, MinVersion: 2}
	m, addr := startMux(t, WithGreeting(server))
	serveOn(t, m.Listener('D'), echo, Options{})

	for _, g := range []Greeting{{3, 2}, {2, 1}, {4, 3}} {
		c := newClient(t, addr, Options{MuxByte: 'D', Greeting: &g})
		if resp, err := c.Call(testContext(t), 1, []byte("hi")); err != nil || string(resp) != "hi" {
			t.Fatalf("client greeting %v: %q, %v", g, resp, err)
		}
	}

	old := Greeting{Version: 1, MinVersion: 0}
	_, err := DialMux(testContext(t), nil, addr, 'D', &old)
	var ve *VersionError
	if !errors.As(err, &ve) || !errors.Is(err, ErrIncompatible) || ve.Remote != server || ve.Local != old {
		t.Fatalf("dial greeting %v: %v, want a VersionError naming %v and %v", old, err, old, server)
	}
	c := newClient(t, addr, Options{MuxByte: 'D', Greeting: &old})
	if _, err := c.Call(testContext(t), 1, []byte("hi")); !errors.Is(err, ErrIncompatible) || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("call with greeting %v: %v, want ErrIncompatible and ErrUnreachable (not sent)", old, err)
	}

	// A client of a release without greetings sends a frame right after the byte: cut off, nothing echoed.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	if _, err := conn.Write(appendFrame([]byte{'D'}, envelope{kind: kindRequest, id: 1, op: 1, payload: []byte("hi")})); err != nil {
		t.Fatal(err)
	}
	if n, err := io.ReadFull(conn, make([]byte, 1)); err == nil || n != 0 {
		t.Fatalf("a connection without a greeting read %d bytes, %v; want it closed", n, err)
	}
}

// TestDialMuxGreetingHonoursContext checks that a dialer waiting for an answer that never comes gives up
// with its context.
func TestDialMuxGreetingHonoursContext(t *testing.T) {
	ln := listen(t)
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			defer conn.Close()
			io.Copy(io.Discard, conn) // reads the greeting, never answers
		}
	}()
	ctx, cancel := context.WithTimeout(testContext(t), 100*time.Millisecond)
	defer cancel()
	g := Greeting{1, 0}
	if _, err := DialMux(ctx, nil, ln.Addr().String(), 'D', &g); err == nil {
		t.Fatal("DialMux returned a connection from a peer that never answered the greeting")
	}
}

// FuzzGreeting feeds the Mux's greeting parser arbitrary bytes: it never panics, and what it accepts
// encodes back to the same bytes.
func FuzzGreeting(f *testing.F) {
	f.Add(Greeting{1, 0}.append(nil))
	f.Add([]byte("ZV\xff\xff\x00\x00"))
	f.Add([]byte{0, 0, 0, 12, 0x94, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := parseGreeting(b)
		if err != nil {
			return
		}
		if again := g.append(nil); string(again) != string(b) {
			t.Fatalf("parsed %q as %v, which encodes as %q", b, g, again)
		}
	})
}
