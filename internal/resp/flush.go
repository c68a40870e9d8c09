package resp

import (
	"bytes"

	"github.com/zaris-go/zaris/internal/kv"
)

// flushPage bounds the keys FLUSHALL deletes per page of the node's keys, so that it holds a page's
// names, not the whole key space's.
const flushPage = 4096

// cmdFlush serves FLUSHALL and FLUSHDB [ASYNC|SYNC]: it deletes every key of the partitions this node
// owns, as a Redis Cluster node flushes its own slots; replicas drop them as they apply the deletes. It
// walks the keys page by page and deletes each page's keys of one segment in one atomic write, so a
// concurrent reader sees a segment's page gone whole; a write that lands behind the walk survives it. It
// answers once every key is deleted, ASYNC included.
func (c *respConn) cmdFlush(args [][]byte) {
	if len(args) > 2 || len(args) == 2 && !bytes.EqualFold(args[1], []byte("async")) && !bytes.EqualFold(args[1], []byte("sync")) {
		c.syntaxError()
		return
	}
	req := kv.ScanRequest{Count: flushPage}
	for {
		reply := c.srv.node.ServeOwnedScan(c.srv.ctx, &req)
		if reply.Status != kv.StatusSuccess {
			c.refuse(kv.ScanSlot(req.Cursor), kv.Reply{Status: reply.Status, Owner: reply.Owner})
			return
		}
		if !c.deleteOwned(reply.Keys) {
			return
		}
		if reply.Next == kv.ScanDone {
			break
		}
		req.Cursor = reply.Next
	}
	c.wr.ok()
}

// deleteOwned deletes keys, those of one segment in one atomic write (or several, when one would not fit
// in a group). A key no longer owned is skipped: its new owner serves it. A refusal is answered and
// reported false.
func (c *respConn) deleteOwned(keys []string) bool {
	bySegment := map[int][]string{}
	for _, key := range keys {
		if seg, _, owned := c.srv.node.CheckOwner(key); owned {
			bySegment[seg] = append(bySegment[seg], key)
		}
	}
	for seg, keys := range bySegment {
		for len(keys) > 0 {
			done := 0
			status := c.srv.node.ApplyAtomically(c.srv.ctx, seg, keys, func(g kv.Group) {
				for _, key := range keys {
					if _, full := g.Apply(kv.OpDelete, &kv.Request{Key: key}); full {
						return
					}
					done++
				}
			})
			switch {
			case status != kv.StatusSuccess:
				c.refuse(kv.KeySlot(keys[0]), kv.Reply{Status: status})
				return false
			case done == 0: // not even one delete fits in a group: cannot happen with sane bounds
				c.wr.error("ERR the transaction's writes exceed the bound of one atomic write")
				return false
			}
			keys = keys[done:]
		}
	}
	return true
}
