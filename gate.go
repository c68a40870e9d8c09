package zaris

import "sync"

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
