package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// requestFrames returns n request frames with ids 1..n, each carrying payload.
func requestFrames(n int, payload []byte) []byte {
	var out []byte
	for id := 1; id <= n; id++ {
		out = appendFrame(out, envelope{kind: kindRequest, id: uint64(id), op: 1, payload: payload})
	}
	return out
}

// expectGoAway reads frames from conn until a goaway, failing unless its reason is want, then expects
// the server to hang up.
func expectGoAway(t *testing.T, conn net.Conn, want Op) {
	t.Helper()
	fr := newFrameReader(conn, DefaultMaxFrameSize)
	for {
		body, err := fr.next()
		if err != nil {
			t.Fatalf("no goaway before %v", err)
		}
		env, err := decodeEnvelope(body)
		if err != nil {
			t.Fatal(err)
		}
		if env.kind == kindGoAway {
			if env.op != want {
				t.Fatalf("goaway for reason %d, want %d", env.op, want)
			}
			expectHangUp(t, conn)
			return
		}
	}
}

func TestPartialFramesStayWithinBufferBudget(t *testing.T) {
	const conns = 20
	frame := requestFrames(1, make([]byte, 200<<10))
	claim := int64(len(frame) - lengthPrefixSize)
	limit := 5*claim + claim/2 // room for five frames' claims, less the small frames' pool
	handled := make(chan struct{}, conns)
	h := HandlerFunc(func(context.Context, Op, []byte) ([]byte, error) {
		handled <- struct{}{}
		return nil, nil
	})
	srv, addr := startServer(t, h, Options{MaxFrameSize: 256 << 10, MaxBufferedBytes: limit, ReadTimeout: NoTimeout})

	raw := make([]net.Conn, conns)
	for i := range raw {
		raw[i] = dialRaw(t, addr)
		if _, err := raw[i].Write(frame[:len(frame)/2]); err != nil { // a prefix and half a body
			t.Fatal(err)
		}
	}
	var st ServerStats
	waitUntil(t, "every partial frame is claimed or waiting for its claim", func() bool {
		st = srv.Stats()
		return st.BufferedBytes+int64(st.WaitingFrames)*claim == conns*claim
	})
	fit := srv.budget.large.limit / claim // what the large frames' pool holds of the limit
	if st.BufferedBytes > limit || fit < 3 || st.BufferedBytes != fit*claim {
		t.Fatalf("%d bytes claimed by partial frames against a limit of %d (%+v)", st.BufferedBytes, limit, st)
	}

	for _, conn := range raw { // the held-back frames are read as the first ones complete
		if _, err := conn.Write(frame[len(frame)/2:]); err != nil {
			t.Fatal(err)
		}
	}
	for range conns {
		receive(t, handled, "handler")
	}
	waitUntil(t, "every claim is released", func() bool { return srv.Stats().BufferedBytes == 0 })
}

func TestFrameClaimReleasedWhenConnectionDies(t *testing.T) {
	frame := requestFrames(1, make([]byte, 100<<10))
	claim := int64(len(frame) - lengthPrefixSize)
	srv, addr := startServer(t, echo, Options{MaxFrameSize: 128 << 10, MaxBufferedBytes: claim})
	first, second := dialRaw(t, addr), dialRaw(t, addr)
	for _, conn := range []net.Conn{first, second} {
		if _, err := conn.Write(frame[:1000]); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "one claim granted and one waiting", func() bool {
		st := srv.Stats()
		return st.BufferedBytes == claim && st.WaitingFrames == 1
	})
	first.Close()
	second.Write(frame[1000:])
	fr := newFrameReader(second, DefaultMaxFrameSize)
	if _, err := fr.next(); err != nil {
		t.Fatalf("the waiting frame was not served after the other connection died: %v", err)
	}
}

// gatedHandler counts the requests it holds until open is closed, then answers each with reply.
type gatedHandler struct {
	open    chan struct{}
	reply   []byte
	started atomic.Int64
}

func (h *gatedHandler) ServeRequest(ctx context.Context, _ Op, _ []byte) ([]byte, error) {
	h.started.Add(1)
	select {
	case <-h.open:
		return h.reply, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestPipelinedRequestsAreHeldBackNotSpawned(t *testing.T) {
	const perConn, perServer, conns, pipelined = 8, 12, 3, 5000
	before := runtime.NumGoroutine()
	h := &gatedHandler{open: make(chan struct{}), reply: make([]byte, 64<<10)}
	srv, addr := startServer(t, h, Options{
		MaxConnRequests: perConn, MaxRequests: perServer, WriteTimeout: 200 * time.Millisecond,
	})
	reqs := requestFrames(pipelined, make([]byte, 16))
	var writers sync.WaitGroup
	defer writers.Wait()
	for range conns {
		conn := dialRaw(t, addr) // never reads a reply
		writers.Go(func() { conn.Write(reqs) })
	}
	waitUntil(t, "the server's request cap is reached", func() bool { return h.started.Load() >= perServer })

	// Readers, handlers and the test's writers, with room for the runtime's own.
	if grown, bound := runtime.NumGoroutine()-before, conns+perServer+conns+8; grown > bound {
		t.Fatalf("%d pipelined requests grew %d goroutines, more than %d", conns*pipelined, grown, bound)
	}
	if n := h.started.Load(); n != perServer {
		t.Fatalf("%d handlers started, want the cap of %d", n, perServer)
	}

	close(h.open) // replies pile up behind peers that never read them, until the write timeout cuts them
	waitUntil(t, "every connection is cut by the write timeout", func() bool { return srv.Stats().TimedOut == conns })
	waitUntil(t, "the cut connections release what they held", func() bool {
		st := srv.Stats()
		return st.Conns == 0 && st.Requests == 0 && st.BufferedBytes == 0
	})
	if n := h.started.Load(); n >= conns*pipelined {
		t.Fatalf("all %d requests were served to peers that read nothing", n)
	}
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	srv, addr := startServer(t, echo, Options{IdleTimeout: 100 * time.Millisecond})
	const conns = 5
	for range conns {
		expectGoAway(t, dialRaw(t, addr), goAwayIdle) // each says nothing at all
	}
	conn := dialRaw(t, addr)
	if _, err := conn.Write(requestFrames(1, []byte("once"))); err != nil {
		t.Fatal(err)
	}
	expectGoAway(t, conn, goAwayIdle) // answered once, then idle
	waitUntil(t, "the server forgets the idle connections", func() bool { return srv.Stats().Conns == 0 })
	if st := srv.Stats(); st.IdleClosed != conns+1 {
		t.Fatalf("stats %+v: want %d idle connections closed", st, conns+1)
	}
}

func TestIdleTimeoutSparesRequestsInProgress(t *testing.T) {
	const idle = 50 * time.Millisecond
	h := &gatedHandler{open: make(chan struct{}), reply: []byte("late")}
	_, addr := startServer(t, h, Options{IdleTimeout: idle})
	c := newClient(t, addr, Options{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(testContext(t), 1, nil)
		done <- err
	}()
	waitUntil(t, "the handler holds the request", func() bool { return h.started.Load() == 1 })
	start := time.Now()
	waitUntil(t, "several idle timeouts pass", func() bool { return time.Since(start) > 4*idle })
	close(h.open)
	if err := receive(t, done, "call"); err != nil {
		t.Fatalf("a request in progress for %v was cut: %v", 4*idle, err)
	}
	if n, st := h.started.Load(), c.Stats(); n != 1 || st.Dials != 1 {
		t.Fatalf("%d handler runs, client stats %+v: the connection was closed under its request", n, st)
	}
}

func TestClientRedialsAfterIdleClose(t *testing.T) {
	srv, addr := startServer(t, echo, Options{IdleTimeout: 50 * time.Millisecond})
	c := newClient(t, addr, Options{RedialMin: time.Minute, RedialMax: time.Minute})
	ctx := testContext(t)
	if _, err := c.Call(ctx, 1, []byte("a")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the server closes the idle connection", func() bool { return c.Stats().IdleClosed == 1 })
	if resp, err := c.Call(ctx, 1, []byte("b")); err != nil || string(resp) != "b" {
		t.Fatalf("call after an idle close: %q, %v", resp, err)
	}
	if st := c.Stats(); st.Dials != 2 || st.ConnLosses != 0 || st.DialFailures != 0 {
		t.Fatalf("stats %+v: an idle close is neither a loss nor a reason to back off", st)
	}
	if st := srv.Stats(); st.IdleClosed != 1 {
		t.Fatalf("server stats %+v", st)
	}
}

// goAwayPeer serves one connection by reading one request and answering it with a goaway for reason,
// then serves later connections as an echo server. It reports every request it read on read.
func goAwayPeer(t *testing.T, reason Op) (addr string, read chan uint64) {
	ln := listen(t)
	read = make(chan uint64, 16)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for first := true; ; first = false {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serveOrGoAway(conn, first, reason, read) })
		}
	})
	return ln.Addr().String(), read
}

func serveOrGoAway(conn net.Conn, goAway bool, reason Op, read chan<- uint64) {
	defer conn.Close()
	fr := newFrameReader(conn, DefaultMaxFrameSize)
	for {
		body, err := fr.next()
		if err != nil {
			return
		}
		req, err := decodeEnvelope(body)
		if err != nil {
			return
		}
		read <- req.id
		reply := envelope{kind: kindResponse, id: req.id, op: req.op, payload: req.payload}
		if goAway { // read but, as the goaway says, not served
			reply = envelope{kind: kindGoAway, op: reason}
		}
		if _, err := conn.Write(appendFrame(nil, reply)); err != nil || goAway {
			return
		}
	}
}

func TestCallRetriedAfterIdleGoAway(t *testing.T) {
	addr, read := goAwayPeer(t, goAwayIdle)
	c := newClient(t, addr, Options{RedialMin: time.Minute, RedialMax: time.Minute})
	resp, err := c.Call(testContext(t), 1, []byte("x"))
	if err != nil || string(resp) != "x" {
		t.Fatalf("a call the peer never served was not retried: %q, %v", resp, err)
	}
	if got := len(read); got != 2 {
		t.Fatalf("the peer read %d requests, want the first try and the retry", got)
	}
	if st := c.Stats(); st.Dials != 2 || st.ConnLosses != 0 || st.IdleClosed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCallRefusedAtConnectionCapIsUnreachable(t *testing.T) {
	addr, _ := goAwayPeer(t, goAwayBusy)
	c := newClient(t, addr, Options{RedialMin: time.Minute, RedialMax: time.Minute})
	_, err := c.Call(testContext(t), 1, []byte("x"))
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, ErrTooManyConns) || errors.Is(err, ErrConnectionLost) {
		t.Fatalf("got %v, want ErrUnreachable for ErrTooManyConns: certainly not sent", err)
	}
	if st := c.Stats(); st.Dials != 1 {
		t.Fatalf("stats %+v: a refusal must back off", st)
	}
}

func TestTrickledFrameIsCut(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srv, addr := startServer(t, echo, Options{ReadTimeout: timeout, IdleTimeout: NoTimeout})
	conn := dialRaw(t, addr)
	frame := requestFrames(1, make([]byte, 100))
	start := time.Now()
	var sent atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { // one byte every 20 ms: the frame would take over 2 s
		for _, b := range frame {
			if _, err := conn.Write([]byte{b}); err != nil {
				return
			}
			sent.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
	})
	if _, err := io.Copy(io.Discard, conn); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("reading the trickling connection: %v", err)
	}
	if n := sent.Load(); n >= int64(len(frame)) {
		t.Fatalf("the whole frame trickled in over %v", time.Since(start))
	}
	waitUntil(t, "the server counts the cut", func() bool { return srv.Stats().TimedOut == 1 })
	if st := srv.Stats(); st.BufferedBytes != 0 || st.Conns != 0 {
		t.Fatalf("stats %+v after the cut", st)
	}
}

// isReset reports a connection reset by the peer.
func isReset(err error) bool {
	var se *os.SyscallError
	return errors.As(err, &se)
}

func TestConnectionsBeyondCapRefused(t *testing.T) {
	const maxConns = 3
	srv, addr := startServer(t, echo, Options{MaxConns: maxConns, IdleTimeout: NoTimeout})
	hogs := make([]net.Conn, maxConns)
	for i := range hogs {
		hogs[i] = dialRaw(t, addr)
	}
	waitUntil(t, "the cap is reached", func() bool { return srv.Stats().Conns == maxConns })

	expectGoAway(t, dialRaw(t, addr), goAwayBusy)
	c := newClient(t, addr, Options{RedialMin: time.Millisecond, RedialMax: 5 * time.Millisecond})
	ctx := testContext(t)
	if _, err := c.Call(ctx, 1, []byte("x")); !errors.Is(err, ErrTooManyConns) || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable for ErrTooManyConns", err)
	}
	if st := srv.Stats(); st.Refused != 2 || st.Conns != maxConns {
		t.Fatalf("stats %+v: want 2 refused at the cap of %d", st, maxConns)
	}

	hogs[0].Close()
	waitUntil(t, "the legitimate client gets through", func() bool {
		resp, err := c.Call(ctx, 1, []byte("x"))
		return err == nil && string(resp) == "x"
	})
}

func TestClientCutsPeerThatStopsReading(t *testing.T) {
	ln := silentPeer(t)
	c := newClient(t, ln.Addr().String(), Options{WriteTimeout: 100 * time.Millisecond})
	payload := make([]byte, 1<<20)
	errs := make(chan error, 16)
	for range cap(errs) { // more than the socket buffers hold
		go func() {
			_, err := c.Call(testContext(t), 1, payload)
			errs <- err
		}()
	}
	for range cap(errs) {
		err := receive(t, errs, "call")
		if !errors.Is(err, ErrConnectionLost) && !errors.Is(err, ErrUnreachable) {
			t.Fatalf("got %v, want the connection cut by the write timeout", err)
		}
	}
	if st := c.Stats(); st.ConnLosses == 0 {
		t.Fatalf("stats %+v: the connection should have been cut", st)
	}
}

// TestAnnouncedFramesDoNotStallSmallRequests announces large frames that never arrive, claiming all the
// large frames' pool, and checks that small requests from another connection are still served, long
// before ReadTimeout would cut the announcers.
func TestAnnouncedFramesDoNotStallSmallRequests(t *testing.T) {
	const maxFrame = 1 << 20
	srv, addr := startServer(t, echo, Options{MaxFrameSize: maxFrame, MaxBufferedBytes: 4 * maxFrame, ReadTimeout: time.Hour})
	announce := make([]byte, lengthPrefixSize)
	binary.BigEndian.PutUint32(announce, maxFrame)
	for range 4 {
		if _, err := dialRaw(t, addr).Write(announce); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the announced frames to claim the large frames' pool", func() bool {
		st := srv.Stats()
		return st.BufferedBytes+int64(st.WaitingFrames)*maxFrame >= 4*maxFrame && st.WaitingFrames > 0
	})
	client := NewClient(addr, Options{})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 100 {
		payload := make([]byte, 1<<10)
		if _, err := client.Call(ctx, 1, payload); err != nil {
			t.Fatalf("small request %d beside announced frames: %v", i, err)
		}
	}
}
