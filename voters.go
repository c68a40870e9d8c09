package zaris

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
)

// The control plane's servers follow membership, as the leader sees it on every reconcile. A server is a
// node's process: its raft identity carries the incarnation. Raft's safety rests on a voter never
// forgetting its term and vote, which a restarted process (raft state in memory) has forgotten, so it
// joins as a new server and the old one is removed. A server whose member left, or failed for longer than
// DeadServerTimeout, is removed too. A voter whose member left is first demoted, once the other voters keep
// a live quorum without it: a demotion still reaches the leaver, which departs only once it holds no vote
// the others need. New servers join as non-voters and are promoted once alive for
// ServerStabilization, keeping an odd number of voters up to MaxVoters (a voter that drains or has left
// counts no more, so its successor is promoted before it is demoted); the new process of a voter that
// restarted takes its predecessor's vote at once, right after the old server is removed. A cluster whose first voters are
// all replaced one by one thus keeps a quorum of live ones.

// raftID is the control-plane identity of process incarnation of node id.
func raftID(id NodeID, incarnation uint64) raft.ServerID {
	return raft.ServerID(string(id) + "#" + strconv.FormatUint(incarnation, 16))
}

// splitRaftID returns the node and the process a raft identity names.
func splitRaftID(s raft.ServerID) (NodeID, uint64) {
	i := strings.LastIndexByte(string(s), '#')
	if i < 0 {
		return NodeID(s), 0
	}
	inc, _ := strconv.ParseUint(string(s[i+1:]), 16, 64)
	return NodeID(s[:i]), inc
}

// raftAddress is the control-plane address of server id, whose process listens on dataAddr. It names the
// server as well as the place: a restarted process listens where its predecessor did, and must not answer
// for it (see raftStream).
func raftAddress(dataAddr string, id raft.ServerID) raft.ServerAddress {
	return raft.ServerAddress(string(id) + "@" + dataAddr)
}

// splitRaftAddress returns the server a control-plane address names and where it listens. A plain host:port
// names no server: it reaches whichever listens there.
func splitRaftAddress(a raft.ServerAddress) (raft.ServerID, string) {
	i := strings.LastIndexByte(string(a), '@')
	if i < 0 {
		return "", string(a)
	}
	return raft.ServerID(a[:i]), string(a[i+1:])
}

// serverChangeKind says what a serverChange does.
type serverChangeKind uint8

const (
	removeServer serverChangeKind = iota + 1
	addNonvoter
	addVoter
	promoteServer
	demoteServer
)

func (k serverChangeKind) String() string {
	switch k {
	case removeServer:
		return "remove"
	case addNonvoter:
		return "add non-voter"
	case addVoter:
		return "add voter"
	case promoteServer:
		return "promote to voter"
	case demoteServer:
		return "demote to non-voter"
	}
	return fmt.Sprintf("serverChangeKind(%d)", uint8(k))
}

// serverChange is one change to the control plane's configuration, and why.
type serverChange struct {
	Kind    serverChangeKind
	ID      raft.ServerID
	Address string
	Why     string
}

// serverFacts is what the leader knows, on one reconcile, beyond the configuration and the members.
type serverFacts struct {
	Leader    raft.ServerID
	MaxVoters int
	// Dead reports whether a member has been failed, or unknown to gossip, for DeadServerTimeout.
	Dead func(NodeID) bool
	// Stable reports whether a server has been alive in the configuration for ServerStabilization.
	Stable func(raft.ServerID) bool
}

// planServers returns, in the order to apply them, the changes that make the servers follow the members:
// removals first (a restarted process's new server takes its predecessor's address), then the members'
// processes missing from the configuration as non-voters, then promotions of stable non-voters. It is a
// pure function of its arguments.
func planServers(servers []raft.Server, members []member, f serverFacts) []serverChange {
	byName := map[NodeID]member{}
	for _, m := range members {
		byName[m.ID] = m
	}
	var changes []serverChange
	kept := map[raft.ServerID]raft.Server{}
	voting := map[raft.ServerID]bool{} // the voters once the changes so far apply
	restartedVoters := map[NodeID]bool{}
	for _, s := range servers {
		voting[s.ID] = s.Suffrage == raft.Voter
	}
	for _, s := range servers {
		if why := departingVoter(s, byName); why != "" && s.ID != f.Leader {
			if !othersKeepLiveQuorum(voting, s.ID, func(id raft.ServerID) bool { return runs(id, byName) }) {
				kept[s.ID] = s // it keeps its vote until enough other voters are alive to commit without it
				continue
			}
			changes = append(changes, serverChange{Kind: demoteServer, ID: s.ID, Address: string(s.Address), Why: why})
			s.Suffrage, voting[s.ID] = raft.Nonvoter, false
		} else if why := staleServer(s, byName, f); why != "" && s.ID != f.Leader {
			changes = append(changes, serverChange{Kind: removeServer, ID: s.ID, Address: string(s.Address), Why: why})
			if name, _ := splitRaftID(s.ID); voting[s.ID] && why == restartedServer {
				restartedVoters[name] = true
			}
			voting[s.ID] = false
			continue
		}
		kept[s.ID] = s
	}
	for _, m := range sortedMembers(members) {
		id := raftID(m.ID, m.Server)
		if _, in := kept[id]; m.Status != serf.StatusAlive || m.DataAddr == "" || in {
			continue
		}
		addr := string(raftAddress(m.DataAddr, id))
		if restartedVoters[m.ID] && !m.Lite && !m.Leaving {
			// It takes its predecessor's vote at once: waiting for ServerStabilization would leave the others
			// one voter short, and a second death in that window could take their quorum for good.
			changes = append(changes, serverChange{Kind: addVoter, ID: id, Address: addr, Why: "new process of a voter"})
			kept[id] = raft.Server{Suffrage: raft.Voter, ID: id, Address: raft.ServerAddress(addr)}
			continue
		}
		changes = append(changes, serverChange{Kind: addNonvoter, ID: id, Address: addr, Why: "new process"})
	}
	return append(changes, promotions(kept, byName, f)...)
}

// departingVoter says why voter s is to lose its vote: its process has left gracefully (after draining, it
// waits to hear that it holds no vote), or "" when it keeps it. A voter keeps its vote while it drains: the
// drain may take long, and one voter fewer meanwhile would leave the others less room for failures.
func departingVoter(s raft.Server, byName map[NodeID]member) string {
	if m, ok := processOf(s.ID, byName); ok && s.Suffrage == raft.Voter && m.Status == serf.StatusLeft {
		return "member left"
	}
	return ""
}

// othersKeepLiveQuorum reports whether the voters other than id, as voting has them, are mostly servers
// that run: taking id's vote commits only with them, and leaves the control plane unable to decide
// anything if they are not.
func othersKeepLiveQuorum(voting map[raft.ServerID]bool, id raft.ServerID, runs func(raft.ServerID) bool) bool {
	voters, running := 0, 0
	for s, votes := range voting {
		if !votes || s == id {
			continue
		}
		voters++
		if runs(s) {
			running++
		}
	}
	return running > voters/2
}

// runs reports whether server s's process still runs, as gossip tells: its member is alive, or has left
// and waits to hear that it holds no vote.
func runs(s raft.ServerID, byName map[NodeID]member) bool {
	m, ok := processOf(s, byName)
	return ok && (m.Status == serf.StatusAlive || m.Status == serf.StatusLeft)
}

// departing reports whether server s's process is leaving the cluster: draining, or gone once drained.
func departing(s raft.ServerID, byName map[NodeID]member) bool {
	m, ok := processOf(s, byName)
	return ok && (m.Leaving || m.Status == serf.StatusLeft)
}

// processOf returns the member whose process server s is, if gossip knows that process.
func processOf(s raft.ServerID, byName map[NodeID]member) (member, bool) {
	name, server := splitRaftID(s)
	m, known := byName[name]
	return m, known && m.Server == server
}

// restartedServer is why the server of a member's previous process is removed.
const restartedServer = "member restarted as a new server"

// staleServer says why server s no longer stands for a live process, or "" when it does.
func staleServer(s raft.Server, byName map[NodeID]member, f serverFacts) string {
	name, server := splitRaftID(s.ID)
	m, known := byName[name]
	switch {
	case known && m.Status == serf.StatusLeft:
		return "member left"
	case !known && f.Dead(name):
		return "member unknown for DeadServerTimeout"
	case !known:
		return "" // gossip may not have met it yet, after a restart of the leader
	case m.Server != server:
		return restartedServer
	case m.Status == serf.StatusFailed && f.Dead(name):
		return "member failed for DeadServerTimeout"
	}
	return ""
}

// promotions promotes stable, alive, full non-voters, in name order, towards the largest odd number of
// voters that MaxVoters and the candidates allow. A voter whose process drains or has left does not count:
// its successor is promoted first, so that its demotion need not wait for a failed voter's removal. It
// never demotes.
func promotions(kept map[raft.ServerID]raft.Server, byName map[NodeID]member, f serverFacts) []serverChange {
	voters := 0
	var candidates []raft.Server
	for _, s := range kept {
		if s.Suffrage == raft.Voter {
			if !departing(s.ID, byName) {
				voters++
			}
			continue
		}
		name, _ := splitRaftID(s.ID)
		if m := byName[name]; m.Status == serf.StatusAlive && !m.Lite && !m.Leaving && f.Stable(s.ID) {
			candidates = append(candidates, s)
		}
	}
	want := min(f.MaxVoters, voters+len(candidates))
	if want%2 == 0 {
		want--
	}
	slices.SortFunc(candidates, func(a, b raft.Server) int { return strings.Compare(string(a.ID), string(b.ID)) })
	var changes []serverChange
	for _, s := range candidates {
		if voters >= want {
			break
		}
		voters++
		changes = append(changes, serverChange{Kind: promoteServer, ID: s.ID, Address: string(s.Address), Why: "stable"})
	}
	return changes
}

// sortedMembers returns members in name order, so a plan does not depend on gossip's order.
func sortedMembers(members []member) []member {
	out := slices.Clone(members)
	slices.SortFunc(out, func(a, b member) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return out
}

// followMembership applies the server plan of this reconcile. Leader only.
func (n *Node) followMembership(members []member) error {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	servers := cf.Configuration().Servers
	facts := n.serverFacts(servers, members)
	for _, ch := range planServers(servers, members, facts) {
		n.log.Info("control-plane server change", "change", ch.Kind.String(), "server", ch.ID, "why", ch.Why)
		err := n.decide(func() raft.Future {
			switch ch.Kind {
			case removeServer:
				return n.raft.RemoveServer(ch.ID, 0, applyTimeout)
			case demoteServer:
				return n.raft.DemoteVoter(ch.ID, 0, applyTimeout)
			case addNonvoter:
				return n.raft.AddNonvoter(ch.ID, raft.ServerAddress(ch.Address), 0, applyTimeout)
			default:
				return n.raft.AddVoter(ch.ID, raft.ServerAddress(ch.Address), 0, applyTimeout)
			}
		})
		if err != nil {
			return fmt.Errorf("%s %s: %w", ch.Kind, ch.ID, err)
		}
	}
	return nil
}

// serverFacts measures, for this reconcile, how long members have been failed and servers alive, with the
// leader's countdowns.
func (n *Node) serverFacts(servers []raft.Server, members []member) serverFacts {
	failed, alive := map[NodeID]bool{}, map[raft.ServerID]bool{}
	known := map[NodeID]bool{}
	for _, m := range members {
		known[m.ID] = true
		switch m.Status {
		case serf.StatusFailed:
			failed[m.ID] = true
		case serf.StatusAlive:
			alive[raftID(m.ID, m.Server)] = true
		}
	}
	for _, s := range servers { // a server whose member gossip does not know counts as failed
		if name, _ := splitRaftID(s.ID); !known[name] {
			failed[name] = true
		}
	}
	for id := range n.deadSince {
		if !failed[id] {
			delete(n.deadSince, id)
		}
	}
	for id := range n.stableSince {
		if !alive[id] || !slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == id }) {
			delete(n.stableSince, id)
		}
	}
	return serverFacts{
		Leader:    n.serverID(),
		MaxVoters: n.cfg.MaxVoters,
		Dead:      func(id NodeID) bool { return n.deadSince.elapsed(id, n.cfg.Clock.Now()) >= n.cfg.DeadServerTimeout },
		Stable: func(id raft.ServerID) bool {
			return alive[id] && n.stableSince.elapsed(id, n.cfg.Clock.Now()) >= n.cfg.Timing.ServerStabilization
		},
	}
}
