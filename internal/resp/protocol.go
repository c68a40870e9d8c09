package resp

import (
	"bytes"
	"errors"
	"io"
	"strconv"
)

// errRESPProtocol marks input that is not valid RESP or breaks a limit. The server answers it with an
// error and closes the connection, because the rest of the stream cannot be trusted to be in step.
var errRESPProtocol = errors.New("Protocol error")

// respProtocolError wraps errRESPProtocol with what was wrong.
type respProtocolError struct{ reason string }

func (e *respProtocolError) Error() string { return "Protocol error: " + e.reason }
func (e *respProtocolError) Unwrap() error { return errRESPProtocol }

func protocolError(reason string) error { return &respProtocolError{reason: reason} }

// respRejection is a well-formed command the reader refused to hold (an argument over the value limit, a
// command over the query buffer limit). Its input was read past and dropped, so the server answers it with
// this error and carries on with the next command.
type respRejection struct{ msg string }

func (e *respRejection) Error() string { return e.msg }

// respLimits bounds what one client may make the server hold.
type respLimits struct {
	maxBulk   int  // bytes in one argument
	maxArgs   int  // arguments in one command
	maxInline int  // bytes in one inline command line
	maxQuery  int  // bytes one command may take in memory: its input plus respArgOverhead per argument
	unauth    bool // the client has not authenticated: limits are Redis's pre-auth ones, and breaking one closes
}

const (
	respDefaultMaxArgs   = 1 << 20
	respDefaultMaxInline = 64 << 10
	respMaxHeaderLine    = 32 // "*" or "$", a 64-bit integer and CRLF always fit
	respInitialBuffer    = 16 << 10
	respShrinkAbove      = 256 << 10 // a drained read buffer larger than this is given back
	// respArgOverhead is what the reader keeps per parsed argument besides its bytes (its span and slice
	// header), counted so that a command of a million empty arguments is bounded like a large one.
	respArgOverhead = 40
	// respMaxDiscard is the largest argument the reader reads past to answer a clear error. A larger
	// length is taken for garbage and closes the connection, as Redis does past proto-max-bulk-len.
	respMaxDiscard = 1 << 30

	// Before authentication a command has at most 10 arguments of 16 KiB, as in Redis, so an unknown
	// client's buffer stays under 256 KiB.
	respPreAuthMaxArgs = 10
	respPreAuthMaxBulk = 16 << 10
	PreAuthMaxQuery    = 256 << 10
)

// newRESPLimits returns the limits of an authenticated client: an argument may be as large as a value, and
// a command may take maxQuery bytes.
func newRESPLimits(maxValueSize, maxQuery int) respLimits {
	return respLimits{
		maxBulk:   maxValueSize,
		maxArgs:   respDefaultMaxArgs,
		maxInline: respDefaultMaxInline,
		maxQuery:  maxQuery,
	}
}

// preAuthRESPLimits returns the limits of a client that has not authenticated yet.
func preAuthRESPLimits() respLimits {
	return respLimits{
		maxBulk:   respPreAuthMaxBulk,
		maxArgs:   respPreAuthMaxArgs,
		maxInline: respDefaultMaxInline,
		maxQuery:  PreAuthMaxQuery,
		unauth:    true,
	}
}

// argSpan locates one argument of the command being parsed, relative to the command's first byte, so it
// stays valid when the buffer is compacted or grown.
type argSpan struct{ start, end int }

// respReader reads commands (RESP multibulk or inline) from a stream. It parses incrementally: a command that
// arrives in pieces is never re-scanned from its start, and the buffer grows only as data actually arrives,
// so a client that announces a huge length and sends nothing costs nothing. Every byte it holds beyond its
// first buffer is reserved from a budget shared by all connections.
type respReader struct {
	src     io.Reader
	lim     respLimits
	onBlock func() error // runs before a read that may block: the server flushes its replies there
	budget  *respBudget  // nil: unbounded
	held    int          // bytes of buffers counted in budget

	buf  []byte
	r, w int // buf[r:w] is unread input; the command being parsed starts at r

	// Parse state of the current command.
	pos     int   // absolute offset where parsing resumes
	pending int   // arguments still expected; -1 before the multibulk header is read
	bulkLen int   // length of the argument whose payload is awaited; -1 before its header is read
	discard int   // payload bytes of a refused command still to read past
	reject  error // set once the current command is refused: the rest of its input is dropped
	spans   []argSpan
	args    [][]byte

	completed uint64 // commands returned (refused ones included), so the server can tell progress

	// early is input read from src by someone else while the connection's goroutine waited (a blocked
	// command's watch for a hang-up), served before src.
	early []byte
}

// appendInput queues p, read from src meanwhile, before what src reads next.
func (rd *respReader) appendInput(p []byte) { rd.early = append(rd.early, p...) }

// newRESPReader returns a reader whose first buffer is already counted in budget (nil: no budget).
func newRESPReader(src io.Reader, lim respLimits, budget *respBudget) *respReader {
	rd := &respReader{src: src, lim: lim, buf: make([]byte, respInitialBuffer), budget: budget, held: respInitialBuffer}
	rd.reset()
	return rd
}

func (rd *respReader) reset() {
	rd.pos, rd.pending, rd.bulkLen = rd.r, -1, -1
	rd.spans = rd.spans[:0]
}

// close gives every buffer back to the budget.
func (rd *respReader) close() {
	rd.budget.release(rd.held)
	rd.held = 0
	rd.buf, rd.spans, rd.args = nil, nil, nil
	rd.r, rd.w = 0, 0
	rd.reset()
}

// next returns the next command's arguments. They point into the reader's buffer and stay valid only until
// the next call. Errors are io errors from the stream, protocol errors (matching errRESPProtocol) and
// refused commands (*respRejection), after which the reader may go on.
func (rd *respReader) next() ([][]byte, error) {
	for {
		done, err := rd.parse()
		if err != nil {
			return nil, err
		}
		if done {
			return rd.complete()
		}
		if err := rd.fill(); err != nil {
			return nil, err
		}
	}
}

// buffered reports whether unread input is waiting.
func (rd *respReader) buffered() bool { return rd.w > rd.r }

// complete turns the parsed spans into argument slices and consumes the command, or consumes a refused
// command and returns why it was refused.
func (rd *respReader) complete() ([][]byte, error) {
	rd.completed++
	if err := rd.reject; err != nil {
		rd.r, rd.reject = rd.pos, nil
		rd.reset()
		return nil, err
	}
	rd.args = rd.args[:0]
	for _, s := range rd.spans {
		rd.args = append(rd.args, rd.buf[rd.r+s.start:rd.r+s.end:rd.r+s.end])
	}
	rd.r = rd.pos
	rd.reset()
	return rd.args, nil
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
	switch {
	case ok && n > int64(rd.lim.maxArgs) && rd.lim.unauth:
		return false, protocolError("unauthenticated multibulk length")
	case !ok || n > int64(rd.lim.maxArgs):
		return false, protocolError("invalid multibulk length")
	case n <= 0:
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
			if err := rd.admitBulk(line[1:]); err != nil {
				return false, err
			}
		}
		if !rd.skip() {
			return false, nil
		}
		end := rd.pos + rd.bulkLen
		if end+2 > rd.w {
			return false, nil
		}
		if rd.buf[end] != '\r' || rd.buf[end+1] != '\n' {
			return false, protocolError("bulk payload not terminated by CRLF")
		}
		if rd.reject == nil {
			if err := rd.addSpan(rd.pos-rd.r, end-rd.r); err != nil {
				return false, err
			}
		}
		rd.pos = end + 2
		rd.bulkLen = -1
		rd.pending--
	}
	return true, nil
}

// admitBulk checks the announced length of the next argument and sets bulkLen, or, for an argument the
// command may not hold, refuses the command and arranges for the payload to be read past.
func (rd *respReader) admitBulk(digits []byte) error {
	n, ok := parseRESPInt(digits)
	switch {
	case !ok || n < 0:
		return protocolError("invalid bulk length")
	case n > int64(rd.lim.maxBulk) && rd.lim.unauth:
		return protocolError("unauthenticated bulk length")
	case n > respMaxDiscard:
		return protocolError("invalid bulk length")
	case n > int64(rd.lim.maxBulk) && rd.reject == nil:
		rd.refuse("ERR argument of " + strconv.FormatInt(n, 10) + " bytes exceeds the maximum value size (" +
			strconv.Itoa(rd.lim.maxBulk) + " bytes)")
	case rd.reject == nil && rd.cost(int(n)) > rd.lim.maxQuery:
		if rd.lim.unauth {
			return protocolError("command too large")
		}
		rd.refuse("ERR command exceeds the query buffer limit (" + strconv.Itoa(rd.lim.maxQuery) + " bytes)")
	}
	if rd.reject != nil {
		rd.discard, rd.bulkLen = int(n), 0
		return nil
	}
	rd.bulkLen = int(n)
	return nil
}

// cost is what the current command would take in memory with one more argument of n bytes.
func (rd *respReader) cost(n int) int {
	return rd.pos - rd.r + n + 2 + (len(rd.spans)+1)*respArgOverhead
}

// refuse marks the current command refused: what was read of it is dropped, and so is the rest as it comes.
func (rd *respReader) refuse(msg string) {
	rd.reject = &respRejection{msg: msg}
	rd.spans = rd.spans[:0]
	if rd.bulkLen > 0 {
		rd.discard, rd.bulkLen = rd.bulkLen, 0
	}
	rd.r = rd.pos
}

// skip reads past the payload of a refused command's argument as far as input allows, and reports
// whether all of it is behind.
func (rd *respReader) skip() bool {
	if rd.discard == 0 {
		return true
	}
	k := min(rd.discard, rd.w-rd.pos)
	rd.pos += k
	rd.discard -= k
	rd.r = rd.pos
	return rd.discard == 0
}

// addSpan records an argument, growing the span and argument slices within the budget.
func (rd *respReader) addSpan(start, end int) error {
	if len(rd.spans) == cap(rd.spans) {
		grown := max(16, 2*cap(rd.spans))
		if err := rd.reserve((grown - cap(rd.spans)) * respArgOverhead); err != nil {
			return err
		}
		rd.spans = append(make([]argSpan, 0, grown), rd.spans...)
		rd.args = make([][]byte, 0, grown)
	}
	rd.spans = append(rd.spans, argSpan{start: start, end: end})
	return nil
}

// reserve counts n more bytes in the budget, or fails when every connection's buffers together would
// pass it.
func (rd *respReader) reserve(n int) error {
	if !rd.budget.reserve(n) {
		return protocolError("the server's query buffers are full")
	}
	rd.held += n
	return nil
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

// parseInline reads a command written as one line, as telnet users type it, split into arguments the way
// Redis splits it (splitInline). A whole line sets pending to 0 with its words as spans. A blank line is
// consumed and reported as skipped.
func (rd *respReader) parseInline() (skipped bool, err error) {
	window := rd.buf[rd.pos:min(rd.w, rd.pos+rd.lim.maxInline)]
	i := bytes.IndexByte(window, '\n')
	if i < 0 {
		if len(window) == rd.lim.maxInline {
			return false, protocolError("too big inline request")
		}
		return false, nil
	}
	rd.spans = rd.spans[:0]
	base := rd.pos - rd.r
	err = splitInline(window[:i], func(start, end int) error {
		if len(rd.spans) == rd.lim.maxArgs || end-start > rd.lim.maxBulk ||
			i+(len(rd.spans)+1)*respArgOverhead > rd.lim.maxQuery {
			return protocolError("too big inline request")
		}
		return rd.addSpan(base+start, base+end)
	})
	if err != nil {
		return false, err
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

// splitInline splits an inline command line into arguments as Redis does:
//
//   - words are separated by blanks, and a NUL byte ends the line;
//   - a double-quoted part takes the escapes \n \r \t \b \a, \xHH and a backslash before any other byte;
//   - a single-quoted part takes \' only;
//   - a closing quote must end its word.
//
// The words are decoded in place (decoding never lengthens one) and handed to add as [start, end) offsets
// in line.
func splitInline(line []byte, add func(start, end int) error) error {
	in, out := 0, 0 // read and write positions
	for {
		for in < len(line) && isInlineBlank(line[in]) {
			in++
		}
		if in == len(line) || line[in] == 0 {
			return nil
		}
		start := out
		for in < len(line) && !isWordEnd(line[in]) {
			switch line[in] {
			case '"':
				var err error
				if in, out, err = unquoteDouble(line, in+1, out); err != nil {
					return err
				}
			case '\'':
				var err error
				if in, out, err = unquoteSingle(line, in+1, out); err != nil {
					return err
				}
			default:
				line[out] = line[in]
				in, out = in+1, out+1
			}
		}
		if err := add(start, out); err != nil {
			return err
		}
		if in == len(line) || line[in] == 0 {
			return nil
		}
	}
}

var errUnbalancedQuotes = protocolError("unbalanced quotes in request")

// unquoteDouble decodes a double-quoted part starting after its quote. It returns the positions after the
// closing quote and after the decoded bytes.
func unquoteDouble(line []byte, in, out int) (int, int, error) {
	for in < len(line) && line[in] != 0 {
		c := line[in]
		switch {
		case c == '\\' && in+3 < len(line) && line[in+1] == 'x' && isHex(line[in+2]) && isHex(line[in+3]):
			line[out] = hexValue(line[in+2])<<4 | hexValue(line[in+3])
			in += 4
		case c == '\\' && in+1 < len(line) && line[in+1] != 0:
			line[out] = unescape(line[in+1])
			in += 2
		case c == '"':
			return closeQuote(line, in+1, out)
		default:
			line[out] = c
			in++
		}
		out++
	}
	return in, out, errUnbalancedQuotes
}

// unquoteSingle decodes a single-quoted part starting after its quote, as unquoteDouble does.
func unquoteSingle(line []byte, in, out int) (int, int, error) {
	for in < len(line) && line[in] != 0 {
		c := line[in]
		switch {
		case c == '\\' && in+1 < len(line) && line[in+1] == '\'':
			line[out] = '\''
			in += 2
		case c == '\'':
			return closeQuote(line, in+1, out)
		default:
			line[out] = c
			in++
		}
		out++
	}
	return in, out, errUnbalancedQuotes
}

// closeQuote checks that a closing quote ends its word and returns where the word ends.
func closeQuote(line []byte, in, out int) (int, int, error) {
	if in < len(line) && line[in] != 0 && !isInlineBlank(line[in]) {
		return in, out, errUnbalancedQuotes
	}
	return min(in, len(line)), out, nil
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'f' }

func hexValue(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return (c | 0x20) - 'a' + 10
}

// isInlineBlank is C's isspace: what separates inline words and may follow a closing quote.
func isInlineBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// isWordEnd is what ends an unquoted inline word; vertical tab and form feed do not.
func isWordEnd(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0 }

// fill reads more input, making room first: it compacts consumed bytes away and grows the buffer
// geometrically, never beyond what the limits and the budget allow for the command being parsed.
func (rd *respReader) fill() error {
	if rd.r == rd.w {
		rd.shrink()
	}
	if rd.w == len(rd.buf) {
		if err := rd.makeRoom(); err != nil {
			return err
		}
	}
	if len(rd.early) > 0 {
		n := copy(rd.buf[rd.w:], rd.early)
		rd.early, rd.w = rd.early[n:], rd.w+n
		return nil
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

// shrink gives back, once the input is drained, a buffer or argument table a large command grew. The
// parse state stays: a refused command being read past has nothing buffered either.
func (rd *respReader) shrink() {
	if len(rd.buf) > respShrinkAbove {
		rd.budget.release(len(rd.buf) - respInitialBuffer)
		rd.held -= len(rd.buf) - respInitialBuffer
		rd.buf = make([]byte, respInitialBuffer)
		rd.r, rd.w, rd.pos = 0, 0, 0
	}
	if cap(rd.spans) > 1024 {
		rd.budget.release(cap(rd.spans) * respArgOverhead)
		rd.held -= cap(rd.spans) * respArgOverhead
		rd.spans, rd.args = nil, nil
	}
}

// makeRoom frees space at the end of a full buffer, moving the current command to the front or doubling.
func (rd *respReader) makeRoom() error {
	if rd.r > 0 {
		n := copy(rd.buf, rd.buf[rd.r:rd.w])
		rd.pos -= rd.r
		rd.w, rd.r = n, 0
		return nil
	}
	size := min(2*len(rd.buf), rd.lim.maxQuery+respMaxHeaderLine)
	if size <= len(rd.buf) {
		return protocolError("command too large")
	}
	if !rd.budget.reserve(size - len(rd.buf)) {
		return rd.budgetExhausted()
	}
	rd.held += size - len(rd.buf)
	grown := make([]byte, size)
	copy(grown, rd.buf[:rd.w])
	rd.buf = grown
	return nil
}

// budgetExhausted handles a command that needs more room than the shared budget has left. An
// authenticated client's command is refused and read past. Anything else closes the connection.
func (rd *respReader) budgetExhausted() error {
	if rd.pending <= 0 || rd.lim.unauth || rd.reject != nil {
		return protocolError("the server's query buffers are full")
	}
	rd.refuse("ERR the server's query buffers are full; try again later")
	return rd.makeRoom() // the refused command's bytes are dropped, so compacting makes room
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

// respFlushAbove is how many reply bytes may wait for a flush. Beyond it, replies go out before more is
// read, so a pipeline of large replies never piles up in memory.
const respFlushAbove = 64 << 10

// respWriter encodes replies in RESP2 or RESP3 into a buffer that goes out in one write per flush.
type respWriter struct {
	dst   io.Writer
	buf   []byte
	proto int // 2 or 3
	err   error
	sends int // the flushes that wrote something, so that a reply begun can be known to be unsent
}

func newRESPWriter(dst io.Writer) *respWriter {
	return &respWriter{dst: dst, buf: make([]byte, 0, respInitialBuffer), proto: 2}
}

// flush sends the buffered replies. The first write error sticks and is returned from then on.
func (wr *respWriter) flush() error {
	if wr.err != nil {
		wr.buf = wr.buf[:0] // the peer is gone: drop replies rather than pile them up
		return wr.err
	}
	if len(wr.buf) == 0 {
		return nil
	}
	_, wr.err = wr.dst.Write(wr.buf)
	wr.sends++
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

// error writes an error reply. msg starts with the error code (ERR, MOVED, ...) and is made single-line.
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

// raw writes replies encoded already, straight from b when it is large, as bulk does.
func (wr *respWriter) raw(b []byte) {
	if len(b) >= respFlushAbove && wr.flush() == nil {
		_, wr.err = wr.dst.Write(b)
		return
	}
	wr.buf = append(wr.buf, b...)
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
