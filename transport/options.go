package transport

import (
	"context"
	"log/slog"
	"net"
	"time"
)

// Defaults applied to zero Options fields.
const (
	DefaultDialTimeout = 2 * time.Second
	DefaultRedialMin   = 10 * time.Millisecond
	DefaultRedialMax   = time.Second

	DefaultMaxConns         = 1024
	DefaultMaxRequests      = 4096
	DefaultMaxConnRequests  = 256
	DefaultMaxBufferedBytes = 256 << 20
	DefaultIdleTimeout      = time.Minute
	DefaultReadTimeout      = 30 * time.Second
	DefaultWriteTimeout     = 30 * time.Second
)

// Dialer opens connections. It is the seam where tests inject faults; *net.Dialer satisfies it.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Options configure a Client or a Server. The zero value is usable.
type Options struct {
	// MaxFrameSize bounds a frame body in bytes, in both directions. Both ends should agree.
	MaxFrameSize int

	// Dialer opens client connections. Default &net.Dialer{}.
	Dialer Dialer

	// DialTimeout bounds one dial, including the mux byte.
	DialTimeout time.Duration

	// RedialMin and RedialMax bound the exponential backoff after a failed dial or a connection that died
	// before answering anything.
	RedialMin, RedialMax time.Duration

	// MuxByte, when non-zero, is sent by the client as the first byte of each connection so that a Mux on
	// the peer routes it to the data plane. Zero sends nothing (a plain Server).
	MuxByte byte

	// Greeting, with MuxByte, is sent after it to a Mux that checks it (WithGreeting).
	Greeting *Greeting

	// Logger receives connection-level events. Nil discards them.
	Logger *slog.Logger

	// MaxConns caps the connections a Server serves at once. One more is refused at once, its client told
	// that nothing it sent was read (ErrTooManyConns).
	MaxConns int

	// MaxRequests caps the requests a Server handles at once over all its connections, MaxConnRequests
	// those of one connection. A connection at either cap is not read until one of its requests ends, so
	// its peer feels backpressure instead of the server growing a goroutine per request.
	MaxRequests, MaxConnRequests int

	// MaxBufferedBytes caps the request bytes a Server holds, over all connections, between a frame's
	// length prefix and the start of its handler. A connection is not read further until its frame's claim
	// fits; frames of at most 64 KiB claim from a share of their own. Values below MaxFrameSize are raised
	// to it.
	MaxBufferedBytes int64

	// IdleTimeout closes a server connection once no request has been in progress or arrived for that
	// long. The server first tells its client, which then knows that nothing it sent later was read.
	IdleTimeout time.Duration

	// ReadTimeout bounds how long the rest of a frame may take once its first byte has arrived, on both
	// sides. A slower frame closes the connection (ErrFrameTimeout). To spare a timer update per read, a
	// frame may be granted as little as three quarters of it.
	ReadTimeout time.Duration

	// WriteTimeout bounds one write to a connection on both sides, so a peer that stops reading is cut
	// off. As with ReadTimeout, a write may be granted as little as three quarters of it.
	WriteTimeout time.Duration
}

// NoTimeout, as IdleTimeout, ReadTimeout or WriteTimeout, disables that timeout.
const NoTimeout time.Duration = -1

func (o Options) withDefaults() Options {
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	if o.Dialer == nil {
		o.Dialer = &net.Dialer{}
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RedialMin <= 0 {
		o.RedialMin = DefaultRedialMin
	}
	if o.RedialMax < o.RedialMin {
		o.RedialMax = max(DefaultRedialMax, o.RedialMin)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o.withLimitDefaults()
}

// withLimitDefaults fills the server limits and the timeouts.
func (o Options) withLimitDefaults() Options {
	o.MaxConns = positiveOr(o.MaxConns, DefaultMaxConns)
	o.MaxRequests = positiveOr(o.MaxRequests, DefaultMaxRequests)
	o.MaxConnRequests = positiveOr(o.MaxConnRequests, DefaultMaxConnRequests)
	o.MaxBufferedBytes = max(positiveOr(o.MaxBufferedBytes, DefaultMaxBufferedBytes), int64(o.MaxFrameSize))
	o.IdleTimeout = timeoutOr(o.IdleTimeout, DefaultIdleTimeout)
	o.ReadTimeout = timeoutOr(o.ReadTimeout, DefaultReadTimeout)
	o.WriteTimeout = timeoutOr(o.WriteTimeout, DefaultWriteTimeout)
	return o
}

// positiveOr returns v, or def when v is not positive.
func positiveOr[T int | int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// timeoutOr returns d, def when d is zero, and zero (no timeout) when d is negative.
func timeoutOr(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// deadlineAfter returns when a wait of d starting now ends; the zero time, meaning never, when d is zero.
func deadlineAfter(d time.Duration) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

// maxPayload is the largest payload that always fits in a frame.
func (o Options) maxPayload() int { return o.MaxFrameSize - EnvelopeOverhead }

// dial opens a data-plane connection to addr, through the mux when MuxByte is set.
func (o Options) dial(ctx context.Context, addr string) (net.Conn, error) {
	var conn net.Conn
	var err error
	if o.MuxByte != 0 {
		conn, err = DialMux(ctx, o.Dialer, addr, o.MuxByte, o.Greeting)
	} else {
		conn, err = o.Dialer.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	setNoDelay(conn)
	return conn, nil
}

// setNoDelay disables Nagle's algorithm where the connection allows it: the writer already coalesces, so
// holding back a small frame only adds latency.
func setNoDelay(conn net.Conn) {
	if tc, ok := conn.(interface{ SetNoDelay(bool) error }); ok {
		_ = tc.SetNoDelay(true)
	}
}
