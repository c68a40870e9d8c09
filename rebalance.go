package zaris

import (
	"slices"
)

// Rebalancing keeps the partition map matched to the members. When a node joins, drains for a graceful
// leave, or stays failed past EvictionTimeout, the leader plans the next map with Assign (as few moves as
// possible) and each changed partition becomes a move:
//
//  1. copy: the incoming nodes join the partition's assignment, and the owner feeds them snapshots and the
//     op-log tail like any replica while it keeps serving. At most MaxMigrations copy at once.
//  2. cut-over: once every target node is in sync, an owner that hands over seals the partition (its
//     requests get OwnershipChanging), lets the new owner take the last ops and asks the leader to settle.
//  3. settle: the target becomes the assignment, the new owner serves under the next epoch and the old
//     one answers Moved. A node no longer assigned drops its copy, so a move planned anew during the
//     cut-over, which drops the incoming nodes, voids the settle unless the new owner is in sync again.
//
// The old owner never stops serving before the new one is committed: if the cut-over cannot finish it
// reclaims the partition under a new epoch and serves again.

// planned is the map rebalancing is heading for: each partition's target, or its assignment if it stays.
func (m *ClusterMap) planned() Assignment {
	a := make(Assignment, len(m.Runtime))
	for p := range m.Runtime {
		a[p] = m.plannedFor(p)
	}
	return a
}

// plannedFor is partition p's nodes in the planned map.
func (m *ClusterMap) plannedFor(p int) []NodeID {
	if target := m.Runtime[p].Target; target != nil {
		return target
	}
	return m.Assignment[p]
}

// moving reports whether any partition has a move planned or under way.
func (m *ClusterMap) moving() bool {
	return slices.ContainsFunc(m.Runtime, func(st PartitionState) bool { return st.Target != nil })
}

// plannedNodes returns, sorted, the nodes the planned map places partitions on.
func (m *ClusterMap) plannedNodes() []NodeID {
	var ids []NodeID
	for p := range m.Runtime {
		for _, id := range m.plannedFor(p) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// targetInSync reports whether every target node of a copying partition holds all of it: the owner, or a
// replica in the in-sync set.
func (st *PartitionState) targetInSync() bool {
	if st.From == nil {
		return false
	}
	for _, id := range st.Target {
		if id != st.Owner && !slices.Contains(st.InSync, id) {
			return false
		}
	}
	return true
}

// Migration describes one partition a rebalance is moving.
type Migration struct {
	Partition int
	From, To  []NodeID
	// Copying is false while the move waits for a free slot (see Config.MaxMigrations).
	Copying bool
	// Synced of Incoming target nodes hold the whole partition; at Synced == Incoming it cuts over.
	Synced, Incoming int
}
