package zaris

import (
	"io"
	"net"
	"sync"
	"syscall"
	"unsafe"
)

// rawSocket reads and writes a non-blocking socket with raw system calls, waiting on the runtime's poller
// only when the socket is not ready. A plain net.Conn read or write announces every system call to the
// scheduler, which on an otherwise idle process wakes its monitor thread each time: at one request per
// read that wake-up costs more than the request itself. A read or write of a non-blocking socket never
// blocks, so the announcement is not needed.
type rawSocket struct {
	rc syscall.RawConn
	// A read and a write may run at once, and two writes may be asked for at once (a connection's replies
	// and its pusher's): each direction takes turns on its own.
	rd, wr rawDirection
}

// rawDirection is one direction of a raw socket: its call in progress, under a lock, and the callback that
// makes the system call, made once in newSocketIO: a closure made per call would cost an allocation per call.
type rawDirection struct {
	mu       sync.Mutex
	p        []byte
	n        int
	errno    syscall.Errno
	callback func(fd uintptr) bool
}

// run makes one call of the direction with buffer p, through wait (the connection's RawConn.Read or
// Write), and returns the bytes done, the system call's error and wait's.
func (d *rawDirection) run(p []byte, wait func(func(fd uintptr) bool) error) (int, syscall.Errno, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.p, d.n, d.errno = p, 0, 0
	err := wait(d.callback)
	d.p = nil
	return d.n, d.errno, err
}

// newSocketIO returns raw I/O for TCP connections and conn itself for anything else.
func newSocketIO(conn net.Conn) io.ReadWriter {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return conn
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return conn
	}
	s := &rawSocket{rc: rc}
	s.rd.callback, s.wr.callback = s.read, s.write
	return s
}

func (s *rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, errno, err := s.rd.run(p, s.rc.Read)
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
func (s *rawSocket) read(fd uintptr) bool {
	d := &s.rd
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&d.p[0])), uintptr(len(d.p)))
	d.n, d.errno = int(r), e
	return e != syscall.EAGAIN && e != syscall.EINTR
}

func (s *rawSocket) Write(p []byte) (int, error) {
	written, errno, err := s.wr.run(p, s.rc.Write)
	if err == nil && errno != 0 {
		err = errno
	}
	return written, err
}

// write is Write's callback: it writes until all of the buffer is out, reporting false, to wait for the
// poller, while the socket takes no more.
func (s *rawSocket) write(fd uintptr) bool {
	d := &s.wr
	for d.n < len(d.p) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&d.p[d.n])), uintptr(len(d.p)-d.n))
		if e == syscall.EAGAIN || e == syscall.EINTR {
			return false
		}
		if e != 0 {
			d.errno = e
			return true
		}
		d.n += int(r)
	}
	return true
}
