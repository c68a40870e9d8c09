package zaris

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/resp"
	"github.com/zaris-go/zaris/transport"
)

// storeOwner is a keyOwner over a bare store that owns the slots below half of the key space and names
// node "b" as the owner of the rest: enough to run the RESP endpoint without a cluster.
type storeOwner struct {
	layout     Layout
	store      *store
	clusterMap *ClusterMap
}

func (o *storeOwner) owns(key string) bool { return KeySlot(key) < NumSlots/2 }

// Publish has no subscribers to deliver to: a bare endpoint's hub is its own.
func (o *storeOwner) Publish(bool, string, []byte) int { return 0 }

func (o *storeOwner) ServesShard(channel string) (kv.Reply, bool) {
	_, refusal, ok := o.CheckOwner(channel)
	return refusal, ok
}

func (o *storeOwner) CheckOwner(key string) (int, kv.Reply, bool) {
	seg := o.layout.KeySegment(key)
	if !o.owns(key) {
		return seg, kv.Reply{Status: StatusMoved, Owner: "b", Epoch: 1, MapIndex: 1}, false
	}
	return seg, kv.Reply{}, true
}

func (o *storeOwner) ApplyKV(_ context.Context, op transport.Op, seg int, req *kv.Request) kv.Reply {
	return lookupKeyOp(op).apply(o.store, seg, *req, testOpLimits)
}

func (o *storeOwner) ApplyAtomically(_ context.Context, seg int, _ []string, fn func(kv.Group)) Status {
	o.store.atomically(seg, func(g *store) { fn(&storeGroup{g: g, seg: seg, lim: testOpLimits}) })
	return StatusSuccess
}

func (o *storeOwner) ReadAtomically(_ context.Context, seg int, _ []string, fn func(kv.Group)) Status {
	o.store.readAtomically(seg, func(g *store) { fn(&storeGroup{g: g, seg: seg, lim: testOpLimits, read: true}) })
	return StatusSuccess
}

// testOpLimits are the limits a storeOwner runs key operations under.
var testOpLimits = opLimits{maxValueSize: 1 << 20, maxReplyBytes: 1 << 20}

func (o *storeOwner) KeyCount() int { return o.store.len() }

// ownsPartition reports whether the owner's half of the key space holds partition p.
func (o *storeOwner) ownsPartition(p int) bool {
	first, _ := o.layout.PartitionSlots(p)
	return first < NumSlots/2
}

func (o *storeOwner) ServeOwnedScan(_ context.Context, req *kv.ScanRequest) kv.ScanReply {
	return testPager(o.store, o.layout, o.ownsPartition).page(req, scanOwned).reply
}

// Replication describes the owner as a primary without replicas, at the revisions of its segments.
func (o *storeOwner) Replication() resp.Replication {
	info := resp.Replication{History: strings.Repeat("ab", 20)}
	for seg := range o.layout.Segments {
		if o.ownsPartition(o.layout.SegmentPartition(seg)) {
			info.Offset += o.store.revision(seg)
		}
	}
	return info
}

func (o *storeOwner) Messages() (sent, received uint64) { return 0, 0 }

func (o *storeOwner) ExpiringKeyCount() int { return o.store.expiringLen() }

func (o *storeOwner) ExpiredKeys() uint64 { return 0 }

func (o *storeOwner) OwnedKeyCount() int {
	count := 0
	for seg := range o.layout.Segments {
		if o.ownsPartition(o.layout.SegmentPartition(seg)) {
			count += o.store.segmentLen(seg)
		}
	}
	return count
}

func (o *storeOwner) ReadOnly(op transport.Op) bool { return readOnly(op) }

// CheckReplica: a bare store replicates nothing.
func (o *storeOwner) CheckReplica(key string) (int, bool) { return o.layout.KeySegment(key), false }
func (o *storeOwner) ReadReplica(transport.Op, int, *kv.Request) kv.Reply {
	return kv.Reply{Status: StatusMoved}
}
func (o *storeOwner) ReadReplicaAtomically(int, []string, func(kv.Group)) Status { return StatusMoved }
func (o *storeOwner) Topology() *resp.Topology                                   { return describeTopology(o.clusterMap) }
func (o *storeOwner) Control() resp.Control                                      { return resp.Control{Leader: "a"} }
func (o *storeOwner) Memory() resp.Memory                                        { return edgeMemory{o.store.budget} }

func (o *storeOwner) Members() map[NodeID]resp.MemberState {
	return map[NodeID]resp.MemberState{"a": resp.MemberAlive, "b": resp.MemberAlive}
}

func (o *storeOwner) Recover(context.Context) (string, error) {
	return "", errors.New("RECOVER needs a node")
}

func (o *storeOwner) Backup(context.Context, string, int64) (string, error) {
	return "", errors.New("a bare store takes no backups")
}

func (o *storeOwner) Restore(context.Context, string, bool) (string, error) {
	return "", errors.New("a bare store restores no backups")
}

// newStoreOwner returns a storeOwner over an empty store of 64 partitions. Its map, at version 1, gives "a"
// and "b" RESP addresses 127.0.0.1:7001 and :7002, so MOVED replies name "b" at 127.0.0.1:7002.
func newStoreOwner() *storeOwner {
	layout, _ := NewLayout(64, 8)
	m := newClusterMap(layout, 1)
	m.Version = 1
	m.Nodes = map[NodeID]NodeInfo{"a": {ID: "a", RESPAddr: "127.0.0.1:7001"}, "b": {ID: "b", RESPAddr: "127.0.0.1:7002"}}
	for p := range m.Runtime {
		m.Runtime[p].Owner = "b"
		if first, _ := layout.PartitionSlots(p); first < NumSlots/2 {
			m.Runtime[p].Owner = "a"
		}
	}
	return &storeOwner{layout: layout, store: newStore(layout.Segments, systemClock{}), clusterMap: m}
}

// startBareRESP serves RESP as node "a" from node, a storeOwner or a wrapper of one, with no node behind it.
// tweak, if not nil, adjusts the default config.
func startBareRESP(t *testing.T, node resp.Node, tweak func(*Config)) *resp.Server {
	t.Helper()
	cfg := DefaultConfig().withDefaults()
	if tweak != nil {
		tweak(&cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := resp.NewServer(node, respOptions(&cfg, "a", ln.Addr().String(), testLogger()))
	s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRESPServerAlone runs the RESP endpoint on a bare store, without a node: owned keys are served from
// the store, the others are answered MOVED to the owner the map names, and INFO counts the store's keys.
func TestRESPServerAlone(t *testing.T) {
	owner := newStoreOwner()
	s := startBareRESP(t, owner, nil)

	var mine, theirs string
	for i := 0; mine == "" || theirs == ""; i++ {
		key := fmt.Sprintf("k%d", i)
		if owner.owns(key) {
			mine = key
		} else {
			theirs = key
		}
	}
	c := dialRaw(t, s.Addr())
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
