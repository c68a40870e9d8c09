package kv

import "strconv"

// ParseCanonicalInt parses b as an int64 written the way strconv.FormatInt writes it: no sign but a leading
// minus, no leading zeros, no spaces. Redis accepts exactly these for its counters.
func ParseCanonicalInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, false
	}
	var buf [20]byte
	return v, string(strconv.AppendInt(buf[:0], v, 10)) == string(b)
}
