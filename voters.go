package zaris

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// The control plane's servers follow membership, as the leader sees it on every reconcile. A server is a
// node's process: its raft identity carries the incarnation. Raft's safety rests on a voter never
// forgetting its term and vote, which a restarted process (raft state in memory) has forgotten, so it
// joins as a new server and the old one is removed. A server whose member left, or failed for longer than
// DeadServerTimeout, is removed too.
//
// The control plane wants as many voters as its seats: the largest odd number up to MaxVoters of the
// members that run and stay. New servers join as non-voters and are promoted once they have caught up,
// that is applied the log to near the leader's commit index (a process that cannot tell is promoted once
// alive for ServerStabilization). A voter that drains no longer counts, so a successor is promoted while
// it drains; once it has announced its departure it is demoted (departingVoter), but only when the other
// voters fill the seats the remaining members call for and keep a live quorum. A graceful leave thus hands
// its seat over and never leaves the control plane short, and a cluster that really shrinks demotes it
// once the voters that remain are enough for the members that remain. A leaver that finds no successor within its timeout exits as a voter. The
// new process of a voter that restarted takes its predecessor's vote at once, right after the old server is
// removed; so does the next process of a voter that left gracefully, while the voters are short.

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
	// CaughtUp reports whether a non-voter holds the control plane's log closely enough to vote: it
	// applied it to within promotionLag of the leader's commit index, or, a server that cannot tell its
	// progress, it has been alive in the configuration for ServerStabilization.
	CaughtUp func(raft.ServerID) bool
	// Vacated reports whether a node's previous process left gracefully while holding a vote, recently
	// enough that its next process may take the seat back at once.
	Vacated func(NodeID) bool
}

// planServers returns, in the order to apply them, the changes that make the servers follow the members:
// removals first (a restarted process's new server takes its predecessor's address), then the members'
// processes missing from the configuration, then promotions of caught-up non-voters, and last the
// demotions of voters whose members left, each only once the voters that remain fill the seats the
// remaining members call for (seats). A graceful leave thus never costs the control plane a voter it
// needs: its successor votes before it stops. It is a pure function of its arguments.
func planServers(servers []raft.Server, members []member, f serverFacts) []serverChange {
	byName := map[NodeID]member{}
	for _, m := range members {
		byName[m.ID] = m
	}
	var changes []serverChange
	kept := map[raft.ServerID]raft.Server{}
	voting := map[raft.ServerID]bool{} // the voters once the changes so far apply
	restartedVoters := map[NodeID]bool{}
	var leavers []raft.Server // voters whose members left, demoted last, once their seats are handed over
	for _, s := range servers {
		voting[s.ID] = s.Suffrage == raft.Voter
	}
	for _, s := range servers {
		if why := departingVoter(s, byName); why != "" && s.ID != f.Leader {
			leavers = append(leavers, s)
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
	target := seats(members, f.MaxVoters)
	for _, m := range sortedMembers(members) {
		id := raftID(m.ID, m.Server)
		if _, in := kept[id]; m.Status != serf.StatusAlive || m.DataAddr == "" || in {
			continue
		}
		addr := string(raftAddress(m.DataAddr, id))
		if takesSeatBack(m, restartedVoters[m.ID], f, remainingVoters(voting, byName, "") < target) {
			// It takes its predecessor's vote at once: waiting for a promotion would leave the others one
			// voter short, and a second loss in that window could take their quorum for good.
			changes = append(changes, serverChange{Kind: addVoter, ID: id, Address: addr, Why: "new process of a voter"})
			kept[id] = raft.Server{Suffrage: raft.Voter, ID: id, Address: raft.ServerAddress(addr)}
			voting[id] = true
			continue
		}
		changes = append(changes, serverChange{Kind: addNonvoter, ID: id, Address: addr, Why: "new process"})
	}
	promoted := promotions(kept, byName, f)
	for _, ch := range promoted {
		voting[ch.ID] = true
	}
	changes = append(changes, promoted...)
	for _, s := range leavers {
		running := func(id raft.ServerID) bool { return runs(id, byName) }
		if !othersKeepLiveQuorum(voting, s.ID, running) || remainingVoters(voting, byName, s.ID) < target {
			continue // it keeps its vote until a successor votes, and enough other voters are alive to commit without it
		}
		changes = append(changes, serverChange{Kind: demoteServer, ID: s.ID, Address: string(s.Address), Why: "member left"})
		voting[s.ID] = false
	}
	return changes
}

// takesSeatBack reports whether new process m joins as a voter at once: it restarted from a voter whose
// server has just been removed, or its name's previous process left gracefully with a vote and the voters
// are short of their seats.
func takesSeatBack(m member, restartedVoter bool, f serverFacts, short bool) bool {
	if m.Lite || m.Leaving {
		return false
	}
	return restartedVoter || short && f.Vacated(m.ID)
}

// seats is how many voters the control plane wants for members: the largest odd number up to maxVoters
// and the members that may vote (alive, full, not leaving). An odd number tolerates as many failures as
// the even number above it, with a smaller quorum.
func seats(members []member, maxVoters int) int {
	eligible := 0
	for _, m := range members {
		if mayVote(m) {
			eligible++
		}
	}
	return oddAtMost(min(maxVoters, eligible))
}

// oddAtMost returns the largest odd number not above n, or 0.
func oddAtMost(n int) int {
	if n > 0 && n%2 == 0 {
		return n - 1
	}
	return max(n, 0)
}

// mayVote reports whether member m's process may hold a vote: it runs, holds partitions and stays.
func mayVote(m member) bool {
	return m.Status == serf.StatusAlive && !m.Lite && !m.Leaving && m.DataAddr != ""
}

// remainingVoters counts the voters, as voting has them, other than except whose processes stay: neither
// draining nor gone after a graceful leave.
func remainingVoters(voting map[raft.ServerID]bool, byName map[NodeID]member, except raft.ServerID) int {
	n := 0
	for id, votes := range voting {
		if votes && id != except && !departing(id, byName) {
			n++
		}
	}
	return n
}

// departingVoter says why voter s is to lose its vote: its process has left gracefully (after draining, it
// waits to hear that it holds no vote), or "" when it keeps it. A voter keeps its vote while it drains: the
// drain may take long, and one voter fewer meanwhile would leave the others less room for failures.
// A process announces its departure to gossip only once drained, and gossip may not tell the rest: a node
// that heard the intent may never hear the departure while the process waits for its removal, and one that
// heard the departure first calls the process failed. Each has left all the same.
func departingVoter(s raft.Server, byName map[NodeID]member) string {
	m, ok := processOf(s.ID, byName)
	if !ok || s.Suffrage != raft.Voter {
		return ""
	}
	switch {
	case m.Status == serf.StatusLeft:
		return "member left"
	case m.Status == serf.StatusLeaving:
		return "member leaving"
	case m.Status == serf.StatusFailed && m.Leaving:
		return "member drained and gone"
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

// runs reports whether server s's process still runs, as gossip tells: its member is alive, or is leaving
// or has left and waits to hear that it holds no vote.
func runs(s raft.ServerID, byName map[NodeID]member) bool {
	m, ok := processOf(s, byName)
	return ok && (m.Status == serf.StatusAlive || m.Status == serf.StatusLeaving || m.Status == serf.StatusLeft)
}

// departing reports whether server s's process is leaving the cluster: draining, or gone once drained.
func departing(s raft.ServerID, byName map[NodeID]member) bool {
	m, ok := processOf(s, byName)
	return ok && (m.Leaving || m.Status == serf.StatusLeaving || m.Status == serf.StatusLeft)
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

// promotions promotes caught-up, alive, full non-voters, in name order, towards the largest odd number of
// voters that MaxVoters and the candidates allow. A voter whose process drains or has left does not count:
// its successor is promoted first, so that it can be demoted without leaving the others a voter short. It
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
		if m, ok := processOf(s.ID, byName); ok && mayVote(m) {
			candidates = append(candidates, s)
		}
	}
	slices.SortFunc(candidates, func(a, b raft.Server) int { return strings.Compare(string(a.ID), string(b.ID)) })
	var ready []raft.Server // asked in name order, only as many as the seats left
	for _, s := range candidates {
		if voters+len(ready) >= f.MaxVoters {
			break
		}
		if f.CaughtUp(s.ID) {
			ready = append(ready, s)
		}
	}
	var changes []serverChange
	for _, s := range ready[:max(0, oddAtMost(voters+len(ready))-voters)] {
		changes = append(changes, serverChange{Kind: promoteServer, ID: s.ID, Address: string(s.Address), Why: "caught up"})
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
func (cp *controlPlane) followMembership(members []member) error {
	cf := cp.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	servers := cf.Configuration().Servers
	// Questions to non-voters about their progress share one probe timeout per reconcile: an unreachable
	// one must not hold the control loop for long.
	ctx, cancel := cp.progressCtx()
	defer cancel()
	facts := cp.serverFacts(ctx, servers, members)
	for _, ch := range planServers(servers, members, facts) {
		cp.log.Info("control-plane server change", "change", ch.Kind.String(), "server", ch.ID, "why", ch.Why)
		err := cp.decide(func() raft.Future {
			switch ch.Kind {
			case removeServer:
				return cp.raft.RemoveServer(ch.ID, 0, applyTimeout)
			case demoteServer:
				return cp.raft.DemoteVoter(ch.ID, 0, applyTimeout)
			case addNonvoter:
				return cp.raft.AddNonvoter(ch.ID, raft.ServerAddress(ch.Address), 0, applyTimeout)
			default:
				return cp.raft.AddVoter(ch.ID, raft.ServerAddress(ch.Address), 0, applyTimeout)
			}
		})
		if err != nil {
			return fmt.Errorf("%s %s: %w", ch.Kind, ch.ID, err)
		}
		cp.noteSeat(ch)
		if hook := cp.cfg.hooks.afterServerChange; hook != nil {
			if cf := cp.raft.GetConfiguration(); cf.Error() == nil {
				hook(ch, cf.Configuration())
			}
		}
	}
	return nil
}

// noteSeat remembers the names whose voters left gracefully, so that their next processes may take the seat
// back at once (serverFacts.Vacated), and forgets a name once its process votes again.
func (cp *controlPlane) noteSeat(ch serverChange) {
	name, _ := splitRaftID(ch.ID)
	switch ch.Kind {
	case demoteServer:
		cp.loop.vacated[name] = cp.cfg.Clock.Now()
	case addVoter, promoteServer:
		delete(cp.loop.vacated, name)
	}
}

// serverFacts measures, for this reconcile, how long members have been failed and servers alive, with the
// leader's countdowns, and asks non-voters how far they hold the log when a promotion needs it.
func (cp *controlPlane) serverFacts(ctx context.Context, servers []raft.Server, members []member) serverFacts {
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
	for id := range cp.loop.deadSince {
		if !failed[id] {
			delete(cp.loop.deadSince, id)
		}
	}
	for id := range cp.loop.stableSince {
		if !alive[id] || !slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == id }) {
			delete(cp.loop.stableSince, id)
		}
	}
	now := cp.cfg.Clock.Now()
	for name, at := range cp.loop.vacated {
		if now.Sub(at) >= cp.cfg.DeadServerTimeout {
			delete(cp.loop.vacated, name)
		}
	}
	stable := func(id raft.ServerID) bool {
		return alive[id] && cp.loop.stableSince.elapsed(id, now) >= cp.cfg.Timing.ServerStabilization
	}
	commit := cp.raft.CommitIndex()
	return serverFacts{
		Leader:    cp.serverID(),
		MaxVoters: cp.cfg.MaxVoters,
		Dead:      func(id NodeID) bool { return cp.loop.deadSince.elapsed(id, now) >= cp.cfg.DeadServerTimeout },
		CaughtUp: func(id raft.ServerID) bool {
			if !alive[id] {
				return false
			}
			p, err := cp.askProgress(ctx, id)
			var old *transport.RemoteError
			if errors.As(err, &old) {
				return stable(id) // a process without the call: time alive is all the leader can go by
			}
			return err == nil && p.caughtUp(commit)
		},
		Vacated: func(name NodeID) bool { _, ok := cp.loop.vacated[name]; return ok },
	}
}

// promotionLag is how many committed entries a server may still have to apply and be counted caught up:
// those of one append the leader sends (raft's default MaxAppendEntries), so that a steady stream of
// decisions never keeps a follower that keeps up from counting as caught up.
const promotionLag = 64

// serverProgress is a node's answer to kv.OpServerProgress: the control-plane server its process is, how far
// that server has applied and committed the log, and whether the server that asked votes in its latest
// configuration.
type serverProgress struct {
	_msgpack   struct{} `msgpack:",as_array"`
	Server     raft.ServerID
	Applied    uint64
	Commit     uint64
	AskerVotes bool
}

// caughtUp reports whether p's server has applied the log to within promotionLag of commit.
func (p serverProgress) caughtUp(commit uint64) bool { return p.Applied+promotionLag >= commit }

// progress is this process's serverProgress, for the server asker.
func (cp *controlPlane) progress(asker raft.ServerID) serverProgress {
	p := serverProgress{Server: cp.serverID(), Applied: cp.raft.AppliedIndex(), Commit: cp.raft.CommitIndex()}
	if cf := cp.raft.GetConfiguration(); asker != "" && cf.Error() == nil {
		p.AskerVotes = slices.ContainsFunc(cf.Configuration().Servers, func(s raft.Server) bool {
			return s.ID == asker && s.Suffrage == raft.Voter
		})
	}
	return p
}

// serveProgress answers kv.OpServerProgress, whose payload names the server that asks.
func (cp *controlPlane) serveProgress(payload []byte) ([]byte, error) {
	if len(payload) > maxServerName {
		return nil, fmt.Errorf("zaris: progress question from a server name of %d bytes", len(payload))
	}
	return encode(cp.progress(raft.ServerID(payload)))
}

// errOtherProcess says a node answered for a control-plane server other than the one asked about.
var errOtherProcess = errors.New("zaris: answered by another process")

// askProgress asks server id's process how far it holds the control plane's log. An answer from another
// process under the node's name (a restart) is an error.
func (cp *controlPlane) askProgress(ctx context.Context, id raft.ServerID) (serverProgress, error) {
	name, _ := splitRaftID(id)
	if id == cp.serverID() {
		return cp.progress(id), nil
	}
	resp, err := cp.callPeer(ctx, name, kv.OpServerProgress, []byte(cp.serverID()))
	if err != nil {
		return serverProgress{}, err
	}
	var reply serverProgress
	if err := decode(resp, &reply); err != nil {
		return serverProgress{}, err
	}
	if reply.Server != id {
		return serverProgress{}, fmt.Errorf("%w: %s, not %s", errOtherProcess, reply.Server, id)
	}
	return reply, nil
}

// leaderDropped reports whether this leaving process may take a leader's silence for the loss of its vote:
// the leader it knows says it no longer votes, or cannot be asked. A leader that keeps the vote while a
// successor catches up may be slow to replicate, and its silence then means nothing.
func (cp *controlPlane) leaderDropped(ctx context.Context) bool {
	_, leader := cp.raft.LeaderWithID()
	if leader == "" || leader == cp.serverID() {
		return true
	}
	ask, cancel := context.WithTimeout(ctx, 2*cp.cfg.Timing.ProbeTimeout)
	defer cancel()
	p, err := cp.askProgress(ask, leader)
	return err != nil || !p.AskerVotes
}

// voters returns the members that hold a vote in the control plane's latest configuration.
func (cp *controlPlane) voterSet() map[NodeID]bool {
	out := map[NodeID]bool{}
	f := cp.raft.GetConfiguration()
	if f.Error() != nil {
		return out
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			id, _ := splitRaftID(s.ID)
			out[id] = true
		}
	}
	return out
}
