package transport

import (
	"context"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/rawio"
)

const (
	// maxPending bounds the bytes queued behind one connection's writer. Senders wait for room beyond it,
	// so a stalled peer holds back its callers instead of growing memory.
	maxPending = 4 << 20

	// maxSpare is the largest written buffer kept for reuse; bigger ones go back to the garbage collector.
	maxSpare = 1 << 20
)

// writeStats counts what a frameWriter put on the wire.
type writeStats struct {
	frames  atomic.Uint64 // frames handed to the connection
	flushes atomic.Uint64 // write calls on the connection
	bytes   atomic.Uint64 // bytes handed to the connection
	byCall  atomic.Uint64 // write calls made by a caller, without waiting
	carried atomic.Uint64 // of those, the ones that left the rest to run
}

// frameWriter coalesces frames from many goroutines onto one connection. Senders encode their frames into
// a shared pending buffer, and whoever holds the flush duty writes the whole buffer with one call, so
// frames queued during a write leave together in the next.
//
// A client uses send, which writes a lone call's frame from the caller when the socket takes it at once
// and otherwise leaves the writing to run, since a caller must be able to give up on its context even when
// the peer stops reading. A server's handlers use write and hold the duty themselves. Either way a call
// saves a goroutine hand-off.
type frameWriter struct {
	conn    net.Conn
	out     io.Writer     // conn, or raw I/O on it
	sock    *rawio.Socket // raw I/O on conn, for writes that must not wait; nil: none
	carry   []byte        // what a sender could not write at once, for run to write first
	stats   *writeStats
	timeout time.Duration // bounds each write call on conn; zero: no limit
	armed   time.Time     // the write deadline set on conn; kept by whoever holds the flush duty
	wake    chan struct{} // hands the flush duty to run
	stop    chan struct{} // closed by close

	// active counts requests in progress on the connection: awaiting a response on a client, being
	// handled on a server. Its owner keeps it, and the writer reads it as a hint that more frames are coming.
	active atomic.Int64

	mu       sync.Mutex
	pending  []byte        // encoded frames not yet handed to the connection
	frames   uint64        // frames in pending
	spare    []byte        // an empty buffer to swap in for pending
	flushing bool          // the flush duty is taken; frames queued meanwhile are the holder's to write
	err      error         // set by close; later sends fail with it
	room     chan struct{} // closed when pending is taken; created by senders waiting for room
	idle     chan struct{} // closed when the flush duty is released; created by drain
}

// newFrameWriter returns a writer on conn, whose bytes it hands to out (raw I/O on conn, which raw is, or
// conn itself), and whose every write call must complete within timeout (zero: no limit), so that a peer
// that stops reading cannot hold a writer for ever.
func newFrameWriter(conn net.Conn, out io.Writer, raw *rawio.Socket, stats *writeStats, timeout time.Duration) *frameWriter {
	return &frameWriter{
		conn:    conn,
		out:     out,
		sock:    raw,
		stats:   stats,
		timeout: timeout,
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
}

// send queues one frame, copying payload, and writes it at once when it is the only one in progress and
// the socket takes it without waiting; otherwise run writes it. A nil error means the frame is queued, not
// that it was written. It fails with ctx.Err() if ctx ends while waiting for room, or with the close
// error once the writer is closed; in both cases nothing was queued.
func (w *frameWriter) send(ctx context.Context, kind uint8, id uint64, op Op, payload []byte) error {
	lead, err := w.queue(ctx, kind, id, op, payload)
	if lead && (w.sock == nil || w.active.Load() > 1 || !w.writeNow()) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return err
}

// writeNow writes what is pending, as the flush duty's holder, as far as the socket takes it without
// waiting. It reports whether it released the duty; otherwise it left what it could not write in carry,
// for run.
func (w *frameWriter) writeNow() (released bool) {
	batch := w.next(nil)
	if batch == nil {
		return true // closed meanwhile: nothing is left to write
	}
	n, err := w.sock.WriteNow(batch)
	w.stats.byCall.Add(1)
	if err == nil && n == len(batch) {
		batch = w.next(batch)
		n = 0
	}
	if batch == nil {
		return true
	}
	w.stats.carried.Add(1)
	w.carry = batch[n:] // an error here is met again, and reported, by run's write
	return false
}

// write queues one frame like send, then, if no other goroutine holds the flush duty, writes everything
// pending from the calling goroutine, blocking on the connection. A write failure closes the writer and
// is returned.
func (w *frameWriter) write(ctx context.Context, kind uint8, id uint64, op Op, payload []byte) error {
	lead, err := w.queue(ctx, kind, id, op, payload)
	if !lead {
		return err
	}
	return w.flush()
}

// queue appends one frame to pending. lead reports that the caller took the flush duty.
func (w *frameWriter) queue(ctx context.Context, kind uint8, id uint64, op Op, payload []byte) (lead bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && len(w.pending) >= maxPending {
		if w.room == nil {
			w.room = make(chan struct{})
		}
		room := w.room
		w.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			w.mu.Lock()
			return false, ctx.Err()
		}
		w.mu.Lock()
	}
	if w.err != nil {
		return false, w.err
	}
	w.pending = appendFrameHeader(w.pending, kind, id, op, len(payload))
	w.pending = append(w.pending, payload...)
	w.frames++
	lead = !w.flushing
	w.flushing = true
	return lead, nil
}

// run holds the flush duty whenever send hands it over, until the writer is closed or a write fails, and
// returns why it stopped.
func (w *frameWriter) run() error {
	for {
		select {
		case <-w.wake:
		case <-w.stop:
			return w.closeErr()
		}
		if err := w.flush(); err != nil {
			return err
		}
	}
}

// flush writes batches, one write call each, until nothing is pending and the duty is released.
func (w *frameWriter) flush() error {
	batch := w.carry
	if w.carry = nil; batch != nil {
		if err := w.writeBatch(batch); err != nil {
			w.close(err)
			return err
		}
	}
	for {
		// With other requests in progress, yield before taking the batch: goroutines already runnable
		// (callers just handed a response, handlers about to answer) then queue their frames first and
		// share this write.
		if w.active.Load() > 1 {
			runtime.Gosched()
		}
		if batch = w.next(batch); batch == nil {
			return nil
		}
		if err := w.writeBatch(batch); err != nil {
			w.close(err)
			return err
		}
	}
}

// writeBatch hands one batch to the connection, within the write timeout: the deadline set for an
// earlier batch is kept while it grants this one at least three quarters of the timeout.
func (w *frameWriter) writeBatch(batch []byte) error {
	if now := time.Now(); w.timeout > 0 && !grants(w.armed, now, w.timeout) {
		w.armed = now.Add(w.timeout)
		if err := w.conn.SetWriteDeadline(w.armed); err != nil {
			return err
		}
	}
	_, err := w.out.Write(batch)
	return err
}

// drain waits until every frame queued so far has been handed to the connection, and fails if the
// writer closed first.
func (w *frameWriter) drain() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && w.flushing {
		if w.idle == nil {
			w.idle = make(chan struct{})
		}
		idle := w.idle
		w.mu.Unlock()
		<-idle
		w.mu.Lock()
	}
	return w.err
}

// next keeps the written batch for reuse and returns the pending frames as the next batch, installing an
// empty buffer in their place. With nothing pending it releases the flush duty and returns nil.
func (w *frameWriter) next(written []byte) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	if written != nil && cap(written) <= maxSpare {
		w.spare = written[:0]
	}
	if len(w.pending) == 0 || w.err != nil {
		w.flushing = false
		w.signalIdle()
		return nil
	}
	batch := w.pending
	// Count first: a response can overtake the bookkeeping of its own request.
	w.stats.flushes.Add(1)
	w.stats.frames.Add(w.frames)
	w.stats.bytes.Add(uint64(len(batch)))
	w.pending, w.frames, w.spare = w.spare, 0, nil
	w.signalRoom()
	return batch
}

// close stops the writer. Frames still queued are dropped; later sends fail with err.
func (w *frameWriter) close(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	w.err = err
	w.pending = nil
	close(w.stop)
	w.signalRoom()
	w.signalIdle()
}

func (w *frameWriter) closeErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// signalIdle wakes drain. Callers hold w.mu.
func (w *frameWriter) signalIdle() {
	if w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
}

// signalRoom wakes senders waiting for room. Callers hold w.mu.
func (w *frameWriter) signalRoom() {
	if w.room != nil {
		close(w.room)
		w.room = nil
	}
}
