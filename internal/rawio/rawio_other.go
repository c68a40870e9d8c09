//go:build !linux

package rawio

import (
	"io"
	"net"
)

// Socket is raw I/O on one TCP connection, implemented for Linux only.
type Socket struct{}

// Of returns conn itself and a nil raw: raw socket I/O is implemented for Linux only.
func Of(conn net.Conn) (rw io.ReadWriter, raw *Socket) { return conn, nil }

func (*Socket) Read([]byte) (int, error)     { panic("rawio: not on this system") }
func (*Socket) Write([]byte) (int, error)    { panic("rawio: not on this system") }
func (*Socket) WriteNow([]byte) (int, error) { panic("rawio: not on this system") }
