package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultyPair serves h as node "b" and returns a client of node "a" dialing through f, already connected.
func faultyPair(t *testing.T, f *Faults, h Handler) *Client {
	t.Helper()
	_, addr := startServer(t, h, Options{})
	f.Register("b", addr)
	c := newClient(t, addr, Options{Dialer: f.Dialer("a", nil)})
	if _, err := c.Call(testContext(t), 1, []byte("quick")); err != nil {
		t.Fatal(err)
	}
	return c
}

// countingEcho echoes and counts the requests it has seen.
type countingEcho struct{ served atomic.Int64 }

func (h *countingEcho) ServeRequest(_ context.Context, _ Op, payload []byte) ([]byte, error) {
	h.served.Add(1)
	return payload, nil
}

func callWithin(c *Client, d time.Duration, payload string) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := c.Call(ctx, 1, []byte(payload))
	return err
}

func TestFaultsBlackholeStallsUntilDeadlineAndHealRestores(t *testing.T) {
	f := NewFaults()
	h := &countingEcho{}
	c := faultyPair(t, f, h)

	f.Blackhole("a", "b")
	if err := callWithin(c, 100*time.Millisecond, "stalled"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded across a blackhole", err)
	}
	if n := h.served.Load(); n != 1 {
		t.Fatalf("%d requests crossed the blackhole", n-1)
	}
	f.Heal("a", "b")
	if err := callWithin(c, testTimeout, "healed"); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	// The stalled request and the new one are served concurrently: wait for both handlers to count.
	if n := awaitServed(h, 3); n != 3 {
		t.Fatalf("served %d requests, want 3: the stalled request is delivered late, not dropped", n)
	}
	if st := c.Stats(); st.ConnLosses != 0 || st.Dials != 1 {
		t.Fatalf("stats %+v: a blackhole must not cut the connection", st)
	}
}

func TestFaultsBlackholeStallsResponses(t *testing.T) {
	f := NewFaults()
	h := &countingEcho{}
	c := faultyPair(t, f, h)

	f.Blackhole("b", "a")
	if err := callWithin(c, 100*time.Millisecond, "unanswered"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	f.HealAll()
	if err := callWithin(c, testTimeout, "healed"); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	if n := awaitServed(h, 3); n != 3 {
		t.Fatalf("served %d requests, want 3", n)
	}
}

func TestFaultsPartitionBothWays(t *testing.T) {
	f := NewFaults()
	c := faultyPair(t, f, echo)
	f.Partition("a", "b")
	if err := callWithin(c, 100*time.Millisecond, "cut"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded across a partition", err)
	}
	fresh := newClient(t, c.Addr(), Options{Dialer: f.Dialer("a", nil), DialTimeout: 100 * time.Millisecond})
	if err := callWithin(fresh, testTimeout, "dial"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("dial across a partition: got %v, want ErrUnreachable", err)
	}
	f.Heal("a", "b")
	if err := callWithin(c, 100*time.Millisecond, "half healed"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v with b->a still cut, want DeadlineExceeded", err)
	}
	f.HealAll()
	if err := callWithin(c, testTimeout, "healed"); err != nil {
		t.Fatalf("after HealAll: %v", err)
	}
}

func TestFaultsResetFailsInFlightCalls(t *testing.T) {
	const inFlight = 5
	f := NewFaults()
	h := newBlockingHandler()
	c := faultyPair(t, f, h)
	errs := make(chan error, inFlight)
	for range inFlight {
		go func() { errs <- callWithin(c, testTimeout, "slow") }()
	}
	for range inFlight {
		receive(t, h.started, "handler")
	}
	f.Reset("b", "a") // either order names the pair
	for range inFlight {
		if err := receive(t, errs, "call"); !errors.Is(err, ErrConnectionLost) {
			t.Fatalf("got %v, want ErrConnectionLost", err)
		}
	}
	if err := callWithin(c, testTimeout, "quick"); err != nil {
		t.Fatalf("after reset: %v", err)
	}
	if st := c.Stats(); st.Dials != 2 || st.ConnLosses != 1 {
		t.Fatalf("stats %+v: want one loss and one redial", st)
	}
}

func TestFaultsDelay(t *testing.T) {
	const delay = 40 * time.Millisecond
	f := NewFaults()
	c := faultyPair(t, f, echo)
	f.Delay("a", "b", delay)
	f.Delay("b", "a", delay)
	start := time.Now()
	if err := callWithin(c, testTimeout, "slow"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 2*delay {
		t.Fatalf("round trip took %v, want at least %v", took, 2*delay)
	}
	f.Delay("a", "b", 0)
	f.Heal("b", "a")
	if err := callWithin(c, testTimeout, "fast"); err != nil {
		t.Fatal(err)
	}
}

// dialFaulty connects node "a" to an echo listener registered as node "b".
func dialFaulty(t *testing.T, f *Faults) net.Conn {
	t.Helper()
	ln := listen(t)
	serveEcho(t, ln)
	f.Register("b", ln.Addr().String())
	conn, err := f.Dialer("a", nil).DialContext(testContext(t), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestFaultConnStallsHonourDeadlineHealAndClose(t *testing.T) {
	f := NewFaults()
	conn := dialFaulty(t, f)

	f.Blackhole("a", "b")
	conn.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := conn.Write([]byte("x")); n != 0 || !isTimeout(err) {
		t.Fatalf("stalled write returned %d, %v; want 0 and a timeout", n, err)
	}
	f.Heal("a", "b")
	conn.SetWriteDeadline(time.Time{})

	f.Blackhole("b", "a")
	if _, err := conn.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 1)); n != 0 || !isTimeout(err) {
		t.Fatalf("stalled read returned %d, %v; want 0 and a timeout", n, err)
	}
	conn.SetReadDeadline(time.Time{})
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 1)
		n, _ := conn.Read(b)
		got <- string(b[:n])
	}()
	f.Heal("b", "a")
	if s := receive(t, got, "read after heal"); s != "x" {
		t.Fatalf("read %q after heal, want the held byte", s)
	}

	f.Blackhole("b", "a")
	if _, err := conn.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 1))
		readErr <- err
	}()
	conn.Close()
	if err := receive(t, readErr, "read after close"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("stalled read after Close returned %v, want net.ErrClosed", err)
	}
}

func TestFaultConnKeepsBytesWholeAndInOrder(t *testing.T) {
	f := NewFaults()
	conn := dialFaulty(t, f)
	var changes atomic.Int64
	flip := func(rng *rand.Rand) { // a random fault change on a random direction
		changes.Add(1)
		from, to := "a", "b"
		if rng.IntN(2) == 0 {
			from, to = to, from
		}
		switch rng.IntN(3) {
		case 0:
			f.Blackhole(from, to)
		case 1:
			f.Delay(from, to, time.Duration(rng.IntN(2))*time.Millisecond)
		default:
			f.Heal(from, to)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	sent := make([]byte, 256<<10)
	for i := range sent {
		sent[i] = byte(rng.Uint32())
	}

	var wg sync.WaitGroup
	wg.Go(func() { // the writer changes faults before every write
		rng := rand.New(rand.NewPCG(3, 4))
		for rest := sent; len(rest) > 0; {
			flip(rng)
			n := min(len(rest), 1+rng.IntN(512))
			if _, err := conn.Write(rest[:n]); err != nil {
				t.Error(err)
				return
			}
			rest = rest[n:]
		}
	})

	var got []byte
	var timeouts int
	buf := make([]byte, 300)
	deadline := time.Now().Add(testTimeout)
	for i := 0; len(got) < len(sent) && time.Now().Before(deadline); i++ {
		if i%8 == 0 {
			f.HealAll() // keep the stream moving
		} else {
			flip(rng)
		}
		conn.SetReadDeadline(time.Now().Add(time.Millisecond)) // give up often, to exercise held bytes
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if isTimeout(err) {
			timeouts++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	f.HealAll()
	wg.Wait()
	if !bytes.Equal(got, sent) {
		t.Fatalf("received %d bytes that differ from the %d sent", len(got), len(sent))
	}
	t.Logf("%d fault changes, %d read timeouts", changes.Load(), timeouts)
}

var _ io.Reader = (*faultConn)(nil)

// awaitServed waits, bounded by testTimeout, until h has served want requests, and returns the count.
func awaitServed(h *countingEcho, want int64) int64 {
	deadline := time.Now().Add(testTimeout)
	for h.served.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return h.served.Load()
}
