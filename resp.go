package zaris

import (
	"bytes"
	"errors"
	"io"
	"strconv"
)

// errRESPProtocol marks input that is not valid RESP or breaks a limit; the server answers it with an
// error and closes the connection, because the rest of the stream cannot be trusted to be in step.
var errRESPProtocol = errors.New("Protocol error")

// respProtocolError wraps errRESPProtocol with what was wrong.
type respProtocolError struct{ reason string }

func (e *respProtocolError) Error() string { return "Protocol error: " + e.reason }
func (e *respProtocolError) Unwrap() error { return errRESPProtocol }

func protocolError(reason string) error { return &respProtocolError{reason: reason} }

// respLimits bounds what one client may make the server hold.
type respLimits struct {
	maxBulk   int // bytes in one argument
	maxArgs   int // arguments in one command
	maxInline int // bytes in one inline command line
	maxQuery  int // bytes of one whole command, framing included
}

const (
	respDefaultMaxArgs   = 1 << 20
	respDefaultMaxInline = 64 << 10
	respMaxHeaderLine    = 32 // "*" or "$", a 64-bit integer and CRLF always fit
	respInitialBuffer    = 16 << 10
	respShrinkAbove      = 256 << 10 // a drained read buffer larger than this is given back
)

// newRESPLimits derives the limits from the node's value size bound: an argument may be as large as a value,
// and a command may carry a few of them.
func newRESPLimits(maxValueSize int) respLimits {
	return respLimits{
		maxBulk:   maxValueSize,
		maxArgs:   respDefaultMaxArgs,
		maxInline: respDefaultMaxInline,
		maxQuery:  max(64<<20, 2*maxValueSize+(1<<20)),
	}
}

// argSpan locates one argument of the command being parsed, relative to the command's first byte, so it
// stays valid when the buffer is compacted or grown.
type argSpan struct{ start, end int }

// respReader reads commands (RESP multibulk or inline) from a stream. It parses incrementally: a command that
// arrives in pieces is never re-scanned from its start, and the buffer grows only as data actually arrives,
// so a client that announces a huge length and sends nothing costs nothing.
type respReader struct {
	src     io.Reader
	lim     respLimits
	onBlock func() error // runs before a read that may block: the server flushes its replies there

	buf  []byte
	r, w int // buf[r:w] is unread input; the command being parsed starts at r

	// Parse state of the current command.
	pos     int // absolute offset where parsing resumes
	pending int // arguments still expected; -1 before the multibulk header is read
	bulkLen int // length of the argument whose payload is awaited; -1 before its header is read
	spans   []argSpan
	args    [][]byte
}

func newRESPReader(src io.Reader, lim respLimits) *respReader {
	rd := &respReader{src: src, lim: lim, buf: make([]byte, respInitialBuffer)}
	rd.reset()
	return rd
}

func (rd *respReader) reset() {
	rd.pos, rd.pending, rd.bulkLen = rd.r, -1, -1
	rd.spans = rd.spans[:0]
}

// next returns the next command's arguments. They point into the reader's buffer and stay valid only until
// the next call. Errors are io errors from the stream or protocol errors (matching errRESPProtocol).
func (rd *respReader) next() ([][]byte, error) {
	for {
		done, err := rd.parse()
		if err != nil {
			return nil, err
		}
		if done {
			return rd.complete(), nil
		}
		if err := rd.fill(); err != nil {
			return nil, err
		}
	}
}

// buffered reports whether unread input is waiting.
func (rd *respReader) buffered() bool { return rd.w > rd.r }

// complete turns the parsed spans into argument slices and consumes the command.
func (rd *respReader) complete() [][]byte {
	rd.args = rd.args[:0]
	for _, s := range rd.spans {
		rd.args = append(rd.args, rd.buf[rd.r+s.start:rd.r+s.end:rd.r+s.end])
	}
	rd.r = rd.pos
	rd.reset()
	return rd.args
}

// parse advances through buffered input and reports whether a whole command is available.
func (rd *respReader) parse() (bool, error) {
	for rd.pending < 0 {
		if rd.pos >= rd.w {
			return false, nil
		}
		var skipped bool
		var err error
		if rd.buf[rd.pos] == '*' {
			skipped, err = rd.parseHeader()
		} else {
			skipped, err = rd.parseInline()
		}
		if err != nil {
			return false, err
		}
		if !skipped && rd.pending < 0 {
			return false, nil // the header or line is not complete yet
		}
	}
	return rd.parseArgs()
}

// parseHeader reads "*<count>\r\n" and sets pending. An empty or null multibulk holds no command: it is
// consumed and reported as skipped. Without a whole line it changes nothing.
func (rd *respReader) parseHeader() (skipped bool, err error) {
	line, ok, err := rd.headerLine()
	if !ok || err != nil {
		return false, err
	}
	n, ok := parseRESPInt(line[1:])
	if !ok || n > int64(rd.lim.maxArgs) {
		return false, protocolError("invalid multibulk length")
	}
	if n <= 0 {
		rd.r = rd.pos
		rd.reset()
		return true, nil
	}
	rd.pending = int(n)
	return false, nil
}

// parseArgs reads the "$<len>\r\n<payload>\r\n" arguments still pending.
func (rd *respReader) parseArgs() (bool, error) {
	for rd.pending > 0 {
		if rd.bulkLen < 0 {
			if rd.pos >= rd.w {
				return false, nil
			}
			if c := rd.buf[rd.pos]; c != '$' {
				return false, protocolError("expected '$', got '" + printable(c) + "'")
			}
			line, ok, err := rd.headerLine()
			if !ok || err != nil {
				return false, err
			}
			n, ok := parseRESPInt(line[1:])
			if !ok || n < 0 || n > int64(rd.lim.maxBulk) {
				return false, protocolError("invalid bulk length")
			}
			if rd.pos-rd.r+int(n)+2 > rd.lim.maxQuery {
				return false, protocolError("command too large")
			}
			rd.bulkLen = int(n)
		}
		end := rd.pos + rd.bulkLen
		if end+2 > rd.w {
			return false, nil
		}
		if rd.buf[end] != '\r' || rd.buf[end+1] != '\n' {
			return false, protocolError("bulk payload not terminated by CRLF")
		}
		rd.spans = append(rd.spans, argSpan{start: rd.pos - rd.r, end: end - rd.r})
		rd.pos = end + 2
		rd.bulkLen = -1
		rd.pending--
	}
	return true, nil
}

// headerLine returns the "*..." or "$..." line at pos without its CRLF and moves pos past it.
func (rd *respReader) headerLine() (line []byte, ok bool, err error) {
	window := rd.buf[rd.pos:min(rd.w, rd.pos+respMaxHeaderLine)]
	i := bytes.IndexByte(window, '\n')
	if i < 0 {
		if len(window) == respMaxHeaderLine {
			return nil, false, protocolError("length line too long")
		}
		return nil, false, nil
	}
	if i == 0 || window[i-1] != '\r' {
		return nil, false, protocolError("length line not terminated by CRLF")
	}
	line = window[:i-1]
	rd.pos += i + 1
	return line, true, nil
}

// parseInline reads a command written as one line of space-separated words, as telnet users type it. A
// whole line sets pending to 0 with its words as spans; a blank line is consumed and reported as skipped.
func (rd *respReader) parseInline() (skipped bool, err error) {
	window := rd.buf[rd.pos:min(rd.w, rd.pos+rd.lim.maxInline)]
	i := bytes.IndexByte(window, '\n')
	if i < 0 {
		if len(window) == rd.lim.maxInline {
			return false, protocolError("too big inline request")
		}
		return false, nil
	}
	line := window[:i]
	rd.spans = rd.spans[:0]
	for start := 0; start < len(line); {
		for start < len(line) && isInlineSpace(line[start]) {
			start++
		}
		end := start
		for end < len(line) && !isInlineSpace(line[end]) {
			end++
		}
		if end > start {
			if len(rd.spans) == rd.lim.maxArgs || end-start > rd.lim.maxBulk {
				return false, protocolError("too big inline request")
			}
			rd.spans = append(rd.spans, argSpan{start: rd.pos + start - rd.r, end: rd.pos + end - rd.r})
		}
		start = end
	}
	rd.pos += i + 1
	if len(rd.spans) == 0 {
		rd.r = rd.pos
		rd.reset()
		return true, nil
	}
	rd.pending = 0
	return false, nil
}

func isInlineSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// fill reads more input, making room first: it compacts consumed bytes away and grows the buffer
// geometrically, never beyond what the limits allow for the command being parsed.
func (rd *respReader) fill() error {
	if rd.r == rd.w && len(rd.buf) > respShrinkAbove {
		rd.buf = make([]byte, respInitialBuffer)
		rd.w, rd.r = 0, 0
		rd.reset()
	}
	if rd.w == len(rd.buf) && !rd.makeRoom() {
		return protocolError("command too large")
	}
	if rd.onBlock != nil {
		if err := rd.onBlock(); err != nil {
			return err
		}
	}
	n, err := rd.src.Read(rd.buf[rd.w:])
	rd.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// makeRoom frees space at the end of a full buffer, moving the current command to the front or doubling,
// and reports whether it found any.
func (rd *respReader) makeRoom() bool {
	if rd.r > 0 {
		n := copy(rd.buf, rd.buf[rd.r:rd.w])
		rd.pos -= rd.r
		rd.w, rd.r = n, 0
		return true
	}
	size := min(2*len(rd.buf), rd.lim.maxQuery+respMaxHeaderLine)
	if size <= len(rd.buf) {
		return false
	}
	grown := make([]byte, size)
	copy(grown, rd.buf[:rd.w])
	rd.buf = grown
	return true
}

// parseRESPInt parses a decimal integer as RESP writes it: optional '-', then digits, nothing else.
func parseRESPInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	return v, err == nil
}

// printable renders one byte for an error message, which must never carry CR or LF.
func printable(c byte) string {
	if c < ' ' || c > '~' {
		return "\\x" + strconv.FormatUint(uint64(c), 16)
	}
	return string(c)
}

// respFlushAbove is how many reply bytes may wait for a flush; beyond it replies go out before more are
// read, so a pipeline of large replies never piles up in memory.
const respFlushAbove = 64 << 10

// respWriter encodes replies in RESP2 or RESP3 into a buffer that goes out in one write per flush.
type respWriter struct {
	dst   io.Writer
	buf   []byte
	proto int // 2 or 3
	err   error
}

func newRESPWriter(dst io.Writer) *respWriter {
	return &respWriter{dst: dst, buf: make([]byte, 0, respInitialBuffer), proto: 2}
}

// flush sends the buffered replies; the first write error sticks and is returned from then on.
func (wr *respWriter) flush() error {
	if wr.err != nil {
		wr.buf = wr.buf[:0] // the peer is gone: drop replies rather than pile them up
		return wr.err
	}
	if len(wr.buf) == 0 {
		return nil
	}
	_, wr.err = wr.dst.Write(wr.buf)
	wr.buf = wr.buf[:0]
	if cap(wr.buf) > respShrinkAbove {
		wr.buf = make([]byte, 0, respInitialBuffer)
	}
	return wr.err
}

// maybeFlush flushes once enough replies wait.
func (wr *respWriter) maybeFlush() {
	if len(wr.buf) >= respFlushAbove {
		wr.flush()
	}
}

func (wr *respWriter) simple(s string) {
	wr.buf = append(wr.buf, '+')
	wr.buf = append(wr.buf, s...)
	wr.buf = append(wr.buf, '\r', '\n')
}

func (wr *respWriter) ok() { wr.buf = append(wr.buf, "+OK\r\n"...) }

// error writes an error reply; msg starts with the error code (ERR, MOVED, ...) and is made single-line.
func (wr *respWriter) error(msg string) {
	wr.buf = append(wr.buf, '-')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		wr.buf = append(wr.buf, c)
	}
	wr.buf = append(wr.buf, '\r', '\n')
}

func (wr *respWriter) int(n int64) {
	wr.buf = append(wr.buf, ':')
	wr.buf = strconv.AppendInt(wr.buf, n, 10)
	wr.buf = append(wr.buf, '\r', '\n')
}

func (wr *respWriter) header(kind byte, n int) {
	wr.buf = append(wr.buf, kind)
	wr.buf = strconv.AppendInt(wr.buf, int64(n), 10)
	wr.buf = append(wr.buf, '\r', '\n')
}

// bulk writes a bulk string. A large payload is written straight from b after flushing what is buffered,
// so it is not copied.
func (wr *respWriter) bulk(b []byte) {
	wr.header('$', len(b))
	if len(b) >= respFlushAbove {
		if wr.flush() == nil {
			_, wr.err = wr.dst.Write(b)
		}
		wr.buf = append(wr.buf, '\r', '\n')
		return
	}
	wr.buf = append(wr.buf, b...)
	wr.buf = append(wr.buf, '\r', '\n')
	wr.maybeFlush()
}

func (wr *respWriter) bulkString(s string) {
	wr.header('$', len(s))
	wr.buf = append(wr.buf, s...)
	wr.buf = append(wr.buf, '\r', '\n')
	wr.maybeFlush()
}

// null writes the absent value: a null bulk in RESP2, the null type in RESP3.
func (wr *respWriter) null() {
	if wr.proto == 3 {
		wr.buf = append(wr.buf, "_\r\n"...)
		return
	}
	wr.buf = append(wr.buf, "$-1\r\n"...)
}

func (wr *respWriter) array(n int) { wr.header('*', n) }

// mapOf starts a map of n pairs: a RESP3 map, or a flat array of 2n elements in RESP2.
func (wr *respWriter) mapOf(n int) {
	if wr.proto == 3 {
		wr.header('%', n)
		return
	}
	wr.header('*', 2*n)
}
