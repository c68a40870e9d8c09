package transport

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// StreamLimits bound the connections of a protocol that a Server does not serve, such as the control
// plane's streams on a Mux, whose reading and writing the transport does not own.
type StreamLimits struct {
	// MaxConns caps the connections open at once. One more is closed as soon as it is accepted. Zero
	// means no cap.
	MaxConns int
	// FirstByteTimeout closes a connection that sends nothing for this long after it is accepted. Once
	// its first byte arrives it may stay quiet indefinitely. Zero means no limit.
	FirstByteTimeout time.Duration
	// WriteTimeout bounds each write on a connection, so that a peer that stops reading is cut off. Zero
	// means no limit.
	WriteTimeout time.Duration
}

// LimitedListener accepts connections within StreamLimits.
type LimitedListener struct {
	net.Listener
	limits  StreamLimits
	open    atomic.Int64
	refused atomic.Uint64
}

// LimitListener returns a listener over ln whose connections obey limits.
func LimitListener(ln net.Listener, limits StreamLimits) *LimitedListener {
	return &LimitedListener{Listener: ln, limits: limits}
}

// Accept returns the next connection within the cap, closing those beyond it.
func (l *LimitedListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > int64(l.limits.MaxConns) && l.limits.MaxConns > 0 {
			l.open.Add(-1)
			l.refused.Add(1)
			conn.Close()
			continue
		}
		return l.wrap(conn), nil
	}
}

// Open returns how many accepted connections are open.
func (l *LimitedListener) Open() int { return int(l.open.Load()) }

// Refused returns how many connections were closed at the cap.
func (l *LimitedListener) Refused() uint64 { return l.refused.Load() }

func (l *LimitedListener) wrap(conn net.Conn) net.Conn {
	c := &limitedConn{Conn: conn, l: l}
	if l.limits.FirstByteTimeout > 0 {
		c.waiting.Store(true)
		_ = conn.SetReadDeadline(time.Now().Add(l.limits.FirstByteTimeout))
	}
	return c
}

// limitedConn is a connection accepted by a LimitedListener.
type limitedConn struct {
	net.Conn
	l       *LimitedListener
	waiting atomic.Bool // the first byte has not arrived yet
	once    sync.Once
}

// Read lifts the first-byte deadline once a byte has arrived. A connection silent past it reads as
// closed by its peer.
func (c *limitedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.waiting.Load() {
		return n, err
	}
	if n > 0 {
		c.waiting.Store(false)
		_ = c.Conn.SetReadDeadline(time.Time{})
		return n, err
	}
	if isTimeout(err) {
		c.Close()
		return 0, io.EOF
	}
	return n, err
}

// Write bounds each write by the WriteTimeout.
func (c *limitedConn) Write(b []byte) (int, error) {
	if c.l.limits.WriteTimeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.l.limits.WriteTimeout)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(b)
}

// Close closes the connection and frees its place under the cap.
func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
