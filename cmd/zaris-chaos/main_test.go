package main

import (
	"io"
	"slices"
	"testing"

	"github.com/zaris-go/zaris"
)

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		nemesis   string
		valueSize int
	}{
		{nil, nemesisMixed, 0},
		{[]string{"-nemesis", "crash-restart"}, nemesisCrashRestart, crashValue},
		{[]string{"-nemesis", "crash-restart", "-value-size", "0"}, nemesisCrashRestart, 0},
		{[]string{"-value-size", "64"}, nemesisMixed, 64},
	} {
		o, err := parseOptions(tc.args)
		if err != nil || o.nemesis != tc.nemesis || o.valueSize != tc.valueSize {
			t.Errorf("parseOptions(%q) = nemesis %q, value size %d, %v; want %q, %d", tc.args, o.nemesis, o.valueSize, err,
				tc.nemesis, tc.valueSize)
		}
	}
	for _, args := range [][]string{{"-nemesis", "chaos"}, {"-value-size", "-1"}, {"-value-size", "2000000"}} {
		if _, err := parseOptions(args); err == nil {
			t.Errorf("parseOptions(%q) accepted", args)
		}
	}
}

// TestStoppable checks the victims within the failure model: a server restarted after a kill holds
// nothing until the map records its new process, so its partners must stay up meanwhile.
func TestStoppable(t *testing.T) {
	c := &cluster{}
	for _, name := range []string{"a", "b", "c"} {
		c.servers = append(c.servers, &server{name: name, done: make(chan struct{})}) // open: running
	}
	n := newNemesis(c, nil, 1, io.Discard)
	m := &zaris.ClusterMap{
		Nodes: map[zaris.NodeID]zaris.NodeInfo{"a": {Incarnation: 1}, "b": {Incarnation: 1}, "c": {Incarnation: 1}},
		Runtime: []zaris.PartitionState{
			{Owner: "a", InSync: []zaris.NodeID{"b"}},
			{Owner: "b", InSync: []zaris.NodeID{"c"}},
		},
	}
	names := func() []string {
		var out []string
		for _, s := range n.stoppable(m) {
			out = append(out, s.name)
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("stoppable with every copy live = %v, want all", got)
	}
	n.dead["b"] = 1 // b was killed and restarted; the map still lists its previous process
	if got := names(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("stoppable while b's new process is unknown = %v, want [b]", got)
	}
	m.Nodes["b"] = zaris.NodeInfo{Incarnation: 2}
	if got := names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("stoppable once the map knows b's new process = %v, want all", got)
	}
	close(c.servers[2].done) // c is down: it is no copy, and b is the only live one of partition 1
	if got := names(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("stoppable with c down = %v, want [a]", got)
	}
}
