package transport

import (
	"context"
	"sync"
	"sync/atomic"
)

// semaphore hands out units of a fixed limit (requests, bytes), first come first served: a claim that does
// not fit waits, and so does every claim after it, so that a large claim is never starved by small ones.
// Claims that fit while nobody waits cost two atomic operations.
type semaphore struct {
	limit   int64
	used    atomic.Int64 // raised only by a compare-and-swap that keeps it within limit
	waiting atomic.Int64 // len(waiters), readable without mu

	mu      sync.Mutex
	waiters []*semWaiter // in arrival order
}

type semWaiter struct {
	n     int64
	ready chan struct{} // closed once the claim is granted
}

func newSemaphore(limit int64) *semaphore { return &semaphore{limit: limit} }

// acquire claims n units, waiting until they fit or ctx ends. n must not exceed the limit.
func (s *semaphore) acquire(ctx context.Context, n int64) error {
	if s.waiting.Load() == 0 && s.take(n) {
		return nil
	}
	w := &semWaiter{n: n, ready: make(chan struct{})}
	s.mu.Lock()
	s.waiters = append(s.waiters, w)
	s.waiting.Add(1)
	s.grant() // units released since the attempt above did not see this waiter
	s.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: hand it back
		s.used.Add(-n)
	default:
		s.remove(w)
	}
	s.grant()
	return ctx.Err()
}

// release returns n units and grants the waiting claims that now fit, in order.
func (s *semaphore) release(n int64) {
	s.used.Add(-n)
	if s.waiting.Load() > 0 {
		s.mu.Lock()
		s.grant()
		s.mu.Unlock()
	}
}

// state returns the units claimed and the number of claims waiting.
func (s *semaphore) state() (used int64, waiting int) {
	return s.used.Load(), int(s.waiting.Load())
}

// take claims n units if they fit now.
func (s *semaphore) take(n int64) bool {
	for {
		used := s.used.Load()
		if used+n > s.limit {
			return false
		}
		if s.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// grant admits waiters from the front while they fit. Callers hold s.mu.
func (s *semaphore) grant() {
	for len(s.waiters) > 0 && s.take(s.waiters[0].n) {
		w := s.waiters[0]
		s.waiters[0] = nil
		s.waiters = s.waiters[1:]
		s.waiting.Add(-1)
		close(w.ready)
	}
}

// remove drops a waiter that gave up. Callers hold s.mu.
func (s *semaphore) remove(w *semWaiter) {
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			s.waiting.Add(-1)
			return
		}
	}
}
