package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/rawio"
)

// ClientStats are cumulative counters over every connection a Client has had.
type ClientStats struct {
	Calls         uint64 // requests handed to a connection
	FramesWritten uint64 // frames written to the network
	Flushes       uint64 // write calls (syscalls) on the network; FramesWritten/Flushes is the coalescing factor
	BytesWritten  uint64 // bytes written to the network
	Dials         uint64 // dial attempts
	DialFailures  uint64 // dial attempts that failed
	ConnLosses    uint64 // established connections that failed (not counting Close or IdleClosed)
	IdleClosed    uint64 // connections the peer closed after they stayed idle
}

type clientStats struct {
	writeStats
	calls        atomic.Uint64
	dials        atomic.Uint64
	dialFailures atomic.Uint64
	connLosses   atomic.Uint64
	idleClosed   atomic.Uint64
}

// Client is one multiplexed connection to one peer address. It dials lazily on the first Call and redials
// after a loss, backing off while dials fail. Any number of goroutines may Call at once; their requests are
// pipelined on the one connection and matched to responses by request id.
type Client struct {
	addr   string
	opts   Options
	log    *slog.Logger
	stats  clientStats
	ctx    context.Context // ends at Close; bounds dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // dial and connection goroutines

	mu       sync.Mutex
	closed   bool
	conn     *clientConn   // the live connection, nil if none
	dialing  chan struct{} // closed when the dial in progress ends
	failures int           // consecutive failed dials or unproven connections
	retryAt  time.Time     // no dial before this
	lastErr  error         // why the last dial or connection failed
}

// NewClient returns a Client for addr. It does not dial until the first Call.
func NewClient(addr string, opts Options) *Client {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Client{
		addr:   addr,
		opts:   opts,
		log:    opts.Logger.With("peer", addr),
		ctx:    ctx,
		cancel: cancel,
	}
}

// Addr returns the peer address.
func (c *Client) Addr() string { return c.addr }

// Stats returns a snapshot of the counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{
		Calls:         c.stats.calls.Load(),
		FramesWritten: c.stats.frames.Load(),
		Flushes:       c.stats.flushes.Load(),
		BytesWritten:  c.stats.bytes.Load(),
		Dials:         c.stats.dials.Load(),
		DialFailures:  c.stats.dialFailures.Load(),
		ConnLosses:    c.stats.connLosses.Load(),
		IdleClosed:    c.stats.idleClosed.Load(),
	}
}

// Call sends a request and waits for its response. The payload is copied before Call returns; the
// returned payload belongs to the caller. See the package documentation for what each error says about
// whether the request was applied.
func (c *Client) Call(ctx context.Context, op Op, payload []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(payload) > c.opts.maxPayload() {
		return nil, fmt.Errorf("%w: request payload of %d bytes exceeds %d (MaxFrameSize %d less envelope)",
			ErrFrameTooLarge, len(payload), c.opts.maxPayload(), c.opts.MaxFrameSize)
	}
	// A request the connection never sent, because it failed or its server read no more, is retried once.
	for attempt := 0; ; attempt++ {
		cc, err := c.connect(ctx)
		if err != nil {
			return nil, err
		}
		resp, queued, err := cc.call(ctx, op, payload)
		switch {
		case queued:
			return resp, err
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, ErrClosed):
			return nil, ErrClosed
		case attempt > 0:
			return nil, &DialError{Addr: c.addr, Err: err}
		}
	}
}

// Close fails in-flight calls (a ConnError wrapping ErrClosed), closes the connection and waits for every
// goroutine the Client started. Later calls fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cc := c.conn
	c.conn = nil
	c.mu.Unlock()
	c.cancel()
	if cc != nil {
		cc.fail(ErrClosed)
	}
	c.wg.Wait()
	return nil
}

// connect returns the live connection, waiting for a dial if one is needed. While backing off after a
// failure it fails fast with a DialError instead of dialing.
func (c *Client) connect(ctx context.Context) (*clientConn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if cc := c.conn; cc != nil {
		c.mu.Unlock()
		return cc, nil
	}
	if c.dialing == nil {
		if time.Now().Before(c.retryAt) {
			err := &DialError{Addr: c.addr, Err: c.lastErr}
			c.mu.Unlock()
			return nil, err
		}
		c.dialing = make(chan struct{})
		c.wg.Add(1)
		go c.dial(c.dialing)
	}
	dialing := c.dialing
	c.mu.Unlock()

	select {
	case <-dialing:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return nil, ErrClosed
	case c.conn != nil:
		return c.conn, nil
	default:
		return nil, &DialError{Addr: c.addr, Err: c.lastErr}
	}
}

// dial opens a connection and installs it. It runs in its own goroutine, so callers can give up on their
// own context while the dial goes on for the others.
func (c *Client) dial(done chan struct{}) {
	defer c.wg.Done()
	c.stats.dials.Add(1)
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.DialTimeout)
	conn, err := c.opts.dial(ctx, c.addr)
	cancel()

	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(done)
	c.dialing = nil
	switch {
	case err != nil:
		c.stats.dialFailures.Add(1)
		c.backOff(err)
		c.log.Debug("transport: dial failed", "err", err)
	case c.closed:
		conn.Close()
	default:
		c.conn = c.startConn(conn)
	}
}

// backOff records a failure and schedules the earliest next dial. Callers hold c.mu.
func (c *Client) backOff(err error) {
	c.failures++
	wait := c.opts.RedialMin << min(c.failures-1, 30)
	if wait <= 0 || wait > c.opts.RedialMax {
		wait = c.opts.RedialMax
	}
	wait = wait/2 + rand.N(wait/2+1) // jitter, so that peers do not redial in lockstep
	c.retryAt = time.Now().Add(wait)
	c.lastErr = err
}

// startConn starts the goroutines of a new connection. Callers hold c.mu.
func (c *Client) startConn(conn net.Conn) *clientConn {
	rw, raw := rawio.Of(conn)
	cc := &clientConn{
		client: c,
		conn:   conn,
		in:     rw,
		w:      newFrameWriter(conn, rw, raw, &c.stats.writeStats, c.opts.WriteTimeout),
		calls:  make(map[uint64]*call),
	}
	c.wg.Add(2)
	go cc.readLoop()
	go cc.writeLoop()
	return cc
}

// connLost forgets a failed connection. The next Call redials at once if the connection ever answered or
// its server closed it for idleness. Otherwise the loss counts as a failed dial, so that a peer which
// accepts and then drops connections is not hammered.
func (c *Client) connLost(cc *clientConn, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == cc {
		c.conn = nil
	}
	switch {
	case errors.Is(cause, ErrClosed):
		return
	case errors.Is(cause, errIdleClosed):
		c.stats.idleClosed.Add(1)
		c.failures, c.retryAt, c.lastErr = 0, time.Time{}, cause
		c.log.Debug("transport: peer closed the idle connection")
		return
	}
	c.stats.connLosses.Add(1)
	if cc.answered.Load() {
		c.failures, c.retryAt, c.lastErr = 0, time.Time{}, cause
	} else {
		c.backOff(cause)
	}
	if errors.Is(cause, ErrFrameTooLarge) || errors.Is(cause, ErrMalformedFrame) {
		c.log.Warn("transport: connection closed on a bad frame", "err", cause)
		return
	}
	c.log.Debug("transport: connection lost", "err", cause)
}

// call is one request waiting for its response.
type call struct {
	done chan result // buffered; receives exactly one result from whoever removes the call from the map
}

type result struct {
	payload []byte
	err     error
	unsent  bool // the peer never read the request
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan result, 1)} }}

// clientConn is one established connection and the calls in flight on it.
type clientConn struct {
	client   *Client
	conn     net.Conn
	in       io.Reader // conn, or raw I/O on it (internal/rawio)
	w        *frameWriter
	answered atomic.Bool // a frame has arrived on this connection

	mu     sync.Mutex
	calls  map[uint64]*call // nil once the connection has failed
	nextID uint64
	err    error // why the connection failed
}

// call sends one request and waits for its result. queued reports whether the request was handed to the
// connection; when it is false the request was certainly not sent.
func (cc *clientConn) call(ctx context.Context, op Op, payload []byte) (resp []byte, queued bool, err error) {
	cl, id, err := cc.register()
	if err != nil {
		return nil, false, err
	}
	if err := cc.w.send(ctx, kindRequest, id, op, payload); err != nil {
		cc.abandon(id, cl)
		return nil, false, err
	}
	cc.client.stats.calls.Add(1)
	select {
	case r := <-cl.done:
		callPool.Put(cl)
		return r.payload, !r.unsent, r.err
	case <-ctx.Done():
		cc.abandon(id, cl)
		return nil, true, ctx.Err()
	}
}

// register assigns a request id and records the call under it.
func (cc *clientConn) register() (*call, uint64, error) {
	cl := callPool.Get().(*call)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.calls == nil {
		callPool.Put(cl)
		return nil, 0, cc.err
	}
	cc.nextID++
	cc.calls[cc.nextID] = cl
	cc.w.active.Add(1)
	return cl, cc.nextID, nil
}

// abandon forgets a call whose caller is leaving, so that it can be reused. If the reader or a failure
// already took the call, abandon waits for the result they owe. A late response for id is dropped.
func (cc *clientConn) abandon(id uint64, cl *call) {
	cc.mu.Lock()
	_, mine := cc.calls[id]
	delete(cc.calls, id)
	cc.mu.Unlock()
	if mine {
		cc.w.active.Add(-1)
	} else {
		<-cl.done
	}
	callPool.Put(cl)
}

// readLoop delivers responses until the connection fails or its server says it reads no more.
func (cc *clientConn) readLoop() {
	defer cc.client.wg.Done()
	fr := newFrameReader(cc.in, cc.client.opts.MaxFrameSize).withTimeout(cc.conn, cc.client.opts.ReadTimeout)
	for {
		env, err := nextResponse(fr)
		if err != nil {
			cc.fail(err)
			return
		}
		if env.kind == kindGoAway {
			cc.fail(goAwayCause(env.op))
			return
		}
		cc.answered.Store(true)
		cc.deliver(env)
	}
}

// nextResponse waits, without a deadline, for the next frame a server sends and decodes it.
func nextResponse(fr *frameReader) (envelope, error) {
	err := fr.await(time.Time{})
	for isTimeout(err) { // a frame deadline kept from an earlier frame passed: wait on without one
		err = fr.await(time.Time{})
	}
	if err != nil {
		return envelope{}, err
	}
	body, err := fr.next()
	if err != nil {
		return envelope{}, err
	}
	env, err := decodeEnvelope(body)
	if err == nil && env.kind == kindRequest {
		err = malformed("request sent to a client", nil)
	}
	return env, err
}

// goAwayCause is the error a goaway fails its connection with.
func goAwayCause(reason Op) error {
	switch reason {
	case goAwayIdle:
		return errIdleClosed
	case goAwayBusy:
		return ErrTooManyConns
	}
	return errGoAway
}

// unsentAfter reports whether a connection that failed with cause certainly did not deliver the calls
// still waiting on it: its server said it read nothing more, having answered all it had read.
func unsentAfter(cause error) bool {
	return errors.Is(cause, errIdleClosed) || errors.Is(cause, ErrTooManyConns) || errors.Is(cause, errGoAway)
}

// deliver hands a response to its call, or drops it if the caller has gone.
func (cc *clientConn) deliver(env envelope) {
	cc.mu.Lock()
	cl := cc.calls[env.id]
	delete(cc.calls, env.id)
	cc.mu.Unlock()
	if cl != nil {
		cc.w.active.Add(-1)
	}
	switch {
	case cl == nil:
	case env.kind == kindError:
		cl.done <- result{err: &RemoteError{Message: string(env.payload)}}
	default:
		cl.done <- result{payload: env.payload}
	}
}

func (cc *clientConn) writeLoop() {
	defer cc.client.wg.Done()
	if err := cc.w.run(); err != nil {
		cc.fail(err)
	}
}

// fail closes the connection once and fails every call in flight on it: with a ConnError, or, when its
// server said it read nothing more, as unsent, so that Call retries them on a new connection.
func (cc *clientConn) fail(cause error) {
	cc.mu.Lock()
	calls := cc.calls
	if calls == nil {
		cc.mu.Unlock()
		return
	}
	cc.calls, cc.err = nil, cause
	cc.mu.Unlock()

	cc.w.close(cause)
	cc.conn.Close()
	cc.client.connLost(cc, cause) // before the calls learn: a retry must not find this connection
	failed := result{err: &ConnError{Addr: cc.client.addr, Err: cause}}
	if unsentAfter(cause) {
		failed = result{err: cause, unsent: true}
	}
	for _, cl := range calls {
		cl.done <- failed
	}
}
