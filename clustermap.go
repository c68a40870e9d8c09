package zaris

import (
	"fmt"
	"maps"
	"slices"
)

// Health is the serving state of a partition.
type Health uint8

const (
	// Healthy: the active owner serves and every assigned node is in place.
	Healthy Health = iota
	// Degraded: the active owner serves, but with fewer copies than assigned.
	Degraded
	// Recovering: a new owner is syncing before it serves; clients are told ownership is changing.
	Recovering
	// Unavailable: no node can serve the partition; reads and writes fail loudly.
	Unavailable
)

func (h Health) String() string {
	switch h {
	case Healthy:
		return "Healthy"
	case Degraded:
		return "Degraded"
	case Recovering:
		return "Recovering"
	case Unavailable:
		return "Unavailable"
	}
	return fmt.Sprintf("Health(%d)", uint8(h))
}

// NodeInfo is what the cluster map records of a member.
type NodeInfo struct {
	ID       NodeID
	DataAddr string
	RESPAddr string // the Redis Cluster endpoint, "" when the node serves none
	// Incarnation identifies the node's process. When it changes, the node restarted and may have lost
	// what it held, so it leaves every in-sync set until it has caught up again.
	Incarnation uint64
}

// PartitionState is the runtime view of one partition: who serves it now, under which epoch, how healthy.
// Epochs only grow, per partition, and are never reused.
type PartitionState struct {
	Owner  NodeID
	Epoch  uint64
	Health Health
	// InSync lists the replicas known to hold every acknowledged write; Sync writes wait for all of them.
	// It shrinks only by a committed decision, so no write is acknowledged with fewer copies than it claims.
	InSync []NodeID
}

// ClusterMap is the replicated state of the control plane. A ClusterMap value is immutable once published:
// every change produces a new one, so readers never see a torn map.
type ClusterMap struct {
	// Index is the consensus log index of the last change; it orders maps, newest highest.
	Index uint64
	// Version counts partition-map regenerations (0: no map assigned yet).
	Version           uint64
	Segments          int
	Partitions        int
	ReplicationFactor int
	Nodes             map[NodeID]NodeInfo
	// Assignment is the partition map: per partition, preferred primary first, then replicas.
	Assignment Assignment
	// Runtime is the runtime map: per partition, the active owner, its epoch and health.
	Runtime []PartitionState
}

// Layout returns the key-space layout the map was built for.
func (m *ClusterMap) Layout() Layout {
	return Layout{Segments: m.Segments, Partitions: m.Partitions}
}

// OwnedBy counts the partitions whose active owner is id.
func (m *ClusterMap) OwnedBy(id NodeID) int {
	n := 0
	for _, p := range m.Runtime {
		if p.Owner == id {
			n++
		}
	}
	return n
}

// clone returns a copy whose slices and maps may be changed without touching m.
func (m *ClusterMap) clone() *ClusterMap {
	c := *m
	c.Nodes = maps.Clone(m.Nodes)
	c.Assignment = make(Assignment, len(m.Assignment))
	for i, nodes := range m.Assignment {
		c.Assignment[i] = slices.Clone(nodes)
	}
	c.Runtime = slices.Clone(m.Runtime)
	return &c
}

// commandKind names a control-plane decision. The numbers are part of the log format: append only.
type commandKind uint8

const (
	cmdUpsertNode commandKind = iota + 1
	cmdAssign
	_ // retired (owner left); the number stays reserved
	cmdSetInSync
	cmdPromote
)

// command is one committed control-plane decision.
type command struct {
	Kind       commandKind
	Node       NodeInfo
	Assignment Assignment
	// Partition, Epoch and InSync describe a cmdSetInSync: it applies only while the partition is still at
	// Epoch, so a decision made for a deposed owner is void.
	Partition int
	Epoch     uint64
	InSync    []NodeID
}

// apply returns the map that results from cmd committed at log index. It is deterministic: every node applies
// the same commands in the same order and reaches the same map.
func (m *ClusterMap) apply(cmd *command, index uint64) (*ClusterMap, error) {
	next := m.clone()
	next.Index = index
	switch cmd.Kind {
	case cmdUpsertNode:
		if old, ok := next.Nodes[cmd.Node.ID]; ok && old.Incarnation != 0 && old.Incarnation != cmd.Node.Incarnation {
			next.dropFromInSync(cmd.Node.ID)
		}
		next.Nodes[cmd.Node.ID] = cmd.Node
	case cmdAssign:
		if len(cmd.Assignment) != m.Partitions {
			return nil, fmt.Errorf("zaris: assignment has %d partitions, map has %d", len(cmd.Assignment), m.Partitions)
		}
		next.assign(cmd.Assignment)
	case cmdSetInSync:
		next.setInSync(cmd.Partition, cmd.Epoch, cmd.InSync)
	case cmdPromote:
		next.promote(cmd.Partition, cmd.Epoch, cmd.Node.ID)
	default:
		return nil, fmt.Errorf("zaris: unknown control command %d", cmd.Kind)
	}
	return next, nil
}

// assign installs a new partition map. A partition whose preferred primary differs from its active owner
// gets that primary as owner under the next epoch; the others keep owner and epoch.
func (m *ClusterMap) assign(a Assignment) {
	m.Version++
	m.Assignment = a
	for p, nodes := range a {
		st := &m.Runtime[p]
		switch {
		case len(nodes) == 0:
			if st.Health != Unavailable || st.Owner != "" {
				st.Owner, st.Health = "", Unavailable
				st.Epoch++
			}
		case st.Owner != nodes[0]:
			st.Owner, st.Health = nodes[0], m.healthFor(nodes)
			st.InSync = slices.Clone(nodes[1:])
			st.Epoch++
		default:
			st.Health = m.healthFor(nodes)
		}
	}
}

func (m *ClusterMap) healthFor(nodes []NodeID) Health {
	if len(nodes) < m.ReplicationFactor {
		return Degraded
	}
	return Healthy
}

// setInSync replaces a partition's in-sync replicas if the partition is still at epoch; only its assigned
// replicas may be listed.
func (m *ClusterMap) setInSync(p int, epoch uint64, inSync []NodeID) {
	if p < 0 || p >= len(m.Runtime) || m.Runtime[p].Epoch != epoch {
		return
	}
	var kept []NodeID
	for _, id := range inSync {
		if slices.Contains(m.Assignment[p], id) && id != m.Runtime[p].Owner && !slices.Contains(kept, id) {
			kept = append(kept, id)
		}
	}
	m.Runtime[p].InSync = kept
	if st := &m.Runtime[p]; st.Health == Degraded && len(kept) == len(m.Assignment[p])-1 && len(kept)+1 >= m.ReplicationFactor {
		st.Health = Healthy // every assigned replica is back in sync
	}
}

// dropFromInSync removes id from the in-sync set of every partition.
func (m *ClusterMap) dropFromInSync(id NodeID) {
	for p := range m.Runtime {
		st := &m.Runtime[p]
		if slices.Contains(st.InSync, id) {
			st.InSync = slices.DeleteFunc(slices.Clone(st.InSync), func(x NodeID) bool { return x == id })
			st.Health = Degraded
		}
	}
}

// promote makes to the active owner of partition p under the next epoch, if p is still at epoch: the
// failover of a dead owner. The partition map stays as it is; only the runtime owner moves. An empty to
// leaves the partition Unavailable.
func (m *ClusterMap) promote(p int, epoch uint64, to NodeID) {
	if p < 0 || p >= len(m.Runtime) || m.Runtime[p].Epoch != epoch {
		return
	}
	st := &m.Runtime[p]
	st.Epoch++
	if to == "" {
		st.Owner, st.Health, st.InSync = "", Unavailable, nil
		return
	}
	st.Owner, st.Health = to, Degraded
	st.InSync = slices.DeleteFunc(slices.Clone(st.InSync), func(id NodeID) bool { return id == to })
}

// newClusterMap returns the empty map a fresh cluster starts from.
func newClusterMap(layout Layout, rf int) *ClusterMap {
	return &ClusterMap{
		Segments:          layout.Segments,
		Partitions:        layout.Partitions,
		ReplicationFactor: rf,
		Nodes:             map[NodeID]NodeInfo{},
		Assignment:        make(Assignment, layout.Partitions),
		Runtime:           make([]PartitionState, layout.Partitions),
	}
}
