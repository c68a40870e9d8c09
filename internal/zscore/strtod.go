// Package zscore reads and writes sorted-set scores exactly as Redis does: C's strtod with Redis's checks
// on top, and %.17g.
package zscore

import (
	"math"
	"strconv"
	"strings"
)

// Redis parses scores with C's strtod and then applies checks of its own, which differ between commands
// (a score to store, a range bound). Strtod reproduces strtod so that each caller can apply the same
// checks as the Redis command it serves.

// Strtod parses the longest prefix of s that C's strtod accepts: leading white space, a sign, then a
// decimal or hexadecimal number, inf, infinity or nan. It returns the value, the bytes consumed (0 when
// nothing converts) and whether the value is out of range (an overflow to infinity, or an underflow to
// zero).
func Strtod(s string) (f float64, n int, rangeErr bool) {
	i := 0
	for i < len(s) && IsSpace(s[i]) {
		i++
	}
	start := i
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	body := s[i:]
	lower := strings.ToLower(body[:min(len(body), 8)])
	switch {
	case strings.HasPrefix(lower, "infinity"):
		return signedInf(s[start]), i + 8, false
	case strings.HasPrefix(lower, "inf"):
		return signedInf(s[start]), i + 3, false
	case strings.HasPrefix(lower, "nan"):
		end := i + 3
		if close := strings.IndexByte(s[end:], ')'); end < len(s) && s[end] == '(' && close > 0 && isNaNChars(s[end+1:end+close]) {
			end += close + 1
		}
		return math.NaN(), end, false
	}
	hex := len(body) > 2 && body[0] == '0' && body[1]|0x20 == 'x' && (isHexDigit(body[2]) || body[2] == '.' && len(body) > 3 && isHexDigit(body[3]))
	var mantEnd, digits int
	var nonZero bool
	j := i
	if hex {
		j += 2
	}
	for seenDot := false; j < len(s); j++ {
		switch c := s[j]; {
		case c == '.' && !seenDot:
			seenDot = true
		case hex && isHexDigit(c) || !hex && '0' <= c && c <= '9':
			digits++
			nonZero = nonZero || c != '0'
		default:
			goto mantissaDone
		}
	}
mantissaDone:
	if digits == 0 {
		return 0, 0, false
	}
	mantEnd = j
	end := mantEnd
	mark := byte('e')
	if hex {
		mark = 'p'
	}
	if end < len(s) && s[end]|0x20 == mark {
		k := end + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && '0' <= s[k] && s[k] <= '9' {
			for k < len(s) && '0' <= s[k] && s[k] <= '9' {
				k++
			}
			end = k
		}
	}
	token := s[start:end]
	if hex && end == mantEnd {
		token += "p0"
	}
	f, err := strconv.ParseFloat(token, 64)
	if err != nil && !isRangeError(err) {
		return 0, 0, false
	}
	return f, end, isRangeError(err) || nonZero && f == 0
}

func isRangeError(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func signedInf(sign byte) float64 {
	if sign == '-' {
		return math.Inf(-1)
	}
	return math.Inf(1)
}

// IsSpace is C's isspace in the C locale.
func IsSpace(c byte) bool { return c == ' ' || '\t' <= c && c <= '\r' }

func isHexDigit(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'f' }

func isNaNChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c == '_' || '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'z') {
			return false
		}
	}
	return true
}

// Parse parses a score as Redis does, to store or as a weight: all of it a float for strtod, no leading space, not out
// of range, never NaN; inf and -inf are scores.
func Parse(b []byte) (float64, bool) {
	f, n, rangeErr := Strtod(string(b))
	if len(b) == 0 || IsSpace(b[0]) || n != len(b) || rangeErr && (math.IsInf(f, 0) || f == 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// Format writes a score as Redis 7.0 does (%.17g).
func Format(f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return []byte("inf")
	case math.IsInf(f, -1):
		return []byte("-inf")
	case f == 0:
		return []byte("0")
	}
	return strconv.AppendFloat(nil, f, 'g', 17, 64)
}
