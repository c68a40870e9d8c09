package zaris

import (
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

// TestClusterMapCloneIsDeep checks that a clone, what Node.ClusterMap hands out, shares nothing the caller
// could change with the map it came from.
func TestClusterMapCloneIsDeep(t *testing.T) {
	m := inSyncMap()
	m.Nodes["a"] = NodeInfo{ID: "a"}
	m.Runtime[0].Target, m.Runtime[0].From = []NodeID{"a", "b"}, []NodeID{"c"}
	c := m.clone()
	c.Nodes["x"] = NodeInfo{ID: "x"}
	c.Assignment[0][0] = "x"
	c.Runtime[0].Owner = "x"
	c.Runtime[0].InSync[0], c.Runtime[0].Target[0], c.Runtime[0].From[0] = "x", "x", "x"
	st := m.Runtime[0]
	if len(m.Nodes) != 1 || m.Assignment[0][0] != "a" || st.Owner != "a" || st.InSync[0] != "b" ||
		st.Target[0] != "a" || st.From[0] != "c" {
		t.Fatalf("changing the clone changed the map: %+v", m)
	}
}
