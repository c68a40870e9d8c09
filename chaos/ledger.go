package chaos

import (
	"cmp"
	"context"
	"errors"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

const (
	readRetries = 5                     // extra reads of a key before it counts as unreadable
	readPause   = 20 * time.Millisecond // pause between reads of a key
	maxLostKeys = 20                    // lost keys named in a LedgerResult
)

// ErrOutsideFailureModel is what a Verify read returns, wrapped or not, for a key it cannot read because the
// faults destroyed every copy of it, beyond what the system under test promises to survive. Such a key is
// counted apart, neither read back nor lost; a key that reads as not found or with another value is lost
// all the same.
var ErrOutsideFailureModel = errors.New("chaos: every copy of the key died, beyond the failure model")

// ledgerState is how far a ledger write got, as the client saw it.
type ledgerState uint8

const (
	attempted ledgerState = iota
	acked
	unknown
	failed
)

// ledgerEntry is the value written to one ledger key and how the write ended.
type ledgerEntry struct {
	value string
	state ledgerState
	at    time.Time // when the write was attempted
	done  time.Time // when it settled
}

// Ledger tracks writes to unique keys so that, after the faults stop, every acknowledged write can be
// read back. The zero value is ready to use and its methods are safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	entries map[string]ledgerEntry
	evicted map[string]bool // keys the system reported evicting to keep within its memory bound
}

// LedgerResult counts what reading the ledger back found.
type LedgerResult struct {
	Acked      int // acknowledged keys read back
	Unknown    int // keys whose write had an unknown outcome read back
	Lost       int // acknowledged keys missing or holding another value
	NotFound   int // of the lost keys, those read back as not found (false NotFound)
	Phantom    int // unknown keys holding a value that was never written to them
	Unreadable int // keys whose every read failed
	Destroyed  int // keys unreadable because every copy of them died (ErrOutsideFailureModel)
	// Evicted counts the keys read back as not found that the system reported evicting: not lost. A key it
	// did not report is lost, however full its memory was.
	Evicted  int
	LostKeys []string // the first lost keys, at most 20
}

// Attempt records that value is about to be written to key; call it before the write is sent.
func (l *Ledger) Attempt(key, value string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.entries == nil {
		l.entries = make(map[string]ledgerEntry)
	}
	l.entries[key] = ledgerEntry{value: value, at: time.Now()}
}

// AttemptedAt returns when the write to key was attempted, and false for a key never attempted.
func (l *Ledger) AttemptedAt(key string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[key]
	return e.at, ok
}

// LedgerValue returns the value a ledger write puts at key: the key itself, then '/' and filler drawn
// from a generator seeded by the key, size bytes in all. A value read back can thus be checked, and told
// apart from another key's, from the key alone. A size no longer than the key gives the key.
func LedgerValue(key string, size int) string {
	if size <= len(key) {
		return key
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	rng := rand.New(rand.NewPCG(h.Sum64(), pcgStream))
	b := make([]byte, size)
	n := copy(b, key)
	b[n] = '/'
	for i := n + 1; i < size; i++ {
		b[i] = 'a' + byte(rng.IntN(26))
	}
	return string(b)
}

// Ack records that the write to key was acknowledged: it must survive.
func (l *Ledger) Ack(key string) { l.settle(key, acked) }

// Evicted records that the system reported evicting key to keep within its memory bound: read back as not
// found, it is not lost.
func (l *Ledger) Evicted(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.evicted == nil {
		l.evicted = make(map[string]bool)
	}
	l.evicted[key] = true
}

// Unknown records that the write to key may or may not have been applied.
func (l *Ledger) Unknown(key string) { l.settle(key, unknown) }

// Fail records that the write to key was definitely not applied; it is not read back.
func (l *Ledger) Fail(key string) { l.settle(key, failed) }

// settle sets the state of an attempted key; keys never attempted are ignored.
func (l *Ledger) settle(key string, s ledgerState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[key]; ok {
		e.state, e.done = s, time.Now()
		l.entries[key] = e
	}
}

// AsOf returns the ledger a copy of the data taken at cut must satisfy, such as a restored backup begun
// then: the writes acknowledged before cut are acknowledged, every other write not known to have failed
// has an unknown outcome (absent, or holding its value).
func (l *Ledger) AsOf(cut time.Time) *Ledger {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := &Ledger{entries: make(map[string]ledgerEntry, len(l.entries)), evicted: maps.Clone(l.evicted)}
	for k, e := range l.entries {
		switch {
		case e.state == failed:
			continue
		case e.state != acked || !e.done.Before(cut):
			e.state = unknown
		}
		out.entries[k] = e
	}
	return out
}

// claim is a ledger key that must be read back, with the value it may hold.
type claim struct {
	key     string
	value   string
	acked   bool
	evicted bool
}

// claims returns the acknowledged and unknown keys, sorted by key.
func (l *Ledger) claims() []claim {
	l.mu.Lock()
	defer l.mu.Unlock()
	var cs []claim
	for k, e := range l.entries {
		if e.state == acked || e.state == unknown {
			cs = append(cs, claim{key: k, value: e.value, acked: e.state == acked, evicted: l.evicted[k]})
		}
	}
	slices.SortFunc(cs, func(a, b claim) int { return cmp.Compare(a.key, b.key) })
	return cs
}

// readResult is the last answer of read for one key.
type readResult struct {
	value string
	found bool
	err   error
}

// Verify reads back, one at a time, every key that was acknowledged or has an unknown outcome. An
// acknowledged key must hold its value; an unknown key may be absent but, if present, must hold its value.
// A key is retried a few times before it counts as unreadable; ctx bounds the retries.
func (l *Ledger) Verify(ctx context.Context, read func(ctx context.Context, key string) (value string, found bool, err error)) LedgerResult {
	var res LedgerResult
	for _, c := range l.claims() {
		res.add(c, readBack(ctx, read, c.key))
	}
	return res
}

// readBack reads key, retrying failed reads until one succeeds, the retries run out or ctx ends.
func readBack(ctx context.Context, read func(context.Context, string) (string, bool, error), key string) readResult {
	var r readResult
	for attempt := 0; ; attempt++ {
		r.value, r.found, r.err = read(ctx, key)
		if r.err == nil || errors.Is(r.err, ErrOutsideFailureModel) || attempt == readRetries || !Sleep(ctx, readPause) {
			return r
		}
	}
}

// add counts what was read back for c.
func (r *LedgerResult) add(c claim, got readResult) {
	if c.acked {
		r.Acked++
	} else {
		r.Unknown++
	}
	switch {
	case errors.Is(got.err, ErrOutsideFailureModel):
		r.Destroyed++
	case got.err != nil:
		r.Unreadable++
	case !got.found && c.evicted:
		r.Evicted++
	case c.acked && (!got.found || got.value != c.value):
		r.Lost++
		if !got.found {
			r.NotFound++
		}
		if len(r.LostKeys) < maxLostKeys {
			r.LostKeys = append(r.LostKeys, c.key)
		}
	case !c.acked && got.found && got.value != c.value:
		r.Phantom++
	}
}

// Sleep waits for d, reporting false if ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
