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
	// and its pusher's). Each direction keeps its call's buffer and outcome here, under its own lock, for a
	// callback made once in newSocketIO: a closure made per call would cost an allocation per call.
	rmu, wmu        sync.Mutex
	rd, wr          rawCall
	onRead, onWrite func(fd uintptr) bool
}

// rawCall is one direction's system call in progress: its buffer, the bytes done and the error.
type rawCall struct {
	p     []byte
	n     int
	errno syscall.Errno
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
	s.onRead, s.onWrite = s.read, s.write
	return s
}

func (s *rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.rd = rawCall{p: p}
	err := s.rc.Read(s.onRead)
	n, errno := s.rd.n, s.rd.errno
	s.rd.p = nil
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
	c := &s.rd
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.p[0])), uintptr(len(c.p)))
	c.n, c.errno = int(r), e
	return e != syscall.EAGAIN && e != syscall.EINTR
}

func (s *rawSocket) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wr = rawCall{p: p}
	err := s.rc.Write(s.onWrite)
	written, errno := s.wr.n, s.wr.errno
	s.wr.p = nil
	if err == nil && errno != 0 {
		err = errno
	}
	return written, err
}

// write is Write's callback: it writes until all of the buffer is out, reporting false, to wait for the
// poller, while the socket takes no more.
func (s *rawSocket) write(fd uintptr) bool {
	c := &s.wr
	for c.n < len(c.p) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.p[c.n])), uintptr(len(c.p)-c.n))
		if e == syscall.EAGAIN || e == syscall.EINTR {
			return false
		}
		if e != 0 {
			c.errno = e
			return true
		}
		c.n += int(r)
	}
	return true
}
