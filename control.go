package zaris

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// The first byte a connection sends on the shared data port names its lane, each with its own connections,
// Server and caps. muxData carries callers' key and batch requests, whose handlers may wait on other nodes.
// muxInternal carries what those waits depend on (replication, proposals, map fetches), and its handlers
// never call another node, so a node whose data lane is full still reads the acknowledgements that free it.
const (
	muxData     byte = 'D'
	muxInternal byte = 'I'
	muxRaft     byte = 'R'
)

// DefaultRaftMaxConns is the default of Config.RaftMaxConns, far above the few control-plane streams a node
// accepts: the leader's pipeline and pooled connections and candidates' vote requests, a handful per voter.
const DefaultRaftMaxConns = 128

// controlPlane is a node's member of the consensus group that keeps the cluster map: raft and its stores,
// the map's state machine, the control loop with the leader's decisions, the control-plane servers, the
// owner's lease, recovery, and a leaving node's drain. It reaches the data plane only through
// controlConfig's functions.
type controlPlane struct {
	controlConfig
	fsm *mapFSM
	// members is set once the node gossips, before the control loop starts; the RESP endpoint may ask
	// for the control plane's health before.
	members atomic.Pointer[membership]

	raft       *controlRaft // the running raft instance, which a recovery replaces (recover.go)
	raftTrans  *raft.NetworkTransport
	raftStore  io.Closer   // the control plane's log and stable store on disk; nil without a DataDir
	raftStream *raftStream // raft's connections, whose handlers must be done before raftStore closes
	// serverInc is the incarnation in this node's control-plane server ID: the process's own when raft's
	// state lives in memory, the data dir's (identity.go) when it lives on disk.
	serverInc uint64
	leaderCh  chan bool
	kick      chan struct{}
	formed    atomic.Bool // this member advertises, or is advertising, that the cluster has formed
	// advertising is set while this member's tags are being changed to the cluster's protocol.
	advertising atomic.Bool
	loop        controlLoop // touched only by the control loop
	lease       leaseState  // holdsLease's memory of lapses
	// leaderless tracks how long this node has known no control-plane leader (health.go).
	leaderless leaderWatch
	// control is the control loop and the tag changes it gossips. stop waits for it, and the node stops
	// gossip after: a tag change being gossiped would otherwise wait out its whole broadcast timeout.
	control sync.WaitGroup
	// controlTicks counts the control loop's rounds.
	controlTicks atomic.Uint64
}

// controlConfig is what the control plane takes from its node.
type controlConfig struct {
	cfg         *Config
	id          NodeID
	layout      Layout
	log         *slog.Logger
	incarnation uint64 // this process's, as the map records it
	dialer      transport.Dialer
	// options are the data port's transport options of a lane; dataAddr is the port's advertised address.
	options  func(lane byte) transport.Options
	dataAddr func() string
	// callPeer sends one request on the internal lane to node id, through the router's connection to it.
	callPeer func(ctx context.Context, id NodeID, op transport.Op, payload []byte) ([]byte, error)
	// callReplica and localCopy serve the leader's probes (failover.go): a replication request to a node,
	// and this node's revision of a segment and the epoch line it follows.
	callReplica func(id NodeID, req *replicateRequest, timeout time.Duration) (*replicateReply, int, error)
	localCopy   func(seg int) (revision, line uint64)
	// nudgeReplicas wakes the links to the replicas of the partitions this node owns, every round.
	nudgeReplicas func()
	// failovers times the failovers this node commits as leader.
	failovers *histogram
	guard     func(site string, fn func())
	gate      *closeGate
	life      context.Context
	wg        *sync.WaitGroup
}

func newControlPlane(c controlConfig, fsm *mapFSM) *controlPlane {
	return &controlPlane{
		controlConfig: c,
		fsm:           fsm,
		serverInc:     c.incarnation,
		leaderCh:      make(chan bool, 8),
		kick:          make(chan struct{}, 1),
		loop: controlLoop{
			decider:     decider{rules: c.cfg.leaderRules(), clocks: newLeaderClocks(), log: c.log},
			deadSince:   countdowns[NodeID]{},
			stableSince: countdowns[raft.ServerID]{},
			vacated:     map[NodeID]time.Time{},
		},
		leaderless: leaderWatch{after: leaderlessElections * max(c.cfg.Timing.RaftElection, c.cfg.Timing.RaftHeartbeat), log: c.log},
	}
}

// stop shuts raft, its transport and its stores down and waits for the control loop. The node's gate is
// closed already, so no decision waits inside raft.
func (cp *controlPlane) stop() []error {
	var errs []error
	if cp.raft != nil {
		errs = append(errs, cp.raft.Shutdown().Error())
	}
	if cp.raftTrans != nil {
		cp.raftTrans.CloseStreams()
		errs = append(errs, cp.raftTrans.Close())
		cp.raftStream.awaitHandlers()
	}
	if cp.raftStore != nil {
		errs = append(errs, cp.raftStore.Close())
	}
	cp.control.Wait()
	return errs
}

// isLeader reports whether this node's server leads the control plane.
func (cp *controlPlane) isLeader() bool { return cp.raft.State() == raft.Leader }

// mapFSM is the control plane's state machine: it applies committed commands to the cluster map and
// publishes each new map to the node. beforeCommit sees each change before the node serves under the new
// map, onCommit after.
type mapFSM struct {
	current      atomic.Pointer[ClusterMap]
	beforeCommit func(old, next *ClusterMap)
	onCommit     func(old, next *ClusterMap)
	beforeApply  func(next *ClusterMap) // testHooks.beforeApply

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever a new map is published
}

func newMapFSM(initial *ClusterMap, beforeCommit, onCommit func(old, next *ClusterMap)) *mapFSM {
	f := &mapFSM{beforeCommit: beforeCommit, onCommit: onCommit, changed: make(chan struct{})}
	f.current.Store(initial)
	return f
}

// next returns a channel that is closed once a map newer than the current one is published.
func (f *mapFSM) next() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *mapFSM) clusterMap() *ClusterMap { return f.current.Load() }

// Apply runs on raft's FSM goroutine for every committed entry.
func (f *mapFSM) Apply(l *raft.Log) any {
	var cmd command
	if err := decode(l.Data, &cmd); err != nil {
		return err
	}
	next, err := f.current.Load().apply(&cmd, l.Index)
	if err != nil {
		return err
	}
	if f.beforeApply != nil {
		f.beforeApply(next)
	}
	prev := f.current.Load()
	f.publish(next)
	if next.sameAs(prev) {
		return errVoidDecision
	}
	return nil
}

func (f *mapFSM) publish(m *ClusterMap) {
	f.beforeCommit(f.current.Load(), m)
	old := f.current.Swap(m)
	f.onCommit(old, m)
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *mapFSM) Snapshot() (raft.FSMSnapshot, error) {
	return mapSnapshot{f.current.Load()}, nil
}

func (f *mapFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	var m ClusterMap
	if err := decode(data, &m); err != nil {
		return err
	}
	f.publish(&m)
	return nil
}

type mapSnapshot struct{ m *ClusterMap }

func (s mapSnapshot) Persist(sink raft.SnapshotSink) error {
	data, err := encode(s.m)
	if err == nil {
		_, err = sink.Write(data)
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (mapSnapshot) Release() {}

// startRaft creates the consensus member of this node. Its log, term, vote and snapshots live in the data
// dir when there is one, in memory otherwise.
func (cp *controlPlane) startRaft(ln net.Listener) error {
	cp.raftStream = newRaftStream(ln, cp.dialer, new(greeting(cp.cfg)), cp.serverID(), cp.cfg.DataIdleTimeout)
	cp.raftTrans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  cp.raftStream,
		MaxPool: 3,
		// One request in flight per follower: raft's pipelined replication can deadlock once a follower
		// refuses an append (its decoder stops while the sender waits to queue the next request), which
		// leaves that follower without new entries and makes Shutdown wait forever. The control plane's
		// throughput does not need the pipeline.
		MaxRPCsInFlight: 1,
		Timeout:         2 * time.Second,
		Logger:          newHCLogger(cp.log, "raft-net"),
	})
	logs, stable, snaps, err := cp.raftStores()
	if err != nil {
		cp.raftTrans.Close()
		return err
	}
	stores := raftStores{logs: logs, stable: stable, snaps: snaps}
	r, err := cp.newRaft(stores)
	if err != nil {
		cp.raftTrans.Close()
		return err
	}
	cp.raft = newControlRaft(r, stores)
	return nil
}

// newRaft starts a raft instance of this node's server on its stores and transport. The transport is
// handed over without its Close, so that an instance restarted by a recovery (recover.go) reuses it; Close
// closes it.
func (cp *controlPlane) newRaft(stores raftStores) (*raft.Raft, error) {
	rc := raft.DefaultConfig()
	rc.LocalID = cp.serverID()
	rc.HeartbeatTimeout = cp.cfg.Timing.RaftHeartbeat
	rc.ElectionTimeout = cp.cfg.Timing.RaftElection
	rc.LeaderLeaseTimeout = cp.cfg.Timing.RaftLeaderLease
	rc.CommitTimeout = cp.cfg.Timing.RaftCommit
	rc.Logger = newHCLogger(cp.log, "raft")
	rc.NotifyCh = cp.leaderCh
	r, err := raft.NewRaft(rc, cp.fsm, stores.logs, stores.stable, stores.snaps, keptTransport{cp.raftTrans, cp.raftTrans})
	if err != nil {
		return nil, fmt.Errorf("zaris: start control plane: %w", err)
	}
	return r, nil
}

// raftSnapshotsRetained is how many control-plane snapshots a data dir keeps.
const raftSnapshotsRetained = 2

// raftStores returns the control plane's log, stable and snapshot stores: in the data dir's raft and
// raft-snapshots directories, or in memory without a data dir. Log and vote writes are fsynced before
// raft acts on them.
func (cp *controlPlane) raftStores() (raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
	if cp.cfg.DataDir == "" {
		return raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore(), nil
	}
	// Always fsynced, whatever DiskDurability says of the data: a voter that forgot its vote or term in a
	// power loss could vote twice in one term, and two leaders could commit different maps.
	store, err := durability.OpenRaftStore(filepath.Join(cp.cfg.DataDir, "raft"), durability.PebbleOptions{
		Logger: cp.log, FS: cp.cfg.hooks.diskFS})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("zaris: open control-plane log: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(cp.cfg.DataDir, "raft-snapshots"), raftSnapshotsRetained,
		newHCLogger(cp.log, "raft-snapshots"))
	if err != nil {
		store.Close()
		return nil, nil, nil, fmt.Errorf("zaris: open control-plane snapshots: %w", err)
	}
	cp.raftStore = store
	return store, store, snaps, nil
}

// controlLoop is the control loop's own state: whether it bootstrapped, the leader's catch-up check, and
// the leader's rules and countdowns.
type controlLoop struct {
	bootstrapped bool
	// caughtUpTerm is the latest term in which this node, as leader, saw its map catch up (caughtUp).
	caughtUpTerm uint64
	barrier      *termBarrier // issued by caughtUp, not yet seen done
	decider      decider
	deadSince    countdowns[NodeID]        // failed members, towards their servers' removal from the control plane
	stableSince  countdowns[raft.ServerID] // non-voters alive in the control plane, towards promotion
	vacated      map[NodeID]time.Time      // names whose voters left gracefully, and when (noteSeat)
}

// runControl drives membership into the control plane. Every node runs it; only the leader decides.
func (cp *controlPlane) runControl() {
	tick := cp.cfg.Clock.NewTicker(cp.cfg.Timing.Reconcile)
	defer tick.Stop()
	round := func() { // formation, replica nudges and, as leader, the decisions
		cp.maybeBootstrap()
		cp.advertiseFormed()
		cp.advertiseProtocol()
		cp.nudgeReplicas()
		if cp.raft.State() == raft.Leader && cp.caughtUp() {
			if err := cp.reconcile(); err != nil && !errors.Is(err, raft.ErrNotLeader) {
				cp.log.Warn("reconcile membership", "err", err)
			}
		}
	}
	for {
		cp.controlTicks.Add(1)
		cp.guard("control loop", round)
		select {
		case <-cp.life.Done():
			return
		case <-cp.kick:
		case <-cp.leaderCh:
		case <-tick.C():
		}
	}
}

// caughtUp reports whether this leader's map holds every decision committed before its term. A new leader
// applies the entries of earlier terms only once it has committed one of its own: until then its map can be
// older than the cluster's (after a full restart, the snapshot it loaded), and rules applied to it would skip
// decisions, such as deciding again the partitions of an owner that restarted. A barrier, once per term,
// waits for them.
// The barrier is waited for in the background, so that the control loop keeps its other duties meanwhile.
func (cp *controlPlane) caughtUp() bool {
	term := cp.raft.CurrentTerm()
	if term == cp.loop.caughtUpTerm {
		return true
	}
	b := cp.loop.barrier
	if b == nil || b.term != term {
		b = &termBarrier{term: term, done: make(chan struct{})}
		cp.loop.barrier = b
		cp.wg.Add(1)
		go func() {
			defer cp.wg.Done()
			// Through decide, as every request to the control plane: Close waits for the answer before it
			// stops raft, which would otherwise leave the barrier unanswered for good.
			b.err = cp.decide(func() raft.Future { return cp.raft.Barrier(cp.cfg.Timing.Reconcile) })
			close(b.done)
			cp.wakeControl()
		}()
	}
	select {
	case <-b.done:
	default:
		return false
	}
	cp.loop.barrier = nil
	if b.err != nil {
		cp.log.Debug("leader's map not caught up", "term", term, "err", b.err)
		return false // a new barrier next round
	}
	cp.loop.caughtUpTerm = term
	return true
}

// termBarrier is a barrier a leader issued in term; err is set when done is closed.
type termBarrier struct {
	term uint64
	done chan struct{}
	err  error
}

// forwardEvents drains serf's events so serf never blocks, turning them into a kick of the control loop.
func (cp *controlPlane) forwardEvents() {
	defer cp.wg.Done()
	for {
		select {
		case <-cp.life.Done():
			return
		case ev := <-cp.members.Load().events:
			if _, ok := ev.(serf.MemberEvent); ok {
				cp.wakeControl()
			}
		}
	}
}

// wakeControl makes the control loop run now rather than at its next tick.
func (cp *controlPlane) wakeControl() { signal(cp.kick) }

// maybeBootstrap forms the control plane once BootstrapExpect members are present. The first
// BootstrapExpect members by name bootstrap with an identical configuration. A node that sees an already
// formed cluster never bootstraps and waits for the leader to add it.
func (cp *controlPlane) maybeBootstrap() {
	if cp.loop.bootstrapped {
		return
	}
	if cfg := cp.raft.GetConfiguration(); cfg.Error() == nil && len(cfg.Configuration().Servers) > 0 {
		cp.loop.bootstrapped = true
		return
	}
	var alive []member
	for _, m := range cp.members.Load().members() {
		if m.Formed {
			cp.loop.bootstrapped = true
			return
		}
		if m.Status == serf.StatusAlive && m.DataAddr != "" {
			alive = append(alive, m)
		}
	}
	if len(alive) < cp.cfg.BootstrapExpect {
		return
	}
	slices.SortFunc(alive, func(a, b member) int { return strings.Compare(string(a.ID), string(b.ID)) })
	founders := alive[:cp.cfg.BootstrapExpect]
	if !slices.ContainsFunc(founders, func(m member) bool { return m.ID == cp.id }) {
		return
	}
	var servers []raft.Server
	for i, m := range founders {
		suffrage := raft.Voter
		if i >= cp.cfg.MaxVoters {
			suffrage = raft.Nonvoter
		}
		servers = append(servers, raft.Server{Suffrage: suffrage, ID: raftID(m.ID, m.Server), Address: raftAddress(m.DataAddr, raftID(m.ID, m.Server))})
	}
	if err := cp.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		if errors.Is(err, raft.ErrCantBootstrap) {
			// A founder that stood first reached this node before its own bootstrap, which has nothing
			// left to do: the configuration comes from the leader.
			cp.log.Debug("control plane formed by another founder", "err", err)
			cp.loop.bootstrapped = true
			return
		}
		cp.log.Warn("bootstrap control plane", "err", err)
		return
	}
	cp.loop.bootstrapped = true
	cp.log.Info("control plane bootstrapped", "founders", len(servers))
	if servers[0].ID == cp.serverID() {
		cp.standFirst()
	}
}

// standFirst has the first founder by name stand for election as soon as the control plane is
// bootstrapped, rather than after a heartbeat timeout: a new cluster then has a leader within a round trip,
// and one candidate, not several at once, asks for the first votes. Raft re-checks its heartbeat at once
// when the timeout shrinks, and a server that never heard from a leader stands; the timeout is restored
// straight after. Timings whose leader lease equals the heartbeat leave no room to shrink it, and such a
// cluster elects its first leader after a heartbeat timeout as before.
func (cp *controlPlane) standFirst() {
	rc := cp.raft.ReloadableConfig()
	heartbeat := rc.HeartbeatTimeout
	rc.HeartbeatTimeout = heartbeat - time.Nanosecond
	if err := cp.raft.ReloadConfig(rc); err != nil {
		cp.log.Debug("stand for the first election", "err", err)
		return
	}
	rc.HeartbeatTimeout = heartbeat
	if err := cp.raft.ReloadConfig(rc); err != nil {
		cp.log.Warn("restore the heartbeat timeout", "err", err)
	}
}

// advertiseFormed tags this member once it knows a leader, so late joiners never bootstrap a second cluster.
// The tag is gossiped in the background: its broadcast takes a few gossip rounds, which a new leader's
// first map should not wait for. A failed advertisement is tried again next round.
func (cp *controlPlane) advertiseFormed() {
	if cp.formed.Load() {
		return
	}
	if _, id := cp.raft.LeaderWithID(); id == "" {
		return
	}
	cp.formed.Store(true)
	cp.control.Go(func() {
		if hook := cp.cfg.hooks.beforeAdvertiseFormed; hook != nil {
			hook(cp.life)
		}
		if err := cp.members.Load().markFormed(); err != nil {
			cp.log.Warn("advertise formed", "err", err)
			cp.formed.Store(false)
		}
	})
}

// advertiseProtocol tags this member with the cluster's protocol once its map records a new one, in the
// background as advertiseFormed does.
func (cp *controlPlane) advertiseProtocol() {
	ms, m := cp.members.Load(), cp.fsm.clusterMap()
	if advertised, ok := ms.advertisedClusterProtocol(); m.Version == 0 || ok && advertised == m.Protocol ||
		!cp.advertising.CompareAndSwap(false, true) {
		return // no partition map yet, or announced already
	}
	v := m.Protocol
	cp.control.Go(func() {
		defer cp.advertising.Store(false)
		if err := ms.advertiseClusterProtocol(v); err != nil {
			cp.log.Warn("advertise the cluster's protocol", "protocol", v, "err", err)
		}
	})
}

// reconcile makes the control plane agree with membership: it fits the raft servers to the members
// (voters.go), then commits the leader's decisions (decide.go) in rounds until a round decides nothing.
// Runs on the leader only.
func (cp *controlPlane) reconcile() error {
	members := cp.members.Load().members()
	if err := cp.followMembership(members); err != nil {
		return err
	}
	heard := map[NodeID]bool{}
	for range maxDecisionRounds {
		m := cp.fsm.clusterMap()
		v := leaderView{Map: m, Layout: cp.layout, Members: members, Now: cp.cfg.Clock.Now(),
			Probe: cp.newLiveProbe(m, members, heard), Held: cp.cfg.hooks.holdRecognition}
		decisions := cp.loop.decider.decide(v)
		if len(decisions) == 0 {
			return nil
		}
		if err := cp.commitDecisions(decisions); err != nil {
			return err
		}
	}
	return nil
}

// maxDecisionRounds bounds the rounds of one reconcile; what is left waits for the next.
const maxDecisionRounds = 4

// commitDecisions commits decisions in order, and stops at the first that found the map moved on: the
// rest were decided against a map that no longer is.
func (cp *controlPlane) commitDecisions(decisions []decision) error {
	for _, d := range decisions {
		cp.log.Log(context.Background(), d.level, d.why, d.attrs...)
		if hook := cp.cfg.hooks.beforeCommitDecision; hook != nil {
			hook(d)
		}
		_, void, err := cp.apply(&d.command)
		if err != nil || void {
			return err
		}
		if !d.suspected.IsZero() {
			cp.failovers.observe(cp.cfg.Clock.Now().Sub(d.suspected))
		}
	}
	return nil
}

// commit replicates one decision through the control plane and waits until it is applied here.
func (cp *controlPlane) commit(cmd *command) error {
	_, err := cp.commitAt(cmd)
	return err
}

// commitAt is commit that also returns the decision's log index. A void decision is not an error.
func (cp *controlPlane) commitAt(cmd *command) (uint64, error) {
	index, _, err := cp.apply(cmd)
	return index, err
}

// apply commits cmd and reports whether it was void: it changed nothing, the map having moved on since it
// was decided.
func (cp *controlPlane) apply(cmd *command) (index uint64, void bool, err error) {
	data, err := encode(cmd)
	if err != nil {
		return 0, false, err
	}
	var f raft.ApplyFuture
	if err := cp.decide(func() raft.Future { f = cp.raft.Apply(data, applyTimeout); return f }); err != nil {
		return 0, false, err
	}
	if err, ok := f.Response().(error); ok && !errors.Is(err, errVoidDecision) {
		return 0, false, err
	}
	return f.Index(), f.Response() == errVoidDecision, nil
}

// decide submits one request to the control plane and waits for its answer. Close waits for it before it
// stops raft, and refuses new ones once it has begun.
func (cp *controlPlane) decide(submit func() raft.Future) error {
	if !cp.gate.enter() {
		return ErrClosed
	}
	defer cp.gate.leave()
	return submit().Error()
}

// leaderID returns the current leader's node, or "" when none is known.
func (cp *controlPlane) leaderID() NodeID {
	_, id := cp.raft.LeaderWithID()
	node, _ := splitRaftID(id)
	return node
}

// hclogWriter forwards raft's log lines to the node's slog logger at debug level.
type hclogWriter struct {
	logger    *slog.Logger
	component string
}

func (w hclogWriter) Write(p []byte) (int, error) {
	w.logger.Debug(strings.TrimSpace(string(p)), "component", w.component)
	return len(p), nil
}

func newHCLogger(l *slog.Logger, component string) hclog.Logger {
	level := hclog.Info
	if !l.Enabled(context.Background(), slog.LevelDebug) {
		level = hclog.Off
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:   component,
		Output: hclogWriter{logger: l, component: component},
		Level:  level,
	})
}

// proposalReply is the leader's answer to a decision proposed by another node.
type proposalReply struct {
	_msgpack struct{} `msgpack:",as_array"`
	Index    uint64
	Error    string
}

// propose commits cmd through the leader, wherever it is, and waits until this node has applied it. While
// the control plane has no leader, or its leader steps down or cannot be reached, it tries again until ctx
// ends: an election must not fail a decision that the next leader takes. Proposing again is safe: a
// proposable command is void once the map has moved past it, except a drop, which then only drops a
// replica again, the safe direction.
func (cp *controlPlane) propose(ctx context.Context, cmd *command) error {
	pause := cp.cfg.RetryBackoff
	for {
		err := cp.offer(ctx, cmd)
		if !errors.Is(err, errNoLeader) || ctx.Err() != nil {
			return err
		}
		if cp.life.Err() != nil || sleepStop(cp.cfg.Clock, ctx.Done(), pause) {
			return err
		}
		pause = min(2*pause, cp.cfg.Timing.RaftHeartbeat)
	}
}

// offer is propose without the wait for a leader: with none to take cmd now, it fails with errNoLeader.
// It suits a decision that is tried again anyway, such as a replica's return to an in-sync set.
func (cp *controlPlane) offer(ctx context.Context, cmd *command) error {
	index, err := cp.proposeOnce(ctx, cmd)
	if err != nil {
		return err
	}
	return cp.awaitApplied(ctx, index)
}

// errNoLeader marks a proposal that found no leader to commit it: none is known, the one it went to is
// unreachable, or it stepped down before committing.
var errNoLeader = errors.New("zaris: no reachable control-plane leader")

// leaderless lists raft's answers that mean the leader changed under a proposal; leaderlessReplies adds a
// leader's own that it is closing.
var (
	leaderless        = []error{raft.ErrNotLeader, raft.ErrLeadershipLost, raft.ErrLeadershipTransferInProgress, raft.ErrRaftShutdown}
	leaderlessReplies = append(slices.Clip(leaderless), ErrClosed)
)

// proposeOnce submits cmd to the leader once and returns the log index it committed at.
func (cp *controlPlane) proposeOnce(ctx context.Context, cmd *command) (uint64, error) {
	if !cp.isLeader() {
		return cp.proposeRemote(ctx, cmd)
	}
	index, err := cp.commitAt(cmd)
	for _, e := range leaderless {
		if errors.Is(err, e) {
			return 0, fmt.Errorf("%w: %w", errNoLeader, err)
		}
	}
	return index, err
}

func (cp *controlPlane) proposeRemote(ctx context.Context, cmd *command) (uint64, error) {
	leader := cp.leaderID()
	if leader == "" {
		return 0, errNoLeader
	}
	payload, err := encode(cmd)
	if err != nil {
		return 0, err
	}
	resp, err := cp.callPeer(ctx, leader, kv.OpPropose, payload)
	var refused *transport.RemoteError
	switch {
	case errors.Is(err, errNoPeer):
		return 0, errNoLeader
	case errors.As(err, &refused):
		return 0, fmt.Errorf("zaris: propose to leader %s: %w", leader, err)
	case err != nil: // the leader is gone, or the link to it
		return 0, fmt.Errorf("%w: propose to leader %s: %w", errNoLeader, leader, err)
	}
	var reply proposalReply
	if err := decode(resp, &reply); err != nil {
		return 0, err
	}
	if reply.Error != "" {
		return 0, refusedProposal(leader, reply.Error)
	}
	return reply.Index, nil
}

// refusedProposal is the error for a proposal the leader refused with message. A leader that lost its
// leadership or is closing means no leader: the proposal may go to the next one. The leader's words are
// kept as text, so that its ErrClosed is never taken for this node's.
func refusedProposal(leader NodeID, message string) error {
	for _, e := range leaderlessReplies {
		if message == e.Error() {
			return fmt.Errorf("%w: leader %s: %s", errNoLeader, leader, message)
		}
	}
	return fmt.Errorf("zaris: leader %s: %s", leader, message)
}

// serveProposal commits a decision proposed by another node: an owner's in-sync set change, the end of its
// hand-over, or a leaving node's drain. Other decisions are the leader's own.
func (cp *controlPlane) serveProposal(payload []byte) ([]byte, error) {
	var cmd command
	if err := decode(payload, &cmd); err != nil {
		return nil, err
	}
	var reply proposalReply
	if !proposable[cmd.Kind] {
		reply.Error = fmt.Sprintf("command %d may not be proposed", cmd.Kind)
	} else if index, err := cp.commitAt(&cmd); err != nil {
		reply.Error = err.Error()
	} else {
		reply.Index = index
	}
	return encode(&reply)
}

// proposable lists the commands another node may propose. Each is void unless the partition is still at
// the epoch it names, or, for a drain, the node is still the process it names.
var proposable = map[commandKind]bool{cmdAdmit: true, cmdDrop: true, cmdSettle: true, cmdReclaim: true, cmdRecovered: true, cmdBarrier: true, cmdDrain: true}

// awaitApplied waits until this node's map reflects the log up to index.
func (cp *controlPlane) awaitApplied(ctx context.Context, index uint64) error {
	for {
		changed := cp.fsm.next()
		if cp.fsm.clusterMap().Index >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-cp.life.Done():
			return ErrClosed
		}
	}
}

// countdowns remember since when each key has been in some state, for the leader's timeouts.
type countdowns[K comparable] map[K]time.Time

// elapsed starts key's countdown at now unless it runs already, and returns how long it has run at now.
func (c countdowns[K]) elapsed(key K, now time.Time) time.Duration {
	since, running := c[key]
	if !running {
		c[key] = now
		return 0
	}
	return now.Sub(since)
}

// serverID is this process's identity in the control plane.
func (cp *controlPlane) serverID() raft.ServerID { return raftID(cp.id, cp.serverInc) }
