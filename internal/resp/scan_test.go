package resp

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseScanCursor checks that any cursor a client sends is either refused or read as C's strtoul reads
// it: decimal digits after an optional sign, a negative one wrapping around 2^64, an empty one 0.
func FuzzParseScanCursor(f *testing.F) {
	for _, seed := range []string{"0", "1", "-1", "+1", "", " 1", "abc", "00042", "-", "18446744073709551616", "-18446744073709551615"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, arg []byte) {
		n, ok := parseScanCursor(arg)
		digits, negative := string(arg), false
		if digits != "" && (digits[0] == '+' || digits[0] == '-') {
			digits, negative = digits[1:], digits[0] == '-'
		}
		want, err := strconv.ParseUint(digits, 10, 64)
		valid := err == nil && !strings.ContainsAny(digits, "+-_") || len(arg) == 0
		if negative {
			want = -want
		}
		if ok != valid || ok && n != want {
			t.Fatalf("%q read as %d, %v; want %d, %v", arg, n, ok, want, valid)
		}
	})
}
