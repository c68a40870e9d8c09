package resp

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/glob"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/pubsub"
	"github.com/zaris-go/zaris/transport"
)

// fakeNode is a Node over a map of string values, as node "a" owning the slots below half of the key space
// and naming node "b", at 127.0.0.1:7002, the owner of the rest: enough to serve RESP without a cluster.
// It knows the operations of strings only; the others are refused as invalid.
type fakeNode struct {
	mu       sync.Mutex
	values   map[string][]byte
	versions map[string]uint64
	version  uint64
	memory   fakeMemory
	members  map[kv.NodeID]MemberState
	control  Control
	hub      *pubsub.Hub // this node's subscribers; the fake has no other node to publish to
}

func newFakeNode() *fakeNode {
	return &fakeNode{values: map[string][]byte{}, versions: map[string]uint64{},
		members: map[kv.NodeID]MemberState{"a": MemberAlive, "b": MemberAlive}, control: Control{Leader: "a"},
		memory: fakeMemory{policy: "noeviction"}, hub: pubsub.New()}
}

func (f *fakeNode) Publish(shard bool, channel string, payload []byte) int {
	return f.hub.Publish(shard, channel, payload)
}

// ServesShard serves the slots CheckOwner owns.
func (f *fakeNode) ServesShard(channel string) (kv.Reply, bool) {
	_, refusal, ok := f.CheckOwner(channel)
	return refusal, ok
}

// fakeHalf is the first slot node "a" does not own.
const fakeHalf = kv.NumSlots / 2

func (f *fakeNode) CheckOwner(key string) (int, kv.Reply, bool) {
	if kv.KeySlot(key) >= fakeHalf {
		return 1, kv.Reply{Status: kv.StatusMoved, Owner: "b", Epoch: 1, MapIndex: 1}, false
	}
	return 0, kv.Reply{}, true
}

func (f *fakeNode) ApplyKV(_ context.Context, op transport.Op, _ int, req *kv.Request) kv.Reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.apply(op, req)
}

// apply runs a string operation; f.mu is held.
func (f *fakeNode) apply(op transport.Op, req *kv.Request) kv.Reply {
	old, found := f.values[req.Key]
	switch op {
	case kv.OpGet:
		if !found {
			return kv.Reply{Status: kv.StatusNotFound}
		}
		return kv.Reply{Value: old, Version: f.versions[req.Key]}
	case kv.OpExists:
		return kv.Reply{Int: kv.BoolInt(found)}
	case kv.OpType:
		if !found {
			return kv.Reply{Value: []byte("none")}
		}
		return kv.Reply{Value: []byte("string")}
	case kv.OpTTL:
		if !found {
			return kv.Reply{Status: kv.StatusNotFound}
		}
		return kv.Reply{Int: -1}
	case kv.OpDelete:
		delete(f.values, req.Key)
		return kv.Reply{Int: kv.BoolInt(found)}
	case kv.OpPut:
		return f.put(req.Key, req.Value)
	case kv.OpPutIf:
		if req.Cond&kv.CondIfAbsent != 0 && found || req.Cond&kv.CondIfExists != 0 && !found {
			return kv.Reply{Status: kv.StatusVersionMismatch, Existed: found, Value: old}
		}
		reply := f.put(req.Key, req.Value)
		reply.Existed, reply.Value = found, old
		return reply
	case kv.OpIncr:
		n := int64(0)
		if found {
			var ok bool
			if n, ok = kv.ParseCanonicalInt(old); !ok {
				return kv.Reply{Status: kv.StatusInvalidRequest}
			}
		}
		n += req.Delta
		reply := f.put(req.Key, []byte(strconv.FormatInt(n, 10)))
		reply.Int = n
		return reply
	}
	return kv.Reply{Status: kv.StatusInvalidRequest}
}

func (f *fakeNode) put(key string, value []byte) kv.Reply {
	f.version++
	f.values[key], f.versions[key] = bytes.Clone(value), f.version
	return kv.Reply{Version: f.version}
}

func (f *fakeNode) ApplyAtomically(_ context.Context, _ int, _ []string, fn func(kv.Group)) kv.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(fakeGroup{f})
	return kv.StatusSuccess
}

func (f *fakeNode) ReadAtomically(ctx context.Context, seg int, keys []string, fn func(kv.Group)) kv.Status {
	return f.ApplyAtomically(ctx, seg, keys, fn)
}

// fakeReplicated is the end of the slots past fakeHalf that node "a" holds a copy of as a replica.
const fakeReplicated = kv.NumSlots * 3 / 4

func (f *fakeNode) CheckReplica(key string) (int, bool) {
	slot := kv.KeySlot(key)
	return 1, slot >= fakeHalf && slot < fakeReplicated
}

func (f *fakeNode) ReadReplica(op transport.Op, _ int, req *kv.Request) kv.Reply {
	if !f.ReadOnly(op) {
		return kv.Reply{Status: kv.StatusInvalidRequest}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.apply(op, req)
}

func (f *fakeNode) ReadReplicaAtomically(seg int, keys []string, fn func(kv.Group)) kv.Status {
	return f.ApplyAtomically(context.Background(), seg, keys, fn)
}

func (f *fakeNode) ReadOnly(op transport.Op) bool {
	return op == kv.OpGet || op == kv.OpExists || op == kv.OpTTL || op == kv.OpType
}

func (f *fakeNode) ServeOwnedScan(_ context.Context, req *kv.ScanRequest) kv.ScanReply {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for key := range f.values {
		if req.Match == nil || glob.Match(req.Match, []byte(key), false) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return kv.ScanReply{Keys: keys, Next: kv.ScanDone}
}

func (f *fakeNode) KeyCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.values)
}

func (f *fakeNode) ExpiringKeyCount() int             { return 0 }
func (f *fakeNode) OwnedKeyCount() int                { return f.KeyCount() }
func (f *fakeNode) ExpiredKeys() uint64               { return 0 }
func (f *fakeNode) Messages() (sent, received uint64) { return 0, 0 }
func (f *fakeNode) Memory() Memory                    { return &f.memory }

func (f *fakeNode) Replication() Replication {
	return Replication{History: strings.Repeat("ab", 20), Offset: f.version}
}

func (f *fakeNode) Topology() *Topology {
	return &Topology{
		Version: 1,
		Nodes:   map[kv.NodeID]NodeAddrs{"a": {RESPAddr: "127.0.0.1:7001"}, "b": {RESPAddr: "127.0.0.1:7002"}},
		Partitions: []Partition{
			{First: 0, Last: fakeHalf - 1, Owner: "a", Assigned: true, Epoch: 1},
			{First: fakeHalf, Last: kv.NumSlots - 1, Owner: "b", Assigned: true, Epoch: 1},
		},
	}
}

func (f *fakeNode) Members() map[kv.NodeID]MemberState { return f.members }
func (f *fakeNode) Control() Control                   { return f.control }

func (f *fakeNode) Recover(context.Context) (string, error) { return "", ErrQuorumReachable }
func (f *fakeNode) Backup(_ context.Context, dir string, _ int64) (string, error) {
	return "backup " + dir, nil
}
func (f *fakeNode) Restore(_ context.Context, dir string, replace bool) (string, error) {
	return "restored " + dir + map[bool]string{true: ", replacing", false: ""}[replace], nil
}

// fakeGroup runs a group's operations on the fake node, whose lock its ApplyAtomically holds.
type fakeGroup struct{ f *fakeNode }

func (g fakeGroup) Apply(op transport.Op, req *kv.Request) (kv.Reply, bool) {
	return g.f.apply(op, req), false
}
func (g fakeGroup) Version(key string) uint64 { return g.f.versions[key] }
func (g fakeGroup) HasRoom(int) bool          { return true }
func (g fakeGroup) Abandon()                  {}
func (g fakeGroup) Mark() kv.GroupMark        { return kv.GroupMark{} }
func (g fakeGroup) RollbackTo(kv.GroupMark)   {}

// fakeMemory is a memory bound that bounds nothing.
type fakeMemory struct {
	mu     sync.Mutex
	limit  int64
	policy string
}

func (m *fakeMemory) Limit() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.limit
}

func (m *fakeMemory) PolicyName() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.policy
}

func (m *fakeMemory) SetMax(limit int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.limit = limit
	return nil
}

func (m *fakeMemory) SetPolicy(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.policy = name
	return nil
}

func (m *fakeMemory) Policies() []string   { return []string{"noeviction", "allkeys-lru"} }
func (m *fakeMemory) Evicted() uint64      { return 0 }
func (m *fakeMemory) CheckMax(int64) error { return nil }

// fakeOptions are the endpoint's settings as node "a" at 127.0.0.1:7001.
func fakeOptions() Options {
	return Options{
		ID: "a", Addr: "127.0.0.1:7001", MaxValueSize: 1 << 20, MaxClients: 64, MaxPreAuthPerAddr: 16,
		MaxQueryBuffer: 1<<20 + PreAuthMaxQuery, MaxQueryBufferTotal: 64 << 20,
		Clock: clocktest.New(time.Unix(1_700_000_000, 0)), Log: slog.New(slog.DiscardHandler),
	}
}

// serveFake serves node over RESP on a loopback port under opt, until the test ends.
func serveFake(t testing.TB, node Node, opt Options) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := node.(*fakeNode); ok && opt.PubSub == nil {
		opt.PubSub = f.hub
	}
	s := NewServer(node, opt)
	s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s
}

// client is a raw RESP connection to a test server.
type client struct {
	t    testing.TB
	conn net.Conn
	rd   *bufio.Reader
}

func dial(t testing.TB, s *Server) *client {
	t.Helper()
	conn, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{t: t, conn: conn, rd: bufio.NewReader(conn)}
}

// do sends a command and returns the first line of its reply, without its CRLF.
func (c *client) do(args ...string) string {
	c.t.Helper()
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.conn, encodeCommand(args...)); err != nil {
		c.t.Fatal(err)
	}
	return c.line()
}

// line reads one line of a reply, without its CRLF.
func (c *client) line() string {
	c.t.Helper()
	line, err := c.rd.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (after %q)", err, line)
	}
	return strings.TrimSuffix(line, "\r\n")
}

// encodeCommand writes args as a RESP array of bulk strings, as clients send commands.
func encodeCommand(args ...string) string {
	var b bytes.Buffer
	w := newRESPWriter(&b)
	w.array(len(args))
	for _, a := range args {
		w.bulkString(a)
	}
	w.flush()
	return b.String()
}
