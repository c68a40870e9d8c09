package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
)

// printReport prints the run's settings, the table, the notes, the clusters' warnings and, with -hist,
// the histograms, on standard output.
func printReport(o options, results []result, notes []string, sink *logSink, loadBefore string) {
	w := os.Stdout
	fmt.Fprintf(w, "\n### %s: %d members each, in one process on loopback\n\n", title(o.systems), members)
	fmt.Fprintf(w, "%d goroutines over %d members, %d keys uniform at random, %d-byte values, %v per phase, "+
		"median of %d rounds; %s, GOMAXPROCS %d, %d CPUs; load average %s before the run, %s after\n\n",
		o.goroutines, members, o.keys, o.value, o.duration, o.rounds, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(),
		loadBefore, loadAverage())
	printTable(w, summaries(results, o.phases, o.systems))
	fmt.Fprintln(w)
	for _, line := range legend(o) {
		fmt.Fprintln(w, "- "+line)
	}
	for _, n := range notes {
		fmt.Fprintln(w, "- "+n)
	}
	logs := sink.summary()
	if len(logs) == 0 {
		fmt.Fprintln(w, "- cluster logs: no warnings or errors")
	}
	for _, l := range logs {
		fmt.Fprintln(w, "- cluster logs: "+l)
	}
	if o.hist {
		printHistograms(w, summaries(results, o.phases, o.systems))
	}
}

// legend explains the columns and how each system was driven.
func legend(o options) []string {
	lines := []string{
		"ops/s: operations completed per second of wall time; for mget one op is a batch of " + fmt.Sprint(o.batch) + " keys, keys/s counts the keys",
		"p50/p99/p99.9: latency of one operation (one batch for mget), from a log-linear histogram (buckets within 3%)",
		"CPU cores: CPU time of the whole process (every cluster up, clients, load generator) per second of wall time, from getrusage",
	}
	zaris, olric := slices.Contains(o.systems, "zaris"), slices.Contains(o.systems, "olric")
	mget := slices.ContainsFunc(o.phases, func(p phase) bool { return p.kind == opGetMany })
	if zaris && olric {
		lines = append(lines, "zaris/olric: ratio of the medians; above 1 is more for Zaris (better for ops/s, worse for latency and CPU)")
	}
	if zaris {
		lines = append(lines, "zaris, N copies: ReplicationFactor N, Sync write concern (acknowledged once every in-sync replica applied it); mget is GetMany")
	}
	if olric {
		lines = append(lines, "olric, N copies: ReplicaCount N, SyncReplicationMode, WriteQuorum N, ReadQuorum 1, ReadRepair off")
	}
	if olric && mget {
		lines = append(lines, "olric mget: DMapPipeline, a Get per key and one Exec, which sends one pipelined round trip per partition, "+
			"at most NumCPU partitions at once, through a ClusterClient on the goroutine's member, as EmbeddedDMap.Pipeline does")
	}
	return lines
}

// title names the systems measured, with Olric's version.
func title(systems []string) string {
	names := slices.Clone(systems)
	for i, n := range names {
		if n == "olric" {
			names[i] = "olric " + olricVersion()
		}
	}
	return strings.Join(names, " vs ")
}

// olricVersion returns the Olric module version this program was built with.
func olricVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	for _, d := range info.Deps {
		if d.Path == "github.com/olric-data/olric" {
			return d.Version
		}
	}
	return "(unknown version)"
}

// loadAverage returns the machine's one-minute load average, which shows other processes competing for
// the cores during a run; "?" where it cannot be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return "?"
	}
	return fields[0]
}
