package resp

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestScanPageSmallIsWhole checks that a collection of up to smallCollection elements comes in one page
// with cursor 0, whatever the cursor and count asked.
func TestScanPageSmallIsWhole(t *testing.T) {
	for _, n := range []int{0, 1, 5, smallCollection} {
		values := members(n, "m")
		for _, cursor := range []uint64{0, 12345} {
			picked, next := scanPage(values, 1, cursor, 1)
			if len(picked) != n || next != 0 {
				t.Errorf("%d members from cursor %d: %d picked, next %d; want all and 0", n, cursor, len(picked), next)
			}
		}
	}
}

// TestScanPageUnderChange scans large collections while members come and go between pages, and checks by
// counting that every member present for the whole scan is returned, in at most about scanPages pages
// however small the count.
func TestScanPageUnderChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, n := range []int{smallCollection + 1, 1000, 5000} {
		for _, count := range []int{1, 10, 100000} {
			stable := members(n, "s")
			set := map[string]bool{}
			for _, m := range stable {
				set[string(m)] = true
			}
			seen := map[string]int{}
			cursor, pages, churn := uint64(0), 0, 0
			for {
				values := make([][]byte, 0, len(set))
				for m := range set {
					values = append(values, []byte(m))
				}
				picked, next := scanPage(values, 1, cursor, count)
				pages++
				for _, i := range picked {
					seen[string(values[i])]++
				}
				for range 20 { // members that come and go while the scan runs
					churn++
					set[fmt.Sprintf("c%d", churn)] = true
					delete(set, fmt.Sprintf("c%d", rng.IntN(churn)+1))
				}
				if cursor = next; cursor == 0 {
					break
				}
				if pages > 10*scanPages {
					t.Fatalf("%d members, count %d: no end after %d pages", n, count, pages)
				}
			}
			for _, m := range stable {
				if seen[string(m)] != 1 {
					t.Fatalf("%d members, count %d: %q returned %d times, want once", n, count, m, seen[string(m)])
				}
			}
			if pages > scanPages+1 {
				t.Errorf("%d members, count %d: %d pages, want at most %d", n, count, pages, scanPages+1)
			}
		}
	}
}

// TestScanPageKeepsEqualHashesTogether checks that elements of one hash are never split across pages, which
// a cursor could not resume between.
func TestScanPageKeepsEqualHashesTogether(t *testing.T) {
	values := members(smallCollection*2, "m")
	for i := 0; i < 40; i++ { // the same name twice hashes alike, as colliding names would
		values = append(values, values[i])
	}
	seen := 0
	cursor := uint64(0)
	for {
		picked, next := scanPage(values, 1, cursor, 1)
		seen += len(picked)
		for _, i := range picked {
			if next != 0 && scanHash(values[i]) >= next {
				t.Fatalf("%q picked beyond the next cursor", values[i])
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if seen != len(values) {
		t.Fatalf("%d elements returned, want %d", seen, len(values))
	}
}

func members(n int, prefix string) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s%d", prefix, i)
	}
	return out
}
