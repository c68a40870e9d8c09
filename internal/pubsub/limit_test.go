package pubsub

import (
	"testing"
	"time"
)

func TestBacklogExceeded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	steps := []struct {
		pending int
		at      time.Duration
		want    bool
	}{
		{pending: 10, at: 0, want: false},
		{pending: 101, at: 0, want: false},                // over the soft bound: its time starts
		{pending: 150, at: 60 * time.Second, want: false}, // not longer than SoftFor yet
		{pending: 90, at: 61 * time.Second, want: false},  // under it: the time restarts
		{pending: 101, at: 62 * time.Second, want: false},
		{pending: 101, at: 122 * time.Second, want: false},
		{pending: 101, at: 122*time.Second + 1, want: true},
		{pending: 1001, at: 0, want: true}, // over the hard bound
	}
	b := Backlog{Limit: Limit{Hard: 1000, Soft: 100, SoftFor: time.Minute}}
	for i, s := range steps {
		if got := b.Exceeded(s.pending, t0.Add(s.at)); got != s.want {
			t.Fatalf("step %d: Exceeded(%d, +%v) = %v, want %v", i, s.pending, s.at, got, s.want)
		}
	}
	none := Backlog{Limit: Limit{Hard: 1000}}
	for _, at := range []time.Duration{0, time.Hour} {
		if none.Exceeded(999, t0.Add(at)) {
			t.Fatal("a limit without a soft bound ended a subscriber under its hard bound")
		}
	}
}
