// Package gcheadroom bounds how far the Go heap grows past its live data between two collections.
//
// Go's collector lets the heap grow by GOGC percent of the live heap (100 by default) before it collects
// again, so a process whose heap is mostly stored data holds about twice that data in memory. A node that
// keeps gigabytes of entries needs far less room than that for what it allocates between collections:
// Keep lowers GOGC as the live heap grows, so that the room stays near a fixed share of it.
package gcheadroom

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// defaultGOGC is the most room Keep allows: what Go gives without it.
const defaultGOGC = 100

// GOGC is the GOGC that lets a heap of live bytes grow by percent of it, or by floor bytes when that is
// more, but never by more than GOGC 100 would: a small heap collects as often as Go makes it. A percent
// outside 1..99 leaves GOGC at 100.
func GOGC(live uint64, percent int, floor uint64) int {
	if live == 0 || percent < 1 || percent >= defaultGOGC {
		return defaultGOGC
	}
	room := max(live*uint64(percent)/100, floor)
	gogc := (room*100 + live - 1) / live // rounded up: never less room than asked
	return int(min(max(gogc, uint64(percent)), defaultGOGC))
}

// Tuner sets GOGC after every collection from the live heap that collection found.
type Tuner struct {
	percent int
	floor   uint64

	mu      sync.Mutex
	stopped bool
	gogc    int // what the tuner last set
	before  int // GOGC when the tuner started, restored by Stop
	sample  []metrics.Sample
}

// sentinel is an object nothing refers to: its cleanup runs after the collection that frees it.
type sentinel struct {
	_ *byte // a pointer keeps it out of the allocator's batches of tiny objects
	_ [8]byte
}

// Keep starts a Tuner that keeps the heap's room to grow near percent of the live heap and at least floor
// bytes, until Stop.
func Keep(percent int, floor uint64) *Tuner {
	t := &Tuner{percent: percent, floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.before = debug.SetGCPercent(defaultGOGC)
	t.gogc = defaultGOGC
	t.arm()
	return t
}

// arm has the tuner called again after the next collection.
func (t *Tuner) arm() {
	runtime.AddCleanup(new(sentinel), (*Tuner).collected, t)
}

// collected runs after each collection: it sets GOGC for the live heap just measured.
func (t *Tuner) collected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.sample)
	if gogc := GOGC(t.sample[0].Value.Uint64(), t.percent, t.floor); gogc != t.gogc {
		debug.SetGCPercent(gogc)
		t.gogc = gogc
	}
	t.arm()
}

// Current is the GOGC the tuner last set.
func (t *Tuner) Current() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gogc
}

// Stop ends the tuning and gives back the GOGC in effect before Keep.
func (t *Tuner) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(t.before)
	}
}
