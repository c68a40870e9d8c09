package zaris

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/resp"
	"github.com/zaris-go/zaris/transport"
)

// This file adapts the node to its Redis edge (internal/resp), and is the one core file that imports it: it
// starts the endpoint with the node's settings, passes on the writes and ownership changes that invalidate
// what clients cache, and implements resp.Node over the node's components.

// RESPUser is a user of the RESP endpoint, like a Redis 6+ ACL user: clients log in as it with AUTH name
// password or HELLO 3 AUTH name password. Its fields are documented where it is declared.
type RESPUser = resp.User

// redisEdge is the node's Redis endpoint and the tracking of the keys its clients cache.
type redisEdge struct {
	srv      *resp.Server   // nil unless Config.RESPAddr is set
	tracking *resp.Tracking // the keys RESP clients cache (CLIENT TRACKING), to invalidate them
	blocking *resp.Blocking // the clients blocked on keys (BLPOP), which writes wake
	// notifier is set once srv serves: the expiries and evictions of the keys this node owns are
	// published through it.
	notifier atomic.Pointer[keyNotifier]
}

// keyNotifier publishes the expiries and evictions of the keys its node owns, as the map says, which a
// write hook may read under a segment's lock: a replica applying its owner's removal publishes nothing.
type keyNotifier struct {
	srv  *resp.Server
	owns func(key string) bool
}

func newRedisEdge() *redisEdge {
	return &redisEdge{tracking: resp.NewTracking(resp.TrackedKeys, resp.TrackedBytes), blocking: resp.NewBlocking()}
}

// written is a write listener: a write of a key invalidates it for the clients that cache it, and wakes
// the first client blocked on it.
func (e *redisEdge) written(_ int, _, _ uint64, key string, _ *entry, change writeChange) {
	if key != "" {
		e.tracking.Invalidate(key)
		e.blocking.Written(key)
		if n := e.notifier.Load(); n != nil && (change.expired || change.evicted) && n.owns(key) {
			n.srv.KeyRemoved(key, change.evicted)
		}
	}
	for i := range change.multi {
		e.tracking.Invalidate(change.multi[i].Key)
		e.blocking.Written(change.multi[i].Key)
	}
}

// ownershipChanged invalidates, for the clients that cache them, the keys this node no longer owns, and
// ends the subscriptions to shard channels of slots it no longer serves as owner or replica.
func (e *redisEdge) ownershipChanged(owns, serves func(key string) bool) {
	e.tracking.InvalidateWhere(func(key string) bool { return !owns(key) })
	e.blocking.WakeAll() // each checks that this node still owns its keys
	if e.srv != nil {
		e.srv.DropShards(func(channel string) bool { return !serves(channel) })
	}
}

// addr is the endpoint's advertised address, "" without one.
func (e *redisEdge) addr() string {
	if e.srv == nil {
		return ""
	}
	return e.srv.Addr()
}

// clients reports the endpoint's connected clients for the metrics, nil without an endpoint.
func (e *redisEdge) clients() func() int {
	if e.srv == nil {
		return nil
	}
	return e.srv.Clients
}

func (e *redisEdge) close() error {
	if e.srv == nil {
		return nil
	}
	return e.srv.Close()
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
	case c.RESPMaxQueryBuffer < c.MaxValueSize+resp.PreAuthMaxQuery:
		return bad("RESPMaxQueryBuffer %d must be at least MaxValueSize plus 256 KiB (%d)", c.RESPMaxQueryBuffer,
			c.MaxValueSize+resp.PreAuthMaxQuery)
	case c.RESPMaxQueryBufferTotal < int64(c.RESPMaxQueryBuffer):
		return bad("RESPMaxQueryBufferTotal %d must be at least RESPMaxQueryBuffer %d", c.RESPMaxQueryBufferTotal,
			c.RESPMaxQueryBuffer)
	case !resp.ValidNotifyKeyspaceEvents(c.NotifyKeyspaceEvents):
		return bad("NotifyKeyspaceEvents %q: each character must be one of Ag$lshzxeKEtmdn", c.NotifyKeyspaceEvents)
	}
	if err := resp.ValidateUsers(c.RESPUsers, c.RESPPassword); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// start opens the RESP endpoint when cfg.RESPAddr asks for one, serving node. It records the advertised
// address in cfg.RESPAddr, so the membership tags carry it to every node's cluster map. contain handles a
// panic of a client's command.
func (e *redisEdge) start(cfg *Config, dataAddr string, node *edgeNode, contain func(v any, what string), log *slog.Logger) error {
	if cfg.RESPAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.RESPAddr)
	if err != nil {
		return fmt.Errorf("zaris: listen for RESP on %s: %w", cfg.RESPAddr, err)
	}
	opt := respOptions(cfg, node.own.id, resp.AdvertisedAddr(ln.Addr().(*net.TCPAddr), dataAddr), log)
	opt.Tracking, opt.Blocking = e.tracking, e.blocking
	opt.PubSub, opt.SubscriberLimit = node.pubsub.hub, cfg.subscriberLimit()
	opt.Contain = contain
	if cfg.RESPTLS != nil {
		ln = tls.NewListener(ln, currentClientCAs(cfg.RESPTLS))
	}
	e.srv = resp.NewServer(node, opt)
	cfg.RESPAddr = opt.Addr
	own := node.own
	e.notifier.Store(&keyNotifier{srv: e.srv, owns: func(key string) bool {
		m := own.view.clusterMap()
		return m.Version > 0 && m.Runtime[own.layout.SegmentPartition(own.layout.KeySegment(key))].Owner == own.id
	}})
	e.srv.Serve(ln)
	log.Info("serving RESP", "addr", opt.Addr, "tls", opt.TLS, "auth", e.srv.AuthRequired())
	return nil
}

// infoReplication describes the replicas this node feeds for the partitions it owns in its committed map.
func (o *owner) infoReplication() resp.Replication {
	m := o.view.clusterMap()
	var history strings.Builder
	history.WriteString(string(o.id) + " " + strconv.FormatUint(o.repl.incarnation, 10))
	var info resp.Replication
	inSync := map[NodeID]bool{}
	lacking := map[NodeID]uint64{}
	for p, st := range m.Runtime {
		if !o.ownsIn(m, p) {
			continue
		}
		history.WriteString(" " + strconv.Itoa(p) + "@" + strconv.FormatUint(st.Epoch, 10))
		revisions := o.partitionRevisions(p)
		for _, rev := range revisions {
			info.Offset += rev
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
	info.History = hex.EncodeToString(sum[:])
	for id, all := range inSync {
		info.Replicas = append(info.Replicas, resp.Replica{ID: id, InSync: all, Offset: info.Offset - lacking[id]})
	}
	slices.SortFunc(info.Replicas, func(a, b resp.Replica) int { return strings.Compare(string(a.ID), string(b.ID)) })
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

// infoMessages counts the messages of data a node sent to other nodes and received from them: key requests
// (Stats.RequestsSent and RequestsServed) and replicated writes and snapshots (ReplicationStats). Liveness
// probes, gossip and the control plane's messages are not counted.
func infoMessages(stats Stats, repl ReplicationStats) (sent, received uint64) {
	for _, count := range stats.RequestsSent {
		sent += count
	}
	sent += repl.OpsSent + repl.SnapshotsSent
	received = stats.RequestsServed + repl.OpsApplied + repl.SnapshotsApplied
	return sent, received
}

// respOptions maps the node's settings to its endpoint's, advertised as addr.
func respOptions(c *Config, id NodeID, addr string, log *slog.Logger) resp.Options {
	return resp.Options{
		ID:                  id,
		Addr:                addr,
		TLS:                 c.RESPTLS != nil,
		MaxValueSize:        c.MaxValueSize,
		MaxClients:          c.RESPMaxClients,
		MaxPreAuthPerAddr:   c.RESPMaxPreAuthPerAddr,
		IdleTimeout:         c.RESPIdleTimeout,
		CommandTimeout:      c.RESPCommandTimeout,
		AuthTimeout:         c.RESPAuthTimeout,
		MaxQueryBuffer:      c.RESPMaxQueryBuffer,
		MaxQueryBufferTotal: c.RESPMaxQueryBufferTotal,
		Password:            c.RESPPassword,
		Users:               c.RESPUsers,
		SyncWrites:          c.WriteConcern == Sync,
		Clock:               c.Clock,
		Log:                 log,

		NotifyKeyspaceEvents: c.NotifyKeyspaceEvents,
	}
}

// edgeNode is resp.Node over the node's components: the owner serves keys, the control plane describes
// the cluster.
type edgeNode struct {
	own      *owner
	ctl      *controlPlane
	pubsub   *broker
	messages func() (sent, received uint64)
	recover  func(context.Context) (RecoveryReport, error)
	// backup and restore are Node.Backup and Node.Restore, for paths under backupDir.
	backup    func(ctx context.Context, dst string, opts ...BackupOption) (BackupReport, error)
	restore   func(ctx context.Context, src string, opts ...RestoreOption) (RestoreReport, error)
	backupDir string
	topology  atomic.Pointer[edgeTopology] // the last map described, and its description
}

// edgeTopology is a committed map and its description for clients.
type edgeTopology struct {
	m *ClusterMap
	t *resp.Topology
}

func (e *edgeNode) CheckOwner(key string) (int, kv.Reply, bool) { return e.own.checkOwner(key) }

func (e *edgeNode) ApplyKV(ctx context.Context, op transport.Op, seg int, req *kv.Request) kv.Reply {
	return e.own.applyKV(ctx, op, seg, req)
}

func (e *edgeNode) ApplyAtomically(ctx context.Context, seg int, keys []string, fn func(kv.Group)) kv.Status {
	return e.own.applyAtomically(ctx, seg, keys, fn)
}

func (e *edgeNode) ReadAtomically(ctx context.Context, seg int, keys []string, fn func(kv.Group)) kv.Status {
	return e.own.readAtomically(ctx, seg, keys, fn)
}

func (e *edgeNode) CheckReplica(key string) (int, bool) { return e.own.checkReplica(key) }

func (e *edgeNode) ReadReplica(op transport.Op, seg int, req *kv.Request) kv.Reply {
	return e.own.readReplica(op, seg, req)
}

func (e *edgeNode) ReadReplicaAtomically(seg int, keys []string, fn func(kv.Group)) kv.Status {
	return e.own.readReplicaAtomically(seg, keys, fn)
}

func (e *edgeNode) ReadOnly(op transport.Op) bool { return readOnly(op) }

func (e *edgeNode) Publish(shard bool, channel string, payload []byte) int {
	return e.pubsub.publish(shard, channel, payload)
}

// ServesShard serves a shard channel at its slot's owner, and at its replicas as Redis does.
func (e *edgeNode) ServesShard(channel string) (kv.Reply, bool) {
	_, refusal, owned := e.own.checkOwner(channel)
	if owned || e.pubsub.servesSlot(e.ctl.fsm.clusterMap(), channel) {
		return kv.Reply{}, true
	}
	return refusal, false
}

func (e *edgeNode) ServeOwnedScan(ctx context.Context, req *kv.ScanRequest) kv.ScanReply {
	return e.own.serveOwnedScan(ctx, req)
}

func (e *edgeNode) KeyCount() int                     { return e.own.keyCount() }
func (e *edgeNode) ExpiringKeyCount() int             { return e.own.expiringKeyCount() }
func (e *edgeNode) OwnedKeyCount() int                { return e.own.ownedKeyCount() }
func (e *edgeNode) ExpiredKeys() uint64               { return e.own.expiredKeys() }
func (e *edgeNode) Replication() resp.Replication     { return e.own.infoReplication() }
func (e *edgeNode) Messages() (sent, received uint64) { return e.messages() }
func (e *edgeNode) Memory() resp.Memory               { return edgeMemory{e.own.store.budget} }

// Topology describes the latest committed map, once per map.
func (e *edgeNode) Topology() *resp.Topology {
	m := e.ctl.fsm.clusterMap()
	if last := e.topology.Load(); last != nil && last.m == m {
		return last.t
	}
	t := describeTopology(m)
	e.topology.Store(&edgeTopology{m: m, t: t})
	return t
}

// describeTopology describes m as the edge tells clients of it.
func describeTopology(m *ClusterMap) *resp.Topology {
	t := &resp.Topology{Version: m.Version, Nodes: make(map[NodeID]resp.NodeAddrs, len(m.Nodes))}
	for id, info := range m.Nodes {
		t.Nodes[id] = resp.NodeAddrs{DataAddr: info.DataAddr, RESPAddr: info.RESPAddr}
	}
	if m.Version == 0 {
		return t
	}
	layout := m.Layout()
	t.Partitions = make([]resp.Partition, len(m.Runtime))
	for p, st := range m.Runtime {
		first, last := layout.PartitionSlots(p)
		t.Partitions[p] = resp.Partition{First: first, Last: last, Owner: st.Owner, Epoch: st.Epoch,
			Unavailable: st.Health == Unavailable, Assigned: p < len(m.Assignment) && len(m.Assignment[p]) > 0,
			InSync: len(st.InSync), Replicas: slices.DeleteFunc(slices.Clone(st.InSync), func(id NodeID) bool { return id == st.Owner })}
	}
	return t
}

// Members says what gossip knows of each member, nil before the node gossips.
func (e *edgeNode) Members() map[NodeID]resp.MemberState {
	ms := e.ctl.members.Load()
	if ms == nil {
		return nil
	}
	out := map[NodeID]resp.MemberState{}
	for _, mb := range ms.members() {
		switch mb.Status {
		case serf.StatusFailed:
			out[mb.ID] = resp.MemberFailed
		case serf.StatusLeft:
			out[mb.ID] = resp.MemberLeft
		default:
			out[mb.ID] = resp.MemberAlive
		}
	}
	return out
}

func (e *edgeNode) Control() resp.Control {
	h := e.ctl.controlHealth()
	c := resp.Control{Leader: h.Leader, Leaderless: h.Leaderless, Alarm: h.Alarm,
		Release: Version, Protocol: greeting(e.ctl.cfg).Version, ClusterProtocol: e.ctl.fsm.clusterMap().Protocol}
	if h.Alarm {
		c.Reason = h.leaderlessErr().Error()
	}
	return c
}

// Recover is RecoverControlPlane with its report as text.
func (e *edgeNode) Recover(ctx context.Context) (string, error) {
	report, err := e.recover(ctx)
	if errors.Is(err, ErrQuorumReachable) {
		return "", quorumReachable{err}
	}
	if err != nil {
		return "", err
	}
	return report.String(), nil
}

// Backup takes a backup into dir, under the node's backup directory, at most rate bytes a second (0: as
// fast as it goes).
func (e *edgeNode) Backup(ctx context.Context, dir string, rate int64) (string, error) {
	path, err := backupPath(e.backupDir, dir)
	if err != nil {
		return "", err
	}
	report, err := e.backup(ctx, path, BackupRate(rate))
	return report.String(), err
}

// Restore restores the backup in dir, under the node's backup directory.
func (e *edgeNode) Restore(ctx context.Context, dir string, replace bool) (string, error) {
	path, err := backupPath(e.backupDir, dir)
	if err != nil {
		return "", err
	}
	var opts []RestoreOption
	if replace {
		opts = append(opts, RestoreReplacing())
	}
	report, err := e.restore(ctx, path, opts...)
	return report.String(), err
}

// quorumReachable is RecoverControlPlane's refusal, which the edge answers with a QUORUM error.
type quorumReachable struct{ error }

func (quorumReachable) Is(target error) bool { return target == resp.ErrQuorumReachable }

// edgeMemory is the node's memory budget as the edge sees it; the budget is nil-safe.
type edgeMemory struct{ b *memoryBudget }

func (m edgeMemory) Limit() int64                { return m.b.limit() }
func (m edgeMemory) PolicyName() string          { return m.b.policyName() }
func (m edgeMemory) Policies() []string          { return evictionPolicies }
func (m edgeMemory) Evicted() uint64             { return m.b.evicted() }
func (m edgeMemory) CheckMax(limit int64) error  { return m.b.checkMax(limit) }
func (m edgeMemory) SetMax(limit int64) error    { return m.b.setMax(limit) }
func (m edgeMemory) SetPolicy(name string) error { return m.b.setPolicy(name) }
