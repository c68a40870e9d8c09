package zaris

import (
	"context"
	"time"

	"github.com/zaris-go/zaris/durability"
)

// nearWatchRequest is one long poll of a caching node's near cache, sent to the owner of Segments: which
// keys of each segment changed after the revision in After.
type nearWatchRequest struct {
	_msgpack struct{} `msgpack:",as_array"`
	Cache    uint64   // random per near cache: the owner counts it as one watcher
	Segments []uint32
	After    []uint64
	Wait     int64 // nanoseconds the owner may wait for a change, within its WatchPoll
}

// nearWatchReply answers a nearWatchRequest segment by segment, in the request's order.
type nearWatchReply struct {
	_msgpack struct{} `msgpack:",as_array"`
	Status   Status   // StatusSuccess, or why the whole poll was refused
	Segments []nearSegmentReply
}

// nearSegmentReply is what changed in one segment. A Status other than StatusSuccess says the owner no
// longer serves the segment; Gap says its op log no longer reaches back to the revision asked for, so
// the keys that changed are not known. Either way the caching node drops what it holds of the segment.
type nearSegmentReply struct {
	_msgpack struct{} `msgpack:",as_array"`
	Status   Status
	Epoch    uint64
	Revision uint64 // the revision the caching node has now seen up to
	Gap      bool
	Keys     []string
}

// changedKeys returns the keys written in segment seg after revision after, within the feed's bounds,
// and the revision it read up to. When the op log no longer reaches back to after, or the segment has not
// reached it, it reports a gap, with the segment's current revision.
func (f *watchFeed) changedKeys(seg int, after uint64) (keys []string, revision uint64, gap bool) {
	revision = after
	for {
		// The store's revision is read first: the log holds every op up to it, recorded under the same lock.
		have := f.store.revision(seg)
		switch {
		case revision > have:
			return nil, have, true
		case revision == have:
			return keys, revision, false
		}
		ops, err := f.oplog.Ops(uint32(seg), revision, watchScanPage)
		if err != nil || len(ops) == 0 {
			return nil, have, true
		}
		for i := range ops {
			keys = appendOpKeys(keys, &ops[i])
			revision = ops[i].Revision
			if len(keys) >= f.maxEvents {
				return keys, revision, false
			}
		}
	}
}

// appendOpKeys appends the user keys op wrote to dst: its own, or each of a multi op's.
func appendOpKeys(dst []string, op *durability.Op) []string {
	if op.Kind != durability.OpMulti {
		if !isInternalKey(op.Key) {
			dst = append(dst, op.Key)
		}
		return dst
	}
	ops, _ := durability.DecodeMulti(op.Value) // checked when the op was decoded or made
	for i := range ops {
		if !isInternalKey(ops[i].Key) {
			dst = append(dst, ops[i].Key)
		}
	}
	return dst
}

// serveNearWatch answers one poll of a caching node: for each segment, the keys changed after the
// revision it has seen, or why it must drop the segment, waiting within WatchPoll until there is
// something to say. It reads only the op log, which a caching node's poll never waits on.
func (o *owner) serveNearWatch(ctx context.Context, req *nearWatchRequest) nearWatchReply {
	if len(req.Segments) != len(req.After) || len(req.Segments) > o.layout.Segments {
		return nearWatchReply{Status: StatusInvalidRequest}
	}
	for _, seg := range req.Segments {
		if int(seg) >= o.layout.Segments {
			return nearWatchReply{Status: StatusInvalidRequest}
		}
	}
	if !o.watches.admit(req.Cache) {
		return nearWatchReply{Status: StatusTooManyWatchers}
	}
	f := o.watches
	f.marks.mark(f.clock.Now(), req.Segments, req.After)
	remapped := f.remap.wait()
	timer := f.clock.NewTimer(min(time.Duration(req.Wait), o.cfg.WatchPoll))
	defer timer.Stop()
	for {
		woken := f.anyWrite.wait() // before reading the log: a write after the read wakes it
		if reply, news := o.nearChanges(req); news {
			return reply
		}
		select {
		case <-woken:
			continue
		case <-remapped:
		case <-timer.C():
		case <-ctx.Done():
		}
		reply, _ := o.nearChanges(req)
		return reply
	}
}

// nearChanges reads what changed in each segment of req, and reports whether anything did or a segment
// is no longer this node's to serve.
func (o *owner) nearChanges(req *nearWatchRequest) (reply nearWatchReply, news bool) {
	reply.Segments = make([]nearSegmentReply, len(req.Segments))
	for i, seg := range req.Segments {
		p := o.layout.SegmentPartition(int(seg))
		r := &reply.Segments[i]
		if refusal, owned := o.partitionRefusal(p); !owned {
			r.Status, news = refusal.Status, true
			continue
		}
		r.Epoch = o.view.clusterMap().Runtime[p].Epoch
		r.Keys, r.Revision, r.Gap = o.watches.changedKeys(int(seg), req.After[i])
		news = news || r.Gap || len(r.Keys) > 0
	}
	return reply, news
}

// serveNearWatchRequest decodes and serves an kv.OpNearWatch request.
func (o *owner) serveNearWatchRequest(ctx context.Context, payload []byte) ([]byte, error) {
	var req nearWatchRequest
	if err := decode(payload, &req); err != nil {
		return encode(&nearWatchReply{Status: StatusInvalidRequest})
	}
	reply := o.serveNearWatch(ctx, &req)
	return encode(&reply)
}
