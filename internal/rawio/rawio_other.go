//go:build !linux

package rawio

import "net"

// Socket is raw I/O on one TCP connection, implemented for Linux only.
type Socket struct{}

// Of reports false: raw socket I/O is implemented for Linux only.
func Of(net.Conn) (*Socket, bool) { return nil, false }

func (*Socket) Read([]byte) (int, error)     { panic("rawio: not on this system") }
func (*Socket) Write([]byte) (int, error)    { panic("rawio: not on this system") }
func (*Socket) WriteNow([]byte) (int, error) { panic("rawio: not on this system") }
