// Package longdouble parses, adds and formats numbers as Redis does in the C long double of x86-64.
package longdouble

import (
	"math/big"
	"strings"
)

// Redis's INCRBYFLOAT parses, adds and formats in the C long double of x86-64: the 80-bit extended format,
// with a 64-bit significand and exponents down to 2^-16382 (2^-16445 for subnormals) and up to 2^16383.
// The functions here reproduce it with big.Float at 64 bits of precision, so that the stored text is
// Redis's to the digit: a float64 would store 0.1 as 0.10000000000000001.

const (
	ldPrec = 64
	// ldMaxExp is the largest exponent of a finite long double, as big.Float's MantExp gives it (mantissa
	// in [0.5, 1)).
	ldMaxExp = 16384
	// ldZeroExp: a value of at most 2^ldZeroExp, half the smallest subnormal, rounds to zero.
	ldZeroExp = -16446
	// MaxChars bounds the text Redis parses as a long double (MAX_LONG_DOUBLE_CHARS).
	MaxChars = 5 * 1024
	// ldMaxDecExp bounds a decimal exponent worth computing: beyond it the value is far out of range.
	ldMaxDecExp = 6000
)

// Parse parses b as Redis's string2ld does with the C library's strtold: decimal or hexadecimal
// (0x, binary exponent p) floating point with an optional sign, or inf and infinity in any case. It refuses
// leading or trailing spaces, nan, and values that overflow or round to zero though not written as zero.
// The result is rounded to a long double; inf reports true for an infinite value.
func Parse(b []byte) (x *big.Float, inf bool, ok bool) {
	if len(b) == 0 || len(b) >= MaxChars {
		return nil, false, false
	}
	s := string(b)
	neg := s[0] == '-'
	if s[0] == '-' || s[0] == '+' {
		s = s[1:]
	}
	if lower := strings.ToLower(s); lower == "inf" || lower == "infinity" {
		return new(big.Float).SetInf(neg), true, true
	}
	var exact *big.Float
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		exact, ok = parseHexFloat(s[2:])
	} else {
		exact, ok = parseDecFloat(s)
	}
	if !ok {
		return nil, false, false
	}
	if neg {
		exact.Neg(exact)
	}
	return roundLongDouble(exact)
}

// roundLongDouble rounds an exact value, or one with enough precision for it, to a long double. A subnormal
// keeps 64 bits rather than fewer: written with 17 digits after the point it is 0 either way, and added to
// a larger value it falls below the sum's rounding.
func roundLongDouble(exact *big.Float) (*big.Float, bool, bool) {
	if exact.Sign() == 0 {
		return new(big.Float).SetPrec(ldPrec), false, true
	}
	tiny := new(big.Float).SetMantExp(big.NewFloat(1), ldZeroExp)
	if new(big.Float).Abs(exact).Cmp(tiny) <= 0 {
		return nil, false, false
	}
	x := new(big.Float).SetPrec(ldPrec).Set(exact)
	if x.MantExp(nil) > ldMaxExp {
		return nil, false, false
	}
	return x, false, true
}

// parseDecFloat parses digits with an optional point and a decimal exponent, exactly enough that rounding
// the result to a long double is correct: values far out of range become a value just as far out.
func parseDecFloat(s string) (*big.Float, bool) {
	mant, fracDigits, rest, ok := ldMantissa(s, 10)
	if !ok {
		return nil, false
	}
	exp, ok := ldExponent(rest, 'e')
	if !ok {
		return nil, false
	}
	if mant.Sign() == 0 {
		return new(big.Float), true
	}
	exp -= fracDigits
	digits := len(mant.String())
	// Clamp values whose magnitude is surely beyond the range to one that is still beyond it.
	switch {
	case digits+exp > ldMaxDecExp:
		return new(big.Float).SetMantExp(big.NewFloat(1), 2*ldMaxExp), true
	case digits+exp < -ldMaxDecExp:
		return new(big.Float).SetMantExp(big.NewFloat(1), 2*ldZeroExp), true
	}
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(exp, -exp))), nil)
	if exp >= 0 {
		return new(big.Float).SetInt(mant.Mul(mant, pow)), true
	}
	// The quotient, rounded to twice a long double's precision, would round again to a long double
	// wrongly if it landed on a tie the exact quotient is not on: a sticky bit keeps it off.
	num := new(big.Float).SetInt(mant)
	den := new(big.Float).SetInt(pow)
	q := new(big.Float).SetPrec(2*ldPrec).Quo(num, den)
	if q.Acc() != big.Exact {
		q = stickyBit(q)
	}
	return q, true
}

// stickyBit returns positive q, rounded inexactly, with one more bit set below its last one, towards the
// exact value q was rounded from.
func stickyBit(q *big.Float) *big.Float {
	prec := q.Prec()
	lsb := new(big.Float).SetMantExp(big.NewFloat(1), q.MantExp(nil)-int(prec)-1)
	if q.Acc() == big.Above {
		lsb.Neg(lsb)
	}
	return new(big.Float).SetPrec(prec+2).Add(q, lsb)
}

// parseHexFloat parses hex digits with an optional point and a binary exponent p.
func parseHexFloat(s string) (*big.Float, bool) {
	mant, fracDigits, rest, ok := ldMantissa(s, 16)
	if !ok {
		return nil, false
	}
	exp, ok := ldExponent(rest, 'p')
	if !ok {
		return nil, false
	}
	x := new(big.Float).SetInt(mant)
	if x.Sign() == 0 {
		return x, true
	}
	return x.SetMantExp(x, exp-4*fracDigits), true
}

// ldMantissa reads digits of base with at most one point and at least one digit. It returns them as an
// integer, how many followed the point, and the rest of s.
func ldMantissa(s string, base int) (*big.Int, int, string, bool) {
	var digits strings.Builder
	fracDigits, point, i := 0, false, 0
	for ; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '.' && !point:
			point = true
		case ldDigit(ch, base):
			digits.WriteByte(ch)
			if point {
				fracDigits++
			}
		default:
			goto done
		}
	}
done:
	if digits.Len() == 0 {
		return nil, 0, "", false
	}
	mant, ok := new(big.Int).SetString(digits.String(), base)
	return mant, fracDigits, s[i:], ok
}

// ldExponent reads an optional exponent introduced by mark (in either case), which must end s. A huge
// exponent saturates: it puts the value out of range either way.
func ldExponent(s string, mark byte) (int, bool) {
	if s == "" {
		return 0, true
	}
	if s[0]|0x20 != mark || len(s) < 2 {
		return 0, false
	}
	s = s[1:]
	neg := s[0] == '-'
	if s[0] == '-' || s[0] == '+' {
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	exp := 0
	for i := 0; i < len(s); i++ {
		if !ldDigit(s[i], 10) {
			return 0, false
		}
		exp = min(exp*10+int(s[i]-'0'), 1<<30)
	}
	if neg {
		exp = -exp
	}
	return exp, true
}

func ldDigit(ch byte, base int) bool {
	switch {
	case '0' <= ch && ch <= '9':
		return true
	case base == 16:
		ch |= 0x20
		return 'a' <= ch && ch <= 'f'
	}
	return false
}

// Add adds two long doubles, rounding as the x87 unit does. It reports false when the sum is not
// finite.
func Add(a, b *big.Float) (*big.Float, bool) {
	if a.IsInf() || b.IsInf() {
		return nil, false
	}
	sum := new(big.Float).SetPrec(ldPrec).Add(a, b)
	return sum, sum.Sign() == 0 || sum.MantExp(nil) <= ldMaxExp
}

// Format writes x as Redis writes INCRBYFLOAT's result: printf's %.17Lf without the trailing
// zeros of the fraction, nor its point, and 0 for a negative zero.
func Format(x *big.Float) []byte {
	s := x.Text('f', 17)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		s = "0"
	}
	return []byte(s)
}
