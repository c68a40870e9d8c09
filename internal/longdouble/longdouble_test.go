package longdouble

import "testing"

// FuzzLongDouble checks that parsing any text never panics, and that the text of a sum parses back to a
// value written the same way: INCRBYFLOAT stores that text and parses it again at the next increment.
func FuzzLongDouble(f *testing.F) {
	for _, seed := range []string{"0.1", "-1e4932", "0x1.8p3", "inf", "1e-4940", ".5e-3", "123456789012345678901234567890"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, inf, ok := Parse([]byte(s))
		if !ok || inf {
			return
		}
		text := Format(x)
		y, inf, ok := Parse(text)
		if !ok || inf {
			t.Fatalf("%q formats as %q, which does not parse", s, text)
		}
		if again := Format(y); string(again) != string(text) {
			t.Fatalf("%q formats as %q, which formats as %q once parsed", s, text, again)
		}
	})
}
