package zaris

import (
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/serf/serf"
)

// Rebalancing keeps the partition map matched to the members. When a node joins, drains for a graceful
// leave, or stays failed past EvictionTimeout, the leader plans the next map with Assign (as few moves as
// possible) and each changed partition becomes a move:
//
//  1. copy: the incoming nodes join the partition's assignment and the owner feeds them snapshots and the
//     op-log tail like any replica, while it keeps serving; the leader starts at most MaxMigrations at once;
//  2. cut-over: once every target node is in sync, an owner that hands over seals the partition (its
//     requests get OwnershipChanging), lets the new owner take the last ops and asks the leader to settle;
//  3. settle: the target becomes the assignment, the new owner serves under the next epoch and the old
//     one answers Moved. A node no longer assigned drops its copy.
//
// The old owner never stops serving before the new one is committed: if the cut-over cannot finish it
// reclaims the partition under a new epoch and serves again.

// rebalance is the leader's part: plan when the placeable nodes differ from the planned ones, then start
// and settle moves. It runs with reconcile.
func (n *Node) rebalance(members []member) error {
	m := n.fsm.clusterMap()
	if m.Version == 0 {
		return nil
	}
	live := n.placeable(m, members)
	if len(live) > 0 && !slices.Equal(live, m.plannedNodes()) {
		next := Assign(m.planned(), live, m.Partitions, m.ReplicationFactor)
		copies, primaries := m.planned().Moves(next)
		n.log.Info("rebalancing", "nodes", live, "copies", copies, "primaries", primaries)
		if err := n.commit(&command{Kind: cmdPlan, Assignment: next}); err != nil {
			return err
		}
		m = n.fsm.clusterMap()
	}
	if err := n.recreateLost(m, members); err != nil {
		return err
	}
	return n.advanceMoves(m)
}

// recreateLost carries out decideRecreations with the leader's countdowns of how long each partition has
// been lost.
func (n *Node) recreateLost(m *ClusterMap, members []member) error {
	for p, st := range m.Runtime {
		if st.Owner != "" || st.Target != nil {
			delete(n.lostSince, p)
		}
	}
	lostFor := func(p int) time.Duration { return n.lostSince.elapsed(p) }
	for _, r := range decideRecreations(m, members, lostFor, n.lostTimeouts()) {
		st := m.Runtime[r.Partition]
		if r.heldOnDisk {
			n.log.Error("recreating lost partition EMPTY: giving up the acknowledged writes on the disks of the nodes that held it",
				"partition", r.Partition, "held by", st.InSync, "waited", n.cfg.LostPartitionTimeout, "on", r.Node.ID)
		}
		n.log.Warn("recreating lost partition", "partition", r.Partition, "on", r.Node.ID, "epoch", st.Epoch+1)
		if err := n.commit(&r.command); err != nil {
			return err
		}
	}
	return nil
}

// lostTimeouts says how long a partition with no live in-sync copy waits before it is recreated empty.
type lostTimeouts struct {
	Memory time.Duration // its holders kept their copies in memory: EvictionTimeout
	Disk   time.Duration // a holder keeps its copies on disk and may bring them back: LostPartitionTimeout
}

func (n *Node) lostTimeouts() lostTimeouts {
	return lostTimeouts{Memory: n.cfg.EvictionTimeout, Disk: n.cfg.LostPartitionTimeout}
}

// recreation is a decision to recreate a lost partition empty.
type recreation struct {
	command
	heldOnDisk bool // a node that held it keeps its copies on disk: what it held is given up
}

// decideRecreations gives each partition lost for its timeout (no owner, no move under way), whose assigned
// nodes include an alive member, to the first of them: the partition starts again empty there. (A
// partition whose nodes are evicted is relocated by the plan instead.) It is a pure function of the map,
// the members and how long each partition has been lost.
func decideRecreations(m *ClusterMap, members []member, lostFor func(p int) time.Duration, wait lostTimeouts) []recreation {
	alive := func(id NodeID) bool {
		return slices.ContainsFunc(members, func(mb member) bool { return mb.ID == id && mb.Status == serf.StatusAlive })
	}
	durable := durableMembers(members)
	var out []recreation
	for p, st := range m.Runtime {
		if st.Owner != "" || st.Target != nil {
			continue
		}
		lost := lostFor(p) // counted from the first decision that saw it lost
		i := slices.IndexFunc(m.Assignment[p], alive)
		onDisk := heldOnDisk(st, durable)
		timeout := wait.Memory
		if onDisk {
			timeout = wait.Disk
		}
		if i < 0 || lost < timeout {
			continue
		}
		out = append(out, recreation{heldOnDisk: onDisk,
			command: command{Kind: cmdPromote, Partition: p, Epoch: st.Epoch, Node: NodeInfo{ID: m.Assignment[p][i]}}})
	}
	return out
}

// durableMembers returns the members whose copies outlive their process.
func durableMembers(members []member) map[NodeID]bool {
	durable := map[NodeID]bool{}
	for _, mb := range members {
		if mb.Durable {
			durable[mb.ID] = true
		}
	}
	return durable
}

// heldOnDisk reports whether a lost partition in state st (no owner; its in-sync list keeps the nodes that
// held every acknowledged write) was held by a node that keeps its copies on disk.
func heldOnDisk(st PartitionState, durable map[NodeID]bool) bool {
	return st.Owner == "" && slices.ContainsFunc(st.InSync, func(id NodeID) bool { return durable[id] })
}

// holdsLost reports whether node id is among the holders of a lost partition.
func holdsLost(m *ClusterMap, id NodeID) bool {
	return slices.ContainsFunc(m.Runtime, func(st PartitionState) bool {
		return st.Owner == "" && slices.Contains(st.InSync, id)
	})
}

// placeable returns, sorted, the map's nodes that may hold partitions: alive, not lite and not draining, or
// failed for less than EvictionTimeout, or, holding a lost partition on its disk, for less than
// LostPartitionTimeout. It remembers since when each member has been failed.
func (n *Node) placeable(m *ClusterMap, members []member) []NodeID {
	var ids []NodeID
	failed := map[NodeID]bool{}
	for _, mb := range members {
		if _, known := m.Nodes[mb.ID]; !known || mb.Lite {
			continue
		}
		switch mb.Status {
		case serf.StatusAlive:
			if !mb.Leaving {
				ids = append(ids, mb.ID)
			}
		case serf.StatusFailed:
			failed[mb.ID] = true
			failedFor := n.failedSince.elapsed(mb.ID)
			awaited := mb.Durable && holdsLost(m, mb.ID)
			if failedFor < n.cfg.EvictionTimeout || awaited && failedFor < n.cfg.LostPartitionTimeout {
				ids = append(ids, mb.ID)
			}
		}
	}
	maps.DeleteFunc(n.failedSince, func(id NodeID, _ time.Time) bool { return !failed[id] })
	slices.Sort(ids)
	return ids
}

// planned is the map rebalancing is heading for: each partition's target, or its assignment if it stays.
func (m *ClusterMap) planned() Assignment {
	a := make(Assignment, len(m.Runtime))
	for p, st := range m.Runtime {
		a[p] = st.Target
		if a[p] == nil {
			a[p] = m.Assignment[p]
		}
	}
	return a
}

// moving reports whether any partition has a move planned or under way.
func (m *ClusterMap) moving() bool {
	return slices.ContainsFunc(m.Runtime, func(st PartitionState) bool { return st.Target != nil })
}

// plannedNodes returns, sorted, the nodes the planned map places partitions on.
func (m *ClusterMap) plannedNodes() []NodeID {
	var ids []NodeID
	for _, nodes := range m.planned() {
		for _, id := range nodes {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// advanceMoves starts copies up to MaxMigrations and settles the moves that need no hand-over: those whose
// owner stays, once every target node is in sync, and those with no owner at all (nothing left to copy).
// Moves whose owner changes are settled at the owner's request after its cut-over (cutover.go).
func (n *Node) advanceMoves(m *ClusterMap) error {
	copying := 0
	for _, st := range m.Runtime {
		if st.From != nil {
			copying++
		}
	}
	for p, st := range m.Runtime {
		var cmd *command
		switch {
		case st.Target == nil, st.Health == Recovering:
		case st.Owner == "":
			cmd = &command{Kind: cmdSettle, Partition: p, Epoch: st.Epoch, Node: NodeInfo{ID: st.Target[0]}}
		case st.From == nil:
			if copying < n.cfg.MaxMigrations {
				cmd = &command{Kind: cmdMigrate, Partition: p, Epoch: st.Epoch}
				copying++
			}
		case st.Target[0] == st.Owner && st.targetInSync():
			cmd = &command{Kind: cmdSettle, Partition: p, Epoch: st.Epoch, Node: NodeInfo{ID: st.Owner}}
		}
		if cmd != nil {
			if err := n.commit(cmd); err != nil {
				return err
			}
		}
	}
	return nil
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

// Migrations lists the partitions being moved, as this node's map knows them; empty when the cluster is
// balanced.
func (n *Node) Migrations() []Migration {
	m := n.fsm.clusterMap()
	var out []Migration
	for p, st := range m.Runtime {
		if st.Target == nil {
			continue
		}
		mg := Migration{Partition: p, From: m.Assignment[p], To: st.Target, Copying: st.From != nil}
		if mg.Copying {
			mg.From = st.From
		}
		for _, id := range st.Target {
			if slices.Contains(mg.From, id) {
				continue
			}
			mg.Incoming++
			if mg.Copying && (id == st.Owner || slices.Contains(st.InSync, id)) {
				mg.Synced++
			}
		}
		out = append(out, mg)
	}
	return out
}
