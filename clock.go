package zaris

import (
	"context"
	"time"

	"github.com/zaris-go/zaris/internal/clock"
)

// Clock is the time source of a node: TTLs and every timer the node runs itself (the control loop, the
// leader's countdowns such as FailoverTimeout, replication's ack timeouts and backoffs, cut-over and drain
// waits, routing retries and polls, TTL reaping and disk trims). Tests substitute a manual clock to run a
// node to an exact moment.
//
// Raft's and memberlist's own timers stay on the wall clock, as do the owner's lease and a leaving node's
// wait for removal (both measured from raft's wall-clock last contact), the deadlines of single requests,
// and latencies measured for statistics.
type Clock = clock.Clock

// Timer is a single event on a Clock, as time.Timer.
type Timer = clock.Timer

// Ticker is a periodic event on a Clock, as time.Ticker.
type Ticker = clock.Ticker

// systemClock is the wall clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

func (systemClock) NewTicker(d time.Duration) Ticker { return systemTicker{time.NewTicker(d)} }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer {
	return systemTimer{time.AfterFunc(d, f)}
}

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time        { return t.t.C }
func (t systemTimer) Stop() bool                 { return t.t.Stop() }
func (t systemTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type systemTicker struct{ t *time.Ticker }

func (t systemTicker) C() <-chan time.Time { return t.t.C }
func (t systemTicker) Stop()               { t.t.Stop() }

// timeoutContext is context.WithTimeout(parent, d) on clock c. On a clock other than the system's the
// context has no deadline: it ends once d has passed on c, with context.Canceled and the cause
// context.DeadlineExceeded.
func timeoutContext(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := c.(systemClock); ok {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancelCause(parent)
	timer := c.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		timer.Stop()
		cancel(context.Canceled)
	}
}

// signal leaves a wake-up in ch, a channel of capacity one, unless one is already waiting there.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// sleepCtx sleeps for d on clock c, or until ctx ends.
func sleepCtx(ctx context.Context, c Clock, d time.Duration) error {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
