package zaris

import (
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/serf/serf"
)

// The leader's rules, in one place. On every reconcile the leader gathers what it knows (the map, the
// members as gossip sees them, how long each condition has held, and what live nodes say of their copies).
// decide turns it into control-plane commands, and reconcile commits them. In the order they are applied:
//
//   - admit: an alive member becomes a map node. A restarted owner's partitions are decided again first:
//     with intact copies, the most caught-up of it and its in-sync replicas keeps each one (resume);
//     otherwise it leaves every in-sync set and its partitions fail over.
//   - retire: a member that left cleanly hands its partitions to in-sync replicas at once.
//   - fail over: a gossip failure is a rumour. An owner that still answers a direct probe keeps its
//     partitions. One silent for FailoverTimeout has each partition promoted, under the next epoch, to its
//     most caught-up live in-sync replica, which first syncs from a live peer holding more (the possession
//     proof). With no in-sync replica left the partition becomes Unavailable. It waits while an in-sync
//     replica that gossip calls alive does not answer.
//   - revive: an Unavailable partition goes back to a node that held every acknowledged write of it, once
//     one is alive again as the same process.
//   - heal: a Degraded partition whose copies have all been in sync for HealCooldown becomes Healthy.
//   - assign and plan: the first map once BootstrapExpect nodes are known, then a new plan (Assign, as few
//     moves as possible) whenever the placeable nodes differ from the planned ones. A member that drains
//     before a graceful leave is not placeable, nor one failed for EvictionTimeout, nor, after
//     LostPartitionTimeout, one holding a lost partition on its disk.
//   - recreate: a partition lost for EvictionTimeout (LostPartitionTimeout when a holder keeps it on disk)
//     starts again empty on an alive assigned node, or on its target if it was moving, unless a holder
//     still lives as the same process: it may keep every acknowledged write.
//   - move: copies start, at most MaxMigrations at once. Moves whose owner stays settle once in sync.
//
// Each partition gets at most one decision per round. Every command names the epoch it was decided at and
// is void if the partition moved on, so a round's decisions never undo one another.

// leaderRules are the timeouts and limits the leader decides by.
type leaderRules struct {
	FailoverTimeout      time.Duration
	HealCooldown         time.Duration
	EvictionTimeout      time.Duration
	LostPartitionTimeout time.Duration
	MaxMigrations        int
	BootstrapExpect      int
}

// leaderClocks remember since when each condition the leader times has held.
type leaderClocks struct {
	suspected countdowns[NodeID] // failed owners that do not answer a direct probe either
	failed    countdowns[NodeID] // failed members, towards eviction
	lost      countdowns[int]    // partitions with no owner, towards recreation
	healable  countdowns[int]    // Degraded partitions whose copies are all in sync, towards Healthy
}

func newLeaderClocks() leaderClocks {
	return leaderClocks{suspected: countdowns[NodeID]{}, failed: countdowns[NodeID]{}, lost: countdowns[int]{}, healable: countdowns[int]{}}
}

// copyProbe asks live nodes what the leader cannot know from the map. Reconcile asks over the data
// transport; tests answer from a table.
type copyProbe interface {
	// reachable reports whether node id answers a direct probe, whatever gossip says of it.
	reachable(id NodeID) bool
	// copies returns what node id says of its copies of the partitions it holds or is assigned.
	copies(id NodeID) probeAnswer
}

// probeAnswer is what one node said of its copies.
type probeAnswer struct {
	revisions map[int]uint64 // per segment; nil when the node cannot vouch for its copies
	lines     map[int]uint64 // per segment, the epoch whose history the copy follows
	answered  bool           // false: no reply, so its copies may be intact behind a passing fault
}

// leaderView is what one round of decisions starts from.
type leaderView struct {
	Map     *ClusterMap
	Layout  Layout
	Members []member
	Now     time.Time
	Probe   copyProbe
	// Held, when set (by tests), keeps the leader from recording a restarted member's new process.
	Held func(NodeID) bool
}

// decision is one command the leader decided, and why, for the log.
type decision struct {
	command
	level slog.Level
	why   string
	attrs []any
	// suspected is, for a failover of a silent owner, when the leader began to suspect it; zero otherwise.
	suspected time.Time
}

// decider holds the leader's rules and countdowns.
type decider struct {
	rules  leaderRules
	clocks leaderClocks
	log    *slog.Logger
}

// decide returns, in the order to commit them, the commands that bring the map in line with the view. It
// reads nothing but the view and its countdowns, which it starts and stops at v.Now.
func (d *decider) decide(v leaderView) []decision {
	r := &round{decider: d, leaderView: v, decided: map[int]bool{}, alive: map[NodeID]bool{}}
	for _, mb := range v.Members {
		if mb.Status == serf.StatusAlive {
			r.alive[mb.ID] = true
		}
	}
	r.admitMembers()
	r.raiseProtocol()
	r.retireLeft()
	r.failOverSilent()
	r.reviveLost()
	r.heal()
	if v.Map.Version == 0 {
		r.assignFirstMap()
		return r.out
	}
	if r.plan() {
		return r.out // the rest is decided against the planned map, next round
	}
	r.recreateLost()
	r.advanceMoves()
	return r.out
}

// round is one call of decide.
type round struct {
	*decider
	leaderView
	alive   map[NodeID]bool
	decided map[int]bool // partitions with a decision this round
	out     []decision
}

func (r *round) add(cmd command, level slog.Level, why string, attrs ...any) {
	if cmd.Kind != cmdUpsertNode && cmd.Kind != cmdRestarted && cmd.Kind != cmdAssign && cmd.Kind != cmdPlan && cmd.Kind != cmdProtocol {
		r.decided[cmd.Partition] = true
	}
	r.out = append(r.out, decision{command: cmd, level: level, why: why, attrs: attrs})
}

// owned lists the partitions whose active owner is id.
func (r *round) owned(id NodeID) []int {
	var parts []int
	for p, st := range r.Map.Runtime {
		if st.Owner == id {
			parts = append(parts, p)
		}
	}
	return parts
}

// admitMembers records each alive member's process in the map. A restarted process may have lost what its
// predecessor held, so the partitions it still owns are decided again before the map records it. Until then
// it refuses to serve them.
func (r *round) admitMembers() {
	for _, mb := range sortedMembers(r.Members) {
		if mb.Status != serf.StatusAlive || mb.DataAddr == "" {
			continue
		}
		if mb.Protocol.Version < r.Map.Protocol {
			r.log.Warn("member speaks a protocol older than the cluster's: not recorded", "node", mb.ID,
				"protocol", mb.Protocol.Version, "cluster", r.Map.Protocol)
			continue
		}
		want := NodeInfo{ID: mb.ID, DataAddr: mb.DataAddr, RESPAddr: mb.RESPAddr, Incarnation: mb.Incarnation,
			Protocol: mb.Protocol.Version}
		info, known := r.Map.Nodes[mb.ID]
		if known && info == want {
			continue
		}
		restarted := known && info.Incarnation != 0 && info.Incarnation != want.Incarnation
		if restarted && r.Held != nil && r.Held(mb.ID) {
			continue
		}
		if restarted && !r.redecideRestarted(mb) {
			continue // some partition must wait; until it is decided, the restarted process stays unknown
		}
		r.add(command{Kind: cmdUpsertNode, Node: want, Intact: mb.Intact}, slog.LevelInfo, "recording member", "node", mb.ID)
	}
}

// raiseProtocol raises the cluster's protocol once every member speaks a newer one.
func (r *round) raiseProtocol() {
	if v := clusterProtocol(r.Members, r.Map); v > r.Map.Protocol {
		r.add(command{Kind: cmdProtocol, Protocol: v}, slog.LevelInfo, "every member speaks a newer protocol: the cluster's rises",
			"from", r.Map.Protocol, "to", v)
	}
}

// redecideRestarted decides again the partitions a restarted member still owns and reports whether none
// had to wait.
func (r *round) redecideRestarted(mb member) bool {
	parts := r.owned(mb.ID)
	if len(parts) == 0 {
		return true
	}
	if mb.Intact {
		r.log.Warn("owner restarted with intact copies; deciding its partitions again", "node", mb.ID)
		return r.promoteEach(parts, promotion{withOwner: true}) == 0
	}
	r.log.Warn("owner restarted; failing its partitions over", "node", mb.ID)
	if slices.ContainsFunc(r.Map.Runtime, func(st PartitionState) bool { return slices.Contains(st.InSync, mb.ID) }) {
		r.add(command{Kind: cmdRestarted, Node: NodeInfo{ID: mb.ID}}, slog.LevelWarn, "restarted node leaves the in-sync sets", "node", mb.ID)
	}
	return r.promoteEach(parts, promotion{giveUp: true}) == 0
}

// retireLeft hands the partitions of members that left cleanly to their in-sync replicas at once: no
// suspicion is needed, they said goodbye.
func (r *round) retireLeft() {
	for _, mb := range sortedMembers(r.Members) {
		if mb.Status == serf.StatusLeft {
			r.promoteEach(r.owned(mb.ID), promotion{giveUp: true})
		}
	}
}

// failOverSilent fails over the partitions of each owner gossip calls failed that has not answered a
// direct probe for FailoverTimeout.
func (r *round) failOverSilent() {
	failed := map[NodeID]bool{}
	for _, mb := range r.Members {
		if mb.Status == serf.StatusFailed {
			failed[mb.ID] = true
		}
	}
	maps.DeleteFunc(r.clocks.suspected, func(id NodeID, _ time.Time) bool { return !failed[id] })
	for _, id := range slices.Sorted(maps.Keys(failed)) {
		parts := r.owned(id)
		if len(parts) == 0 {
			continue
		}
		if r.Probe.reachable(id) {
			delete(r.clocks.suspected, id)
			continue
		}
		if _, known := r.clocks.suspected[id]; !known {
			r.log.Warn("owner suspected dead", "node", id)
		}
		if r.clocks.suspected.elapsed(id, r.Now) >= r.rules.FailoverTimeout {
			r.promoteEach(parts, promotion{giveUp: true, suspected: r.clocks.suspected[id]})
		}
	}
}

// reviveLost gives each Unavailable partition back to a node that held every acknowledged write of it when
// it was lost (the map keeps those in its in-sync set), once one is alive again as the same process.
func (r *round) reviveLost() {
	var lost []int
	for p, st := range r.Map.Runtime {
		if st.Health == Unavailable && len(st.InSync) > 0 && !r.decided[p] {
			lost = append(lost, p)
		}
	}
	r.promoteEach(lost, promotion{})
}

// promotion says whom promoteEach may choose, and what it does when it can choose no one.
type promotion struct {
	giveUp    bool // a partition with no in-sync replica left becomes Unavailable; otherwise it waits
	withOwner bool // the current owner, restarted with intact copies, is a candidate too
	// suspected is when the leader began to suspect the failed owner, for the failover's duration.
	suspected time.Time
}

// promoteEach promotes each partition of parts to its most caught-up live in-sync replica, with a source
// to sync from first when a live peer holds more, and returns how many partitions it left to wait.
func (r *round) promoteEach(parts []int, how promotion) (waiting int) {
	for _, p := range parts {
		if r.decided[p] {
			continue
		}
		st := r.Map.Runtime[p]
		to, unsure := r.successor(p, st, how.withOwner)
		if to == "" && (unsure || !how.giveUp) {
			if unsure {
				r.log.Warn("failover waits: no live in-sync replica answered", "partition", p, "from", st.Owner)
			}
			waiting++
			continue // try again next round rather than give up a copy that may be intact
		}
		var source NodeID
		if to != "" {
			source = r.source(p, st, to, how.withOwner)
		}
		r.add(command{Kind: cmdPromote, Partition: p, Epoch: st.Epoch, Node: NodeInfo{ID: to}, Source: source},
			slog.LevelWarn, "failing over partition", "partition", p, "from", st.Owner, "to", to, "epoch", st.Epoch+1, "source", source)
		r.out[len(r.out)-1].suspected = how.suspected
	}
	return waiting
}

// successor returns the live in-sync replica of p holding the most of it (by segment revisions). Only an
// in-sync replica is sure to hold every acknowledged write. It returns "" when none is left, with unsure set
// when some in-sync replica gossip calls alive did not answer: it may be intact behind a passing fault.
func (r *round) successor(p int, st PartitionState, withOwner bool) (best NodeID, unsure bool) {
	var bestTotal uint64
	candidates := st.InSync
	if withOwner && st.Owner != "" {
		candidates = append([]NodeID{st.Owner}, st.InSync...)
	}
	for _, id := range candidates {
		if !r.alive[id] {
			continue
		}
		a := r.Probe.copies(id)
		if a.revisions == nil {
			unsure = unsure || !a.answered
			continue
		}
		if total := a.total(r.Layout, p); best == "" || total > bestTotal {
			best, bestTotal = id, total
		}
	}
	return best, unsure
}

// source returns the live assigned peer of p, other than the chosen owner and the previous one (unless
// withOwner: it restarted and may be a source), holding the most segments beyond the owner's copy, or ""
// when none holds anything more.
func (r *round) source(p int, st PartitionState, owner NodeID, withOwner bool) NodeID {
	var best NodeID
	most := 0
	for _, id := range r.Map.Assignment[p] {
		if id == owner || id == st.Owner && !withOwner || !r.alive[id] {
			continue
		}
		more := len(moreOf(r.Probe.copies(id), r.Probe.copies(owner), r.Layout, p, st.Epoch))
		if more > most {
			best, most = id, more
		}
	}
	return best
}

// total sums a node's revisions of partition p's segments.
func (a probeAnswer) total(l Layout, p int) (total uint64) {
	first, end := l.PartitionSegments(p)
	for s := first; s < end; s++ {
		total += a.revisions[s]
	}
	return total
}

// moreOf returns the segments of partition p where the copies a peer answered hold more than those of the
// chosen holder; lastEpoch is the epoch the previous owner held p under.
func moreOf(peer, holder probeAnswer, l Layout, p int, lastEpoch uint64) []int {
	if peer.revisions == nil || holder.revisions == nil {
		return nil
	}
	var segs []int
	first, end := l.PartitionSegments(p)
	for s := first; s < end; s++ {
		if holdsMore(peer.revisions[s], peer.lines[s], holder.revisions[s], holder.lines[s], lastEpoch) {
			segs = append(segs, s)
		}
	}
	return segs
}

// heal returns to Healthy, each under a new epoch, the Degraded partitions whose copies have all been in
// sync for HealCooldown without a break, so a flapping node restarts the cool-down rather than churning epochs.
func (r *round) heal() {
	for p := range r.Map.Runtime {
		switch {
		case !r.Map.healable(p):
			delete(r.clocks.healable, p)
		case r.decided[p]:
		case r.clocks.healable.elapsed(p, r.Now) >= r.rules.HealCooldown:
			r.add(command{Kind: cmdHeal, Partition: p, Epoch: r.Map.Runtime[p].Epoch}, slog.LevelInfo, "healing partition", "partition", p)
			delete(r.clocks.healable, p)
		}
	}
}

// assignFirstMap assigns the first partition map once BootstrapExpect nodes are known to the map, over the
// ones that may hold partitions. Nodes that join later get partitions by rebalancing.
func (r *round) assignFirstMap() {
	if len(r.Map.Nodes) < r.rules.BootstrapExpect {
		return
	}
	if ids := r.placeable(); len(ids) > 0 {
		a := Assign(nil, ids, r.Map.Partitions, r.Map.ReplicationFactor)
		r.add(command{Kind: cmdAssign, Assignment: a}, slog.LevelInfo, "first partition map", "nodes", ids)
	}
}

// plan decides a new partition map when the placeable nodes differ from the planned ones, and reports
// whether it did.
func (r *round) plan() bool {
	live := r.placeable()
	m := r.Map
	if len(live) == 0 || slices.Equal(live, m.plannedNodes()) {
		return false
	}
	next := Assign(m.planned(), live, m.Partitions, m.ReplicationFactor)
	copies, primaries := m.planned().Moves(next)
	r.add(command{Kind: cmdPlan, Assignment: next}, slog.LevelInfo, "rebalancing", "nodes", live, "copies", copies, "primaries", primaries)
	return true
}

// placeable returns, sorted, the map's nodes that may hold partitions: not lite, not draining (as the map
// records it or gossip says), and either alive or failed for less than EvictionTimeout (LostPartitionTimeout
// if it holds a lost one on disk). A failed node the plan already leaves out stays out: the clock of its
// failure is the leader's own, so a new leader must not undo an eviction its predecessor made.
func (r *round) placeable() []NodeID {
	var ids []NodeID
	failed := map[NodeID]bool{}
	planned := r.Map.plannedNodes()
	for _, mb := range r.Members {
		if _, known := r.Map.Nodes[mb.ID]; !known || mb.Lite || r.Map.draining(mb.ID) {
			continue
		}
		switch mb.Status {
		case serf.StatusAlive:
			if !mb.Leaving {
				ids = append(ids, mb.ID)
			}
		case serf.StatusFailed:
			failed[mb.ID] = true
			failedFor := r.clocks.failed.elapsed(mb.ID, r.Now)
			awaited := mb.Durable && holdsLost(r.Map, mb.ID)
			waiting := failedFor < r.rules.EvictionTimeout || awaited && failedFor < r.rules.LostPartitionTimeout
			if waiting && slices.Contains(planned, mb.ID) {
				ids = append(ids, mb.ID)
			}
		}
	}
	maps.DeleteFunc(r.clocks.failed, func(id NodeID, _ time.Time) bool { return !failed[id] })
	slices.Sort(ids)
	return ids
}

// recreateLost restarts, empty, each partition lost for its timeout (no owner, no move under way) on the
// first alive member among its assigned nodes. A lost partition that is moving is left to advanceMoves.
func (r *round) recreateLost() {
	for p, st := range r.Map.Runtime {
		if st.Owner != "" {
			delete(r.clocks.lost, p)
			continue
		}
		givenUp, onDisk := r.givenUp(p, st)
		i := slices.IndexFunc(r.Map.Assignment[p], func(id NodeID) bool { return r.alive[id] })
		if st.Target != nil || i < 0 || !givenUp || r.decided[p] || r.liveHolder(st) != "" {
			continue
		}
		r.add(command{Kind: cmdPromote, Partition: p, Epoch: st.Epoch, Node: NodeInfo{ID: r.Map.Assignment[p][i]}},
			r.giveUpLevel(onDisk), "recreating lost partition EMPTY", r.giveUpAttrs(p, st, onDisk, r.Map.Assignment[p][i])...)
	}
}

// givenUp reports whether lost partition p has waited long enough for the nodes that held it, counting from
// the first round that saw it lost: EvictionTimeout, or LostPartitionTimeout when a holder keeps it on disk
// and may come back with every acknowledged write.
func (r *round) givenUp(p int, st PartitionState) (givenUp, onDisk bool) {
	lostFor := r.clocks.lost.elapsed(p, r.Now)
	onDisk = heldOnDisk(st, durableMembers(r.Members))
	timeout := r.rules.EvictionTimeout
	if onDisk {
		timeout = r.rules.LostPartitionTimeout
	}
	return lostFor >= timeout, onDisk
}

// liveHolder returns a holder of lost partition state st that gossip calls alive as the very process the map
// records, and that has not answered that it holds nothing, or "" when there is none. Such a process may
// keep every acknowledged write of the partition, so no timeout gives the partition up while it lives:
// reviveLost gives it back once the holder answers. A restarted process under the same name is another
// process: one that keeps its copies in memory holds nothing of its predecessor's.
func (r *round) liveHolder(st PartitionState) NodeID {
	incarnations := map[NodeID]uint64{}
	for _, mb := range r.Members {
		if mb.Status == serf.StatusAlive {
			incarnations[mb.ID] = mb.Incarnation
		}
	}
	for _, id := range st.InSync {
		inc, alive := incarnations[id]
		if !alive || inc != r.Map.Nodes[id].Incarnation {
			continue
		}
		if a := r.Probe.copies(id); a.answered && a.revisions == nil {
			continue // it answered that it cannot vouch for any copy
		}
		return id
	}
	return ""
}

func (r *round) giveUpLevel(onDisk bool) slog.Level {
	if onDisk {
		return slog.LevelError // what the disks of its holders keep is given up
	}
	return slog.LevelWarn
}

func (r *round) giveUpAttrs(p int, st PartitionState, onDisk bool, to NodeID) []any {
	return []any{"partition", p, "held by", st.InSync, "on disk", onDisk, "on", to, "epoch", st.Epoch + 1}
}

// durableMembers returns the members whose copies outlive their process.
func durableMembers(members []member) map[NodeID]bool {
	durable := map[NodeID]bool{}
	for _, mb := range members {
		if mb.Durable {
			durable[mb.ID] = true
		}
	}
	return durable
}

// heldOnDisk reports whether lost partition state st was held by a node that keeps its copies on disk. A
// lost partition has no owner, and its in-sync list keeps the nodes that held every acknowledged write.
func heldOnDisk(st PartitionState, durable map[NodeID]bool) bool {
	return st.Owner == "" && slices.ContainsFunc(st.InSync, func(id NodeID) bool { return durable[id] })
}

// holdsLost reports whether node id is among the holders of a lost partition.
func holdsLost(m *ClusterMap, id NodeID) bool {
	return slices.ContainsFunc(m.Runtime, func(st PartitionState) bool {
		return st.Owner == "" && slices.Contains(st.InSync, id)
	})
}

// advanceMoves starts copies up to MaxMigrations and settles the moves that need no hand-over: those whose
// owner stays, once every target node is in sync, and those with no owner at all once given up.
// Moves whose owner changes are settled at the owner's request after its cut-over (cutover.go).
func (r *round) advanceMoves() {
	copying := 0
	for _, st := range r.Map.Runtime {
		if st.From != nil {
			copying++
		}
	}
	for p, st := range r.Map.Runtime {
		switch {
		case r.decided[p], st.Target == nil, st.Health == Recovering:
		case st.Owner == "":
			// Nothing to copy: it settles on its target, empty, unless a node that held it may return.
			if givenUp, onDisk := r.givenUp(p, st); (givenUp || len(st.InSync) == 0) && r.liveHolder(st) == "" {
				r.add(command{Kind: cmdSettle, Partition: p, Epoch: st.Epoch, Node: NodeInfo{ID: st.Target[0]}},
					r.giveUpLevel(onDisk), "settling lost partition EMPTY on its target", r.giveUpAttrs(p, st, onDisk, st.Target[0])...)
			}
		case st.From == nil:
			if copying < r.rules.MaxMigrations {
				r.add(command{Kind: cmdMigrate, Partition: p, Epoch: st.Epoch}, slog.LevelDebug, "starting move", "partition", p)
				copying++
			}
		case st.Target[0] == st.Owner && st.targetInSync():
			r.add(command{Kind: cmdSettle, Partition: p, Epoch: st.Epoch, Node: NodeInfo{ID: st.Owner}}, slog.LevelDebug, "settling move", "partition", p)
		}
	}
}
