package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Greeting is what both ends of a connection through a Mux say after its protocol byte: the protocol
// versions of their nodes, so that nodes of releases that cannot work together never exchange a frame.
type Greeting struct {
	Version    uint16 // the protocol the node speaks
	MinVersion uint16 // the oldest protocol a peer may speak to work with it
}

// Compatible reports whether nodes greeting g and peer can work together: each speaks a protocol the other
// accepts.
func (g Greeting) Compatible(peer Greeting) bool {
	return peer.Version >= g.MinVersion && g.Version >= peer.MinVersion
}

func (g Greeting) String() string {
	return fmt.Sprintf("protocol %d (works with %d and up)", g.Version, g.MinVersion)
}

// The greeting's wire form: two magic bytes, then the version and the oldest version accepted, each
// big-endian. The Mux answers with a status byte and its own greeting.
const (
	greetingMagic   = "ZV"
	greetingSize    = len(greetingMagic) + 4
	greetingAccept  = 0
	greetingRefuse  = 1
	greetingAnswerN = 1 + greetingSize
)

func (g Greeting) append(dst []byte) []byte {
	dst = append(dst, greetingMagic...)
	dst = binary.BigEndian.AppendUint16(dst, g.Version)
	return binary.BigEndian.AppendUint16(dst, g.MinVersion)
}

// parseGreeting reads a greeting's wire form; anything without the magic, such as a frame of a release
// that sends none, is an error.
func parseGreeting(b []byte) (Greeting, error) {
	if len(b) != greetingSize || string(b[:len(greetingMagic)]) != greetingMagic {
		return Greeting{}, errNoGreeting
	}
	return Greeting{Version: binary.BigEndian.Uint16(b[2:]), MinVersion: binary.BigEndian.Uint16(b[4:])}, nil
}

// VersionError reports a connection refused because the two nodes' protocols are incompatible. It
// matches ErrIncompatible with errors.Is.
type VersionError struct {
	Addr          string
	Local, Remote Greeting
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("transport: peer %s speaks %s; this node speaks %s", e.Addr, e.Remote, e.Local)
}

func (e *VersionError) Unwrap() error { return ErrIncompatible }

// errNoGreeting marks a connection whose bytes after the protocol byte are not a greeting.
var errNoGreeting = errors.New("transport: no protocol greeting (a release that predates protocol versions?)")

// greet answers the greeting of a connection the Mux accepted, and returns the peer's greeting with an
// error when the two are incompatible or the peer sent none.
func (m *Mux) greet(conn net.Conn) (Greeting, error) {
	var b [greetingSize]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return Greeting{}, err
	}
	peer, err := parseGreeting(b[:])
	if err != nil {
		return Greeting{}, err
	}
	status := byte(greetingAccept)
	if !m.greeting.Compatible(peer) {
		status = greetingRefuse
	}
	if err := conn.SetWriteDeadline(time.Now().Add(m.timeout)); err != nil {
		return peer, err
	}
	if _, err := conn.Write(m.greeting.append([]byte{status})); err != nil {
		return peer, err
	}
	if status == greetingRefuse {
		return peer, &VersionError{Addr: conn.RemoteAddr().String(), Local: *m.greeting, Remote: peer}
	}
	return peer, conn.SetWriteDeadline(time.Time{})
}

// awaitAnswer reads the Mux's answer to the greeting local sent on conn, within ctx.
func awaitAnswer(ctx context.Context, conn net.Conn, addr string, local Greeting) error {
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetReadDeadline(deadline); err != nil {
			return err
		}
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	var b [greetingAnswerN]byte
	_, err := io.ReadFull(conn, b[:])
	if !stop() || ctx.Err() != nil {
		return errors.Join(ctx.Err(), err)
	}
	if err != nil {
		return fmt.Errorf("transport: %s sent no answer to the greeting: %w", addr, err)
	}
	remote, err := parseGreeting(b[1:])
	if err != nil {
		return fmt.Errorf("transport: %s: %w", addr, err)
	}
	if b[0] != greetingAccept || !local.Compatible(remote) {
		return &VersionError{Addr: addr, Local: local, Remote: remote}
	}
	return conn.SetReadDeadline(time.Time{})
}
