package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/chaos"
)

// Under -nemesis partition the servers' network is cut, one fault at a time, in one of five shapes (see
// faultShape), and during most faults one server is SIGKILLed and restarted later, before or after the
// heal: failures overlap. Each fault is healed before the next; everything is healed at the end.

// faultShape is the kind of network fault a step of -nemesis partition makes.
type faultShape int

const (
	shapeSplit         faultShape = iota // two sides with no traffic between them either way
	shapeOneWay                          // one direction only: one link, or a server's outgoing or incoming traffic
	shapeIsolateLeader                   // the control-plane leader cut from every other server both ways
	shapeOwnerReplicas                   // a partition's owner cut from its replicas both ways
	shapeBridge                          // two sides that only one server reaches both of
	shapeCount
)

// String names the shape in the report.
func (s faultShape) String() string {
	switch s {
	case shapeSplit:
		return "split"
	case shapeOneWay:
		return "one-way"
	case shapeIsolateLeader:
		return "isolate-leader"
	case shapeOwnerReplicas:
		return "owner-from-replicas"
	case shapeBridge:
		return "bridge"
	}
	return fmt.Sprintf("faultShape(%d)", int(s))
}

// link is one direction between two servers: from's packets to to are dropped.
type link struct{ from, to string }

// netFault is one network fault: the links it drops and the servers whose gossip with the lite member it
// cuts both ways, so that the lite member, which reaches every server, relays no probe across the cut.
type netFault struct {
	shape   faultShape
	desc    string
	drops   []link
	liteCut []string
}

// cuts reports whether f drops a's packets to b.
func (f netFault) cuts(a, b string) bool { return slices.Contains(f.drops, link{a, b}) }

// partitionStep is one step of -nemesis partition, drawn in full before it starts, so a seed replays the
// same draws whatever the cluster does.
type partitionStep struct {
	pause   time.Duration // before the fault
	shape   faultShape
	pick    uint64        // chooses the servers the fault cuts
	hold    time.Duration // from the fault to its heal
	kill    bool          // whether a server is SIGKILLed during the fault
	killAt  time.Duration // when, after the fault began; always before the heal
	victim  uint64        // chooses the victim among those the failure model allows
	downFor time.Duration // from the kill to the restart, which may come after the heal
}

// drawPartitionStep draws a step: a pause of 0.5-2 s, a fault held 2-6 s, and in two steps of three a
// kill within the fault's first 10-90% and a restart 0.5-4 s later.
func drawPartitionStep(rng *rand.Rand) partitionStep {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	st := partitionStep{
		pause:   ms(500 + rng.IntN(1501)),
		shape:   faultShape(rng.IntN(int(shapeCount))),
		pick:    rng.Uint64(),
		hold:    ms(2000 + rng.IntN(4001)),
		kill:    rng.IntN(3) > 0,
		victim:  rng.Uint64(),
		downFor: ms(500 + rng.IntN(3501)),
	}
	st.killAt = time.Duration(float64(st.hold) * (0.1 + 0.8*rng.Float64()))
	return st
}

// stepEvent is one action of a step, at an offset from the fault.
type stepEvent struct {
	at   time.Duration
	what string // "kill", "heal" or "restart"
}

// timeline orders the step's actions after the fault: the heal, and the kill and restart if it kills.
func (st partitionStep) timeline() []stepEvent {
	events := []stepEvent{{st.hold, "heal"}}
	if st.kill {
		events = append(events, stepEvent{st.killAt, "kill"}, stepEvent{st.killAt + st.downFor, "restart"})
	}
	slices.SortStableFunc(events, func(a, b stepEvent) int { return cmp.Compare(a.at, b.at) })
	return events
}

// planFault chooses the servers a fault of the given shape cuts among servers, with pick. Isolating the
// leader needs the leader; cutting an owner from its replicas needs m. Without them, or with too few
// servers for a bridge, it splits the servers instead.
func planFault(shape faultShape, pick uint64, servers []string, leader string, m *zaris.ClusterMap) netFault {
	r := rand.New(rand.NewPCG(pick, 0))
	order := slices.Clone(servers)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	switch {
	case shape == shapeOneWay:
		return oneWay(order, r.IntN(3))
	case shape == shapeIsolateLeader && slices.Contains(servers, leader):
		return isolate(leader, servers)
	case shape == shapeOwnerReplicas:
		if f, ok := ownerFromReplicas(m, servers, r); ok {
			return f
		}
	case shape == shapeBridge && len(servers) >= 3:
		return bridge(order[0], order[1:], 1+r.IntN(len(order)-2))
	}
	return split(order, 1+r.IntN(len(order)/2))
}

// split cuts the first k servers of order from the others, both ways; the lite member's gossip stays with
// the others, the larger side.
func split(order []string, k int) netFault {
	a, b := sorted(order[:k]), sorted(order[k:])
	return netFault{shape: shapeSplit, desc: fmt.Sprintf("split %v | %v", a, b), drops: across(a, b), liteCut: a}
}

// oneWay drops, by variant, order[0]'s packets to order[1] (0), to every other server (1: it hears but is
// not heard), or every other server's packets to it (2: it is heard but hears nothing).
func oneWay(order []string, variant int) netFault {
	a, others := order[0], sorted(order[1:])
	switch variant {
	case 1:
		return netFault{shape: shapeOneWay, desc: fmt.Sprintf("one-way: %s's packets to %v dropped", a, others),
			drops: oneSide([]string{a}, others)}
	case 2:
		return netFault{shape: shapeOneWay, desc: fmt.Sprintf("one-way: packets of %v to %s dropped", others, a),
			drops: oneSide(others, []string{a})}
	}
	return netFault{shape: shapeOneWay, desc: fmt.Sprintf("one-way: %s's packets to %s dropped", a, order[1]),
		drops: []link{{a, order[1]}}}
}

// isolate cuts leader from every other server both ways, its gossip with the lite member too.
func isolate(leader string, servers []string) netFault {
	others := slices.DeleteFunc(slices.Clone(servers), func(s string) bool { return s == leader })
	return netFault{shape: shapeIsolateLeader, desc: fmt.Sprintf("isolate the leader %s from %v", leader, others),
		drops: across([]string{leader}, others), liteCut: []string{leader}}
}

// ownerFromReplicas cuts the owner of a partition drawn with r from that partition's other copies (its
// assigned nodes and in-sync replicas), both ways; false when no partition has an owner and a replica
// among servers.
func ownerFromReplicas(m *zaris.ClusterMap, servers []string, r *rand.Rand) (netFault, bool) {
	var candidates []int
	for p := range m.Runtime {
		if len(replicasOf(m, p, servers)) > 0 && slices.Contains(servers, string(m.Runtime[p].Owner)) {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		return netFault{}, false
	}
	p := candidates[r.IntN(len(candidates))]
	owner, replicas := string(m.Runtime[p].Owner), replicasOf(m, p, servers)
	return netFault{shape: shapeOwnerReplicas, drops: across([]string{owner}, replicas),
		desc: fmt.Sprintf("cut %s, owner of partition %d, from its replicas %v", owner, p, replicas)}, true
}

// replicasOf returns the servers other than its owner that m assigns partition p or lists in its in-sync
// set, sorted.
func replicasOf(m *zaris.ClusterMap, p int, servers []string) []string {
	st := m.Runtime[p]
	var nodes []zaris.NodeID
	if p < len(m.Assignment) {
		nodes = append(nodes, m.Assignment[p]...)
	}
	var out []string
	for _, id := range append(nodes, st.InSync...) {
		if id != st.Owner && slices.Contains(servers, string(id)) && !slices.Contains(out, string(id)) {
			out = append(out, string(id))
		}
	}
	return sorted(out)
}

// bridge splits rest into its first k servers and the others, both ways, and leaves middle reaching both
// sides; the lite member's gossip stays with the first side.
func bridge(middle string, rest []string, k int) netFault {
	a, b := sorted(rest[:k]), sorted(rest[k:])
	return netFault{shape: shapeBridge, desc: fmt.Sprintf("bridge: %s alone reaches both %v and %v", middle, a, b),
		drops: across(a, b), liteCut: b}
}

// across returns the links between every server of a and every server of b, both ways.
func across(a, b []string) []link {
	return append(oneSide(a, b), oneSide(b, a)...)
}

// oneSide returns the links from every server of a to every server of b.
func oneSide(a, b []string) []link {
	var out []link
	for _, x := range a {
		for _, y := range b {
			out = append(out, link{x, y})
		}
	}
	return out
}

// sorted returns a sorted copy of names.
func sorted(names []string) []string { return slices.Sorted(slices.Values(names)) }

// runPartition cuts the network one fault after another, each after its pause, until ctx ends.
func (n *nemesis) runPartition(ctx context.Context) {
	for {
		st := drawPartitionStep(n.rng)
		if !chaos.Sleep(ctx, st.pause) {
			return
		}
		n.partition(ctx, st)
	}
}

// partition makes the step's fault, then heals it, kills and restarts as its timeline says. When ctx ends
// first, the final heal undoes what is left.
func (n *nemesis) partition(ctx context.Context, st partitionStep) {
	n.restartDown() // one whose restart failed
	f := planFault(st.shape, st.pick, n.serverNames(), string(n.lite.Leader()), n.lite.ClusterMap())
	if err := n.net.set(f); err != nil {
		n.step("partition failed (%s): %v", f.desc, err)
		n.healNetwork()
		return
	}
	n.countFault(f.shape)
	n.step("partition for %v: %s", st.hold, f.desc)
	start := time.Now()
	for _, ev := range st.timeline() {
		if !chaos.Sleep(ctx, time.Until(start.Add(ev.at))) {
			return
		}
		switch ev.what {
		case "kill":
			n.killDuring(f, st.victim)
		case "heal":
			n.healNetwork()
		case "restart":
			n.restartDown()
		}
	}
}

// serverNames returns the servers' names, oldest first.
func (n *nemesis) serverNames() []string {
	var out []string
	for _, s := range n.c.list() {
		out = append(out, s.name)
	}
	return out
}

// killDuring SIGKILLs, during fault f, the server pick selects among those whose death leaves every
// partition they hold a copy that is live and keeps it through f (see keepsCopy), owners first. The map
// does not yet show what f will do to it: a partition whose owner f cuts off is soon promoted to its
// replica, which is then the only copy, and an owner cut from a replica soon drops it from the in-sync
// set. Judged by the map alone, such a replica or owner would look safe to kill while it is not.
func (n *nemesis) killDuring(f netFault, pick uint64) {
	if n.isDown() {
		n.step("no kill: a server is still down")
		return
	}
	m := n.lite.ClusterMap()
	side := majoritySide(f, n.serverNames())
	var owners, others []*server
	for _, s := range n.c.list() {
		id := zaris.NodeID(s.name)
		switch {
		case !n.c.running(s) || !n.survivable(m, f, side, id):
		case m.OwnedBy(id) > 0:
			owners = append(owners, s)
		default:
			others = append(others, s)
		}
	}
	victims := owners
	if len(victims) == 0 {
		victims = others
	}
	if len(victims) == 0 {
		n.step("no kill: every server holds a copy that no other would keep through the fault")
		return
	}
	n.kill(victims[pick%uint64(len(victims))], m)
	n.mu.Lock()
	n.killsInFaults++
	n.mu.Unlock()
}

// survivable reports whether every partition id holds under m (as owner or in-sync replica) has another
// copy on a live process that keeps it through f.
func (n *nemesis) survivable(m *zaris.ClusterMap, f netFault, side map[string]bool, id zaris.NodeID) bool {
	for _, st := range m.Runtime {
		holders := append([]zaris.NodeID{st.Owner}, st.InSync...)
		if slices.Contains(holders, id) && !slices.ContainsFunc(holders, func(h zaris.NodeID) bool {
			return h != id && h != "" && n.liveCopy(m, h) && keepsCopy(f, side, st, h)
		}) {
			return false
		}
	}
	return true
}

// majoritySide returns the servers f leaves connected both ways to a majority of the servers, themselves
// included: as far as the cuts tell, the side where the control plane goes on deciding.
func majoritySide(f netFault, servers []string) map[string]bool {
	side := map[string]bool{}
	for _, a := range servers {
		reached := 0
		for _, b := range servers {
			if a == b || (!f.cuts(a, b) && !f.cuts(b, a)) {
				reached++
			}
		}
		if 2*reached > len(servers) {
			side[a] = true
		}
	}
	return side
}

// keepsCopy reports whether holder h of a partition in state st keeps its copy through fault f: it is on
// the majority side, and it is the owner, or the owner is not on that side (h may be promoted), or f
// leaves it connected both ways to the owner, which would otherwise drop it from the in-sync set.
func keepsCopy(f netFault, side map[string]bool, st zaris.PartitionState, h zaris.NodeID) bool {
	owner := string(st.Owner)
	switch {
	case !side[string(h)]:
		return false
	case h == st.Owner || !side[owner]:
		return true
	}
	return !f.cuts(owner, string(h)) && !f.cuts(string(h), owner)
}

// healNetwork removes every cut, if the servers run in namespaces and some cut is in place.
func (n *nemesis) healNetwork() {
	if n.net == nil || !n.net.active() {
		return
	}
	err := n.net.set(netFault{})
	n.mu.Lock()
	n.healFailed = err != nil
	n.mu.Unlock()
	if err != nil {
		n.step("heal failed: %v", err)
		return
	}
	n.step("heal the network")
}

// countFault tallies a fault made, by shape.
func (n *nemesis) countFault(s faultShape) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.shapes[s.String()]++
}

// noteNetwork notes the network faults made, the kills during them and whether the last heal removed
// every cut; it reports false when it did not.
func (h *harness) noteNetwork() bool {
	n := h.nem
	n.mu.Lock()
	defer n.mu.Unlock()
	total := 0
	for _, k := range n.shapes {
		total += k
	}
	h.notes = append(h.notes, fmt.Sprintf("network faults: %d (%s); servers SIGKILLed during a fault: %d",
		total, formatTally(n.shapes), n.killsInFaults))
	if n.healFailed {
		h.notes = append(h.notes, "the last heal left cuts in place: see the faults")
		return false
	}
	return true
}

// describeFaults names the shapes -nemesis partition draws from, for the flag's help.
func describeFaults() string {
	var names []string
	for s := range shapeCount {
		names = append(names, s.String())
	}
	return strings.Join(names, ", ")
}
