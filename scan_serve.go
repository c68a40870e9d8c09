package zaris

import (
	"context"

	"github.com/zaris-go/zaris/transport"
)

// scanRequest asks an owner for one page of keys from Cursor, a scan position (scan_index.go).
type scanRequest struct {
	_msgpack struct{} `msgpack:",as_array"`
	Cursor   uint64
	Count    int    // keys to visit at most; the page returns those of them that are live and match
	Match    []byte // a Redis glob the keys must match; nil matches every key
	Type     string // the type the keys' values must have, as TYPE names it; "" matches every type
}

// scanReply answers a scanRequest: the keys found and the position to resume at, scanDone once the page
// reached the end of the key space. A refusal carries the owner's view, as kvReply does.
type scanReply struct {
	_msgpack struct{} `msgpack:",as_array"`
	Status   Status
	Keys     []string
	Next     uint64
	Owner    NodeID
	Epoch    uint64
	MapIndex uint64
}

// refuseScan turns a key operation's refusal into a scan's.
func refuseScan(r kvReply) scanReply {
	return scanReply{Status: r.Status, Owner: r.Owner, Epoch: r.Epoch, MapIndex: r.MapIndex}
}

const (
	// scanLockSpan bounds the keys one walk visits under a segment's lock: a page of any size takes and
	// releases the lock once per span, so writers to the segment never wait for more than a span.
	scanLockSpan = 256
	// maxScanCount bounds the keys one page visits, whatever the request asks.
	maxScanCount = 1 << 20
	// scanReplyOverhead bounds a scan reply's bytes beyond its keys.
	scanReplyOverhead = 64
)

// scanMode says what a page does at a partition that this node does not own.
type scanMode uint8

const (
	// scanRouted serves a router that sends each range to its owner: the page stops at the first partition
	// this node does not serve, and is refused if that is the first one.
	scanRouted scanMode = iota + 1
	// scanOwned serves the keys this node owns, as a Redis Cluster node answers SCAN: partitions other
	// nodes own are skipped, and one this node owns but cannot serve now refuses the page.
	scanOwned
)

// scanPager serves pages of keys from a store, partition by partition, to whoever may read them.
type scanPager struct {
	layout Layout
	store  *store
	// check reports whether this node serves partition p now and otherwise returns the refusal.
	check    func(p int) (refusal kvReply, served bool)
	maxBytes int // the room for keys in one reply
}

// scanPage is a page with, per segment it read, the segment's revision at the time.
type scanPage struct {
	reply     scanReply
	revisions map[int]uint64
}

// page serves req: it walks the key space in position order from req.Cursor, segment by segment, until
// it has visited req.Count keys, filled its reply, reached a partition it does not serve (scanRouted) or
// the end of the key space.
func (pg *scanPager) page(req *scanRequest, mode scanMode) scanPage {
	f := scanFilter{match: req.Match, kind: req.Type}
	left := scanBounds{visits: min(max(req.Count, 1), maxScanCount), bytes: pg.maxBytes}
	out := scanPage{revisions: map[int]uint64{}}
	cursor, served, advanced := req.Cursor, false, false
	for {
		seg := pg.layout.SlotSegment(scanSlot(cursor))
		part := pg.layout.SegmentPartition(seg)
		if refusal, ok := pg.check(part); !ok {
			if mode == scanOwned && elsewhere(refusal.Status) {
				_, last := pg.layout.PartitionSlots(part)
				if cursor = slotStart(int(last) + 1); cursor == scanDone {
					break
				}
				continue
			}
			if !served {
				return scanPage{reply: refuseScan(refusal)}
			}
			break
		}
		served = true
		_, last := pg.layout.SegmentSlots(seg)
		end := slotStart(int(last) + 1) // scanDone after the last slot
		for left.visits > 0 && left.bytes > 0 {
			span := scanBounds{visits: min(left.visits, scanLockSpan), bytes: left.bytes, takeFirst: !advanced}
			w := pg.store.scan(seg, cursor, end, span, &f, out.reply.Keys)
			out.reply.Keys, cursor = w.keys, w.next
			left.visits -= w.visited
			left.bytes -= w.bytes
			out.revisions[seg] = w.revision
			if w.visited == 0 && cursor != end {
				left.bytes = 0 // the next key does not fit in what is left of the reply
			}
			advanced = advanced || w.visited > 0
			if cursor == end {
				break
			}
		}
		if cursor != end || cursor == scanDone {
			break
		}
	}
	out.reply.Next = cursor
	return out
}

// elsewhere reports whether a refusal says another node serves the partition, or none does.
func elsewhere(status Status) bool {
	return status == StatusMoved || status == StatusPartitionUnavailable
}

// scanPager returns the pager of this node's store, checking ownership against the committed map.
func (n *Node) scanPager() *scanPager {
	return &scanPager{layout: n.layout, store: n.store, check: n.partitionRefusal,
		maxBytes: n.cfg.MaxFrameSize - transport.EnvelopeOverhead - scanReplyOverhead}
}

// serveScan serves one page on this node. Under the Sync concern the page waits, as a read does, until every
// in-sync replica holds the segments' state it saw, so no key it returns can be lost to a failover.
func (n *Node) serveScan(ctx context.Context, req *scanRequest, mode scanMode) scanReply {
	page := n.scanPager().page(req, mode)
	if page.reply.Status != StatusSuccess || n.cfg.WriteConcern != Sync {
		return page.reply
	}
	for seg, rev := range page.revisions {
		if rev <= n.repl.committed[seg].Load() {
			continue
		}
		if status := n.repl.awaitReplicas(ctx, seg, rev, false); status != StatusSuccess {
			return scanReply{Status: status}
		}
	}
	return page.reply
}

// serveOwnedScan serves a page of the keys of the partitions this node owns, for the RESP endpoint.
func (n *Node) serveOwnedScan(ctx context.Context, req *scanRequest) scanReply {
	return n.serveScan(ctx, req, scanOwned)
}

// serveScanRequest answers an opScan request from another node.
func (n *Node) serveScanRequest(ctx context.Context, payload []byte) ([]byte, error) {
	var req scanRequest
	if err := decode(payload, &req); err != nil {
		return encode(&scanReply{Status: StatusInvalidRequest})
	}
	n.stats.served.Add(1)
	reply := n.serveScan(ctx, &req, scanRouted)
	return encode(&reply)
}

// ownedKeyCount counts the keys of the partitions this node actively owns, expired ones not yet reclaimed
// included, as a Redis Cluster primary's DBSIZE counts its own.
func (n *Node) ownedKeyCount() int {
	m := n.fsm.clusterMap()
	count := 0
	for p := range m.Runtime {
		if m.Runtime[p].Owner != n.id || !n.ownsIn(m, p) {
			continue
		}
		first, end := n.layout.PartitionSegments(p)
		for seg := first; seg < end; seg++ {
			count += n.store.segmentLen(seg)
		}
	}
	return count
}
