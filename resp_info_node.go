package zaris

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
)

// The node's side of INFO replication and of CLUSTER INFO's message counts (keyOwner).

// respReplication is how this node feeds the replicas of the partitions it owns.
type respReplication struct {
	history  string        // 40 hex digits naming this process and the partitions it owns, at their epochs
	offset   uint64        // the revisions of the segments it owns, summed: the writes it made as their owner
	replicas []respReplica // sorted by id
}

// respReplica is a node this one feeds, as the owner of partitions it replicates.
type respReplica struct {
	id     NodeID
	inSync bool   // in the in-sync set of every such partition
	offset uint64 // the owner's offset less the revisions the replica is not known to hold
}

// infoReplication describes the replicas this node feeds for the partitions it owns in its committed map.
func (n *Node) infoReplication() respReplication {
	m := n.fsm.clusterMap()
	var history strings.Builder
	history.WriteString(string(n.id) + " " + strconv.FormatUint(n.repl.incarnation, 10))
	var info respReplication
	inSync := map[NodeID]bool{}
	lacking := map[NodeID]uint64{}
	for p, st := range m.Runtime {
		if !n.ownsIn(m, p) {
			continue
		}
		history.WriteString(" " + strconv.Itoa(p) + "@" + strconv.FormatUint(st.Epoch, 10))
		revisions := n.partitionRevisions(p)
		for _, rev := range revisions {
			info.offset += rev
		}
		for _, id := range m.Assignment[p] {
			if id == n.id {
				continue
			}
			member := slices.Contains(st.InSync, id)
			all, seen := inSync[id]
			inSync[id] = member && (all || !seen)
			lacking[id] += n.replicaLacks(id, p, revisions, member)
		}
	}
	sum := sha1.Sum([]byte(history.String()))
	info.history = hex.EncodeToString(sum[:])
	for id, all := range inSync {
		info.replicas = append(info.replicas, respReplica{id: id, inSync: all, offset: info.offset - lacking[id]})
	}
	slices.SortFunc(info.replicas, func(a, b respReplica) int { return strings.Compare(string(a.id), string(b.id)) })
	return info
}

// partitionRevisions returns the revisions of partition p's segments, in order.
func (n *Node) partitionRevisions(p int) []uint64 {
	first, end := n.layout.PartitionSegments(p)
	revisions := make([]uint64, 0, end-first)
	for seg := first; seg < end; seg++ {
		revisions = append(revisions, n.store.revision(seg))
	}
	return revisions
}

// replicaLacks counts the revisions of partition p's segments, now at revisions, that replica id is not
// known to hold: those past what it acknowledged. A segment it has not acknowledged yet counts whole,
// unless the replica is in the partition's in-sync set, which a committed decision keeps to replicas
// holding every acknowledged write.
func (n *Node) replicaLacks(id NodeID, p int, revisions []uint64, inSync bool) uint64 {
	acked, known := n.repl.ackedIn(p, id)
	var lacks uint64
	for i, rev := range revisions {
		switch have := acked[i]; {
		case known[i] && have < rev:
			lacks += rev - have
		case !known[i] && !inSync:
			lacks += rev
		}
	}
	return lacks
}

// infoMessages counts the messages of data this node sent to other nodes and received from them: key
// requests (Stats.RequestsSent and RequestsServed) and replicated writes and snapshots (ReplicationStats).
// Liveness probes, gossip and the control plane's messages are not counted.
func (n *Node) infoMessages() (sent, received uint64) {
	stats, repl := n.Stats(), n.ReplicationStats()
	for _, count := range stats.RequestsSent {
		sent += count
	}
	sent += repl.OpsSent + repl.SnapshotsSent
	received = stats.RequestsServed + repl.OpsApplied + repl.SnapshotsApplied
	return sent, received
}
