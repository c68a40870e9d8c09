package zaris

// expireOwned deletes the expired keys of the partitions this node actively owns, each by a write of its
// own (an expiry op), so that replicas apply it in revision order and watchers see it as an event. Copies
// of other partitions keep their expired keys, invisible to reads, until their owner's expiry op arrives:
// one dropped locally would never be announced if this node became the owner by failover.
func (n *Node) expireOwned() {
	m := n.ctl.fsm.clusterMap()
	if !n.ctl.holdsLease() {
		return
	}
	expired := 0
	for p, st := range m.Runtime {
		if !n.ownsIn(m, p) || st.Health == Recovering || !n.cut.enter(p) {
			continue
		}
		first, end := n.layout.PartitionSegments(p)
		for s := first; s < end; s++ {
			expired += n.store.expireSegment(s)
		}
		n.cut.leave(p)
	}
	n.stats.expired.Add(uint64(expired))
}
