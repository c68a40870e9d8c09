package resp

import (
	"math/rand/v2"
	"testing"
)

// TestBitCountInMatchesBitByBit compares bitCountIn's masks of partial bytes with a count of each bit in
// the range, for random values and ranges in bytes and in bits, negative and outlying positions included
// (their rules are clampRange's, which GETRANGE's comparison with Redis checks).
func TestBitCountInMatchesBitByBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for range 20000 {
		value := make([]byte, rng.IntN(6))
		for i := range value {
			value[i] = byte(rng.IntN(256))
		}
		start, end, inBits := int64(rng.IntN(60)-30), int64(rng.IntN(60)-30), rng.IntN(2) == 0
		if got, want := bitCountIn(value, start, end, inBits), bitByBit(value, start, end, inBits); got != want {
			t.Fatalf("bitCountIn(%x, %d, %d, bits %v) = %d, want %d", value, start, end, inBits, got, want)
		}
	}
}

// bitByBit counts the set bits of value one at a time, over the units clampRange keeps.
func bitByBit(value []byte, start, end int64, inBits bool) int64 {
	unit := int64(8)
	if inBits {
		unit = 1
	}
	first, last, ok := clampRange(start, end, int64(len(value))*8/unit)
	var n int64
	for i := first * unit; ok && i < (last+1)*unit; i++ {
		n += int64(value[i/8] >> (7 - i%8) & 1)
	}
	return n
}
