package zaris

import (
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
)

// TestIsolatedNodeIsDeclaredFailed cuts a non-leader from both other nodes: their gossip must declare it
// failed, as it would a crashed node, and alive again once the links heal.
func TestIsolatedNodeIsDeclaredFailed(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	isolated := c.node((c.leader() + 1) % 3)
	var others []*Node
	for _, n := range c.live() {
		if n != isolated {
			others = append(others, n)
			c.faults.Partition(string(isolated.id), string(n.id))
		}
	}
	waitFor(t, 10*time.Second, "the isolated node declared failed", func() bool {
		return seenAs(others, isolated.id, serf.StatusFailed)
	})
	c.faults.HealAll()
	waitFor(t, 10*time.Second, "the healed node alive again", func() bool {
		return seenAs(others, isolated.id, serf.StatusAlive)
	})
}

// seenAs reports whether every node in observers has member id in status.
func seenAs(observers []*Node, id NodeID, status serf.MemberStatus) bool {
	for _, n := range observers {
		if memberStatus(n, id) != status {
			return false
		}
	}
	return true
}

// memberStatus returns the status n's gossip gives member id; StatusNone when it does not know it.
func memberStatus(n *Node, id NodeID) serf.MemberStatus {
	for _, m := range n.members.members() {
		if m.ID == id {
			return m.Status
		}
	}
	return serf.StatusNone
}

// TestTagChangesDoNotUndoEachOther sets several flags on one member at once, as its control loop and a
// Leave may: each must stay set.
func TestTagChangesDoNotUndoEachOther(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, nil)
	m := c.node(0).members
	flags := []string{"flag-a", "flag-b", "flag-c", "flag-d"}
	var wg sync.WaitGroup
	for _, flag := range flags {
		wg.Go(func() {
			if err := m.setFlag(flag); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	tags := m.serf.LocalMember().Tags
	for _, flag := range flags {
		if tags[flag] != "1" {
			t.Errorf("flag %s is %q after every change returned; tags %v", flag, tags[flag], tags)
		}
	}
}
