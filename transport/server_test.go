package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dialRaw opens a plain TCP connection that the test drives byte by byte.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(testTimeout)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// expectHangUp reads until the server closes conn, failing on a timeout.
func expectHangUp(t *testing.T, conn net.Conn) {
	t.Helper()
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("server kept the connection open")
	}
}

// expectServing checks that the server still answers a fresh client.
func expectServing(t *testing.T, addr string) {
	t.Helper()
	c := newClient(t, addr, Options{})
	if resp, err := c.Call(testContext(t), 1, []byte("still up")); err != nil || string(resp) != "still up" {
		t.Fatalf("server stopped serving: %q, %v", resp, err)
	}
}

func TestServerAnswersPipelinedRawFrames(t *testing.T) {
	_, addr := startServer(t, echo, Options{})
	conn := dialRaw(t, addr)
	var out []byte
	for id := uint64(1); id <= 3; id++ {
		out = appendFrame(out, envelope{kind: kindRequest, id: id, op: Op(id), payload: []byte{byte(id)}})
	}
	if _, err := conn.Write(out); err != nil { // three requests in one write
		t.Fatal(err)
	}
	fr := newFrameReader(conn, DefaultMaxFrameSize)
	seen := map[uint64]bool{}
	for range 3 {
		body, err := fr.next()
		if err != nil {
			t.Fatal(err)
		}
		env, err := decodeEnvelope(body)
		if err != nil {
			t.Fatal(err)
		}
		if env.kind != kindResponse || env.op != Op(env.id) || !bytes.Equal(env.payload, []byte{byte(env.id)}) {
			t.Fatalf("unexpected response %+v", env)
		}
		seen[env.id] = true
	}
	if len(seen) != 3 {
		t.Fatalf("responses for ids %v, want 1..3", seen)
	}
}

func TestServerClosesConnOnOversizedFrame(t *testing.T) {
	_, addr := startServer(t, echo, Options{MaxFrameSize: 1 << 10})
	conn := dialRaw(t, addr)
	var prefix [4]byte
	binary.BigEndian.PutUint32(prefix[:], 0xFFFFFFF0)
	if _, err := conn.Write(prefix[:]); err != nil {
		t.Fatal(err)
	}
	expectHangUp(t, conn)
	expectServing(t, addr)
}

func TestServerClosesConnOnMalformedEnvelope(t *testing.T) {
	bodies := map[string][]byte{
		"not an array":     {0xc0},
		"three fields":     {0x93, 0x01, 0x01, 0x01},
		"unknown kind":     {0x94, 0x09, 0x01, 0x01, 0xc4, 0x00},
		"op too wide":      {0x94, 0x01, 0x01, 0xce, 0xff, 0xff, 0xff, 0xff, 0xc4, 0x00},
		"short payload":    {0x94, 0x01, 0x01, 0x01, 0xc4, 0x05, 0x00},
		"trailing bytes":   {0x94, 0x01, 0x01, 0x01, 0xc4, 0x00, 0x00},
		"response to peer": {0x94, 0x02, 0x01, 0x01, 0xc4, 0x00},
		"empty body":       {},
	}
	_, addr := startServer(t, echo, Options{})
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			conn := dialRaw(t, addr)
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
			if _, err := conn.Write(append(frame, body...)); err != nil {
				t.Fatal(err)
			}
			expectHangUp(t, conn)
		})
	}
	expectServing(t, addr)
}

func TestServerServeConnAndClose(t *testing.T) {
	srv := NewServer(echo, Options{})
	client, server := net.Pipe()
	srv.ServeConn(server) // returns at once
	req := appendFrame(nil, envelope{kind: kindRequest, id: 1, op: 2, payload: []byte("p")})
	go client.Write(req)
	fr := newFrameReader(client, DefaultMaxFrameSize)
	body, err := fr.next()
	if err != nil {
		t.Fatal(err)
	}
	if env, err := decodeEnvelope(body); err != nil || env.id != 1 || string(env.payload) != "p" {
		t.Fatalf("got %+v, %v", env, err)
	}
	srv.Close()
	if _, err := fr.next(); err == nil {
		t.Fatal("connection still open after Close")
	}
	srv.ServeConn(server) // after Close: closed at once
	if err := srv.Serve(listen(t)); err != nil {
		t.Fatalf("Serve after Close returned %v, want nil", err)
	}
}

func TestServerCloseWithPeerThatStopsReading(t *testing.T) {
	big := make([]byte, 1<<20)
	started := make(chan struct{}, 64)
	h := HandlerFunc(func(context.Context, Op, []byte) ([]byte, error) {
		started <- struct{}{}
		return big, nil
	})
	ln := listen(t)
	srv := NewServer(h, Options{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	conn := dialRaw(t, ln.Addr().String())
	var reqs []byte
	for id := uint64(1); id <= 64; id++ { // 64 MiB of answers the peer never reads
		reqs = appendFrame(reqs, envelope{kind: kindRequest, id: id, op: 1})
	}
	if _, err := conn.Write(reqs); err != nil {
		t.Fatal(err)
	}
	for range cap(started) {
		receive(t, started, "handler")
	}
	closed := make(chan struct{})
	go func() {
		srv.Close() // handlers blocked on the full connection must be released
		close(closed)
	}()
	receive(t, closed, "Server.Close")
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// releasingHandler answers each request with its payload in a buffer of its own, and on release scribbles
// over the buffer, as reusing it would, and counts it.
type releasingHandler struct {
	released atomic.Int64
}

func (h *releasingHandler) ServeRequest(_ context.Context, op Op, payload []byte) ([]byte, error) {
	if op == 2 {
		return nil, errors.New("refused")
	}
	return append([]byte(nil), payload...), nil
}

func (h *releasingHandler) ReleaseResponse(_ Op, resp []byte) {
	for i := range resp {
		resp[i] = 'x'
	}
	h.released.Add(1)
}

// TestServerReleasesResponses checks that a ResponseReleaser gets back every successful response once it
// is copied: what the handler then does with the memory never reaches the wire.
func TestServerReleasesResponses(t *testing.T) {
	h := &releasingHandler{}
	srv, addr := startServer(t, h, Options{})
	c := newClient(t, addr, Options{})
	ctx := testContext(t)
	const callers, calls = 8, 50
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range calls {
				want := fmt.Sprintf("caller %d call %d", g, i)
				got, err := c.Call(ctx, 1, []byte(want))
				if err != nil || string(got) != want {
					t.Errorf("call answered %q, %v; want %q", got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, err := c.Call(ctx, 2, []byte("p")); err == nil {
		t.Fatal("a refused call succeeded")
	}
	srv.Close() // waits for the handlers: a response can reach its caller before its release
	if got := h.released.Load(); got != callers*calls {
		t.Fatalf("%d responses released; want %d, one per successful call", got, callers*calls)
	}
}

// TestServerReusesWorkers checks that a connection's requests run on the workers of earlier ones, and
// that of the workers a burst needed it keeps idleWorkers waiting and lets the others end.
func TestServerReusesWorkers(t *testing.T) {
	gate := make(chan struct{})
	var blocked atomic.Int32
	h := HandlerFunc(func(_ context.Context, op Op, _ []byte) ([]byte, error) {
		if op == 2 {
			blocked.Add(1)
			<-gate
		}
		return nil, nil
	})
	srv, addr := startServer(t, h, Options{})
	c := newClient(t, addr, Options{})
	ctx := testContext(t)
	callsInTurn := func() {
		t.Helper()
		for range 100 {
			if _, err := c.Call(ctx, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A request may arrive before the worker that answered the one before it waits again: then another
	// starts. Calls in turn start one or two; any more would mean workers are not reused.
	callsInTurn()
	if n := srv.stats.workers.Load(); n > 2 {
		t.Fatalf("100 calls in turn started %d workers; want at most 2", n)
	}

	const busy = 2 * idleWorkers
	var wg sync.WaitGroup
	for range busy {
		wg.Go(func() {
			if _, err := c.Call(ctx, 2, nil); err != nil {
				t.Error(err)
			}
		})
	}
	awaitCount(ctx, t, "calls reaching the handler", &blocked, busy)
	close(gate)
	wg.Wait()
	awaitWorkersAtMost(ctx, t, srv, idleWorkers)
	burst := srv.stats.workers.Load()
	callsInTurn()
	if n := srv.stats.workers.Load(); n != burst {
		t.Fatalf("calls in turn after the burst started %d more workers; want none", n-burst)
	}
}

// TestServerBoundsIdleWorkers checks that over many connections a server keeps at most serverIdleWorkers
// workers waiting, and lets the others end.
func TestServerBoundsIdleWorkers(t *testing.T) {
	const conns = serverIdleWorkers/idleWorkers + 8 // each keeps idleWorkers: more than the server keeps
	gate := make(chan struct{})
	var blocked atomic.Int32
	h := HandlerFunc(func(context.Context, Op, []byte) ([]byte, error) {
		blocked.Add(1)
		<-gate
		return nil, nil
	})
	srv, addr := startServer(t, h, Options{})
	ctx := testContext(t)
	var wg sync.WaitGroup
	for range conns {
		c := newClient(t, addr, Options{})
		for range idleWorkers {
			wg.Go(func() {
				if _, err := c.Call(ctx, 1, nil); err != nil {
					t.Error(err)
				}
			})
		}
	}
	awaitCount(ctx, t, "calls reaching the handler", &blocked, conns*idleWorkers)
	close(gate)
	wg.Wait()
	awaitWorkersAtMost(ctx, t, srv, serverIdleWorkers)
	if idle := srv.idle.Load(); idle > serverIdleWorkers {
		t.Fatalf("%d idle workers counted; want at most %d", idle, serverIdleWorkers)
	}
}

// awaitCount waits until n reaches want, failing the test if ctx ends first.
func awaitCount(ctx context.Context, t *testing.T, what string, n *atomic.Int32, want int) {
	t.Helper()
	for int(n.Load()) < want {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d %s", n.Load(), want, what)
		}
		runtime.Gosched()
	}
}

// awaitWorkersAtMost waits until srv has at most limit workers alive, failing the test if ctx ends first.
func awaitWorkersAtMost(ctx context.Context, t *testing.T, srv *Server, limit int) {
	t.Helper()
	live := func() uint64 { return srv.stats.workers.Load() - srv.stats.workersDone.Load() }
	for live() > uint64(limit) {
		if ctx.Err() != nil {
			t.Fatalf("%d workers alive; want at most %d", live(), limit)
		}
		runtime.Gosched()
	}
}
