package memnet

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// packetQueue is how many packets a gossip endpoint holds unread, like a UDP socket's receive buffer: a
// packet arriving beyond it is lost.
const packetQueue = 1024

// GossipTransport is a memberlist transport on a Network: packets go straight to the endpoint bound at their
// address, or are lost as UDP datagrams are, and streams are the network's connections.
type GossipTransport struct {
	network *Network
	addr    netip.AddrPort
	udp     *net.UDPAddr // the source of the packets it sends
	ln      net.Listener

	packets  chan *memberlist.Packet
	streams  chan net.Conn
	shutdown chan struct{}
	accepted sync.WaitGroup
	once     sync.Once
}

var _ memberlist.NodeAwareTransport = (*GossipTransport)(nil)

// GossipTransport binds a gossip transport at addr: a stream listener and a packet endpoint on one port, as
// memberlist's own transport binds TCP and UDP. Port 0 picks a port free for both.
func (n *Network) GossipTransport(addr string) (*GossipTransport, error) {
	ap, err := resolve(addr)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Err: err}
	}
	n.mu.Lock()
	ap, err = n.bind(ap, func(a netip.AddrPort) bool { return n.streamTaken(a) || n.packetTaken(a) })
	if err != nil {
		n.mu.Unlock()
		return nil, err
	}
	t := &GossipTransport{
		network:  n,
		addr:     ap,
		udp:      net.UDPAddrFromAddrPort(ap),
		ln:       n.listenLocked(ap),
		packets:  make(chan *memberlist.Packet, packetQueue),
		streams:  make(chan net.Conn),
		shutdown: make(chan struct{}),
	}
	n.packets[ap] = t
	n.mu.Unlock()
	t.accepted.Add(1)
	go t.accept()
	return t, nil
}

// packetTaken is streamTaken for packet endpoints. Callers hold n.mu.
func (n *Network) packetTaken(ap netip.AddrPort) bool {
	return conflicts(ap, func(a netip.AddrPort) bool { _, ok := n.packets[a]; return ok }, func(port uint16) bool {
		for a := range n.packets {
			if a.Port() == port {
				return true
			}
		}
		return false
	})
}

// deliver queues p at the endpoint bound at addr. Without one, or with a full queue, p is lost.
func (n *Network) deliver(addr string, p *memberlist.Packet) {
	ap, err := resolve(addr)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.packets[ap]
	if !ok {
		t, ok = n.packets[netip.AddrPortFrom(unspecified(ap.Addr()), ap.Port())]
	}
	if !ok {
		return
	}
	select {
	case t.packets <- p:
	default:
	}
}

// Port is the port the transport is bound to.
func (t *GossipTransport) Port() int { return int(t.addr.Port()) }

// FinalAdvertiseAddr advertises ip and port when given, the bound address otherwise (loopback for an
// unspecified one).
func (t *GossipTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if port == 0 {
		port = t.Port()
	}
	if ip != "" {
		parsed, err := netip.ParseAddr(ip)
		if err != nil {
			return nil, 0, err
		}
		return net.IP(parsed.Unmap().AsSlice()), port, nil
	}
	bound := t.addr.Addr()
	if bound.IsUnspecified() {
		bound = loopback(bound)
	}
	return net.IP(bound.AsSlice()), port, nil
}

// WriteTo sends b as one packet to addr.
func (t *GossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	now := time.Now()
	t.network.deliver(addr, &memberlist.Packet{Buf: append([]byte(nil), b...), From: t.udp, Timestamp: now})
	return now, nil
}

// WriteToAddress sends b as one packet to a.Addr.
func (t *GossipTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

// PacketCh delivers the packets sent to the transport's address.
func (t *GossipTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

// DialTimeout opens a stream to addr; a zero timeout means no bound.
func (t *GossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout != 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return t.network.DialContext(ctx, "tcp", addr)
}

// DialAddressTimeout opens a stream to a.Addr.
func (t *GossipTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// StreamCh delivers the streams dialed to the transport's address.
func (t *GossipTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown releases the address; packets and streams sent to it are lost or refused from then on.
func (t *GossipTransport) Shutdown() error {
	t.once.Do(func() {
		close(t.shutdown)
		t.network.mu.Lock()
		if t.network.packets[t.addr] == t {
			delete(t.network.packets, t.addr)
		}
		t.network.mu.Unlock()
		t.ln.Close()
		t.accepted.Wait()
	})
	return nil
}

// accept hands the listener's streams to StreamCh until Shutdown.
func (t *GossipTransport) accept() {
	defer t.accepted.Done()
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			return
		}
		select {
		case t.streams <- conn:
		case <-t.shutdown:
			conn.Close()
			return
		}
	}
}
