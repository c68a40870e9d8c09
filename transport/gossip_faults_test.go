package transport

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/goleak"
)

// gossipNode is a wrapped memberlist transport on loopback, with the base it wraps and its address.
type gossipNode struct {
	base *memberlist.NetTransport
	tr   memberlist.NodeAwareTransport
	addr string
}

// startGossip binds a memberlist transport for node name on a free loopback port, registers its address
// with f and shuts it down when the test ends.
func startGossip(t *testing.T, f *Faults, name string) *gossipNode {
	t.Helper()
	cfg := &memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"}, Logger: log.New(io.Discard, "", 0)}
	var base *memberlist.NetTransport
	var err error
	for range 10 { // the free TCP port may be taken for UDP
		if base, err = memberlist.NewNetTransport(cfg); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	g := &gossipNode{base: base, tr: f.GossipTransport(name, base)}
	g.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(base.GetAutoBindPort()))
	f.Register(name, g.addr)
	t.Cleanup(func() { g.tr.Shutdown() })
	return g
}

// send writes payload to addr through tr, which must report success.
func send(t *testing.T, tr memberlist.Transport, payload, addr string) {
	t.Helper()
	if _, err := tr.WriteTo([]byte(payload), addr); err != nil {
		t.Fatalf("send %q to %s: %v", payload, addr, err)
	}
}

// nextPacket returns the payload of the next packet g delivers.
func nextPacket(t *testing.T, g *gossipNode) string {
	t.Helper()
	return string(receive(t, g.tr.PacketCh(), "a gossip packet").Buf)
}

// awaitPacket skips the packets g delivers until one carries want.
func awaitPacket(t *testing.T, g *gossipNode, want string) {
	t.Helper()
	for nextPacket(t, g) != want {
	}
}

func TestGossipPacketsAreLostOnlyAcrossABlackhole(t *testing.T) {
	f := NewFaults()
	a, b, c := startGossip(t, f, "a"), startGossip(t, f, "b"), startGossip(t, f, "c")
	send(t, a.tr, "healthy", b.addr)
	if got := nextPacket(t, b); got != "healthy" {
		t.Fatalf("b received %q; want healthy", got)
	}

	f.Blackhole("a", "b")
	send(t, a.tr, "lost by the sender", b.addr)
	if _, err := a.tr.WriteToAddress([]byte("lost by the sender too"), memberlist.Address{Addr: b.addr, Name: "b"}); err != nil {
		t.Fatalf("a lost packet must look sent: %v", err)
	}
	send(t, a.base, "lost by the receiver", b.addr) // unwrapped: only b's side can drop it
	send(t, c.tr, "marker", b.addr)
	if got := nextPacket(t, b); got != "marker" {
		t.Fatalf("b received %q across the blackhole", got)
	}
	send(t, b.tr, "reverse", a.addr)
	if got := nextPacket(t, a); got != "reverse" {
		t.Fatalf("a received %q; want reverse: the other direction is healthy", got)
	}

	f.Heal("a", "b")
	send(t, a.tr, "healed", b.addr)
	awaitPacket(t, b, "healed")
}

func TestGossipPacketsAreDelayedOnArrival(t *testing.T) {
	f := NewFaults()
	a, b := startGossip(t, f, "a"), startGossip(t, f, "b")
	const delay = 100 * time.Millisecond
	f.Delay("a", "b", delay)
	sent := time.Now()
	send(t, a.tr, "slow", b.addr)
	p := receive(t, b.tr.PacketCh(), "the delayed packet")
	if elapsed := time.Since(sent); elapsed < delay {
		t.Fatalf("delivered after %v; want at least %v", elapsed, delay)
	}
	if arrived := p.Timestamp.Sub(sent); arrived < delay {
		t.Fatalf("stamped %v after sending; want at least %v", arrived, delay)
	}
}

func TestGossipDialStallsAcrossABlackhole(t *testing.T) {
	f := NewFaults()
	a, b := startGossip(t, f, "a"), startGossip(t, f, "b")
	f.Blackhole("b", "a") // either direction cut stalls a dial
	if _, err := a.tr.DialTimeout(b.addr, 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial across a blackhole: err = %v; want DeadlineExceeded", err)
	}
	addr := memberlist.Address{Addr: b.addr, Name: "b"}
	if _, err := a.tr.DialAddressTimeout(addr, 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial by address across a blackhole: err = %v; want DeadlineExceeded", err)
	}
	if _, err := a.tr.DialTimeout(b.addr, -time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial with an expired timeout: err = %v; want DeadlineExceeded", err)
	}
	f.HealAll()
	if _, err := a.tr.DialTimeout(b.addr, -time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("healed dial with an expired timeout: err = %v; want DeadlineExceeded", err)
	}
	conn, err := a.tr.DialAddressTimeout(addr, testTimeout)
	if err != nil {
		t.Fatalf("dial after heal: %v", err)
	}
	defer conn.Close()
	peer := receive(t, b.tr.StreamCh(), "the accepted stream")
	defer peer.Close()
	exchange(t, conn, peer, "ping")
	exchange(t, peer, conn, "pong")
}

func TestGossipStreamObeysBothDirectionsFromTheDialer(t *testing.T) {
	f := NewFaults()
	a, b := startGossip(t, f, "a"), startGossip(t, f, "b")
	conn, err := a.tr.DialTimeout(b.addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	peer := receive(t, b.tr.StreamCh(), "the accepted stream")
	defer peer.Close()

	// b -> a cut: what b writes on its unwrapped side stalls in a's reads; a -> b still flows.
	f.Blackhole("b", "a")
	if _, err := peer.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := conn.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read across a blackhole: err = %v; want ErrDeadlineExceeded", err)
	}
	conn.SetReadDeadline(time.Time{})
	exchange(t, conn, peer, "still flowing")
	f.Heal("b", "a")
	expect(t, conn, "held")

	// a -> b cut: a's writes stall.
	f.Blackhole("a", "b")
	conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := conn.Write([]byte("stalled")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write across a blackhole: err = %v; want ErrDeadlineExceeded", err)
	}
	conn.SetWriteDeadline(time.Time{})
	f.HealAll()
	exchange(t, conn, peer, "healed")
}

// exchange writes msg on from and expects it whole on to.
func exchange(t *testing.T, from, to net.Conn, msg string) {
	t.Helper()
	if _, err := from.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	expect(t, to, msg)
}

// expect reads len(want) bytes from conn, within testTimeout, and compares them with want.
func expect(t *testing.T, conn net.Conn, want string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(testTimeout))
	defer conn.SetReadDeadline(time.Time{})
	got := make([]byte, len(want))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}

func TestGossipShutdownLeavesNoGoroutines(t *testing.T) {
	running := goleak.IgnoreCurrent()
	f := NewFaults()
	a, b, c := startGossip(t, f, "a"), startGossip(t, f, "b"), startGossip(t, f, "c")
	// Leave b with a packet held by a delay, one nobody reads and one queued behind it in the base.
	f.Delay("a", "b", time.Hour)
	send(t, a.tr, "held", b.addr)
	awaitBlocked(t, "select", "(*gossipTransport).deliverAfter(")
	send(t, c.tr, "unread", b.addr)
	awaitBlocked(t, "select", "(*gossipTransport).deliver(")
	send(t, c.tr, "queued", b.addr)
	awaitBlocked(t, "chan send", "(*NetTransport).udpListen(")
	for _, g := range []*gossipNode{a, b, c} {
		done := make(chan error, 1)
		go func() { done <- g.tr.Shutdown() }()
		if err := receive(t, done, "shutdown"); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
	goleak.VerifyNone(t, running)
}

// awaitBlocked waits until some goroutine is blocked in state, as the runtime names it in stack traces,
// inside the function named fn.
func awaitBlocked(t *testing.T, state, fn string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !isBlocked(state, fn) {
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine blocked in %s inside %s", state, fn)
		}
		time.Sleep(time.Millisecond)
	}
}

// isBlocked reports whether a goroutine is in state with fn as its innermost frame outside the runtime.
func isBlocked(state, fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "["+state) && strings.Contains(topFrame(frames), fn) {
			return true
		}
	}
	return false
}

// topFrame returns the first function in a goroutine's trace that is not the runtime's own.
func topFrame(frames string) string {
	for _, line := range strings.Split(frames, "\n") {
		if !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "runtime.") {
			return line
		}
	}
	return ""
}
