// Package clocktest provides a manual clock: time stands still until a test advances it, and every timer
// and ticker due then fires, in deadline order. A test can thus run a node to an exact moment of its
// timeouts without sleeping.
package clocktest

import (
	"context"
	"sync"
	"time"

	"github.com/zaris-go/zaris/internal/clock"
)

// Manual is a clock.Clock that moves only when told. The zero value is not usable; use New.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	armed   []*waiter
	seq     uint64        // arming order, which breaks ties between equal deadlines
	changed chan struct{} // closed and replaced whenever a timer or ticker is armed
}

var _ clock.Clock = (*Manual)(nil)

// New returns a manual clock that reads start.
func New(start time.Time) *Manual {
	return &Manual{now: start, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires once the clock has advanced by d; at once when d is not positive.
func (c *Manual) NewTimer(d time.Duration) clock.Timer {
	w := &waiter{c: c, ch: make(chan time.Time, 1)}
	w.Reset(d)
	return w
}

// NewTicker returns a ticker that fires each time the clock passes another multiple of d from now.
func (c *Manual) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("clocktest: non-positive interval for NewTicker")
	}
	w := &waiter{c: c, ch: make(chan time.Time, 1), period: d}
	w.Reset(d)
	return ticker{w}
}

// AfterFunc returns a timer that calls f once the clock has advanced by d. Advance calls f on the advancing
// goroutine, so f has returned when Advance does. A d that is not positive calls f at once in a goroutine
// of its own, as time.AfterFunc does.
func (c *Manual) AfterFunc(d time.Duration, f func()) clock.Timer {
	w := &waiter{c: c, fn: f}
	w.Reset(d)
	return w
}

// Advance moves the clock forward by d. Each timer and ticker due by then fires, earliest deadline first,
// with the clock reading its deadline. A ticker due several times fires each time, dropping ticks its
// receiver has not taken, as time.Ticker does.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		w := c.nextDue(end)
		if w == nil {
			break
		}
		c.now = w.deadline
		if fn := c.fire(w); fn != nil {
			c.mu.Unlock()
			fn()
			c.mu.Lock()
		}
	}
	if end.After(c.now) {
		c.now = end
	}
	c.mu.Unlock()
}

// BlockUntil waits until at least n timers and tickers are armed, or ctx ends. A test calls it to know
// that the code under test is waiting on the clock before it advances it.
func (c *Manual) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		armed, changed := len(c.armed), c.changed
		c.mu.Unlock()
		if armed >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Armed returns how many timers and tickers are armed.
func (c *Manual) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.armed)
}

// nextDue returns the armed waiter with the earliest deadline not after end, nil when none. Called with
// c.mu held.
func (c *Manual) nextDue(end time.Time) *waiter {
	var next *waiter
	for _, w := range c.armed {
		if w.deadline.After(end) {
			continue
		}
		if next == nil || w.deadline.Before(next.deadline) || w.deadline.Equal(next.deadline) && w.seq < next.seq {
			next = w
		}
	}
	return next
}

// fire delivers w's event at c.now, dropping it if the previous one is still untaken. For an AfterFunc
// timer it returns the function, for the caller to call without the lock. A ticker stays armed for its
// next period. Called with c.mu held.
func (c *Manual) fire(w *waiter) func() {
	if w.period > 0 {
		w.deadline = w.deadline.Add(w.period)
	} else {
		c.disarm(w)
	}
	if w.fn != nil {
		return w.fn
	}
	select {
	case w.ch <- c.now:
	default:
	}
	return nil
}

// arm schedules w at deadline. Called with c.mu held.
func (c *Manual) arm(w *waiter, deadline time.Time) {
	if !w.isArmed {
		c.armed = append(c.armed, w)
		w.isArmed = true
	}
	w.deadline = deadline
	c.seq++
	w.seq = c.seq
	close(c.changed)
	c.changed = make(chan struct{})
}

// disarm unschedules w and reports whether it was armed. Called with c.mu held.
func (c *Manual) disarm(w *waiter) bool {
	if !w.isArmed {
		return false
	}
	for i, x := range c.armed {
		if x == w {
			c.armed[i] = c.armed[len(c.armed)-1]
			c.armed = c.armed[:len(c.armed)-1]
			break
		}
	}
	w.isArmed = false
	return true
}

// waiter is one timer or ticker of a Manual clock.
type waiter struct {
	c        *Manual
	ch       chan time.Time // nil for AfterFunc
	fn       func()         // AfterFunc's function
	period   time.Duration  // tickers only
	deadline time.Time
	seq      uint64
	isArmed  bool
}

func (w *waiter) C() <-chan time.Time { return w.ch }

// Stop disarms the timer and reports whether it was armed. As with time.Timer since Go 1.23, no event
// from before the call is received after it.
func (w *waiter) Stop() bool {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.drain()
	return w.c.disarm(w)
}

// Reset arms the timer again to fire once the clock has advanced by d, at once when d is not positive,
// and reports whether it was armed. No event from before the call is received after it.
func (w *waiter) Reset(d time.Duration) bool {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.drain()
	wasArmed := w.isArmed
	w.c.arm(w, w.c.now.Add(d))
	if d <= 0 {
		if fn := w.c.fire(w); fn != nil {
			go fn()
		}
	}
	return wasArmed
}

// drain drops an event sent but not taken. Called with w.c.mu held.
func (w *waiter) drain() {
	select {
	case <-w.ch:
	default:
	}
}

// ticker is a waiter with a period.
type ticker struct{ *waiter }

// Stop disarms the ticker: no tick from before the call is received after it.
func (t ticker) Stop() { t.waiter.Stop() }
