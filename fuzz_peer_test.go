package zaris

import (
	"testing"

	"github.com/zaris-go/zaris/internal/kv"
)

// Decoders of what peers send that the older fuzz targets do not reach: batch requests and replies, and a
// cluster map fetched from a peer, which the router then indexes by partition and segment.

func FuzzDecodeBatchRequest(f *testing.F) {
	seed := appendBatchHeader(nil, 2)
	seed = appendBatchRequestItem(seed, &batchItemWire{Index: 0, Op: kv.OpPut, Req: kv.Request{Key: "k", Value: []byte("v"), TTL: 5}})
	seed = appendBatchRequestItem(seed, &batchItemWire{Index: 1, Op: kv.OpGet, Req: kv.Request{Key: "k"}})
	f.Add(seed)
	f.Add([]byte{0x91, 0x90})
	f.Fuzz(func(t *testing.T, data []byte) {
		var w batchWork
		if w.decodeRequest(data) != nil {
			return
		}
		again := appendBatchHeader(nil, len(w.items))
		for i := range w.items {
			again = appendBatchRequestItem(again, &w.items[i])
		}
		var back batchWork
		if err := back.decodeRequest(again); err != nil {
			t.Fatalf("a decoded batch request does not decode once encoded again: %v", err)
		}
		for i := range w.items {
			a, b := w.items[i], back.items[i]
			if a.Index != b.Index || a.Op != b.Op || a.Req.Key != b.Req.Key || string(a.Req.Value) != string(b.Req.Value) || a.Req.TTL != b.Req.TTL {
				t.Fatalf("item %d: %+v encodes and decodes as %+v", i, a, b)
			}
		}
	})
}

func FuzzDecodeBatchReply(f *testing.F) {
	f.Add(appendBatchReply(nil, []batchItemReply{{}, {}}))
	f.Add([]byte{0x92, 0x90, 0xc0})
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		_ = decodeBatchReply(data, func(*batchItemReply) error { n++; return nil })
	})
}

// FuzzFetchedMap decodes a cluster map as a node fetches one from a peer: a map that fits the node's
// layout is installed in a router and every segment routed, which must not panic.
func FuzzFetchedMap(f *testing.F) {
	seed, err := encode(routedMap(3, "a", "b"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	layout := Layout{Segments: 8, Partitions: 4}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m ClusterMap
		if decode(data, &m) != nil || m.fits(layout) != nil {
			return
		}
		fx := newRouterFixture(t, "self")
		fx.r.install(&m, causePoll)
		if table := fx.r.current(); table != nil && len(table.segmentPeer) != layout.Segments {
			t.Fatalf("a routing table of %d segments for a layout of %d", len(table.segmentPeer), layout.Segments)
		}
	})
}
