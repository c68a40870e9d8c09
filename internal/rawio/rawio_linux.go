package rawio

import (
	"io"
	"net"
	"sync"
	"syscall"
	"unsafe"
)

// Socket is raw I/O on one TCP connection. A read and a write may run at once, and several writes may be
// asked for at once: each direction takes turns on its own.
type Socket struct {
	rc     syscall.RawConn
	rd, wr direction
}

// direction is one direction of a socket: its call in progress, under a lock, and the callbacks that make
// the system calls, made once in Of: a closure made per call would cost an allocation per call.
type direction struct {
	mu        sync.Mutex
	p         []byte
	n         int
	errno     syscall.Errno
	untilDone func(fd uintptr) bool // waits on the poller until all of p is done
	once      func(fd uintptr) bool // does what the socket takes now, never waits
}

// Of returns what reads and writes conn: raw I/O on a TCP connection, which it also returns as raw, or
// else conn itself and a nil raw.
func Of(conn net.Conn) (rw io.ReadWriter, raw *Socket) {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return conn, nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return conn, nil
	}
	s := &Socket{rc: rc}
	s.rd.untilDone = s.read
	s.wr.untilDone, s.wr.once = s.write, s.writeNow
	return s, s
}

// run makes one call of the direction with buffer p, through wait (the connection's RawConn.Read or
// Write) and callback, and returns the bytes done, the system call's error and wait's.
func (d *direction) run(p []byte, wait func(func(fd uintptr) bool) error, callback func(fd uintptr) bool) (int, syscall.Errno, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.p, d.n, d.errno = p, 0, 0
	err := wait(callback)
	d.p = nil
	return d.n, d.errno, err
}

// Read reads what has arrived, waiting for something when nothing has; io.EOF when the peer closed.
func (s *Socket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, errno, err := s.rd.run(p, s.rc.Read, s.rd.untilDone)
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read is Read's callback: it reports false, to wait for the poller, while the socket has nothing.
func (s *Socket) read(fd uintptr) bool {
	d := &s.rd
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&d.p[0])), uintptr(len(d.p)))
	d.n, d.errno = int(r), e
	return e != syscall.EAGAIN && e != syscall.EINTR
}

// Write writes all of p, waiting for the socket to take more when it is full.
func (s *Socket) Write(p []byte) (int, error) {
	return s.writeWith(p, s.wr.untilDone)
}

// WriteNow writes what of p the socket takes without waiting, and returns how much that was: less than
// len(p), with a nil error, when the socket is full.
func (s *Socket) WriteNow(p []byte) (int, error) {
	return s.writeWith(p, s.wr.once)
}

func (s *Socket) writeWith(p []byte, callback func(fd uintptr) bool) (int, error) {
	written, errno, err := s.wr.run(p, s.rc.Write, callback)
	if err == nil && errno != 0 {
		err = errno
	}
	return written, err
}

// write is Write's callback: it writes until all of the buffer is out, reporting false, to wait for the
// poller, while the socket takes no more.
func (s *Socket) write(fd uintptr) bool {
	full := s.writeOut(fd)
	return !full
}

// writeNow is WriteNow's callback: it writes what the socket takes and never waits.
func (s *Socket) writeNow(fd uintptr) bool {
	s.writeOut(fd)
	return true
}

// writeOut writes the buffer's rest until it is out, an error stops it, or the socket is full, which it
// reports.
func (s *Socket) writeOut(fd uintptr) (full bool) {
	d := &s.wr
	for d.n < len(d.p) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&d.p[d.n])), uintptr(len(d.p)-d.n))
		if e == syscall.EAGAIN || e == syscall.EINTR {
			return true
		}
		if e != 0 {
			d.errno = e
			return false
		}
		d.n += int(r)
	}
	return false
}
