package zaris

import (
	"testing"

	"github.com/tinylib/msgp/msgp"

	"github.com/zaris-go/zaris/durability"
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

// FuzzBackupWire decodes the requests and replies of backups and restores as a peer may send them: none
// panics, and what decodes encodes and decodes again the same.
func FuzzBackupWire(f *testing.F) {
	f.Add((&backupRequest{Step: backupReadStep, ID: "backup-1", Lease: 5, Segment: 3, Part: 1}).marshal())
	piece := segmentSnapshot{Segment: 2, Revision: 9, Epoch: 4, Entries: []durability.Entry{{Key: "k", Value: []byte("v"), Version: 7}}, More: true}
	f.Add((&restoreRequest{Replace: true, Piece: piece}).marshal())
	f.Add((&restoreReply{Status: StatusMoved, Keys: 3}).marshal())
	f.Add(appendSnapshots(msgp.AppendUint8(msgp.AppendArrayHeader(nil, 2), 0), []segmentSnapshot{piece}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b backupRequest
		if b.decode(data) == nil {
			var again backupRequest
			if err := again.decode(b.marshal()); err != nil || again != b {
				t.Fatalf("backup request %+v encodes and decodes as %+v, %v", b, again, err)
			}
		}
		var r restoreRequest
		if r.decode(data) == nil {
			var again restoreRequest
			if err := again.decode(r.marshal()); err != nil || again.Probe != r.Probe || again.Replace != r.Replace ||
				again.Piece.Segment != r.Piece.Segment || len(again.Piece.Entries) != len(r.Piece.Entries) {
				t.Fatalf("restore request %+v encodes and decodes as %+v, %v", r, again, err)
			}
		}
		var reply restoreReply
		_ = reply.decode(data)
		_, _, _ = decodePiece(data)
	})
}
