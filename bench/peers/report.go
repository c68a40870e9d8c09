package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// result is one timed run of a phase on one system.
type result struct {
	system, phase string
	ops           uint64 // operations completed; a multi-get counts once
	keysPerOp     int
	errors        uint64
	firstErr      error
	wall          time.Duration
	cores         float64
	hist          *histogram
}

func (r result) opsPerSec() float64 { return float64(r.ops) / r.wall.Seconds() }

// summary is the median over rounds of each measurement of a phase on a system.
type summary struct {
	system, phase      string
	opsPerSec, keysSec float64
	p50, p99, p999     time.Duration
	cores, opsPerCore  float64
	errors             uint64
	rounds             int
	hist               histogram // every round merged, for -hist
}

// summarize takes the median over rounds of every measurement of runs, which share system and phase.
func summarize(runs []result) summary {
	s := summary{system: runs[0].system, phase: runs[0].phase, rounds: len(runs)}
	var ops, p50, p99, p999, cores, perCore []float64
	for _, r := range runs {
		ops = append(ops, r.opsPerSec())
		p50 = append(p50, float64(r.hist.quantile(0.50)))
		p99 = append(p99, float64(r.hist.quantile(0.99)))
		p999 = append(p999, float64(r.hist.quantile(0.999)))
		cores = append(cores, r.cores)
		if r.cores > 0 {
			perCore = append(perCore, r.opsPerSec()/r.cores)
		}
		s.errors += r.errors
		s.hist.merge(r.hist)
	}
	s.opsPerSec = median(ops)
	s.keysSec = s.opsPerSec * float64(runs[0].keysPerOp)
	s.p50, s.p99, s.p999 = time.Duration(median(p50)), time.Duration(median(p99)), time.Duration(median(p999))
	s.cores, s.opsPerCore = median(cores), median(perCore)
	return s
}

// median returns the middle value of xs, or the mean of the middle two; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// summaries groups results by phase then system, in the order of phases and systems given.
func summaries(results []result, phases []phase, systems []string) []summary {
	var out []summary
	for _, p := range phases {
		for _, sys := range systems {
			var runs []result
			for _, r := range results {
				if r.phase == p.name && r.system == sys {
					runs = append(runs, r)
				}
			}
			if len(runs) > 0 {
				out = append(out, summarize(runs))
			}
		}
	}
	return out
}

const tableHeader = "| phase | system | ops/s | keys/s | p50 | p99 | p99.9 | CPU cores | ops/s per core | errors |\n" +
	"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"

// printTable prints one row per phase and system, then for a phase run on both zaris and olric a row of
// zaris/olric ratios.
func printTable(w io.Writer, sums []summary) {
	io.WriteString(w, tableHeader)
	for i, s := range sums {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %.2f | %s | %d |\n", s.phase, s.system,
			count(s.opsPerSec), count(s.keysSec), latency(s.p50), latency(s.p99), latency(s.p999),
			s.cores, count(s.opsPerCore), s.errors)
		if z, o, ok := pair(sums, i); ok {
			fmt.Fprintf(w, "| %s | **zaris/olric** | %s | %s | %s | %s | %s | %s | %s | |\n", s.phase,
				ratio(z.opsPerSec, o.opsPerSec), ratio(z.keysSec, o.keysSec),
				ratio(float64(z.p50), float64(o.p50)), ratio(float64(z.p99), float64(o.p99)),
				ratio(float64(z.p999), float64(o.p999)), ratio(z.cores, o.cores), ratio(z.opsPerCore, o.opsPerCore))
		}
	}
}

// pair reports whether sums[i] closes a phase measured on both zaris and olric, and returns both.
func pair(sums []summary, i int) (z, o summary, ok bool) {
	last := i+1 == len(sums) || sums[i+1].phase != sums[i].phase
	if !last {
		return z, o, false
	}
	for j := i; j >= 0 && sums[j].phase == sums[i].phase; j-- {
		switch sums[j].system {
		case "zaris":
			z = sums[j]
		case "olric":
			o = sums[j]
		}
	}
	return z, o, z.system != "" && o.system != ""
}

// printHistograms prints, for every phase and system, its latency histogram over all rounds, four rows
// per power of two.
func printHistograms(w io.Writer, sums []summary) {
	for _, s := range sums {
		fmt.Fprintf(w, "\n#### %s %s: latency histogram, %d rounds, %d operations\n\n", s.phase, s.system, s.rounds, s.hist.total)
		io.WriteString(w, "| bucket upper bound | count | cumulative % |\n|---:|---:|---:|\n")
		for _, r := range s.hist.rows(subBuckets / 4) {
			fmt.Fprintf(w, "| %s | %d | %.4f |\n", latency(r.upper), r.count, r.cumulative)
		}
	}
}

// count formats n with thousands separators.
func count(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// latency formats d with three significant digits in µs or ms.
func latency(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case us < 10:
		return fmt.Sprintf("%.2fµs", us)
	case us < 100:
		return fmt.Sprintf("%.1fµs", us)
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 10_000:
		return fmt.Sprintf("%.2fms", us/1000)
	case us < 100_000:
		return fmt.Sprintf("%.1fms", us/1000)
	}
	return fmt.Sprintf("%.0fms", us/1000)
}

// ratio formats a/b, or "-" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}
