package transport

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
)

// Faults injects network faults between named nodes, for tests of clusters running in one process. Every
// connection is dialed through some node's Dialer, whose wrapped connection enforces both directions: its
// writes obey the dialer-to-peer link and its reads the peer-to-dialer link. Faults stall or slow bytes
// but never drop, reorder or split them, except for gossip packets (see GossipTransport).
type Faults struct {
	mu      sync.Mutex
	names   map[string]string // listening address -> node name
	links   map[link]linkFault
	conns   map[*faultConn]struct{}
	changed chan struct{} // closed and cleared whenever a link fault changes; nil until someone waits
}

// link is one direction between two nodes.
type link struct{ from, to string }

// linkFault is what currently afflicts a link.
type linkFault struct {
	blackhole bool          // bytes stall until healed
	delay     time.Duration // bytes are held this long
}

// NewFaults returns a Faults with every link healthy.
func NewFaults() *Faults {
	return &Faults{
		names: make(map[string]string),
		links: make(map[link]linkFault),
		conns: make(map[*faultConn]struct{}),
	}
}

// Register records that node name listens at addr, so that dials to addr are attributed to name.
// Dials to an unregistered address use the address itself as the node name.
func (f *Faults) Register(name, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names[addrKey(addr)] = name
}

// Dialer returns a Dialer for node from: its connections are subject to the faults of their links.
// A nil base dials with a plain net.Dialer.
func (f *Faults) Dialer(from string, base Dialer) Dialer {
	if base == nil {
		base = &net.Dialer{}
	}
	return &faultDialer{faults: f, from: from, base: base}
}

// Blackhole stalls bytes from -> to until the link is healed or the stalled call's deadline passes.
// A dial between the pair stalls as long as either direction is blackholed.
func (f *Faults) Blackhole(from, to string) {
	f.update(from, to, func(lf *linkFault) { lf.blackhole = true })
}

// Delay holds bytes from -> to for d before they are written or released to the reader. Zero removes it.
func (f *Faults) Delay(from, to string, d time.Duration) {
	f.update(from, to, func(lf *linkFault) { lf.delay = d })
}

// Partition blackholes both directions between a and b.
func (f *Faults) Partition(a, b string) {
	f.Blackhole(a, b)
	f.Blackhole(b, a)
}

// Heal removes every fault from -> to. The reverse direction is untouched.
func (f *Faults) Heal(from, to string) {
	f.update(from, to, func(lf *linkFault) { *lf = linkFault{} })
}

// HealAll removes every fault on every link.
func (f *Faults) HealAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.links)
	f.notify()
}

// Reset closes the live connections between from and to, whichever side dialed them.
func (f *Faults) Reset(from, to string) {
	f.mu.Lock()
	var victims []*faultConn
	for c := range f.conns {
		if (c.from == from && c.to == to) || (c.from == to && c.to == from) {
			victims = append(victims, c)
		}
	}
	f.mu.Unlock()
	for _, c := range victims {
		c.Close()
	}
}

func (f *Faults) update(from, to string, change func(*linkFault)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := link{from, to}
	lf := f.links[key]
	change(&lf)
	if lf == (linkFault{}) {
		delete(f.links, key)
	} else {
		f.links[key] = lf
	}
	f.notify()
}

// notify wakes everything waiting on a link. Callers hold f.mu.
func (f *Faults) notify() {
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}

// state returns the fault on from -> to and a channel closed at the next change.
func (f *Faults) state(from, to string) (linkFault, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	return f.links[link{from, to}], f.changed
}

func (f *Faults) nameOf(addr string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name, ok := f.names[addrKey(addr)]; ok {
		return name
	}
	return addr
}

// addrKey is the form addresses are registered and looked up under, so that spellings of one "ip:port"
// (an IPv4-mapped IPv6 address, say) name the same node. Anything else is kept as given.
func addrKey(addr string) string {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return addr
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
}

// fault returns what currently afflicts from -> to.
func (f *Faults) fault(from, to string) linkFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.links[link{from, to}]
}

// waitDialable blocks while either direction between from and to is blackholed, as a dial across a cut
// link would hang.
func (f *Faults) waitDialable(ctx context.Context, from, to string) error {
	for {
		out, changed := f.state(from, to)
		back, _ := f.state(to, from)
		if !out.blackhole && !back.blackhole {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("dial %s -> %s: link blackholed: %w", from, to, ctx.Err())
		}
	}
}

func (f *Faults) track(c *faultConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns[c] = struct{}{}
}

func (f *Faults) forget(c *faultConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
}

type faultDialer struct {
	faults *Faults
	from   string
	base   Dialer
}

func (d *faultDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	to := d.faults.nameOf(address)
	if err := d.faults.waitDialable(ctx, d.from, to); err != nil {
		return nil, err
	}
	conn, err := d.base.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return d.faults.wrap(conn, d.from, to), nil
}

// wrap gates conn, dialed by node from to node to, by the faults of both directions, and tracks it for Reset.
func (f *Faults) wrap(conn net.Conn, from, to string) net.Conn {
	c := &faultConn{Conn: conn, faults: f, from: from, to: to, closed: make(chan struct{})}
	f.track(c)
	return c
}

// faultConn is a connection dialed by node from to node to, gated by the faults of both directions.
type faultConn struct {
	net.Conn
	faults    *Faults
	from, to  string
	closed    chan struct{}
	closeOnce sync.Once
	readDL    deadline
	writeDL   deadline

	wmu sync.Mutex // keeps concurrent writes whole and in order

	rmu    sync.Mutex
	held   []byte    // bytes received but not yet released to the reader
	heldAt time.Time // when held arrived
}

// Write sends b once the outgoing link lets it through; a stalled write sends nothing.
func (c *faultConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.gate("write", c.from, c.to, time.Now(), &c.writeDL); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// Read returns received bytes once the incoming link releases them. Bytes held when a read gives up are
// kept for the next Read.
func (c *faultConn) Read(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(c.held) > 0 {
		if err := c.gate("read", c.to, c.from, c.heldAt, &c.readDL); err != nil {
			return 0, err
		}
		n := copy(b, c.held)
		c.held = c.held[n:]
		return n, nil
	}
	n, err := c.Conn.Read(b)
	if n == 0 {
		return 0, err
	}
	arrived := time.Now()
	if gerr := c.gate("read", c.to, c.from, arrived, &c.readDL); gerr != nil {
		c.held, c.heldAt = append(c.held[:0], b[:n]...), arrived
		return 0, gerr
	}
	return n, err
}

// Close closes the connection and releases any stalled Read or Write.
func (c *faultConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.faults.forget(c)
	})
	return c.Conn.Close()
}

func (c *faultConn) SetDeadline(t time.Time) error {
	c.readDL.set(t)
	c.writeDL.set(t)
	return c.Conn.SetDeadline(t)
}

func (c *faultConn) SetReadDeadline(t time.Time) error {
	c.readDL.set(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *faultConn) SetWriteDeadline(t time.Time) error {
	c.writeDL.set(t)
	return c.Conn.SetWriteDeadline(t)
}

// gate waits until link from -> to lets bytes that arrived at since through: not blackholed and past its
// delay. It fails with a timeout when dl passes and with net.ErrClosed when the connection closes.
func (c *faultConn) gate(op, from, to string, since time.Time, dl *deadline) error {
	for {
		select {
		case <-c.closed:
			return c.opError(op, net.ErrClosed)
		default:
		}
		fault, changed := c.faults.state(from, to)
		var ready time.Duration // how long until the delay has passed; meaningless while blackholed
		if !fault.blackhole {
			ready = time.Until(since.Add(fault.delay))
			if ready <= 0 {
				return nil
			}
		}
		expiry, dlChanged := dl.get()
		if !expiry.IsZero() && !time.Now().Before(expiry) {
			return c.opError(op, os.ErrDeadlineExceeded)
		}
		c.sleep(changed, dlChanged, ready, expiry)
	}
}

// sleep waits for a fault change, a deadline change, the delay, the deadline or Close, whichever is first.
func (c *faultConn) sleep(changed, dlChanged <-chan struct{}, ready time.Duration, expiry time.Time) {
	var readyC, expiryC <-chan time.Time
	if ready > 0 {
		t := time.NewTimer(ready)
		defer t.Stop()
		readyC = t.C
	}
	if !expiry.IsZero() {
		t := time.NewTimer(time.Until(expiry))
		defer t.Stop()
		expiryC = t.C
	}
	select {
	case <-changed:
	case <-dlChanged:
	case <-readyC:
	case <-expiryC:
	case <-c.closed:
	}
}

func (c *faultConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// deadline is a settable point in time that wakes its waiters when it moves.
type deadline struct {
	mu      sync.Mutex
	at      time.Time
	changed chan struct{} // closed and cleared by set; nil until someone waits
}

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = t
	if d.changed != nil {
		close(d.changed)
		d.changed = nil
	}
}

func (d *deadline) get() (time.Time, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.changed == nil {
		d.changed = make(chan struct{})
	}
	return d.at, d.changed
}
