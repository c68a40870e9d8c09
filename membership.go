package zaris

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"sync"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/transport"
)

// Serf tags a member carries. Cluster parameters travel with every member so a mismatched node is refused
// at the door rather than corrupting placement later.
const (
	tagDataAddr    = "data"
	tagSegments    = "seg"
	tagPartitions  = "part"
	tagRF          = "rf"
	tagFormed      = "formed"  // "1" once the member belongs to a control plane with a leader
	tagIncarnation = "inc"     // random per process: a new value means the member restarted
	tagServer      = "srv"     // the incarnation in the member's control-plane server ID (voters.go)
	tagIntact      = "intact"  // "1" when the process reloaded every write its predecessor acknowledged
	tagDurable     = "durable" // "1" when the process acknowledges only what its disk holds: its copies outlive it
	tagRESPAddr    = "resp"    // the RESP endpoint's advertised address; absent when the node serves none
	tagLeaving     = "leaving" // "1" while the member drains its partitions before a graceful leave
	tagLite        = "lite"    // "1" for a member that holds no partitions

	tagProtocol        = "pv"    // the protocol the member speaks (ProtocolVersion)
	tagMinProtocol     = "pvmin" // the oldest protocol it works with
	tagClusterProtocol = "pvc"   // the cluster's protocol as the member's map records it
)

// member is a peer as membership sees it.
type member struct {
	ID       NodeID
	DataAddr string
	RESPAddr string
	// Incarnation identifies the member's process (see tagIncarnation).
	Incarnation uint64
	// Server identifies the member's control-plane server: its process's incarnation when it keeps its
	// raft state in memory, fixed for the life of its data directory when it keeps it on disk.
	Server uint64
	// Intact is set when the process restarted from a data dir that holds every write its predecessor
	// acknowledged, so that its copies stay in sync across the restart.
	Intact bool
	// Durable is set when the process acknowledges writes only once its disk holds them (a DataDir and a
	// DiskDurability that waits), so its copies outlive it on disk.
	Durable bool
	Status  serf.MemberStatus
	Formed  bool
	// Leaving is set while the member drains before a graceful leave: it gets no new partitions.
	Leaving bool
	// Lite members hold no partitions (Config.Lite).
	Lite bool
	// Protocol is the protocol the member speaks and the oldest it works with.
	Protocol transport.Greeting
}

// membership wraps serf: gossip-based discovery and failure detection. A serf failure is a rumour; the
// control plane decides what it means.
type membership struct {
	serf   *serf.Serf
	events chan serf.Event
	addr   string // gossip address, fixed once bound

	mu       sync.Mutex
	mismatch error // why the last merge was refused, so Join can say it clearly

	// tags serializes changes of this member's tags: each reads the tags, adds its flag and sets them
	// all, which two at once would race on, and one could undo the other's flag.
	tags sync.Mutex

	protocol transport.Greeting // what this member speaks
}

// processTags describes a member's process in its tags.
type processTags struct {
	incarnation, server uint64
	intact, durable     bool
	protocol            transport.Greeting
	cluster             *uint16 // the cluster's protocol as the process's partition map records it; nil without one
}

func clusterTags(cfg *Config, dataAddr string, proc processTags) map[string]string {
	tags := map[string]string{
		tagDataAddr:    dataAddr,
		tagSegments:    strconv.Itoa(cfg.Segments),
		tagPartitions:  strconv.Itoa(cfg.Partitions),
		tagRF:          strconv.Itoa(cfg.ReplicationFactor),
		tagIncarnation: strconv.FormatUint(proc.incarnation, 10),
		tagServer:      strconv.FormatUint(proc.server, 10),
	}
	v := peerVersions{protocol: proc.protocol, hasCluster: proc.cluster != nil}
	if v.hasCluster {
		v.cluster = *proc.cluster
	}
	maps.Copy(tags, v.tags())
	if proc.intact {
		tags[tagIntact] = "1"
	}
	if proc.durable {
		tags[tagDurable] = "1"
	}
	if cfg.RESPAddr != "" {
		tags[tagRESPAddr] = cfg.RESPAddr
	}
	if cfg.Lite {
		tags[tagLite] = "1"
	}
	return tags
}

func startMembership(cfg *Config, dataAddr string, proc processTags) (*membership, error) {
	host, portStr, err := net.SplitHostPort(cfg.GossipAddr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("%w: GossipAddr port %q", ErrInvalidConfig, portStr)
	}
	m := &membership{events: make(chan serf.Event, 256), protocol: proc.protocol}
	tags := clusterTags(cfg, dataAddr, proc)

	ml := memberlist.DefaultLANConfig()
	ml.Name = cfg.Name
	ml.BindAddr, ml.BindPort = host, port
	ml.AdvertisePort = port
	ml.GossipInterval = cfg.Timing.GossipInterval
	ml.ProbeInterval = cfg.Timing.ProbeInterval
	ml.ProbeTimeout = cfg.Timing.ProbeTimeout
	ml.SuspicionMult = cfg.Timing.SuspicionMult
	ml.SecretKey = cfg.GossipKey
	ml.Logger = slog.NewLogLogger(cfg.Logger.Handler().WithAttrs([]slog.Attr{slog.String("node", string(cfg.Name)), slog.String("component", "gossip")}), slog.LevelDebug)

	sc := serf.DefaultConfig()
	sc.NodeName = cfg.Name
	sc.Tags = tags
	sc.MemberlistConfig = ml
	sc.EventCh = m.events
	sc.Merge = &mergeGuard{m: m, self: cfg.Name, want: tags}
	sc.LeavePropagateDelay = 2 * cfg.Timing.GossipInterval
	sc.ReconnectInterval = cfg.Timing.Reconnect
	// Tag updates wait for their broadcast; bound the wait so Close is never held up for long.
	sc.BroadcastTimeout = 10 * cfg.Timing.GossipInterval
	sc.Logger = ml.Logger
	if err := setGossipTransport(cfg, ml); err != nil {
		return nil, fmt.Errorf("zaris: start membership on %s: %w", cfg.GossipAddr, err)
	}
	s, err := serf.Create(sc)
	if err != nil {
		if ml.Transport != nil {
			ml.Transport.Shutdown() // memberlist leaves a transport it was given open when it fails to start
		}
		return nil, fmt.Errorf("zaris: start membership on %s: %w", cfg.GossipAddr, err)
	}
	m.serf = s
	local := s.Memberlist().LocalNode()
	m.addr = net.JoinHostPort(local.Addr.String(), strconv.Itoa(int(local.Port)))
	return m, nil
}

// setGossipTransport gives memberlist the transport cfg's hooks ask for: one on the in-memory network, or
// memberlist's default bound here, wrapped by cfg.hooks.gossipTransport. Without hooks memberlist binds its own.
func setGossipTransport(cfg *Config, ml *memberlist.Config) error {
	var base memberlist.NodeAwareTransport
	switch {
	case cfg.hooks.network != nil:
		mt, err := cfg.hooks.network.GossipTransport(cfg.GossipAddr)
		if err != nil {
			return err
		}
		ml.BindPort, ml.AdvertisePort = mt.Port(), mt.Port()
		base = mt
	case cfg.hooks.gossipTransport != nil:
		nt, err := newNetTransport(ml)
		if err != nil {
			return err
		}
		base = nt
	default:
		return nil
	}
	if cfg.hooks.gossipTransport != nil {
		base = cfg.hooks.gossipTransport(cfg.Name, base)
	}
	ml.Transport = base
	return nil
}

// newNetTransport binds memberlist's default transport as memberlist.Create would, so that it can be
// wrapped. It retries a free port (BindPort 0) taken by another bind first, and sets ml to the port bound.
func newNetTransport(ml *memberlist.Config) (*memberlist.NetTransport, error) {
	nc := &memberlist.NetTransportConfig{
		BindAddrs:    []string{ml.BindAddr},
		BindPort:     ml.BindPort,
		Logger:       ml.Logger,
		MetricLabels: ml.MetricLabels,
	}
	attempts := 1
	if ml.BindPort == 0 {
		attempts = 10 // the port is bound for TCP first, then for UDP, which another process may hold
	}
	var err error
	for range attempts {
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(nc); err == nil {
			if ml.BindPort == 0 {
				ml.BindPort = nt.GetAutoBindPort()
				ml.AdvertisePort = ml.BindPort
			}
			return nt, nil
		}
	}
	return nil, fmt.Errorf("gossip transport on %s: %w", net.JoinHostPort(ml.BindAddr, strconv.Itoa(ml.BindPort)), err)
}

// join contacts existing members. A refusal caused by differing cluster parameters is reported as
// ErrClusterMismatch with the reason.
func (m *membership) join(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	m.mu.Lock()
	m.mismatch = nil // a refusal since, of this join's merges or of a member gossiped meanwhile, explains a failure
	m.mu.Unlock()
	if _, err := m.serf.Join(addrs, true); err != nil {
		if mismatch := m.lastMismatch(); mismatch != nil {
			// The members that sent their state may have taken this node's before it refused theirs:
			// leaving says it is gone, rather than failed, so that none waits for it to come back.
			_ = m.serf.Leave()
			return mismatch
		}
		return fmt.Errorf("zaris: join %v: %w", addrs, err)
	}
	return nil
}

func (m *membership) lastMismatch() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mismatch
}

// gossipAddr is the address other nodes use to join through this one.
func (m *membership) gossipAddr() string { return m.addr }

// members lists every known member that belongs to this cluster, whatever its status.
func (m *membership) members() []member {
	all := m.serf.Members()
	out := make([]member, 0, len(all))
	for _, sm := range all {
		versions, _ := parseVersionTags(sm.Tags)
		out = append(out, member{
			ID:          NodeID(sm.Name),
			DataAddr:    sm.Tags[tagDataAddr],
			RESPAddr:    sm.Tags[tagRESPAddr],
			Incarnation: parseIncarnation(sm.Tags[tagIncarnation]),
			Server:      parseIncarnation(sm.Tags[tagServer]),
			Intact:      sm.Tags[tagIntact] == "1",
			Durable:     sm.Tags[tagDurable] == "1",
			Status:      sm.Status,
			Formed:      sm.Tags[tagFormed] == "1",
			Leaving:     sm.Tags[tagLeaving] == "1",
			Lite:        sm.Tags[tagLite] == "1",
			Protocol:    versions.protocol,
		})
	}
	return out
}

// markFormed advertises that this member belongs to a control plane with a leader, so nodes that join later
// know not to bootstrap a second one.
func (m *membership) markFormed() error { return m.setFlag(tagFormed) }

// markLeaving advertises that this member is draining before a graceful leave.
func (m *membership) markLeaving() error { return m.setFlag(tagLeaving) }

// setFlag sets tag to "1" on the local member, gossiping the change.
func (m *membership) setFlag(tag string) error { return m.setTag(tag, "1") }

// setTag sets tag to value on the local member, gossiping the change.
func (m *membership) setTag(tag, value string) error {
	m.tags.Lock()
	defer m.tags.Unlock()
	tags := m.serf.LocalMember().Tags
	if tags[tag] == value {
		return nil
	}
	next := maps.Clone(tags)
	next[tag] = value
	return m.serf.SetTags(next)
}

// advertisedClusterProtocol is the cluster's protocol this member's tags announce, if they announce one.
func (m *membership) advertisedClusterProtocol() (uint16, bool) {
	v, ok := parseVersionTags(m.serf.LocalMember().Tags)
	return v.cluster, ok && v.hasCluster
}

// advertiseClusterProtocol announces the cluster's protocol v in this member's tags, so that a node that
// joins through another member learns it (checkPeerVersions).
func (m *membership) advertiseClusterProtocol(v uint16) error {
	return m.setTag(tagClusterProtocol, strconv.Itoa(int(v)))
}

// leave announces a graceful departure. It returns ErrClosed after shutdown.
func (m *membership) leave() error {
	if m.serf.State() == serf.SerfShutdown {
		return ErrClosed
	}
	return m.serf.Leave()
}

func (m *membership) shutdown() error { return m.serf.Shutdown() }

// mergeGuard refuses to merge with members whose cluster parameters differ from ours, or whose versions
// do not work with ours.
type mergeGuard struct {
	m    *membership
	self string
	want map[string]string
}

func (g *mergeGuard) NotifyMerge(members []*serf.Member) error {
	for _, sm := range members {
		if err := g.check(sm); err != nil {
			g.m.mu.Lock()
			g.m.mismatch = err
			g.m.mu.Unlock()
			return err
		}
	}
	return nil
}

func (g *mergeGuard) check(sm *serf.Member) error {
	for _, key := range []string{tagSegments, tagPartitions, tagRF} {
		if got := sm.Tags[key]; got != g.want[key] {
			return fmt.Errorf("%w: member %s has %s=%s, this node has %s=%s", ErrClusterMismatch, sm.Name, key, got, key, g.want[key])
		}
	}
	if sm.Status == serf.StatusLeft || sm.Name == g.self {
		return nil // gone, whatever it ran; or this member itself
	}
	return checkPeerVersions(g.m.protocol, sm.Name, sm.Tags)
}

func parseIncarnation(tag string) uint64 {
	v, _ := strconv.ParseUint(tag, 10, 64)
	return v
}
