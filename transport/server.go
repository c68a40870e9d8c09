package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Op identifies what a request asks for; the layer above defines the values.
type Op uint16

// Handler serves requests. Requests arriving on one connection are served concurrently, each in its own
// goroutine (the callers' concurrency is the only bound), and their responses are written as they complete. The payload belongs to the handler; the
// returned slice is copied before the response is written, so the handler may reuse it afterwards.
// ctx ends when the connection fails or the Server closes; Server.Close waits for handlers to return.
type Handler interface {
	ServeRequest(ctx context.Context, op Op, payload []byte) ([]byte, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, op Op, payload []byte) ([]byte, error)

// ServeRequest calls f.
func (f HandlerFunc) ServeRequest(ctx context.Context, op Op, payload []byte) ([]byte, error) {
	return f(ctx, op, payload)
}

// Server answers data-plane requests on any number of listeners and connections.
type Server struct {
	handler Handler
	opts    Options
	log     *slog.Logger
	ctx     context.Context // ends at Close; parent of every connection context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // connection and handler goroutines

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*serverConn]struct{}
}

// NewServer returns a Server that passes requests to h. Only MaxFrameSize and Logger are used from opts.
func NewServer(h Handler, opts Options) *Server {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		handler:   h,
		opts:      opts,
		log:       opts.Logger,
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*serverConn]struct{}),
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
func (s *Server) ServeConn(conn net.Conn) {
	setNoDelay(conn)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		conn.Close()
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	sc := &serverConn{
		srv:    s,
		conn:   conn,
		w:      newFrameWriter(conn, &writeStats{}),
		ctx:    ctx,
		cancel: cancel,
	}
	s.conns[sc] = struct{}{}
	s.wg.Add(1)
	go sc.readLoop()
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

// serverConn is one connection being served.
type serverConn struct {
	srv    *Server
	conn   net.Conn
	w      *frameWriter
	ctx    context.Context // ends when the connection closes; handlers run under it
	cancel context.CancelFunc
	once   sync.Once
}

// readLoop reads requests and starts a handler goroutine for each, until the connection fails.
func (sc *serverConn) readLoop() {
	defer sc.srv.wg.Done()
	fr := newFrameReader(sc.conn, sc.srv.opts.MaxFrameSize)
	for {
		body, err := fr.next()
		if err != nil {
			sc.close(err)
			return
		}
		req, err := decodeEnvelope(body)
		if err == nil && req.kind != kindRequest {
			err = malformed("response sent to a server", nil)
		}
		if err != nil {
			sc.close(err)
			return
		}
		sc.srv.wg.Add(1)
		sc.w.active.Add(1)
		go sc.serve(req)
	}
}

// serve runs the handler for one request and writes its response, coalesced with its neighbours'.
func (sc *serverConn) serve(req envelope) {
	defer sc.srv.wg.Done()
	kind := kindResponse
	resp, err := sc.srv.handler.ServeRequest(sc.ctx, req.op, req.payload)
	if err == nil && len(resp) > sc.srv.opts.maxPayload() {
		err = frameTooLarge(len(resp)+EnvelopeOverhead, sc.srv.opts.MaxFrameSize)
	}
	if err != nil {
		kind, resp = kindError, []byte(err.Error())
		if len(resp) > sc.srv.opts.maxPayload() {
			resp = resp[:sc.srv.opts.maxPayload()]
		}
	}
	if err := sc.w.write(sc.ctx, kind, req.id, req.op, resp); err != nil {
		sc.close(err) // the connection is gone: there is nobody left to answer
	}
	sc.w.active.Add(-1)
}

// close shuts the connection once: it ends the handler context, stops the writer and forgets the
// connection.
func (sc *serverConn) close(cause error) {
	sc.once.Do(func() {
		sc.w.close(cause) // first, so that handlers cut short below cannot answer
		sc.conn.Close()
		sc.cancel()
		sc.srv.mu.Lock()
		delete(sc.srv.conns, sc)
		sc.srv.mu.Unlock()
		sc.logClose(cause)
	})
}

// logClose reports protocol violations loudly and ordinary hang-ups quietly.
func (sc *serverConn) logClose(cause error) {
	remote := sc.conn.RemoteAddr().String()
	if errors.Is(cause, ErrFrameTooLarge) || errors.Is(cause, ErrMalformedFrame) {
		sc.srv.log.Warn("transport: closing connection", "remote", remote, "err", cause)
		return
	}
	sc.srv.log.Debug("transport: connection closed", "remote", remote, "err", cause)
}
