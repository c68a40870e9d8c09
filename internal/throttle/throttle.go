// Package throttle slows password guessing: login attempts are booked per source address, by a generic
// cell rate algorithm, and an address that would have to wait too long is turned away.
package throttle

import (
	"sync"
	"time"
)

// Logins books login attempts per source address. Each address may try burst times at once, then once per
// interval. An attempt is booked before its password is checked, so parallel connections from one address
// queue behind one another, and given back when it succeeds.
type Logins struct {
	burst    int
	interval time.Duration // zero: no throttling
	maxWait  time.Duration
	tracked  int // beyond, the addresses not seen lately share one record

	mu  sync.Mutex
	due map[string]time.Time // when the address's booked attempts are all paid off
}

// New returns a throttle of burst attempts, then one per interval (zero: none), turning away an address
// that would wait more than maxWait, and tracking at most tracked addresses apart.
func New(burst int, interval, maxWait time.Duration, tracked int) *Logins {
	return &Logins{burst: burst, interval: interval, maxWait: maxWait, tracked: tracked, due: map[string]time.Time{}}
}

// Book books an attempt from addr at now. It returns how long the client must wait before its password is
// checked, or false when it should be turned away unchecked.
func (t *Logins) Book(addr string, now time.Time) (time.Duration, bool) {
	if t.interval <= 0 {
		return 0, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	addr = t.track(addr, now)
	due := t.due[addr]
	if due.Before(now) {
		due = now
	}
	wait := due.Sub(now) - time.Duration(t.burst-1)*t.interval
	if wait > t.maxWait {
		return 0, false
	}
	t.due[addr] = due.Add(t.interval)
	return max(wait, 0), true
}

// Refund gives back the attempt a successful login booked.
func (t *Logins) Refund(addr string) {
	if t.interval <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if due, ok := t.due[addr]; ok {
		t.due[addr] = due.Add(-t.interval)
	}
}

// track returns the key addr is booked under: itself, or, when too many addresses owe attempts, a shared one.
func (t *Logins) track(addr string, now time.Time) string {
	if _, ok := t.due[addr]; ok || len(t.due) < t.tracked {
		return addr
	}
	for a, due := range t.due {
		if due.Before(now) {
			delete(t.due, a)
		}
	}
	if len(t.due) < t.tracked {
		return addr
	}
	return ""
}
