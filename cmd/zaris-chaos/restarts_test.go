package main

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/chaos"
)

// TestPlanStarts checks a full restart's plan: every server once, the first at once, the others in order
// within the spread, and the same plan for the same seed.
func TestPlanStarts(t *testing.T) {
	servers := func(n int) []*server {
		var out []*server
		for i := range n {
			out = append(out, &server{name: string(rune('a' + i))})
		}
		return out
	}
	for _, tc := range []struct {
		seed   uint64
		n      int
		spread time.Duration
	}{
		{1, 1, 500 * time.Millisecond},
		{2, 5, 500 * time.Millisecond},
		{3, 7, time.Millisecond},
		{4, 3, 0},
	} {
		ss := servers(tc.n)
		plan := planStarts(rand.New(rand.NewPCG(tc.seed, 1)), ss, tc.spread)
		again := planStarts(rand.New(rand.NewPCG(tc.seed, 1)), ss, tc.spread)
		if !slices.Equal(plan, again) {
			t.Errorf("seed %d: plans differ: %v and %v", tc.seed, plan, again)
		}
		var started []*server
		for i, ps := range plan {
			started = append(started, ps.s)
			if ps.at < 0 || ps.at > tc.spread || (i == 0 && ps.at != 0) || (i > 0 && ps.at < plan[i-1].at) {
				t.Errorf("seed %d: start %d at %v: want the first at 0, the others in order within %v", tc.seed, i, ps.at, tc.spread)
			}
		}
		slices.SortFunc(started, compareNames)
		if !slices.Equal(started, ss) {
			t.Errorf("seed %d: plan starts %v, want each of %v once", tc.seed, started, ss)
		}
	}
}

// compareNames orders servers by name.
func compareNames(a, b *server) int { return strings.Compare(a.name, b.name) }

// TestShuffled checks that a rolling restart's order is a permutation that the seed decides.
func TestShuffled(t *testing.T) {
	ss := []*server{{name: "a"}, {name: "b"}, {name: "c"}, {name: "d"}, {name: "e"}}
	orders := map[string]bool{}
	for seed := range uint64(20) {
		got := shuffled(rand.New(rand.NewPCG(seed, 1)), ss)
		if again := shuffled(rand.New(rand.NewPCG(seed, 1)), ss); !slices.Equal(got, again) {
			t.Fatalf("seed %d: orders differ", seed)
		}
		key := ""
		for _, s := range got {
			key += s.name
		}
		orders[key] = true
		slices.SortFunc(got, compareNames)
		if !slices.Equal(got, ss) {
			t.Fatalf("seed %d: order is no permutation of the servers", seed)
		}
	}
	if len(orders) < 2 {
		t.Fatalf("20 seeds gave one order: %v", orders)
	}
}

// TestWriteStalls checks the stall figures: the longest gap with no acknowledged put anywhere, and the
// longest and 99th percentile of the gaps within each partition, from the window's start to its end, and
// where and when the longest of those began.
func TestWriteStalls(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []chaos.Op {
		var ops []chaos.Op
		for _, m := range ms {
			ops = append(ops, chaos.Op{End: t0.Add(time.Duration(m) * time.Millisecond)})
		}
		return ops
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name  string
		acked map[int][]chaos.Op
		to    int
		want  stalls
	}{
		{"none", map[int][]chaos.Op{}, 1000, stalls{overall: ms(1000)}},
		{"one partition", map[int][]chaos.Op{0: at(100, 200, 900)}, 1000,
			stalls{overall: ms(700), partition: ms(700), p99: ms(700), gaps: 4, worstFrom: ms(200)}},
		{"partitions cover each other", map[int][]chaos.Op{0: at(100, 600), 1: at(300, 400)}, 1000,
			stalls{overall: ms(400), partition: ms(600), p99: ms(600), gaps: 6, worst: 1, worstFrom: ms(400)}},
		{"a stall lasting to the end", map[int][]chaos.Op{0: at(100), 1: at(100, 950)}, 1000,
			stalls{overall: ms(850), partition: ms(900), p99: ms(900), gaps: 5, worstFrom: ms(100)}},
		{"puts after the window are left out", map[int][]chaos.Op{0: at(100, 200, 1500)}, 1000,
			stalls{overall: ms(800), partition: ms(800), p99: ms(800), gaps: 3, worstFrom: ms(200)}},
	} {
		if got := writeStalls(tc.acked, t0, t0.Add(ms(tc.to))); got != tc.want {
			t.Errorf("%s: stalls %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestRecoverySummary checks the recovery list of the report's notes: the longest, the failures, each one.
func TestRecoverySummary(t *testing.T) {
	late := errors.New("not writable")
	for _, tc := range []struct {
		rs   []recovery
		want string
	}{
		{nil, "none measured"},
		{[]recovery{{took: 1500 * time.Millisecond}, {took: 3 * time.Second}}, "max 3s over 2: 1.5s 3s"},
		{[]recovery{{took: 2 * time.Second}, {took: time.Minute, err: late}}, "max >1m0s over 2, 1 never within the bound: 2s >1m0s"},
	} {
		if got := recoverySummary(tc.rs); got != tc.want {
			t.Errorf("recoverySummary(%v) = %q, want %q", tc.rs, got, tc.want)
		}
	}
}

// TestSettling checks what keeps a map from having caught up with restarts: a running server it lists
// with the process that ended last or not at all, one it assigns no copy, a partition moving.
func TestSettling(t *testing.T) {
	m := &zaris.ClusterMap{
		Nodes:      map[zaris.NodeID]zaris.NodeInfo{"a": {Incarnation: 1}, "b": {Incarnation: 2}, "c": {Incarnation: 3}},
		Assignment: zaris.Assignment{{"a", "b"}, {"b", "a"}},
		Runtime:    []zaris.PartitionState{{Owner: "a"}, {Owner: "b"}},
	}
	for _, tc := range []struct {
		running []string
		ended   map[zaris.NodeID]uint64
		target  []zaris.NodeID // partition 1's move
		want    []string
	}{
		{[]string{"a", "b"}, nil, nil, nil},
		{[]string{"a", "b"}, map[zaris.NodeID]uint64{"a": 7, "b": 2}, nil, []string{"b: current process not recorded"}},
		{[]string{"a", "d"}, nil, nil, []string{"d: current process not recorded"}},
		{[]string{"a", "b", "c"}, nil, []zaris.NodeID{"c", "a"}, []string{"c: no copy assigned", "moving partitions: 1"}},
	} {
		m.Runtime[1].Target = tc.target
		if got := settling(m, tc.running, tc.ended); !slices.Equal(got, tc.want) {
			t.Errorf("settling(%v, %v, moving to %v) = %q, want %q", tc.running, tc.ended, tc.target, got, tc.want)
		}
	}
}

// TestLongestPutWait checks the wait figure: from a put's start to its own end or the first acknowledged
// put of its partition that ended after it, whichever is later, failed puts included, a partition nobody
// wrote to not counted, and a wait still going on at the window's end counted up to it.
func TestLongestPutWait(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	put := func(start, end int, o chaos.Outcome) chaos.Op {
		return chaos.Op{Kind: chaos.Put, Outcome: o, Start: t0.Add(ms(start)), End: t0.Add(ms(end))}
	}
	for _, tc := range []struct {
		name     string
		attempts map[int][]chaos.Op
		want     putWait
	}{
		{"nothing written", nil, putWait{}},
		{"acknowledged puts wait for themselves", map[int][]chaos.Op{3: {put(100, 130, chaos.OK), put(800, 805, chaos.OK)}},
			putWait{longest: ms(30), partition: 3, from: ms(100)}},
		{"a failed put waits for the next acknowledged one, an unknown one for its own end", map[int][]chaos.Op{
			1: {put(100, 110, chaos.OK), put(200, 210, chaos.Failed), put(650, 700, chaos.OK)},
			2: {put(300, 900, chaos.Unknown), put(400, 500, chaos.OK)}},
			putWait{longest: ms(600), partition: 2, from: ms(300)}},
		{"a wait going on at the end counts up to it", map[int][]chaos.Op{0: {put(400, 2000, chaos.Unknown)}},
			putWait{longest: ms(600), from: ms(400)}},
		{"a slow put waits for itself, however soon others are acknowledged", map[int][]chaos.Op{
			5: {put(100, 600, chaos.OK), put(105, 110, chaos.OK), put(120, 900, chaos.Unknown)}},
			putWait{longest: ms(780), partition: 5, from: ms(120)}},
		{"puts begun outside the window are left out", map[int][]chaos.Op{0: {put(1500, 1600, chaos.OK)}}, putWait{}},
	} {
		acked := map[int][]chaos.Op{}
		for p, ops := range tc.attempts {
			for _, op := range ops {
				if op.Outcome == chaos.OK {
					acked[p] = append(acked[p], op)
				}
			}
			slices.SortFunc(acked[p], byEnd)
		}
		if got := longestPutWait(tc.attempts, acked, t0, t0.Add(ms(1000))); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
