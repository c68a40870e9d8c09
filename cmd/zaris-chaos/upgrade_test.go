package main

import (
	"errors"
	"strings"
	"testing"
)

func TestUpgradePlan(t *testing.T) {
	a, b, c := &server{name: "a"}, &server{name: "b"}, &server{name: "c"}
	var got []string
	for _, step := range upgradePlan([]*server{a, b, c}) {
		got = append(got, map[bool]string{false: "up ", true: "down "}[step.earlier]+step.s.name)
	}
	if want := "up a,down a,up a,up b,up c"; strings.Join(got, ",") != want {
		t.Fatalf("plan %q, want %q", strings.Join(got, ","), want)
	}
}

// TestNoteUpgradeBites checks that the run fails when the cluster's protocol rose before the last upgrade,
// or never rose, and passes only when it held and then rose.
func TestNoteUpgradeBites(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    *upgradeWatch
		pass bool
	}{
		{"held, then rose", &upgradeWatch{from: 0, held: 7, rose: true, to: 1}, true},
		{"rose early", &upgradeWatch{from: 0, held: 5, early: []string{"zaris-3 (protocol 1)"}, rose: true, to: 1}, false},
		{"never rose", &upgradeWatch{from: 0, held: 7, riseErr: errors.New("stayed 0")}, false},
		{"did not finish", &upgradeWatch{from: 0, held: 3}, false},
		{"did not run", nil, false},
	} {
		h := &harness{nem: &nemesis{upgrade: tc.w}}
		if got := h.noteUpgrade(); got != tc.pass || tc.pass != (len(h.failures) == 0) {
			t.Errorf("%s: noteUpgrade = %v with failures %q; want %v", tc.name, got, h.failures, tc.pass)
		}
	}
}
