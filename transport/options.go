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

	// Logger receives connection-level events. Nil discards them.
	Logger *slog.Logger
}

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
	return o
}

// maxPayload is the largest payload that always fits in a frame.
func (o Options) maxPayload() int { return o.MaxFrameSize - EnvelopeOverhead }

// dial opens a data-plane connection to addr, through the mux when MuxByte is set.
func (o Options) dial(ctx context.Context, addr string) (net.Conn, error) {
	var conn net.Conn
	var err error
	if o.MuxByte != 0 {
		conn, err = DialMux(ctx, o.Dialer, addr, o.MuxByte)
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
