package transport

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait in the tests. Nothing should come close to it, even under the race
// detector on a loaded machine.
const testTimeout = time.Minute

// echo answers every request with its own payload.
var echo = HandlerFunc(func(_ context.Context, _ Op, payload []byte) ([]byte, error) {
	return payload, nil
})

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startServer serves h on a fresh loopback listener and closes it when the test ends.
func startServer(t testing.TB, h Handler, opts Options) (*Server, string) {
	t.Helper()
	ln := listen(t)
	return serveOn(t, ln, h, opts), ln.Addr().String()
}

func serveOn(t testing.TB, ln net.Listener, h Handler, opts Options) *Server {
	t.Helper()
	srv := NewServer(h, opts)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v after Close, want nil", err)
		}
	})
	return srv
}

func newClient(t testing.TB, addr string, opts Options) *Client {
	t.Helper()
	c := NewClient(addr, opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// receive waits for a value on ch, failing the test after testTimeout.
func receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// trackingListener remembers accepted connections so tests can cut them from the server side.
type trackingListener struct {
	net.Listener
	accepted chan net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err == nil {
		l.accepted <- conn
	}
	return conn, err
}

// waitUntil polls cond until it holds, failing the test after testTimeout.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
