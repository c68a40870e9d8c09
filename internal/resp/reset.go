package resp

import "time"

// cmdReset serves RESET: the connection returns to the state of a new one. Its transaction is discarded
// and its watches forgotten, tracking stops, its subscriptions end, it speaks RESP2 again, loses its name,
// and is logged in as "default" when that needs no password, and otherwise logged out.
func (c *respConn) cmdReset([][]byte) {
	c.endTxn()
	c.srv.tracking.stop(c)
	c.trackMode, c.caching = trackAll, cachingUnset
	c.unsubscribeAll()
	c.wr.proto = 2
	c.pushes.mu.Lock()
	c.pushes.resp3, c.pushes.proto3 = false, false
	c.pushes.mu.Unlock()
	c.name = ""
	c.replicaReads = false
	if !c.logOut() {
		c.wr.error("ERR max number of clients not logged in reached")
		c.quit = true
		return
	}
	c.wr.simple("RESET")
}

// logOut logs the connection in as "default" when that needs no password. Otherwise it logs the
// connection out: back behind the pre-auth gate, with its smaller limits and login timeout. It reports
// false when the gate has no room for it, and the connection must close.
func (c *respConn) logOut() bool {
	if u := c.srv.acl.initialUser(); u != nil {
		c.logIn(u)
		return true
	}
	if c.user == nil {
		return true
	}
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	if reason := c.srv.gate.enter(c.gateAddr); reason != "" {
		return false
	}
	c.rd.budget = c.srv.gate.budget.takeBack(c.rd.held)
	c.user, c.rd.lim, c.opened = nil, c.srv.preAuth, time.Now()
	return true
}
