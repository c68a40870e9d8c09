package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/chaos"
)

// nemesis kills, freezes and restarts servers on a seeded schedule and remembers what it did.
type nemesis struct {
	c     *cluster
	lite  *zaris.Node // its cluster map says who owns what and which copies are in sync
	rng   *rand.Rand
	out   io.Writer // steps are echoed here as they happen
	start time.Time
	// replaceEvery is the mean pause between replacements under -nemesis replace.
	replaceEvery time.Duration
	// rollingStop is how -nemesis rolling-restart stops a server: SIGKILL, or SIGTERM for a graceful leave.
	rollingStop syscall.Signal
	// pace says when -nemesis rolling-restart stops the next server; rounds how many full rounds it makes
	// (0: until the faults end).
	pace       rollingPace
	rounds     int
	roundsDone int
	// leaveFailures lists the SIGTERMed servers that exited with an error: their leave did not finish.
	leaveFailures []string
	// upgrading makes the first round of -nemesis rolling-restart a rolling upgrade (runUpgrade), which
	// leaves what it saw in upgrade.
	upgrading bool
	upgrade   *upgradeWatch
	// backup is what -nemesis backup did, its directory set before it runs.
	backup *backupRun
	// awaitHealthy and awaitWritable wait, within settleBound, until every partition is Healthy or takes a
	// write: the restart schedules measure the cluster's recovery with them.
	awaitHealthy, awaitWritable func(context.Context) (time.Duration, error)

	mu    sync.Mutex
	steps []string
	kills []killEvent
	down  *server // the server killed and not restarted yet; at most one
	// dead holds the incarnation of each killed process: a copy the map still lists on that incarnation
	// is gone, until the map records the restarted process.
	dead map[zaris.NodeID]uint64
	// retired lists the servers replaced for good, in the order they were killed.
	retired []retirement
	// recoveries are the cluster's recoveries from the restarts of -nemesis full-restart or rolling-restart.
	recoveries []recovery
	// restarts counts the restarts of each server under -nemesis rolling-restart.
	restarts map[string]int

	// net cuts the servers' network under -nemesis partition; nil otherwise.
	net *netLab
	// shapes counts the network faults made, by shape; killsInFaults the servers SIGKILLed during one.
	shapes        map[string]int
	killsInFaults int
	// healFailed says the last heal of the network left some cut in place.
	healFailed bool
}

// killEvent is one SIGKILL: when it was sent and the partitions the victim owned just before.
type killEvent struct {
	at         time.Time
	partitions []int
}

// newNemesis returns a nemesis over c whose choices are drawn from seed.
func newNemesis(c *cluster, lite *zaris.Node, seed uint64, out io.Writer) *nemesis {
	return &nemesis{c: c, lite: lite, rng: rand.New(rand.NewPCG(seed, 1)), out: out, dead: map[zaris.NodeID]uint64{},
		restarts: map[string]int{}, shapes: map[string]int{}}
}

// The fault schedules -nemesis selects.
const (
	nemesisMixed          = "mixed"           // kills, freezes and restarts at random, a killed server down for a while
	nemesisCrashRestart   = "crash-restart"   // a kill every 1 to 2 s, each victim restarted within 0.5 s
	nemesisReplace        = "replace"         // the oldest server killed for good and a new one started, every few s
	nemesisFullRestart    = "full-restart"    // every server killed at once and all restarted, every few s
	nemesisRollingRestart = "rolling-restart" // one server at a time restarted, the next once all is Healthy
	nemesisPartition      = "partition"       // network faults between servers, with kills during them
)

// nemeses lists the fault schedules -nemesis accepts.
var nemeses = []string{nemesisMixed, nemesisCrashRestart, nemesisReplace, nemesisFullRestart, nemesisRollingRestart,
	nemesisPartition, nemesisBackup}

// run injects faults on the schedule kind names for duration, or until ctx ends. Every step draws the same
// numbers whatever the cluster's state, so a seed replays the same schedule of choices. The restart
// schedules wait for the cluster to recover from their last restart even past the duration: only ctx
// ends those waits, so each restart's recovery is measured in full.
func (n *nemesis) run(ctx context.Context, kind string, duration time.Duration) {
	faults, stop := context.WithTimeout(ctx, duration)
	defer stop()
	switch kind {
	case nemesisCrashRestart:
		n.runCrashRestart(faults)
	case nemesisReplace:
		n.runReplace(faults)
	case nemesisFullRestart:
		n.runFullRestart(ctx, faults)
	case nemesisRollingRestart:
		n.runRollingRestart(ctx, faults)
	case nemesisPartition:
		n.runPartition(faults)
	case nemesisBackup:
		n.runBackup(faults, duration)
	default:
		n.runMixed(faults)
	}
}

// runMixed injects a fault every 0.5 to 2.5 s: a kill, a freeze, or the restart of the server down.
func (n *nemesis) runMixed(ctx context.Context) {
	for {
		wait := time.Duration(500+n.rng.IntN(2000)) * time.Millisecond
		kind, pick := n.rng.IntN(5), n.rng.Uint64()
		hold := time.Duration(1000+n.rng.IntN(2000)) * time.Millisecond
		if !chaos.Sleep(ctx, wait) {
			return
		}
		switch kind {
		case 0, 1:
			n.killOwner(pick)
		case 2, 3:
			n.freeze(ctx, pick, hold)
		case 4:
			n.restartDown()
		}
	}
}

// runCrashRestart SIGKILLs a server every 1 to 2 s and restarts it 0 to 500 ms later. It never waits for
// the cluster to heal: a restarted server is often killed again, or its copy's partner is, before it
// has caught up, which is the point.
func (n *nemesis) runCrashRestart(ctx context.Context) {
	next := time.Now()
	for {
		next = next.Add(time.Duration(1000+n.rng.IntN(1001)) * time.Millisecond)
		pick, downFor := n.rng.Uint64(), time.Duration(n.rng.IntN(501))*time.Millisecond
		if !chaos.Sleep(ctx, time.Until(next)) {
			return
		}
		n.crashRestart(ctx, pick, downFor)
	}
}

// step logs a nemesis action with the time since the faults began.
func (n *nemesis) step(format string, args ...any) {
	line := fmt.Sprintf("%6.1fs ", time.Since(n.start).Seconds()) + fmt.Sprintf(format, args...)
	n.mu.Lock()
	n.steps = append(n.steps, line)
	n.mu.Unlock()
	fmt.Fprintln(n.out, "  "+line)
}

// killOwner SIGKILLs a random server that owns partitions and is never the only live copy of one (as owner
// or in-sync replica), so every acknowledged write keeps a live copy (the failure model of RF 2). With a
// server already down it restarts that one instead.
func (n *nemesis) killOwner(pick uint64) {
	if n.isDown() {
		n.restartDown()
		return
	}
	m := n.lite.ClusterMap()
	n.killOneOf(n.killable(m), pick, m)
}

// killOneOf SIGKILLs the server pick selects among victims; it reports whether there was one.
func (n *nemesis) killOneOf(victims []*server, pick uint64, m *zaris.ClusterMap) bool {
	if len(victims) == 0 {
		n.step("no kill: every candidate holds the only live copy of some partition")
		return false
	}
	n.kill(victims[pick%uint64(len(victims))], m)
	return true
}

// killable returns the running servers that own partitions and hold no partition's only live copy.
func (n *nemesis) killable(m *zaris.ClusterMap) []*server {
	var out []*server
	for _, s := range n.c.list() {
		id := zaris.NodeID(s.name)
		if n.c.running(s) && m.OwnedBy(id) > 0 && n.othersHoldAll(m, id) {
			out = append(out, s)
		}
	}
	return out
}

// othersHoldAll reports whether every partition id holds a copy of that counts (as its owner or an in-sync
// replica) has another live copy, on its owner or an in-sync replica, so losing id loses no acknowledged
// write. A replica counts too: its partition's owner may be the server that is down.
func (n *nemesis) othersHoldAll(m *zaris.ClusterMap, id zaris.NodeID) bool {
	for _, st := range m.Runtime {
		holders := append([]zaris.NodeID{st.Owner}, st.InSync...)
		if slices.Contains(holders, id) && !slices.ContainsFunc(holders, func(r zaris.NodeID) bool {
			return r != id && r != "" && n.liveCopy(m, r)
		}) {
			return false
		}
	}
	return true
}

// liveCopy reports whether the map's node r is a running server whose process is the one the map knows:
// a restarted server the map has not recorded yet holds nothing.
func (n *nemesis) liveCopy(m *zaris.ClusterMap, r zaris.NodeID) bool {
	servers := n.c.list()
	i := slices.IndexFunc(servers, func(s *server) bool { return s.name == string(r) })
	if i < 0 || !n.c.running(servers[i]) {
		return false
	}
	n.mu.Lock()
	inc, killed := n.dead[r]
	n.mu.Unlock()
	return !killed || m.Nodes[r].Incarnation != inc
}

// kill SIGKILLs s, to be restarted later, recording the partitions it owned under m.
func (n *nemesis) kill(s *server, m *zaris.ClusterMap) {
	owned := n.sigkill(m, s)
	n.setDown(s)
	n.step("kill %s (owner of %d partitions)", s.name, owned)
}

// setDown records s as the server down, to be restarted.
func (n *nemesis) setDown(s *server) {
	n.mu.Lock()
	n.down = s
	n.mu.Unlock()
}

// sigkill SIGKILLs the servers at the same instant, waits until they are gone and records the kill: when,
// the partitions they owned under m, and the incarnations m knows for them. It returns how many
// partitions they owned.
func (n *nemesis) sigkill(m *zaris.ClusterMap, servers ...*server) int {
	ev := killEvent{partitions: ownedBy(m, servers)}
	ev.at = time.Now()
	n.c.kill(servers...)
	n.mu.Lock()
	n.kills = append(n.kills, ev)
	n.mu.Unlock()
	n.markGone(m, servers...)
	return len(ev.partitions)
}

// ownedBy returns the partitions whose owner under m is one of the servers.
func ownedBy(m *zaris.ClusterMap, servers []*server) []int {
	var out []int
	for p, st := range m.Runtime {
		if slices.ContainsFunc(servers, func(s *server) bool { return st.Owner == zaris.NodeID(s.name) }) {
			out = append(out, p)
		}
	}
	return out
}

// markGone records the incarnations m knows for the servers, whose processes have ended: the copies the
// map lists on those processes count for nothing until it records the servers' new ones.
func (n *nemesis) markGone(m *zaris.ClusterMap, servers ...*server) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range servers {
		id := zaris.NodeID(s.name)
		n.dead[id] = m.Nodes[id].Incarnation
	}
}

// freeze SIGSTOPs a random running server for hold, then SIGCONTs it: its lease must stop it serving, and
// it must come back fenced. A frozen server is failed over like a dead one, so it must not hold the only
// live copy of a partition either: the cluster would give that partition up.
func (n *nemesis) freeze(ctx context.Context, pick uint64, hold time.Duration) {
	safe := n.stoppable(n.lite.ClusterMap())
	if len(safe) == 0 {
		n.step("no freeze: every server holds the only live copy of some partition")
		return
	}
	s := safe[pick%uint64(len(safe))]
	n.c.signal(s, syscall.SIGSTOP, false)
	n.step("freeze %s for %v", s.name, hold)
	chaos.Sleep(ctx, hold)
	n.c.signal(s, syscall.SIGCONT, false)
	n.step("thaw %s", s.name)
}

// stoppable returns the running servers that hold no partition's only live copy, so one of them may die
// or be frozen within the failure model.
func (n *nemesis) stoppable(m *zaris.ClusterMap) []*server {
	var out []*server
	for _, s := range n.c.list() {
		if n.c.running(s) && n.othersHoldAll(m, zaris.NodeID(s.name)) {
			out = append(out, s)
		}
	}
	return out
}

// crashRestart SIGKILLs the server pick selects among the stoppable ones, an owner when one can be, and
// restarts it after downFor, sooner if ctx ends. With a server still down from a failed restart it retries
// that restart instead, so at most one server is ever down.
func (n *nemesis) crashRestart(ctx context.Context, pick uint64, downFor time.Duration) {
	if n.isDown() {
		n.restartDown()
		return
	}
	m := n.lite.ClusterMap()
	victims := n.killable(m)
	if len(victims) == 0 {
		victims = n.stoppable(m)
	}
	if !n.killOneOf(victims, pick, m) {
		return
	}
	chaos.Sleep(ctx, downFor)
	n.restartDown()
}

// isDown reports whether a killed server waits for its restart.
func (n *nemesis) isDown() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.down != nil
}

// restartDown restarts the server down, if any.
func (n *nemesis) restartDown() {
	n.mu.Lock()
	s := n.down
	n.down = nil
	n.mu.Unlock()
	if s == nil {
		return
	}
	if err := n.restart(s); err != nil {
		n.setDown(s)
		n.step("restart %s failed: %v", s.name, err)
		return
	}
	n.step("restart %s", s.name)
}

// restart starts a new process for s with its name, ports and data directory; it joins through the other
// servers and the lite member, which is always up.
func (n *nemesis) restart(s *server) error {
	return n.c.start(s, n.c.joinAddrs(s, n.lite.GossipAddr()))
}

// healAll heals the network, thaws every server and restarts the one that is down.
func (n *nemesis) healAll() {
	n.healNetwork()
	for _, s := range n.c.list() {
		n.c.signal(s, syscall.SIGCONT, false)
	}
	n.restartDown()
	n.step("final heal")
}

// faults returns the steps taken so far.
func (n *nemesis) faults() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.steps)
}

// failoverTimes returns, for each partition a killed server owned, the time from the kill to the end of
// the first acknowledged put to that partition that started after the kill. acked is from ackedPuts.
func (n *nemesis) failoverTimes(acked map[int][]chaos.Op) []time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []time.Duration
	for _, ev := range n.kills {
		for _, p := range ev.partitions {
			i := slices.IndexFunc(acked[p], func(op chaos.Op) bool { return op.Start.After(ev.at) })
			if i >= 0 {
				out = append(out, acked[p][i].End.Sub(ev.at))
			}
		}
	}
	return out
}

// ackedPuts groups the acknowledged puts of ops by partition, each group sorted by end time.
func ackedPuts(ops []chaos.Op, layout zaris.Layout) map[int][]chaos.Op {
	return putsByPartition(ops, layout, func(op chaos.Op) bool { return op.Outcome == chaos.OK })
}

// attemptedPuts groups every put of ops by partition, whatever its outcome, sorted by end.
func attemptedPuts(ops []chaos.Op, layout zaris.Layout) map[int][]chaos.Op {
	return putsByPartition(ops, layout, func(chaos.Op) bool { return true })
}

// putsByPartition groups the puts of ops that keep accepts by partition, sorted by end.
func putsByPartition(ops []chaos.Op, layout zaris.Layout, keep func(chaos.Op) bool) map[int][]chaos.Op {
	acked := make(map[int][]chaos.Op)
	for _, op := range ops {
		if op.Kind == chaos.Put && keep(op) {
			p := layout.KeyPartition(op.Key)
			acked[p] = append(acked[p], op)
		}
	}
	for _, puts := range acked {
		slices.SortFunc(puts, byEnd)
	}
	return acked
}

// byEnd orders ops by end time.
func byEnd(a, b chaos.Op) int { return a.End.Compare(b.End) }

// gaps returns, per partition, the gaps longer than over between consecutive acknowledged puts ending
// within [from, to]: while clients write continuously, such a gap is a window the partition took no write.
func gaps(acked map[int][]chaos.Op, from, to time.Time, over time.Duration) []time.Duration {
	var out []time.Duration
	eachGap(acked, from, to, func(_ int, _ time.Time, gap time.Duration) {
		if gap > over {
			out = append(out, gap)
		}
	})
	return out
}

// eachGap calls fn with every gap, per partition, between consecutive acknowledged puts ending within
// [from, to], the first counted from from, with the partition and the gap's start.
func eachGap(acked map[int][]chaos.Op, from, to time.Time, fn func(partition int, began time.Time, gap time.Duration)) {
	for p, puts := range acked {
		prev := from
		for _, op := range puts {
			if op.End.Before(from) || op.End.After(to) {
				continue
			}
			fn(p, prev, op.End.Sub(prev))
			prev = op.End
		}
	}
}
