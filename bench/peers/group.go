package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// idleWindow is how long the CPU of the started, unloaded clusters is measured.
const idleWindow = time.Second

// runGroup starts one cluster per system keeping g.copies copies, preloads every key, then runs each
// round's phases alternately on every system, the system going first changing from round to round.
func runGroup(ctx context.Context, g phaseGroup, o options, keys keyNames, sink *logSink) (results []result, notes []string, err error) {
	sink.unmute()
	sink.at(fmt.Sprintf("start of the %d-copy clusters", g.copies))
	subjects, err := startSubjects(ctx, g.copies, o, sink)
	if err != nil {
		return nil, nil, err
	}
	defer func() { err = errors.Join(err, closeSubjects(subjects, sink)) }()
	for _, s := range subjects {
		start := time.Now()
		sink.at(fmt.Sprintf("%d-copy %s preload", g.copies, s.sys.name))
		if err := preload(ctx, s, keys, o); err != nil {
			return nil, nil, err
		}
		progress("%d copies: %s preloaded %d keys in %v", g.copies, s.sys.name, len(keys), time.Since(start).Round(time.Millisecond))
	}
	idle := measureIdle(ctx)
	for round := range o.rounds {
		for _, p := range g.phases {
			for i := range subjects {
				s := subjects[(i+round)%len(subjects)]
				sink.at(fmt.Sprintf("round %d %s on %s", round+1, p.name, s.sys.name))
				r, err := runOne(ctx, s, p, o, keys, round)
				if err != nil {
					return results, nil, err
				}
				results = append(results, r)
			}
		}
	}
	return results, groupNotes(g.copies, subjects, idle), nil
}

// runOne runs phase p once on s, then after a put phase reads a sample of keys back.
func runOne(ctx context.Context, s *subject, p phase, o options, keys keyNames, round int) (result, error) {
	r := load{s: s, p: p, o: o, keys: keys, round: round}.run(ctx)
	progress("round %d/%d %-6s %-5s %10.0f ops/s  p50 %-8s p99 %-8s %.2f cores  %d errors", round+1, o.rounds,
		p.name, s.sys.name, r.opsPerSec(), latency(r.hist.quantile(0.5)), latency(r.hist.quantile(0.99)), r.cores, r.errors)
	if r.firstErr != nil {
		progress("  first error: %v", r.firstErr)
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	if p.kind == opPut {
		return r, verify(ctx, s, keys, o, uint64(round)<<16|uint64(s.putRuns))
	}
	return r, nil
}

// startSubjects starts a cluster of every system in o.systems; on failure it closes those started.
func startSubjects(ctx context.Context, copies int, o options, sink *logSink) ([]*subject, error) {
	var subjects []*subject
	for _, name := range o.systems {
		start := time.Now()
		s, err := newSubject(ctx, systems[name], copies, o, sink)
		if err != nil {
			return nil, errors.Join(err, closeSubjects(subjects, sink))
		}
		progress("%d copies: %s cluster of %d started in %v", copies, name, members, time.Since(start).Round(time.Millisecond))
		subjects = append(subjects, s)
	}
	return subjects, nil
}

// closeSubjects mutes the logs (members warn as their peers stop) and closes every cluster.
func closeSubjects(subjects []*subject, sink *logSink) error {
	sink.mute()
	var errs []error
	for _, s := range subjects {
		if err := s.close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", s.sys.name, err))
		}
	}
	return errors.Join(errs...)
}

// measureIdle returns the cores the process uses with every cluster up and no load: background work
// (gossip, heartbeats, balancers) that the CPU column of every phase includes.
func measureIdle(ctx context.Context) float64 {
	m := startCPUMeter()
	select {
	case <-ctx.Done():
	case <-time.After(idleWindow):
	}
	return m.cores()
}

// groupNotes returns the lines printed under the table for one group of clusters.
func groupNotes(copies int, subjects []*subject, idle float64) []string {
	notes := []string{fmt.Sprintf("%d copies: idle CPU with every cluster up and no load: %.3f cores", copies, idle)}
	for _, s := range subjects {
		notes = append(notes, fmt.Sprintf("%d copies: %s: %d keys read back after put phases, %d not the last value written",
			copies, s.sys.name, s.checked, s.mismatch))
		if s.sys.notes != nil {
			for _, n := range s.sys.notes(s.cluster) {
				notes = append(notes, fmt.Sprintf("%d copies: %s", copies, n))
			}
		}
	}
	return notes
}

// progress prints a line about the run so far on standard error.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
