package zaris

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/memnet"
	"github.com/zaris-go/zaris/internal/pubsub"
	"github.com/zaris-go/zaris/transport"
)

// Timing holds the membership and consensus timings. LANTiming suits real networks; LocalTiming suits a
// cluster on one machine (tests, demos), where it detects failures and elects leaders in a fraction of a second.
// A new cluster's first founder stands for election at once, without waiting out RaftHeartbeat.
type Timing struct {
	RaftHeartbeat   time.Duration // follower waits this long without a leader before an election
	RaftElection    time.Duration // candidate waits this long before a new election
	RaftLeaderLease time.Duration // a leader steps down after this long without a quorum
	RaftCommit      time.Duration // upper bound on delaying a commit to batch it
	GossipInterval  time.Duration // how often gossip messages are sent
	ProbeInterval   time.Duration // how often a random member is probed
	ProbeTimeout    time.Duration // how long to wait for a probe's ack
	Reconcile       time.Duration // how often the leader reconciles membership into the control plane
	// SuspicionMult scales how long a suspected member has to refute the suspicion before gossip reports
	// it failed (in probe intervals, grown slowly with the cluster's size).
	SuspicionMult int
	// Reconnect is how often gossip tries to reach the members it reported failed: after a network
	// partition heals, both sides see each other again within about this long.
	Reconnect time.Duration
	// ServerStabilization is how long a new control-plane server must stay alive before it may vote.
	ServerStabilization time.Duration
}

// LANTiming returns timings for a cluster on a local-area network.
func LANTiming() Timing {
	return Timing{
		RaftHeartbeat:   time.Second,
		RaftElection:    time.Second,
		RaftLeaderLease: 500 * time.Millisecond,
		RaftCommit:      50 * time.Millisecond,
		GossipInterval:  200 * time.Millisecond,
		ProbeInterval:   time.Second,
		ProbeTimeout:    500 * time.Millisecond,
		Reconcile:       time.Second,
		SuspicionMult:   4,
		Reconnect:       5 * time.Second,

		ServerStabilization: 10 * time.Second,
	}
}

// LocalTiming returns timings for a cluster whose nodes share one machine.
func LocalTiming() Timing {
	return Timing{
		RaftHeartbeat:   150 * time.Millisecond,
		RaftElection:    150 * time.Millisecond,
		RaftLeaderLease: 100 * time.Millisecond,
		RaftCommit:      5 * time.Millisecond,
		GossipInterval:  50 * time.Millisecond,
		ProbeInterval:   200 * time.Millisecond,
		ProbeTimeout:    100 * time.Millisecond,
		Reconcile:       200 * time.Millisecond,
		SuspicionMult:   2,
		Reconnect:       500 * time.Millisecond,

		ServerStabilization: 500 * time.Millisecond,
	}
}

// Config describes a node. Start from DefaultConfig; Join validates it.
type Config struct {
	// Name identifies the node in the cluster; it must be unique. Default: host name plus process id.
	Name string
	// GossipAddr is the host:port for membership gossip (UDP and TCP). Port 0 picks a free port.
	GossipAddr string
	// DataAddr is the host:port of the one TCP port shared by the data plane and the control plane.
	// Port 0 picks a free port. The host must be an address other members can reach.
	DataAddr string
	// Join lists gossip addresses of existing members; empty starts a new cluster.
	Join []string
	// BootstrapExpect is how many nodes must be present before the first partition map is assigned.
	BootstrapExpect int
	// Lite makes a member that holds no partitions: it takes part in the cluster and routes every key to
	// its owner in one hop, for processes that use the map without storing any of it.
	Lite bool
	// PreviousProtocol makes the node speak ProtocolVersion-1, as a node of the previous release does, so
	// that the cluster's protocol stays there (ClusterMap.Protocol): set it on upgraded nodes to keep a
	// rollback to the previous release possible, or to test a rolling upgrade.
	PreviousProtocol bool

	// Segments, Partitions and ReplicationFactor are fixed at cluster creation; every member must agree.
	Segments          int
	Partitions        int
	ReplicationFactor int

	// MaxVoters caps the consensus voters (odd numbers are best); other members follow as non-voters.
	MaxVoters int
	// PollInterval is the backstop refresh of the routing table.
	PollInterval time.Duration
	// MaxRetries bounds the retries of one operation after replies that say the map is stale or that the
	// partition is changing hands.
	MaxRetries int
	// RetryBackoff is the first pause between such retries; it doubles each time. With the defaults an
	// operation waits up to about half a second in all: a hand-over under load, or an owner catching up
	// with the control plane, takes longer than a few milliseconds.
	RetryBackoff time.Duration
	// ReapInterval is how often an owner deletes the expired entries of its partitions, by expiry ops that
	// reach its replicas and watchers.
	ReapInterval time.Duration
	// TxnTimeout is how long a transaction over several segments may hold its keys between its prepare and
	// its resolution before their owners resolve them themselves (aborting it, unless its record says it
	// committed). Readers and writers of a held key wait meanwhile. It bounds how long a coordinator that
	// dies mid-commit keeps its keys.
	TxnTimeout time.Duration
	// TxnRecordRetention is how long the record of a transaction over several segments is kept when its
	// coordinator did not drop it: the owners of its keys read it to resolve them. An owner must resolve
	// every key within this time, so it is far longer than TxnTimeout.
	TxnRecordRetention time.Duration
	// MaxValueSize bounds a stored value, and the arguments of one collection operation, in bytes.
	MaxValueSize int
	// MaxFrameSize bounds one data-plane frame, in bytes. A collection read answers at most half of it, and
	// an atomic write (EXEC, a command on several keys, a transaction) writes at most half of it.
	MaxFrameSize int
	// DataMaxConns caps the connections the data port serves at once; a further one is refused. Each peer
	// needs one, so it bounds the cluster's size as well as what strangers can open.
	DataMaxConns int
	// DataMaxRequests caps the data-plane requests this node serves at once, DataMaxConnRequests those of
	// one connection (one peer). A connection at either cap is not read until a request ends: its peer
	// waits instead of this node growing without bound.
	DataMaxRequests, DataMaxConnRequests int
	// DataMaxBufferedBytes caps the request bytes held between a frame's length prefix and the start of
	// its handler, over all data-plane connections. At least MaxFrameSize.
	DataMaxBufferedBytes int64
	// DataIdleTimeout closes a data-plane connection with no request for that long (peers redial when they
	// next need one), and a control-plane stream that has sent nothing for that long since it opened.
	DataIdleTimeout time.Duration
	// DataReadTimeout bounds how long the rest of a data-plane frame may take once its first byte has
	// arrived. DataWriteTimeout bounds each write on the data port, so a peer that stops reading is cut off.
	DataReadTimeout, DataWriteTimeout time.Duration
	// RaftMaxConns caps the control-plane streams this node accepts at once.
	RaftMaxConns int
	// BatchParallelism bounds how many items of one batch request this node serves at once. Default: GOMAXPROCS.
	BatchParallelism int
	// WriteConcern says when writes are acknowledged (see Sync and Async); a write may override it.
	// Default: Sync when ReplicationFactor >= 2.
	WriteConcern WriteConcern
	// MinInSync is the fewest in-sync copies, the owner included, a Sync write must reach: a write to a
	// partition with fewer is refused with ErrNotEnoughReplicas rather than acknowledged by fewer copies.
	// Default 1: the owner alone may acknowledge once its replicas are dropped. At most ReplicationFactor.
	MinInSync int
	// ReplicaAckTimeout bounds how long a Sync write waits for a replica before the owner asks the control
	// plane to drop that replica from the in-sync set.
	ReplicaAckTimeout time.Duration
	// FailoverTimeout is how long an active owner must stay silent, after gossip reports it failed and a
	// direct check confirms it, before its partitions are promoted to replicas.
	FailoverTimeout time.Duration
	// HealCooldown is how long a Degraded partition's copies must all stay in sync before the leader
	// declares it Healthy again (under a new epoch).
	HealCooldown time.Duration
	// DeadServerTimeout is how long a member may stay failed before its process leaves the control plane's
	// servers, a voter being replaced by a stable non-voter. It may come back later as a new server.
	DeadServerTimeout time.Duration
	// EvictionTimeout is how long a member may stay failed before rebalancing moves its partitions to the
	// other nodes. A partition left Unavailable is then recreated, empty, elsewhere. At least FailoverTimeout.
	EvictionTimeout time.Duration
	// LostPartitionTimeout is how long a partition with no live in-sync copy waits for a node that kept
	// its copy on disk (a DataDir with a DiskDurability that waits) to come back; that node is not evicted
	// meanwhile. Past it, the partition is recreated empty. At least EvictionTimeout.
	LostPartitionTimeout time.Duration
	// MaxMigrations bounds how many partitions a rebalance copies at once.
	MaxMigrations int
	// CutoverTimeout bounds how long an owner handing a partition over refuses its requests while the new
	// owner takes the last ops. Past it, the owner keeps the partition and tries again later.
	CutoverTimeout time.Duration
	// BackupDir is the directory under which BACKUP SAVE and BACKUP LOAD, sent over RESP, write and read
	// backups on this node's machine. Empty refuses them; Node.Backup and Node.Restore take any path.
	BackupDir string
	// DataDir, when set, keeps the op logs and segment snapshots on disk (Pebble), so a restarted node
	// reloads its data and fetches only what it missed. Empty: memory only.
	DataDir string
	// DiskDurability says how far a Sync write must reach on every in-sync copy's disk before it is
	// acknowledged, with a DataDir: the operating system (DiskWritten, the default), stable storage
	// (DiskSynced), or nowhere yet (DiskBehind).
	DiskDurability DiskDurability
	// DiskRetainBytes and DiskRetainAge bound a segment's op log on disk: past either, the segment is
	// snapshotted and the ops the snapshot covers are dropped. DiskTrimInterval is how often that is checked.
	DiskRetainBytes  int64
	DiskRetainAge    time.Duration
	DiskTrimInterval time.Duration
	// DiskQueueBytes bounds the ops and snapshots waiting to be written to the DataDir: writers wait while
	// it is full (one item larger than it is written alone).
	DiskQueueBytes int64
	// OpLogRetain bounds how many recent ops per segment stay in memory for replicas to catch up by
	// replay. A replica further behind is fed from the op log on disk (with a DataDir) or else gets a
	// snapshot. Within the bounds a segment keeps the ops one of its replicas has not acknowledged, what
	// recent watch and near-cache polls may read next, and its newest 64. Default 4096.
	OpLogRetain int
	// OpLogRetainBytes bounds the memory those ops take on a node, shared equally by the segments (each
	// keeps at least its newest op). Default 64 MiB, or an eighth of MaxMemory when that is less: up to
	// about 64 KiB of recent writes a segment, which covers a replica cut off for seconds under heavy
	// writes; one behind longer gets the segment whole.
	OpLogRetainBytes int64
	// MaxWatchers bounds the watchers (Watch, WatchTag) this node serves as owner; one more is refused with
	// ErrTooManyWatchers. A watcher counts from its first poll until it has not polled for three
	// WatchPoll. Each waiting poll holds one of its node's DataMaxConnRequests on the connection to this
	// one, so at most half of them. Zero means that half, at most 128; a node allowed a single request per
	// connection serves no watchers.
	MaxWatchers int
	// WatchBufferEvents and WatchBufferBytes bound the events an owner gathers for one watcher at a time,
	// which its node holds until they are delivered (at least one event is, whatever its size). A watcher
	// further behind takes its events in several polls; one the op log no longer reaches back to is sent
	// the watched keys' current state instead, in one reply that these do not bound: every live key of the
	// watched slot. Defaults 256 and 1 MiB.
	WatchBufferEvents int
	WatchBufferBytes  int
	// WatchPoll is how long an owner holds a watcher's poll open waiting for an event. Default 2s.
	WatchPoll time.Duration
	// SubscriberBuffer bounds, in bytes, the messages waiting for one subscriber (Subscribe, or a RESP
	// client's SUBSCRIBE): one that falls further behind is ended, its channel closed or its connection
	// dropped, as Redis's client-output-buffer-limit for pubsub does. Default 32 MiB.
	SubscriberBuffer int
	// SubscriberSoftBuffer and SubscriberSoftTime are the soft bound beside it: a subscriber more than
	// SubscriberSoftBuffer bytes behind for longer than SubscriberSoftTime is ended too, as by Redis's soft
	// pubsub limit. Defaults 8 MiB and 60s; a negative SubscriberSoftBuffer sets no soft bound.
	SubscriberSoftBuffer int
	SubscriberSoftTime   time.Duration
	// NearCache, with MaxBytes set, keeps values this node reads from other owners in its memory
	// (nearcache.go). Off by default.
	NearCache NearCacheConfig
	// Loader, set alike on every node, makes a read of a missing key (Get, GetEntry, GetMany, Tx.Get, RESP
	// GET) load it at the key's owner, which stores what it returns, replicated and with its TTL as a Put,
	// and answers with it. A key has one load under way at a time in the whole cluster: callers of every
	// node wait for it. A load's error reaches each of them (ErrLoadFailed) and nothing is stored; the next
	// read loads again. A load that fails over to a new owner runs there once more at most. Reads inside a
	// RESP MULTI/EXEC or a RESP command on several keys (an MGET of two) do not load. The loader must
	// return once its context ends (LoaderTimeout, or Close): Close waits for the loads under way. Nil: a
	// missing key is simply not found.
	Loader Loader
	// LoaderNegativeTTL, when set, makes an owner remember for that long that the loader found no such
	// key, answering not found without calling it again. Zero calls the loader on every miss.
	LoaderNegativeTTL time.Duration
	// LoaderConcurrency bounds the loads an owner runs at once; more wait their turn. Default 16.
	LoaderConcurrency int
	// LoaderTimeout bounds one load. Default 10s.
	LoaderTimeout time.Duration
	// MaxMemory bounds, in bytes, what the node keeps of the cluster's data: the copies of the partitions
	// it owns and replicates, the in-memory op log (OpLogRetainBytes) and the near cache
	// (NearCache.MaxBytes). What the last two may hold is set aside first, and the rest is shared by the
	// partition copies the node holds (memory.go). The owner of a partition refuses a write that would grow
	// it past its share with ErrOutOfMemory. Zero: no bound. It must be at least twice what the op log and
	// near cache may hold. Set it alike on every node: an owner sizes a partition's share for its replicas
	// too.
	MaxMemory int64
	// EvictionPolicy says what a node does when a write would pass MaxMemory, by Redis's name for it:
	// "noeviction" (the default) refuses the write; "allkeys-lru", "allkeys-lfu", "allkeys-random",
	// "volatile-lru", "volatile-lfu", "volatile-random" and "volatile-ttl" evict keys of the write's
	// partition first (memory.go).
	EvictionPolicy string
	// DisableMetrics stops counting and timing each operation, which the zaris_operations_total and
	// zaris_operation_duration_seconds series report (metrics.go); every other series reads state and
	// stays. The counting costs a few atomic adds and two clock reads per operation.
	DisableMetrics bool

	Timing Timing
	// Clock is the time source for TTLs and the node's own timers (see Clock). Default: the system clock.
	Clock Clock
	// Logger receives the node's logs. Default: discard.
	Logger *slog.Logger
	// Dialer opens data-plane and control-plane connections; a seam for fault injection. Default: net.Dialer.
	Dialer transport.Dialer
	// TLS, when set, makes every connection between nodes mutual TLS: each end presents its certificate
	// (Certificates, or GetCertificate and GetClientCertificate) and checks that the other's chains to
	// RootCAs (ClientCAs when nil) and names a node of this cluster: its URI SAN
	// zaris://<ClusterName>/node/<Name> (NodeCertificateURI), which the node's own certificate must carry
	// too. A certificate the CA signed for anything else, such as a RESP client, is refused on every peer
	// port. Host names are checked only if ServerName is set. TLSFromFiles builds one from PEM files, read
	// again when they change. Without TLS, any process that reaches DataAddr is a peer.
	TLS *tls.Config
	// ClusterName names the cluster in its nodes' certificates. Default: "zaris".
	ClusterName string
	// PeerDNSName, when set, also makes a certificate that holds this DNS SAN a node's, for a CA that
	// issues no URI SANs: the node is then known by the certificate's common name.
	PeerDNSName string
	// DeniedPeers names nodes whose certificates every peer port refuses though the CA signed them. It
	// may change while the node runs; nil denies no one.
	DeniedPeers *DenyList
	// GossipKey, when set, encrypts and authenticates gossip (16, 24 or 32 bytes: AES-128, -192 or -256);
	// every member needs it. Without it, any process that reaches GossipAddr can join membership, and be
	// assigned partitions it cannot serve, so a node with TLS refuses to start without one unless
	// OpenGossip says so.
	GossipKey []byte
	// OpenGossip lets a node with TLS run gossip without a GossipKey.
	OpenGossip bool

	// RESPAddr is the host:port of the node's Redis Cluster endpoint (internal/resp), or "" for none. Port 0
	// picks a free port. Bound to every interface, it is advertised with DataAddr's host.
	RESPAddr string
	// RESPPassword, when set, is the password of the user "default" (Redis's requirepass): it must be given
	// with AUTH or HELLO before other RESP commands.
	RESPPassword string
	// RESPUsers are further RESP users (Redis 6+ ACL users), logged in with AUTH name password or HELLO ...
	// AUTH name password. A user named "default" replaces the built-in one (then RESPPassword must be empty);
	// a disabled "default" makes every client log in as a named user.
	RESPUsers []RESPUser
	// NotifyKeyspaceEvents is the classes of keyspace notifications the RESP endpoint publishes to this
	// node's subscribers for the keys it owns, as Redis's notify-keyspace-events ("KEA" for all); CONFIG
	// SET changes them at run time. Default "": none.
	NotifyKeyspaceEvents string
	// RESPTLS, when set, serves the RESP endpoint over TLS with this configuration (certificate, and client
	// certificates if its ClientAuth asks for them); nil serves plain TCP.
	RESPTLS *tls.Config
	// RESPMaxClients bounds the RESP connections open at once; one more is told so and closed. Clients that
	// have not logged in take at most three quarters of them, and a quarter of RESPMaxQueryBufferTotal.
	RESPMaxClients int
	// RESPMaxPreAuthPerAddr bounds the RESP connections from one IP address that have not logged in yet,
	// when the endpoint asks for a login.
	RESPMaxPreAuthPerAddr int
	// RESPIdleTimeout closes a RESP connection that sends nothing, or reads none of its replies, for this long.
	// Zero: never.
	RESPIdleTimeout time.Duration
	// RESPCommandTimeout closes a RESP connection whose command is still incomplete this long after its
	// first bytes came (a client trickling a command to hold the connection). Zero: never.
	RESPCommandTimeout time.Duration
	// RESPAuthTimeout closes a RESP connection that has not authenticated this long after it connected, when
	// the endpoint asks for authentication. Zero: never.
	RESPAuthTimeout time.Duration
	// RESPMaxQueryBuffer bounds the memory one authenticated client's command may take (its bytes plus a
	// little per argument). A larger command is read past and refused. Zero: twice MaxValueSize plus 1 MiB.
	// Before authentication a command has at most 10 arguments of 16 KiB, as in Redis.
	RESPMaxQueryBuffer int
	// RESPMaxQueryBufferTotal bounds the memory the query buffers of all RESP connections take together:
	// a connection or command that would pass it is refused. Zero: the larger of 512 MiB and four
	// RESPMaxQueryBuffer.
	RESPMaxQueryBufferTotal int64

	// hooks are seams for tests; all nil in production.
	hooks testHooks
}

// NearCacheConfig configures a node's near cache: the values of keys other nodes own, kept in this node's
// memory after a Get and served from there until their owner reports a change. A Get never returns from
// it a value older than this node's own acknowledged write of the key.
type NearCacheConfig struct {
	// MaxBytes bounds the memory the cached keys and values take; zero turns the cache off.
	MaxBytes int64
	// MaxStaleness, when set, bounds how long a cached value is served without its owner confirming it
	// current: past that it is checked with the owner by version, which resends the value only if it
	// changed. Zero relies on the owner's reports of changes alone.
	MaxStaleness time.Duration
	// Keys, when set, limits the cache to the keys matching one of these glob patterns (as Redis's KEYS).
	Keys []string
}

// DefaultConfig returns a Config with every default filled in; set Name, addresses and Join as needed.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Name:                  host + "-" + strconv.Itoa(os.Getpid()),
		ClusterName:           DefaultClusterName,
		GossipAddr:            "127.0.0.1:0",
		DataAddr:              "127.0.0.1:0",
		BootstrapExpect:       1,
		Segments:              DefaultSegments,
		Partitions:            DefaultPartitions,
		ReplicationFactor:     2,
		MaxVoters:             5,
		PollInterval:          10 * time.Second,
		MaxRetries:            8,
		RetryBackoff:          2 * time.Millisecond,
		ReapInterval:          time.Second,
		TxnTimeout:            2 * time.Second,
		TxnRecordRetention:    24 * time.Hour,
		MaxValueSize:          16 << 20,
		OpLogRetainBytes:      defaultOpLogRetainBytes,
		MaxFrameSize:          transport.DefaultMaxFrameSize,
		DataMaxConns:          transport.DefaultMaxConns,
		DataMaxRequests:       transport.DefaultMaxRequests,
		DataMaxConnRequests:   transport.DefaultMaxConnRequests,
		DataMaxBufferedBytes:  transport.DefaultMaxBufferedBytes,
		DataIdleTimeout:       transport.DefaultIdleTimeout,
		DataReadTimeout:       transport.DefaultReadTimeout,
		DataWriteTimeout:      transport.DefaultWriteTimeout,
		RaftMaxConns:          DefaultRaftMaxConns,
		BatchParallelism:      runtime.GOMAXPROCS(0),
		ReplicaAckTimeout:     time.Second,
		MinInSync:             1,
		OpLogRetain:           4096,
		WatchBufferEvents:     256,
		WatchBufferBytes:      1 << 20,
		WatchPoll:             2 * time.Second,
		SubscriberBuffer:      32 << 20,
		SubscriberSoftBuffer:  8 << 20,
		SubscriberSoftTime:    time.Minute,
		DiskQueueBytes:        64 << 20,
		FailoverTimeout:       10 * time.Second,
		EvictionTimeout:       time.Minute,
		LostPartitionTimeout:  24 * time.Hour,
		DeadServerTimeout:     30 * time.Second,
		HealCooldown:          5 * time.Second,
		MaxMigrations:         4,
		CutoverTimeout:        time.Second,
		DiskRetainBytes:       4 << 20,
		DiskRetainAge:         10 * time.Minute,
		DiskTrimInterval:      10 * time.Second,
		RESPMaxClients:        10_000,
		RESPMaxPreAuthPerAddr: 256,
		RESPIdleTimeout:       5 * time.Minute,
		RESPCommandTimeout:    time.Minute,
		RESPAuthTimeout:       10 * time.Second,
		Timing:                LANTiming(),
		Clock:                 systemClock{},
	}
}

// withDefaults returns c with the zero fields that have a default filled in: a Config built by hand
// from a few fields works as one from DefaultConfig would.
func (c Config) withDefaults() Config {
	if c.WriteConcern == 0 {
		c.WriteConcern = Sync
	}
	if c.MinInSync == 0 {
		c.MinInSync = 1
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.withWatchDefaults()
	if c.OpLogRetainBytes == 0 || c.MaxMemory > 0 && c.OpLogRetainBytes == defaultOpLogRetainBytes {
		c.OpLogRetainBytes = defaultOpLogRetainBytes
		if c.MaxMemory > 0 {
			c.OpLogRetainBytes = min(defaultOpLogRetainBytes, max(1, c.MaxMemory/8))
		}
	}
	if c.EvictionPolicy == "" {
		c.EvictionPolicy = EvictionNoEviction
	}
	if c.RESPMaxQueryBuffer == 0 {
		c.RESPMaxQueryBuffer = 2*c.MaxValueSize + 1<<20
	}
	if c.RESPMaxQueryBufferTotal == 0 {
		c.RESPMaxQueryBufferTotal = max(512<<20, 4*int64(c.RESPMaxQueryBuffer))
	}
	return c
}

// defaultOpLogRetainBytes is OpLogRetainBytes's default when MaxMemory does not lower it.
const defaultOpLogRetainBytes = 64 << 20

// defaultMaxWatchers is the most watchers a node serves when Config.MaxWatchers is zero.
const defaultMaxWatchers = 128

// withWatchDefaults fills in the watch bounds left at zero.
func (c *Config) withWatchDefaults() {
	d := DefaultConfig()
	if c.MaxWatchers == 0 {
		c.MaxWatchers = min(defaultMaxWatchers, c.DataMaxConnRequests/2)
	}
	if c.WatchBufferEvents == 0 {
		c.WatchBufferEvents = d.WatchBufferEvents
	}
	if c.WatchBufferBytes == 0 {
		c.WatchBufferBytes = d.WatchBufferBytes
	}
	if c.WatchPoll == 0 {
		c.WatchPoll = d.WatchPoll
	}
	if c.SubscriberBuffer == 0 {
		c.SubscriberBuffer = d.SubscriberBuffer
	}
	if c.SubscriberSoftBuffer == 0 {
		c.SubscriberSoftBuffer = d.SubscriberSoftBuffer
	}
	if c.SubscriberSoftTime == 0 {
		c.SubscriberSoftTime = d.SubscriberSoftTime
	}
}

// Validate reports the first setting of c that Join would refuse, as an error matching ErrInvalidConfig.
// Zero fields that have a default count as that default. It changes nothing.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.Name == "" {
		return bad("Name is empty")
	}
	for _, a := range []struct{ name, addr string }{{"GossipAddr", c.GossipAddr}, {"DataAddr", c.DataAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return bad("%s %q: %v", a.name, a.addr, err)
		}
	}
	if host, _, _ := net.SplitHostPort(c.DataAddr); host == "" || net.ParseIP(host).IsUnspecified() {
		return bad("DataAddr %q: the host must be an address other members can reach", c.DataAddr)
	}
	if _, _, err := net.SplitHostPort(c.RESPAddr); c.RESPAddr != "" && err != nil {
		return bad("RESPAddr %q: %v", c.RESPAddr, err)
	}
	if _, err := NewLayout(c.Segments, c.Partitions); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.ReplicationFactor < 1:
		return bad("ReplicationFactor %d must be at least 1", c.ReplicationFactor)
	case c.BootstrapExpect < 1:
		return bad("BootstrapExpect %d must be at least 1", c.BootstrapExpect)
	case c.MaxVoters < 1:
		return bad("MaxVoters %d must be at least 1", c.MaxVoters)
	case c.MaxRetries < 0:
		return bad("MaxRetries %d must not be negative", c.MaxRetries)
	case c.PollInterval <= 0 || c.ReapInterval <= 0 || c.RetryBackoff <= 0:
		return bad("PollInterval, ReapInterval and RetryBackoff must be positive")
	case c.TxnTimeout <= 0 || c.TxnRecordRetention < 10*c.TxnTimeout:
		return bad("TxnTimeout must be positive and TxnRecordRetention at least 10 times it")
	case c.MaxFrameSize < 1024:
		return bad("MaxFrameSize %d is below 1 KiB", c.MaxFrameSize)
	case c.MaxValueSize < 1 || c.MaxValueSize > c.MaxFrameSize-512:
		return bad("MaxValueSize %d must be between 1 and MaxFrameSize-512 (%d)", c.MaxValueSize, c.MaxFrameSize-512)
	case c.SubscriberBuffer < 0:
		return bad("SubscriberBuffer %d must not be negative", c.SubscriberBuffer)
	case c.SubscriberSoftTime < 0:
		return bad("SubscriberSoftTime %v must not be negative", c.SubscriberSoftTime)
	case c.DataMaxConns < 1 || c.RaftMaxConns < 1:
		return bad("DataMaxConns %d and RaftMaxConns %d must be at least 1", c.DataMaxConns, c.RaftMaxConns)
	case c.DataMaxConnRequests < 1 || c.DataMaxRequests < c.DataMaxConnRequests:
		return bad("DataMaxConnRequests %d must be at least 1 and DataMaxRequests %d at least as many",
			c.DataMaxConnRequests, c.DataMaxRequests)
	case c.DataMaxBufferedBytes < int64(c.MaxFrameSize):
		return bad("DataMaxBufferedBytes %d must be at least MaxFrameSize %d", c.DataMaxBufferedBytes, c.MaxFrameSize)
	case c.DataIdleTimeout <= 0 || c.DataReadTimeout <= 0 || c.DataWriteTimeout <= 0:
		return bad("DataIdleTimeout, DataReadTimeout and DataWriteTimeout must be positive")
	case c.BatchParallelism < 1:
		return bad("BatchParallelism %d must be at least 1", c.BatchParallelism)
	case c.Timing.RaftHeartbeat <= 0 || c.Timing.RaftElection <= 0 || c.Timing.RaftLeaderLease <= 0 ||
		c.Timing.RaftCommit <= 0 || c.Timing.GossipInterval <= 0 || c.Timing.ProbeInterval <= 0 ||
		c.Timing.ProbeTimeout <= 0 || c.Timing.Reconcile <= 0 || c.Timing.SuspicionMult <= 0 || c.Timing.Reconnect <= 0 ||
		c.Timing.ServerStabilization <= 0:
		return bad("every Timing field must be positive")
	}
	switch {
	case c.WriteConcern != Sync && c.WriteConcern != Async:
		return bad("WriteConcern %d is neither Sync nor Async", c.WriteConcern)
	case c.MinInSync < 1 || c.MinInSync > c.ReplicationFactor:
		return bad("MinInSync %d: need 1 to ReplicationFactor (%d)", c.MinInSync, c.ReplicationFactor)
	case c.DiskDurability < DiskWritten || c.DiskDurability > DiskBehind:
		return bad("DiskDurability %d is none of DiskWritten, DiskSynced, DiskBehind", c.DiskDurability)
	case c.ReplicaAckTimeout <= 0:
		return bad("ReplicaAckTimeout must be positive")
	case c.TLS != nil && c.TLS.RootCAs == nil && c.TLS.ClientCAs == nil:
		return bad("TLS needs RootCAs: the cluster's CA, which every peer's certificate must chain to")
	case c.ClusterName != "" && !validClusterName(c.ClusterName):
		return bad("ClusterName %q: use letters, digits, '-' and '.'", c.ClusterName)
	case c.TLS != nil && len(c.GossipKey) == 0 && !c.OpenGossip:
		return bad("TLS without a GossipKey lets any process that reaches GossipAddr join: set GossipKey, or OpenGossip to run so")
	case !validGossipKey(c.GossipKey):
		return bad("GossipKey is %d bytes; it must be 16, 24 or 32", len(c.GossipKey))
	case c.DiskQueueBytes < 1:
		return bad("DiskQueueBytes %d must be at least 1", c.DiskQueueBytes)
	case c.OpLogRetain < 1 || c.OpLogRetainBytes < 1:
		return bad("OpLogRetain %d and OpLogRetainBytes %d must be at least 1", c.OpLogRetain, c.OpLogRetainBytes)
	case c.MaxMemory < 0:
		return bad("MaxMemory %d must not be negative", c.MaxMemory)
	case c.MaxMemory > 0 && c.MaxMemory < minMaxMemory(c.OpLogRetainBytes+c.NearCache.MaxBytes):
		return bad("MaxMemory %d must be at least twice what the in-memory op log and near cache may hold (%d bytes): "+
			"lower OpLogRetainBytes or NearCache.MaxBytes", c.MaxMemory, c.OpLogRetainBytes+c.NearCache.MaxBytes)
	case !slices.Contains(evictionPolicies, c.EvictionPolicy):
		return bad("EvictionPolicy %q is none of %s", c.EvictionPolicy, strings.Join(evictionPolicies, ", "))
	case c.FailoverTimeout <= 0 || c.DeadServerTimeout <= 0:
		return bad("FailoverTimeout and DeadServerTimeout must be positive")
	case c.LostPartitionTimeout < c.EvictionTimeout:
		return bad("LostPartitionTimeout %v must be at least EvictionTimeout %v", c.LostPartitionTimeout, c.EvictionTimeout)
	case c.EvictionTimeout < c.FailoverTimeout:
		return bad("EvictionTimeout %v must be at least FailoverTimeout %v", c.EvictionTimeout, c.FailoverTimeout)
	case c.MaxMigrations < 1 || c.CutoverTimeout <= 0 || c.HealCooldown <= 0:
		return bad("MaxMigrations, CutoverTimeout and HealCooldown must be positive")
	case c.DiskRetainBytes < 1 || c.DiskRetainAge <= 0 || c.DiskTrimInterval <= 0:
		return bad("DiskRetainBytes, DiskRetainAge and DiskTrimInterval must be positive")
	case c.MaxWatchers < 0 || c.MaxWatchers > c.DataMaxConnRequests/2:
		return bad("MaxWatchers %d: need at most half of DataMaxConnRequests (%d)", c.MaxWatchers, c.DataMaxConnRequests/2)
	case c.WatchBufferEvents < 1 || c.WatchBufferBytes < 1 || c.WatchPoll <= 0:
		return bad("WatchBufferEvents, WatchBufferBytes and WatchPoll must be positive")
	case c.NearCache.MaxBytes < 0 || c.NearCache.MaxStaleness < 0:
		return bad("NearCache.MaxBytes and NearCache.MaxStaleness must not be negative")
	case c.LoaderNegativeTTL < 0 || c.LoaderConcurrency < 0 || c.LoaderTimeout < 0:
		return bad("LoaderNegativeTTL, LoaderConcurrency and LoaderTimeout must not be negative")
	}
	return validateRESPConfig(&c)
}

// leaderRules are the timeouts and limits a leader decides by.
func (c *Config) leaderRules() leaderRules {
	return leaderRules{FailoverTimeout: c.FailoverTimeout, HealCooldown: c.HealCooldown, EvictionTimeout: c.EvictionTimeout,
		LostPartitionTimeout: c.LostPartitionTimeout, MaxMigrations: c.MaxMigrations, BootstrapExpect: c.BootstrapExpect}
}

// testHooks are the seams tests reach through to observe a node or hold it at a chosen point.
type testHooks struct {
	// greeting, when set, is the protocol the node announces instead of its release's.
	greeting *transport.Greeting
	// evicted, when set, is called with each key this node evicts as owner, once its eviction is written.
	evicted func(key string)
	// refuseOp, when set, makes this node answer the operations it names, on either lane, as a node of an
	// older version does an operation it does not know.
	refuseOp func(op transport.Op) bool
	// panicOp, when set, makes a key operation this node applies as owner panic, under its segment's lock
	// and before it changes anything, when it returns true for the operation and key (panics.go).
	panicOp func(op transport.Op, key string) bool
	// panicOnWrite, when set, makes this node's write hook panic for a write of key it returns true for:
	// the write has changed the segment and not reached replicas, the disk or watchers yet.
	panicOnWrite func(key string) bool
	// nearReport, when set, sees each owner's answer to a near cache poll before the cache applies it, and
	// may change it: a test loses reports of changed keys with it.
	nearReport func(reply *nearWatchReply)
	// txnStep, when set, is asked before each request this node sends as the coordinator of a transaction
	// over several segments; an error stops the coordinator there, as if it died.
	txnStep func(step txnStep) error
	// observeAck, when set, is told of every write this node acknowledged as owner, with the
	// partition and the epoch it owned it under.
	observeAck func(owner NodeID, partition int, epoch uint64)
	// holdRejoin, when set, keeps a replica out of a partition's in-sync set while it returns true.
	holdRejoin func(partition int, replica NodeID) bool
	// beforeAdmit, when set, runs after an owner found a replica caught up and before it proposes
	// the replica's return to the partition's in-sync set.
	beforeAdmit func(partition int, replica NodeID)
	// afterSeal, when set, runs once an owner handing partition p over has sealed it, before it waits
	// for the new owner to take the last ops; it may block to hold the owner there.
	afterSeal func(p int)
	// beforeCommitDecision, when set, runs on the leader for each decision of a reconcile round before
	// it is committed; it may block to hold the leader between deciding and committing.
	beforeCommitDecision func(d decision)
	// holdRecognition, when set, keeps the leader from recording a restarted member's new process
	// while it returns true.
	holdRecognition func(id NodeID) bool
	// afterServerChange, when set, sees the leader's control-plane configuration after each server change
	// it made.
	afterServerChange func(change serverChange, c raft.Configuration)
	// beforeApply, when set, runs on the control plane's apply goroutine before each new map is
	// published; it may block to hold the node at an older map.
	beforeApply func(next *ClusterMap)
	// beforeAdvertiseFormed, when set, runs before a node gossips that the cluster has formed; it may
	// block, until life ends at the latest, to hold the advertisement.
	beforeAdvertiseFormed func(life context.Context)
	// diskFS, when set, is the file system under DataDir, so that a test can freeze every node's
	// disk at one instant as a kill of every process would.
	diskFS vfs.FS
	// diskStore, when set, wraps the store of this node's op log, so that a test can make it refuse writes.
	diskStore func(durability.Store) durability.Store
	// gossipTransport, when set, wraps the gossip layer's network transport for node name, so that
	// faults can cut gossip as well as data and control-plane links.
	gossipTransport func(name string, base memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
	// network, when set, carries the data port, the control plane and gossip in memory instead of on
	// sockets, and is the dialer when Dialer is nil. The RESP endpoint stays on a socket.
	network *memnet.Network
}

// applyTimeout bounds how long the leader waits to commit one control decision.
const applyTimeout = 5 * time.Second

// WriteConcern says when a write is acknowledged.
type WriteConcern = kv.WriteConcern

const (
	// Sync acknowledges a write only after every in-sync replica of its partition has applied it.
	Sync = kv.Sync
	// Async acknowledges a write once the owner has applied it; replicas receive it moments later. If the
	// owner dies in between, the write is lost although it was acknowledged.
	Async = kv.Async
)

// WithWriteConcern overrides Config.WriteConcern for one write.
func WithWriteConcern(c WriteConcern) PutOption {
	return func(o *putOptions) { o.concern = c }
}

// DiskDurability says, for a node with a DataDir, how far a Sync write must have reached on every in-sync
// copy's disk before it is acknowledged.
type DiskDurability int

const (
	// DiskWritten acknowledges a write once every in-sync copy has handed it to the operating system (one
	// write call for many ops, no fsync): it survives every process of the cluster killed at once, not
	// every machine losing power. The default.
	DiskWritten DiskDurability = iota
	// DiskSynced acknowledges a write once every in-sync copy has flushed it to stable storage (one fsync
	// for many ops): it survives every machine losing power.
	DiskSynced
	// DiskBehind writes the disk behind the acknowledgement: as without a DataDir, a write survives while
	// one in-sync copy's process lives. The disk only shortens what a restarted node must fetch.
	DiskBehind
)

func (d DiskDurability) String() string {
	switch d {
	case DiskWritten:
		return "written"
	case DiskSynced:
		return "synced"
	case DiskBehind:
		return "behind"
	}
	return fmt.Sprintf("DiskDurability(%d)", int(d))
}

// MarshalText returns the name String gives.
func (d DiskDurability) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses the name String gives: written, synced or behind.
func (d *DiskDurability) UnmarshalText(b []byte) error {
	for _, level := range []DiskDurability{DiskWritten, DiskSynced, DiskBehind} {
		if string(b) == level.String() {
			*d = level
			return nil
		}
	}
	return fmt.Errorf("%w: disk durability %q is none of written, synced, behind", ErrInvalidConfig, b)
}

// subscriberLimit is the bound on what one subscriber may have waiting.
func (c *Config) subscriberLimit() pubsub.Limit {
	return pubsub.Limit{Hard: c.SubscriberBuffer, Soft: c.SubscriberSoftBuffer, SoftFor: c.SubscriberSoftTime}
}
