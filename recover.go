package zaris

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// Recovery rebuilds the control plane from the live members once a majority of its voters is gone for good,
// as a raft group cannot do by itself. One node surveys every live member (its server, term, last log index,
// the configuration it knows, whether it hears a leader, its map), refuses while a quorum may still be
// reachable, and otherwise sends each member the same new start: the map of the newest log any of them
// holds (by last term, then index, as raft's elections compare logs; such a log holds every committed entry
// any of them has), its commands applied, as a snapshot at an index and term past any of theirs, under a
// configuration of the members that answered.
// Each member restarts its raft instance on that start; the data plane serves under its current map
// throughout, and the new leader's rules then fail over what the dead members owned.

// maxRecoveryServers bounds the servers a new start may list.
const maxRecoveryServers = 1024

// RecoveryReport says what RecoverControlPlane did.
type RecoveryReport struct {
	// MapIndex and MapVersion identify the map kept: the newest any live member held. From names one
	// member that held it.
	MapIndex   uint64
	MapVersion uint64
	From       NodeID
	// Voters and Nonvoters are the new configuration's servers, by node.
	Voters    []NodeID
	Nonvoters []NodeID
	// Term and Index are where the new control-plane log starts.
	Term  uint64
	Index uint64
	// Failed lists the members that did not take the new start, with why; the new leader adds them back as
	// new servers once they answer.
	Failed map[NodeID]string
}

// String describes the report on a few lines, for an operator.
func (r RecoveryReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kept the map at index %d (version %d) from %s\n", r.MapIndex, r.MapVersion, r.From)
	fmt.Fprintf(&b, "voters: %s\n", joinNodes(r.Voters))
	fmt.Fprintf(&b, "non-voters: %s\n", joinNodes(r.Nonvoters))
	fmt.Fprintf(&b, "new log from index %d, term %d\n", r.Index, r.Term)
	for _, id := range slices.Sorted(maps.Keys(r.Failed)) {
		fmt.Fprintf(&b, "not restarted: %s: %s\n", id, r.Failed[id])
	}
	return b.String()
}

func joinNodes(ids []NodeID) string {
	if len(ids) == 0 {
		return "none"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, ", ")
}

// RecoverControlPlane rebuilds the control plane from the live members when a majority of its voters is
// gone for good and it can decide nothing, keeping the newest cluster map any live member's log holds. It
// returns ErrQuorumReachable, changing nothing, while any member hears a leader, a majority of the voters
// of a configuration a member knows answers, or a voter that does not answer is alive to gossip. It is
// safe only once the missing voters will never come back: a voter cut off rather than dead could go on
// deciding with others beside the recovered cluster. What it can lose: map changes that no live member's
// log holds, and the keys of partitions whose every copy died. It returns once every
// live member has its new start, and waits until this node knows a leader or ctx ends.
func (n *Node) RecoverControlPlane(ctx context.Context) (RecoveryReport, error) {
	if n.life.ctx.Err() != nil {
		return RecoveryReport{}, ErrClosed
	}
	return n.ctl.recover(ctx)
}

// recover is RecoverControlPlane, with this node surveying the members and sending the new start.
func (cp *controlPlane) recover(ctx context.Context) (RecoveryReport, error) {
	members := cp.members.Load().members()
	states, err := cp.surveyMembers(ctx, members)
	if err != nil {
		return RecoveryReport{}, err
	}
	plan, err := planRecovery(states, members, cp.cfg.MaxVoters)
	if err != nil {
		return RecoveryReport{}, err
	}
	report := plan.report()
	cp.log.Warn("recovering the control plane from the live members", "map_index", report.MapIndex,
		"voters", joinNodes(report.Voters), "nonvoters", joinNodes(report.Nonvoters), "term", plan.Term, "index", plan.Index)
	report.Failed = cp.installEverywhere(ctx, states, plan.recoveryStart)
	installed := 0
	for _, id := range report.Voters {
		if _, failed := report.Failed[id]; !failed {
			installed++
		}
	}
	if installed <= len(report.Voters)/2 {
		return report, fmt.Errorf("zaris: recover: only %d of %d new voters restarted", installed, len(report.Voters))
	}
	if _, failed := report.Failed[cp.id]; failed {
		return report, nil
	}
	return report, cp.awaitLeader(ctx)
}

// awaitLeader waits until this node knows a control-plane leader.
func (cp *controlPlane) awaitLeader(ctx context.Context) error {
	for cp.leaderID() == "" {
		if err := sleepCtx(ctx, cp.cfg.Clock, cp.cfg.Timing.RaftCommit); err != nil {
			return fmt.Errorf("zaris: recover: no leader yet: %w", err)
		}
	}
	return nil
}

// recoveryState is what a member tells a recovery survey of its control plane.
type recoveryState struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Node      NodeID
	Server    raft.ServerID
	DataAddr  string
	Lite      bool
	Leader    raft.ServerID // the leader it hears, "" when none
	Term      uint64
	LastIndex uint64
	LastTerm  uint64          // the term of the entry at LastIndex
	Voters    []raft.ServerID // of the latest configuration it knows
	// Map is the member's map with every command of its log applied, those not known committed included:
	// a committed decision may be in a live member's log before its map.
	Map *ClusterMap
}

// recoveryStart is the new start every member's control plane takes: a snapshot of Map at Index and Term,
// under a configuration of Servers.
type recoveryStart struct {
	_msgpack struct{} `msgpack:",as_array"`
	Term     uint64
	Index    uint64
	Servers  []raft.Server
	Map      *ClusterMap
}

// recoveryPlan is a recovery's decision: the new start, and which member held its map.
type recoveryPlan struct {
	recoveryStart
	From NodeID
}

func (p recoveryPlan) report() RecoveryReport {
	r := RecoveryReport{MapIndex: p.Map.Index, MapVersion: p.Map.Version, From: p.From, Term: p.Term, Index: p.Index}
	for _, s := range p.Servers {
		id, _ := splitRaftID(s.ID)
		if s.Suffrage == raft.Voter {
			r.Voters = append(r.Voters, id)
		} else {
			r.Nonvoters = append(r.Nonvoters, id)
		}
	}
	return r
}

// planRecovery decides a recovery from the members' answers (states) and gossip's view (members), or
// refuses it. It is a pure function of its arguments.
func planRecovery(states []recoveryState, members []member, maxVoters int) (recoveryPlan, error) {
	if len(states) == 0 {
		return recoveryPlan{}, errors.New("zaris: recover: no member answered")
	}
	answered := map[raft.ServerID]bool{}
	for _, st := range states {
		answered[st.Server] = true
	}
	byName := map[NodeID]member{}
	for _, m := range members {
		byName[m.ID] = m
	}
	for _, st := range states {
		if st.Leader != "" {
			return recoveryPlan{}, fmt.Errorf("%w: %s follows leader %s", ErrQuorumReachable, st.Node, st.Leader)
		}
		reached := 0
		for _, v := range st.Voters {
			if answered[v] {
				reached++
				continue
			}
			if m, ok := processOf(v, byName); ok && m.Status == serf.StatusAlive {
				return recoveryPlan{}, fmt.Errorf("%w: voter %s is alive to gossip but did not answer", ErrQuorumReachable, v)
			}
		}
		if len(st.Voters) > 0 && reached > len(st.Voters)/2 {
			return recoveryPlan{}, fmt.Errorf("%w: %d of the %d voters %s knows answered", ErrQuorumReachable, reached, len(st.Voters), st.Node)
		}
	}
	var plan recoveryPlan
	newest := states[0]
	for _, st := range states {
		if st.LastTerm > newest.LastTerm || st.LastTerm == newest.LastTerm && st.LastIndex > newest.LastIndex {
			newest = st
		}
		plan.Term = max(plan.Term, st.Term)
		plan.Index = max(plan.Index, st.LastIndex)
	}
	if newest.Map == nil || newest.Map.Version == 0 {
		return recoveryPlan{}, errors.New("zaris: recover: no live member holds a cluster map")
	}
	plan.Map, plan.From = newest.Map, newest.Node
	plan.Term++
	plan.Index = max(plan.Index, plan.Map.Index) + 1
	plan.Servers = recoveryServers(states, maxVoters)
	if !slices.ContainsFunc(plan.Servers, func(s raft.Server) bool { return s.Suffrage == raft.Voter }) {
		return recoveryPlan{}, errors.New("zaris: recover: no live member may vote (all are lite)")
	}
	return plan, nil
}

// recoveryServers is the new configuration: every member that answered, the first full members by name
// voting, as many as the largest odd number up to maxVoters allows.
func recoveryServers(states []recoveryState, maxVoters int) []raft.Server {
	sorted := slices.Clone(states)
	slices.SortFunc(sorted, func(a, b recoveryState) int { return strings.Compare(string(a.Node), string(b.Node)) })
	full := 0
	for _, st := range sorted {
		if !st.Lite {
			full++
		}
	}
	want := min(full, maxVoters)
	if want%2 == 0 {
		want--
	}
	var servers []raft.Server
	for _, st := range sorted {
		s := raft.Server{Suffrage: raft.Nonvoter, ID: st.Server, Address: raftAddress(st.DataAddr, st.Server)}
		if !st.Lite && want > 0 {
			s.Suffrage = raft.Voter
			want--
		}
		servers = append(servers, s)
	}
	return servers
}

// surveyMembers asks every live member, this node included, for its recoveryState. Members that do not
// answer are left out of the new configuration.
func (cp *controlPlane) surveyMembers(ctx context.Context, members []member) ([]recoveryState, error) {
	var (
		mu     sync.Mutex
		states []recoveryState
		wg     sync.WaitGroup
	)
	self, err := cp.recoveryState()
	if err != nil {
		return nil, err
	}
	states = append(states, self)
	for _, m := range members {
		if m.ID == cp.id || m.Status != serf.StatusAlive || m.DataAddr == "" {
			continue
		}
		wg.Go(func() {
			resp, err := cp.callMember(ctx, m.DataAddr, kv.OpRecoverySurvey, nil)
			var st recoveryState
			if err == nil {
				err = decode(resp, &st)
			}
			if err != nil {
				cp.log.Warn("recover: member did not answer the survey", "member", m.ID, "err", err)
				return
			}
			mu.Lock()
			states = append(states, st)
			mu.Unlock()
		})
	}
	wg.Wait()
	return states, ctx.Err()
}

// callMember sends one request on the internal lane to the member at addr, over a connection of its own:
// a member missing from this node's map has no peer in the router.
func (cp *controlPlane) callMember(ctx context.Context, addr string, op transport.Op, payload []byte) ([]byte, error) {
	c := transport.NewClient(addr, cp.options(muxInternal))
	defer c.Close()
	call, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	return c.Call(call, op, payload)
}

// recoveryState is this node's answer to a recovery survey.
func (cp *controlPlane) recoveryState() (recoveryState, error) {
	_, leader := cp.raft.LeaderWithID()
	st := recoveryState{Node: cp.id, Server: cp.serverID(), DataAddr: cp.dataAddr(), Lite: cp.cfg.Lite, Leader: leader}
	err := cp.raft.withStores(func(r *raft.Raft, stores raftStores) error {
		stats := r.Stats()
		var err error
		st.Term = r.CurrentTerm()
		if st.LastIndex, err = strconv.ParseUint(stats["last_log_index"], 10, 64); err != nil {
			return err
		}
		if st.LastTerm, err = strconv.ParseUint(stats["last_log_term"], 10, 64); err != nil {
			return err
		}
		st.Map, err = replayLog(cp.fsm.clusterMap(), stores.logs, st.LastIndex)
		return err
	})
	if err != nil {
		return st, fmt.Errorf("zaris: recover: read %s's control plane: %w", cp.id, err)
	}
	if cf := cp.raft.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				st.Voters = append(st.Voters, s.ID)
			}
		}
	}
	return st, nil
}

// maxReplayedEntries bounds the log entries a survey applies past a member's map.
const maxReplayedEntries = 1 << 20

// replayLog returns m with the commands of logs past m's index, up to last, applied as the state machine
// would apply them.
func replayLog(m *ClusterMap, logs raft.LogStore, last uint64) (*ClusterMap, error) {
	if last > m.Index+maxReplayedEntries {
		return nil, fmt.Errorf("%d log entries past the map", last-m.Index)
	}
	for i := m.Index + 1; i <= last; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				continue // compacted into a snapshot: not past the map
			}
			return nil, err
		}
		var cmd command
		if l.Type != raft.LogCommand || decode(l.Data, &cmd) != nil {
			continue
		}
		if next, err := m.apply(&cmd, l.Index); err == nil {
			m = next
		}
	}
	return m, nil
}

// installEverywhere sends the new start to every member that answered the survey, this node last, and
// returns those that did not take it.
func (cp *controlPlane) installEverywhere(ctx context.Context, states []recoveryState, s recoveryStart) map[NodeID]string {
	payload, err := encode(&s)
	failed := map[NodeID]string{}
	if err != nil {
		for _, st := range states {
			failed[st.Node] = err.Error()
		}
		return failed
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, st := range states {
		if st.Node == cp.id {
			continue
		}
		wg.Go(func() {
			_, err := cp.callMember(ctx, st.DataAddr, kv.OpRecoveryInstall, payload)
			if err != nil {
				mu.Lock()
				failed[st.Node] = err.Error()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := cp.installRecovery(&s); err != nil {
		failed[cp.id] = err.Error()
	}
	return failed
}

// serveRecovery answers recovery's requests on the internal lane.
func (cp *controlPlane) serveRecovery(op transport.Op, payload []byte) ([]byte, error) {
	if op == kv.OpRecoverySurvey {
		st, err := cp.recoveryState()
		if err != nil {
			return nil, err
		}
		return encode(&st)
	}
	var s recoveryStart
	if err := decode(payload, &s); err != nil {
		return nil, fmt.Errorf("zaris: recovery start: %w", err)
	}
	if err := cp.installRecovery(&s); err != nil {
		return nil, err
	}
	return nil, nil
}

// installRecovery restarts this node's control plane on the new start s, unless the control plane has
// moved on since the survey: it hears a leader, or its log has reached s's index.
func (cp *controlPlane) installRecovery(s *recoveryStart) error {
	if err := cp.checkRecoveryStart(s); err != nil {
		return err
	}
	err := cp.raft.restart(func(old *raft.Raft, stores raftStores) (*raft.Raft, raftStores, error) {
		if _, leader := old.LeaderWithID(); leader != "" {
			return nil, stores, fmt.Errorf("%w: %s follows leader %s", ErrQuorumReachable, cp.id, leader)
		}
		if old.LastIndex() >= s.Index {
			return nil, stores, fmt.Errorf("zaris: recover: %s's control-plane log moved on since the survey (index %d)", cp.id, old.LastIndex())
		}
		// A candidate's term may have grown since the survey. The new instance starts past it, so that it
		// never votes again in a term the old one may have voted in.
		term := max(s.Term, old.CurrentTerm()+1)
		if err := old.Shutdown().Error(); err != nil {
			return nil, stores, err
		}
		stores, err := cp.resetRaftStores(stores, s, term)
		if err != nil {
			return nil, stores, err
		}
		r, err := cp.newRaft(stores)
		return r, stores, err
	})
	if err != nil {
		return err
	}
	cp.log.Warn("control plane restarted by a recovery", "term", s.Term, "index", s.Index, "map_index", s.Map.Index)
	cp.wakeControl()
	return nil
}

// checkRecoveryStart refuses a start that this node cannot take: one for another layout, one that does not
// list this process's server, or one whose map is older than this node's.
func (cp *controlPlane) checkRecoveryStart(s *recoveryStart) error {
	m := s.Map
	switch {
	case m == nil || m.Segments != cp.layout.Segments || m.Partitions != cp.layout.Partitions ||
		len(m.Runtime) != m.Partitions || len(m.Assignment) != m.Partitions:
		return errors.New("zaris: recover: the start's map is not of this cluster's layout")
	case m.Index >= s.Index:
		return fmt.Errorf("zaris: recover: the start's index %d is not past its map's %d", s.Index, m.Index)
	case len(s.Servers) > maxRecoveryServers:
		return fmt.Errorf("zaris: recover: a start with %d servers", len(s.Servers))
	case !slices.ContainsFunc(s.Servers, func(sv raft.Server) bool { return sv.ID == cp.serverID() }):
		return fmt.Errorf("zaris: recover: the start does not list %s", cp.serverID())
	case cp.fsm.clusterMap().Index > m.Index:
		return fmt.Errorf("zaris: recover: %s holds a newer map (index %d) than the start's (%d)", cp.id, cp.fsm.clusterMap().Index, m.Index)
	}
	return checkServers(s.Servers)
}

// checkServers refuses a configuration raft could not run: a server without an identity or an address, one
// listed twice, or no voter.
func checkServers(servers []raft.Server) error {
	ids, addrs := map[raft.ServerID]bool{}, map[raft.ServerAddress]bool{}
	voters := 0
	for _, sv := range servers {
		switch {
		case sv.ID == "" || sv.Address == "":
			return errors.New("zaris: recover: a server without an identity or an address")
		case ids[sv.ID] || addrs[sv.Address]:
			return fmt.Errorf("zaris: recover: server %s listed twice", sv.ID)
		case sv.Suffrage == raft.Voter:
			voters++
		case sv.Suffrage != raft.Nonvoter:
			return fmt.Errorf("zaris: recover: server %s of suffrage %d", sv.ID, sv.Suffrage)
		}
		ids[sv.ID], addrs[sv.Address] = true, true
	}
	if voters == 0 {
		return errors.New("zaris: recover: a start without a voter")
	}
	return nil
}

// resetRaftStores replaces this server's log with the start: no entries, current term term, and a
// snapshot of s's map at s's index and term under s's configuration. Memory-only stores are replaced by new
// ones; a data dir's log is emptied and the snapshot written beside the older ones, which the newer index
// supersedes.
func (cp *controlPlane) resetRaftStores(stores raftStores, s *recoveryStart, term uint64) (raftStores, error) {
	if cp.cfg.DataDir == "" {
		mem := raft.NewInmemStore()
		stores = raftStores{logs: mem, stable: mem, snaps: raft.NewInmemSnapshotStore()}
	} else if err := emptyLog(stores.logs); err != nil {
		return stores, err
	}
	if err := stores.stable.SetUint64([]byte("CurrentTerm"), term); err != nil {
		return stores, err
	}
	config := raft.Configuration{Servers: s.Servers}
	sink, err := stores.snaps.Create(raft.SnapshotVersionMax, s.Index, s.Term, config, s.Index, cp.raftTrans)
	if err != nil {
		return stores, err
	}
	return stores, mapSnapshot{s.Map}.Persist(sink)
}

// emptyLog deletes every entry of logs.
func emptyLog(logs raft.LogStore) error {
	first, err := logs.FirstIndex()
	if err != nil {
		return err
	}
	last, err := logs.LastIndex()
	if err != nil || last == 0 {
		return err
	}
	return logs.DeleteRange(first, last)
}

// raftStores are the control plane's log, stable and snapshot stores.
type raftStores struct {
	logs   raft.LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore
}

// controlRaft holds the node's running raft instance, which a recovery replaces while the rest of the node
// reads it: every method calls the instance current at the call.
type controlRaft struct {
	cur atomic.Pointer[raft.Raft]

	mu       sync.Mutex // held by a restart, a read of the stores, and Shutdown
	stores   raftStores // the current instance's
	shutdown bool
}

func newControlRaft(r *raft.Raft, stores raftStores) *controlRaft {
	c := &controlRaft{stores: stores}
	c.cur.Store(r)
	return c
}

// restart replaces the instance and its stores with those next returns, given the current ones; next shuts
// the current instance down. The stores next returns are kept even when it fails. It fails with ErrClosed
// once Shutdown was called.
func (c *controlRaft) restart(next func(old *raft.Raft, stores raftStores) (*raft.Raft, raftStores, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shutdown {
		return ErrClosed
	}
	r, stores, err := next(c.cur.Load(), c.stores)
	c.stores = stores
	if err != nil {
		return err
	}
	c.cur.Store(r)
	return nil
}

// withStores runs fn with the current instance and its stores, which no restart replaces meanwhile.
func (c *controlRaft) withStores(fn func(r *raft.Raft, stores raftStores) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fn(c.cur.Load(), c.stores)
}

// Shutdown stops the current instance, and any restart for good.
func (c *controlRaft) Shutdown() raft.Future {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shutdown = true
	return c.cur.Load().Shutdown()
}

func (c *controlRaft) State() raft.RaftState { return c.cur.Load().State() }
func (c *controlRaft) LeaderWithID() (raft.ServerAddress, raft.ServerID) {
	return c.cur.Load().LeaderWithID()
}
func (c *controlRaft) Apply(cmd []byte, timeout time.Duration) raft.ApplyFuture {
	return c.cur.Load().Apply(cmd, timeout)
}
func (c *controlRaft) Barrier(timeout time.Duration) raft.Future {
	return c.cur.Load().Barrier(timeout)
}
func (c *controlRaft) BootstrapCluster(cfg raft.Configuration) raft.Future {
	return c.cur.Load().BootstrapCluster(cfg)
}
func (c *controlRaft) GetConfiguration() raft.ConfigurationFuture {
	return c.cur.Load().GetConfiguration()
}
func (c *controlRaft) AddVoter(id raft.ServerID, addr raft.ServerAddress, prev uint64, timeout time.Duration) raft.IndexFuture {
	return c.cur.Load().AddVoter(id, addr, prev, timeout)
}
func (c *controlRaft) AddNonvoter(id raft.ServerID, addr raft.ServerAddress, prev uint64, timeout time.Duration) raft.IndexFuture {
	return c.cur.Load().AddNonvoter(id, addr, prev, timeout)
}
func (c *controlRaft) RemoveServer(id raft.ServerID, prev uint64, timeout time.Duration) raft.IndexFuture {
	return c.cur.Load().RemoveServer(id, prev, timeout)
}
func (c *controlRaft) DemoteVoter(id raft.ServerID, prev uint64, timeout time.Duration) raft.IndexFuture {
	return c.cur.Load().DemoteVoter(id, prev, timeout)
}
func (c *controlRaft) LeadershipTransfer() raft.Future { return c.cur.Load().LeadershipTransfer() }
func (c *controlRaft) LeadershipTransferToServer(id raft.ServerID, addr raft.ServerAddress) raft.Future {
	return c.cur.Load().LeadershipTransferToServer(id, addr)
}
func (c *controlRaft) ReloadConfig(rc raft.ReloadableConfig) error {
	return c.cur.Load().ReloadConfig(rc)
}
func (c *controlRaft) ReloadableConfig() raft.ReloadableConfig {
	return c.cur.Load().ReloadableConfig()
}
func (c *controlRaft) LastContact() time.Time   { return c.cur.Load().LastContact() }
func (c *controlRaft) Stats() map[string]string { return c.cur.Load().Stats() }
func (c *controlRaft) CurrentTerm() uint64      { return c.cur.Load().CurrentTerm() }
func (c *controlRaft) LastIndex() uint64        { return c.cur.Load().LastIndex() }
func (c *controlRaft) CommitIndex() uint64      { return c.cur.Load().CommitIndex() }
func (c *controlRaft) AppliedIndex() uint64     { return c.cur.Load().AppliedIndex() }

// keptTransport is the node's raft transport without its Close: a raft instance that shuts down for a
// restart leaves it open for the next one. It keeps the pre-vote: without it a server cut off, or removed
// and not told, campaigns under ever higher terms and deposes the leader once it is heard again.
type keptTransport struct {
	raft.Transport
	raft.WithPreVote
}
