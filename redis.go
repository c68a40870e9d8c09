package zaris

import (
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// This file adapts the node to its Redis edge (resp*.go), and is the one core file that names the edge: it
// starts the endpoint with the node's parts, passes on the writes and ownership changes that invalidate
// what clients cache, validates the edge's settings and answers the questions of keyOwner that no other
// component does.

// redisEdge is the node's Redis endpoint and the tracking of the keys its clients cache.
type redisEdge struct {
	srv      *respServer   // nil unless Config.RESPAddr is set
	tracking *respTracking // the keys RESP clients cache (CLIENT TRACKING), to invalidate them
}

func newRedisEdge() *redisEdge {
	return &redisEdge{tracking: newRESPTracking(respTrackedKeys, respTrackedBytes)}
}

// written is a write listener: a write of a key invalidates it for the clients that cache it.
func (e *redisEdge) written(seg int, rev, version uint64, key string, next *entry, change writeChange) {
	e.tracking.written(seg, rev, version, key, next, change)
}

// ownershipChanged invalidates, for the clients that cache them, the keys this node no longer owns.
func (e *redisEdge) ownershipChanged(owns func(key string) bool) {
	e.tracking.invalidateWhere(func(key string) bool { return !owns(key) })
}

// joined gives the endpoint the node's membership, once the node gossips.
func (e *redisEdge) joined(members *membership) {
	if e.srv != nil {
		e.srv.members.Store(members)
	}
}

// addr is the endpoint's advertised address, "" without one.
func (e *redisEdge) addr() string {
	if e.srv == nil {
		return ""
	}
	return e.srv.addr
}

// clients reports the endpoint's connected clients for the metrics, nil without an endpoint.
func (e *redisEdge) clients() func() int {
	if e.srv == nil {
		return nil
	}
	return e.srv.clients
}

func (e *redisEdge) close() error {
	if e.srv == nil {
		return nil
	}
	return e.srv.close()
}

// validateRESPConfig checks the settings of the Redis edge.
func validateRESPConfig(c *Config) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.RESPMaxClients < 1:
		return bad("RESPMaxClients %d must be at least 1", c.RESPMaxClients)
	case c.RESPMaxPreAuthPerAddr < 1:
		return bad("RESPMaxPreAuthPerAddr %d must be at least 1", c.RESPMaxPreAuthPerAddr)
	case c.RESPIdleTimeout < 0 || c.RESPCommandTimeout < 0 || c.RESPAuthTimeout < 0:
		return bad("RESPIdleTimeout, RESPCommandTimeout and RESPAuthTimeout must not be negative")
	case c.RESPMaxQueryBuffer < c.MaxValueSize+respPreAuthMaxQuery:
		return bad("RESPMaxQueryBuffer %d must be at least MaxValueSize plus 256 KiB (%d)", c.RESPMaxQueryBuffer,
			c.MaxValueSize+respPreAuthMaxQuery)
	case c.RESPMaxQueryBufferTotal < int64(c.RESPMaxQueryBuffer):
		return bad("RESPMaxQueryBufferTotal %d must be at least RESPMaxQueryBuffer %d", c.RESPMaxQueryBufferTotal,
			c.RESPMaxQueryBuffer)
	}
	if err := validateRESPUsers(c.RESPUsers, c.RESPPassword); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// startRESP opens the RESP endpoint when Config.RESPAddr asks for one. It records the advertised address in
// n.cfg.RESPAddr, so the membership tags carry it to every node's cluster map.
func (n *Node) startRESP() error {
	if n.cfg.RESPAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", n.cfg.RESPAddr)
	if err != nil {
		return fmt.Errorf("zaris: listen for RESP on %s: %w", n.cfg.RESPAddr, err)
	}
	addr := advertisedAddr(ln.Addr().(*net.TCPAddr), n.DataAddr())
	s := newRESPServer(&n.cfg, edgeOwner{n.own, n.infoMessages}, n.id, n.ctl.fsm.clusterMap, n.log, addr)
	s.tracking = n.redis.tracking
	s.control = n.ctl.controlHealth
	s.recover = n.RecoverControlPlane
	s.memory = n.own.store.budget
	s.contain = n.panics.containPanic
	if n.cfg.RESPTLS != nil {
		ln = tls.NewListener(ln, currentClientCAs(n.cfg.RESPTLS))
		s.tls = true
	}
	n.redis.srv = s
	n.cfg.RESPAddr = addr
	s.serve(ln)
	n.log.Info("serving RESP", "addr", addr, "tls", s.tls, "auth", s.acl.required())
	return nil
}

// edgeOwner is what the endpoint serves keys with: the owner, and the node's message counts.
type edgeOwner struct {
	*owner
	messages func() (sent, received uint64)
}

func (e edgeOwner) infoMessages() (sent, received uint64) { return e.messages() }

// infoReplication describes the replicas this node feeds for the partitions it owns in its committed map.
func (o *owner) infoReplication() respReplication {
	m := o.view.clusterMap()
	var history strings.Builder
	history.WriteString(string(o.id) + " " + strconv.FormatUint(o.repl.incarnation, 10))
	var info respReplication
	inSync := map[NodeID]bool{}
	lacking := map[NodeID]uint64{}
	for p, st := range m.Runtime {
		if !o.ownsIn(m, p) {
			continue
		}
		history.WriteString(" " + strconv.Itoa(p) + "@" + strconv.FormatUint(st.Epoch, 10))
		revisions := o.partitionRevisions(p)
		for _, rev := range revisions {
			info.offset += rev
		}
		for _, id := range m.Assignment[p] {
			if id == o.id {
				continue
			}
			member := slices.Contains(st.InSync, id)
			all, seen := inSync[id]
			inSync[id] = member && (all || !seen)
			lacking[id] += o.replicaLacks(id, p, revisions, member)
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
func (o *owner) partitionRevisions(p int) []uint64 {
	first, end := o.layout.PartitionSegments(p)
	revisions := make([]uint64, 0, end-first)
	for seg := first; seg < end; seg++ {
		revisions = append(revisions, o.store.revision(seg))
	}
	return revisions
}

// replicaLacks counts the revisions of partition p's segments, now at revisions, that replica id is not
// known to hold: those past what it acknowledged. A segment it has not acknowledged yet counts whole,
// unless the replica is in the partition's in-sync set, which a committed decision keeps to replicas
// holding every acknowledged write.
func (o *owner) replicaLacks(id NodeID, p int, revisions []uint64, inSync bool) uint64 {
	acked, known := o.repl.ackedIn(p, id)
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
