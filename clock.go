package zaris

import (
	"context"
	"time"

	"github.com/zaris-go/zaris/internal/clock"
)

// Clock is the time source of a node: TTLs and every timer the node runs itself read it, the control
// loop's ticks, the leader's countdowns (FailoverTimeout, HealCooldown, EvictionTimeout and the like),
// replication's ack timeouts and retry backoffs, cut-over and drain waits, routing retries, the routing
// poll, TTL reaping and disk trims. Tests substitute a manual clock to run a node to an exact moment.
//
// Some time stays on the wall clock whatever Clock says: the control plane's and gossip's own timers
// (raft elections, heartbeats and commits, memberlist probes and suspicion); the lease an owner serves
// under and a leaving node's wait for removal, both measured from raft's last contact, which raft stamps
// with the wall clock; the bounds on a single request made or served (network deadlines, RPC and probe
// timeouts, a catch-up read's wait for the disk); and latencies measured for statistics.
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

// timeoutContext is context.WithTimeout(parent, d) on clock c. On another clock than the system's, the context has
// no deadline and ends, when d has passed on c, with context.Canceled and the cause
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
