// Command peers runs the same load on a Zaris cluster and on an embedded Olric cluster, both started in
// this process on loopback, alternating between them phase by phase, and prints a Markdown table of the
// medians over rounds with Zaris/Olric ratios. With -systems zaris it studies Zaris alone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
)

// options are the command-line settings of a run.
type options struct {
	rounds, goroutines, keys, value, batch, verify int
	duration                                       time.Duration
	phases                                         []phase
	systems                                        []string
	cpuProfile                                     string
	hist                                           bool
}

func main() {
	o, err := parseFlags()
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err = run(ctx, o)
		stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func parseFlags() (options, error) {
	var o options
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; every phase runs once per round on each system")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "length of one phase on one system")
	flag.IntVar(&o.goroutines, "goroutines", 32, "load goroutines, spread over the members")
	flag.IntVar(&o.keys, "keys", 100_000, "distinct keys, chosen uniformly at random")
	flag.IntVar(&o.value, "value", 64, "value size in bytes (at least 8)")
	flag.IntVar(&o.batch, "batch", 100, "keys per multi-get")
	flag.IntVar(&o.verify, "verify", 2000, "keys read back after each put phase to check the last write")
	phases := flag.String("phases", "put-1,get-1,put-2,get-2,mget-2", "phases to run: {put,get,mget}-COPIES, comma-separated")
	sys := flag.String("systems", "zaris,olric", "systems to measure, comma-separated: zaris, olric, floor (plain TCP, the least one round trip costs)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.BoolVar(&o.hist, "hist", false, "also print each phase's latency histogram per system")
	flag.Parse()
	if o.rounds < 1 || o.goroutines < 1 || o.keys < o.goroutines || o.value < 8 || o.batch < 1 || o.duration <= 0 {
		return o, errors.New("need -rounds, -goroutines, -batch, -duration above 0, -keys at least -goroutines, -value at least 8")
	}
	var err error
	if o.phases, err = parsePhases(*phases); err != nil {
		return o, err
	}
	o.systems, err = parseSystems(*sys)
	return o, err
}

func parsePhases(list string) ([]phase, error) {
	var out []phase
	for name := range strings.SplitSeq(list, ",") {
		p, err := parsePhase(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parseSystems(list string) ([]string, error) {
	var out []string
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if _, ok := systems[name]; !ok {
			return nil, fmt.Errorf("unknown system %q: want zaris, olric or floor", name)
		}
		out = append(out, name)
	}
	return out, nil
}

// run measures every phase and prints the report.
func run(ctx context.Context, o options) error {
	stopProfile, err := startProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	goroutinesAtStart := runtime.NumGoroutine()
	loadBefore := loadAverage()
	sink := newLogSink()
	keys := makeKeys(o.keys)
	var results []result
	var notes []string
	for _, g := range groupByCopies(o.phases) {
		res, n, err := runGroup(ctx, g, o, keys, sink)
		results, notes = append(results, res...), append(notes, n...)
		if err != nil {
			return err
		}
	}
	stopProfile()
	printReport(o, results, notes, sink, loadBefore)
	reportLeaks(goroutinesAtStart)
	return nil
}

// startProfile starts a CPU profile into path when path is set, and returns what stops it (safe to call
// more than once).
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			pprof.StopCPUProfile()
			f.Close()
		}
	}, nil
}

// phaseGroup is the phases that run on one pair of clusters keeping the same number of copies.
type phaseGroup struct {
	copies int
	phases []phase
}

// groupByCopies groups phases by copies, in order of first appearance, keeping their order within a group.
func groupByCopies(phases []phase) []phaseGroup {
	var groups []phaseGroup
	at := map[int]int{}
	for _, p := range phases {
		i, ok := at[p.copies]
		if !ok {
			i = len(groups)
			at[p.copies] = i
			groups = append(groups, phaseGroup{copies: p.copies})
		}
		groups[i].phases = append(groups[i].phases, p)
	}
	return groups
}

// reportLeaks waits briefly for the goroutines of closed clusters to end, then reports any left over.
func reportLeaks(atStart int) {
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > atStart && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	left := runtime.NumGoroutine()
	fmt.Printf("\ngoroutines: %d at start, %d after every cluster closed\n", atStart, left)
	if left > atStart {
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
	}
}
