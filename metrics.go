package zaris

import (
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// Collector returns a Prometheus collector of the node's series, to register on the embedding service's
// registry. Every series carries a node label, so several nodes of one process can share a registry.
// Counters and histograms of operations come from atomics the node keeps; the other series read the
// node's state at scrape time.
func (n *Node) Collector() prometheus.Collector {
	src := metricSources{
		self: n.id, ops: n.metrics, panics: &n.panics.counts, failovers: &n.stats.failovers, cutovers: &n.own.cut.done,
		raft: n.ctl.raft, clock: n.cfg.Clock, store: n.own.store,
		stats: n.Stats, clusterMap: n.ctl.fsm.clusterMap, owns: n.own.repl.ownsIn, migrations: n.Migrations,
		lag: n.own.repl.lag, replication: n.ReplicationStats, control: n.ctl.controlHealth, members: n.members.members,
		expired: n.stats.expired.Load, oplogBytes: n.own.repl.oplogBytes,
		transports: []*transport.Server{n.port.data, n.port.internal},
	}
	src.respClients = n.redis.clients()
	if n.client.near != nil {
		src.nearCache = n.NearCacheStats
	}
	if n.own.loads != nil {
		src.loader = n.LoaderStats
	}
	return &collector{src: src, d: newMetricDescs(n.id)}
}

// metricSources are what the collector reads at scrape time, from the parts that keep each figure.
type metricSources struct {
	self        NodeID
	ops         *opMetrics // nil with Config.DisableMetrics
	panics      *panics
	failovers   *histogram
	cutovers    *atomic.Uint64
	raft        raftFigures
	clock       Clock
	store       *store
	stats       func() Stats
	clusterMap  func() *ClusterMap
	owns        func(m *ClusterMap, p int) bool
	migrations  func() []Migration
	lag         func(p int, replica NodeID) (revisions uint64, bytes int64, known bool)
	replication func() ReplicationStats
	control     func() controlHealth
	members     func() []member
	expired     func() uint64
	oplogBytes  func() int64
	transports  []*transport.Server
	respClients func() int            // nil without a RESP endpoint
	nearCache   func() NearCacheStats // nil without a near cache
	loader      func() LoaderStats    // nil without a loader
}

// raftFigures are the control plane's figures the collector reports.
type raftFigures interface {
	State() raft.RaftState
	CurrentTerm() uint64
	CommitIndex() uint64
	AppliedIndex() uint64
	LastContact() time.Time
}

type collector struct {
	src metricSources
	d   metricDescs
}

// metricDescs describe every series the collector reports.
type metricDescs struct {
	ops, opSeconds                            *prometheus.Desc
	redirectsSent, redirectsReceived, retries *prometheus.Desc
	refreshes, requestsSent, requestsServed   *prometheus.Desc
	replLagRevisions, replLagBytes, inSync    *prometheus.Desc
	replOps, replBytes, replSnapshots, gaps   *prometheus.Desc
	moveBytes                                 *prometheus.Desc
	replApplied, replRejected                 *prometheus.Desc
	partitions, owned, replicated             *prometheus.Desc
	failovers, failoverSeconds, moved         *prometheus.Desc
	migrations, cutovers                      *prometheus.Desc
	raftState, raftTerm, raftCommit           *prometheus.Desc
	raftApplied, raftLastContact, members     *prometheus.Desc
	leaderless, leaderlessAlarm               *prometheus.Desc
	storeBytes, keys, oplogBytes, bufferBytes *prometheus.Desc
	maxMemory, oomRefusals, evictedKeys       *prometheus.Desc
	expiringKeys, expiredKeys                 *prometheus.Desc
	nearBytes, nearOps, loads                 *prometheus.Desc
	respConns, dataConns                      *prometheus.Desc
	panics                                    *prometheus.Desc
}

func newMetricDescs(node NodeID) metricDescs {
	labels := prometheus.Labels{"node": string(node)}
	d := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc("zaris_"+name, help, variable, labels)
	}
	return metricDescs{
		ops:               d("operations_total", "Key operations by side (caller: from the call to its final reply; owner: served as the key's owner), kind and outcome.", "side", "op", "status"),
		opSeconds:         d("operation_duration_seconds", "Time key operations took, by side and kind.", "side", "op"),
		redirectsSent:     d("redirects_sent_total", "Requests this node refused because it is not the key's active owner."),
		redirectsReceived: d("redirects_received_total", "Moved, OwnershipChanging and ReplicaWriteRejected replies this node received."),
		retries:           d("retries_total", "Operations resent after a redirect."),
		refreshes:         d("map_refreshes_total", "Routing-table installs by cause (push, poll, react; coalesced: a reactive refresh found it done).", "cause"),
		requestsSent:      d("requests_sent_total", "Key requests sent to each peer.", "peer"),
		requestsServed:    d("requests_served_total", "Key and batch requests served for other nodes."),
		replLagRevisions:  d("replication_lag_revisions", "Writes of a partition this node owns that a replica has not acknowledged.", "partition", "replica"),
		replLagBytes:      d("replication_lag_bytes", "Op-log bytes of a partition this node owns that a replica has not acknowledged.", "partition", "replica"),
		inSync:            d("partition_in_sync_replicas", "Replicas in the in-sync set of each partition this node owns.", "partition"),
		replOps:           d("replication_ops_sent_total", "Ops this node sent to its replicas."),
		replBytes:         d("replication_sent_bytes_total", "Bytes of replication requests this node sent, ops and snapshots (moves included)."),
		replSnapshots:     d("replication_snapshots_sent_total", "Whole segments this node sent to replicas and incoming owners."),
		moveBytes:         d("move_sent_bytes_total", "Bytes of replication requests this node sent to the incoming nodes of moves."),
		gaps:              d("replication_gaps_total", "Ops this node received as a replica past a gap, which made its owner resend."),
		replApplied:       d("replication_ops_applied_total", "Ops this node applied as a replica."),
		replRejected:      d("replication_rejected_stale_epoch_total", "Replication requests this node refused for a stale epoch."),
		partitions:        d("partitions", "Partitions of the cluster by health, as this node's map has them.", "health"),
		owned:             d("partitions_owned", "Partitions this node serves as active owner."),
		replicated:        d("partitions_replicated", "Partitions this node is assigned as a replica."),
		failovers:         d("partition_failovers_total", "Partitions failed over in the cluster's life, as this node's map counts them."),
		failoverSeconds:   d("failover_duration_seconds", "For failovers this node committed as leader: from its suspicion of the owner to the commit."),
		moved:             d("partitions_moved_total", "Partitions whose nodes rebalancing changed, in the cluster's life."),
		migrations:        d("migrations", "Partition moves in the cluster by state (copying, or waiting for a free slot).", "state"),
		cutovers:          d("cutovers_total", "Moves this node cut over as the partition's previous owner."),
		raftState:         d("raft_state", "1 for this node's control-plane state.", "state"),
		raftTerm:          d("raft_term", "The control plane's current term as this node knows it."),
		raftCommit:        d("raft_commit_index", "The control plane's commit index as this node knows it."),
		raftApplied:       d("raft_applied_index", "The control-plane log index this node applied."),
		raftLastContact:   d("raft_last_contact_seconds", "Time since this follower last heard from the leader; 0 on the leader."),
		leaderless:        d("control_plane_leaderless_seconds", "How long this node has known no control-plane leader; 0 while it knows one."),
		leaderlessAlarm:   d("control_plane_leaderless_alarm", "1 while this node has known no control-plane leader for longer than a few election timeouts, else 0."),
		members:           d("members", "Cluster members by gossip status.", "status"),
		storeBytes:        d("store_bytes", "Estimated memory of the stored entries: keys, values and per-entry overhead."),
		keys:              d("keys", "Keys held on this node, owned or replicated, expired ones not yet reclaimed included."),
		expiringKeys:      d("keys_with_ttl", "Keys held on this node that have a TTL."),
		expiredKeys:       d("expired_keys_total", "Keys this node expired as their owner."),
		maxMemory:         d("max_memory_bytes", "Config.MaxMemory as it stands (CONFIG SET may change it); 0 for no bound."),
		oomRefusals:       d("out_of_memory_refusals_total", "Writes this node refused as owner because their partition held its share of MaxMemory."),
		evictedKeys:       d("evicted_keys_total", "Keys this node evicted as owner to keep within MaxMemory, by the eviction policy.", "policy"),
		oplogBytes:        d("oplog_bytes", "Bytes of recent ops the op log keeps in memory for replicas, watchers and near caches."),
		bufferBytes:       d("data_port_buffered_bytes", "Bytes of requests the data port has read and not yet handed to a handler."),
		nearBytes:         d("near_cache_bytes", "Bytes the near cache holds."),
		nearOps:           d("near_cache_events_total", "Near-cache events by kind.", "event"),
		loads:             d("loader_events_total", "Read-through loads as owner: loader calls, failures (failed or not stored), and misses answered from LoaderNegativeTTL.", "event"),
		respConns:         d("resp_connections", "Open RESP client connections."),
		panics:            d("panics_total", "Panics this node recovered, by where (op, resp, peer, replication, background); each is logged at ERROR with its stack.", "where"),
		dataConns:         d("data_port_connections", "Open connections to the data port from other nodes."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	d := &c.d
	for _, desc := range []*prometheus.Desc{
		d.ops, d.opSeconds, d.redirectsSent, d.redirectsReceived, d.retries, d.refreshes, d.requestsSent,
		d.requestsServed, d.replLagRevisions, d.replLagBytes, d.inSync, d.replOps, d.replBytes, d.replSnapshots, d.moveBytes,
		d.gaps, d.replApplied, d.replRejected, d.partitions, d.owned, d.replicated, d.failovers,
		d.failoverSeconds, d.moved, d.migrations, d.cutovers, d.raftState, d.raftTerm, d.raftCommit,
		d.raftApplied, d.raftLastContact, d.leaderless, d.leaderlessAlarm, d.members, d.storeBytes, d.keys, d.expiringKeys, d.expiredKeys, d.oplogBytes, d.bufferBytes, d.maxMemory, d.oomRefusals, d.evictedKeys,
		d.nearBytes, d.nearOps, d.loads, d.respConns, d.dataConns, d.panics,
	} {
		ch <- desc
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.collectOps(ch)
	c.collectRouting(ch)
	c.collectPartitions(ch)
	c.collectReplication(ch)
	c.collectControl(ch)
	c.collectMemory(ch)
	c.collectLoads(ch)
}

// metric sends one gauge or counter.
func metric(ch chan<- prometheus.Metric, desc *prometheus.Desc, kind prometheus.ValueType, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(desc, kind, v, labels...)
}

func counter(ch chan<- prometheus.Metric, desc *prometheus.Desc, v uint64, labels ...string) {
	metric(ch, desc, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, desc *prometheus.Desc, v float64, labels ...string) {
	metric(ch, desc, prometheus.GaugeValue, v, labels...)
}

func histogramMetric(ch chan<- prometheus.Metric, desc *prometheus.Desc, h *histogram, labels ...string) {
	count, sum, buckets := h.cumulative()
	ch <- prometheus.MustNewConstHistogram(desc, count, sum, buckets, labels...)
}

func (c *collector) collectOps(ch chan<- prometheus.Metric) {
	m := c.src.ops
	if m == nil {
		return
	}
	for _, side := range []struct {
		name string
		ops  *opSide
	}{{"caller", m.caller}, {"owner", m.owner}} {
		for op, series := range side.ops.ops {
			if series == nil {
				continue
			}
			name := opMetricName(op)
			for status := range series.outcomes {
				if v := series.outcomes[status].Load(); v > 0 {
					counter(ch, c.d.ops, v, side.name, name, outcomeName(Status(status)))
				}
			}
			if series.latency.counted() {
				histogramMetric(ch, c.d.opSeconds, &series.latency, side.name, name)
			}
		}
	}
}

// opMetricName names an operation kind in the op label.
func opMetricName(op int) string {
	if op == int(kv.OpBatch) {
		return "batch"
	}
	return opName(transport.Op(op))
}

func (c *collector) collectRouting(ch chan<- prometheus.Metric) {
	s := c.src.stats()
	counter(ch, c.d.redirectsSent, s.RedirectsSent)
	counter(ch, c.d.redirectsReceived, s.RedirectsReceived)
	counter(ch, c.d.retries, s.Retries)
	counter(ch, c.d.requestsServed, s.RequestsServed)
	counter(ch, c.d.refreshes, s.Refreshes.Push, "push")
	counter(ch, c.d.refreshes, s.Refreshes.Poll, "poll")
	counter(ch, c.d.refreshes, s.Refreshes.React, "react")
	counter(ch, c.d.refreshes, s.Refreshes.Coalesced, "coalesced")
	for peer, sent := range s.RequestsSent {
		counter(ch, c.d.requestsSent, sent, string(peer))
	}
	for site := range panicSites {
		counter(ch, c.d.panics, c.src.panics[site].Load(), site.String())
	}
}

func (c *collector) collectPartitions(ch chan<- prometheus.Metric) {
	m := c.src.clusterMap()
	byHealth := map[Health]int{}
	owned, replicated := 0, 0
	for p, st := range m.Runtime {
		byHealth[st.Health]++
		if c.src.owns(m, p) {
			owned++
		} else if p < len(m.Assignment) && slices.Contains(m.Assignment[p], c.src.self) {
			replicated++
		}
	}
	for _, h := range []Health{Healthy, Degraded, Recovering, Unavailable} {
		gauge(ch, c.d.partitions, float64(byHealth[h]), h.String())
	}
	gauge(ch, c.d.owned, float64(owned))
	gauge(ch, c.d.replicated, float64(replicated))
	counter(ch, c.d.failovers, m.Promotions)
	counter(ch, c.d.moved, m.Moved)
	histogramMetric(ch, c.d.failoverSeconds, c.src.failovers)
	copying, waiting := 0, 0
	for _, mg := range c.src.migrations() {
		if mg.Copying {
			copying++
		} else {
			waiting++
		}
	}
	gauge(ch, c.d.migrations, float64(copying), "copying")
	gauge(ch, c.d.migrations, float64(waiting), "waiting")
	counter(ch, c.d.cutovers, c.src.cutovers.Load())
}

func (c *collector) collectReplication(ch chan<- prometheus.Metric) {
	src := &c.src
	m := src.clusterMap()
	for p, st := range m.Runtime {
		if !src.owns(m, p) {
			continue
		}
		part := strconv.Itoa(p)
		gauge(ch, c.d.inSync, float64(len(st.InSync)), part)
		for _, replica := range m.Assignment[p] {
			if replica == src.self {
				continue
			}
			if revs, bytes, known := src.lag(p, replica); known {
				gauge(ch, c.d.replLagRevisions, float64(revs), part, string(replica))
				gauge(ch, c.d.replLagBytes, float64(bytes), part, string(replica))
			}
		}
	}
	s := src.replication()
	counter(ch, c.d.replOps, s.OpsSent)
	counter(ch, c.d.replBytes, s.BytesSent)
	counter(ch, c.d.replSnapshots, s.SnapshotsSent)
	counter(ch, c.d.moveBytes, s.MoveBytesSent)
	counter(ch, c.d.gaps, s.Gaps)
	counter(ch, c.d.replApplied, s.OpsApplied)
	counter(ch, c.d.replRejected, s.RejectedStaleEpoch)
}

func (c *collector) collectControl(ch chan<- prometheus.Metric) {
	r := c.src.raft
	state := r.State()
	for _, s := range []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown} {
		gauge(ch, c.d.raftState, boolFloat(s == state), s.String())
	}
	gauge(ch, c.d.raftTerm, float64(r.CurrentTerm()))
	gauge(ch, c.d.raftCommit, float64(r.CommitIndex()))
	gauge(ch, c.d.raftApplied, float64(r.AppliedIndex()))
	contact := 0.0
	if state != raft.Leader {
		if last := r.LastContact(); !last.IsZero() {
			contact = c.src.clock.Now().Sub(last).Seconds()
		}
	}
	gauge(ch, c.d.raftLastContact, contact)
	h := c.src.control()
	gauge(ch, c.d.leaderless, h.Leaderless.Seconds())
	gauge(ch, c.d.leaderlessAlarm, boolFloat(h.Alarm))
	byStatus := map[serf.MemberStatus]int{}
	for _, mb := range c.src.members() {
		byStatus[mb.Status]++
	}
	for _, s := range []serf.MemberStatus{serf.StatusAlive, serf.StatusLeaving, serf.StatusLeft, serf.StatusFailed} {
		gauge(ch, c.d.members, float64(byStatus[s]), s.String())
	}
}

func (c *collector) collectMemory(ch chan<- prometheus.Metric) {
	src := &c.src
	gauge(ch, c.d.storeBytes, float64(src.store.bytes()))
	gauge(ch, c.d.maxMemory, float64(src.store.budget.limit()))
	counter(ch, c.d.oomRefusals, src.store.budget.refused())
	counter(ch, c.d.evictedKeys, src.store.budget.evicted(), src.store.budget.policyName())
	gauge(ch, c.d.keys, float64(src.store.len()))
	gauge(ch, c.d.expiringKeys, float64(src.store.expiringLen()))
	counter(ch, c.d.expiredKeys, src.expired())
	gauge(ch, c.d.oplogBytes, float64(src.oplogBytes()))
	var buffered, conns int64
	for _, t := range src.transports {
		st := t.Stats()
		buffered, conns = buffered+int64(st.BufferedBytes), conns+int64(st.Conns)
	}
	gauge(ch, c.d.bufferBytes, float64(buffered))
	gauge(ch, c.d.dataConns, float64(conns))
	if src.respClients != nil {
		gauge(ch, c.d.respConns, float64(src.respClients()))
	}
	if src.nearCache != nil {
		s := src.nearCache()
		gauge(ch, c.d.nearBytes, float64(s.Bytes))
		for _, e := range []struct {
			name string
			v    uint64
		}{
			{"hit", s.Hits}, {"miss", s.Misses}, {"revalidation", s.Revalidations}, {"unchanged", s.Unchanged},
			{"invalidation", s.Invalidations}, {"segment_dropped", s.SegmentsDropped}, {"refused", s.Refused},
		} {
			counter(ch, c.d.nearOps, e.v, e.name)
		}
	}
}

func (c *collector) collectLoads(ch chan<- prometheus.Metric) {
	if c.src.loader == nil {
		return
	}
	s := c.src.loader()
	counter(ch, c.d.loads, s.Loads, "call")
	counter(ch, c.d.loads, s.Failures, "failure")
	counter(ch, c.d.loads, s.AbsentHits, "remembered_absent")
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
