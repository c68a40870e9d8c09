package resp

import (
	"math"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
)

// waitPoll is how often a blocked WAIT looks at the topology again for replicas back in sync.
const waitPoll = 100 * time.Millisecond

// noteWrite records that the connection wrote key, for WAIT.
func (c *respConn) noteWrite(key string) {
	i := c.srv.node.Topology().partitionIndex(kv.KeySlot(key))
	if i < 0 {
		return
	}
	for len(c.wrote) <= i/64 {
		c.wrote = append(c.wrote, 0)
	}
	c.wrote[i/64] |= 1 << (i % 64)
}

// replicasHolding counts the replicas sure to hold every write the connection made. With Sync writes, a
// write is acknowledged once every in-sync replica of its partition holds it, and a replica joins that set
// only holding every write acknowledged before, so this is the fewest in-sync replicas of any partition the
// connection wrote to; before any write, of any partition this node owns. With Async writes it is none.
func (c *respConn) replicasHolding() int64 {
	if !c.srv.syncWrites {
		return 0
	}
	t := c.srv.node.Topology()
	fewest := int64(-1)
	for i := range t.Partitions {
		p := &t.Partitions[i]
		wrote := i/64 < len(c.wrote) && c.wrote[i/64]&(1<<(i%64)) != 0
		if wrote || len(c.wrote) == 0 && p.Owner == c.srv.id {
			if fewest < 0 || int64(p.InSync) < fewest {
				fewest = int64(p.InSync)
			}
		}
	}
	return max(fewest, 0)
}

// cmdWait serves WAIT numreplicas timeout: how many replicas hold every write the connection made,
// waiting up to timeout milliseconds (0: forever) for numreplicas of them. Inside MULTI it does not wait.
func (c *respConn) cmdWait(args [][]byte) {
	want, ok := kv.ParseCanonicalInt(args[1])
	if !ok {
		c.notInteger()
		return
	}
	ms, ok := kv.ParseCanonicalInt(args[2])
	switch {
	case !ok:
		c.wr.error("ERR timeout is not an integer or out of range")
		return
	case ms < 0:
		c.wr.error("ERR timeout is negative")
		return
	}
	held := c.replicasHolding()
	if held >= want || c.exec != nil {
		c.wr.int(held)
		return
	}
	var wait time.Duration // forever, for 0 and for a timeout past what a deadline can hold
	if ms <= math.MaxInt64/int64(time.Millisecond) {
		wait = time.Duration(ms) * time.Millisecond
	}
	if held, ok := c.awaitReplicas(want, wait); ok {
		c.wr.int(held)
	}
}

// awaitReplicas waits until want replicas hold the connection's writes, or wait passes (0: never), and
// returns how many do. The client hanging up or the server closing ends the wait, and the connection,
// reported false.
func (c *respConn) awaitReplicas(want int64, wait time.Duration) (int64, bool) {
	var expired <-chan time.Time
	if wait > 0 {
		t := c.srv.clock.NewTimer(wait)
		defer t.Stop()
		expired = t.C()
	}
	poll := c.srv.clock.NewTicker(waitPoll)
	defer poll.Stop()
	hangUp := c.watchHangUp()
	defer hangUp.stop()
	for {
		if err := c.awaitInput(); err != nil {
			c.quit, c.hangUp = true, true
			return 0, false
		}
		expiredNow, gone := false, false
		select {
		case <-poll.C():
		case <-expired:
			expiredNow = true
		case <-hangUp.gone:
			gone = true
		case <-c.srv.ctx.Done():
			gone = true
		}
		c.busy()
		if gone {
			c.quit, c.hangUp = true, true
			return 0, false
		}
		if held := c.replicasHolding(); held >= want || expiredNow {
			return held, true
		}
	}
}
