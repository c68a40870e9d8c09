package resp

import (
	"strconv"
	"strings"

	"github.com/zaris-go/zaris/internal/kv"
)

// lcsMaxCells bounds the table LCS fills, one 4-byte cell per pair of positions of its two strings (64 MiB):
// two strings of 4,000 bytes each fit. Redis bounds it by its largest bulk string.
const lcsMaxCells = 1 << 24

// lcsOptions are LCS's options after its two keys.
type lcsOptions struct {
	length, idx, withMatchLen bool
	minMatchLen               int64
}

// cmdLCS serves LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: the longest common subsequence
// of two strings, its length, or the ranges it matches in each, found as Redis finds them, so that among
// several subsequences of the same length the same one is chosen. A missing key counts as empty.
func (c *respConn) cmdLCS(args [][]byte) {
	a, ok := c.lcsString(args[1])
	if !ok {
		return
	}
	b, ok := c.lcsString(args[2])
	if !ok {
		return
	}
	opts, msg := parseLCSOptions(args[3:])
	if msg != "" {
		c.wr.error(msg)
		return
	}
	if (len(a)+1)*(len(b)+1) > lcsMaxCells {
		c.wr.error("ERR Insufficient memory, transient memory for LCS exceeds the limit of " + strconv.Itoa(lcsMaxCells*4>>20) + " MiB")
		return
	}
	t := newLCSTable(a, b)
	switch {
	case opts.idx:
		c.writeLCSMatches(t.matches(opts.minMatchLen), t.length(), opts.withMatchLen)
	case opts.length:
		c.wr.int(int64(t.length()))
	default:
		c.wr.bulk(t.sequence())
	}
}

// lcsString reads key's string value, empty when the key is missing. Any other type is answered with
// Redis's error and reported false, as is a refusal.
func (c *respConn) lcsString(key []byte) ([]byte, bool) {
	typ, ok := c.keyType(key)
	switch {
	case !ok:
		return nil, false
	case typ == "none":
		return nil, true
	case typ != "string":
		c.wr.error("ERR The specified keys must contain string values")
		return nil, false
	}
	reply, ok := c.keyOp(kv.OpGet, &kv.Request{Key: string(key)})
	return reply.Value, ok
}

// parseLCSOptions reads LCS's options, returning Redis's error for a bad one.
func parseLCSOptions(args [][]byte) (lcsOptions, string) {
	var o lcsOptions
	for i := 0; i < len(args); i++ {
		switch opt := strings.ToUpper(string(args[i])); {
		case opt == "IDX":
			o.idx = true
		case opt == "LEN":
			o.length = true
		case opt == "WITHMATCHLEN":
			o.withMatchLen = true
		case opt == "MINMATCHLEN" && i+1 < len(args):
			i++
			n, ok := kv.ParseCanonicalInt(args[i])
			if !ok {
				return o, notIntegerMessage
			}
			o.minMatchLen = max(n, 0)
		default:
			return o, "ERR syntax error"
		}
	}
	if o.idx && o.length {
		return o, "ERR If you want both the length and indexes, please just use IDX."
	}
	return o, ""
}

// lcsTable holds, for every i and j, the length of the longest common subsequence of a[:i] and b[:j].
type lcsTable struct {
	a, b  []byte
	cells []uint32 // row i, column j at i*(len(b)+1)+j
}

func newLCSTable(a, b []byte) *lcsTable {
	t := &lcsTable{a: a, b: b, cells: make([]uint32, (len(a)+1)*(len(b)+1))}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				t.set(i, j, t.at(i-1, j-1)+1)
			} else {
				t.set(i, j, max(t.at(i-1, j), t.at(i, j-1)))
			}
		}
	}
	return t
}

func (t *lcsTable) at(i, j int) uint32     { return t.cells[i*(len(t.b)+1)+j] }
func (t *lcsTable) set(i, j int, v uint32) { t.cells[i*(len(t.b)+1)+j] = v }
func (t *lcsTable) length() int            { return int(t.at(len(t.a), len(t.b))) }

// lcsMatch is a run of the subsequence: a[aStart:aEnd+1] equals b[bStart:bEnd+1].
type lcsMatch struct{ aStart, aEnd, bStart, bEnd int }

// walk follows the table back from its end as Redis does, calling byte for each byte of the subsequence,
// last first, and match for each maximal run of consecutive bytes, last first.
func (t *lcsTable) walk(byteAt func(pos int, c byte), match func(lcsMatch)) {
	i, j, pos := len(t.a), len(t.b), t.length()
	open := false
	var m lcsMatch
	for i > 0 && j > 0 {
		emit := false
		if t.a[i-1] == t.b[j-1] {
			byteAt(pos-1, t.a[i-1])
			switch {
			case !open:
				m, open = lcsMatch{aStart: i - 1, aEnd: i - 1, bStart: j - 1, bEnd: j - 1}, true
			case m.aStart == i && m.bStart == j:
				m.aStart--
				m.bStart--
			default:
				emit = true
			}
			if m.aStart == 0 || m.bStart == 0 {
				emit = true
			}
			pos, i, j = pos-1, i-1, j-1
		} else {
			if t.at(i-1, j) > t.at(i, j-1) {
				i--
			} else {
				j--
			}
			emit = open
		}
		if emit {
			match(m)
			open = false
		}
	}
}

// sequence returns the longest common subsequence.
func (t *lcsTable) sequence() []byte {
	out := make([]byte, t.length())
	t.walk(func(pos int, c byte) { out[pos] = c }, func(lcsMatch) {})
	return out
}

// matches returns the runs of the subsequence at least minLen long, last first, as Redis lists them.
func (t *lcsTable) matches(minLen int64) []lcsMatch {
	var out []lcsMatch
	t.walk(func(int, byte) {}, func(m lcsMatch) {
		if minLen == 0 || int64(m.aEnd-m.aStart+1) >= minLen {
			out = append(out, m)
		}
	})
	return out
}

// writeLCSMatches writes LCS IDX's reply: a map of the matches and the subsequence's length.
func (c *respConn) writeLCSMatches(matches []lcsMatch, length int, withLen bool) {
	c.wr.mapOf(2)
	c.wr.bulkString("matches")
	c.wr.array(len(matches))
	for _, m := range matches {
		if withLen {
			c.wr.array(3)
		} else {
			c.wr.array(2)
		}
		c.wr.array(2)
		c.wr.int(int64(m.aStart))
		c.wr.int(int64(m.aEnd))
		c.wr.array(2)
		c.wr.int(int64(m.bStart))
		c.wr.int(int64(m.bEnd))
		if withLen {
			c.wr.int(int64(m.aEnd - m.aStart + 1))
		}
	}
	c.wr.bulkString("len")
	c.wr.int(int64(length))
}
