package resp

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// isSubsequence reports whether s can be read off t in order, skipping bytes of t.
func isSubsequence(s, t []byte) bool {
	for _, c := range t {
		if len(s) > 0 && s[0] == c {
			s = s[1:]
		}
	}
	return len(s) == 0
}

// lcsLength is the longest common subsequence's length by a second method: one row at a time.
func lcsLength(a, b []byte) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// TestLCSTableOnRandomStrings checks, on random strings of a few letters, that the subsequence LCS
// returns is common to both strings and as long as a second computation finds, and that its matches are
// equal runs of both strings, in descending order, that add up to its length.
func TestLCSTableOnRandomStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	random := func() []byte {
		s := make([]byte, rng.IntN(40))
		for i := range s {
			s[i] = "abc"[rng.IntN(3)]
		}
		return s
	}
	for range 2000 {
		a, b := random(), random()
		tab := newLCSTable(a, b)
		seq := tab.sequence()
		if len(seq) != lcsLength(a, b) || tab.length() != len(seq) || !isSubsequence(seq, a) || !isSubsequence(seq, b) {
			t.Fatalf("LCS(%q, %q) = %q (length %d), want a common subsequence of length %d", a, b, seq, tab.length(), lcsLength(a, b))
		}
		total, prev := 0, len(a)
		for _, m := range tab.matches(0) {
			if m.aEnd >= prev || !bytes.Equal(a[m.aStart:m.aEnd+1], b[m.bStart:m.bEnd+1]) || m.aEnd-m.aStart != m.bEnd-m.bStart {
				t.Fatalf("LCS(%q, %q): match %+v is not an equal run after the previous one", a, b, m)
			}
			total, prev = total+m.aEnd-m.aStart+1, m.aStart
		}
		if total != len(seq) {
			t.Fatalf("LCS(%q, %q): matches cover %d bytes, the subsequence has %d", a, b, total, len(seq))
		}
	}
}

// TestLCSRefusesAnOversizedTable checks that two strings whose table passes the bound are refused with an
// error, not computed.
func TestLCSRefusesAnOversizedTable(t *testing.T) {
	f := newFakeNode()
	s := serveFake(t, f, fakeOptions())
	c := dial(t, s)
	long := string(bytes.Repeat([]byte("x"), 4200))
	for _, k := range []string{"k", "{k}2"} {
		if got := c.do("SET", k, long); got != "+OK" {
			t.Fatalf("SET = %q", got)
		}
	}
	if got := c.do("LCS", "k", "{k}2", "LEN"); got[0] != '-' {
		t.Fatalf("LCS of two 4,200-byte strings = %q, want an error", got)
	}
	if got := c.do("SET", "{k}2", "xx"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}
	if got := c.do("LCS", "k", "{k}2", "LEN"); got != ":2" {
		t.Fatalf("LCS with a short string = %q, want :2", got)
	}
}
