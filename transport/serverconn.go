package transport

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// serverConn is one connection being served.
type serverConn struct {
	srv      *Server
	conn     net.Conn
	w        *frameWriter
	fr       *frameReader
	lastDone atomic.Int64    // when the connection started or last had no request in progress, in Unix nanoseconds
	full     atomic.Bool     // the reader waits for one of MaxConnRequests requests to end
	freed    chan struct{}   // a request ended while the reader waited; buffered, so no wake-up is lost
	work     chan envelope   // hands a request to an idle worker; unbuffered, so a send finds one or fails
	idle     atomic.Int32    // workers waiting on work
	ctx      context.Context // ends when the connection closes; handlers run under it
	cancel   context.CancelFunc
	once     sync.Once
}

// readLoop reads requests and hands each to a worker, an idle one or a new one, until the connection fails
// or idles out. Reading stops while a request waits for a slot on its connection and on the server, so a
// peer that pipelines faster than the handlers answer is held back by the connection itself.
func (sc *serverConn) readLoop() {
	defer sc.srv.wg.Done()
	for {
		req, claim, err := sc.nextRequest()
		if err != nil {
			sc.end(err)
			return
		}
		err = sc.admit()
		sc.fr.release(claim)
		if err != nil {
			sc.close(err)
			return
		}
		sc.w.active.Add(1)
		select {
		case sc.work <- req:
		default:
			sc.srv.wg.Add(1)
			sc.srv.stats.workers.Add(1)
			go sc.worker(req)
		}
	}
}

// idleWorkers bounds the workers a connection keeps waiting for its next requests, and serverIdleWorkers
// those of all a server's connections. A worker kept saves the next request a goroutine's start and the
// growth of its stack to the depth handlers reach; a server keeps at most a few megabytes of such stacks.
const (
	idleWorkers       = 8
	serverIdleWorkers = 256
)

// park counts the calling worker among the idle ones, unless its connection or its server keeps enough
// already. unpark undoes it.
func (sc *serverConn) park() bool {
	if !raiseBelow(&sc.idle, idleWorkers) {
		return false
	}
	if !raiseBelow(&sc.srv.idle, serverIdleWorkers) {
		sc.idle.Add(-1)
		return false
	}
	return true
}

func (sc *serverConn) unpark() {
	sc.idle.Add(-1)
	sc.srv.idle.Add(-1)
}

// raiseBelow adds one to n unless that would take it past limit, and reports whether it did.
func raiseBelow(n *atomic.Int32, limit int32) bool {
	for {
		v := n.Load()
		if v >= limit {
			return false
		}
		if n.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// worker serves req, then the requests the reader hands it while it is among the connection's idle
// workers, until the connection closes.
func (sc *serverConn) worker(req envelope) {
	defer sc.srv.wg.Done()
	defer sc.srv.stats.workersDone.Add(1)
	for {
		sc.serve(req)
		if !sc.park() {
			return
		}
		select {
		case req = <-sc.work:
			sc.unpark()
		case <-sc.ctx.Done():
			sc.unpark()
			return
		}
	}
}

// nextRequest waits for the next request and reads it, returning the size of its claim on the budget.
func (sc *serverConn) nextRequest() (envelope, int, error) {
	if err := sc.awaitFrame(); err != nil {
		return envelope{}, 0, err
	}
	body, err := sc.fr.next()
	if err != nil {
		return envelope{}, 0, err
	}
	req, err := decodeEnvelope(body)
	if err == nil && req.kind != kindRequest {
		err = malformed("response sent to a server", nil)
	}
	if err != nil {
		sc.fr.release(len(body))
		return envelope{}, 0, err
	}
	return req, len(body), nil
}

// awaitFrame waits for the next frame to begin. It fails with errIdle once no request has been in
// progress or arrived for IdleTimeout.
func (sc *serverConn) awaitFrame() error {
	idle := sc.srv.opts.IdleTimeout
	for {
		var until time.Time
		if idle > 0 && !sc.fr.buffered() {
			until = sc.idleSince().Add(idle)
		}
		err := sc.fr.await(until)
		if !isTimeout(err) {
			return err
		}
		if idle > 0 && time.Since(sc.idleSince()) >= idle {
			return errIdle
		}
	}
}

// idleSince returns when the connection last became idle: now while a request is in progress.
func (sc *serverConn) idleSince() time.Time {
	if sc.w.active.Load() > 0 {
		return time.Now()
	}
	return time.Unix(0, sc.lastDone.Load())
}

// admit waits until fewer than MaxConnRequests requests of the connection are in progress, then for a
// place among the server's MaxRequests.
func (sc *serverConn) admit() error {
	limit := int64(sc.srv.opts.MaxConnRequests)
	for sc.w.active.Load() >= limit { // only this goroutine raises active
		sc.full.Store(true)
		if sc.w.active.Load() < limit {
			break
		}
		select {
		case <-sc.freed:
		case <-sc.ctx.Done():
			return ErrClosed
		}
	}
	sc.full.Store(false)
	return sc.srv.requests.acquire(sc.ctx, 1)
}

// done records the end of a request: its places are freed for the next, and the time if it was the last.
func (sc *serverConn) done() {
	if sc.w.active.Add(-1) == 0 {
		sc.lastDone.Store(time.Now().UnixNano())
	}
	sc.srv.requests.release(1)
	if sc.full.Load() {
		select {
		case sc.freed <- struct{}{}:
		default:
		}
	}
}

// serve runs the handler for one request and writes its response, coalesced with its neighbours'.
func (sc *serverConn) serve(req envelope) {
	kind, resp := sc.handle(req)
	err := sc.w.write(sc.ctx, kind, req.id, req.op, resp)
	if sc.srv.releaser != nil && kind == kindResponse {
		sc.srv.releaser.ReleaseResponse(req.op, resp)
	}
	if err != nil {
		sc.close(err) // the connection is gone: there is nobody left to answer
	}
	sc.done()
}

// handle runs the handler and returns the frame kind and payload of its answer.
func (sc *serverConn) handle(req envelope) (uint8, []byte) {
	limit := sc.srv.opts.maxPayload()
	resp, err := sc.srv.handler.ServeRequest(sc.ctx, req.op, req.payload)
	if err == nil && len(resp) > limit {
		err = frameTooLarge(len(resp)+EnvelopeOverhead, sc.srv.opts.MaxFrameSize)
	}
	if err == nil {
		return kindResponse, resp
	}
	msg := []byte(err.Error())
	return kindError, msg[:min(len(msg), limit)]
}

// end closes the connection once its reading has stopped: after a goaway when it idled out.
func (sc *serverConn) end(cause error) {
	if errors.Is(cause, errIdle) {
		sc.goAway()
	}
	sc.close(cause)
}

// goAway tells the client that nothing more will be read, after every answer already queued, and hangs
// up: the client then knows that whatever it sent since was never read.
func (sc *serverConn) goAway() {
	sc.srv.stats.idleClosed.Add(1)
	err := sc.w.write(sc.ctx, kindGoAway, 0, goAwayIdle, nil)
	if err == nil {
		err = sc.w.drain()
	}
	if err == nil {
		hangUp(sc.conn)
	}
}

// close shuts the connection once: it ends the handler context, stops the writer and forgets the
// connection.
func (sc *serverConn) close(cause error) {
	sc.once.Do(func() {
		sc.w.close(cause) // first, so that handlers cut short below cannot answer
		sc.conn.Close()
		sc.cancel()
		sc.srv.forget(sc)
		if isTimeout(cause) || errors.Is(cause, ErrFrameTimeout) {
			sc.srv.stats.timedOut.Add(1)
		}
		sc.logClose(cause)
	})
}

// logClose reports protocol violations and stuck peers loudly, ordinary hang-ups quietly.
func (sc *serverConn) logClose(cause error) {
	remote := sc.conn.RemoteAddr().String()
	if errors.Is(cause, ErrFrameTooLarge) || errors.Is(cause, ErrMalformedFrame) ||
		errors.Is(cause, ErrFrameTimeout) || isTimeout(cause) {
		sc.srv.log.Warn("transport: closing connection", "remote", remote, "err", cause)
		return
	}
	sc.srv.log.Debug("transport: connection closed", "remote", remote, "err", cause)
}
