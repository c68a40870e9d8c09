package transport

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// GossipTransport wraps node name's memberlist transport so that its links' faults cut gossip as Dialer
// cuts data connections. Register the gossip addresses too. Packets across a blackhole are lost although
// sending succeeds, and delayed ones may be reordered, as UDP allows. Streams are gated like data
// connections, from the dialing side.
func (f *Faults) GossipTransport(name string, base memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
	t := &gossipTransport{
		NodeAwareTransport: base,
		faults:             f,
		name:               name,
		packets:            make(chan *memberlist.Packet),
		stopping:           make(chan struct{}),
		baseDown:           make(chan struct{}),
		forwarded:          make(chan struct{}),
	}
	go t.forward()
	return t
}

// gossipTransport is a memberlist transport subject to the faults of its node's links. Methods it does not
// define, StreamCh among them, go to the embedded base: the dialing side gates both directions of a stream.
type gossipTransport struct {
	memberlist.NodeAwareTransport
	faults *Faults
	name   string

	packets   chan *memberlist.Packet // the packets that got through, for memberlist
	stopping  chan struct{}           // closed when Shutdown starts: packets are no longer delivered
	baseDown  chan struct{}           // closed once base has shut down: nothing more to forward
	forwarded chan struct{}           // closed when forward returns
	delayed   sync.WaitGroup          // packets waiting out a delay

	shutdownOnce sync.Once
	shutdownErr  error
}

// WriteTo sends b unless the link to addr is blackholed, in which case it is lost.
func (t *gossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.cut(addr) {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteTo(b, addr)
}

// WriteToAddress sends b unless the link to a is blackholed, in which case it is lost.
func (t *gossipTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.cut(a.Addr) {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteToAddress(b, a)
}

// PacketCh delivers the incoming packets whose link is not blackholed.
func (t *gossipTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

// DialTimeout dials addr once the links both ways let it, within timeout, and gates the connection.
func (t *gossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.dial(addr, timeout, func(left time.Duration) (net.Conn, error) {
		return t.NodeAwareTransport.DialTimeout(addr, left)
	})
}

// DialAddressTimeout dials a once the links both ways let it, within timeout, and gates the connection.
func (t *gossipTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.dial(a.Addr, timeout, func(left time.Duration) (net.Conn, error) {
		return t.NodeAwareTransport.DialAddressTimeout(a, left)
	})
}

// Shutdown stops delivering packets, shuts base down and waits for the goroutines that forward packets.
func (t *gossipTransport) Shutdown() error {
	t.shutdownOnce.Do(func() {
		close(t.stopping)
		t.shutdownErr = t.NodeAwareTransport.Shutdown()
		close(t.baseDown)
		<-t.forwarded
		t.delayed.Wait()
	})
	return t.shutdownErr
}

// cut reports whether the link from this node to addr is blackholed.
func (t *gossipTransport) cut(addr string) bool {
	return t.faults.fault(t.name, t.faults.nameOf(addr)).blackhole
}

// dial waits, as a dial across a cut link hangs, until neither direction to addr is blackholed, then dials
// with what is left of timeout and wraps the connection like a data connection. As with net.Dialer, a zero
// timeout means no bound and a negative one has already expired.
func (t *gossipTransport) dial(addr string, timeout time.Duration, dial func(time.Duration) (net.Conn, error)) (net.Conn, error) {
	to := t.faults.nameOf(addr)
	ctx := context.Background()
	if timeout != 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	start := time.Now()
	if err := t.faults.waitDialable(ctx, t.name, to); err != nil {
		return nil, fmt.Errorf("gossip %w", err)
	}
	left := timeout
	if timeout != 0 {
		if left -= time.Since(start); left <= 0 {
			return nil, fmt.Errorf("gossip dial %s -> %s: %w", t.name, to, context.DeadlineExceeded)
		}
	}
	conn, err := dial(left)
	if err != nil {
		return nil, err
	}
	return t.faults.wrap(conn, t.name, to), nil
}

// forward passes base's packets on to memberlist. It drains base until base has shut down, because base's
// listener blocks on a packet nobody reads and its Shutdown waits for that listener.
func (t *gossipTransport) forward() {
	defer close(t.forwarded)
	in := t.NodeAwareTransport.PacketCh()
	for {
		select {
		case p := <-in:
			t.receive(p)
		case <-t.baseDown:
			return
		}
	}
}

// receive drops p when its link is blackholed, holds it when the link is delayed, and delivers it otherwise.
func (t *gossipTransport) receive(p *memberlist.Packet) {
	fault := t.faults.fault(t.faults.nameOf(p.From.String()), t.name)
	switch {
	case fault.blackhole:
	case fault.delay > 0:
		t.delayed.Add(1)
		go t.deliverAfter(p, p.Timestamp.Add(fault.delay))
	default:
		t.deliver(p)
	}
}

// deliverAfter delivers p at the time at, stamped with that time as its arrival, unless Shutdown comes first.
func (t *gossipTransport) deliverAfter(p *memberlist.Packet, at time.Time) {
	defer t.delayed.Done()
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	select {
	case <-timer.C:
		p.Timestamp = time.Now()
		t.deliver(p)
	case <-t.stopping:
	}
}

// deliver hands p to memberlist, or drops it once Shutdown has started.
func (t *gossipTransport) deliver(p *memberlist.Packet) {
	select {
	case t.packets <- p:
	case <-t.stopping:
	}
}
