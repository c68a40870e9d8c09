package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestRoundTrip(t *testing.T) {
	h := HandlerFunc(func(_ context.Context, op Op, payload []byte) ([]byte, error) {
		return fmt.Appendf(nil, "%d:%s", op, payload), nil
	})
	_, addr := startServer(t, h, Options{})
	c := newClient(t, addr, Options{})
	got, err := c.Call(testContext(t), 7, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "7:hello" {
		t.Fatalf("got %q, want %q", got, "7:hello")
	}
	if c.Addr() != addr {
		t.Fatalf("Addr() = %q, want %q", c.Addr(), addr)
	}
}

func TestEmptyPayloads(t *testing.T) {
	seen := make(chan int, 1)
	h := HandlerFunc(func(_ context.Context, _ Op, payload []byte) ([]byte, error) {
		seen <- len(payload)
		return nil, nil
	})
	_, addr := startServer(t, h, Options{})
	c := newClient(t, addr, Options{})
	got, err := c.Call(testContext(t), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := <-seen; n != 0 {
		t.Fatalf("handler saw %d bytes, want 0", n)
	}
	if len(got) != 0 {
		t.Fatalf("got %d bytes, want 0", len(got))
	}
}

func TestConcurrentCallers(t *testing.T) {
	const callers, calls = 64, 200
	h := HandlerFunc(func(_ context.Context, op Op, payload []byte) ([]byte, error) {
		return append([]byte{byte(op)}, payload...), nil
	})
	_, addr := startServer(t, h, Options{})
	c := newClient(t, addr, Options{})
	ctx := testContext(t)

	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			fill := rand.NewChaCha8([32]byte{byte(g)})
			for i := range calls {
				req := make([]byte, 8+rng.IntN(8<<10))
				binary.BigEndian.PutUint32(req, uint32(g))
				binary.BigEndian.PutUint32(req[4:], uint32(i))
				fill.Read(req[8:])
				op := Op(rng.IntN(256))
				resp, err := c.Call(ctx, op, req)
				if err != nil {
					errs <- fmt.Errorf("caller %d call %d: %w", g, i, err)
					return
				}
				if len(resp) == 0 || resp[0] != byte(op) || !bytes.Equal(resp[1:], req) {
					errs <- fmt.Errorf("caller %d call %d: got someone else's response", g, i)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := c.Stats()
	if st.Calls != callers*calls || st.Dials != 1 || st.ConnLosses != 0 {
		t.Fatalf("stats %+v: want %d calls on one connection", st, callers*calls)
	}
}

func TestLargePayloadNearLimit(t *testing.T) {
	opts := Options{MaxFrameSize: 8 << 20}
	_, addr := startServer(t, echo, opts)
	c := newClient(t, addr, opts)
	req := make([]byte, opts.MaxFrameSize-EnvelopeOverhead)
	for i := range req {
		req[i] = byte(i * 7)
	}
	resp, err := c.Call(testContext(t), 1, req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(resp, req) {
		t.Fatal("large payload did not round trip")
	}
}

func TestOversizedRequestRefusedLocally(t *testing.T) {
	opts := Options{MaxFrameSize: 1 << 10}
	_, addr := startServer(t, echo, opts)
	c := newClient(t, addr, opts)
	ctx := testContext(t)
	if _, err := c.Call(ctx, 1, []byte("warm")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Call(ctx, 1, make([]byte, opts.MaxFrameSize-EnvelopeOverhead+1))
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	if !strings.Contains(err.Error(), "1006") || !strings.Contains(err.Error(), "1024") {
		t.Errorf("error %q should name both sizes", err)
	}
	if _, err := c.Call(ctx, 1, []byte("after")); err != nil {
		t.Fatalf("connection broken by refused request: %v", err)
	}
	if st := c.Stats(); st.Dials != 1 || st.ConnLosses != 0 {
		t.Fatalf("stats %+v: want one dial and no loss", st)
	}
}

func TestRemoteError(t *testing.T) {
	h := HandlerFunc(func(context.Context, Op, []byte) ([]byte, error) {
		return nil, errors.New("no such key")
	})
	_, addr := startServer(t, h, Options{})
	c := newClient(t, addr, Options{})
	_, err := c.Call(testContext(t), 1, nil)
	var remote *RemoteError
	if !errors.As(err, &remote) || remote.Message != "no such key" {
		t.Fatalf("got %v, want RemoteError(no such key)", err)
	}
}

func TestOversizedResponseBecomesRemoteError(t *testing.T) {
	opts := Options{MaxFrameSize: 1 << 10}
	h := HandlerFunc(func(context.Context, Op, []byte) ([]byte, error) {
		return make([]byte, 4<<10), nil
	})
	_, addr := startServer(t, h, opts)
	c := newClient(t, addr, opts)
	ctx := testContext(t)
	for range 2 { // the connection survives
		_, err := c.Call(ctx, 1, nil)
		var remote *RemoteError
		if !errors.As(err, &remote) || !strings.Contains(remote.Message, "frame too large") {
			t.Fatalf("got %v, want a RemoteError about the frame size", err)
		}
	}
}

// blockingHandler blocks every request until release is closed or its context ends, reporting each
// start on started and each context end on cancelled.
type blockingHandler struct {
	started   chan struct{}
	cancelled chan struct{}
	release   chan struct{}
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{
		started:   make(chan struct{}, 1024),
		cancelled: make(chan struct{}, 1024),
		release:   make(chan struct{}),
	}
}

func (h *blockingHandler) ServeRequest(ctx context.Context, _ Op, payload []byte) ([]byte, error) {
	if string(payload) == "quick" {
		return payload, nil
	}
	h.started <- struct{}{}
	select {
	case <-h.release:
		return payload, nil
	case <-ctx.Done():
		h.cancelled <- struct{}{}
		return nil, ctx.Err()
	}
}

func TestCallDeadlineAndCancel(t *testing.T) {
	h := newBlockingHandler()
	_, addr := startServer(t, h, Options{})
	c := newClient(t, addr, Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Call(ctx, 1, []byte("slow"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > testTimeout/2 {
		t.Fatalf("Call took %v after its deadline", took)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx2, 1, []byte("slow"))
		done <- err
	}()
	receive(t, h.started, "first handler")
	receive(t, h.started, "second handler")
	cancel2()
	if err := receive(t, done, "cancelled call"); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want Canceled", err)
	}

	close(h.release) // both late responses arrive and must be dropped
	for range 3 {
		resp, err := c.Call(testContext(t), 1, []byte("quick"))
		if err != nil || string(resp) != "quick" {
			t.Fatalf("after abandoned calls: %q, %v", resp, err)
		}
	}
	if st := c.Stats(); st.Dials != 1 {
		t.Fatalf("stats %+v: abandoned calls must not cost the connection", st)
	}
}

func TestCallWithDoneContextSendsNothing(t *testing.T) {
	_, addr := startServer(t, echo, Options{})
	c := newClient(t, addr, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Call(ctx, 1, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want Canceled", err)
	}
	if st := c.Stats(); st.Dials != 0 || st.Calls != 0 {
		t.Fatalf("stats %+v: nothing should have been dialed or sent", st)
	}
}

func TestHandlerContextEndsWhenServerCloses(t *testing.T) {
	h := newBlockingHandler()
	ln := listen(t)
	srv := NewServer(h, Options{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	c := newClient(t, ln.Addr().String(), Options{})

	callErr := make(chan error, 1)
	go func() {
		_, err := c.Call(testContext(t), 1, []byte("slow"))
		callErr <- err
	}()
	receive(t, h.started, "handler")
	srv.Close() // returns only once the handler has returned
	select {
	case <-h.cancelled:
	default:
		t.Fatal("Close returned before the handler saw its context end")
	}
	if err := receive(t, served, "Serve"); err != nil {
		t.Fatalf("Serve returned %v after Close", err)
	}
	if err := receive(t, callErr, "call"); !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("got %v, want ErrConnectionLost", err)
	}
}

func TestConnectionLossFailsInFlightCalls(t *testing.T) {
	const inFlight = 10
	h := newBlockingHandler()
	ln := &trackingListener{Listener: listen(t), accepted: make(chan net.Conn, 4)}
	serveOn(t, ln, h, Options{})
	c := newClient(t, ln.Addr().String(), Options{})
	ctx := testContext(t)
	if _, err := c.Call(ctx, 1, []byte("quick")); err != nil {
		t.Fatal(err)
	}
	serverSide := receive(t, ln.accepted, "accepted connection")

	errs := make(chan error, inFlight)
	for range inFlight {
		go func() {
			_, err := c.Call(ctx, 1, []byte("slow"))
			errs <- err
		}()
	}
	for range inFlight {
		receive(t, h.started, "handler")
	}
	serverSide.Close()
	for range inFlight {
		err := receive(t, errs, "failed call")
		var connErr *ConnError
		if !errors.Is(err, ErrConnectionLost) || !errors.As(err, &connErr) || connErr.Addr != c.Addr() {
			t.Fatalf("got %v, want a ConnError for %s", err, c.Addr())
		}
	}

	if _, err := c.Call(ctx, 1, []byte("quick")); err != nil {
		t.Fatalf("call after loss: %v", err)
	}
	if st := c.Stats(); st.Dials != 2 || st.ConnLosses != 1 {
		t.Fatalf("stats %+v: want a redial after one loss", st)
	}
}

func TestUnreachableBacksOff(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close() // nothing listens here now
	c := newClient(t, addr, Options{RedialMin: time.Minute, RedialMax: time.Minute})
	ctx := testContext(t)

	_, err := c.Call(ctx, 1, nil)
	var dialErr *DialError
	if !errors.Is(err, ErrUnreachable) || !errors.As(err, &dialErr) || dialErr.Err == nil {
		t.Fatalf("got %v, want a DialError with its cause", err)
	}
	for range 100 {
		if _, err := c.Call(ctx, 1, nil); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("during backoff: got %v, want ErrUnreachable", err)
		}
	}
	if st := c.Stats(); st.Dials != 1 || st.DialFailures != 1 {
		t.Fatalf("stats %+v: the backoff must hold off redials", st)
	}
}

func TestConnectionThatNeverAnswersBacksOff(t *testing.T) {
	ln := listen(t)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() { // accept, wait for the request, hang up without answering
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Read(make([]byte, 64))
			conn.Close()
		}
	})
	c := newClient(t, ln.Addr().String(), Options{RedialMin: time.Minute, RedialMax: time.Minute})
	ctx := testContext(t)
	_, err := c.Call(ctx, 1, []byte("x"))
	if !errors.Is(err, ErrConnectionLost) && !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want a lost or unreachable connection", err)
	}
	for range 10 {
		if _, err := c.Call(ctx, 1, nil); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("got %v, want ErrUnreachable while backing off", err)
		}
	}
	if st := c.Stats(); st.Dials != 1 {
		t.Fatalf("stats %+v: want no redial during the backoff", st)
	}
}

func TestClientCloseFailsInFlightCalls(t *testing.T) {
	h := newBlockingHandler()
	_, addr := startServer(t, h, Options{})
	c := NewClient(addr, Options{})
	callErr := make(chan error, 1)
	go func() {
		_, err := c.Call(testContext(t), 1, []byte("slow"))
		callErr <- err
	}()
	receive(t, h.started, "handler")
	c.Close()
	if err := receive(t, callErr, "call"); !errors.Is(err, ErrClosed) || !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("in-flight call got %v, want ErrClosed as a lost connection", err)
	}
	if _, err := c.Call(testContext(t), 1, nil); err != ErrClosed {
		t.Fatalf("call after Close got %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	ln := listen(t)
	srv := NewServer(echo, Options{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	clients := make([]*Client, 4)
	for i := range clients {
		clients[i] = NewClient(ln.Addr().String(), Options{})
		if _, err := clients[i].Call(testContext(t), 1, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	clients[0].Close()
	srv.Close() // with clients still connected
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		c.Close()
	}
	goleak.VerifyNone(t)
}

func TestWritesAreCoalesced(t *testing.T) {
	const callers, calls = 64, 200
	_, addr := startServer(t, echo, Options{})
	c := newClient(t, addr, Options{})
	ctx := testContext(t)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range calls {
				if _, err := c.Call(ctx, 1, []byte("ping")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := c.Stats()
	if st.FramesWritten != callers*calls {
		t.Fatalf("stats %+v: want %d frames", st, callers*calls)
	}
	if st.Flushes >= st.FramesWritten {
		t.Fatalf("stats %+v: no write carried more than one frame", st)
	}
	t.Logf("%d frames in %d writes: %.1f frames per write", st.FramesWritten, st.Flushes,
		float64(st.FramesWritten)/float64(st.Flushes))
}

func TestCallsGiveUpWhenPeerStopsReading(t *testing.T) {
	ln := silentPeer(t)
	c := newClient(t, ln.Addr().String(), Options{})
	payload := make([]byte, 1<<20)
	errs := make(chan error, 16)
	for range cap(errs) { // far more than the socket buffers and the pending bound hold
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err := c.Call(ctx, 1, payload)
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := receive(t, errs, "call"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want DeadlineExceeded", err)
		}
	}
	if st := c.Stats(); st.BytesWritten > 12<<20 {
		t.Fatalf("stats %+v: queued far beyond the pending bound", st)
	} else {
		t.Logf("%d of %d bytes handed to the connection", st.BytesWritten, cap(errs)*len(payload))
	}
}

// TestLoneCallsAreWrittenByTheirCallers: over TCP, a call with no other in progress writes its own frame,
// sparing the hand-off to the connection's writer.
func TestLoneCallsAreWrittenByTheirCallers(t *testing.T) {
	_, addr := startServer(t, echo, Options{})
	c := newClient(t, addr, Options{})
	ctx := testContext(t)
	const calls = 50
	for i := range calls {
		want := strconv.Itoa(i)
		if got, err := c.Call(ctx, 1, []byte(want)); err != nil || string(got) != want {
			t.Fatalf("call %d: %q, %v", i, got, err)
		}
	}
	if by, carried := c.stats.byCall.Load(), c.stats.carried.Load(); by != calls || carried != 0 {
		t.Fatalf("%d of %d lone calls written by their callers, %d left to the writer; want all, none", by, calls, carried)
	}
}

// TestCallerLeavesAFullSocketToTheWriter: a lone call larger than the socket takes at once writes what it
// can and leaves the rest to the connection's writer; the whole request arrives, and its answer returns.
func TestCallerLeavesAFullSocketToTheWriter(t *testing.T) {
	ln := listen(t)
	defer ln.Close()
	c := newClient(t, ln.Addr().String(), Options{})
	payload := make([]byte, 16<<20) // beyond what loopback sockets hold
	for i := range payload {
		payload[i] = byte(i % 253)
	}
	answered, ctx := make(chan error, 1), testContext(t)
	go func() {
		got, err := c.Call(ctx, 7, payload)
		if err == nil && string(got) != "whole" {
			err = fmt.Errorf("answer %q", got)
		}
		answered <- err
	}()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for deadline := time.Now().Add(testTimeout); c.stats.carried.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // the peer reads nothing until then, so the socket fills
			t.Fatalf("the caller never left a write to the writer (%d written by callers)", c.stats.byCall.Load())
		}
	}
	body, err := newFrameReader(conn, DefaultMaxFrameSize).next()
	if err != nil {
		t.Fatal(err)
	}
	req, err := decodeEnvelope(body)
	if err != nil || req.op != 7 || !bytes.Equal(req.payload, payload) {
		t.Fatalf("request op %d, %d bytes, equal %v, %v", req.op, len(req.payload), bytes.Equal(req.payload, payload), err)
	}
	if _, err := conn.Write(appendFrame(nil, envelope{kind: kindResponse, id: req.id, op: req.op, payload: []byte("whole")})); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, answered, "the answer"); err != nil {
		t.Fatal(err)
	}
}

// silentPeer listens for one connection that it accepts and never reads from, until the test ends.
func silentPeer(t *testing.T) net.Listener {
	ln := listen(t)
	var wg sync.WaitGroup
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold); ln.Close(); wg.Wait() })
	wg.Go(func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		<-hold
		conn.Close()
	})
	return ln
}
