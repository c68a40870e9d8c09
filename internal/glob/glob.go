// Package glob matches bytes against Redis's glob-style key patterns, as KEYS, SCAN MATCH, ACL key
// patterns and CONFIG GET use them.
package glob

// Match reports whether s matches pattern as Redis matches key patterns (ACL ~pattern, CONFIG GET):
// * any run of bytes, ? one byte, [abc] [^abc] [a-z] one byte of a class, and \ making the next byte
// literal. With nocase, ASCII letters match in either case.
func Match(pattern, s []byte, nocase bool) bool {
	p, i := 0, 0
	starP, starI := -1, 0 // after the last '*': where the pattern resumes, and the next byte of s to try it on
	for i < len(s) {
		if p < len(pattern) && pattern[p] == '*' {
			starP, starI = p+1, i
			p++
			continue
		}
		if next, ok := matchOne(pattern, p, s[i], nocase); ok {
			p, i = next, i+1
			continue
		}
		if starP < 0 {
			return false
		}
		starI++
		p, i = starP, starI
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchOne matches the pattern element at p against c and returns where the next element starts.
func matchOne(pattern []byte, p int, c byte, nocase bool) (int, bool) {
	if p >= len(pattern) {
		return p, false
	}
	switch pattern[p] {
	case '?':
		return p + 1, true
	case '[':
		return matchClass(pattern, p+1, c, nocase)
	case '\\':
		if p+1 < len(pattern) {
			p++
		}
	}
	return p + 1, foldEqual(pattern[p], c, nocase)
}

// matchClass matches c against the class whose body starts at p, returning the position after its ']'
// (an unclosed class runs to the end of the pattern).
func matchClass(pattern []byte, p int, c byte, nocase bool) (int, bool) {
	negate := p < len(pattern) && pattern[p] == '^'
	if negate {
		p++
	}
	match := false
	for p < len(pattern) && pattern[p] != ']' {
		switch {
		case pattern[p] == '\\' && p+1 < len(pattern):
			match = match || foldEqual(pattern[p+1], c, nocase)
			p += 2
		case p+2 < len(pattern) && pattern[p+1] == '-': // as in Redis, "[a-]" is the range from ] to a
			lo, hi := pattern[p], pattern[p+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			match = match || inRange(lo, hi, c, nocase)
			p += 3
		default:
			match = match || foldEqual(pattern[p], c, nocase)
			p++
		}
	}
	return min(p+1, len(pattern)), match != negate
}

func inRange(lo, hi, c byte, nocase bool) bool {
	if nocase {
		lo, hi, c = lower(lo), lower(hi), lower(c)
	}
	return lo <= c && c <= hi
}

func foldEqual(a, b byte, nocase bool) bool {
	return a == b || nocase && lower(a) == lower(b)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
