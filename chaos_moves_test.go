package zaris

import (
	"context"
	"slices"
	"time"
)

// Partitions moving under the chaos nemesis. A node leaves gracefully, draining what it holds to the others,
// or one that left joins again and takes its share back; either way the leader plans a new partition map
// and partitions move a few at a time: their incoming nodes are fed, then an owner that hands over seals
// the partition, lets the new owner take the last ops and asks the leader to settle the move (cutover.go).
// The nemesis kills the owner handing a partition over, the node taking it, or the leader, at a seeded
// phase of a move it observes in the map: while the incoming nodes are fed, as the owner seals the
// partition, or just after the move settled.

// leaveRun is a graceful Leave under way.
type leaveRun struct {
	i      int
	n      *Node
	cancel context.CancelFunc
	done   chan struct{}
}

// rebalance makes partitions move: a node that left joins again or, when none has, a random live node
// starts a graceful Leave. One node leaves at a time.
func (cr *certRun) rebalance() {
	cr.mu.Lock()
	leaving, left := cr.leaving, slices.Clone(cr.left)
	cr.mu.Unlock()
	switch {
	case leaving != nil:
		cr.step("no rebalance: %s is still leaving", leaving.n.id)
	case len(left) > 0:
		cr.rejoin(left[0])
	default:
		live := cr.liveIndexes()
		cr.startLeave(live[cr.rng.IntN(len(live))])
	}
}

// startLeave starts node i's graceful Leave in the background. It drains for as long as it takes: a Leave
// whose context ends first hands what the node still owns over at once, a crash the nemesis did not
// choose. A kill of the node ends it (killOwnerAt).
func (cr *certRun) startLeave(i int) { cr.startLeaveWithin(i, 0) }

// startLeaveWithin is startLeave bounded by timeout, as a process's --leave-timeout bounds its leave; 0 for
// none.
func (cr *certRun) startLeaveWithin(i int, timeout time.Duration) {
	n := cr.c.node(i)
	ctx, cancel := context.WithCancel(context.Background())
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), timeout)
	}
	lr := &leaveRun{i: i, n: n, cancel: cancel, done: make(chan struct{})}
	cr.mu.Lock()
	cr.leaving = lr
	cr.mu.Unlock()
	cr.step("leave %s: its partitions move to the others", n.id)
	go func() {
		defer close(lr.done)
		err := n.Leave(ctx)
		cr.leaveEnded(lr, err)
	}()
}

// leaveEnded records the end of a Leave: the node has left, unless the nemesis killed it meanwhile; then it
// is down, and restarts as a member like any other.
func (cr *certRun) leaveEnded(lr *leaveRun, err error) {
	lr.cancel()
	gone := cr.c.forget(lr.i, lr.n)
	cr.mu.Lock()
	cr.leaving = nil
	if gone {
		cr.left = append(cr.left, lr.i)
	}
	cr.mu.Unlock()
	switch {
	case !gone:
		cr.step("leave of %s ended by its kill", lr.n.id)
	case err != nil:
		cr.step("%s left: %v", lr.n.id, err)
	default:
		cr.step("%s left", lr.n.id)
	}
}

// awaitLeave waits up to bound for the Leave under way, if any, to end, and fails the run if it does not:
// once the network has healed, a drain must finish.
func (cr *certRun) awaitLeave(bound time.Duration) {
	cr.mu.Lock()
	lr := cr.leaving
	cr.mu.Unlock()
	if lr == nil {
		return
	}
	select {
	case <-lr.done:
	case <-time.After(bound):
		cr.unrecovered("%s did not finish leaving %v after the final heal; moves under way: %v", lr.n.id, bound, lr.n.Migrations())
	}
}

// rejoin starts node i, which left, again: rebalancing gives it its share of the partitions back.
func (cr *certRun) rejoin(i int) {
	cr.mu.Lock()
	cr.left = slices.DeleteFunc(cr.left, func(j int) bool { return j == i })
	cr.mu.Unlock()
	n := cr.startAgain(i)
	cr.step("rejoin %s (its links healed): partitions move to it", n.id)
}

// movePhase is the moment of a move at which the nemesis kills.
type movePhase int

const (
	feeding movePhase = iota // the incoming nodes are being fed while the owner serves
	sealing                  // every target node is in sync: the owner seals the partition and hands it over
	settled                  // the move has just settled: the new owner serves, the old one drops its copy
)

func (ph movePhase) String() string { return [...]string{"feeding", "sealing", "settled"}[ph] }

// move is a partition that moves, as the nemesis observed it: from is its owner before the move, to the
// node taking it (its new owner, or an incoming replica while it is fed).
type move struct {
	p        int
	from, to NodeID
}

// killDuringMove waits, up to 3 s, for a move to reach a seeded phase and kills a seeded one of: the owner
// handing the partition over, the node taking it, the leader, unless that node holds the only in-sync copy
// of some partition. At the sealing phase it first waits (up to 100 ms) until the owner has sealed the
// partition, so that the kill lands during the hand-over. With a node down it restarts that one instead;
// with no move under way it starts a rebalance first.
func (cr *certRun) killDuringMove(ctx context.Context) {
	if cr.restartDown() {
		return
	}
	if !cr.c.currentMap().moving() {
		cr.rebalance()
	}
	phase, role := movePhase(cr.rng.IntN(3)), cr.rng.IntN(3)
	mv, ok := cr.awaitMove(ctx, phase, 3*time.Second)
	if !ok {
		cr.step("no kill: no move reached the %s phase within 3 s", phase)
		return
	}
	if phase == sealing {
		cr.awaitSeal(mv, 100*time.Millisecond)
	}
	victim, what := cr.moveVictim(mv, role)
	i := cr.c.indexOf(victim)
	switch {
	case i < 0:
		cr.step("no kill: the %s of moving partition %d is not up", what, mv.p)
	case !cr.killable(victim):
		cr.step("no kill: %s, the %s of moving partition %d, holds the only in-sync copy of some partition", victim, what, mv.p)
	default:
		cr.step("partition %d moving %s -> %s, %s (sealed now: %v): kill the %s", mv.p, mv.from, mv.to, phase, cr.sealedNow(mv), what)
		cr.killOwnerAt(i)
	}
}

// moveVictim names the node role picks for a kill during move mv, and what it is to the move.
func (cr *certRun) moveVictim(mv move, role int) (NodeID, string) {
	switch role {
	case 0:
		return mv.from, "owner handing it over"
	case 1:
		return mv.to, "node taking it"
	}
	if l := cr.c.leader(); l >= 0 {
		if n := cr.c.node(l); n != nil {
			return n.id, "leader"
		}
	}
	return "", "leader"
}

// awaitMove watches the maps the live nodes apply, up to bound, for a move at phase, and returns the first.
func (cr *certRun) awaitMove(ctx context.Context, phase movePhase, bound time.Duration) (move, bool) {
	var found move
	ok := cr.awaitMap(ctx, bound, func(prev, m *ClusterMap) bool {
		var hit bool
		found, hit = findMove(phase, prev, m)
		return hit
	})
	return found, ok
}

// findMove returns a partition whose move is at phase in map m, prev being the map seen before it.
func findMove(phase movePhase, prev, m *ClusterMap) (move, bool) {
	for p, st := range m.Runtime {
		switch {
		case st.Owner == "":
		case phase == feeding && st.From != nil && !st.targetInSync():
			return move{p: p, from: st.Owner, to: incoming(st)}, true
		case phase == sealing && st.targetInSync() && st.Target[0] != st.Owner:
			return move{p: p, from: st.Owner, to: st.Target[0]}, true
		case phase == settled && handedOver(prev.Runtime[p], st):
			return move{p: p, from: prev.Runtime[p].Owner, to: st.Owner}, true
		}
	}
	return move{}, false
}

// incoming returns a target node of a copying partition that is not in sync yet.
func incoming(st PartitionState) NodeID {
	for _, id := range st.Target {
		if id != st.Owner && !slices.Contains(st.InSync, id) {
			return id
		}
	}
	return ""
}

// awaitMap calls match with the newest map, then with each newer one the live nodes apply, until match
// reports true, ctx ends or bound passes. It follows the node whose map is the newest and wakes as that
// node applies a change, so it sees a map within moments of its commit (it may skip some).
func (cr *certRun) awaitMap(ctx context.Context, bound time.Duration, match func(prev, m *ClusterMap) bool) bool {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	prev := cr.c.currentMap()
	if match(prev, prev) {
		return true
	}
	for {
		n := cr.newestNode()
		if n == nil {
			return false
		}
		changed := n.ctl.fsm.next()
		if m := n.ClusterMap(); m.Index > prev.Index {
			if match(prev, m) {
				return true
			}
			prev = m
			continue
		}
		select {
		case <-changed:
		case <-time.After(20 * time.Millisecond): // the node may have stopped: look for the newest again
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		}
	}
}

// newestNode returns the live node whose map is the newest, nil when none is up.
func (cr *certRun) newestNode() *Node {
	var best *Node
	for _, n := range cr.c.live() {
		if best == nil || n.ClusterMap().Index > best.ClusterMap().Index {
			best = n
		}
	}
	return best
}

// awaitSeal waits up to bound for the owner handing partition mv.p over to seal it.
func (cr *certRun) awaitSeal(mv move, bound time.Duration) {
	for deadline := time.Now().Add(bound); time.Now().Before(deadline) && !cr.sealedNow(mv); {
		time.Sleep(100 * time.Microsecond)
	}
}

// sealedNow reports whether the owner handing partition mv.p over has it sealed at this moment.
func (cr *certRun) sealedNow(mv move) bool {
	n := cr.c.nodeByID(mv.from)
	return n != nil && n.own.cut.isSealed(mv.p)
}

// rollingLeaveNemesis is a rolling deploy of memory-only processes: every node in turn leaves gracefully and
// starts again under its name as soon as it has left, the next one once every node is ready, round after
// round until ctx ends.
func rollingLeaveNemesis(ctx context.Context, cr *certRun) {
	for ctx.Err() == nil {
		for i := range cr.c.cfgs {
			if ctx.Err() != nil || cr.c.node(i) == nil {
				return
			}
			cr.startLeave(i)
			cr.mu.Lock()
			lr := cr.leaving
			cr.mu.Unlock()
			<-lr.done
			cr.rejoin(i)
			cr.awaitReady(ctx, 30*time.Second)
		}
	}
}

// rollingLeaveOnDiskNemesis is a rolling deploy of processes with data dirs, paced as an impatient
// orchestrator paces one: every node in turn leaves within 2 s (a leave cut short keeps its copies on
// disk) and restarts from its data dir at once, and the next leaves a second after.
func rollingLeaveOnDiskNemesis(ctx context.Context, cr *certRun) {
	for ctx.Err() == nil {
		for i := range cr.c.cfgs {
			if ctx.Err() != nil || cr.c.node(i) == nil {
				return
			}
			cr.startLeaveWithin(i, 2*time.Second)
			cr.mu.Lock()
			lr := cr.leaving
			cr.mu.Unlock()
			<-lr.done
			cr.rejoin(i)
			select { // the pace of the rollout, not a wait for any state
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// awaitReady waits, up to bound or until ctx ends, for every live node to be ready (Node.Readiness), as an
// orchestrator paces a rollout by, and notes how long that took.
func (cr *certRun) awaitReady(ctx context.Context, bound time.Duration) {
	start := time.Now()
	for time.Since(start) < bound && ctx.Err() == nil {
		ready := true
		for _, n := range cr.c.live() {
			if n.Readiness() != nil {
				ready = false
				break
			}
		}
		if ready {
			cr.step("every node ready %v after the restart", time.Since(start).Round(time.Millisecond))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	cr.step("not every node ready %v after the restart", time.Since(start).Round(time.Millisecond))
}
