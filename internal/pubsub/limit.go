package pubsub

import "time"

// Limit bounds what a subscriber may have waiting, as Redis's client-output-buffer-limit for pubsub: a
// subscriber more than Hard bytes behind is ended at once, and one more than Soft bytes behind for longer
// than SoftFor is ended too. A Soft of 0 or less sets no soft bound.
type Limit struct {
	Hard    int
	Soft    int
	SoftFor time.Duration
}

// Backlog is one subscriber's standing against its Limit: since when it has been over the soft bound.
type Backlog struct {
	Limit
	overSoftSince time.Time
}

// Exceeded reports whether a subscriber with pending bytes waiting at now is over its limit. As Redis does,
// the time over the soft bound counts from the first check over it, and restarts at a check under it.
func (b *Backlog) Exceeded(pending int, now time.Time) bool {
	if pending > b.Hard {
		return true
	}
	if b.Soft <= 0 || pending <= b.Soft {
		b.overSoftSince = time.Time{}
		return false
	}
	if b.overSoftSince.IsZero() {
		b.overSoftSince = now
		return false
	}
	return now.Sub(b.overSoftSince) > b.SoftFor
}
