package kv

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseMemorySize parses a byte count in Redis's units: a plain number of bytes, or one followed by
// k, kb, m, mb, g or gb (case-insensitive; k is 1000 and kb 1024, as Redis counts).
func ParseMemorySize(s string) (int64, error) {
	lower := strings.ToLower(strings.TrimSpace(s))
	units := []struct {
		suffix string
		scale  int64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"b", 1}}
	scale := int64(1)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			lower, scale = strings.TrimSuffix(lower, u.suffix), u.scale
			break
		}
	}
	n, err := strconv.ParseInt(lower, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/scale {
		return 0, fmt.Errorf("memory size %q is not a byte count (such as 100mb or 2gb)", s)
	}
	return n * scale, nil
}
