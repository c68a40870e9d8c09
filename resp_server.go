package zaris

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// respMaxClients bounds the RESP connections a node keeps open at once.
const respMaxClients = 10_000

// respServer is a node's Redis Cluster endpoint. It serves every key through the node's own ownership
// check: keys this node actively owns are applied locally, all others are answered with a redirect, never
// forwarded.
type respServer struct {
	n        *Node
	ln       net.Listener
	addr     string // advertised host:port: what MOVED replies and CLUSTER SLOTS name for this node
	limits   respLimits
	password string
	commands map[string]*respCommand
	ctx      context.Context // cancelled on close, so work for a connection stops with the node
	cancel   context.CancelFunc
	nextID   atomic.Int64
	members  atomic.Pointer[membership] // set once the node gossips; CLUSTER NODES leaves out departed members

	mu     sync.Mutex
	conns  map[*respConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startRESP opens the RESP endpoint when Config.RESPAddr asks for one. It records the advertised address in
// n.cfg.RESPAddr, so the membership tags carry it to every node's cluster map.
func (n *Node) startRESP() error {
	if n.cfg.RESPAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", n.cfg.RESPAddr)
	if err != nil {
		return fmt.Errorf("zaris: listen for RESP on %s: %w", n.cfg.RESPAddr, err)
	}
	addr := advertisedAddr(ln.Addr().(*net.TCPAddr), n.DataAddr())
	ctx, cancel := context.WithCancel(context.Background())
	s := &respServer{
		n:        n,
		ln:       ln,
		addr:     addr,
		limits:   newRESPLimits(n.cfg.MaxValueSize),
		password: n.cfg.RESPPassword,
		commands: respCommandTable,
		ctx:      ctx,
		cancel:   cancel,
		conns:    map[*respConn]struct{}{},
	}
	n.resp = s
	n.cfg.RESPAddr = addr
	s.wg.Add(1)
	go s.accept()
	n.log.Info("serving RESP", "addr", addr)
	return nil
}

// advertisedAddr is the address clients are told to use: the bound one, or, when bound to every interface,
// the data address's host with the bound port.
func advertisedAddr(bound *net.TCPAddr, dataAddr string) string {
	if !bound.IP.IsUnspecified() {
		return bound.String()
	}
	host, _, _ := net.SplitHostPort(dataAddr)
	return net.JoinHostPort(host, strconv.Itoa(bound.Port))
}

// RESPAddr returns the address of the node's RESP endpoint as advertised to clients, or "" when it has none.
func (n *Node) RESPAddr() string {
	if n.resp == nil {
		return ""
	}
	return n.resp.addr
}

// accept admits connections until the listener closes. Other accept errors (out of file descriptors, say)
// are waited out with a growing pause rather than ending the endpoint.
func (s *respServer) accept() {
	defer s.wg.Done()
	pause := 5 * time.Millisecond
	for {
		conn, err := s.ln.Accept()
		if err == nil {
			pause = 5 * time.Millisecond
			s.admit(conn)
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
		s.n.log.Warn("RESP accept", "err", err, "retry_in", pause)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// admit starts serving conn, unless the server is closing or full.
func (s *respServer) admit(conn net.Conn) {
	c := newRESPConn(s, conn)
	s.mu.Lock()
	closed, full := s.closed, len(s.conns) >= respMaxClients
	if !closed && !full {
		s.conns[c] = struct{}{}
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if full && !closed {
		conn.Write([]byte("-ERR max number of clients reached\r\n"))
	}
	if closed || full {
		conn.Close()
		return
	}
	go c.serve()
}

func (s *respServer) drop(c *respConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.conn.Close()
	s.wg.Done()
}

// clients counts open connections.
func (s *respServer) clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// close stops accepting, closes every connection and waits for every goroutine the server started.
func (s *respServer) close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.conn.Close()
	}
	s.mu.Unlock()
	s.cancel()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// respConn is one client connection. Its state is touched only by its own goroutine.
type respConn struct {
	srv    *respServer
	conn   net.Conn
	rd     *respReader
	wr     *respWriter
	id     int64
	name   string
	authed bool
	quit   bool
}

func newRESPConn(s *respServer, conn net.Conn) *respConn {
	c := &respConn{srv: s, conn: conn, id: s.nextID.Add(1), authed: s.password == ""}
	sock := newSocketIO(conn)
	c.rd = newRESPReader(sock, s.limits)
	c.wr = newRESPWriter(sock)
	c.rd.onBlock = c.wr.flush // replies of a pipeline go out together, once its input is drained
	return c
}

// serve reads and runs commands until the client quits, the connection fails or the input breaks the
// protocol (answered with an error, then closed).
func (c *respConn) serve() {
	defer c.srv.drop(c)
	for !c.quit && c.wr.err == nil {
		args, err := c.rd.next()
		if err != nil {
			if errors.Is(err, errRESPProtocol) {
				c.wr.error("ERR " + err.Error())
			}
			break
		}
		c.srv.dispatch(c, args)
	}
	c.wr.flush()
}
