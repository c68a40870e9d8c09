package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/zaris-go/zaris/internal/rawio"
)

const (
	// DefaultHandshakeTimeout is how long a Mux waits for a new connection's first byte and greeting.
	DefaultHandshakeTimeout = 5 * time.Second

	// DefaultMaxHandshakes caps the connections a Mux holds while waiting for their first byte.
	DefaultMaxHandshakes = 1024

	// DefaultMaxHandshakesPerAddr caps those of them from one IP address, so that one host cannot take
	// every place: a peer opens a few connections at once, not dozens.
	DefaultMaxHandshakesPerAddr = 64
)

// Mux shares one listener between several protocols. A dialer picks the protocol with the first byte it
// sends (see DialMux); the Mux consumes that byte and hands the connection to the matching Listener.
type Mux struct {
	ln      net.Listener
	timeout time.Duration
	maxWait int // connections awaiting their first byte at most; more are closed at once
	perAddr int // of those, from one IP address at most
	log     *slog.Logger
	// greeting, when set, is what a connection must be compatible with after its first byte (Greeting).
	greeting *Greeting
	done     chan struct{} // closed at shutdown
	once     sync.Once
	wg       sync.WaitGroup // routing goroutines

	mu      sync.Mutex
	closed  bool
	subs    map[byte]*muxListener
	waiting map[net.Conn]netip.Addr // connections whose first byte has not arrived yet, by remote address
	from    map[netip.Addr]int      // how many of them each address has
}

// MuxOption configures a Mux.
type MuxOption func(*Mux)

// WithHandshakeTimeout sets how long a connection may take to send its first byte before it is dropped.
func WithHandshakeTimeout(d time.Duration) MuxOption {
	return func(m *Mux) { m.timeout = d }
}

// WithMaxHandshakes caps the connections waiting for their first byte; one more is closed at once.
func WithMaxHandshakes(n int) MuxOption {
	return func(m *Mux) { m.maxWait = n }
}

// WithMaxHandshakesPerAddr caps the connections from one IP address waiting for their first byte.
func WithMaxHandshakesPerAddr(n int) MuxOption {
	return func(m *Mux) { m.perAddr = n }
}

// WithGreeting makes the Mux read a Greeting after each connection's first byte, answer with g, and close
// the connections whose greeting is missing or incompatible with g. Dialers then pass a Greeting to DialMux.
func WithGreeting(g Greeting) MuxOption {
	return func(m *Mux) { m.greeting = &g }
}

// WithMuxLogger sets where the Mux reports dropped connections.
func WithMuxLogger(l *slog.Logger) MuxOption {
	return func(m *Mux) { m.log = l }
}

// NewMux returns a Mux over ln. Register protocols with Listener, then run Serve.
func NewMux(ln net.Listener, opts ...MuxOption) *Mux {
	m := &Mux{
		ln:      ln,
		timeout: DefaultHandshakeTimeout,
		maxWait: DefaultMaxHandshakes,
		perAddr: DefaultMaxHandshakesPerAddr,
		done:    make(chan struct{}),
		subs:    make(map[byte]*muxListener),
		waiting: make(map[net.Conn]netip.Addr),
		from:    make(map[netip.Addr]int),
	}
	for _, opt := range opts {
		opt(m)
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	return m
}

// Listener returns the listener for connections whose first byte is first. Asking twice for the same
// byte returns the same listener until it is closed. Its Addr is the underlying listener's.
func (m *Mux) Listener(first byte) net.Listener {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.subs[first]; ok {
		return l
	}
	l := &muxListener{mux: m, first: first, conns: make(chan net.Conn), done: make(chan struct{})}
	m.subs[first] = l
	return l
}

// Serve accepts connections and routes each by its first byte. It closes connections with an unknown
// byte, silent for the handshake timeout or beyond the cap on handshakes. It returns nil after Close. If
// the underlying listener fails, Serve shuts the Mux down, failing every Listener's Accept, and returns the
// error.
func (m *Mux) Serve() error {
	var pause time.Duration
	for {
		conn, err := m.ln.Accept()
		if err == nil {
			pause = 0
			admitted, closed := m.track(conn)
			switch {
			case closed:
				conn.Close()
				return nil
			case !admitted:
				m.log.Debug("transport: mux closing connection: too many handshakes", "remote", conn.RemoteAddr().String())
				conn.Close()
			default:
				go m.route(conn)
			}
			continue
		}
		if m.isClosed() {
			return nil
		}
		if errors.Is(err, net.ErrClosed) {
			m.shutdown()
			return err
		}
		pause = min(max(2*pause, 5*time.Millisecond), time.Second)
		m.log.Warn("transport: mux accept failed; retrying", "err", err, "pause", pause)
		select {
		case <-time.After(pause):
		case <-m.done:
			return nil
		}
	}
}

// Close closes the underlying listener and every Listener, drops connections still in their handshake and
// waits for the Mux's goroutines. Connections already handed over belong to their acceptors.
func (m *Mux) Close() error {
	m.shutdown()
	m.wg.Wait()
	return nil
}

func (m *Mux) shutdown() {
	m.once.Do(func() {
		m.mu.Lock()
		m.closed = true
		waiting := make([]net.Conn, 0, len(m.waiting))
		for conn := range m.waiting {
			waiting = append(waiting, conn)
		}
		m.mu.Unlock()
		close(m.done)
		m.ln.Close()
		for _, conn := range waiting {
			conn.Close()
		}
	})
}

func (m *Mux) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// track records a connection awaiting its first byte and counts its routing goroutine, unless the Mux is
// closed or already holds as many handshakes as it allows, in all or from the connection's address.
func (m *Mux) track(conn net.Conn) (admitted, closed bool) {
	addr := rawio.RemoteIP(conn)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return false, true
	case m.maxWait > 0 && len(m.waiting) >= m.maxWait:
		return false, false
	case m.perAddr > 0 && addr.IsValid() && m.from[addr] >= m.perAddr:
		return false, false
	}
	m.waiting[conn] = addr
	m.from[addr]++
	m.wg.Add(1)
	return true, false
}

// untrack forgets a connection whose handshake ended. Called with m.mu held.
func (m *Mux) untrack(conn net.Conn) {
	addr, ok := m.waiting[conn]
	if !ok {
		return
	}
	delete(m.waiting, conn)
	if m.from[addr]--; m.from[addr] <= 0 {
		delete(m.from, addr)
	}
}

// route reads a connection's first byte and greeting and hands it to the matching Listener.
func (m *Mux) route(conn net.Conn) {
	defer m.wg.Done()
	first, err := m.readFirst(conn)
	m.mu.Lock()
	m.untrack(conn)
	sub := m.subs[first]
	m.mu.Unlock()
	var refused *VersionError
	switch {
	case errors.As(err, &refused):
		m.log.Warn("transport: mux refusing a peer of an incompatible release", "remote", conn.RemoteAddr().String(), "err", err)
		conn.Close()
	case err != nil:
		m.log.Debug("transport: mux handshake failed", "remote", conn.RemoteAddr().String(), "err", err)
		conn.Close()
	case sub == nil:
		m.log.Warn("transport: mux closing connection with unknown first byte",
			"remote", conn.RemoteAddr().String(), "byte", first)
		conn.Close()
	default:
		sub.deliver(conn)
	}
}

// readFirst reads a connection's first byte and, when the Mux has a greeting and a Listener for that byte,
// answers the peer's: a connection to no protocol learns nothing of this node's versions.
func (m *Mux) readFirst(conn net.Conn) (byte, error) {
	var b [1]byte
	if err := conn.SetReadDeadline(time.Now().Add(m.timeout)); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return 0, err
	}
	m.mu.Lock()
	_, known := m.subs[b[0]]
	m.mu.Unlock()
	if m.greeting != nil && known {
		if _, err := m.greet(conn); err != nil {
			return b[0], err
		}
	}
	return b[0], conn.SetReadDeadline(time.Time{})
}

// muxListener is the net.Listener for one protocol byte.
type muxListener struct {
	mux   *Mux
	first byte
	conns chan net.Conn // unbuffered: a connection waits in its routing goroutine until accepted
	done  chan struct{}
	once  sync.Once
}

// Accept waits for the next connection of this protocol.
func (l *muxListener) Accept() (net.Conn, error) {
	select {
	case conn := <-l.conns:
		return conn, nil
	case <-l.done:
	case <-l.mux.done:
	}
	return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
}

// Close stops this protocol's Accept; the Mux and its other Listeners keep running.
func (l *muxListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.mux.mu.Lock()
		if l.mux.subs[l.first] == l {
			delete(l.mux.subs, l.first)
		}
		l.mux.mu.Unlock()
	})
	return nil
}

// Addr returns the underlying listener's address.
func (l *muxListener) Addr() net.Addr { return l.mux.ln.Addr() }

// deliver hands conn to Accept, or closes it if this Listener or the Mux closes first.
func (l *muxListener) deliver(conn net.Conn) {
	select {
	case l.conns <- conn:
	case <-l.done:
		conn.Close()
	case <-l.mux.done:
		conn.Close()
	}
}

// DialMux dials addr and sends first, the byte that selects the protocol on a Mux, and then g, when not
// nil, waiting for the Mux to accept it: a *VersionError (ErrIncompatible) when it refuses. ctx bounds
// the dial, the write and the wait. A nil d dials with a plain net.Dialer.
func DialMux(ctx context.Context, d Dialer, addr string, first byte, g *Greeting) (net.Conn, error) {
	if d == nil {
		d = &net.Dialer{}
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	hello := []byte{first}
	if g != nil {
		hello = g.append(hello)
	}
	err = writeFirst(ctx, conn, hello)
	if err == nil && g != nil {
		err = awaitAnswer(ctx, conn, addr, *g)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// writeFirst writes the protocol byte and greeting, giving up when ctx ends.
func writeFirst(ctx context.Context, conn net.Conn, hello []byte) error {
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetWriteDeadline(deadline); err != nil {
			return err
		}
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := conn.Write(hello)
	if !stop() || ctx.Err() != nil {
		return errors.Join(ctx.Err(), err)
	}
	if err != nil {
		return err
	}
	return conn.SetWriteDeadline(time.Time{})
}
