package main

import (
	"strings"
	"testing"
	"time"
)

// TestRollingPaceFlags checks -rolling-pace, -rounds and the bounds: what each accepts, and what it refuses.
func TestRollingPaceFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		pace   rollingPace
		rounds int
	}{
		{[]string{"-nemesis", "rolling-restart"}, rollingPace{kind: paceHealthy}, 0},
		{[]string{"-nemesis", "rolling-restart", "-rolling-pace", "ready", "-rounds", "3"}, rollingPace{kind: paceReady}, 3},
		{[]string{"-nemesis", "rolling-restart", "-rolling-pace", "serve:1s"}, rollingPace{kind: paceServe, delay: time.Second}, 0},
		{[]string{"-nemesis", "rolling-restart", "-rolling-pace", "serve:0s"}, rollingPace{kind: paceServe}, 0},
	} {
		o, err := parseOptions(tc.args)
		if err != nil || o.pace != tc.pace || o.rounds != tc.rounds {
			t.Errorf("parseOptions(%q) = pace %+v, rounds %d, %v; want %+v, %d", tc.args, o.pace, o.rounds, err, tc.pace, tc.rounds)
		}
	}
	o, err := parseOptions([]string{"-nemesis", "rolling-restart", "-rounds", "2"})
	if err != nil || o.duration != roundsBound {
		t.Errorf("-rounds without -duration: duration %v, %v; want the bound %v", o.duration, err, roundsBound)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rolling-pace", "soon"}, "-rolling-pace"},
		{[]string{"-rolling-pace", "serve"}, "-rolling-pace"},
		{[]string{"-rolling-pace", "serve:-1s"}, "-rolling-pace"},
		{[]string{"-rolling-pace", "ready:1s"}, "-rolling-pace"},
		{[]string{"-nemesis", "crash-restart", "-rounds", "3"}, "-rounds"},
		{[]string{"-nemesis", "rolling-restart", "-rounds", "-1"}, "-rounds"},
		{[]string{"-max-stall", "-1s"}, "-max-stall"},
		{[]string{"-timing", "wan"}, "-timing"},
	} {
		if _, err := parseOptions(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseOptions(%q): %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}

// TestLeaderWatch checks the longest leaderless time: the longest gap between polls that found a leader.
func TestLeaderWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := &leaderWatch{done: make(chan struct{}), last: t0}
	for _, ms := range []int{100, 200, 1500, 1600} {
		w.found(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	if w.longest != 1300*time.Millisecond || !w.at.Equal(t0.Add(200*time.Millisecond)) {
		t.Fatalf("longest %v from %v, want 1.3s from 200ms", w.longest, w.at.Sub(t0))
	}
}
