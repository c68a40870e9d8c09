package zaris

import (
	"io"
	"net"
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
	return &rawSocket{rc: rc}
}

func (s *rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		n, errno = int(r), e
		return errno != syscall.EAGAIN && errno != syscall.EINTR
	})
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

func (s *rawSocket) Write(p []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[written])), uintptr(len(p)-written))
			if e == syscall.EAGAIN || e == syscall.EINTR {
				return false
			}
			if e != 0 {
				errno = e
				return true
			}
			written += int(r)
		}
		return true
	})
	if err == nil && errno != 0 {
		err = errno
	}
	return written, err
}
