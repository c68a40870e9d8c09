package main

import (
	"errors"
	"io"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris"
)

// TestDrawPartitionStep checks the steps of -nemesis partition: the same for the same seed, every value
// within its bounds, the kill before the heal, and every shape drawn.
func TestDrawPartitionStep(t *testing.T) {
	a, b := rand.New(rand.NewPCG(7, 1)), rand.New(rand.NewPCG(7, 1))
	shapes := map[faultShape]int{}
	kills := 0
	for i := range 300 {
		st := drawPartitionStep(a)
		if again := drawPartitionStep(b); st != again {
			t.Fatalf("step %d differs for one seed: %+v and %+v", i, st, again)
		}
		shapes[st.shape]++
		if st.kill {
			kills++
		}
		switch {
		case st.pause < 500*time.Millisecond || st.pause > 2*time.Second:
			t.Errorf("step %d: pause %v, want 0.5-2 s", i, st.pause)
		case st.hold < 2*time.Second || st.hold > 6*time.Second:
			t.Errorf("step %d: hold %v, want 2-6 s", i, st.hold)
		case st.killAt < st.hold/10 || st.killAt >= st.hold:
			t.Errorf("step %d: kill at %v of a %v fault, want within it", i, st.killAt, st.hold)
		case st.downFor < 500*time.Millisecond || st.downFor > 4*time.Second:
			t.Errorf("step %d: down for %v, want 0.5-4 s", i, st.downFor)
		}
	}
	if len(shapes) != int(shapeCount) {
		t.Errorf("300 steps drew shapes %v, want all %d", shapes, shapeCount)
	}
	if kills < 150 || kills > 250 {
		t.Errorf("%d of 300 steps kill, want about two in three", kills)
	}
}

// TestTimeline checks a step's actions in time order: the restart may follow the heal.
func TestTimeline(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		st   partitionStep
		want []stepEvent
	}{
		{partitionStep{hold: 3 * s}, []stepEvent{{3 * s, "heal"}}},
		{partitionStep{hold: 3 * s, kill: true, killAt: s, downFor: s}, []stepEvent{{s, "kill"}, {2 * s, "restart"}, {3 * s, "heal"}}},
		{partitionStep{hold: 3 * s, kill: true, killAt: 2 * s, downFor: 2 * s}, []stepEvent{{2 * s, "kill"}, {3 * s, "heal"}, {4 * s, "restart"}}},
	} {
		if got := tc.st.timeline(); !slices.Equal(got, tc.want) {
			t.Errorf("timeline of %+v = %v, want %v", tc.st, got, tc.want)
		}
	}
}

var fiveServers = []string{"zaris-1", "zaris-2", "zaris-3", "zaris-4", "zaris-5"}

// TestPlanFaultShapes checks each shape's cuts over many picks: what is cut, what is not, and where the
// lite member's gossip goes.
func TestPlanFaultShapes(t *testing.T) {
	m := ownersMap()
	for pick := range uint64(50) {
		for shape := range shapeCount {
			f := planFault(shape, pick, fiveServers, "zaris-3", m)
			if again := planFault(shape, pick, fiveServers, "zaris-3", m); !equalFaults(f, again) {
				t.Fatalf("%v, pick %d: two plans differ: %+v and %+v", shape, pick, f, again)
			}
			if f.shape != shape {
				t.Fatalf("%v, pick %d: planned a %v", shape, pick, f.shape)
			}
			checkShape(t, f, m)
		}
	}
}

// checkShape checks that f cuts what its shape says.
func checkShape(t *testing.T, f netFault, m *zaris.ClusterMap) {
	t.Helper()
	if len(f.drops) == 0 {
		t.Fatalf("%s: cuts nothing", f.desc)
	}
	for _, d := range f.drops {
		if d.from == d.to {
			t.Fatalf("%s: drops a server's packets to itself", f.desc)
		}
	}
	switch f.shape {
	case shapeSplit:
		if len(uncut(f)) > 0 {
			t.Fatalf("%s: leaves %v out", f.desc, uncut(f))
		}
		checkSides(t, f, f.liteCut)
	case shapeOneWay:
		for _, d := range f.drops {
			if f.cuts(d.to, d.from) {
				t.Fatalf("%s: %s and %s cut both ways", f.desc, d.from, d.to)
			}
		}
	case shapeIsolateLeader:
		if !slices.Equal(f.liteCut, []string{"zaris-3"}) || len(f.drops) != 8 || !isolated(f, "zaris-3") {
			t.Fatalf("%s: want zaris-3 cut from the 4 others both ways, its gossip with the lite member too", f.desc)
		}
	case shapeOwnerReplicas:
		owner := f.drops[0].from
		if !isolatedFrom(f, owner, []string{"zaris-2", "zaris-4"}) || len(f.drops) != 4 || len(f.liteCut) > 0 {
			t.Fatalf("%s: want the owner cut both ways from its replicas zaris-2 and zaris-4 alone", f.desc)
		}
	case shapeBridge:
		middle := uncut(f)
		if len(middle) != 1 {
			t.Fatalf("%s: %v reach everyone, want one server", f.desc, middle)
		}
		checkSides(t, f, f.liteCut)
	}
}

// ownersMap is a map in which zaris-1 owns partition 0 (replicated on zaris-2, in sync on zaris-4) and
// zaris-3 owns partition 1 with no other copy.
func ownersMap() *zaris.ClusterMap {
	return &zaris.ClusterMap{
		Assignment: zaris.Assignment{{"zaris-1", "zaris-2"}, {"zaris-3"}},
		Runtime: []zaris.PartitionState{
			{Owner: "zaris-1", InSync: []zaris.NodeID{"zaris-4", "zaris-2"}},
			{Owner: "zaris-3"},
		},
	}
}

// checkSides checks a two-sided cut: the servers f cuts fall in two sides, every pair across them cut
// both ways, none within one. small is one side, the one cut from the lite member's gossip; under a split
// it is the smaller.
func checkSides(t *testing.T, f netFault, small []string) {
	t.Helper()
	other := slices.DeleteFunc(slices.Clone(fiveServers), func(s string) bool {
		return slices.Contains(small, s) || slices.Contains(uncut(f), s)
	})
	if len(small) == 0 || len(other) == 0 {
		t.Fatalf("%s: sides %v and %v", f.desc, small, other)
	}
	if len(f.drops) != 2*len(small)*len(other) {
		t.Fatalf("%s: %d links dropped, want %d", f.desc, len(f.drops), 2*len(small)*len(other))
	}
	for _, a := range small {
		if !isolatedFrom(f, a, other) {
			t.Fatalf("%s: %s not cut from %v both ways", f.desc, a, other)
		}
	}
	if f.shape == shapeSplit && len(small) > len(other) {
		t.Fatalf("%s: the lite member's gossip is on the smaller side", f.desc)
	}
}

// isolated reports whether f cuts a from every other server both ways.
func isolated(f netFault, a string) bool {
	return isolatedFrom(f, a, slices.DeleteFunc(slices.Clone(fiveServers), func(s string) bool { return s == a }))
}

// isolatedFrom reports whether f cuts a from each of others both ways.
func isolatedFrom(f netFault, a string, others []string) bool {
	for _, b := range others {
		if !f.cuts(a, b) || !f.cuts(b, a) {
			return false
		}
	}
	return true
}

// uncut returns the servers f drops no packet of, to or from.
func uncut(f netFault) []string {
	return slices.DeleteFunc(slices.Clone(fiveServers), func(s string) bool {
		return slices.ContainsFunc(f.drops, func(d link) bool { return d.from == s || d.to == s })
	})
}

// equalFaults reports whether two faults are the same.
func equalFaults(a, b netFault) bool {
	return a.shape == b.shape && a.desc == b.desc && slices.Equal(a.drops, b.drops) && slices.Equal(a.liteCut, b.liteCut)
}

// TestPlanFaultFallbacks checks that a shape that cannot be made splits the servers instead: no leader
// known, no partition with an owner and a replica, too few servers for a bridge.
func TestPlanFaultFallbacks(t *testing.T) {
	lone := &zaris.ClusterMap{Assignment: zaris.Assignment{{"zaris-1"}}, Runtime: []zaris.PartitionState{{Owner: "zaris-1"}}}
	for _, tc := range []struct {
		shape   faultShape
		servers []string
		leader  string
		m       *zaris.ClusterMap
	}{
		{shapeIsolateLeader, fiveServers, "", ownersMap()},
		{shapeIsolateLeader, fiveServers, "zaris-9", ownersMap()},
		{shapeOwnerReplicas, fiveServers, "zaris-1", lone},
		{shapeOwnerReplicas, fiveServers, "zaris-1", &zaris.ClusterMap{}},
		{shapeBridge, fiveServers[:2], "zaris-1", ownersMap()},
	} {
		if f := planFault(tc.shape, 3, tc.servers, tc.leader, tc.m); f.shape != shapeSplit {
			t.Errorf("%v with %d servers, leader %q: planned %q, want a split", tc.shape, len(tc.servers), tc.leader, f.desc)
		}
	}
}

// TestOneWayVariants checks the three one-way cuts: one link, a server not heard, a server deaf.
func TestOneWayVariants(t *testing.T) {
	order := []string{"c", "a", "b"}
	for variant, want := range [][]link{
		{{"c", "a"}},
		{{"c", "a"}, {"c", "b"}},
		{{"a", "c"}, {"b", "c"}},
	} {
		if f := oneWay(order, variant); !slices.Equal(f.drops, want) || len(f.liteCut) > 0 {
			t.Errorf("variant %d: drops %v, lite cut %v; want %v and none", variant, f.drops, f.liteCut, want)
		}
	}
}

// TestSurvivable checks the victims a fault allows, on the case that lost writes when the map alone
// decided: zaris-2, owner of partition 0 with zaris-1 in sync, is isolated; the leader soon promotes
// zaris-1, whose death would then leave no copy, though the map still shows zaris-2's.
func TestSurvivable(t *testing.T) {
	c := &cluster{}
	for _, name := range fiveServers {
		c.servers = append(c.servers, &server{name: name, done: make(chan struct{})}) // open: running
	}
	n := newNemesis(c, nil, 1, io.Discard)
	nodes := map[zaris.NodeID]zaris.NodeInfo{}
	for _, name := range fiveServers {
		nodes[zaris.NodeID(name)] = zaris.NodeInfo{Incarnation: 1}
	}
	m := &zaris.ClusterMap{Nodes: nodes, Runtime: []zaris.PartitionState{
		{Owner: "zaris-2", InSync: []zaris.NodeID{"zaris-1"}},
		{Owner: "zaris-3", InSync: []zaris.NodeID{"zaris-4"}},
	}}
	for _, tc := range []struct {
		f    netFault
		want []string
	}{
		{netFault{}, fiveServers},
		{isolate("zaris-2", fiveServers), []string{"zaris-2", "zaris-3", "zaris-4", "zaris-5"}},
		{netFault{drops: []link{{"zaris-2", "zaris-1"}}}, []string{"zaris-1", "zaris-3", "zaris-4", "zaris-5"}},
		{netFault{drops: []link{{"zaris-1", "zaris-2"}}}, []string{"zaris-1", "zaris-3", "zaris-4", "zaris-5"}},
		{split([]string{"zaris-3", "zaris-4", "zaris-1", "zaris-2", "zaris-5"}, 2), []string{"zaris-1", "zaris-2", "zaris-5"}},
	} {
		side := majoritySide(tc.f, fiveServers)
		var got []string
		for _, name := range fiveServers {
			if n.survivable(m, tc.f, side, zaris.NodeID(name)) {
				got = append(got, name)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: survivable %v, want %v", tc.f.desc, got, tc.want)
		}
	}
}

// TestMajoritySide checks which servers a fault leaves with the control plane.
func TestMajoritySide(t *testing.T) {
	for _, tc := range []struct {
		f    netFault
		want []string
	}{
		{netFault{}, fiveServers},
		{isolate("zaris-3", fiveServers), []string{"zaris-1", "zaris-2", "zaris-4", "zaris-5"}},
		{oneWay(fiveServers, 1), []string{"zaris-2", "zaris-3", "zaris-4", "zaris-5"}}, // zaris-1 unheard
		{oneWay(fiveServers, 0), fiveServers},
		{bridge("zaris-3", []string{"zaris-1", "zaris-2", "zaris-4", "zaris-5"}, 2), fiveServers},
		{split(fiveServers, 2), []string{"zaris-3", "zaris-4", "zaris-5"}},
	} {
		side := majoritySide(tc.f, fiveServers)
		var got []string
		for _, name := range fiveServers {
			if side[name] {
				got = append(got, name)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: majority side %v, want %v", tc.f.desc, got, tc.want)
		}
	}
}

// TestRulesFor checks the cuts a fault installs: a blackhole route in the sender's namespace per dropped
// link, and two gossip rules per server cut from the lite member.
func TestRulesFor(t *testing.T) {
	addrs := map[string]netip.Addr{"zaris-1": netip.MustParseAddr("10.217.5.11"), "zaris-2": netip.MustParseAddr("10.217.5.12")}
	lite := netip.MustParseAddrPort("10.217.5.1:41000")
	f := netFault{drops: []link{{"zaris-1", "zaris-2"}}, liteCut: []string{"zaris-2"}}
	want := []rule{
		{"zaris-1", "route", "blackhole 10.217.5.12/32"},
		{"zaris-2", "rule", "pref 100 to 10.217.5.1 dport 41000 blackhole"},
		{"zaris-2", "rule", "pref 100 from 10.217.5.1 dport 7946 blackhole"},
	}
	if got := rulesFor(f, addrs, lite); !slices.Equal(got, want) {
		t.Fatalf("rulesFor = %v, want %v", got, want)
	}
}

// TestLabBookkeeping checks that set installs only what is missing, removes only what is no longer
// wanted, and keeps a cut it failed to remove recorded, so the next heal tries again.
func TestLabBookkeeping(t *testing.T) {
	var calls []string
	failDel := false
	l := &netLab{
		spaces:    map[string]string{"a": "ns-a", "b": "ns-b", "c": "ns-c"},
		addrs:     map[string]netip.Addr{"a": netip.MustParseAddr("10.0.0.1"), "b": netip.MustParseAddr("10.0.0.2"), "c": netip.MustParseAddr("10.0.0.3")},
		installed: map[rule]bool{},
		ip: func(args ...string) error {
			calls = append(calls, strings.Join(args, " "))
			if failDel && args[3] == "del" {
				return errors.New("refused")
			}
			return nil
		},
	}
	expect := func(step string, err error, want ...string) {
		t.Helper()
		if err != nil && !failDel {
			t.Fatalf("%s: %v", step, err)
		}
		if !slices.Equal(calls, want) {
			t.Fatalf("%s: ran %q, want %q", step, calls, want)
		}
		calls = nil
	}
	expect("cut a from b", l.set(netFault{drops: across([]string{"a"}, []string{"b"})}),
		"-n ns-a route add blackhole 10.0.0.2/32", "-n ns-b route add blackhole 10.0.0.1/32")
	expect("then cut a's packets to b and c", l.set(netFault{drops: oneSide([]string{"a"}, []string{"b", "c"})}),
		"-n ns-b route del blackhole 10.0.0.1/32", "-n ns-a route add blackhole 10.0.0.3/32")
	failDel = true
	if err := l.set(netFault{}); err == nil {
		t.Fatal("a heal whose deletions failed reported no error")
	}
	calls = nil
	if !l.active() {
		t.Fatal("cuts that could not be removed are forgotten")
	}
	failDel = false
	expect("heal again", l.set(netFault{}),
		"-n ns-a route del blackhole 10.0.0.2/32", "-n ns-a route del blackhole 10.0.0.3/32")
	if l.active() {
		t.Fatal("cuts still recorded after a heal")
	}
}

// TestLabOwner checks which namespaces and links count as a run's, and that only a gone run's are stale.
func TestLabOwner(t *testing.T) {
	for name, want := range map[string]int{"zch123": 123, "zch123-4": 123, "zch99v12": 99} {
		if pid, ok := labOwner(name); !ok || pid != want {
			t.Errorf("labOwner(%q) = %d, %v; want %d", name, pid, ok, want)
		}
	}
	for _, name := range []string{"eth0", "zch", "zchx1", "zch12-", "zch1-2-3", "xzch1", "zch12w3"} {
		if pid, ok := labOwner(name); ok {
			t.Errorf("labOwner(%q) = %d, want none", name, pid)
		}
	}
	gone := exitedPid(t)
	self := 1 // a live process standing for this run
	names := []string{"zch1", "zch1-1", "zch" + strconv.Itoa(gone), "zch" + strconv.Itoa(gone) + "-2", "zch" + strconv.Itoa(gone) + "v2", "lo"}
	want := names[2:5]
	if got := staleNames(self, names); !slices.Equal(got, want) {
		t.Fatalf("stale names = %v, want %v", got, want)
	}
}
