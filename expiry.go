package zaris

// expireOwned deletes the expired keys of the partitions this node actively owns, each by a write of its
// own (an expiry op), so that replicas apply it in revision order and watchers see it as an event. Copies
// of other partitions keep their expired keys, invisible to reads, until their owner's expiry op arrives:
// one dropped locally would never be announced if this node became the owner by failover.
func (o *owner) expireOwned() {
	m := o.view.clusterMap()
	if !o.holdsLease() {
		return
	}
	expired := 0
	for p, st := range m.Runtime {
		if !o.ownsIn(m, p) || st.Health == Recovering || !o.cut.enter(p) {
			continue
		}
		first, end := o.layout.PartitionSegments(p)
		for s := first; s < end; s++ {
			expired += o.store.expireSegment(s)
		}
		o.cut.leave(p)
	}
	o.stats.expired.Add(uint64(expired))
}
