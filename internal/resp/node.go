package resp

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// Node is everything the endpoint reaches of the node it serves: the keys the node owns, its view of the
// cluster and of the control plane, and its memory bound. The root package's adapter is the one
// implementation; the endpoint's tests use a fake.
type Node interface {
	// CheckOwner returns key's segment if this node actively owns its partition, and otherwise the reply
	// that refuses the request.
	CheckOwner(key string) (segment int, refusal kv.Reply, owned bool)
	// ApplyKV runs one key operation on an owned segment, waiting for the replicas as the concern asks.
	ApplyKV(ctx context.Context, op transport.Op, seg int, req *kv.Request) kv.Reply
	// ApplyAtomically runs fn on an atomic group of an owned segment, refused while a transaction holds
	// one of keys, and waits for the replicas as ApplyKV does.
	ApplyAtomically(ctx context.Context, seg int, keys []string, fn func(kv.Group)) kv.Status
	// ReadAtomically runs fn on a read-only view of an owned segment, which sees one revision of it, and
	// waits for the replicas as a read does.
	ReadAtomically(ctx context.Context, seg int, keys []string, fn func(kv.Group)) kv.Status
	// CheckReplica returns key's segment if this node holds an in-sync copy of its partition as a
	// replica, which a client that sent READONLY may read.
	CheckReplica(key string) (segment int, ok bool)
	// ReadReplica runs a read-only key operation on this node's replica copy of seg, and
	// ReadReplicaAtomically runs fn on a read-only view of it, which sees one revision.
	ReadReplica(op transport.Op, seg int, req *kv.Request) kv.Reply
	ReadReplicaAtomically(seg int, keys []string, fn func(kv.Group)) kv.Status
	// ReadOnly reports whether op never writes.
	ReadOnly(op transport.Op) bool
	// Publish delivers payload to the subscribers of channel on every node, or for a shard channel on
	// the nodes of its slot, and returns how many of this node's received it.
	Publish(shard bool, channel string, payload []byte) int
	// ServesShard reports whether this node serves channel's slot as its owner or a replica, and
	// otherwise returns the reply that refuses a shard channel's command.
	ServesShard(channel string) (refusal kv.Reply, ok bool)
	// ServeOwnedScan serves a page of the keys of the partitions this node owns, skipping the others.
	ServeOwnedScan(ctx context.Context, req *kv.ScanRequest) kv.ScanReply

	// KeyCount counts the keys held on this node, owned or replicated, and ExpiringKeyCount those of them
	// with a TTL; OwnedKeyCount counts the keys of the partitions it owns.
	KeyCount() int
	ExpiringKeyCount() int
	OwnedKeyCount() int
	// ExpiredKeys counts the keys this node expired as their owner.
	ExpiredKeys() uint64
	// Replication describes the replicas this node feeds for the partitions it owns (INFO replication).
	Replication() Replication
	// Messages counts the messages of data this node sent to the others and received from them.
	Messages() (sent, received uint64)

	// Topology is the latest committed cluster map, as clients are told of it.
	Topology() *Topology
	// Members says what gossip knows of each member; nil before the node gossips.
	Members() map[kv.NodeID]MemberState
	// Control reports the control plane's leader as the node knows it.
	Control() Control
	// Recover rebuilds a control plane that lost its quorum (RECOVER) and returns its report.
	// Errors wrap ErrQuorumReachable when a quorum still answers.
	Recover(ctx context.Context) (report string, err error)
	// Backup copies the cluster's data into dir on this node's machine (BACKUP SAVE), at most rate bytes a
	// second (0: unpaced), and Restore copies a backup from there into the cluster (BACKUP LOAD); each
	// returns a line describing what it did.
	Backup(ctx context.Context, dir string, rate int64) (report string, err error)
	Restore(ctx context.Context, dir string, replace bool) (report string, err error)
	// Memory is the node's bound on what it stores; nil for a node without one.
	Memory() Memory
}

// ErrQuorumReachable is what Node.Recover's errors wrap when the control plane still has a quorum.
var ErrQuorumReachable = errors.New("resp: a quorum of the control plane is reachable")

// Topology is a committed cluster map as the endpoint describes it to clients.
type Topology struct {
	Version    uint64
	Nodes      map[kv.NodeID]NodeAddrs
	Partitions []Partition // in slot order; they tile the slots when Version > 0
}

// NodeAddrs are a member's addresses: its data port (the cluster bus of CLUSTER NODES) and its RESP
// endpoint, "" without one.
type NodeAddrs struct {
	DataAddr, RESPAddr string
}

// Partition is a run of slots owned and replicated together.
type Partition struct {
	First, Last uint16      // its slots, inclusive
	Owner       kv.NodeID   // the active owner; "" without one
	Unavailable bool        // no copy can serve it now
	Assigned    bool        // the map gives it to at least one node
	Epoch       uint64      // its ownership epoch
	InSync      int         // its replicas known to hold every write the owner acknowledged
	Replicas    []kv.NodeID // those replicas, in the map's order
}

// PartitionOf returns the partition holding slot, or nil when the topology has none.
func (t *Topology) PartitionOf(slot uint16) *Partition {
	if i := t.partitionIndex(slot); i >= 0 {
		return &t.Partitions[i]
	}
	return nil
}

// partitionIndex returns the index of the partition holding slot, or -1 when the topology has none.
func (t *Topology) partitionIndex(slot uint16) int {
	i := sort.Search(len(t.Partitions), func(i int) bool { return t.Partitions[i].Last >= slot })
	if i == len(t.Partitions) || t.Partitions[i].First > slot {
		return -1
	}
	return i
}

// served reports whether a client can be sent to p's owner.
func (t *Topology) served(p *Partition) bool {
	return p.Owner != "" && !p.Unavailable && t.Nodes[p.Owner].RESPAddr != ""
}

// MemberState is what gossip says of a member.
type MemberState uint8

const (
	MemberAlive  MemberState = iota + 1
	MemberFailed             // gossip lost contact with it
	MemberLeft               // it left the cluster
)

// Control is what the node knows of the control plane's leader.
type Control struct {
	Leader     kv.NodeID
	Leaderless time.Duration // how long no leader has been known; 0 with one
	Alarm      bool          // leaderless for longer than a few election timeouts
	Reason     string        // with Alarm, why the cluster is down: CLUSTER INFO's zaris_cluster_state_reason

	Release         string // the node's release, a semantic version
	Protocol        uint16 // the protocol the node speaks
	ClusterProtocol uint16 // the cluster's protocol, as the node's map records it
}

// Replication is what INFO replication reports of the replicas this node feeds as an owner.
type Replication struct {
	History  string    // 40 hex digits naming this process and the partitions it owns, at their epochs
	Offset   uint64    // the revisions of the segments it owns, summed: the writes it made as their owner
	Replicas []Replica // sorted by id
}

// Replica is a node this one feeds, as the owner of partitions it replicates.
type Replica struct {
	ID     kv.NodeID
	InSync bool   // in the in-sync set of every such partition
	Offset uint64 // the owner's offset less the revisions the replica is not known to hold
}

// Memory is the node's bound on what it stores, which INFO reports and CONFIG SET changes.
type Memory interface {
	Limit() int64
	PolicyName() string
	// Policies names the eviction policies SetPolicy takes.
	Policies() []string
	Evicted() uint64
	// CheckMax says why limit cannot be the bound, nil when it can; SetMax sets it.
	CheckMax(limit int64) error
	SetMax(limit int64) error
	SetPolicy(name string) error
}
