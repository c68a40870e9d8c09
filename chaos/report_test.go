package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestReportPrint(t *testing.T) {
	passing := Report{
		Seed:     1234,
		Duration: 3 * time.Second,
		Outcomes: map[string]int{"put OK": 10, "get NotFound": 2},
		Linear:   LinearizabilityResult{Keys: 3, Ops: 12, Ok: true},
	}
	for i := range 40 {
		passing.Faults = append(passing.Faults, fmt.Sprintf("%ds kill node-%d", i, i%3))
	}
	lost := passing
	lost.Ledger = LedgerResult{Acked: 5, Lost: 1, NotFound: 1, LostKeys: []string{"ledger-0-1"}}
	denied := passing
	denied.Linear.FalseNotFound = 1
	unproven := passing
	unproven.Linear = LinearizabilityResult{Keys: 3, Ops: 12, Unknown: true}
	unavailable := passing
	unavailable.Unavailable = []int{7}
	beyond := passing
	beyond.Unavailable = []int{7}
	beyond.Ledger = LedgerResult{Acked: 5, Destroyed: 2}
	beyond.BeyondModel = []string{"partition 7: every copy died"}
	dishonest := unavailable
	dishonest.Dishonest = []string{"partition 7 is Unavailable but a read answered not found"}

	for _, tc := range []struct {
		name string
		r    Report
		want string
		line string // a line the report must print
	}{
		{"passing", passing, "PASS", "lost 0 (0 not found, 0 wrong value)"},
		{"lost write", lost, "FAIL", "lost 1 (1 not found, 0 wrong value)"},
		{"false not found", denied, "FAIL", "false NotFound: 1 register gets"},
		{"unproven", unproven, "FAIL", "not proven"},
		{"honestly unavailable", unavailable, "PASS", "unavailable at the end: partitions [7]"},
		{"dishonest", dishonest, "FAIL", "dishonest partitions (1)"},
		{"beyond the failure model", beyond, "PASS", "unreadable beyond the failure model 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			tc.r.Print(&b)
			out := b.String()
			if tc.r.Passed() != (tc.want == "PASS") {
				t.Fatalf("Passed() = %v, want verdict %s", tc.r.Passed(), tc.want)
			}
			for _, s := range []string{tc.want, tc.line, "replay with seed 1234", "... 10 more"} {
				if !strings.Contains(out, s) {
					t.Errorf("report lacks %q:\n%s", s, out)
				}
			}
		})
	}
}

func TestPercentiles(t *testing.T) {
	if a, b, c := Percentiles(nil); a != 0 || b != 0 || c != 0 {
		t.Fatalf("Percentiles(nil) = %v %v %v, want zeros", a, b, c)
	}
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p50, p99, hi := Percentiles(ds)
	if p50 != 50*time.Millisecond || p99 != 99*time.Millisecond || hi != 100*time.Millisecond {
		t.Fatalf("Percentiles = %v %v %v, want 50ms 99ms 100ms", p50, p99, hi)
	}
}
