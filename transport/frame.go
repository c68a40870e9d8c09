package transport

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

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
	if e.kind < kindRequest || e.kind > kindError {
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

// frameReader reads length-prefixed frames from a connection, refusing any longer than max.
type frameReader struct {
	r      *bufio.Reader
	max    int
	prefix [lengthPrefixSize]byte
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, readBufferSize), max: max}
}

// next returns the body of the next frame in a new buffer the caller owns. It returns io.EOF only at a
// frame boundary.
func (fr *frameReader) next() ([]byte, error) {
	if _, err := io.ReadFull(fr.r, fr.prefix[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(fr.prefix[:])
	if uint64(size) > uint64(fr.max) {
		return nil, frameTooLarge(int(size), fr.max)
	}
	return readBody(fr.r, int(size))
}

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
