package zaris

import (
	"slices"

	"github.com/hashicorp/serf/serf"
)

// statusView is what the status page shows, as /status.json serves it: the cluster as this node's map
// and gossip see it.
type statusView struct {
	Node   NodeID `json:"node"`
	Leader NodeID `json:"leader"`
	Time   int64  `json:"time"` // Unix milliseconds
	Ready  string `json:"ready"`
	// Leaderless says, once this node has known no control-plane leader for a few election timeouts, for
	// how long; "" otherwise.
	Leaderless string          `json:"leaderless,omitempty"`
	MapIndex   uint64          `json:"mapIndex"`
	MapVersion uint64          `json:"mapVersion"`
	RF         int             `json:"rf"`
	Members    []memberView    `json:"members"`
	Partitions []partitionView `json:"partitions"`
	Migrations []Migration     `json:"migrations"`
	Failovers  []failoverEvent `json:"failovers"` // the most recent first
	// Called and Served count the operations this node called and served as owner, for the page to turn
	// into rates.
	Called uint64 `json:"called"`
	Served uint64 `json:"served"`
	Keys   int    `json:"keys"`
	// DataBytes is what this node's copies hold by the store's count, which MaxMemory bounds (0: none).
	DataBytes int64  `json:"dataBytes"`
	MaxMemory int64  `json:"maxMemory"`
	Policy    string `json:"evictionPolicy"`
	Evicted   uint64 `json:"evicted"`
	Failed    uint64 `json:"failedOver"` // partitions failed over in the cluster's life
	MovedEver uint64 `json:"moved"`
	// Release is this node's release; Protocol the protocol it speaks, ClusterProtocol the cluster's.
	Release         string `json:"release"`
	Protocol        uint16 `json:"protocol"`
	ClusterProtocol uint16 `json:"clusterProtocol"`
}

type memberView struct {
	Name       NodeID `json:"name"`
	Status     string `json:"status"`   // alive, leaving, left or failed
	Draining   bool   `json:"draining"` // moving its partitions away before a graceful leave
	DataAddr   string `json:"dataAddr"`
	RESPAddr   string `json:"respAddr,omitempty"`
	Owned      int    `json:"owned"`
	Replicated int    `json:"replicated"`
	Voter      bool   `json:"voter"`
	Leader     bool   `json:"leader"`
	Protocol   uint16 `json:"protocol"` // the protocol the member speaks
}

type partitionView struct {
	Owner    NodeID   `json:"owner"`
	Replicas []NodeID `json:"replicas"`
	InSync   []NodeID `json:"inSync"`
	Health   string   `json:"health"`
	Epoch    uint64   `json:"epoch"`
	Moving   bool     `json:"moving"`
}

// statusSources are what the status page reads: the control plane's map and members, the owner's store, the
// node's counters, and its readiness.
type statusSources struct {
	id        NodeID
	clock     Clock
	ctl       *controlPlane
	own       *owner
	stats     *nodeStats
	metrics   *opMetrics
	readiness func() error
}

// view assembles the view of the cluster the status page shows.
func (s statusSources) view() statusView {
	m := s.ctl.fsm.clusterMap()
	store := s.own.store
	v := statusView{
		Node: s.id, Leader: s.ctl.leaderID(), Time: s.clock.Now().UnixMilli(), MapIndex: m.Index,
		MapVersion: m.Version, RF: m.ReplicationFactor, Migrations: migrationsIn(m), Failovers: s.stats.recentFailovers.recent(),
		Called: s.metrics.callerSide().total(), Served: s.metrics.ownerSide().total(), Keys: store.len(), Failed: m.Promotions, MovedEver: m.Moved,
		DataBytes: store.bytes(), MaxMemory: store.budget.limit(), Policy: store.budget.policyName(), Evicted: store.budget.evicted(),
		Release: Version, Protocol: greeting(s.ctl.cfg).Version, ClusterProtocol: m.Protocol,
	}
	if err := s.readiness(); err != nil {
		v.Ready = err.Error()
	}
	if h := s.ctl.controlHealth(); h.Alarm {
		v.Leaderless = h.leaderlessErr().Error()
	}
	owned, replicated := map[NodeID]int{}, map[NodeID]int{}
	for p, st := range m.Runtime {
		pv := partitionView{Owner: st.Owner, InSync: st.InSync, Health: st.Health.String(), Epoch: st.Epoch, Moving: st.Target != nil}
		if p < len(m.Assignment) {
			pv.Replicas = slices.DeleteFunc(slices.Clone(m.Assignment[p]), func(id NodeID) bool { return id == st.Owner })
		}
		owned[st.Owner]++
		for _, id := range pv.Replicas {
			replicated[id]++
		}
		v.Partitions = append(v.Partitions, pv)
	}
	voters := s.ctl.voterSet()
	var members []member
	if ms := s.ctl.members.Load(); ms != nil {
		members = sortedMembers(ms.members())
	}
	for _, mb := range members {
		v.Members = append(v.Members, memberView{
			Name: mb.ID, Status: mb.Status.String(), Draining: mb.Status == serf.StatusAlive && m.drains(mb),
			DataAddr: mb.DataAddr, RESPAddr: mb.RESPAddr,
			Owned: owned[mb.ID], Replicated: replicated[mb.ID], Voter: voters[mb.ID], Leader: mb.ID == v.Leader,
			Protocol: mb.Protocol.Version,
		})
	}
	return v
}
