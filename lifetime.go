package zaris

import (
	"context"
	"sync"
	"sync/atomic"
)

// lifetime is what a node's Close ends and waits for: the context its background work runs under, the
// goroutines it started, and the gate that stops new ones from starting once Close has begun.
type lifetime struct {
	ctx       context.Context // done once Close starts
	end       context.CancelFunc
	wg        sync.WaitGroup
	gate      closeGate
	closeOnce sync.Once
	closeErr  error
	left      atomic.Bool // Leave has begun
}

// closeGate lets Close wait for the work it must not cut short (decisions waiting on the control plane,
// starts of background goroutines) and refuse more once it has begun.
type closeGate struct {
	mu     sync.RWMutex
	closed bool
}

// enter admits one piece of work, or reports false once the gate closed. leave must follow a true enter.
func (g *closeGate) enter() bool {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return false
	}
	return true
}

func (g *closeGate) leave() { g.mu.RUnlock() }

// close waits for the work admitted to leave and refuses more.
func (g *closeGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}
