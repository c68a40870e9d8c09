package resp

import (
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/clock"
)

// respBudget is the memory the query buffers of every RESP connection may hold together. A reader reserves
// before it grows and releases as it shrinks or closes, so the sum never passes the limit. A share of a
// budget (preAuthShare) is a budget of its own whose bytes its parent counts too.
type respBudget struct {
	limit  int64
	used   atomic.Int64
	peak   atomic.Int64 // the most ever held at once, for tests
	parent *respBudget
}

func newRESPBudget(limit int64) *respBudget { return &respBudget{limit: limit} }

// Buffers is what a budget of query and reply buffers holds: now, at most ever, and at most allowed.
type Buffers struct {
	Used, Peak, Limit int64
}

func (b *respBudget) buffers() Buffers {
	return Buffers{Used: b.used.Load(), Peak: b.peak.Load(), Limit: b.limit}
}

// Buffers reports the buffers of every connection, and of those not logged in yet, which take at most a
// share of the whole.
func (s *Server) Buffers() (all, preAuth Buffers) { return s.budget.buffers(), s.gate.budget.buffers() }

// PreAuthConnBound bounds the buffers of one connection not logged in yet, and InitialBuffer is the
// buffer a connection starts with.
const (
	PreAuthConnBound = PreAuthMaxQuery + respMaxHeaderLine + 16*respArgOverhead
	InitialBuffer    = respInitialBuffer
)

// preAuthShare is the part of the query buffer budget, as a divisor, that clients not logged in may take
// together: whatever they hold, logged-in clients keep the rest.
const preAuthShare = 4

// share returns a budget of b's limit divided by div, whose reservations b counts too.
func (b *respBudget) share(div int64) *respBudget {
	return &respBudget{limit: max(b.limit/div, respInitialBuffer), parent: b}
}

// reserve counts n more bytes and reports true, or counts nothing and reports false when the sum would pass
// the limit, its own or its parent's. A nil budget is unbounded.
func (b *respBudget) reserve(n int) bool {
	if b == nil {
		return true
	}
	used := b.used.Add(int64(n))
	if used > b.limit || !b.parent.reserve(n) {
		b.used.Add(-int64(n))
		return false
	}
	for p := b.peak.Load(); used > p && !b.peak.CompareAndSwap(p, used); p = b.peak.Load() {
	}
	return true
}

// release gives n reserved bytes back.
func (b *respBudget) release(n int) {
	if b != nil {
		b.used.Add(-int64(n))
		b.parent.release(n)
	}
}

// takeBack counts in share b again n bytes its parent alone counts, and returns b: handOver undone.
func (b *respBudget) takeBack(n int) *respBudget {
	b.used.Add(int64(n))
	return b
}

// handOver moves n bytes reserved from share b to its parent alone, and returns the parent.
func (b *respBudget) handOver(n int) *respBudget {
	b.used.Add(-int64(n))
	return b.parent
}

// respTimeouts are the times after which a connection is closed (zero: never).
type respTimeouts struct {
	idle    time.Duration // nothing sent, or no reply read
	command time.Duration // a command incomplete since its first bytes came
	auth    time.Duration // not logged in since the connection opened, when a login is needed
}

// slack is how far a read deadline may lag behind the ideal one before it is moved. Setting a deadline
// costs a timer update, and closing a connection a sixteenth of its shortest timeout early does no harm.
func (t respTimeouts) slack() time.Duration {
	shortest := time.Duration(0)
	for _, d := range []time.Duration{t.idle, t.command, t.auth} {
		if d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	return clock.DeadlineSlack(shortest)
}

// beforeRead runs before every read that may block: it publishes what the connection counted, sends the
// replies waiting and sets the read deadline.
func (c *respConn) beforeRead() error {
	c.publishStats()
	if err := c.awaitInput(); err != nil {
		return err
	}
	deadline := c.readDeadline(time.Now())
	keep := deadline.Equal(c.deadline) || !deadline.IsZero() && !c.deadline.IsZero() &&
		!deadline.Before(c.deadline) && deadline.Sub(c.deadline) <= c.srv.slack
	if keep {
		return nil
	}
	c.deadline = deadline
	return c.conn.SetReadDeadline(deadline)
}

// readDeadline is when the next read gives up: RESPIdleTimeout from now, RESPCommandTimeout after a
// half-received command began to wait, RESPAuthTimeout after a connection that must log in opened,
// whichever comes first. Zero: never.
func (c *respConn) readDeadline(now time.Time) time.Time {
	t := c.srv.timeouts
	var deadline time.Time
	if t.idle > 0 {
		deadline = now.Add(t.idle)
	}
	if c.rd.midCommand() && t.command > 0 {
		if c.partialSince.IsZero() || c.rd.completed != c.completedSeen {
			c.partialSince, c.completedSeen = now, c.rd.completed
		}
		deadline = earliest(deadline, c.partialSince.Add(t.command))
	} else {
		c.partialSince = time.Time{}
	}
	if c.user == nil && t.auth > 0 {
		deadline = earliest(deadline, c.opened.Add(t.auth))
	}
	return deadline
}

// earliest returns the earlier of two deadlines, where zero means none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// midCommand reports whether part of a command has arrived (or is being read past) but not all of it.
func (rd *respReader) midCommand() bool { return rd.w > rd.r || rd.pending > 0 }

// deadlineWriter moves a connection's write deadline forward before each write, so a client that reads
// none of its replies is closed after the idle timeout rather than hold its goroutine for ever.
type deadlineWriter struct {
	conn     net.Conn
	dst      io.Writer
	timeout  time.Duration
	deadline time.Time
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if d.timeout > 0 {
		if want := time.Now().Add(d.timeout); want.Sub(d.deadline) > clock.DeadlineSlack(d.timeout) {
			if err := d.conn.SetWriteDeadline(want); err != nil {
				return 0, err
			}
			d.deadline = want
		}
	}
	return d.dst.Write(p)
}

// preAuthGate admits the connections of clients that have not logged in: at most perAddr from one IP
// address, at most maxConns in all (three quarters of RESPMaxClients) and their buffers within a share of
// the query buffer budget, so that however many a stranger opens, logged-in clients keep their slots and
// their memory. Its state is guarded by the server's lock.
type preAuthGate struct {
	budget   *respBudget
	perAddr  int
	maxConns int
	conns    int
	byAddr   map[netip.Addr]int
}

func newPreAuthGate(budget *respBudget, maxClients, perAddr int) *preAuthGate {
	return &preAuthGate{budget: budget.share(preAuthShare), perAddr: perAddr, maxConns: max(1, maxClients*3/4), byAddr: map[netip.Addr]int{}}
}

// enter admits one more connection from addr, or says why not.
func (g *preAuthGate) enter(addr netip.Addr) string {
	switch {
	case g.conns >= g.maxConns:
		return "ERR max number of clients not logged in reached"
	case g.byAddr[addr] >= g.perAddr:
		return "ERR max number of clients not logged in reached for this address"
	}
	g.conns++
	g.byAddr[addr]++
	return ""
}

// leave forgets a connection from addr that logged in or closed.
func (g *preAuthGate) leave(addr netip.Addr) {
	g.conns--
	if g.byAddr[addr]--; g.byAddr[addr] <= 0 {
		delete(g.byAddr, addr)
	}
}
