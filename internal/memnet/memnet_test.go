package memnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"golang.org/x/net/nettest"
)

func TestConn(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		n := New()
		ln, err := n.Listen("127.0.0.1:0")
		if err != nil {
			return nil, nil, nil, err
		}
		defer ln.Close()
		c1, c2, err = dialAccept(n, ln)
		if err != nil {
			return nil, nil, nil, err
		}
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}

// dialAccept dials ln's address on n and returns the dialing end and the accepted end.
func dialAccept(n *Network, ln net.Listener) (client, server net.Conn, err error) {
	client, err = n.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	server, err = ln.Accept()
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return client, server, nil
}

// pair returns both ends of a connection on a fresh network, closed at cleanup.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	n := New()
	ln, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, server, err = dialAccept(n, ln)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestListenPicksDistinctPortsAndRefusesATakenAddress(t *testing.T) {
	n := New()
	a, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pa, pb := a.Addr().(*net.TCPAddr), b.Addr().(*net.TCPAddr)
	if pa.Port == 0 || pb.Port == 0 || pa.Port == pb.Port {
		t.Fatalf("ports %d and %d: want two distinct non-zero ports", pa.Port, pb.Port)
	}
	if !pa.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("bound IP %v, want 127.0.0.1", pa.IP)
	}
	for _, addr := range []string{a.Addr().String(), "0.0.0.0:" + portOf(a)} {
		if _, err := n.Listen(addr); !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("Listen(%s) while bound: %v, want EADDRINUSE", addr, err)
		}
	}
	other, err := n.Listen("127.0.0.2:" + portOf(a)) // the same port on another host is free
	if err != nil {
		t.Fatalf("same port on another host: %v", err)
	}
	other.Close()
	a.Close()
	again, err := n.Listen(a.Addr().String())
	if err != nil {
		t.Fatalf("rebinding a closed listener's address: %v", err)
	}
	again.Close()
	b.Close()
}

func portOf(ln net.Listener) string {
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func TestDialWhereNothingListensIsRefusedAtOnce(t *testing.T) {
	n := New()
	ln, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for _, target := range []string{addr, "10.1.2.3:80"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		_, err := n.DialContext(ctx, "tcp", target)
		cancel()
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want ECONNREFUSED", target, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("dial %s took %v to be refused", target, took)
		}
	}
	if _, err := n.DialContext(context.Background(), "udp", addr); err == nil {
		t.Fatal("dialing udp succeeded")
	}
}

func TestDialReachesAWildcardListener(t *testing.T) {
	n := New()
	ln, err := n.Listen(":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := n.DialContext(context.Background(), "tcp", "127.0.0.1:"+portOf(ln))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestAddressesLookLikeTCP(t *testing.T) {
	n := New()
	ln, err := n.Listen("localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, server, err := dialAccept(n, ln)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	defer server.Close()
	for _, a := range []net.Addr{ln.Addr(), client.LocalAddr(), client.RemoteAddr(), server.LocalAddr(), server.RemoteAddr()} {
		if _, ok := a.(*net.TCPAddr); !ok || a.Network() != "tcp" {
			t.Fatalf("address %v is %T on %q, want a *net.TCPAddr on tcp", a, a, a.Network())
		}
	}
	if client.RemoteAddr().String() != ln.Addr().String() || server.LocalAddr().String() != ln.Addr().String() {
		t.Fatalf("client remote %v, server local %v, want the listener's %v", client.RemoteAddr(), server.LocalAddr(), ln.Addr())
	}
	if server.RemoteAddr().String() != client.LocalAddr().String() {
		t.Fatalf("server remote %v, want the client's local %v", server.RemoteAddr(), client.LocalAddr())
	}
}

func TestWriterBlocksOnceThePeerStopsReading(t *testing.T) {
	client, server := pair(t)
	client.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	n, err := client.Write(make([]byte, 2*BufferSize))
	if n != BufferSize {
		t.Fatalf("wrote %d bytes to a peer that reads nothing, want the buffer's %d", n, BufferSize)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("blocked write: %v, want a deadline error", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blocked write: %v is not a net.Error timeout", err)
	}
	// Reading frees room: the rest goes through.
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, server, 2*BufferSize)
		done <- err
	}()
	client.SetWriteDeadline(time.Time{})
	if _, err := client.Write(make([]byte, BufferSize)); err != nil {
		t.Fatalf("write once the peer reads: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("reading all bytes written: %v", err)
	}
}

func TestReadDeadline(t *testing.T) {
	client, _ := pair(t)
	start := time.Now() // before the deadline is set: the read may not end sooner than 50 ms after this
	client.SetReadDeadline(start.Add(50 * time.Millisecond))
	_, err := client.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("read gave up after %v, before its deadline", took)
	}
}

func TestCloseEndsThePeersReadAfterTheBufferedBytes(t *testing.T) {
	client, server := pair(t)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(server) // blocked in Read when the client closes
		got <- b
	}()
	if _, err := client.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	client.Close()
	if b := <-got; string(b) != "last words" {
		t.Fatalf("peer read %q before EOF, want the bytes sent", b)
	}
	if _, err := server.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("write to a closed peer: %v, want ECONNRESET", err)
	}
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v, want net.ErrClosed", err)
	}
}

func TestCloseWakesBlockedCallsOnBothEnds(t *testing.T) {
	client, server := pair(t)
	if _, err := server.Write(make([]byte, BufferSize)); err != nil { // fills the direction to client
		t.Fatal(err)
	}
	peer := make(chan error, 2)
	go func() { _, err := server.Read(make([]byte, 1)); peer <- err }()
	go func() { _, err := server.Write(make([]byte, 1)); peer <- err }()
	time.Sleep(20 * time.Millisecond) // lets both calls block; they return the same errors if not yet blocked
	client.Close()
	want := []error{io.EOF, syscall.ECONNRESET}
	for range want {
		err := receive(t, peer)
		if !errors.Is(err, want[0]) && !errors.Is(err, want[1]) {
			t.Fatalf("peer's blocked call: %v, want EOF for the read and ECONNRESET for the write", err)
		}
	}

	client, server = pair(t)
	if _, err := client.Write(make([]byte, BufferSize)); err != nil { // fills the direction to server
		t.Fatal(err)
	}
	local := make(chan error, 2)
	go func() { _, err := client.Read(make([]byte, 1)); local <- err }()
	go func() { _, err := client.Write(make([]byte, 1)); local <- err }()
	time.Sleep(20 * time.Millisecond)
	client.Close()
	for range 2 {
		if err := receive(t, local); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("blocked call on the closed end: %v, want net.ErrClosed", err)
		}
	}
}

// receive returns the next error from errs, failing the test if none comes within 5s.
func receive(t *testing.T, errs <-chan error) error {
	t.Helper()
	select {
	case err := <-errs:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("a blocked call did not return after Close")
		return nil
	}
}

func TestCloseWriteHalfCloses(t *testing.T) {
	client, server := pair(t)
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if err := client.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(server)
	if err != nil || string(b) != "ping" {
		t.Fatalf("server read %q, %v: want ping then EOF", b, err)
	}
	if _, err := client.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write after CloseWrite: %v, want EPIPE", err)
	}
	if _, err := server.Write([]byte("pong")); err != nil {
		t.Fatalf("peer writes after a half-close: %v", err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("half-closed end read %q, %v: want pong", buf, err)
	}
}

func TestListenerCloseWakesAcceptAndResetsPendingConns(t *testing.T) {
	n := New()
	ln, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pending, err := n.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Close()
	if s, err := ln.Accept(); err != nil {
		t.Fatal(err)
	} else {
		s.Close()
	}
	waiting, err := n.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer waiting.Close()
	accepted := make(chan error, 1)
	go func() {
		if _, err := ln.Accept(); err != nil { // takes waiting's connection, then blocks
			accepted <- err
			return
		}
		_, err := ln.Accept()
		accepted <- err
	}()
	time.Sleep(20 * time.Millisecond) // let Accept block; it must wake either way
	ln.Close()
	select {
	case err := <-accepted:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake Accept")
	}

	// A connection dialed but never accepted is closed with the listener.
	ln2, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := n.DialContext(context.Background(), "tcp", ln2.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer orphan.Close()
	ln2.Close()
	if _, err := orphan.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read on a connection its listener never accepted: %v, want EOF", err)
	}
}

func TestConcurrentWritesStayWhole(t *testing.T) {
	client, server := pair(t)
	const writers, size = 4, 3 * BufferSize / 2
	done := make(chan error, writers)
	for w := range writers {
		go func() {
			_, err := client.Write(bytes.Repeat([]byte{byte('a' + w)}, size))
			done <- err
		}()
	}
	got := make([]byte, writers*size)
	if _, err := io.ReadFull(server, got); err != nil {
		t.Fatal(err)
	}
	for range writers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < len(got); i += size {
		if chunk := got[i : i+size]; !bytes.Equal(chunk, bytes.Repeat(chunk[:1], size)) {
			t.Fatalf("write %d interleaved with another", i/size)
		}
	}
}

func TestGossipPacketsAndStreams(t *testing.T) {
	n := New()
	a, err := n.GossipTransport("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	b, err := n.GossipTransport("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ip, port, err := b.FinalAdvertiseAddr("", 0)
	if err != nil || !ip.Equal(net.IPv4(127, 0, 0, 1)) || port != b.Port() {
		t.Fatalf("advertised %v:%d, %v: want 127.0.0.1:%d", ip, port, err, b.Port())
	}
	bAddr := net.JoinHostPort("127.0.0.1", portOf(b.ln))
	if _, err := n.Listen(bAddr); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("a stream listener on a gossip port: %v, want EADDRINUSE", err)
	}

	msg := []byte("alive")
	if _, err := a.WriteToAddress(msg, memberlist.Address{Addr: bAddr, Name: "b"}); err != nil {
		t.Fatal(err)
	}
	msg[0] = 'X' // the sender may reuse its buffer
	p := <-b.PacketCh()
	if string(p.Buf) != "alive" || p.From.String() != net.JoinHostPort("127.0.0.1", portOf(a.ln)) {
		t.Fatalf("packet %q from %v, want alive from a", p.Buf, p.From)
	}
	if _, err := a.WriteTo([]byte("lost"), "127.0.0.1:1"); err != nil { // no endpoint: lost, as UDP
		t.Fatalf("a packet to nowhere: %v", err)
	}

	conn, err := a.DialAddressTimeout(memberlist.Address{Addr: bAddr}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	in := <-b.StreamCh()
	if _, err := conn.Write([]byte("push-pull")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 9)
	if _, err := io.ReadFull(in, buf); err != nil || string(buf) != "push-pull" {
		t.Fatalf("stream read %q, %v", buf, err)
	}
	in.Close()

	if err := b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DialTimeout(bAddr, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after Shutdown: %v, want ECONNREFUSED", err)
	}
	again, err := n.GossipTransport(bAddr)
	if err != nil {
		t.Fatalf("rebinding a shut-down transport's address: %v", err)
	}
	again.Shutdown()
}
