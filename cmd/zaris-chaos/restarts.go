package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/chaos"
)

// Under -nemesis full-restart every server is SIGKILLed at the same instant and all of them are started
// again from their data directories, so the cluster must recover what it acknowledged from disk alone.
// Under -nemesis rolling-restart the servers are restarted one at a time, as an upgrade would, each once
// the cluster is Healthy again after the previous one.

const (
	fullRestartEvery = 10 * time.Second       // mean pause between full restarts, each drawn within ±20%
	startSpread      = 500 * time.Millisecond // a full restart starts every server within this
)

// rollingStops are the values of -rolling-stop and the signals they stop a server with.
var rollingStops = map[string]syscall.Signal{"kill": syscall.SIGKILL, "term": syscall.SIGTERM}

// signalName names the signal of a -rolling-stop value: SIGKILL or SIGTERM.
func signalName(stop string) string {
	return "SIG" + strings.ToUpper(stop)
}

// restartSchedule reports whether the schedule kind restarts servers and measures the cluster's recovery.
func restartSchedule(kind string) bool {
	return kind == nemesisFullRestart || kind == nemesisRollingRestart
}

// recovery is how long the cluster took to recover from one restart; err says it did not recover in time.
type recovery struct {
	took time.Duration
	err  error
}

// String renders the time taken, as a lower bound when the cluster did not recover: ">1m0s".
func (r recovery) String() string {
	took := r.took.Round(time.Millisecond)
	if r.err != nil {
		return ">" + took.String()
	}
	return took.String()
}

// plannedStart is one server's start in a full restart, at an offset from the first start.
type plannedStart struct {
	s  *server
	at time.Duration
}

// shuffled returns the servers in an order drawn from rng.
func shuffled(rng *rand.Rand, servers []*server) []*server {
	out := slices.Clone(servers)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// planStarts orders the servers at random and spreads their starts over spread: the first at once, the
// others at sorted offsets drawn within it.
func planStarts(rng *rand.Rand, servers []*server, spread time.Duration) []plannedStart {
	offsets := []time.Duration{0}
	for range len(servers) - 1 {
		offsets = append(offsets, time.Duration(rng.Int64N(int64(spread)+1)))
	}
	slices.Sort(offsets)
	var plan []plannedStart
	for i, s := range shuffled(rng, servers) {
		plan = append(plan, plannedStart{s: s, at: offsets[i]})
	}
	return plan
}

// runFullRestart, after each pause, kills every server at once, restarts them all and waits until every
// partition takes a write. The pauses, drawn within ±20% of fullRestartEvery, start once that wait ends,
// so the cluster serves between full restarts.
func (n *nemesis) runFullRestart(ctx, faults context.Context) {
	for cycle := 1; ; cycle++ {
		pause := jitter(fullRestartEvery, n.rng.Float64())
		plan := planStarts(n.rng, n.c.list(), startSpread)
		if !chaos.Sleep(faults, pause) {
			return
		}
		n.fullRestart(ctx, cycle, plan)
	}
}

// fullRestart SIGKILLs every server at the same instant, starts them again as plan says, and records
// how long after the last start every partition took a write.
func (n *nemesis) fullRestart(ctx context.Context, cycle int, plan []plannedStart) {
	servers := n.c.list()
	owned := n.sigkill(n.lite.ClusterMap(), servers...)
	n.step("full restart %d: kill all %d servers at once (owners of %d partitions)", cycle, len(servers), owned)
	last := n.startAsPlanned(plan)
	_, err := n.awaitWritable(ctx)
	n.noteRecovery(recovery{took: time.Since(last), err: err},
		fmt.Sprintf("full restart %d: every partition writable", cycle), "after the last start")
}

// startAsPlanned starts the servers of plan at their offsets from now and returns when the last started.
// It ignores the end of the faults: the servers are down until it is done.
func (n *nemesis) startAsPlanned(plan []plannedStart) time.Time {
	first := time.Now()
	var started []string
	for _, ps := range plan {
		time.Sleep(time.Until(first.Add(ps.at)))
		if err := n.restart(ps.s); err != nil {
			n.step("restart %s failed: %v", ps.s.name, err)
			continue
		}
		started = append(started, ps.s.name)
	}
	last := time.Now()
	n.step("restart %s within %v", strings.Join(started, ", "), last.Sub(first).Round(time.Millisecond))
	return last
}

// noteRecovery records r and logs it: what, then how long it took, then after what.
func (n *nemesis) noteRecovery(r recovery, what, after string) {
	n.mu.Lock()
	n.recoveries = append(n.recoveries, r)
	n.mu.Unlock()
	if r.err != nil {
		n.step("%s: not within %v %s: %v", what, r.took.Round(time.Millisecond), after, r.err)
		return
	}
	n.step("%s %v %s", what, r.took.Round(time.Millisecond), after)
}

// runRollingRestart restarts the servers one at a time, in an order drawn anew for each round, until the
// faults end or, with rounds set, that many rounds are done.
func (n *nemesis) runRollingRestart(ctx, faults context.Context) {
	for round := 1; n.rounds == 0 || round <= n.rounds; round++ {
		if round == 1 && n.upgrading {
			n.runUpgrade(ctx, faults)
		}
		for _, s := range shuffled(n.rng, n.c.list()) {
			if faults.Err() != nil || round == 1 && n.upgrading {
				break
			}
			n.rollOver(ctx, faults, s)
		}
		if faults.Err() != nil {
			return
		}
		if n.rounds > 0 {
			n.mu.Lock()
			n.roundsDone = round
			n.mu.Unlock()
			n.step("round %d of %d done", round, n.rounds)
		}
	}
}

// rollOver stops s as rollingStop says and restarts it at once, then waits as the pace says. At the
// healthy pace it first waits until stopping s loses no partition's last live copy, and after the restart
// until the cluster has recovered: the map has caught up and every partition is Healthy. At the ready
// and serve paces it waits for neither, as an orchestrator would not. A server left down by a failed
// restart is restarted instead.
func (n *nemesis) rollOver(ctx, faults context.Context, s *server) {
	if n.isDown() {
		n.restartDown()
		return
	}
	m := n.lite.ClusterMap()
	if n.pace.kind == paceHealthy {
		var err error
		if m, err = n.awaitSafeVictim(faults, s); err != nil {
			n.step("no restart of %s: %v", s.name, err)
			return
		}
	}
	n.stopServer(s, m)
	n.restartDown()
	if n.isDown() {
		return
	}
	n.mu.Lock()
	n.restarts[s.name]++
	n.mu.Unlock()
	if n.pace.kind != paceHealthy {
		took, err := n.c.awaitPaced(ctx, s, n.pace)
		n.noteRecovery(recovery{took: took, err: err}, s.name+" "+n.pace.kind, "after its restart")
		return
	}
	took, err := n.awaitRecovered(ctx)
	n.noteRecovery(recovery{took: took, err: err}, "map caught up, every partition Healthy", "after the restart of "+s.name)
}

// stopServer stops s with rollingStop, recording what it owned under m; s is then down, to be restarted.
// A SIGTERMed server leaves the cluster gracefully and is killed if it outlasts stopGrace.
func (n *nemesis) stopServer(s *server, m *zaris.ClusterMap) {
	if n.rollingStop != syscall.SIGTERM {
		n.kill(s, m)
		return
	}
	owned := m.OwnedBy(zaris.NodeID(s.name))
	start := time.Now()
	exited := n.c.stop(s)
	n.markGone(m, s)
	n.setDown(s)
	took := time.Since(start).Round(time.Millisecond)
	switch err := n.c.exitErr(s); {
	case !exited:
		n.step("stop %s with SIGTERM (owner of %d partitions): still running after %v, killed", s.name, owned, took)
	case err != nil:
		n.mu.Lock()
		n.leaveFailures = append(n.leaveFailures, fmt.Sprintf("%s (%v)", s.name, err))
		n.mu.Unlock()
		n.step("stop %s with SIGTERM (owner of %d partitions): exited in %v: %v", s.name, owned, took, err)
	default:
		n.step("stop %s with SIGTERM (owner of %d partitions): left in %v", s.name, owned, took)
	}
}

// awaitRecovered waits until the map has caught up with the restarts (see settling), then until every
// partition is Healthy, and returns how long that took.
func (n *nemesis) awaitRecovered(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := n.awaitCaughtUp(ctx); err != nil {
		return time.Since(start), err
	}
	_, err := n.awaitHealthy(ctx)
	return time.Since(start), err
}

// awaitCaughtUp waits, within settleBound, until settling finds nothing left in the lite member's map.
func (n *nemesis) awaitCaughtUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	for {
		var running []string
		for _, s := range n.c.list() {
			if n.c.running(s) {
				running = append(running, s.name)
			}
		}
		n.mu.Lock()
		ended := maps.Clone(n.dead)
		n.mu.Unlock()
		left := settling(n.lite.ClusterMap(), running, ended)
		if len(left) == 0 {
			return nil
		}
		if !chaos.Sleep(ctx, pollPause) {
			return fmt.Errorf("the map had not caught up with the restarts within %v (%s): %w", settleBound,
				strings.Join(left, "; "), ctx.Err())
		}
	}
}

// settling says what m has not caught up with after restarts of the running servers: a server it lists
// with no process or with the one that ended last (ended holds each stopped server's last incarnation),
// a server it assigns no copy, partitions still moving. A Healthy map is only whole without these: one
// that has not noticed a restart yet is Healthy, and so is one that moved a leaving server's share away
// and has not given it back.
func settling(m *zaris.ClusterMap, running []string, ended map[zaris.NodeID]uint64) []string {
	var left []string
	for _, name := range running {
		id := zaris.NodeID(name)
		if info, ok := m.Nodes[id]; !ok || info.Incarnation == ended[id] {
			left = append(left, name+": current process not recorded")
		} else if !slices.ContainsFunc(m.Assignment, func(nodes []zaris.NodeID) bool { return slices.Contains(nodes, id) }) {
			left = append(left, name+": no copy assigned")
		}
	}
	moving := 0
	for _, st := range m.Runtime {
		if st.Target != nil {
			moving++
		}
	}
	if moving > 0 {
		left = append(left, fmt.Sprintf("moving partitions: %d", moving))
	}
	return left
}

// completedRounds returns how many full rounds -nemesis rolling-restart has made.
func (n *nemesis) completedRounds() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.roundsDone
}

// failedLeaves returns the SIGTERMed servers whose process exited with an error.
func (n *nemesis) failedLeaves() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.leaveFailures)
}

// recoveryList returns the recoveries measured so far, in order.
func (n *nemesis) recoveryList() []recovery {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.recoveries)
}

// restartTally renders how many times each server was restarted, with the total.
func (n *nemesis) restartTally() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	total := 0
	for _, k := range n.restarts {
		total += k
	}
	return fmt.Sprintf("%d (%s)", total, formatTally(n.restarts))
}

// recoverySummary renders the recoveries: how many, the longest, how many never came, and each in order.
func recoverySummary(rs []recovery) string {
	if len(rs) == 0 {
		return "none measured"
	}
	longest, failed := rs[0], 0
	var each []string
	for _, r := range rs {
		if r.took > longest.took {
			longest = r
		}
		if r.err != nil {
			failed++
		}
		each = append(each, r.String())
	}
	out := fmt.Sprintf("max %v over %d", longest, len(rs))
	if failed > 0 {
		out += fmt.Sprintf(", %d never within the bound", failed)
	}
	return out + ": " + strings.Join(each, " ")
}

// noteRestarts notes the restarts of -nemesis full-restart or rolling-restart and how the cluster
// recovered from each; it reports whether the cluster always recovered within settleBound.
func (h *harness) noteRestarts() bool {
	rs := h.nem.recoveryList()
	if h.o.nemesis == nemesisFullRestart {
		h.notes = append(h.notes, fmt.Sprintf("full restarts: %d; every partition writable (a write to each "+
			"acknowledged) after the last start: %s", len(rs), recoverySummary(rs)))
	} else {
		h.notes = append(h.notes, fmt.Sprintf("rolling restarts with %s: %s; %s after each: %s", signalName(h.o.rollingStop),
			h.nem.restartTally(), h.o.pace.awaited(), recoverySummary(rs)))
	}
	if done := h.nem.completedRounds(); done < h.o.rounds {
		h.failures = append(h.failures, fmt.Sprintf("%d of %d rounds done within -duration %v", done, h.o.rounds, h.o.duration))
	}
	if failed := h.nem.failedLeaves(); len(failed) > 0 {
		h.notes = append(h.notes, fmt.Sprintf("%d leaves did not finish (the process exited with an error): %s",
			len(failed), strings.Join(failed, "; ")))
	}
	if slices.ContainsFunc(rs, func(r recovery) bool { return r.err != nil }) {
		h.notes = append(h.notes, fmt.Sprintf("the cluster did not recover from every restart within %v", settleBound))
		return false
	}
	return true
}

// stalls are a run's write stalls: the gaps between consecutive acknowledged puts.
type stalls struct {
	overall   time.Duration // the longest with no put acknowledged in any partition
	partition time.Duration // the longest in one partition
	p99       time.Duration // the 99th percentile of the gaps in each partition
	gaps      int           // the gaps measured in the partitions
	worst     int           // the partition of the longest per-partition stall
	worstFrom time.Duration // and when it began, from the start of the faults
}

// writeStalls measures the stalls of the acknowledged puts ending within [from, to], grouped by partition
// as ackedPuts groups them, as gaps measures them; a stall still going on at to counts up to to.
func writeStalls(acked map[int][]chaos.Op, from, to time.Time) stalls {
	end := chaos.Op{End: to}
	closed := map[int][]chaos.Op{}
	var all []chaos.Op
	for p, puts := range acked {
		closed[p] = append(slices.Clone(puts), end)
		all = append(all, puts...)
	}
	slices.SortFunc(all, byEnd)
	_, _, overall := chaos.Percentiles(gaps(map[int][]chaos.Op{0: append(all, end)}, from, to, 0))
	each := gaps(closed, from, to, 0)
	_, p99, longest := chaos.Percentiles(each)
	worst, began := longestStall(closed, from, to)
	return stalls{overall: overall, partition: longest, p99: p99, gaps: len(each), worst: worst, worstFrom: began.Sub(from)}
}

// longestStall returns the partition of acked with the longest gap between acknowledged puts ending within
// [from, to], and when that gap began.
func longestStall(acked map[int][]chaos.Op, from, to time.Time) (partition int, began time.Time) {
	var longest time.Duration
	began = from
	eachGap(acked, from, to, func(p int, start time.Time, gap time.Duration) {
		if gap > longest {
			longest, partition, began = gap, p, start
		}
	})
	return partition, began
}

// putWait is the longest a writer waited: for each put, from its start to its own end or, if later, to
// the end of the first acknowledged put of the same partition that ended at or after its start (a put
// that failed fast still waited for its partition to take writes again). Unlike a gap between
// acknowledged puts, it counts only time a writer spent waiting, so a partition that no client wrote to
// for a while does not read as stalled.
type putWait struct {
	longest   time.Duration
	partition int           // the partition of the longest wait
	from      time.Duration // and when that put began, from the start of the faults
}

// longestPutWait measures the waits of the puts in attempts (every put, whatever its outcome, grouped by
// partition) that began within [from, to], against acked (sorted by end); a wait still going on at to
// counts up to to.
func longestPutWait(attempts, acked map[int][]chaos.Op, from, to time.Time) putWait {
	var w putWait
	for p, puts := range attempts {
		ends := acked[p]
		for _, op := range puts {
			if op.Start.Before(from) || op.Start.After(to) {
				continue
			}
			i, _ := slices.BinarySearchFunc(ends, op.Start, func(a chaos.Op, t time.Time) int { return a.End.Compare(t) })
			done := to
			if i < len(ends) && ends[i].End.Before(to) {
				done = ends[i].End
			}
			if own := op.End; own.After(done) {
				done = to // its own call took longer
				if own.Before(to) {
					done = own
				}
			}
			if wait := done.Sub(op.Start); wait > w.longest {
				w = putWait{longest: wait, partition: p, from: op.Start.Sub(from)}
			}
		}
	}
	return w
}

// String renders the wait for the report's notes.
func (w putWait) String() string {
	return fmt.Sprintf("longest a put waited, for its own reply or its partition's next acknowledged put: %v (partition %d, from %v into the run)",
		w.longest.Round(time.Millisecond), w.partition, w.from.Round(time.Millisecond))
}

// String renders the stalls for the report's notes.
func (s stalls) String() string {
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("write stalls from the first fault to the heal: longest %v with no put acknowledged in any partition; "+
		"per partition longest %v (partition %d, from %v into the run), p99 %v over %d gaps", ms(s.overall), ms(s.partition),
		s.worst, ms(s.worstFrom), ms(s.p99), s.gaps)
}
