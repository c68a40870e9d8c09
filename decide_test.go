package zaris

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
)

// tableProbe answers the leader's probes from a table: nodes in silent answer nothing, the others answer
// with their entry in held (an empty entry: answered, but cannot vouch for its copies).
type tableProbe struct {
	silent map[NodeID]bool
	held   map[NodeID]probeAnswer
}

func (p tableProbe) reachable(id NodeID) bool { return !p.silent[id] }

func (p tableProbe) copies(id NodeID) probeAnswer {
	if p.silent[id] {
		return probeAnswer{}
	}
	if a, ok := p.held[id]; ok {
		return a
	}
	return probeAnswer{answered: true}
}

// holding is the answer of a node whose copy of segment 0 is at revision rev of the history of epoch line.
func holding(rev, line uint64) probeAnswer {
	return probeAnswer{revisions: map[int]uint64{0: rev}, lines: map[int]uint64{0: line}, answered: true}
}

var decideRules = leaderRules{FailoverTimeout: 10 * time.Second, HealCooldown: 5 * time.Second, EvictionTimeout: time.Minute,
	LostPartitionTimeout: time.Hour, MaxMigrations: 1, BootstrapExpect: 3}

// decideCase is one rule: a map, the members, the probes' answers and how long conditions have held, and
// the decisions expected.
type decideCase struct {
	name    string
	setup   func(m *ClusterMap) // changes the base map: one partition owned by a at epoch 5, Healthy on a, b, c
	members []member            // a, b and c alive as the map knows them unless set
	probe   tableProbe
	held    time.Duration // how long every condition the leader times has held already (0: it starts now)
	// failedFor, when set, is how long failed members have been failed, instead of held.
	failedFor time.Duration
	want      []string
}

func baseDecideMap() *ClusterMap {
	m := newClusterMap(Layout{Segments: 1, Partitions: 1}, 3)
	m.Version = 1
	for _, id := range []NodeID{"a", "b", "c"} {
		m.Nodes[id] = NodeInfo{ID: id, DataAddr: string(id) + ":1", Incarnation: 1}
	}
	m.Assignment[0] = []NodeID{"a", "b", "c"}
	m.Runtime[0] = PartitionState{Owner: "a", Epoch: 5, Health: Healthy, InSync: []NodeID{"b", "c"}}
	return m
}

func mbr(id NodeID, status serf.MemberStatus) member {
	return member{ID: id, DataAddr: string(id) + ":1", Incarnation: 1, Status: status}
}

func aliveABC() []member {
	return []member{mbr("a", serf.StatusAlive), mbr("b", serf.StatusAlive), mbr("c", serf.StatusAlive)}
}

// withMember returns the members with id's entry replaced by mb.
func withMember(members []member, mb member) []member {
	out := slices.DeleteFunc(slices.Clone(members), func(x member) bool { return x.ID == mb.ID })
	return append(out, mb)
}

func describe(d decision) string {
	switch d.Kind {
	case cmdPromote:
		s := fmt.Sprintf("promote p%d to %q at %d", d.Partition, d.Node.ID, d.Epoch)
		if d.Source != "" {
			s += " from " + string(d.Source)
		}
		return s
	case cmdUpsertNode:
		return fmt.Sprintf("record %s#%d intact=%v", d.Node.ID, d.Node.Incarnation, d.Intact)
	case cmdRestarted:
		return "restarted " + string(d.Node.ID)
	case cmdHeal:
		return fmt.Sprintf("heal p%d at %d", d.Partition, d.Epoch)
	case cmdAssign, cmdPlan:
		var parts []string
		for _, nodes := range d.Assignment {
			parts = append(parts, fmt.Sprint(nodes))
		}
		kind := map[commandKind]string{cmdAssign: "assign", cmdPlan: "plan"}[d.Kind]
		return kind + " " + strings.Join(parts, " ")
	case cmdMigrate:
		return fmt.Sprintf("migrate p%d", d.Partition)
	case cmdSettle:
		return fmt.Sprintf("settle p%d on %s", d.Partition, d.Node.ID)
	}
	return fmt.Sprintf("command %d", d.Kind)
}

func runDecideCases(t *testing.T, cases []decideCase) {
	t.Helper()
	now := time.Unix(1e9, 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := baseDecideMap()
			if tc.setup != nil {
				tc.setup(m)
			}
			members := tc.members
			if members == nil {
				members = aliveABC()
			}
			d := &decider{rules: decideRules, clocks: newLeaderClocks(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if tc.held > 0 {
				startClocks(d, m, members, now.Add(-tc.held))
			}
			if tc.failedFor > 0 {
				for _, mb := range members {
					d.clocks.failed[mb.ID] = now.Add(-tc.failedFor)
				}
			}
			got := []string{}
			for _, dec := range d.decide(leaderView{Map: m, Layout: m.Layout(), Members: members, Now: now, Probe: tc.probe}) {
				got = append(got, describe(dec))
			}
			if want := append([]string{}, tc.want...); !slices.Equal(got, want) {
				t.Fatalf("decisions:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// startClocks starts every countdown the leader could start for m and members at since.
func startClocks(d *decider, m *ClusterMap, members []member, since time.Time) {
	for _, mb := range members {
		d.clocks.suspected[mb.ID] = since
		d.clocks.failed[mb.ID] = since
	}
	for p := range m.Runtime {
		d.clocks.lost[p] = since
		d.clocks.healable[p] = since
	}
}

// TestDecideFailover has one case per rule of failover: a gossip failure is a rumour checked by a direct
// probe, an owner is confirmed dead only after FailoverTimeout, the most caught-up live in-sync replica takes
// over under the next epoch, syncing first from a peer holding more, and a partition with no in-sync replica
// left becomes Unavailable unless one that may be intact did not answer.
func TestDecideFailover(t *testing.T) {
	aFailed := withMember(aliveABC(), mbr("a", serf.StatusFailed))
	silentA := map[NodeID]bool{"a": true}
	runDecideCases(t, []decideCase{
		{name: "failed owner that answers a direct probe keeps its partition", members: aFailed, held: 10 * time.Second},
		{name: "silent owner is only suspected before FailoverTimeout", members: aFailed, held: 9 * time.Second,
			probe: tableProbe{silent: silentA}},
		{name: "silent owner for FailoverTimeout: the most caught-up in-sync replica takes over", members: aFailed,
			held: 10 * time.Second, probe: tableProbe{silent: silentA, held: map[NodeID]probeAnswer{"b": holding(10, 5), "c": holding(12, 5)}},
			want: []string{`promote p0 to "c" at 5`}},
		{name: "an assigned peer outside the in-sync set holding more is the source to sync from first", members: aFailed,
			setup: func(m *ClusterMap) { m.Runtime[0].InSync = []NodeID{"b"}; m.Runtime[0].Health = Degraded },
			held:  10 * time.Second, probe: tableProbe{silent: silentA, held: map[NodeID]probeAnswer{"b": holding(10, 5), "c": holding(14, 5)}},
			want: []string{`promote p0 to "b" at 5 from c`}},
		{name: "a peer of an older history is no source", members: aFailed,
			setup: func(m *ClusterMap) { m.Runtime[0].InSync = []NodeID{"b"}; m.Runtime[0].Health = Degraded },
			held:  10 * time.Second, probe: tableProbe{silent: silentA, held: map[NodeID]probeAnswer{"b": holding(10, 5), "c": holding(14, 3)}},
			want: []string{`promote p0 to "b" at 5`}},
		{name: "no live in-sync replica: Unavailable", members: withMember(aFailed, mbr("b", serf.StatusFailed)),
			setup: func(m *ClusterMap) { m.Runtime[0].InSync = []NodeID{"b"}; m.Runtime[0].Health = Degraded },
			held:  10 * time.Second, probe: tableProbe{silent: map[NodeID]bool{"a": true, "b": true}},
			want: []string{`promote p0 to "" at 5`}},
		{name: "an in-sync replica gossip calls alive did not answer: wait", members: aFailed,
			setup: func(m *ClusterMap) { m.Runtime[0].InSync = []NodeID{"b"}; m.Runtime[0].Health = Degraded },
			held:  10 * time.Second, probe: tableProbe{silent: map[NodeID]bool{"a": true, "b": true}}},
		{name: "a clean leave needs no suspicion", members: withMember(aliveABC(), mbr("a", serf.StatusLeft)),
			probe: tableProbe{held: map[NodeID]probeAnswer{"b": holding(10, 5), "c": holding(10, 5)}},
			want:  []string{`promote p0 to "b" at 5`, "plan [b c]"}},
	})
}

// TestDecideRestarts has one case per rule for a restarted owner: without intact copies it leaves every
// in-sync set and its partitions fail over before the map records it; with intact copies, the most
// caught-up of it and its in-sync replicas keeps each partition under the next epoch.
func TestDecideRestarts(t *testing.T) {
	restarted := func(intact bool) []member {
		a := mbr("a", serf.StatusAlive)
		a.Incarnation, a.Intact = 2, intact
		return withMember(aliveABC(), a)
	}
	caughtUp := map[NodeID]probeAnswer{"a": holding(10, 5), "b": holding(9, 5), "c": holding(10, 5)}
	runDecideCases(t, []decideCase{
		{name: "restarted owner fails over, then is recorded", members: restarted(false),
			probe: tableProbe{held: map[NodeID]probeAnswer{"b": holding(10, 5), "c": holding(9, 5)}},
			want:  []string{`promote p0 to "b" at 5`, "record a#2 intact=false"}},
		{name: "restarted replica leaves the in-sync sets as it is recorded", members: restarted(false),
			setup: func(m *ClusterMap) { m.Runtime[0].Owner, m.Runtime[0].InSync = "b", []NodeID{"a", "c"} },
			want:  []string{"record a#2 intact=false"}},
		{name: "restarted owner that also replicates leaves the in-sync sets first", members: restarted(false),
			setup: func(m *ClusterMap) {
				addPartition(m, PartitionState{Owner: "b", Epoch: 2, Health: Healthy, InSync: []NodeID{"a", "c"}}, "b", "a", "c")
			},
			probe: tableProbe{held: map[NodeID]probeAnswer{"b": holding(10, 5), "c": holding(9, 5)}},
			want:  []string{"restarted a", `promote p0 to "b" at 5`, "record a#2 intact=false"}},
		{name: "restarted owner with intact copies keeps its partition when it holds the most", members: restarted(true),
			probe: tableProbe{held: caughtUp}, want: []string{`promote p0 to "a" at 5`, "record a#2 intact=true"}},
		{name: "restarted owner with intact copies hands over to a replica holding more", members: restarted(true),
			probe: tableProbe{held: map[NodeID]probeAnswer{"a": holding(9, 5), "b": holding(11, 5), "c": holding(10, 5)}},
			want:  []string{`promote p0 to "b" at 5`, "record a#2 intact=true"}},
	})
}

// TestDecideLostPartitions has one case per rule for a partition with no owner: it goes back to a holder of
// every acknowledged write alive again as the same process; it is recreated empty on an alive assigned node
// after EvictionTimeout when its holders kept it in memory, after LostPartitionTimeout when one keeps it on
// disk; never with no assigned node alive, nor while a move relocates it.
func TestDecideLostPartitions(t *testing.T) {
	lost := func(m *ClusterMap) {
		m.Runtime[0] = PartitionState{Epoch: 7, Health: Unavailable, InSync: []NodeID{"a"}}
	}
	aFailed := func(durable bool) []member {
		a := mbr("a", serf.StatusFailed)
		a.Durable = durable
		return withMember(aliveABC(), a)
	}
	silentA := tableProbe{silent: map[NodeID]bool{"a": true}}
	runDecideCases(t, []decideCase{
		{name: "its holder back as the same process takes it again", setup: lost,
			probe: tableProbe{held: map[NodeID]probeAnswer{"a": holding(3, 7)}}, want: []string{`promote p0 to "a" at 7`}},
		{name: "lost less than EvictionTimeout", setup: lost, members: aFailed(false), held: 59 * time.Second, probe: silentA},
		{name: "held in memory, lost for EvictionTimeout: recreated empty on an alive assigned node", setup: lost,
			members: aFailed(false), held: time.Minute, failedFor: time.Second, probe: silentA, want: []string{`promote p0 to "b" at 7`}},
		{name: "holder failed for EvictionTimeout: planned out instead", setup: lost,
			members: aFailed(false), held: time.Minute, probe: silentA, want: []string{"plan [b c]"}},
		{name: "held on a failed node's disk: waits past EvictionTimeout", setup: lost, members: aFailed(true),
			held: 59 * time.Minute, probe: silentA},
		{name: "held on a failed node's disk for LostPartitionTimeout: given up", setup: lost, members: aFailed(true),
			held: time.Hour, failedFor: time.Second, probe: silentA, want: []string{`promote p0 to "b" at 7`}},
		{name: "no assigned node alive", setup: lost, held: 2 * time.Hour, failedFor: time.Second, probe: silentA,
			members: []member{mbr("a", serf.StatusFailed), mbr("b", serf.StatusFailed), mbr("c", serf.StatusFailed)}},
		{name: "moving, it waits for its holder as long", setup: func(m *ClusterMap) { lost(m); m.Runtime[0].Target = []NodeID{"b", "c", "a"} },
			members: aFailed(false), held: 59 * time.Second, probe: silentA},
		{name: "moving, once given up it settles empty on its target", setup: func(m *ClusterMap) { lost(m); m.Runtime[0].Target = []NodeID{"b", "c", "a"} },
			members: aFailed(false), held: time.Minute, failedFor: time.Second, probe: silentA, want: []string{"settle p0 on b"}},
		{name: "its holder alive as the same process but silent: never recreated", setup: lost,
			held: 2 * time.Hour, failedFor: time.Second, probe: silentA},
		{name: "its holder alive as the same process but silent, moving: never settled empty",
			setup:   func(m *ClusterMap) { lost(m); m.Runtime[0].Target = []NodeID{"b", "c", "a"} },
			members: aliveABC(), held: 2 * time.Hour, failedFor: time.Second, probe: silentA},
		{name: "its holder alive and leaving, silent: never recreated", setup: lost,
			members: withMember(aliveABC(), member{ID: "a", DataAddr: "a:1", Incarnation: 1, Status: serf.StatusAlive, Leaving: true}),
			held:    2 * time.Hour, failedFor: time.Second, probe: silentA, want: []string{"plan [b c]"}},
		{name: "its holder alive but answers it holds nothing: recreated empty at EvictionTimeout", setup: lost,
			held: time.Minute, failedFor: time.Second, want: []string{`promote p0 to "a" at 7`}},
		{name: "its holder restarted in memory under the same name: recreated empty at EvictionTimeout", setup: lost,
			members: withMember(aliveABC(), member{ID: "a", DataAddr: "a:1", Incarnation: 2, Status: serf.StatusAlive}),
			held:    time.Minute, failedFor: time.Second, probe: silentA,
			want: []string{"record a#2 intact=false", `promote p0 to "a" at 7`}},
		{name: "moving, with no holder it settles at once", setup: func(m *ClusterMap) {
			lost(m)
			m.Runtime[0].InSync, m.Runtime[0].Target = nil, []NodeID{"b", "c", "a"}
		}, members: aFailed(false), probe: silentA, want: []string{"settle p0 on b"}},
	})
}

// addPartition adds a partition in state st assigned to nodes, with a segment of its own.
func addPartition(m *ClusterMap, st PartitionState, nodes ...NodeID) {
	m.Segments++
	m.Partitions++
	m.Runtime = append(m.Runtime, st)
	m.Assignment = append(m.Assignment, nodes)
}

// TestDecideHealAndMaps covers the rest: healing after the cool-down, one decision per partition per round,
// the first map, plans on joins and evictions, and moves.
func TestDecideHealAndMaps(t *testing.T) {
	degraded := func(m *ClusterMap) { m.Runtime[0].Health = Degraded }
	withD := append(aliveABC(), mbr("d", serf.StatusAlive))
	draining := member{ID: "c", DataAddr: "c:1", Incarnation: 1, Status: serf.StatusAlive, Leaving: true}
	cDraining := withMember(withD, draining)
	joined := func(m *ClusterMap) {
		m.Nodes["d"] = NodeInfo{ID: "d", DataAddr: "d:1", Incarnation: 1}
		addPartition(m, PartitionState{Owner: "b", Epoch: 1, Health: Healthy, InSync: []NodeID{"c", "a"}}, "b", "c", "a")
	}
	runDecideCases(t, []decideCase{
		{name: "healable for less than HealCooldown", setup: degraded, held: 4 * time.Second},
		{name: "healable for HealCooldown: Healthy under the next epoch", setup: degraded, held: 5 * time.Second,
			want: []string{"heal p0 at 5"}},
		{name: "a copy missing from the in-sync set: not healable", held: time.Hour,
			setup: func(m *ClusterMap) { degraded(m); m.Runtime[0].InSync = []NodeID{"b"} }},
		{name: "a partition failing over is not healed in the same round", setup: degraded, held: 10 * time.Second,
			members: withMember(aliveABC(), mbr("a", serf.StatusFailed)),
			probe:   tableProbe{silent: map[NodeID]bool{"a": true}, held: map[NodeID]probeAnswer{"b": holding(1, 5), "c": holding(1, 5)}},
			want:    []string{`promote p0 to "b" at 5`}},
		{name: "first map once BootstrapExpect nodes are known", setup: func(m *ClusterMap) { m.Version = 0 },
			want: []string{"assign [a b c]"}},
		{name: "no first map before BootstrapExpect nodes", setup: func(m *ClusterMap) { m.Version = 0; delete(m.Nodes, "c") },
			want: []string{"record c#1 intact=false"}},
		{name: "a new member is recorded", members: withD, want: []string{"record d#1 intact=false"}},
		{name: "a recorded new member gets a plan", setup: joined, members: withD, want: []string{"plan [a b c] [b a d]"}},
		{name: "a member failed for EvictionTimeout is planned out", members: withMember(aliveABC(), mbr("c", serf.StatusFailed)),
			held: time.Minute, want: []string{"plan [a b]"}},
		{name: "a member failed for less is kept", members: withMember(aliveABC(), mbr("c", serf.StatusFailed)), held: 59 * time.Second},
		{name: "a failed member the plan already leaves out is not planned back in by a new leader's clock",
			members: withMember(withD, mbr("d", serf.StatusFailed)), held: 0,
			setup: func(m *ClusterMap) { m.Nodes["d"] = NodeInfo{ID: "d", DataAddr: "d:1", Incarnation: 1} }},
		{name: "a draining member is planned out", members: withMember(aliveABC(), draining), want: []string{"plan [a b]"}},
		{name: "a member the map records draining is planned out, whatever gossip says",
			setup: func(m *ClusterMap) { m.Draining = map[NodeID]uint64{"c": 1} }, want: []string{"plan [a b]"}},
		{name: "a failed member the map records draining is planned out at once", members: withMember(aliveABC(), mbr("c", serf.StatusFailed)),
			setup: func(m *ClusterMap) { m.Draining = map[NodeID]uint64{"c": 1} }, want: []string{"plan [a b]"}},
		{name: "moves start up to MaxMigrations", members: withD, setup: func(m *ClusterMap) {
			joined(m)
			m.Runtime[0].Target, m.Runtime[1].Target = []NodeID{"a", "b", "d"}, []NodeID{"b", "c", "d"}
		}, want: []string{"migrate p0"}},
		{name: "a move whose owner stays settles once its targets are in sync", members: cDraining, setup: func(m *ClusterMap) {
			m.Nodes["d"] = NodeInfo{ID: "d", DataAddr: "d:1", Incarnation: 1}
			m.Assignment[0] = []NodeID{"a", "b", "c", "d"}
			m.Runtime[0].Target, m.Runtime[0].From, m.Runtime[0].InSync = []NodeID{"a", "b", "d"}, []NodeID{"a", "b", "c"}, []NodeID{"b", "c", "d"}
		}, want: []string{"settle p0 on a"}},
		{name: "a move whose owner changes waits for the owner's cut-over", setup: func(m *ClusterMap) {
			m.Runtime[0].Target, m.Runtime[0].From = []NodeID{"b", "c", "a"}, []NodeID{"a", "b", "c"}
		}},
	})
}
