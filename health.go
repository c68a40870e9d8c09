package zaris

import (
	"errors"
	"fmt"
	"slices"
)

// Readiness returns nil when the node is ready for traffic: it has joined, holds the cluster's map, the map
// records this process (a full member), and no partition it owns or replicates is Recovering. Otherwise
// the error says why; it matches ErrClosed once the node closes. Orchestrators read it through /readyz.
func (n *Node) Readiness() error {
	if n.life.Err() != nil {
		return ErrClosed
	}
	m := n.fsm.clusterMap()
	return readinessIn(m, n.id, n.cfg.Lite || n.recordedIn(m))
}

// readinessIn is Readiness for node id as map m has it; recorded says whether m records its process, or
// needs not (a lite member).
func readinessIn(m *ClusterMap, id NodeID, recorded bool) error {
	switch {
	case m.Version == 0:
		return errors.New("zaris: no partition map assigned yet")
	case !recorded:
		return errors.New("zaris: the cluster map does not record this process yet")
	}
	for p, st := range m.Runtime {
		if st.Health != Recovering {
			continue
		}
		if st.Owner == id || (p < len(m.Assignment) && slices.Contains(m.Assignment[p], id)) {
			return fmt.Errorf("zaris: partition %d, which this node holds, is Recovering", p)
		}
	}
	return nil
}
