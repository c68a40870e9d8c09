package zaris

import (
	"maps"
	"slices"
	"testing"
)

// inSyncMap is a one-partition map owned by a at epoch 5, with b and c assigned and b in sync since log
// index 10.
func inSyncMap() *ClusterMap {
	m := newClusterMap(Layout{Segments: 1, Partitions: 1}, 3)
	m.Index = 10
	m.Assignment[0] = []NodeID{"a", "b", "c"}
	m.Runtime[0] = PartitionState{Owner: "a", Epoch: 5, Health: Degraded, InSync: []NodeID{"b"}, InSyncIndex: 10}
	return m
}

// TestInSyncDecisions checks the owner's in-sync decisions: an admission applies only at the epoch and the
// in-sync index it was decided at, and a drop voids every admission decided before it, even one that drops
// nothing.
func TestInSyncDecisions(t *testing.T) {
	admit := func(epoch, at uint64, id NodeID) *command {
		return &command{Kind: cmdAdmit, Partition: 0, Epoch: epoch, InSyncIndex: at, Node: NodeInfo{ID: id}}
	}
	drop := func(epoch uint64, ids ...NodeID) *command {
		return &command{Kind: cmdDrop, Partition: 0, Epoch: epoch, InSync: ids}
	}
	tests := []struct {
		name      string
		cmds      []*command
		inSync    []NodeID
		index     uint64 // InSyncIndex after the commands, applied at indexes 11, 12, ...
		healthyBy bool   // the partition starts Healthy
		health    Health
	}{
		{name: "admit as decided", cmds: []*command{admit(5, 10, "c")}, inSync: []NodeID{"b", "c"}, index: 11, health: Degraded},
		{name: "admit under an old epoch", cmds: []*command{admit(4, 10, "c")}, inSync: []NodeID{"b"}, index: 10, health: Degraded},
		{name: "admit decided before a change", cmds: []*command{admit(5, 9, "c")}, inSync: []NodeID{"b"}, index: 10, health: Degraded},
		{name: "admit the owner", cmds: []*command{admit(5, 10, "a")}, inSync: []NodeID{"b"}, index: 10, health: Degraded},
		{name: "admit an unassigned node", cmds: []*command{admit(5, 10, "x")}, inSync: []NodeID{"b"}, index: 10, health: Degraded},
		{name: "drop", cmds: []*command{drop(5, "b")}, inSync: []NodeID{}, index: 11, health: Degraded},
		{name: "drop under an old epoch", cmds: []*command{drop(4, "b")}, inSync: []NodeID{"b"}, index: 10, health: Degraded},
		{name: "a drop of nothing voids a pending admission",
			cmds: []*command{drop(5, "c"), admit(5, 10, "c")}, inSync: []NodeID{"b"}, index: 11, health: Degraded},
		{name: "an admission and then a drop of the same replica",
			cmds: []*command{admit(5, 10, "c"), drop(5, "c")}, inSync: []NodeID{"b"}, index: 12, health: Degraded},
		{name: "two admissions decided together: one applies",
			cmds: []*command{admit(5, 10, "c"), admit(5, 10, "c")}, inSync: []NodeID{"b", "c"}, index: 11, health: Degraded},
		{name: "a drop degrades a Healthy partition", healthyBy: true,
			cmds: []*command{drop(5, "b")}, inSync: []NodeID{}, index: 11, health: Degraded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := inSyncMap()
			if tc.healthyBy {
				m.Runtime[0].Health = Healthy
				m.Runtime[0].InSync = []NodeID{"b", "c"}
				tc.inSync = []NodeID{"c"}
			}
			for i, cmd := range tc.cmds {
				next, err := m.apply(cmd, uint64(11+i))
				if err != nil {
					t.Fatal(err)
				}
				m = next
			}
			st := m.Runtime[0]
			if !slices.Equal(st.InSync, tc.inSync) && len(st.InSync)+len(tc.inSync) > 0 {
				t.Errorf("in sync %v, want %v", st.InSync, tc.inSync)
			}
			if st.InSyncIndex != tc.index || st.Health != tc.health {
				t.Errorf("in-sync index %d, health %v; want %d, %v", st.InSyncIndex, st.Health, tc.index, tc.health)
			}
		})
	}
}

// TestPromotionOfADroppedReplicaIsVoid checks that a failover decided while a replica was in sync does not
// apply once a drop (which keeps the epoch) or a restart took it out: the owner acknowledged writes without
// it since. A promotion to a replica still in sync, or to the owner itself, applies.
func TestPromotionOfADroppedReplicaIsVoid(t *testing.T) {
	promote := func(to NodeID) *command {
		return &command{Kind: cmdPromote, Partition: 0, Epoch: 5, Node: NodeInfo{ID: to}}
	}
	tests := []struct {
		name  string
		cmds  []*command
		owner NodeID
		epoch uint64
	}{
		{name: "promote an in-sync replica", cmds: []*command{promote("b")}, owner: "b", epoch: 6},
		{name: "promote the owner itself", cmds: []*command{promote("a")}, owner: "a", epoch: 6},
		{name: "promote no one", cmds: []*command{promote("")}, owner: "", epoch: 6},
		{name: "promote a replica never in sync", cmds: []*command{promote("c")}, owner: "a", epoch: 5},
		{name: "promote a replica dropped since",
			cmds: []*command{{Kind: cmdDrop, Partition: 0, Epoch: 5, InSync: []NodeID{"b"}}, promote("b")}, owner: "a", epoch: 5},
		{name: "promote a replica restarted since",
			cmds: []*command{{Kind: cmdRestarted, Node: NodeInfo{ID: "b"}}, promote("b")}, owner: "a", epoch: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := inSyncMap()
			for i, cmd := range tc.cmds {
				next, err := m.apply(cmd, uint64(11+i))
				if err != nil {
					t.Fatal(err)
				}
				m = next
			}
			if st := m.Runtime[0]; st.Owner != tc.owner || st.Epoch != tc.epoch {
				t.Errorf("owner %q at epoch %d, want %q at %d", st.Owner, st.Epoch, tc.owner, tc.epoch)
			}
		})
	}
}

// TestAdmissionOfARestartedReplica checks that an admission applies only to the replica process the owner
// found caught up: the restart of a replica that was not in sync changes no in-sync set, so only the
// process in the admission can tell that the empty new process was never found caught up.
func TestAdmissionOfARestartedReplica(t *testing.T) {
	admit := func(incarnation uint64) *command {
		return &command{Kind: cmdAdmit, Partition: 0, Epoch: 5, InSyncIndex: 10, Node: NodeInfo{ID: "c", Incarnation: incarnation}}
	}
	restart := &command{Kind: cmdUpsertNode, Node: NodeInfo{ID: "c", Incarnation: 2}}
	tests := []struct {
		name   string
		cmds   []*command
		inSync []NodeID
	}{
		{name: "the recorded process", cmds: []*command{admit(1)}, inSync: []NodeID{"b", "c"}},
		{name: "a process the map has yet to record", cmds: []*command{admit(2)}, inSync: []NodeID{"b"}},
		{name: "the predecessor of a restart recorded meanwhile", cmds: []*command{restart, admit(1)}, inSync: []NodeID{"b"}},
		{name: "a command that names no process", cmds: []*command{admit(0)}, inSync: []NodeID{"b", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := inSyncMap()
			m.Nodes = map[NodeID]NodeInfo{"a": {ID: "a", Incarnation: 1}, "b": {ID: "b", Incarnation: 1}, "c": {ID: "c", Incarnation: 1}}
			for i, cmd := range tc.cmds {
				next, err := m.apply(cmd, uint64(11+i))
				if err != nil {
					t.Fatal(err)
				}
				m = next
			}
			if got := m.Runtime[0].InSync; !slices.Equal(got, tc.inSync) {
				t.Errorf("in sync %v, want %v", got, tc.inSync)
			}
		})
	}
}

// TestInSyncIndexFollowsEveryChange checks that any command that changes a partition's in-sync set, not only
// the owner's decisions, stamps it with its log index, so admissions decided before are void.
func TestInSyncIndexFollowsEveryChange(t *testing.T) {
	m := inSyncMap()
	m.Nodes["b"] = NodeInfo{ID: "b", Incarnation: 1}
	next, err := m.apply(&command{Kind: cmdRestarted, Node: NodeInfo{ID: "b"}}, 11)
	if err != nil {
		t.Fatal(err)
	}
	if st := next.Runtime[0]; len(st.InSync) != 0 || st.InSyncIndex != 11 {
		t.Fatalf("after b restarted: %+v", st)
	}
	next, err = next.apply(&command{Kind: cmdUpsertNode, Node: NodeInfo{ID: "d"}}, 12)
	if err != nil {
		t.Fatal(err)
	}
	if next.Runtime[0].InSyncIndex != 11 {
		t.Fatalf("a change elsewhere moved the in-sync index to %d", next.Runtime[0].InSyncIndex)
	}
}

// TestCancelledMoveVoidsAdmissions checks that a plan which cancels a move voids the admissions decided
// before it, even though the incoming node was not in sync: that node discards its copy as it applies the
// plan, so what the owner found it holding is gone by the time the move starts again.
func TestCancelledMoveVoidsAdmissions(t *testing.T) {
	m := newClusterMap(Layout{Segments: 1, Partitions: 1}, 2)
	m.Index, m.Version = 10, 1
	m.Nodes = map[NodeID]NodeInfo{"a": {ID: "a"}, "b": {ID: "b"}, "c": {ID: "c"}}
	m.Assignment[0] = []NodeID{"a", "b"}
	m.Runtime[0] = PartitionState{Owner: "a", Epoch: 5, Health: Healthy, InSync: []NodeID{"b"}, InSyncIndex: 3}
	apply := func(cmd *command) {
		t.Helper()
		next, err := m.apply(cmd, m.Index+1)
		if err != nil {
			t.Fatal(err)
		}
		m = next
	}
	apply(&command{Kind: cmdPlan, Assignment: Assignment{{"c", "b"}}})
	apply(&command{Kind: cmdMigrate, Partition: 0, Epoch: 5})
	decidedAt := m.Runtime[0].InSyncIndex // the owner finds c caught up under this map
	apply(&command{Kind: cmdPlan, Assignment: Assignment{{"a", "b"}}})
	apply(&command{Kind: cmdPlan, Assignment: Assignment{{"c", "b"}}})
	apply(&command{Kind: cmdMigrate, Partition: 0, Epoch: 5})
	apply(&command{Kind: cmdAdmit, Partition: 0, Epoch: 5, InSyncIndex: decidedAt, Node: NodeInfo{ID: "c"}})
	if st := m.Runtime[0]; slices.Contains(st.InSync, "c") {
		t.Fatalf("an admission decided before the move was cancelled applied: %+v", st)
	}
	apply(&command{Kind: cmdSettle, Partition: 0, Epoch: 5, Node: NodeInfo{ID: "c"}})
	if st := m.Runtime[0]; st.Owner != "a" {
		t.Fatalf("the move settled on a node never found caught up since it discarded its copy: %+v", st)
	}
}

// TestClusterMapCloneIsDeep checks that a clone, what Node.ClusterMap hands out, shares nothing the caller
// could change with the map it came from.
func TestClusterMapCloneIsDeep(t *testing.T) {
	m := inSyncMap()
	m.Nodes["a"] = NodeInfo{ID: "a"}
	m.Draining = map[NodeID]uint64{"a": 1}
	m.Runtime[0].Target, m.Runtime[0].From = []NodeID{"a", "b"}, []NodeID{"c"}
	c := m.clone()
	c.Nodes["x"] = NodeInfo{ID: "x"}
	c.Draining["x"] = 1
	c.Assignment[0][0] = "x"
	c.Runtime[0].Owner = "x"
	c.Runtime[0].InSync[0], c.Runtime[0].Target[0], c.Runtime[0].From[0] = "x", "x", "x"
	st := m.Runtime[0]
	if len(m.Nodes) != 1 || len(m.Draining) != 1 || m.Assignment[0][0] != "a" || st.Owner != "a" || st.InSync[0] != "b" ||
		st.Target[0] != "a" || st.From[0] != "c" {
		t.Fatalf("changing the clone changed the map: %+v", m)
	}
}

// TestDrainDecisions checks how the map records a graceful leave: for the process that asked only, until
// another process under the same ID is recorded; that a map decided before the drain, placing the node, is
// void; and that a drain is over only once the node holds nothing, the only copy of a lost partition
// included.
func TestDrainDecisions(t *testing.T) {
	drain := func(id NodeID, inc uint64) *command {
		return &command{Kind: cmdDrain, Node: NodeInfo{ID: id, Incarnation: inc}}
	}
	upsert := func(id NodeID, inc uint64) *command {
		return &command{Kind: cmdUpsertNode, Node: NodeInfo{ID: id, Incarnation: inc}}
	}
	plan := func(kind commandKind, nodes ...NodeID) *command {
		return &command{Kind: kind, Assignment: Assignment{nodes}}
	}
	tests := []struct {
		name     string
		cmds     []*command
		draining map[NodeID]uint64
		void     int // how many of the commands changed nothing
	}{
		{name: "a drain is recorded with its process", cmds: []*command{drain("c", 1)}, draining: map[NodeID]uint64{"c": 1}},
		{name: "recorded twice: the second is void", cmds: []*command{drain("c", 1), drain("c", 1)},
			draining: map[NodeID]uint64{"c": 1}, void: 1},
		{name: "a drain from a process the map does not record is void", cmds: []*command{drain("c", 2)}, void: 1},
		{name: "a node not recorded yet may drain", cmds: []*command{drain("x", 7)}, draining: map[NodeID]uint64{"x": 7}},
		{name: "recording the same process again keeps the drain",
			cmds:     []*command{drain("c", 1), &command{Kind: cmdUpsertNode, Node: NodeInfo{ID: "c", DataAddr: "c:2", Incarnation: 1}}},
			draining: map[NodeID]uint64{"c": 1}},
		{name: "a new process under the ID ends the drain", cmds: []*command{drain("c", 1), upsert("c", 2)}},
		{name: "the new process is recorded first: the old one's drain is void", cmds: []*command{upsert("c", 2), drain("c", 1)}, void: 1},
		{name: "a plan that places a draining node is void", cmds: []*command{drain("c", 1), plan(cmdPlan, "a", "b", "c")},
			draining: map[NodeID]uint64{"c": 1}, void: 1},
		{name: "so is such an assignment", cmds: []*command{drain("c", 1), plan(cmdAssign, "c", "a", "b")},
			draining: map[NodeID]uint64{"c": 1}, void: 1},
		{name: "a plan without the draining node applies", cmds: []*command{drain("c", 1), plan(cmdPlan, "a", "b")},
			draining: map[NodeID]uint64{"c": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := inSyncMap()
			for _, id := range []NodeID{"a", "b", "c"} {
				m.Nodes[id] = NodeInfo{ID: id, Incarnation: 1}
			}
			void := 0
			for i, cmd := range tc.cmds {
				next, err := m.apply(cmd, uint64(11+i))
				if err != nil {
					t.Fatal(err)
				}
				if next.sameAs(m) {
					void++
				}
				m = next
			}
			if len(m.Draining)+len(tc.draining) > 0 && !maps.Equal(m.Draining, tc.draining) || void != tc.void {
				t.Fatalf("draining %v with %d void; want %v with %d", m.Draining, void, tc.draining, tc.void)
			}
		})
	}
	m := inSyncMap()
	if m.holds("x") || !m.holds("a") || !m.holds("c") {
		t.Fatal("holds: want the owner and assigned nodes only")
	}
	m.Assignment[0], m.Runtime[0] = nil, PartitionState{Epoch: 6, Health: Unavailable, InSync: []NodeID{"x"}}
	if !m.holds("x") {
		t.Fatal("the last holder of a lost partition's acknowledged writes is done draining")
	}
}

// movingMap is a one-partition map (replication factor 2) moving from [c d] to [a d], owned by d at epoch 3,
// with the incoming a in sync: d may hand it over to a.
func movingMap() *ClusterMap {
	m := newClusterMap(Layout{Segments: 1, Partitions: 1}, 2)
	m.Index = 10
	m.Assignment[0] = []NodeID{"c", "d", "a"}
	m.Runtime[0] = PartitionState{Owner: "d", Epoch: 3, Health: Healthy, InSync: []NodeID{"c", "a"}, InSyncIndex: 10,
		Target: []NodeID{"a", "d"}, From: []NodeID{"c", "d"}}
	return m
}

// TestSettleDecisions checks when a move settles: a hand-over applies only to a target primary that holds
// the whole partition, so a move planned anew while its owner was sealed cannot give the partition to a node
// that dropped its copy.
func TestSettleDecisions(t *testing.T) {
	settle := func(epoch uint64, to NodeID) func(*ClusterMap) *command {
		return func(*ClusterMap) *command {
			return &command{Kind: cmdSettle, Partition: 0, Epoch: epoch, Node: NodeInfo{ID: to}}
		}
	}
	plan := func(nodes ...NodeID) func(*ClusterMap) *command {
		return func(*ClusterMap) *command { return &command{Kind: cmdPlan, Assignment: Assignment{nodes}} }
	}
	migrate := func(m *ClusterMap) *command {
		return &command{Kind: cmdMigrate, Partition: 0, Epoch: m.Runtime[0].Epoch}
	}
	admit := func(id NodeID) func(*ClusterMap) *command {
		return func(m *ClusterMap) *command {
			st := m.Runtime[0]
			return &command{Kind: cmdAdmit, Partition: 0, Epoch: st.Epoch, InSyncIndex: st.InSyncIndex, Node: NodeInfo{ID: id}}
		}
	}
	tests := []struct {
		name     string
		lost     bool // the partition starts with no owner, its target [a b]
		steps    []func(*ClusterMap) *command
		owner    NodeID
		epoch    uint64
		assigned []NodeID
		inSync   []NodeID
		health   Health
	}{
		{name: "nothing decided yet", steps: nil, owner: "d", epoch: 3,
			assigned: []NodeID{"c", "d", "a"}, inSync: []NodeID{"c", "a"}, health: Healthy},
		{name: "hand-over to the target primary", steps: []func(*ClusterMap) *command{settle(3, "a")},
			owner: "a", epoch: 4, assigned: []NodeID{"a", "d"}, inSync: []NodeID{"d"}, health: Healthy},
		{name: "hand-over under an old epoch", steps: []func(*ClusterMap) *command{settle(2, "a")},
			owner: "d", epoch: 3, assigned: []NodeID{"c", "d", "a"}, inSync: []NodeID{"c", "a"}, health: Healthy},
		{name: "hand-over to another node", steps: []func(*ClusterMap) *command{settle(3, "c")},
			owner: "d", epoch: 3, assigned: []NodeID{"c", "d", "a"}, inSync: []NodeID{"c", "a"}, health: Healthy},
		{name: "hand-over after the move was planned anew", steps: []func(*ClusterMap) *command{plan("a", "b"), settle(3, "a")},
			owner: "d", epoch: 3, assigned: []NodeID{"c", "d"}, inSync: []NodeID{"c"}, health: Healthy},
		{name: "hand-over after the new plan's copy caught up",
			steps: []func(*ClusterMap) *command{plan("a", "b"), migrate, admit("a"), settle(3, "a")},
			owner: "a", epoch: 4, assigned: []NodeID{"a", "b"}, inSync: nil, health: Degraded},
		{name: "the owner stays", steps: []func(*ClusterMap) *command{plan("d", "b"), migrate, settle(3, "d")},
			owner: "d", epoch: 3, assigned: []NodeID{"d", "b"}, inSync: nil, health: Degraded},
		{name: "a lost partition settles empty on its target", lost: true, steps: []func(*ClusterMap) *command{settle(3, "a")},
			owner: "a", epoch: 4, assigned: []NodeID{"a", "b"}, inSync: nil, health: Degraded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := movingMap()
			if tc.lost {
				m.Assignment[0] = []NodeID{"c", "d"}
				m.Runtime[0] = PartitionState{Epoch: 3, Health: Unavailable, Target: []NodeID{"a", "b"}}
			}
			for i, step := range tc.steps {
				next, err := m.apply(step(m), uint64(11+i))
				if err != nil {
					t.Fatal(err)
				}
				m = next
			}
			st := m.Runtime[0]
			if st.Owner != tc.owner || st.Epoch != tc.epoch || st.Health != tc.health {
				t.Errorf("owner %q epoch %d %v; want %q epoch %d %v", st.Owner, st.Epoch, st.Health, tc.owner, tc.epoch, tc.health)
			}
			if !slices.Equal(m.Assignment[0], tc.assigned) || !slices.Equal(st.InSync, tc.inSync) && len(st.InSync)+len(tc.inSync) > 0 {
				t.Errorf("assigned %v in sync %v; want %v, %v", m.Assignment[0], st.InSync, tc.assigned, tc.inSync)
			}
		})
	}
}

// TestFetchedMapMustFit checks the shape a map fetched from a peer must have before the router indexes it
// by partition and segment: a map with one partition state too many made the router panic.
func TestFetchedMapMustFit(t *testing.T) {
	layout := Layout{Segments: 8, Partitions: 4}
	for _, tc := range []struct {
		name  string
		tweak func(*ClusterMap)
		fits  bool
	}{
		{"as built", func(*ClusterMap) {}, true},
		{"a state too many", func(m *ClusterMap) { m.Runtime = append(m.Runtime, PartitionState{Owner: "a"}) }, false},
		{"a state too few", func(m *ClusterMap) { m.Runtime = m.Runtime[:3] }, false},
		{"an assignment too few", func(m *ClusterMap) { m.Assignment = m.Assignment[:3] }, false},
		{"other segments", func(m *ClusterMap) { m.Segments = 1 << 30 }, false},
		{"other partitions", func(m *ClusterMap) { m.Partitions = 2 }, false},
	} {
		m := routedMap(3, "a", "b")
		tc.tweak(m)
		if err := m.fits(layout); (err == nil) != tc.fits {
			t.Errorf("%s: fits = %v, want fitting %v", tc.name, err, tc.fits)
		}
	}
}
