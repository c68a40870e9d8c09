package zaris

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/zaris-go/zaris/internal/clock"
	"github.com/zaris-go/zaris/transport"
)

// raftStream carries raft's connections over the shared data port. Raft does not close the connections it
// accepted when it shuts down, nor wait for the handlers serving them, so the stream tracks them, closes them
// itself and lets the node wait until every handler has let go of its connection.
//
// Each connection names the server it is for, and a process serves only its own. A restarted process
// listens where its predecessor did but is a new server: answering for the old one, with none of its log
// or votes, it would grant votes and acknowledge entries the old server never had, and a leader could be
// elected without a committed entry.
//
// A stream that stays quiet for idle is closed, so that streams opened and left silent cannot hold the
// control plane's connection slots. Raft keeps its dialed streams in a pool between requests, so a stream
// dialed here that has been quiet for half of idle is dialed again before its next request.
type raftStream struct {
	net.Listener
	dialer transport.Dialer
	greet  *transport.Greeting // sent after the mux byte, when not nil
	self   raft.ServerID
	idle   time.Duration // zero: streams may stay quiet for ever

	mu       sync.Mutex
	accepted map[net.Conn]struct{}
	closed   bool
	handlers sync.WaitGroup // one per accepted connection its handler has not closed
}

func newRaftStream(ln net.Listener, d transport.Dialer, g *transport.Greeting, self raft.ServerID, idle time.Duration) *raftStream {
	return &raftStream{Listener: ln, dialer: d, greet: g, self: self, idle: idle, accepted: map[net.Conn]struct{}{}}
}

// Addr is this server's control-plane address, which raft sends along with its requests.
func (s *raftStream) Addr() net.Addr {
	return serverAddr{s.Listener.Addr(), raftAddress(s.Listener.Addr().String(), s.self)}
}

// serverAddr is a listener's address that also names the server listening.
type serverAddr struct {
	net.Addr
	named raft.ServerAddress
}

func (a serverAddr) String() string { return string(a.named) }

func (s *raftStream) Accept() (net.Conn, error) {
	conn, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		conn.Close()
		return nil, net.ErrClosed
	}
	s.accepted[conn] = struct{}{}
	s.handlers.Add(1)
	return &streamConn{Conn: conn, s: s}, nil
}

// Close stops accepting and closes every accepted connection.
func (s *raftStream) Close() error {
	s.mu.Lock()
	s.closed = true
	for conn := range s.accepted {
		conn.Close()
	}
	clear(s.accepted)
	s.mu.Unlock()
	return s.Listener.Close()
}

// awaitHandlers waits until the handler of every accepted connection has returned, which it does once Close
// has closed its connection. Raft's heartbeat handler writes the term to the stable store, so the store may
// close only after this.
func (s *raftStream) awaitHandlers() { s.handlers.Wait() }

type streamConn struct {
	net.Conn
	s        *raftStream
	once     sync.Once
	named    bool      // the server the connection is for has been read, and is this one
	deadline time.Time // the read deadline last set
}

// Read reads, first of all, the server the connection is for, and fails for any server but this one.
// Each read waits at most the stream's idle time. Only the connection's handler reads.
func (c *streamConn) Read(p []byte) (int, error) {
	if idle := c.s.idle; idle > 0 {
		if want := time.Now().Add(idle); want.Sub(c.deadline) > clock.DeadlineSlack(idle) {
			if err := c.Conn.SetReadDeadline(want); err != nil {
				return 0, err
			}
			c.deadline = want
		}
	}
	if !c.named {
		to, err := readServerName(c.Conn)
		if err != nil {
			return 0, err
		}
		if !c.s.serves(to) {
			return 0, fmt.Errorf("%w: connection for %s reached %s", errOtherServer, to, c.s.self)
		}
		c.named = true
	}
	n, err := c.Conn.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = io.EOF // the stream ends quietly: raft logs any other error as a failed command
	}
	return n, err
}

// errOtherServer says a control-plane connection was for a server this process is not.
var errOtherServer = errors.New("zaris: control-plane connection for another server")

// serves reports whether a connection for server to is this process's to serve: it names this server, or
// none (a plain host:port).
func (s *raftStream) serves(to raft.ServerID) bool { return to == "" || to == s.self }

// Close is called by the connection's handler as it returns.
func (c *streamConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.accepted, c.Conn)
		c.s.mu.Unlock()
		c.s.handlers.Done()
	})
	return c.Conn.Close()
}

// Dial connects to the server that addr names and sends its name, ahead of raft's own bytes.
func (s *raftStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := s.dial(addr, timeout)
	if err != nil || s.idle <= 0 {
		return conn, err
	}
	return &pooledStream{Conn: conn, s: s, addr: addr, timeout: timeout, used: time.Now()}, nil
}

func (s *raftStream) dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	to, hostPort := splitRaftAddress(addr)
	conn, err := transport.DialMux(ctx, s.dialer, hostPort, muxRaft, s.greet)
	if err != nil {
		return nil, err
	}
	if err := writeServerName(ctx, conn, to); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// maxServerName bounds the server name a control-plane connection may send.
const maxServerName = 1024

// writeServerName sends the server a connection is for: its length in two bytes, then the name.
func writeServerName(ctx context.Context, conn net.Conn, to raft.ServerID) error {
	if len(to) > maxServerName {
		return fmt.Errorf("zaris: control-plane server name of %d bytes", len(to))
	}
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetWriteDeadline(deadline); err != nil {
			return err
		}
	}
	msg := binary.BigEndian.AppendUint16(nil, uint16(len(to)))
	if _, err := conn.Write(append(msg, to...)); err != nil {
		return err
	}
	return conn.SetWriteDeadline(time.Time{})
}

// readServerName reads the server a connection is for, as writeServerName sent it.
func readServerName(r io.Reader) (raft.ServerID, error) {
	var size [2]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return "", err
	}
	n := binary.BigEndian.Uint16(size[:])
	if n > maxServerName {
		return "", fmt.Errorf("zaris: control-plane server name of %d bytes", n)
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(r, name); err != nil {
		return "", err
	}
	return raft.ServerID(name), nil
}

// pooledStream is a stream raft dialed, which it keeps in its pool between requests. A request begins
// with a write after the previous reply was read; when the stream has been quiet for half the stream's
// idle time by then, the other end may close it any moment, so the request goes out on a new stream
// instead, with the deadlines raft set. Raft uses a stream from one goroutine at a time.
type pooledStream struct {
	net.Conn
	s       *raftStream
	addr    raft.ServerAddress
	timeout time.Duration
	used    time.Time // the last read or write
	reading bool      // the last call was a read: a write now begins a request
	readBy  time.Time // the deadlines raft set, for a stream dialed again
	writeBy time.Time
}

func (c *pooledStream) Write(p []byte) (int, error) {
	if c.reading && time.Since(c.used) > c.s.idle/2 {
		if err := c.redial(); err != nil {
			return 0, err
		}
	}
	c.reading, c.used = false, time.Now()
	return c.Conn.Write(p)
}

func (c *pooledStream) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.reading, c.used = true, time.Now()
	return n, err
}

// redial replaces the stream with a new one to the same server.
func (c *pooledStream) redial() error {
	fresh, err := c.s.dial(c.addr, c.timeout)
	if err != nil {
		return err
	}
	if err := errors.Join(fresh.SetReadDeadline(c.readBy), fresh.SetWriteDeadline(c.writeBy)); err != nil {
		fresh.Close()
		return err
	}
	c.Conn.Close()
	c.Conn = fresh
	return nil
}

func (c *pooledStream) SetDeadline(t time.Time) error {
	c.readBy, c.writeBy = t, t
	return c.Conn.SetDeadline(t)
}

func (c *pooledStream) SetReadDeadline(t time.Time) error {
	c.readBy = t
	return c.Conn.SetReadDeadline(t)
}

func (c *pooledStream) SetWriteDeadline(t time.Time) error {
	c.writeBy = t
	return c.Conn.SetWriteDeadline(t)
}
