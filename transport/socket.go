package transport

import (
	"io"
	"net"

	"github.com/zaris-go/zaris/internal/rawio"
)

// socket is what reads and writes a connection: raw I/O on a TCP connection (internal/rawio), which
// spares each read and write the scheduler's system-call path, or the connection itself.
type socket struct {
	rw  io.ReadWriter
	raw *rawio.Socket // nil unless rw is raw I/O
}

func socketOf(conn net.Conn) socket {
	if raw, ok := rawio.Of(conn); ok {
		return socket{rw: raw, raw: raw}
	}
	return socket{rw: conn}
}
