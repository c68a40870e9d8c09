package zaris

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// storeOwner is a keyOwner over a bare store that owns the slots below half of the key space and names
// node "b" as the owner of the rest: enough to run the RESP endpoint without a cluster.
type storeOwner struct {
	layout Layout
	store  *store
}

func (o *storeOwner) owns(key string) bool { return KeySlot(key) < NumSlots/2 }

func (o *storeOwner) checkOwner(key string) (int, kv.Reply, bool) {
	seg := o.layout.KeySegment(key)
	if !o.owns(key) {
		return seg, kv.Reply{Status: StatusMoved, Owner: "b", Epoch: 1, MapIndex: 1}, false
	}
	return seg, kv.Reply{}, true
}

func (o *storeOwner) applyKV(_ context.Context, op transport.Op, seg int, req *kv.Request) kv.Reply {
	return lookupKeyOp(op).apply(o.store, seg, *req, testOpLimits)
}

func (o *storeOwner) applyAtomically(_ context.Context, seg int, _ []string, fn func(kv.Group)) Status {
	o.store.atomically(seg, func(g *store) { fn(&storeGroup{g: g, seg: seg, lim: testOpLimits}) })
	return StatusSuccess
}

func (o *storeOwner) readAtomically(_ context.Context, seg int, _ []string, fn func(kv.Group)) Status {
	o.store.readAtomically(seg, func(g *store) { fn(&storeGroup{g: g, seg: seg, lim: testOpLimits, read: true}) })
	return StatusSuccess
}

// testOpLimits are the limits a storeOwner runs key operations under.
var testOpLimits = opLimits{maxValueSize: 1 << 20, maxReplyBytes: 1 << 20}

func (o *storeOwner) keyCount() int { return o.store.len() }

// ownsPartition reports whether the owner's half of the key space holds partition p.
func (o *storeOwner) ownsPartition(p int) bool {
	first, _ := o.layout.PartitionSlots(p)
	return first < NumSlots/2
}

func (o *storeOwner) serveOwnedScan(_ context.Context, req *kv.ScanRequest) kv.ScanReply {
	return testPager(o.store, o.layout, o.ownsPartition).page(req, scanOwned).reply
}

// infoReplication describes the owner as a primary without replicas, at the revisions of its segments.
func (o *storeOwner) infoReplication() respReplication {
	info := respReplication{history: strings.Repeat("ab", 20)}
	for seg := range o.layout.Segments {
		if o.ownsPartition(o.layout.SegmentPartition(seg)) {
			info.offset += o.store.revision(seg)
		}
	}
	return info
}

func (o *storeOwner) infoMessages() (sent, received uint64) { return 0, 0 }

func (o *storeOwner) expiringKeyCount() int { return o.store.expiringLen() }

func (o *storeOwner) expiredKeys() uint64 { return 0 }

func (o *storeOwner) ownedKeyCount() int {
	count := 0
	for seg := range o.layout.Segments {
		if o.ownsPartition(o.layout.SegmentPartition(seg)) {
			count += o.store.segmentLen(seg)
		}
	}
	return count
}

// newStoreOwner returns a storeOwner over an empty store of 64 partitions.
func newStoreOwner() *storeOwner {
	layout, _ := NewLayout(64, 8)
	return &storeOwner{layout: layout, store: newStore(layout.Segments, systemClock{})}
}

// startBareRESP serves RESP as node "a" from owner, a storeOwner over layout or a wrapper of one, with no
// node behind it. The map, at version 1, gives "a" and "b" RESP addresses 127.0.0.1:7001 and :7002, so
// MOVED replies name "b" at 127.0.0.1:7002. tweak, if not nil, adjusts the default config.
func startBareRESP(t *testing.T, owner keyOwner, layout Layout, tweak func(*Config)) *respServer {
	t.Helper()
	m := newClusterMap(layout, 1)
	m.Version = 1
	m.Nodes = map[NodeID]NodeInfo{"a": {ID: "a", RESPAddr: "127.0.0.1:7001"}, "b": {ID: "b", RESPAddr: "127.0.0.1:7002"}}
	cfg := DefaultConfig().withDefaults()
	if tweak != nil {
		tweak(&cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newRESPServer(&cfg, owner, "a", func() *ClusterMap { return m }, testLogger(), ln.Addr().String())
	s.serve(ln)
	t.Cleanup(func() { s.close() })
	return s
}

// TestRESPServerAlone runs the RESP endpoint on a bare store, without a node: owned keys are served from
// the store, the others are answered MOVED to the owner the map names, and INFO counts the store's keys.
func TestRESPServerAlone(t *testing.T) {
	owner := newStoreOwner()
	s := startBareRESP(t, owner, owner.layout, nil)

	var mine, theirs string
	for i := 0; mine == "" || theirs == ""; i++ {
		key := fmt.Sprintf("k%d", i)
		if owner.owns(key) {
			mine = key
		} else {
			theirs = key
		}
	}
	c := dialRaw(t, s.addr)
	for _, step := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"SET", mine, "v1"}, "+OK"},
		{[]string{"GET", mine}, "$2"},
		{[]string{"INCR", mine}, "-ERR value is not an integer or out of range"},
		{[]string{"GET", theirs}, fmt.Sprintf("-MOVED %d 127.0.0.1:7002", KeySlot(theirs))},
		{[]string{"SET", theirs, "v"}, fmt.Sprintf("-MOVED %d 127.0.0.1:7002", KeySlot(theirs))},
	} {
		c.send(respCmd(step.cmd...))
		if got := c.line(); got != step.want {
			t.Fatalf("%v: got %q; want %q", step.cmd, got, step.want)
		}
		if step.want == "$2" {
			if got := c.line(); got != "v1" {
				t.Fatalf("GET %s = %q; want v1", mine, got)
			}
		}
	}
	if got := owner.store.len(); got != 1 {
		t.Fatalf("the store holds %d keys; want 1: a refused write reached it", got)
	}
	c.send(respCmd("INFO"))
	keyspace := c.line()
	for !strings.HasPrefix(keyspace, "db0:") {
		keyspace = c.line()
	}
	if keyspace != "db0:keys=1,expires=0,avg_ttl=0" {
		t.Fatalf("INFO keyspace = %q; want the store's one key", keyspace)
	}
}
