// Package memnet is an in-memory network for running many nodes in one process without sockets: listeners,
// a dialer and gossip transports whose connections behave like loopback TCP where the nodes rely on it
// (full duplex, bounded buffers, deadlines, refused dials, addresses of the TCP kind).
package memnet

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Port ranges, as on Linux: listeners bound to port 0 get one below ephemeralLow, dialing ends one above.
const (
	listenLow     = 20000
	ephemeralLow  = 32768
	ephemeralHigh = 60999
)

// backlog is how many dialed connections a listener holds for Accept; a dial beyond it is refused.
const backlog = 4096

// Network is one in-memory network. Its zero value is not usable: create one with New. Every method is safe
// for concurrent use.
type Network struct {
	mu        sync.Mutex
	listeners map[netip.AddrPort]*listener
	packets   map[netip.AddrPort]*GossipTransport // bound packet endpoints (the UDP side of gossip)
	nextPort  uint16                              // next candidate for a listener on port 0
	nextLocal uint16                              // next local port of a dialing end
}

// New returns an empty network.
func New() *Network {
	return &Network{
		listeners: make(map[netip.AddrPort]*listener),
		packets:   make(map[netip.AddrPort]*GossipTransport),
		nextPort:  listenLow,
		nextLocal: ephemeralLow,
	}
}

// Listen binds a stream listener at addr ("host:port", an IP or localhost; port 0 picks a free port on
// that host). An address already bound, or a port bound on the unspecified address, is refused.
func (n *Network) Listen(addr string) (net.Listener, error) {
	ap, err := resolve(addr)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Err: err}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ap, err = n.bind(ap, n.streamTaken)
	if err != nil {
		return nil, err
	}
	return n.listenLocked(ap), nil
}

// listenLocked registers a listener at the free address ap. Callers hold n.mu.
func (n *Network) listenLocked(ap netip.AddrPort) *listener {
	l := &listener{network: n, key: ap, addr: net.TCPAddrFromAddrPort(ap)}
	n.listeners[ap] = l
	return l
}

// bind returns ap, with a port that taken reports free in place of port 0. It fails with an address-in-use
// error when taken reports ap, or every candidate port, in use. Callers hold n.mu.
func (n *Network) bind(ap netip.AddrPort, taken func(netip.AddrPort) bool) (netip.AddrPort, error) {
	if ap.Port() != 0 {
		if taken(ap) {
			return ap, &net.OpError{Op: "listen", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap),
				Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
		}
		return ap, nil
	}
	for range ephemeralLow - listenLow {
		port := n.nextPort
		if n.nextPort++; n.nextPort >= ephemeralLow {
			n.nextPort = listenLow
		}
		if candidate := netip.AddrPortFrom(ap.Addr(), port); !taken(candidate) {
			return candidate, nil
		}
	}
	return ap, &net.OpError{Op: "listen", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap),
		Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
}

// streamTaken reports whether a listener holds ap's port on ap's host or on the unspecified address (or, for
// an unspecified ap, on any host). Callers hold n.mu.
func (n *Network) streamTaken(ap netip.AddrPort) bool {
	return conflicts(ap, func(a netip.AddrPort) bool { _, ok := n.listeners[a]; return ok }, n.listenerPorts)
}

// listenerPorts reports whether any listener is bound to port.
func (n *Network) listenerPorts(port uint16) bool {
	for a := range n.listeners {
		if a.Port() == port {
			return true
		}
	}
	return false
}

// conflicts is the binding rule shared by streams and packets: exact addresses and wildcards collide.
func conflicts(ap netip.AddrPort, bound func(netip.AddrPort) bool, anyOnPort func(uint16) bool) bool {
	if ap.Addr().IsUnspecified() {
		return anyOnPort(ap.Port())
	}
	return bound(ap) || bound(netip.AddrPortFrom(unspecified(ap.Addr()), ap.Port()))
}

// DialContext connects to the listener at addr, as net.Dialer does for "tcp": an address where nothing
// listens is refused at once. The network must be tcp, tcp4 or tcp6.
func (n *Network) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
	}
	ap, err := resolve(addr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	if ap.Addr().IsUnspecified() { // as the kernel does, a dial to the unspecified address reaches this host
		ap = netip.AddrPortFrom(loopback(ap.Addr()), ap.Port())
	}
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: net.TCPAddrFromAddrPort(ap), Err: err}
	}
	refused := &net.OpError{Op: "dial", Net: network, Addr: net.TCPAddrFromAddrPort(ap),
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	n.mu.Lock()
	l := n.listenerAt(ap)
	local := net.TCPAddrFromAddrPort(netip.AddrPortFrom(ap.Addr(), n.localPort()))
	n.mu.Unlock()
	if l == nil {
		return nil, refused
	}
	client, server := pipe(local, net.TCPAddrFromAddrPort(ap))
	if !l.enqueue(server) {
		return nil, refused
	}
	return client, nil
}

// listenerAt returns the listener that takes connections to ap, or nil. Callers hold n.mu.
func (n *Network) listenerAt(ap netip.AddrPort) *listener {
	if l, ok := n.listeners[ap]; ok {
		return l
	}
	return n.listeners[netip.AddrPortFrom(unspecified(ap.Addr()), ap.Port())]
}

// localPort returns the next local port for a dialing end. Callers hold n.mu.
func (n *Network) localPort() uint16 {
	port := n.nextLocal
	if n.nextLocal++; n.nextLocal > ephemeralHigh {
		n.nextLocal = ephemeralLow
	}
	return port
}

// unlisten releases l's address.
func (n *Network) unlisten(l *listener) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners[l.key] == l {
		delete(n.listeners, l.key)
	}
}

// resolve parses "host:port" where host is an IP address, localhost or empty (the unspecified address).
func resolve(addr string) (netip.AddrPort, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return netip.AddrPort{}, &net.AddrError{Err: "invalid port", Addr: addr}
	}
	var ip netip.Addr
	switch host {
	case "":
		ip = netip.IPv4Unspecified()
	case "localhost":
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	default:
		if ip, err = netip.ParseAddr(host); err != nil {
			return netip.AddrPort{}, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
}

// unspecified returns the unspecified address of ip's family.
func unspecified(ip netip.Addr) netip.Addr {
	if ip.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

// loopback returns the loopback address of ip's family.
func loopback(ip netip.Addr) netip.Addr {
	if ip.Is4() {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	return netip.IPv6Loopback()
}

// listener is a bound address that hands dialed connections to Accept.
type listener struct {
	network *Network
	key     netip.AddrPort
	addr    *net.TCPAddr

	mu      sync.Mutex
	pending []*Conn // dialed, not yet accepted
	closed  bool
	arrived signal
}

// enqueue hands c to Accept. It reports false when the listener is closed or its backlog full.
func (l *listener) enqueue(c *Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || len(l.pending) >= backlog {
		return false
	}
	l.pending = append(l.pending, c)
	l.arrived.broadcast()
	return true
}

// Accept waits for the next connection dialed to the listener's address.
func (l *listener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
		}
		if len(l.pending) > 0 {
			c := l.pending[0]
			l.pending[0] = nil
			l.pending = l.pending[1:]
			l.mu.Unlock()
			return c, nil
		}
		wake := l.arrived.wait()
		l.mu.Unlock()
		<-wake
	}
}

// Close releases the address, wakes Accept and resets the connections not yet accepted.
func (l *listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return &net.OpError{Op: "close", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
	}
	l.closed = true
	pending := l.pending
	l.pending = nil
	l.arrived.broadcast()
	l.mu.Unlock()
	l.network.unlisten(l)
	for _, c := range pending {
		c.Close()
	}
	return nil
}

func (l *listener) Addr() net.Addr { return l.addr }

// signal wakes every goroutine waiting on it at once. Its owner's mutex guards it.
type signal struct{ ch chan struct{} }

// wait returns a channel closed at the next broadcast.
func (s *signal) wait() <-chan struct{} {
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) broadcast() {
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
