package zaris

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// nearWrite is one acknowledged write of a staleness history: the writer's seq-th value of a key.
type nearWrite struct {
	key   string
	seq   int
	acked time.Time
}

// nearRead is one read of a staleness history: what node read of key, between start and end. seq is -1
// for a read that found nothing.
type nearRead struct {
	node       NodeID
	key        string
	seq        int
	start, end time.Time
}

// staleness checks a history of single-writer keys (each key written by one node, its values numbered in
// write order; writes holds every attempt, with its ack time when it was acknowledged) against what a near
// cache promises: no read returns a value never written; none returns a value that a later write had
// replaced, as acknowledged, more than bound before the read began; and none on the writing node returns
// a value older than that node's own last acknowledged write before the read.
func staleness(writes []nearWrite, reads []nearRead, writer map[string]NodeID, bound time.Duration) []string {
	acked := map[string][]time.Time{}      // key -> ack time of each seq, zero if not acknowledged
	attempted := map[string]map[int]bool{} // key -> seqs written
	for _, w := range writes {
		for len(acked[w.key]) <= w.seq {
			acked[w.key] = append(acked[w.key], time.Time{})
		}
		if !w.acked.IsZero() {
			acked[w.key][w.seq] = w.acked
		}
		if attempted[w.key] == nil {
			attempted[w.key] = map[int]bool{}
		}
		attempted[w.key][w.seq] = true
	}
	var bad []string
	for _, r := range reads {
		if r.seq >= 0 && !attempted[r.key][r.seq] {
			bad = append(bad, fmt.Sprintf("%s read %s = %d, never written", r.node, r.key, r.seq))
			continue
		}
		times := acked[r.key]
		for s := r.seq + 1; s < len(times); s++ {
			t := times[s]
			switch {
			case t.IsZero():
			case t.Before(r.start.Add(-bound)):
				bad = append(bad, fmt.Sprintf("%s read %s = %d at %v; %d was acknowledged %v before", r.node, r.key,
					r.seq, r.start.Format("15:04:05.000"), s, r.start.Sub(t).Round(time.Millisecond)))
			case writer[r.key] == r.node && t.Before(r.start):
				bad = append(bad, fmt.Sprintf("%s read %s = %d after its own write of %d was acknowledged", r.node, r.key, r.seq, s))
			default:
				continue
			}
			break
		}
	}
	return bad
}

// TestStalenessCheckerBites shows the checker flags each kind of bad read, and passes good ones.
func TestStalenessCheckerBites(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	writes := []nearWrite{{"k", 0, at(0)}, {"k", 1, at(100)}, {"k", 2, at(200)}}
	writer := map[string]NodeID{"k": "w"}
	bound := 50 * time.Millisecond
	for _, tc := range []struct {
		name string
		read nearRead
		bad  bool
	}{
		{"current", nearRead{"r", "k", 2, at(300), at(301)}, false},
		{"stale within the bound", nearRead{"r", "k", 1, at(240), at(241)}, false},
		{"stale beyond the bound", nearRead{"r", "k", 1, at(260), at(261)}, true},
		{"never written", nearRead{"r", "k", 3, at(300), at(301)}, true},
		{"older than the reader's own write", nearRead{"w", "k", 1, at(210), at(211)}, true},
		{"concurrent with the reader's own write", nearRead{"w", "k", 1, at(190), at(201)}, false},
	} {
		if got := staleness(writes, []nearRead{tc.read}, writer, bound); (len(got) > 0) != tc.bad {
			t.Errorf("%s: %v, want bad %v", tc.name, got, tc.bad)
		}
	}
}

// nearHistory is a staleness run's history, filled concurrently.
type nearHistory struct {
	mu     sync.Mutex
	writes []nearWrite
	reads  []nearRead
	acked  int // the writes acknowledged
}

// phaseWrites and phaseReads are the acknowledged writes and the reads a phase of a staleness run waits
// for, so that every phase is exercised however busy the machine.
const (
	phaseWrites = 50
	phaseReads  = 1000
)

// phaseTimeout bounds each phase of a staleness run and the failover and the moves between them: a
// minute was seen to pass under the race detector on a loaded machine while elections came and went.
const phaseTimeout = 3 * time.Minute

// awaitProgress waits until writes more writes have been acknowledged and reads more reads made.
func (h *nearHistory) awaitProgress(t *testing.T, phase string, writes, reads int) {
	t.Helper()
	progress := func() (writes, reads int) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.acked, len(h.reads)
	}
	w0, r0 := progress()
	for deadline := time.Now().Add(phaseTimeout); ; time.Sleep(10 * time.Millisecond) {
		w, r := progress()
		if w-w0 >= writes && r-r0 >= reads {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d writes acknowledged and %d reads made in %v, want %d and %d", phase, w-w0, r-r0, phaseTimeout, writes, reads)
		}
	}
}

// runStaleness runs single-writer keys written by nodes 0 and 1 and read through every node's near cache,
// while lose drops reports of changed keys, one of the other nodes is killed (a failover) and a node joins
// (moves), and returns the checker's findings.
func runStaleness(t *testing.T, staleFor time.Duration, lose func() bool) (bad []string, reads int) {
	c := startCluster(t, 4, replicated(2, func(cfg *Config) {
		cfg.FailoverTimeout = time.Second
		cfg.NearCache = NearCacheConfig{MaxBytes: 1 << 20, MaxStaleness: staleFor}
		cfg.hooks.nearReport = func(reply *nearWatchReply) {
			for i := range reply.Segments {
				if lose() {
					reply.Segments[i].Keys = nil
				}
			}
		}
	}))
	ctx := bg(t)
	const keys = 16
	writer := map[string]NodeID{}
	var h nearHistory
	for i := range keys {
		key := "stale-" + strconv.Itoa(i)
		writer[key] = c.node(i % 2).id
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range 2 {
		n := c.node(w)
		wg.Go(func() {
			seq := map[string]int{}
			for runCtx.Err() == nil {
				for key, id := range writer {
					if id != n.id {
						continue
					}
					s := seq[key]
					h.mu.Lock()
					h.writes = append(h.writes, nearWrite{key: key, seq: s}) // attempted: its ack time follows
					h.mu.Unlock()
					if err := n.Put(runCtx, key, []byte(strconv.Itoa(s))); err != nil {
						seq[key]++ // its outcome is unknown: the next write gets the next number
						continue
					}
					h.mu.Lock()
					h.writes = append(h.writes, nearWrite{key: key, seq: s, acked: time.Now()})
					h.acked++
					h.mu.Unlock()
					seq[key]++
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	for r := range 3 {
		n := c.node(r)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for runCtx.Err() == nil {
				key := "stale-" + strconv.Itoa(rng.IntN(keys))
				start := time.Now()
				v, err := n.Get(runCtx, key)
				end := time.Now()
				seq := -1
				switch {
				case errors.Is(err, ErrNotFound):
				case err != nil:
					continue // unavailable during the failover, or the run ended
				default:
					s, perr := strconv.Atoi(string(v))
					if perr != nil {
						failed.Store(fmt.Sprintf("%s read %s = %q", n.id, key, v))
						continue
					}
					seq = s
				}
				h.mu.Lock()
				h.reads = append(h.reads, nearRead{node: n.id, key: key, seq: seq, start: start, end: end})
				h.mu.Unlock()
			}
		})
	}
	// Each phase runs until the readers and writers have made progress in it, however busy the machine.
	// The last phase waits for reads only, the near caches' work: under the race detector on a loaded
	// machine the writers were once seen making no progress for minutes while the moves were redone.
	h.awaitProgress(t, "before the kill", phaseWrites, phaseReads)
	dead := c.node(3).id
	c.kill(3)
	c.waitFailedOver(dead, phaseTimeout)
	h.awaitProgress(t, "after the failover", phaseWrites, phaseReads)
	joined := c.add(4)
	waitFor(t, phaseTimeout, "the new node to own partitions", func() bool { return c.currentMap().OwnedBy(joined.id) > 0 })
	h.awaitProgress(t, "after the moves to the new node", 0, phaseReads)
	stop()
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
	bound := staleFor + 100*time.Millisecond // the bound, plus the time a read takes to start its check
	return staleness(h.writes, h.reads, writer, bound), len(h.reads)
}

// TestNearCacheStalenessCertification reads single-writer keys through the near caches of every node while
// a third of the owners' reports of changed keys are lost, an owner is killed and a node joins: no read
// returns a value never written, nor one replaced more than MaxStaleness before it began, nor, on the
// writing node, one older than its own acknowledged write. With every report lost and no MaxStaleness, the
// same run is caught serving stale values: the checker bites.
func TestNearCacheStalenessCertification(t *testing.T) {
	longScenario(t)
	t.Parallel()
	t.Run("reports lost, MaxStaleness 300ms", func(t *testing.T) {
		var calls atomic.Uint64
		bad, reads := runStaleness(t, 300*time.Millisecond, func() bool { return calls.Add(1)%3 == 0 })
		if len(bad) > 0 {
			t.Fatalf("%d of %d reads broke the bound, first: %v", len(bad), reads, bad[:min(len(bad), 5)])
		}
		t.Logf("%d reads, none stale beyond the bound", reads)
	})
	t.Run("every report lost, no MaxStaleness", func(t *testing.T) {
		bad, reads := runStaleness(t, 0, func() bool { return true })
		if len(bad) == 0 {
			t.Fatalf("%d reads and no stale one found: the checker does not bite", reads)
		}
		t.Logf("%d of %d reads stale, as expected without reports", len(bad), reads)
	})
}
