//go:build !linux

package zaris

import (
	"io"
	"net"
)

// newSocketIO returns conn itself: raw socket I/O is implemented for Linux only.
func newSocketIO(conn net.Conn) io.ReadWriter { return conn }
