package zaris

import (
	"context"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// refuseScan turns a key operation's refusal into a scan's.
func refuseScan(r kv.Reply) kv.ScanReply {
	return kv.ScanReply{Status: r.Status, Owner: r.Owner, Epoch: r.Epoch, MapIndex: r.MapIndex}
}

const (
	// scanLockSpan bounds the keys one walk visits under a segment's lock: a page of any size takes and
	// releases the lock once per span, so writers to the segment never wait for more than a span.
	scanLockSpan = 256
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
	check    func(p int) (refusal kv.Reply, served bool)
	maxBytes int // the room for keys in one reply
}

// scanPage is a page with, per segment it read, the segment's revision at the time.
type scanPage struct {
	reply     kv.ScanReply
	revisions map[int]uint64
}

// pageWork is a page being served: where it is, what it has found and what is left of its bounds.
type pageWork struct {
	filter   scanFilter
	cursor   uint64
	left     scanBounds
	keys     []string
	advanced bool // the page has visited a key
	revs     map[int]uint64
}

// page serves req: it walks the key space in position order from req.Cursor, segment by segment, until
// it has visited req.Count keys, filled its reply, reached a partition it does not serve (scanRouted) or
// the end of the key space.
func (pg *scanPager) page(req *kv.ScanRequest, mode scanMode) scanPage {
	if len(req.Match) > kv.MaxMatchPattern {
		return scanPage{reply: kv.ScanReply{Status: StatusInvalidRequest}}
	}
	w := pageWork{filter: scanFilter{match: req.Match, kind: req.Type}, cursor: req.Cursor,
		left: scanBounds{visits: min(max(req.Count, 1), kv.MaxScanCount), bytes: pg.maxBytes}, revs: map[int]uint64{}}
	for {
		seg := pg.layout.SlotSegment(kv.ScanSlot(w.cursor))
		part := pg.layout.SegmentPartition(seg)
		refusal, ok := pg.check(part)
		if ok {
			refusal, ok = pg.walkSegment(&w, seg, part)
		}
		switch {
		case !ok && mode == scanOwned && elsewhere(refusal.Status):
			_, last := pg.layout.PartitionSlots(part)
			w.cursor = slotStart(int(last) + 1)
		case !ok && w.cursor == req.Cursor:
			return scanPage{reply: refuseScan(refusal)}
		case !ok:
			return w.finish()
		}
		if w.cursor == kv.ScanDone || w.left.visits <= 0 || w.left.bytes <= 0 {
			return w.finish()
		}
	}
}

// walkSegment walks segment seg of partition part from the cursor to the segment's end or the page's
// bounds, a lock span at a time. After each span it checks that this node still serves the partition: a
// copy is dropped only while its partition is refused (sealed for a hand-over, or without a lease), so a
// span that ends with the partition still served read a copy that was not. A span that ends with it refused
// is forgotten, and walkSegment returns the refusal. A page reads a segment at one revision, so that it
// never shows part of an atomic write (an EXEC, a transaction): a span that finds the segment written since
// the page's previous span is forgotten too, and the page ends before it.
func (pg *scanPager) walkSegment(w *pageWork, seg, part int) (refusal kv.Reply, served bool) {
	_, last := pg.layout.SegmentSlots(seg)
	end := slotStart(int(last) + 1) // scanDone after the last slot
	for w.left.visits > 0 && w.left.bytes > 0 {
		span := scanBounds{visits: min(w.left.visits, scanLockSpan), bytes: w.left.bytes, takeFirst: !w.advanced}
		found := pg.store.scan(seg, w.cursor, end, span, &w.filter, w.keys)
		if refusal, served := pg.check(part); !served {
			return refusal, false
		}
		if rev, read := w.revs[seg]; read && rev != found.revision {
			w.keys = found.keys[:len(w.keys)]
			w.left.bytes = 0
			break
		}
		w.keys, w.cursor = found.keys, found.next
		w.left.visits -= found.visited
		w.left.bytes -= found.bytes
		w.revs[seg] = found.revision
		w.advanced = w.advanced || found.visited > 0
		if found.visited == 0 && w.cursor != end {
			w.left.bytes = 0 // the next key does not fit in what is left of the reply
		}
		if w.cursor == end {
			break
		}
	}
	return kv.Reply{}, true
}

func (w *pageWork) finish() scanPage {
	return scanPage{reply: kv.ScanReply{Keys: w.keys, Next: w.cursor}, revisions: w.revs}
}

// elsewhere reports whether a refusal says another node serves the partition, or none does.
func elsewhere(status Status) bool {
	return status == StatusMoved || status == StatusPartitionUnavailable
}

// scanPager returns the pager of this node's store, checking ownership against the committed map.
func (o *owner) scanPager() *scanPager {
	return &scanPager{layout: o.layout, store: o.store, check: o.partitionRefusal,
		maxBytes: o.cfg.MaxFrameSize - transport.EnvelopeOverhead - scanReplyOverhead}
}

// serveScan serves one page on this node. Under the Sync concern the page waits, as a read does, until every
// in-sync replica holds the segments' state it saw, so no key it returns can be lost to a failover.
func (o *owner) serveScan(ctx context.Context, req *kv.ScanRequest, mode scanMode) kv.ScanReply {
	page := o.scanPager().page(req, mode)
	if page.reply.Status != StatusSuccess || o.cfg.WriteConcern != Sync {
		return page.reply
	}
	for seg, rev := range page.revisions {
		if rev <= o.repl.committed[seg].Load() {
			continue
		}
		if status := o.repl.awaitReplicas(ctx, seg, rev, false); status != StatusSuccess {
			return kv.ScanReply{Status: status}
		}
	}
	return page.reply
}

// serveOwnedScan serves a page of the keys of the partitions this node owns, for the RESP endpoint.
func (o *owner) serveOwnedScan(ctx context.Context, req *kv.ScanRequest) kv.ScanReply {
	return o.serveScan(ctx, req, scanOwned)
}

// serveScanRequest answers an kv.OpScan request from another node.
func (o *owner) serveScanRequest(ctx context.Context, payload []byte) ([]byte, error) {
	var req kv.ScanRequest
	if err := decode(payload, &req); err != nil {
		return encode(&kv.ScanReply{Status: StatusInvalidRequest})
	}
	o.stats.served.Add(1)
	reply := o.serveScan(ctx, &req, scanRouted)
	return encode(&reply)
}

// ownedKeyCount counts the keys of the partitions this node actively owns, expired ones not yet reclaimed
// included, as a Redis Cluster primary's DBSIZE counts its own.
func (o *owner) ownedKeyCount() int {
	m := o.view.clusterMap()
	count := 0
	for p := range m.Runtime {
		if m.Runtime[p].Owner != o.id || !o.ownsIn(m, p) {
			continue
		}
		first, end := o.layout.PartitionSegments(p)
		for seg := first; seg < end; seg++ {
			count += o.store.segmentLen(seg)
		}
	}
	return count
}
