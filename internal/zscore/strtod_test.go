package zscore

import (
	"math"
	"testing"
)

// TestStrtod checks Strtod against what glibc's strtod reads of each input.
func TestStrtod(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     float64
		n        int
		rangeErr bool
	}{
		{"1.5", 1.5, 3, false}, {" \t-2", -2, 4, false}, {"1e", 1, 1, false}, {"1e+", 1, 1, false}, {"1e5x", 1e5, 3, false},
		{".5", 0.5, 2, false}, {"1.", 1, 2, false}, {".", 0, 0, false}, {"", 0, 0, false}, {"  ", 0, 0, false}, {"+", 0, 0, false},
		{"0x10", 16, 4, false}, {"0x1p1", 2, 5, false}, {"0x.8", 0.5, 4, false}, {"0x", 0, 1, false}, {"0xg", 0, 1, false},
		{"0x1p", 1, 3, false}, {"inf", math.Inf(1), 3, false}, {"-Infinity", math.Inf(-1), 9, false}, {"infinit", math.Inf(1), 3, false},
		{"1e400", math.Inf(1), 5, true}, {"1e-400", 0, 6, true}, {"0e-400", 0, 6, false}, {"1e-320", 1e-320, 6, false},
		{"1_0", 1, 1, false},
	} {
		f, n, rangeErr := Strtod(tc.in)
		if f != tc.want || n != tc.n || rangeErr != tc.rangeErr {
			t.Errorf("Strtod(%q) = %v, %d, %v; want %v, %d, %v", tc.in, f, n, rangeErr, tc.want, tc.n, tc.rangeErr)
		}
	}
	for _, in := range []string{"nan", "-NaN", "nan(123)", "nan(", "nan()"} {
		f, n, _ := Strtod(in)
		want := map[string]int{"nan": 3, "-NaN": 4, "nan(123)": 8, "nan(": 3, "nan()": 5}[in]
		if !math.IsNaN(f) || n != want {
			t.Errorf("Strtod(%q) = %v, %d; want NaN, %d", in, f, n, want)
		}
	}
}

// FuzzStrtod checks that Strtod never reads past its input and reads the prefix it consumed alike.
func FuzzStrtod(f *testing.F) {
	for _, seed := range []string{"1.5", "0x1p-3", "-inf", "nan(x)", " 1e400", "1e-320", ".", "0x.", "1e+"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, n, rangeErr := Strtod(s)
		if n < 0 || n > len(s) {
			t.Fatalf("Strtod(%q) consumed %d bytes", s, n)
		}
		if n == 0 {
			return
		}
		v2, n2, rangeErr2 := Strtod(s[:n])
		if n2 != n || rangeErr2 != rangeErr || !(v2 == v || math.IsNaN(v) && math.IsNaN(v2)) {
			t.Fatalf("Strtod(%q) = %v, %d, %v; its prefix reads %v, %d, %v", s, v, n, rangeErr, v2, n2, rangeErr2)
		}
	})
}
