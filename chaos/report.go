package chaos

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

const (
	maxFaultLines  = 30 // faults printed before the rest are summarized
	maxKeysPrinted = 20 // violating keys printed before the rest are summarized
)

// Report is the outcome of one certification run.
type Report struct {
	Seed           uint64
	Duration       time.Duration
	Outcomes       map[string]int // ops by kind/outcome, e.g. "put OK", "get NotFound"
	Ledger         LedgerResult
	Phantoms       int // register gets that read a value never written
	Linear         LinearizabilityResult
	Failovers      int
	FailoverTimes  []time.Duration // kill -> first acknowledged write under the new epoch
	Unavailability []time.Duration // per partition, windows with no acknowledged write while faults were active
	SplitBrain     []string        // descriptions of (partition, epoch) acknowledged by two owners
	Unavailable    []int           // partitions left Unavailable at the end, when the run allows it
	Dishonest      []string        // partitions whose answers at the end contradict their health
	BeyondModel    []string        // partitions every copy of which died, beyond the failure model, and why
	Faults         []string        // the nemesis steps, in order, with times
	Notes          []string
	Bank           *BankResult // the bank workload's verdict, when it ran
}

// Passed reports whether the run certifies the cluster: nothing lost, invented or unreadable (keys whose
// every copy died, beyond the failure model, may be unreadable, and nothing more), no get
// denying an acknowledged write, every key proven linearizable (a timed-out check proves nothing), no split
// brain, no partition answering against its health, and transactions kept whole.
func (r *Report) Passed() bool {
	return r.Ledger.Lost == 0 && r.Ledger.Phantom == 0 && r.Ledger.Unreadable == 0 && r.Phantoms == 0 &&
		r.Linear.FalseNotFound == 0 && r.Linear.Ok && len(r.SplitBrain) == 0 && len(r.Dishonest) == 0 &&
		(r.Bank == nil || r.Bank.Ok())
}

// Print writes a readable multi-line summary of the run to w.
func (r *Report) Print(w io.Writer) {
	verdict := "FAIL"
	if r.Passed() {
		verdict = "PASS"
	}
	fmt.Fprintf(w, "chaos: %s\n", verdict)
	fmt.Fprintf(w, "seed: %d (replay with seed %d)\n", r.Seed, r.Seed)
	fmt.Fprintf(w, "duration: %s\n", r.Duration.Round(time.Millisecond))
	fmt.Fprintf(w, "ops: %s\n", formatCounts(r.Outcomes))
	r.printChecks(w)
	fmt.Fprintf(w, "failovers: %d, failover time %s\n", r.Failovers, formatPercentiles(r.FailoverTimes))
	fmt.Fprintf(w, "unavailability: %d windows, %s\n", len(r.Unavailability), formatPercentiles(r.Unavailability))
	printList(w, "split brain", r.SplitBrain, math.MaxInt)
	if len(r.Unavailable) > 0 {
		fmt.Fprintf(w, "unavailable at the end: partitions %v\n", r.Unavailable)
	}
	printList(w, "dishonest partitions", r.Dishonest, math.MaxInt)
	printList(w, "beyond the failure model", r.BeyondModel, math.MaxInt)
	printList(w, "faults", r.Faults, maxFaultLines)
	printList(w, "notes", r.Notes, math.MaxInt)
}

// printChecks writes the durability and linearizability verdicts.
func (r *Report) printChecks(w io.Writer) {
	l := r.Ledger
	fmt.Fprintf(w, "ledger: %d acked, %d unknown; lost %d (%d not found, %d wrong value), phantom %d, unreadable %d, "+
		"unreadable beyond the failure model %d, evicted as reported %d\n",
		l.Acked, l.Unknown, l.Lost, l.NotFound, l.Lost-l.NotFound, l.Phantom, l.Unreadable, l.Destroyed, l.Evicted)
	if len(l.LostKeys) > 0 {
		fmt.Fprintf(w, "lost keys: %s\n", strings.Join(l.LostKeys, ", "))
	}
	fmt.Fprintf(w, "false NotFound: %d register gets, %d ledger read-backs\n", r.Linear.FalseNotFound, l.NotFound)
	fmt.Fprintf(w, "register phantoms: %d\n", r.Phantoms)
	fmt.Fprintf(w, "linearizability: %s (%d keys, %d ops)\n", r.linearVerdict(), r.Linear.Keys, r.Linear.Ops)
	if r.Bank != nil {
		fmt.Fprintf(w, "bank transfers: %s\n", r.Bank)
	}
}

// linearVerdict summarizes the linearizability check in a few words.
func (r *Report) linearVerdict() string {
	switch lr := r.Linear; {
	case len(lr.ViolatingKeys) > 0:
		return "VIOLATED on " + truncateList(lr.ViolatingKeys, maxKeysPrinted)
	case lr.Unknown:
		return "not proven (check timed out)"
	case lr.Ok:
		return "ok"
	}
	return "not checked"
}

// Percentiles returns the median, 99th percentile and maximum of ds by nearest rank; all zero for none.
func Percentiles(ds []time.Duration) (p50, p99, max time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[rank(len(s), 0.50)], s[rank(len(s), 0.99)], s[len(s)-1]
}

// rank returns the index of the nearest-rank p-th percentile of n sorted values.
func rank(n int, p float64) int {
	return max(0, int(math.Ceil(p*float64(n)))-1)
}

// formatPercentiles renders ds as "p50 X, p99 Y, max Z".
func formatPercentiles(ds []time.Duration) string {
	p50, p99, hi := Percentiles(ds)
	return fmt.Sprintf("p50 %s, p99 %s, max %s", p50, p99, hi)
}

// formatCounts renders counts sorted by name, like "get OK=3, put OK=2".
func formatCounts(counts map[string]int) string {
	if len(counts) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// truncateList joins up to limit items, noting how many were left out.
func truncateList(items []string, limit int) string {
	if len(items) <= limit {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s ... %d more", strings.Join(items[:limit], ", "), len(items)-limit)
}

// printList writes a titled list with one item per line, at most limit items; nothing if it is empty.
func printList(w io.Writer, title string, items []string, limit int) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(w, "%s (%d):\n", title, len(items))
	for _, it := range items[:min(limit, len(items))] {
		fmt.Fprintf(w, "  %s\n", it)
	}
	if len(items) > limit {
		fmt.Fprintf(w, "  ... %d more\n", len(items)-limit)
	}
}
