package resp

import (
	"math/rand/v2"
	"testing"
)

// TestBitCountInMatchesBitByBit compares bitCountIn with a count of each bit in the range, for random
// values and ranges in bytes and in bits, negative and outlying positions included.
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

// bitByBit is BITCOUNT's range as Redis's documentation defines it, one bit at a time.
func bitByBit(value []byte, start, end int64, inBits bool) int64 {
	unit := int64(8)
	if inBits {
		unit = 1
	}
	total := int64(len(value)) * 8 / unit
	if start < 0 && end < 0 && start > end {
		return 0
	}
	if start < 0 {
		start = max(start+total, 0)
	}
	if end < 0 {
		end = max(end+total, 0)
	}
	end = min(end, total-1)
	var n int64
	for i := start * unit; i <= end*unit+unit-1 && i < total*unit; i++ {
		n += int64(value[i/8] >> (7 - i%8) & 1)
	}
	return n
}
