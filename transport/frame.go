package transport

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/tinylib/msgp/msgp"
)

const (
	// DefaultMaxFrameSize bounds a frame body when Options.MaxFrameSize is zero.
	DefaultMaxFrameSize = 64 << 20

	// EnvelopeOverhead is the most bytes an envelope adds to its payload: a payload of at most
	// MaxFrameSize-EnvelopeOverhead bytes always fits in one frame.
	EnvelopeOverhead = 1 + 1 + 9 + 3 + 5 // array header, kind, id, op, bin header

	lengthPrefixSize = 4
	envelopeFields   = 4

	// readBufferSize is the read buffer per connection: many small frames arrive in one read syscall.
	readBufferSize = 32 << 10

	// bodyChunk is the largest body allocated up front; longer bodies grow as their bytes arrive, so a
	// peer cannot make us allocate MaxFrameSize with a bare length prefix.
	bodyChunk = 64 << 10
)

// Envelope kinds.
const (
	kindRequest  uint8 = 1
	kindResponse uint8 = 2
	kindError    uint8 = 3 // payload is the handler's error message
	kindGoAway   uint8 = 4 // server to client: nothing more is read from this connection; op says why
)

// Why a server sends kindGoAway. Every request it read before has been answered ahead of the goaway.
const (
	goAwayIdle Op = 1 // the connection stayed idle for IdleTimeout
	goAwayBusy Op = 2 // the server already serves MaxConns connections; nothing was read
)

// envelope is the decoded body of one frame: msgpack [kind, id, op, payload].
type envelope struct {
	kind    uint8
	id      uint64
	op      Op
	payload []byte
}

// appendFrameHeader appends the length prefix and the envelope bytes that precede a payload of n bytes.
func appendFrameHeader(dst []byte, kind uint8, id uint64, op Op, n int) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = msgp.AppendArrayHeader(dst, envelopeFields)
	dst = msgp.AppendUint8(dst, kind)
	dst = msgp.AppendUint64(dst, id)
	dst = msgp.AppendUint16(dst, uint16(op))
	dst = msgp.AppendBytesHeader(dst, uint32(n))
	body := len(dst) - start - lengthPrefixSize + n
	binary.BigEndian.PutUint32(dst[start:], uint32(body))
	return dst
}

// appendFrame appends one complete frame.
func appendFrame(dst []byte, e envelope) []byte {
	dst = appendFrameHeader(dst, e.kind, e.id, e.op, len(e.payload))
	return append(dst, e.payload...)
}

// decodeEnvelope parses a frame body. The payload aliases body; an empty payload is nil.
func decodeEnvelope(body []byte) (envelope, error) {
	var e envelope
	fields, rest, err := msgp.ReadArrayHeaderBytes(body)
	if err != nil {
		return e, malformed("envelope", err)
	}
	if fields != envelopeFields {
		return e, malformed(fmt.Sprintf("envelope has %d fields, want %d", fields, envelopeFields), nil)
	}
	if e.kind, rest, err = msgp.ReadUint8Bytes(rest); err != nil {
		return e, malformed("kind", err)
	}
	if e.kind < kindRequest || e.kind > kindGoAway {
		return e, malformed(fmt.Sprintf("unknown kind %d", e.kind), nil)
	}
	if e.id, rest, err = msgp.ReadUint64Bytes(rest); err != nil {
		return e, malformed("request id", err)
	}
	op, rest, err := msgp.ReadUint16Bytes(rest)
	if err != nil {
		return e, malformed("op", err)
	}
	e.op = Op(op)
	payload, rest, err := msgp.ReadBytesZC(rest)
	if err != nil {
		return e, malformed("payload", err)
	}
	if len(rest) != 0 {
		return e, malformed(fmt.Sprintf("%d trailing bytes", len(rest)), nil)
	}
	if len(payload) > 0 {
		e.payload = payload[:len(payload):len(payload)]
	}
	return e, nil
}

// frameReader reads length-prefixed frames from a connection, refusing any longer than max. With limits
// set, it also bounds how long a frame may take to arrive and makes every frame claim its length from a
// budget shared with other readers.
type frameReader struct {
	r      *bufio.Reader
	max    int
	prefix [lengthPrefixSize]byte

	conn    readDeadliner   // where read deadlines are set; nil: none
	timeout time.Duration   // how long the rest of a frame may take once it has begun; zero: no limit
	armed   time.Time       // the read deadline set on conn
	budget  *frameBudget    // claimed by each frame until its caller releases it; nil: none
	ctx     context.Context // bounds waits for the budget
}

type readDeadliner interface{ SetReadDeadline(time.Time) error }

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, readBufferSize), max: max}
}

// withTimeout makes every frame arrive whole within timeout (zero: no limit) of the moment it is found
// incomplete, read deadlines being set on conn.
func (fr *frameReader) withTimeout(conn readDeadliner, timeout time.Duration) *frameReader {
	fr.conn, fr.timeout = conn, timeout
	return fr
}

// withBudget makes every frame claim its length from b before its body is read, waiting while the claim
// does not fit or until ctx ends. The caller releases the claim of each frame next returns.
func (fr *frameReader) withBudget(ctx context.Context, b *frameBudget) *frameReader {
	fr.ctx, fr.budget = ctx, b
	return fr
}

// buffered reports whether bytes of the next frame have already arrived.
func (fr *frameReader) buffered() bool { return fr.r.Buffered() > 0 }

// await waits until the next frame's first byte has arrived. A non-zero until bounds the wait, which then
// fails with a timeout that leaves the reader usable. The wait may also time out sooner, on a deadline set
// earlier and kept (see armBy): callers then wait again.
func (fr *frameReader) await(until time.Time) error {
	if fr.r.Buffered() > 0 {
		return nil
	}
	if err := fr.armBy(until); err != nil {
		return err
	}
	_, err := fr.r.Peek(1)
	return err
}

// next returns the body of the next frame in a new buffer the caller owns, and with a budget, the claim
// of len(body) bytes to release. It returns io.EOF only at a frame boundary.
func (fr *frameReader) next() ([]byte, error) {
	if err := fr.armFor(lengthPrefixSize); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(fr.r, fr.prefix[:]); err != nil {
		return nil, fr.timedOut(err)
	}
	size := binary.BigEndian.Uint32(fr.prefix[:])
	if uint64(size) > uint64(fr.max) {
		return nil, frameTooLarge(int(size), fr.max)
	}
	if err := fr.claim(int(size)); err != nil {
		return nil, err
	}
	body, err := fr.readBody(int(size))
	if err != nil {
		fr.release(int(size))
		return nil, err
	}
	return body, nil
}

// readBody reads a body of size bytes, within the frame timeout when they have not all arrived yet.
func (fr *frameReader) readBody(size int) ([]byte, error) {
	if err := fr.armFor(size); err != nil {
		return nil, err
	}
	body, err := readBody(fr.r, size)
	return body, fr.timedOut(err)
}

// claim takes n bytes from the budget, if any.
func (fr *frameReader) claim(n int) error {
	if fr.budget == nil {
		return nil
	}
	return fr.budget.pool(n).acquire(fr.ctx, int64(n))
}

// release returns the claim of a frame of n bytes.
func (fr *frameReader) release(n int) {
	if fr.budget != nil {
		fr.budget.pool(n).release(int64(n))
	}
}

// armFor starts the frame timeout when fewer than n bytes are buffered, so that reading them will wait on
// the connection; reads served from the buffer need no deadline.
func (fr *frameReader) armFor(n int) error {
	if fr.conn == nil || fr.timeout == 0 || fr.r.Buffered() >= n {
		return nil
	}
	now := time.Now()
	if grants(fr.armed, now, fr.timeout) {
		return nil
	}
	return fr.arm(now.Add(fr.timeout))
}

// grants reports whether deadline d, set earlier for a wait of timeout, grants one that starts now
// between three quarters of timeout and all of it: close enough to keep it rather than pay for a timer
// update on every read or write.
func grants(d, now time.Time, timeout time.Duration) bool {
	left := d.Sub(now)
	return !d.IsZero() && left >= timeout-timeout/4 && left <= timeout
}

// armBy makes the read deadline no later than t, where a zero t needs none. A deadline already set that is
// still ahead, and not after t, is kept: updating it on every read would cost a timer update each time.
func (fr *frameReader) armBy(t time.Time) error {
	if !fr.armed.IsZero() && (t.IsZero() || !fr.armed.After(t)) && fr.armed.After(time.Now()) {
		return nil
	}
	return fr.arm(t)
}

// arm sets the connection's read deadline, unless it is already set there.
func (fr *frameReader) arm(t time.Time) error {
	if fr.conn == nil || t.Equal(fr.armed) {
		return nil
	}
	fr.armed = t
	return fr.conn.SetReadDeadline(t)
}

// timedOut names a deadline passing inside a frame for what it is.
func (fr *frameReader) timedOut(err error) error {
	if isTimeout(err) {
		return fmt.Errorf("%w: not whole within %v: %w", ErrFrameTimeout, fr.timeout, err)
	}
	return err
}

// isTimeout reports whether err is a deadline passing.
func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// readBody reads exactly size bytes. Bodies above bodyChunk grow with the bytes that actually arrive.
func readBody(r io.Reader, size int) ([]byte, error) {
	if size <= bodyChunk {
		body := make([]byte, size)
		_, err := io.ReadFull(r, body)
		return body, midFrame(err)
	}
	body := make([]byte, 0, bodyChunk)
	for len(body) < size {
		if len(body) == cap(body) {
			body = slices.Grow(body, min(size, 2*len(body))-len(body))
		}
		end := min(size, cap(body))
		n, err := io.ReadFull(r, body[len(body):end])
		body = body[:len(body)+n]
		if err != nil {
			return nil, midFrame(err)
		}
	}
	return body, nil
}

// midFrame turns a clean EOF inside a frame into io.ErrUnexpectedEOF.
func midFrame(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// frameBudget is MaxBufferedBytes split in two pools. Frames of at most smallFrame bytes, the requests of
// every key operation, claim from a pool of their own, so that large frames announced and never sent,
// whose claims hold until ReadTimeout cuts them, cannot stall them. Within a pool each frame claims its
// whole length first come first served, so no frame ever waits on another's partial claim.
type frameBudget struct{ small, large *semaphore }

// smallFrame is the largest frame the small pool takes.
const smallFrame = bodyChunk

// newFrameBudget splits total so that a frame of maxFrame bytes still fits in the large pool: the small
// pool takes a quarter of total, or less, or none when what is left is under smallFrame.
func newFrameBudget(total int64, maxFrame int) *frameBudget {
	share := min(total/4, total-int64(maxFrame))
	if share < smallFrame {
		return &frameBudget{large: newSemaphore(total)}
	}
	return &frameBudget{small: newSemaphore(share), large: newSemaphore(total - share)}
}

// pool returns the pool a frame of n bytes claims from.
func (b *frameBudget) pool(n int) *semaphore {
	if n <= smallFrame && b.small != nil {
		return b.small
	}
	return b.large
}

// state returns the bytes claimed and the frames waiting, over both pools.
func (b *frameBudget) state() (used int64, waiting int) {
	used, waiting = b.large.state()
	if b.small != nil {
		u, w := b.small.state()
		used, waiting = used+u, waiting+w
	}
	return used, waiting
}
