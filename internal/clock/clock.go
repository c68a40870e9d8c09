// Package clock declares the time source a node schedules by. The package zaris exports these types under
// its own names; they live here so that the manual twin in clocktest implements them without importing
// zaris.
package clock

import "time"

// Clock tells the time and arms timers and tickers on it.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d has passed.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that sends the time on its channel every d, dropping ticks a slow
	// receiver misses. d must be positive.
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f once d has passed. The returned timer has no channel.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a single event, as time.Timer.
type Timer interface {
	// C returns the channel the timer fires on; nil for a timer made by AfterFunc.
	C() <-chan time.Time
	// Stop keeps the timer from firing and reports whether it was still armed.
	Stop() bool
	// Reset arms the timer again to fire after d and reports whether it was still armed.
	Reset(d time.Duration) bool
}

// Ticker is a periodic event, as time.Ticker.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// DeadlineSlack is how far a connection's deadline for timeout may lag behind the ideal one before it is
// moved: setting a deadline costs a timer update, and closing a sixteenth of timeout early does no harm.
func DeadlineSlack(timeout time.Duration) time.Duration { return min(timeout/16, time.Second) }
