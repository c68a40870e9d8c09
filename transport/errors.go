package transport

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by a Client or Server that has been closed.
	ErrClosed = errors.New("transport: closed")

	// ErrConnectionLost means the connection failed while a call was in flight: the request may or may not
	// have been applied by the peer.
	ErrConnectionLost = errors.New("transport: connection lost")

	// ErrUnreachable means no connection to the peer could be used: the request was certainly not sent.
	ErrUnreachable = errors.New("transport: peer unreachable")

	// ErrFrameTooLarge means a frame exceeds the configured MaxFrameSize.
	ErrFrameTooLarge = errors.New("transport: frame too large")

	// ErrMalformedFrame means a frame body is not a valid envelope.
	ErrMalformedFrame = errors.New("transport: malformed frame")

	// ErrTooManyConns means the peer refused the connection because it already serves Options.MaxConns.
	// Nothing sent on that connection was read.
	ErrTooManyConns = errors.New("transport: peer serves too many connections")

	// ErrIncompatible means the peer's protocol version and this node's cannot work together (VersionError):
	// the connection was refused before anything was sent.
	ErrIncompatible = errors.New("transport: incompatible protocol versions")

	// ErrFrameTimeout means a frame did not arrive whole within Options.ReadTimeout of its first byte.
	ErrFrameTimeout = errors.New("transport: frame timed out")

	// errIdleClosed fails a connection its server closed for idleness. The calls still on it were never
	// read and are retried on a new connection.
	errIdleClosed = errors.New("transport: peer closed the idle connection")

	// errGoAway fails a connection whose server reads no more for a reason this side does not know. The
	// calls still on it were never read.
	errGoAway = errors.New("transport: peer stopped reading the connection")

	// errIdle ends a server connection that stayed idle for Options.IdleTimeout.
	errIdle = errors.New("transport: connection idle")
)

// ConnError reports a call whose connection failed after the request was handed to it. The outcome on the
// peer is unknown. It matches ErrConnectionLost and the cause with errors.Is.
type ConnError struct {
	Addr string // the peer address
	Err  error  // the cause
}

func (e *ConnError) Error() string {
	return fmt.Sprintf("transport: connection to %s lost: %v", e.Addr, e.Err)
}

// Unwrap exposes both ErrConnectionLost and the cause to errors.Is and errors.As.
func (e *ConnError) Unwrap() []error { return []error{ErrConnectionLost, e.Err} }

// DialError reports a call that could not be handed to any connection, because dialing failed or the client
// is backing off after a failure. The request was certainly not sent. It matches ErrUnreachable and the
// cause with errors.Is.
type DialError struct {
	Addr string // the peer address
	Err  error  // the last dial failure
}

func (e *DialError) Error() string {
	return fmt.Sprintf("transport: %s unreachable: %v", e.Addr, e.Err)
}

// Unwrap exposes both ErrUnreachable and the cause to errors.Is and errors.As.
func (e *DialError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }

// RemoteError carries the error a peer's Handler returned, as text.
type RemoteError struct {
	Message string
}

func (e *RemoteError) Error() string { return "transport: remote: " + e.Message }

// frameTooLarge builds the error for a frame of size bytes against a limit of max bytes.
func frameTooLarge(size, max int) error {
	return fmt.Errorf("%w: %d bytes exceeds the limit of %d", ErrFrameTooLarge, size, max)
}

// malformed builds the error for an envelope that fails to decode.
func malformed(what string, err error) error {
	if err == nil {
		return fmt.Errorf("%w: %s", ErrMalformedFrame, what)
	}
	return fmt.Errorf("%w: %s: %v", ErrMalformedFrame, what, err)
}
