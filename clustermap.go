package zaris

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
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
	// Protocol is the protocol the node's process speaks.
	Protocol uint16 `msgpack:",omitempty"`
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
	// InSyncIndex is the control-plane log index at which InSync last changed or a replica was dropped from
	// it. A replica's admission applies only at the index it was decided at, so a decision still in flight
	// when a write dropped the replica can never bring it back behind that write.
	InSyncIndex uint64
	// Target is where a rebalance moves the partition (preferred primary first), nil when it stays put.
	// While the move copies, Assignment holds the nodes it had (listed in From) plus the incoming ones, so
	// the owner feeds them like any replica. The move settles once they are all in sync.
	Target []NodeID
	From   []NodeID
	// Source is, while the partition is Recovering, the peer whose copy holds more than the new owner's:
	// the owner syncs from it before it serves.
	Source NodeID
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
	// Moved counts the partitions whose nodes rebalancing has changed, over the cluster's life.
	Moved uint64
	// Promotions counts failovers: partitions whose active owner the leader replaced, or gave up, after
	// the owner failed.
	Promotions uint64
	// Draining holds the nodes leaving gracefully, each with the incarnation of the process that asked.
	// No plan gives them partitions, so a drain is over once the map records it here and it holds nothing.
	Draining map[NodeID]uint64
	// Protocol is the cluster's protocol: the oldest its members spoke when the leader last raised it. It
	// never falls; what a protocol version introduces is used once it is reached (see ProtocolVersion).
	Protocol uint16
}

// fits checks that a map another node sent is shaped for layout, before anything indexes it by partition
// or segment: its layout is layout, and it has a runtime state and an assignment per partition.
func (m *ClusterMap) fits(layout Layout) error {
	switch {
	case m.Layout() != layout:
		return fmt.Errorf("zaris: a map of %d segments in %d partitions, not %d in %d", m.Segments, m.Partitions, layout.Segments, layout.Partitions)
	case len(m.Runtime) != layout.Partitions || len(m.Assignment) != layout.Partitions:
		return fmt.Errorf("zaris: a map of %d partitions with %d states and %d assignments", layout.Partitions, len(m.Runtime), len(m.Assignment))
	}
	return nil
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

// holds reports whether id owns, is assigned, or is a move's target of any partition, or is in sync for one
// with no owner: it may keep the only copy of what that partition acknowledged.
func (m *ClusterMap) holds(id NodeID) bool {
	for p, st := range m.Runtime {
		if st.Owner == id || slices.Contains(m.Assignment[p], id) || slices.Contains(st.Target, id) ||
			st.Owner == "" && slices.Contains(st.InSync, id) {
			return true
		}
	}
	return false
}

// draining reports whether the map records id as leaving gracefully.
func (m *ClusterMap) draining(id NodeID) bool {
	_, ok := m.Draining[id]
	return ok
}

// drains reports whether member mb is leaving gracefully, as its gossip flag says or the map records.
func (m *ClusterMap) drains(mb member) bool { return mb.Leaving || m.draining(mb.ID) }

// clone returns a copy whose slices and maps may be changed without touching m.
func (m *ClusterMap) clone() *ClusterMap {
	c := *m
	c.Nodes = maps.Clone(m.Nodes)
	c.Draining = maps.Clone(m.Draining)
	c.Assignment = make(Assignment, len(m.Assignment))
	for i, nodes := range m.Assignment {
		c.Assignment[i] = slices.Clone(nodes)
	}
	c.Runtime = slices.Clone(m.Runtime)
	for i := range c.Runtime {
		st := &c.Runtime[i]
		st.InSync, st.Target, st.From = slices.Clone(st.InSync), slices.Clone(st.Target), slices.Clone(st.From)
	}
	return &c
}

// commandKind names a control-plane decision. The numbers are part of the log format: append only.
type commandKind uint8

const (
	cmdUpsertNode commandKind = iota + 1
	cmdAssign
	_ // retired (owner left); the number stays reserved
	_ // retired (in-sync set replaced whole); the number stays reserved
	cmdPromote
	cmdPlan      // a rebalance: the next partition map, as a target per partition
	cmdMigrate   // start feeding a partition's incoming nodes
	cmdSettle    // a moving partition takes its target nodes, and its target primary as owner
	cmdReclaim   // an owner that could not hand over keeps its partition under the next epoch
	cmdHeal      // a Degraded partition whose copies are all back in sync returns to Healthy
	cmdRestarted // a node restarted: it leaves every in-sync set before its new process is recorded
	cmdRecovered // a Recovering owner has synced from its source and serves, Degraded
	cmdAdmit     // an owner returns a caught-up replica to the in-sync set
	cmdDrop      // an owner drops replicas that did not acknowledge a write from the in-sync set
	cmdBarrier   // changes nothing: a node that applied it has applied every decision before it
	cmdDrain     // a node leaving gracefully gets no more partitions
	cmdProtocol  // every member speaks a newer protocol: the cluster's rises to it
)

// command is one committed control-plane decision.
type command struct {
	Kind       commandKind
	Node       NodeInfo
	Assignment Assignment
	// Partition and Epoch name the partition an owner's decision is about: it applies only while the
	// partition is still at Epoch, so a decision made for a deposed owner is void.
	Partition int
	Epoch     uint64
	// InSync lists, for a cmdDrop, the replicas to drop.
	InSync []NodeID
	// InSyncIndex is, for a cmdAdmit, the partition's InSyncIndex the admission was decided at.
	InSyncIndex uint64
	// Intact, for a cmdUpsertNode of a restarted process, says it reloaded every write its predecessor
	// acknowledged: it stays in the in-sync sets.
	Intact bool
	// Source, for a cmdPromote, names a peer holding more than the new owner: the partition is Recovering
	// until the owner has synced from it.
	Source NodeID
	// Protocol, for a cmdProtocol, is the cluster's new protocol.
	Protocol uint16 `msgpack:",omitempty"`
}

// apply returns the map that results from cmd committed at log index. It is deterministic: every node applies
// the same commands in the same order and reaches the same map.
func (m *ClusterMap) apply(cmd *command, index uint64) (*ClusterMap, error) {
	next := m.clone()
	next.Index = index
	switch cmd.Kind {
	case cmdUpsertNode:
		if old, ok := next.Nodes[cmd.Node.ID]; ok && old.Incarnation != 0 && old.Incarnation != cmd.Node.Incarnation && !cmd.Intact {
			next.dropFromInSync(cmd.Node.ID)
		}
		if inc, ok := next.Draining[cmd.Node.ID]; ok && inc != cmd.Node.Incarnation {
			delete(next.Draining, cmd.Node.ID) // a new process has not asked to leave
		}
		next.Nodes[cmd.Node.ID] = cmd.Node
	case cmdAssign:
		if len(cmd.Assignment) != m.Partitions {
			return nil, fmt.Errorf("zaris: assignment has %d partitions, map has %d", len(cmd.Assignment), m.Partitions)
		}
		if !next.placesDraining(cmd.Assignment) {
			next.assign(cmd.Assignment)
		}
	case cmdAdmit:
		next.admit(cmd.Partition, cmd.Epoch, cmd.InSyncIndex, cmd.Node)
	case cmdDrop:
		next.drop(cmd.Partition, cmd.Epoch, cmd.InSync, index)
	case cmdBarrier:
	case cmdProtocol:
		next.Protocol = max(next.Protocol, cmd.Protocol)
	case cmdDrain:
		next.drain(cmd.Node)
	case cmdPromote:
		next.promote(cmd.Partition, cmd.Epoch, cmd.Node.ID, cmd.Source)
	case cmdPlan:
		if len(cmd.Assignment) != m.Partitions {
			return nil, fmt.Errorf("zaris: plan has %d partitions, map has %d", len(cmd.Assignment), m.Partitions)
		}
		if !next.placesDraining(cmd.Assignment) {
			next.plan(cmd.Assignment)
		}
	case cmdMigrate:
		next.migrate(cmd.Partition, cmd.Epoch)
	case cmdSettle:
		next.settle(cmd.Partition, cmd.Epoch, cmd.Node.ID)
	case cmdRestarted:
		next.dropFromInSync(cmd.Node.ID)
	case cmdHeal:
		next.heal(cmd.Partition, cmd.Epoch)
	case cmdRecovered:
		next.recovered(cmd.Partition, cmd.Epoch)
	case cmdReclaim:
		if next.current(cmd.Partition, cmd.Epoch) {
			next.Runtime[cmd.Partition].Epoch++
		}
	default:
		return nil, fmt.Errorf("zaris: unknown control command %d", cmd.Kind)
	}
	next.noteInSyncChanges(m, index)
	return next, nil
}

// drain records node as leaving gracefully, unless the map records another process under its ID: the
// request outlived the process that made it.
func (m *ClusterMap) drain(node NodeInfo) {
	if known, ok := m.Nodes[node.ID]; ok && known.Incarnation != node.Incarnation {
		return
	}
	if m.Draining == nil {
		m.Draining = map[NodeID]uint64{}
	}
	m.Draining[node.ID] = node.Incarnation
}

// placesDraining reports whether a gives a partition to a node that drains: a map decided before the drain
// was recorded, which is void, so that a drain, once over, stays over.
func (m *ClusterMap) placesDraining(a Assignment) bool {
	return slices.ContainsFunc(a, func(nodes []NodeID) bool { return slices.ContainsFunc(nodes, m.draining) })
}

// errVoidDecision is the response to a committed command that changed nothing: it was decided against a
// map that has moved on since.
var errVoidDecision = errors.New("zaris: decision void: the map moved on")

// sameAs reports whether m and o hold the same state, whatever their log indexes.
func (m *ClusterMap) sameAs(o *ClusterMap) bool {
	a, b := *m, *o
	a.Index, b.Index = 0, 0
	return reflect.DeepEqual(&a, &b)
}

// noteInSyncChanges stamps with index every partition whose in-sync set differs from prev's, or that a node
// left: that node discards its copy, so an admission decided on what it held before is void.
func (m *ClusterMap) noteInSyncChanges(prev *ClusterMap, index uint64) {
	for p := range m.Runtime {
		left := slices.ContainsFunc(prev.Assignment[p], func(id NodeID) bool { return !slices.Contains(m.Assignment[p], id) })
		if left || !slices.Equal(m.Runtime[p].InSync, prev.Runtime[p].InSync) {
			m.Runtime[p].InSyncIndex = index
		}
	}
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

// admit returns replica to partition p's in-sync set if the partition is still at epoch, its in-sync set
// has not changed since the owner found the replica caught up (at inSyncIndex), and the map records the
// process the owner found caught up: a restarted process in memory holds nothing of its predecessor's, and
// its restart may have been recorded while the admission was on its way, changing no in-sync set. Only an
// assigned replica other than the owner may be admitted.
func (m *ClusterMap) admit(p int, epoch, inSyncIndex uint64, replica NodeInfo) {
	if !m.current(p, epoch) || m.Runtime[p].InSyncIndex != inSyncIndex || !m.records(replica) {
		return
	}
	id := replica.ID
	st := &m.Runtime[p]
	if slices.Contains(m.Assignment[p], id) && id != st.Owner && !slices.Contains(st.InSync, id) {
		st.InSync = append(slices.Clone(st.InSync), id)
	}
}

// records reports whether the map records node's process, or node names none (a command of an older
// version).
func (m *ClusterMap) records(node NodeInfo) bool {
	known, ok := m.Nodes[node.ID]
	return node.Incarnation == 0 || ok && known.Incarnation == node.Incarnation
}

// drop removes replicas from partition p's in-sync set if the partition is still at epoch, and voids every
// admission decided before it, even when none of them was in the set. Fewer in-sync replicas than assigned
// ones make a Healthy partition Degraded.
func (m *ClusterMap) drop(p int, epoch uint64, ids []NodeID, index uint64) {
	if !m.current(p, epoch) {
		return
	}
	st := &m.Runtime[p]
	st.InSync = slices.DeleteFunc(slices.Clone(st.InSync), func(id NodeID) bool { return slices.Contains(ids, id) })
	st.InSyncIndex = index
	settled := m.Assignment[p]
	if st.From != nil {
		settled = st.From // incoming nodes of a move are not in sync yet; that degrades nothing
	}
	for _, id := range settled {
		if st.Health == Healthy && id != st.Owner && !slices.Contains(st.InSync, id) {
			st.Health = Degraded // a copy fell behind; healPartitions restores Healthy after the cool-down
		}
	}
}

// healable reports whether partition p is Degraded although its owner and every assigned replica are in
// place and in sync, with as many copies as the replication factor asks.
func (m *ClusterMap) healable(p int) bool {
	st := m.Runtime[p]
	a := m.Assignment[p]
	return st.Health == Degraded && st.Owner != "" && st.From == nil && len(a) >= m.ReplicationFactor &&
		len(st.InSync) == len(a)-1 && slices.Contains(a, st.Owner)
}

// heal returns partition p to Healthy under the next epoch, if it is still at epoch and still healable.
func (m *ClusterMap) heal(p int, epoch uint64) {
	if m.current(p, epoch) && m.healable(p) {
		m.Runtime[p].Health = Healthy
		m.Runtime[p].Epoch++
	}
}

// dropFromInSync removes id from the in-sync set of every partition.
func (m *ClusterMap) dropFromInSync(id NodeID) {
	for p := range m.Runtime {
		st := &m.Runtime[p]
		if slices.Contains(st.InSync, id) {
			st.InSync = slices.DeleteFunc(slices.Clone(st.InSync), func(x NodeID) bool { return x == id })
			if st.Health == Healthy {
				st.Health = Degraded
			}
		}
	}
}

// promote makes to the active owner of partition p under the next epoch, if p is still at epoch: the
// failover of a dead owner. Only the runtime owner moves, not the partition map. An empty to leaves the
// partition Unavailable. While p has an owner, to must still be that owner or in sync: a replica dropped
// since the decision (a drop keeps the epoch) lacks the writes acknowledged without it.
func (m *ClusterMap) promote(p int, epoch uint64, to, source NodeID) {
	if !m.current(p, epoch) {
		return
	}
	st := &m.Runtime[p]
	if to != "" && st.Owner != "" && to != st.Owner && !slices.Contains(st.InSync, to) {
		return
	}
	st.Epoch++
	m.Promotions++
	if to == "" {
		// The nodes that held every acknowledged write stay listed: one that comes back as the same
		// process may be given the partition again.
		if st.Owner != "" {
			st.InSync = append(slices.Clone(st.InSync), st.Owner)
		}
		st.Owner, st.Health = "", Unavailable
		return
	}
	if st.Owner == "" && !slices.Contains(st.InSync, to) {
		st.InSync = nil // recreated: no copy of the partition's history is in sync with the new one
	}
	st.Owner, st.Health, st.Source = to, Degraded, ""
	if source != "" {
		st.Health, st.Source = Recovering, source
	}
	st.InSync = slices.DeleteFunc(slices.Clone(st.InSync), func(id NodeID) bool { return id == to })
}

// recovered lets partition p's Recovering owner serve, Degraded, once it has synced from its source.
func (m *ClusterMap) recovered(p int, epoch uint64) {
	if !m.current(p, epoch) || m.Runtime[p].Health != Recovering {
		return
	}
	st := &m.Runtime[p]
	st.Health, st.Source = Degraded, ""
}

// current reports whether partition p exists and is still at epoch: decisions made at an older epoch are void.
func (m *ClusterMap) current(p int, epoch uint64) bool {
	return p >= 0 && p < len(m.Runtime) && m.Runtime[p].Epoch == epoch
}

// plan starts a rebalance towards next: every partition whose nodes differ gets next as its target, and the
// others stop moving. A move under way towards the same target keeps its progress. One towards another target
// is abandoned and its incoming nodes dropped. Nothing moves yet.
func (m *ClusterMap) plan(next Assignment) {
	m.Version++
	for p, nodes := range next {
		st := &m.Runtime[p]
		if st.Target != nil && slices.Equal(nodes, st.Target) {
			continue
		}
		if st.From != nil {
			m.Assignment[p] = st.From
			st.InSync = slices.DeleteFunc(slices.Clone(st.InSync), func(id NodeID) bool { return !slices.Contains(st.From, id) })
			st.From = nil
		}
		st.Target = nil
		if !slices.Equal(nodes, m.Assignment[p]) {
			st.Target = slices.Clone(nodes)
		}
	}
}

// migrate starts copying partition p to its incoming nodes: they join its assignment as replicas that are
// not yet in sync, and the owner feeds them.
func (m *ClusterMap) migrate(p int, epoch uint64) {
	if !m.current(p, epoch) || len(m.Runtime[p].Target) == 0 || m.Runtime[p].From != nil {
		return
	}
	st := &m.Runtime[p]
	st.From = m.Assignment[p]
	widened := slices.Clone(st.From)
	for _, id := range st.Target {
		if !slices.Contains(widened, id) {
			widened = append(widened, id)
		}
	}
	m.Assignment[p] = widened
}

// settle ends partition p's move: its target becomes its assignment, and to (the target primary) its owner,
// under the next epoch when the owner changes. The target nodes still assigned stay in sync: the old owner
// sealed the partition and each of them holds all of it. A hand-over to a node no longer in sync is void:
// the move was planned anew after the owner sealed it, which dropped the incoming nodes, and to may have
// discarded its copy.
func (m *ClusterMap) settle(p int, epoch uint64, to NodeID) {
	if !m.current(p, epoch) || len(m.Runtime[p].Target) == 0 || m.Runtime[p].Target[0] != to {
		return
	}
	st := &m.Runtime[p]
	if st.Owner != "" && st.Owner != to && !slices.Contains(st.InSync, to) {
		return
	}
	holders := st.InSync
	if st.Owner != "" {
		holders = append(slices.Clone(st.InSync), st.Owner)
	}
	if st.Owner != to {
		st.Owner = to
		st.Epoch++
	}
	var inSync []NodeID
	for _, id := range st.Target[1:] {
		if slices.Contains(holders, id) {
			inSync = append(inSync, id)
		}
	}
	m.Assignment[p], st.InSync = st.Target, inSync
	st.Target, st.From = nil, nil
	st.Health = Healthy
	if len(inSync)+1 < len(m.Assignment[p]) || len(m.Assignment[p]) < m.ReplicationFactor || !slices.Contains(holders, to) {
		st.Health = Degraded
	}
	m.Moved++
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
