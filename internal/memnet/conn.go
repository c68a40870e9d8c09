package memnet

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// BufferSize is how many bytes one direction of a connection holds unread, like a socket's send and receive
// buffers together: a writer blocks once its peer has this many bytes it has not read.
const BufferSize = 256 << 10

// pipe returns the two ends of a new connection between local and remote.
func pipe(local, remote *net.TCPAddr) (client, server *Conn) {
	up, down := &stream{}, &stream{}
	client = &Conn{local: local, remote: remote, rx: down, tx: up, closed: make(chan struct{})}
	server = &Conn{local: remote, remote: local, rx: up, tx: down, closed: make(chan struct{})}
	return client, server
}

// stream is one direction of a connection: the bytes written and not yet read.
type stream struct {
	mu      sync.Mutex
	buf     []byte // unread bytes are buf[off:]
	off     int
	eof     bool // the writing end closed or shut down writing: reads end after the buffered bytes
	reset   bool // the reading end closed: writes fail
	changed signal
}

// unread is the number of bytes buffered. Callers hold s.mu.
func (s *stream) unread() int { return len(s.buf) - s.off }

// push appends as much of b as fits and returns how much did. Callers hold s.mu.
func (s *stream) push(b []byte) int {
	k := min(len(b), BufferSize-s.unread())
	if k <= 0 {
		return 0
	}
	if s.off > 0 && len(s.buf)+k > cap(s.buf) {
		s.buf = s.buf[:copy(s.buf, s.buf[s.off:])]
		s.off = 0
	}
	s.buf = append(s.buf, b[:k]...)
	s.changed.broadcast()
	return k
}

// pull moves buffered bytes into b and returns how many. Callers hold s.mu.
func (s *stream) pull(b []byte) int {
	k := copy(b, s.buf[s.off:])
	if s.off += k; s.off == len(s.buf) {
		s.buf, s.off = s.buf[:0], 0
	}
	if k > 0 {
		s.changed.broadcast()
	}
	return k
}

// Conn is one end of an in-memory connection. It is safe for concurrent use; concurrent writes are each
// written whole and in turn, as on a TCP socket.
type Conn struct {
	local, remote *net.TCPAddr
	rx, tx        *stream // what this end reads, what it writes

	closed    chan struct{}
	closeOnce sync.Once
	readDL    deadline
	writeDL   deadline

	rmu sync.Mutex // one Read at a time
	wmu sync.Mutex // one Write at a time, so that each is whole
}

// Read reads buffered bytes, waiting for some. After the peer closed, it returns io.EOF once the bytes it
// sent are read.
func (c *Conn) Read(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if err := c.check("read", &c.readDL); err != nil {
			return 0, err
		}
		s := c.rx
		s.mu.Lock()
		switch {
		case s.unread() > 0:
			k := s.pull(b)
			s.mu.Unlock()
			return k, nil
		case s.eof:
			s.mu.Unlock()
			return 0, io.EOF
		case len(b) == 0:
			s.mu.Unlock()
			return 0, nil
		}
		wake := s.changed.wait()
		s.mu.Unlock()
		c.wait(wake, &c.readDL)
	}
}

// Write writes all of b, waiting while the peer's buffer is full. It fails once the peer has closed.
func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := 0
	for {
		if err := c.check("write", &c.writeDL); err != nil {
			return n, err
		}
		s := c.tx
		s.mu.Lock()
		switch {
		case s.eof:
			s.mu.Unlock()
			return n, c.opError("write", os.NewSyscallError("write", syscall.EPIPE))
		case s.reset:
			s.mu.Unlock()
			return n, c.opError("write", os.NewSyscallError("write", syscall.ECONNRESET))
		}
		n += s.push(b[n:])
		if n == len(b) {
			s.mu.Unlock()
			return n, nil
		}
		wake := s.changed.wait()
		s.mu.Unlock()
		c.wait(wake, &c.writeDL)
	}
}

// check fails an operation on a closed connection or past its deadline.
func (c *Conn) check(op string, dl *deadline) error {
	select {
	case <-c.closed:
		return c.opError(op, net.ErrClosed)
	default:
	}
	if at := dl.time(); !at.IsZero() && !time.Now().Before(at) {
		return c.opError(op, os.ErrDeadlineExceeded)
	}
	return nil
}

// wait blocks until wake fires, the deadline moves or passes, or the connection closes.
func (c *Conn) wait(wake <-chan struct{}, dl *deadline) {
	at, moved := dl.get()
	var expired <-chan time.Time
	if !at.IsZero() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-wake:
	case <-moved:
	case <-expired:
	case <-c.closed:
	}
}

// Close closes both directions: the peer reads what was sent, then io.EOF, and its writes fail. Blocked
// reads and writes on either end return.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.closed)
		c.tx.mu.Lock()
		c.tx.eof = true
		c.tx.changed.broadcast()
		c.tx.mu.Unlock()
		c.rx.mu.Lock()
		c.rx.reset = true
		c.rx.buf, c.rx.off = nil, 0
		c.rx.changed.broadcast()
		c.rx.mu.Unlock()
	})
	if !first {
		return c.opError("close", net.ErrClosed)
	}
	return nil
}

// CloseWrite shuts down the writing direction, as TCP's half-close: the peer reads io.EOF after the bytes
// sent, while this end can still read.
func (c *Conn) CloseWrite() error {
	select {
	case <-c.closed:
		return c.opError("close", net.ErrClosed)
	default:
	}
	c.tx.mu.Lock()
	defer c.tx.mu.Unlock()
	c.tx.eof = true
	c.tx.changed.broadcast()
	return nil
}

func (c *Conn) LocalAddr() net.Addr  { return c.local }
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *Conn) SetReadDeadline(t time.Time) error  { return c.setDeadline(&c.readDL, t) }
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.setDeadline(&c.writeDL, t) }

func (c *Conn) setDeadline(dl *deadline, t time.Time) error {
	select {
	case <-c.closed:
		return c.opError("set", net.ErrClosed)
	default:
	}
	dl.set(t)
	return nil
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
}

// deadline is a settable point in time that wakes its waiters when it moves.
type deadline struct {
	mu    sync.Mutex
	at    time.Time
	moved signal
}

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = t
	d.moved.broadcast()
}

func (d *deadline) time() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at
}

// get returns the deadline and a channel closed when it next moves.
func (d *deadline) get() (time.Time, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at, d.moved.wait()
}
