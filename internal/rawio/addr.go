package rawio

import (
	"net"
	"net/netip"
)

// RemoteIP returns the IP address of conn's other end, the zero address when it has none (a connection
// that is not over IP).
func RemoteIP(conn net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(conn.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}
