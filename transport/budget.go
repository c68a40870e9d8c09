package transport

import (
	"context"
	"sync"
)

// byteBudget hands out claims on a fixed number of bytes, first come first served: a claim that does not
// fit waits, and so does every claim after it, so that a large claim is never starved by small ones.
type byteBudget struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	waiters []*budgetWaiter // in arrival order
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the claim is granted
}

func newByteBudget(limit int64) *byteBudget { return &byteBudget{limit: limit} }

// acquire claims n bytes, waiting until they fit or ctx ends. n must not exceed the limit.
func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.limit {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: hand it back
		b.used -= n
	default:
		b.remove(w)
	}
	b.grant()
	return ctx.Err()
}

// release returns n claimed bytes and grants the waiting claims that now fit, in order.
func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.grant()
}

// state returns the bytes currently claimed and the number of claims waiting.
func (b *byteBudget) state() (used int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, len(b.waiters)
}

// grant admits waiters from the front while they fit. Callers hold b.mu.
func (b *byteBudget) grant() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.limit {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

// remove drops a waiter that gave up. Callers hold b.mu.
func (b *byteBudget) remove(w *budgetWaiter) {
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			return
		}
	}
}
