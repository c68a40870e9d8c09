package resp

import (
	"math/bits"

	"github.com/zaris-go/zaris/internal/kv"
)

// Bit commands over string values: SETBIT, GETBIT and BITCOUNT. SETBIT reads the byte it changes and
// writes it back with SETRANGE's operation, in one atomic group, so the value keeps its expiry and a
// replica applies one byte's write.

const (
	bitOffsetMessage = "ERR bit offset is not an integer or out of range"
	bitValueMessage  = "ERR bit is not an integer or out of range"
)

// maxBitOffset is the last bit offset Redis accepts: that of a 512 MiB string's last bit.
const maxBitOffset = 512<<20*8 - 1

// parseBitOffset reads a bit offset; a bad one is answered and reported false.
func (c *respConn) parseBitOffset(arg []byte) (int64, bool) {
	offset, ok := kv.ParseCanonicalInt(arg)
	if !ok || offset < 0 || offset > maxBitOffset {
		c.wr.error(bitOffsetMessage)
		return 0, false
	}
	return offset, true
}

// cmdSetBit serves SETBIT key offset value: it sets or clears one bit, growing the string with zero bytes
// as needed, and answers the bit's previous value.
func (c *respConn) cmdSetBit(args [][]byte) {
	c.muteOps()
	offset, ok := c.parseBitOffset(args[2])
	if !ok {
		return
	}
	if len(args[3]) != 1 || args[3][0] != '0' && args[3][0] != '1' {
		c.wr.error(bitValueMessage)
		return
	}
	at := offset >> 3
	if at >= int64(c.srv.limits.maxBulk) {
		c.refuseString(args[1], refusalMessage(kv.OpSetRange, kv.RefusedTooLarge))
		return
	}
	key := string(args[1])
	reply, ok := c.keyOp(kv.OpGet, &kv.Request{Key: key})
	if !ok {
		return
	}
	var old byte
	if at < int64(len(reply.Value)) {
		old = reply.Value[at]
	}
	mask := byte(0x80) >> (offset & 7)
	next := old &^ mask
	if args[3][0] == '1' {
		next |= mask
	}
	// As Redis, only a string created, grown or changed is written: a bit set to what it holds leaves the
	// key's version, which WATCH compares, and publishes no event.
	if reply.Status == kv.StatusNotFound || at >= int64(len(reply.Value)) || next != old {
		written, ok := c.keyOp(kv.OpSetRange, &kv.Request{Key: key, Delta: at, Value: []byte{next}})
		if !ok {
			return
		}
		c.created(written, args[1])
		c.notify(notifyString, "setbit", args[1])
	}
	c.wr.int(int64(kv.BoolInt(old&mask != 0)))
}

// cmdGetBit serves GETBIT key offset: the bit's value, 0 past the string's end or for a missing key.
func (c *respConn) cmdGetBit(args [][]byte) {
	offset, ok := c.parseBitOffset(args[2])
	if !ok {
		return
	}
	reply, ok := c.keyOp(kv.OpGet, &kv.Request{Key: string(args[1])})
	if !ok {
		return
	}
	at := offset >> 3
	if at >= int64(len(reply.Value)) {
		c.wr.int(0)
		return
	}
	c.wr.int(int64(reply.Value[at] >> (7 - offset&7) & 1))
}

// cmdBitCount serves BITCOUNT key [start end [BYTE|BIT]]: the set bits of the string, or of a range of
// its bytes or bits, negative positions counting from the end. As Redis 7.0 does, it looks the key up
// before it reads the range.
func (c *respConn) cmdBitCount(args [][]byte) {
	reply, ok := c.keyOp(kv.OpGet, &kv.Request{Key: string(args[1])})
	if !ok {
		return
	}
	value := reply.Value
	if len(args) == 2 || reply.Status == kv.StatusNotFound { // Redis answers 0 for no key, whatever follows
		c.wr.int(int64(countBits(value)))
		return
	}
	if len(args) != 4 && len(args) != 5 {
		c.syntaxError()
		return
	}
	start, ok1 := kv.ParseCanonicalInt(args[2])
	end, ok2 := kv.ParseCanonicalInt(args[3])
	if !ok1 || !ok2 {
		c.notInteger()
		return
	}
	if start < 0 && end < 0 && start > end { // an empty range: Redis answers before it reads the unit
		c.wr.int(0)
		return
	}
	inBits := false
	if len(args) == 5 {
		switch {
		case isSubcommand(args[4], "bit"):
			inBits = true
		case !isSubcommand(args[4], "byte"):
			c.syntaxError()
			return
		}
	}
	c.wr.int(bitCountIn(value, start, end, inBits))
}

// bitCountIn counts the set bits of value from start to end included, in bytes or in bits, with Redis's
// rules for negative and outlying positions.
func bitCountIn(value []byte, start, end int64, inBits bool) int64 {
	total := int64(len(value))
	if inBits {
		total *= 8
	}
	start, end, ok := clampRange(start, end, total)
	switch {
	case !ok:
		return 0
	case !inBits:
		return int64(countBits(value[start : end+1]))
	}
	first, last := start>>3, end>>3
	n := int64(countBits(value[first : last+1]))
	n -= int64(bits.OnesCount8(value[first] & ^(byte(0xff) >> (start & 7)))) // bits before start
	n -= int64(bits.OnesCount8(value[last] & (byte(0xff) >> (end&7 + 1))))   // bits after end
	return n
}

func countBits(b []byte) int {
	n := 0
	for _, x := range b {
		n += bits.OnesCount8(x)
	}
	return n
}
