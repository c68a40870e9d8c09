package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/rawio"
)

// Op identifies what a request asks for; the layer above defines the values.
type Op uint16

// Handler serves requests. Each request runs in its own goroutine, up to Options.MaxConnRequests per
// connection and MaxRequests per Server, and responses are written as they complete. The payload belongs
// to the handler, and the returned slice is copied before the response is written, so the handler may
// reuse it. ctx ends when the connection fails or the Server closes, and Server.Close waits for handlers.
type Handler interface {
	ServeRequest(ctx context.Context, op Op, payload []byte) ([]byte, error)
}

// ResponseReleaser is a Handler that reuses the memory of its responses: the server hands each response
// back to it once the response is copied for writing and no longer read.
type ResponseReleaser interface {
	ReleaseResponse(op Op, resp []byte)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, op Op, payload []byte) ([]byte, error)

// ServeRequest calls f.
func (f HandlerFunc) ServeRequest(ctx context.Context, op Op, payload []byte) ([]byte, error) {
	return f(ctx, op, payload)
}

const (
	// lingerTimeout bounds how long a server keeps reading, and discarding, a connection it has told it
	// reads no more: closing with unread bytes would reset the connection, and the reset could destroy
	// the goaway before the client reads it.
	lingerTimeout = time.Second

	// maxRefusing bounds the refused connections being told so at once; beyond it they are closed bare.
	maxRefusing = 64
)

// ServerStats describe a Server's connections and what they hold, against the limits in Options.
type ServerStats struct {
	Conns         int    // connections being served, at most MaxConns
	Requests      int    // requests being handled, at most MaxRequests
	BufferedBytes int64  // bytes claimed by request frames being read or awaiting a handler, at most MaxBufferedBytes
	WaitingFrames int    // frames whose connection is not read until their claim fits in MaxBufferedBytes
	Accepted      uint64 // connections served since the Server started
	Refused       uint64 // connections refused because MaxConns were being served
	IdleClosed    uint64 // connections closed after IdleTimeout without a request
	TimedOut      uint64 // connections cut because a frame outlasted ReadTimeout or a write WriteTimeout
}

type serverStats struct {
	accepted, refused, idleClosed, timedOut atomic.Uint64
	workers, workersDone                    atomic.Uint64 // worker goroutines started, and ended
}

// Server answers data-plane requests on any number of listeners and connections, within the bounds of its
// Options: connections served, requests in progress, bytes being read, and the time a frame, a write or
// an idle connection may take.
type Server struct {
	handler  Handler
	releaser ResponseReleaser // handler, when it takes its responses back; nil otherwise
	opts     Options
	log      *slog.Logger
	ctx      context.Context // ends at Close; parent of every connection context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // connection, handler and refusal goroutines
	requests *semaphore     // a unit per request in progress over all connections
	budget   *frameBudget   // claimed by request frames from their length prefix until their handler starts
	stats    serverStats
	idle     atomic.Int32 // workers waiting for a request, over all connections

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*serverConn]struct{}
	refusing  map[net.Conn]struct{} // refused connections being told so
}

// NewServer returns a Server that passes requests to h. The Dialer, DialTimeout, Redial and MuxByte
// fields of opts are not used.
func NewServer(h Handler, opts Options) *Server {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	releaser, _ := h.(ResponseReleaser)
	return &Server{
		handler:   h,
		releaser:  releaser,
		opts:      opts,
		log:       opts.Logger,
		ctx:       ctx,
		cancel:    cancel,
		requests:  newSemaphore(int64(opts.MaxRequests)),
		budget:    newFrameBudget(opts.MaxBufferedBytes, opts.MaxFrameSize),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*serverConn]struct{}),
		refusing:  make(map[net.Conn]struct{}),
	}
}

// Stats returns a snapshot of the Server's connections and counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	conns := len(s.conns)
	s.mu.Unlock()
	buffered, waiting := s.budget.state()
	requests, _ := s.requests.state()
	return ServerStats{
		Conns:         conns,
		Requests:      int(requests),
		BufferedBytes: buffered,
		WaitingFrames: waiting,
		Accepted:      s.stats.accepted.Load(),
		Refused:       s.stats.refused.Load(),
		IdleClosed:    s.stats.idleClosed.Load(),
		TimedOut:      s.stats.timedOut.Load(),
	}
}

// Serve accepts connections on ln until ln fails or the Server closes; it returns nil after Close.
// Transient accept errors are retried with a short pause. Close closes ln.
func (s *Server) Serve(ln net.Listener) error {
	if !s.addListener(ln) {
		ln.Close()
		return nil
	}
	defer s.removeListener(ln)
	var pause time.Duration
	for {
		conn, err := ln.Accept()
		if err == nil {
			pause = 0
			s.ServeConn(conn)
			continue
		}
		if s.isClosed() {
			return nil
		}
		if errors.Is(err, net.ErrClosed) {
			return err
		}
		pause = min(max(2*pause, 5*time.Millisecond), time.Second)
		s.log.Warn("transport: accept failed; retrying", "err", err, "pause", pause)
		select {
		case <-time.After(pause):
		case <-s.ctx.Done():
			return nil
		}
	}
}

// ServeConn serves one already-accepted connection, for instance one handed over by a Mux. It does not
// block: the connection is served by goroutines the Server tracks, and Close closes it and waits for them.
// A connection beyond MaxConns is refused at once.
func (s *Server) ServeConn(conn net.Conn) {
	setNoDelay(conn)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		conn.Close()
	case len(s.conns) >= s.opts.MaxConns:
		s.refuse(conn)
	default:
		s.start(conn)
	}
}

// start begins serving conn. Callers hold s.mu.
func (s *Server) start(conn net.Conn) {
	ctx, cancel := context.WithCancel(s.ctx)
	rw, raw := rawio.Of(conn)
	sc := &serverConn{
		srv:    s,
		conn:   conn,
		w:      newFrameWriter(conn, rw, raw, &writeStats{}, s.opts.WriteTimeout),
		freed:  make(chan struct{}, 1),
		work:   make(chan envelope),
		ctx:    ctx,
		cancel: cancel,
	}
	sc.fr = newFrameReader(rw, s.opts.MaxFrameSize).
		withTimeout(conn, s.opts.ReadTimeout).
		withBudget(ctx, s.budget)
	sc.lastDone.Store(time.Now().UnixNano())
	s.conns[sc] = struct{}{}
	s.stats.accepted.Add(1)
	s.wg.Add(1)
	go sc.readLoop()
}

// refuse turns conn away, telling its client that nothing it sent was read, unless too many refusals
// are already under way. Callers hold s.mu.
func (s *Server) refuse(conn net.Conn) {
	s.stats.refused.Add(1)
	if len(s.refusing) >= maxRefusing {
		conn.Close()
		return
	}
	s.log.Debug("transport: refusing connection: too many", "remote", conn.RemoteAddr().String(), "max", s.opts.MaxConns)
	s.refusing[conn] = struct{}{}
	s.wg.Add(1)
	go s.tellRefused(conn)
}

// tellRefused sends conn a goaway and hangs up.
func (s *Server) tellRefused(conn net.Conn) {
	defer s.wg.Done()
	if err := conn.SetWriteDeadline(time.Now().Add(lingerTimeout)); err == nil {
		if _, err := conn.Write(appendFrame(nil, envelope{kind: kindGoAway, op: goAwayBusy})); err == nil {
			hangUp(conn)
		}
	}
	conn.Close()
	s.mu.Lock()
	delete(s.refusing, conn)
	s.mu.Unlock()
}

// hangUp closes the writing side of conn, then reads and discards what the peer still sends until it
// closes too or lingerTimeout passes.
func hangUp(conn net.Conn) {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	if err := conn.SetReadDeadline(time.Now().Add(lingerTimeout)); err == nil {
		_, _ = io.Copy(io.Discard, conn)
	}
}

// Close closes every listener and connection, cancels handler contexts and waits for every goroutine the
// Server started, handlers included.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	listeners := make([]net.Listener, 0, len(s.listeners))
	for ln := range s.listeners {
		listeners = append(listeners, ln)
	}
	conns := make([]*serverConn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	for conn := range s.refusing {
		conn.Close()
	}
	s.mu.Unlock()

	for _, ln := range listeners {
		ln.Close()
	}
	for _, sc := range conns {
		sc.close(ErrClosed)
	}
	s.cancel()
	s.wg.Wait()
	return nil
}

func (s *Server) addListener(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.listeners[ln] = struct{}{}
	return true
}

func (s *Server) removeListener(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.listeners, ln)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// forget removes a closed connection.
func (s *Server) forget(sc *serverConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, sc)
}
