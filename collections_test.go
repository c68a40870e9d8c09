package zaris

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// replicatedPair is an owner's store whose every write goes, as the op a replica receives (encoded and
// decoded as on the wire and the disk), to a replica's store. It records the ops.
type replicatedPair struct {
	owner, replica *store
	clock          *clocktest.Manual
	ops            []durability.Op
}

func newReplicatedPair(t *testing.T) *replicatedPair {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	p := &replicatedPair{owner: newStore(1, clock), replica: newStore(1, clock), clock: clock}
	p.owner.onWrite = func(seg int, rev, _ uint64, key string, next *entry, change writeChange) {
		op := opOfWrite(seg, rev, key, next, change)
		decoded, _, err := durability.DecodeOp(durability.AppendOp(nil, &op))
		if err != nil {
			t.Fatalf("the op of a write does not decode: %v", err)
		}
		p.ops = append(p.ops, decoded)
		if applied, have := p.replica.applyAt(seg, 1, &decoded); !applied {
			t.Fatalf("replica refused revision %d at %d", rev, have)
		}
	}
	return p
}

// do applies op to the owner.
func (p *replicatedPair) do(op transport.Op, key string, args ...string) kv.Reply {
	req := kv.Request{Key: key, Args: stringArgs(args)}
	return lookupKeyOp(op).apply(p.owner, 0, req, opLimits{maxValueSize: 1 << 20, maxReplyBytes: 1 << 20})
}

// read applies a read op to both stores and checks they answer the same.
func (p *replicatedPair) read(t *testing.T, op transport.Op, key string, args ...string) kv.Reply {
	t.Helper()
	req := kv.Request{Key: key, Args: stringArgs(args)}
	lim := opLimits{maxValueSize: 1 << 20, maxReplyBytes: 1 << 20}
	a, b := lookupKeyOp(op).apply(p.owner, 0, req, lim), lookupKeyOp(op).apply(p.replica, 0, req, lim)
	if !sameReply(a, b) && op != kv.OpSMembers && op != kv.OpHGetAll {
		t.Fatalf("%s %s %q: owner answers %s, replica %s", opName(op), key, args, describeReply(a), describeReply(b))
	}
	return a
}

func (p *replicatedPair) same(t *testing.T) {
	t.Helper()
	if a, b := p.owner.digest(0), p.replica.digest(0); a != b {
		t.Fatalf("owner %+v and replica %+v differ", a, b)
	}
}

func sameReply(a, b kv.Reply) bool {
	return a.Status == b.Status && a.Int == b.Int && bytes.Equal(a.Value, b.Value) && len(a.Values) == len(b.Values) &&
		slices.EqualFunc(a.Values, b.Values, func(x, y []byte) bool { return bytes.Equal(x, y) && (x == nil) == (y == nil) })
}

// describeReply shows a reply in tests: status, then Int, Value and Values.
func describeReply(r kv.Reply) string {
	s := fmt.Sprintf("%v %d", r.Status, r.Int)
	if r.Value != nil {
		s += fmt.Sprintf(" %q", r.Value)
	}
	if r.Values != nil {
		parts := make([]string, len(r.Values))
		for i, v := range r.Values {
			if v == nil {
				parts[i] = "nil"
			} else {
				parts[i] = string(v)
			}
		}
		s += " [" + strings.Join(parts, " ") + "]"
	}
	return s
}

type collectionStep struct {
	op   transport.Op
	key  string
	args []string
	want string
}

// collectionSteps exercise every collection command on a bare store. want is the reply as describeReply shows
// it; readers are checked on the replica too.
var collectionSteps = []collectionStep{
	{kv.OpHSet, "h", []string{"a", "1", "b", "2", "a", "3"}, "Success 2"},
	{kv.OpHSet, "h", []string{"b", "20", "c", "30"}, "Success 1"},
	{kv.OpHSet, "h", []string{"odd"}, "InvalidRequest 0 \"ERR wrong number of arguments for 'hset' command\""},
	{kv.OpHGet, "h", []string{"a"}, "Success 0 \"3\""},
	{kv.OpHGet, "h", []string{"zz"}, "NotFound 0"},
	{kv.OpHGet, "nohash", []string{"a"}, "NotFound 0"},
	{kv.OpHMGet, "h", []string{"a", "zz", "c"}, "Success 0 [3 nil 30]"},
	{kv.OpHMGet, "nohash", []string{"a"}, "NotFound 0 [nil]"},
	{kv.OpHLen, "h", nil, "Success 3"},
	{kv.OpHExists, "h", []string{"b"}, "Success 1"},
	{kv.OpHExists, "h", []string{"zz"}, "Success 0"},
	{kv.OpHIncrBy, "h", []string{"a", "5"}, "Success 8"},
	{kv.OpHIncrBy, "h", []string{"new", "-2"}, "Success -2"},
	{kv.OpHIncrBy, "h", []string{"a", "x"}, "InvalidRequest 0 \"ERR value is not an integer or out of range\""},
	{kv.OpHSet, "h", []string{"s", "str"}, "Success 1"},
	{kv.OpHIncrBy, "h", []string{"s", "1"}, "InvalidRequest 0 \"ERR hash value is not an integer\""},
	{kv.OpHIncrBy, "h", []string{"a", "9223372036854775807"}, "InvalidRequest 0 \"ERR increment or decrement would overflow\""},
	{kv.OpHDel, "h", []string{"s", "zz", "s"}, "Success 1"},
	{kv.OpHDel, "h", []string{"zz"}, "Success 0"},
	{kv.OpHGetAll, "h", nil, "Success 0 [a 8 b 20 c 30 new -2]"},
	{kv.OpHDel, "h", []string{"a", "b", "c", "new"}, "Success 4"},
	{kv.OpHLen, "h", nil, "NotFound 0"},
	{kv.OpHIncrBy, "fresh", []string{"n", "7"}, "Success 7"},
	{kv.OpHGetAll, "fresh", nil, "Success 0 [n 7]"},
	{kv.OpDelete, "fresh", nil, "Success 0"},
	{kv.OpType, "h", nil, "Success 0 \"none\""},

	{kv.OpSAdd, "s", []string{"x", "y", "x"}, "Success 2"},
	{kv.OpSAdd, "s", []string{"y", "z"}, "Success 1"},
	{kv.OpSAdd, "s", []string{"z"}, "Success 0"},
	{kv.OpSIsMember, "s", []string{"y"}, "Success 1"},
	{kv.OpSIsMember, "s", []string{"w"}, "Success 0"},
	{kv.OpSCard, "s", nil, "Success 3"},
	{kv.OpSMembers, "s", nil, "Success 0 [x y z]"},
	{kv.OpSRem, "s", []string{"x", "w"}, "Success 1"},
	{kv.OpSRem, "s", []string{"y", "z"}, "Success 2"},
	{kv.OpSCard, "s", nil, "NotFound 0"},

	{kv.OpRPush, "l", []string{"a", "b", "c"}, "Success 3"},
	{kv.OpLPush, "l", []string{"z", "y"}, "Success 5"},
	{kv.OpLRange, "l", []string{"0", "-1"}, "Success 0 [y z a b c]"},
	{kv.OpLRange, "l", []string{"-2", "100"}, "Success 0 [b c]"},
	{kv.OpLRange, "l", []string{"3", "1"}, "Success 0 []"},
	{kv.OpLRange, "l", []string{"a", "1"}, "InvalidRequest 0 \"ERR value is not an integer or out of range\""},
	{kv.OpLIndex, "l", []string{"-1"}, "Success 0 \"c\""},
	{kv.OpLIndex, "l", []string{"5"}, "NotFound 0"},
	{kv.OpLLen, "l", nil, "Success 5"},
	{kv.OpLPop, "l", nil, "Success 0 \"y\""},
	{kv.OpRPop, "l", []string{"2"}, "Success 0 [c b]"},
	{kv.OpLPop, "l", []string{"-1"}, "InvalidRequest 0 \"ERR value is out of range, must be positive\""},
	{kv.OpRPush, "l", []string{"d", "e", "f"}, "Success 5"},
	{kv.OpLTrim, "l", []string{"1", "-2"}, "Success 0"},
	{kv.OpLRange, "l", []string{"0", "-1"}, "Success 0 [a d e]"},
	{kv.OpLTrim, "l", []string{"0", "-1"}, "Success 0"},
	{kv.OpLPop, "l", []string{"0"}, "Success 0 []"},
	{kv.OpLPop, "nolist", nil, "NotFound 0"},
	{kv.OpLPop, "l", []string{"10"}, "Success 0 [a d e]"},
	{kv.OpLLen, "l", nil, "NotFound 0"},
	{kv.OpRPush, "l", []string{"a", "b"}, "Success 2"},
	{kv.OpLTrim, "l", []string{"5", "10"}, "Success 0"},
	{kv.OpLLen, "l", nil, "NotFound 0"},

	{kv.OpZAdd, "z", []string{"1", "a", "2", "b", "3", "c"}, "Success 3"},
	{kv.OpZAdd, "z", []string{"ch", "1", "a", "5", "b", "0.5", "d"}, "Success 2"},
	{kv.OpZAdd, "z", []string{"nx", "9", "a", "9", "e"}, "Success 1"},
	{kv.OpZAdd, "z", []string{"xx", "4", "a", "4", "f"}, "Success 0"},
	{kv.OpZAdd, "z", []string{"gt", "ch", "1", "a", "10", "c"}, "Success 1"},
	{kv.OpZAdd, "z", []string{"incr", "2", "a"}, "Success 0 \"6\""},
	{kv.OpZAdd, "z", []string{"nx", "incr", "2", "a"}, "Success 0"},
	{kv.OpZAdd, "z", []string{"nx", "xx", "1", "a"}, "InvalidRequest 0 \"ERR XX and NX options at the same time are not compatible\""},
	{kv.OpZAdd, "z", []string{"1", "a", "2"}, "InvalidRequest 0 \"ERR syntax error\""},
	{kv.OpZAdd, "z", []string{"x", "a"}, "InvalidRequest 0 \"ERR value is not a valid float\""},
	{kv.OpZRange, "z", []string{"0", "-1", "withscores"}, "Success 0 [d 0.5 b 5 a 6 e 9 c 10]"},
	{kv.OpZRange, "z", []string{"0", "1", "rev"}, "Success 0 [c e]"},
	{kv.OpZRange, "z", []string{"(5", "+inf", "byscore", "limit", "1", "2"}, "Success 0 [e c]"},
	{kv.OpZRange, "z", []string{"9", "-inf", "byscore", "rev"}, "Success 0 [e a b d]"},
	{kv.OpZRange, "z", []string{"x", "1", "byscore"}, "InvalidRequest 0 \"ERR min or max is not a float\""},
	{kv.OpZScore, "z", []string{"a"}, "Success 0 \"6\""},
	{kv.OpZScore, "z", []string{"zz"}, "NotFound 0"},
	{kv.OpZRank, "z", []string{"e"}, "Success 3"},
	{kv.OpZRank, "z", []string{"zz"}, "NotFound -1"},
	{kv.OpZIncrBy, "z", []string{"1.5", "d"}, "Success 0 \"2\""},
	{kv.OpZCard, "z", nil, "Success 5"},
	{kv.OpZRem, "z", []string{"a", "zz", "a"}, "Success 1"},
	{kv.OpZRange, "z", []string{"0", "-1"}, "Success 0 [d b e c]"},
	{kv.OpType, "z", nil, "Success 0 \"zset\""},
	{kv.OpZRem, "z", []string{"d", "b", "e", "c"}, "Success 4"},
	{kv.OpZCard, "z", nil, "NotFound 0"},

	{kv.OpHSetNX, "hn", []string{"f", "1"}, "Success 1"},
	{kv.OpHSetNX, "hn", []string{"f", "2"}, "Success 0"},
	{kv.OpHGet, "hn", []string{"f"}, "Success 0 \"1\""},
	{kv.OpHSetNX, "hn", []string{"f"}, "InvalidRequest 0 \"ERR wrong number of arguments for 'hsetnx' command\""},
	{kv.OpHSetNX, "zp", []string{"f", "1"}, "Success 1"},
	{kv.OpHSetNX, "lm", []string{"f", "1"}, "Success 1"},
	{kv.OpZAdd, "zp", []string{"3", "c", "1", "a", "2", "b", "4", "d"}, "WrongType 0"},
	{kv.OpDelete, "zp", nil, "Success 0"},
	{kv.OpZAdd, "zp", []string{"3", "c", "1", "a", "2", "b", "4", "d"}, "Success 4"},
	{kv.OpZPopMin, "zp", nil, "Success 0 [a 1]"},
	{kv.OpZPopMax, "zp", []string{"2"}, "Success 0 [d 4 c 3]"},
	{kv.OpZPopMax, "zp", []string{"0"}, "Success 0 []"},
	{kv.OpZPopMin, "zp", []string{"-1"}, "InvalidRequest 0 \"ERR value is out of range, must be positive\""},
	{kv.OpZPopMin, "zp", []string{"9"}, "Success 0 [b 2]"},
	{kv.OpZPopMin, "zp", nil, "NotFound 0"},
	{kv.OpZPopMin, "hn", nil, "WrongType 0"},
	{kv.OpSAdd, "sp", []string{"a", "b", "c"}, "Success 3"},
	{kv.OpSPop, "sp", []string{"2"}, "Success 0 [2 values]"},
	{kv.OpSPop, "sp", []string{"5"}, "Success 0 [1 values]"},
	{kv.OpSPop, "sp", nil, "NotFound 0"},
	{kv.OpSPop, "hn", nil, "WrongType 0"},
	{kv.OpSPop, "sp", []string{"1", "2"}, "InvalidRequest 0 \"ERR wrong number of arguments for 'spop' command\""},
	{kv.OpRPush, "{l}a", []string{"1", "2", "3"}, "Success 3"},
	{kv.OpLMove, "{l}a", []string{"{l}b", "left", "RIGHT"}, "Success 0 \"1\""},
	{kv.OpLMove, "{l}a", []string{"{l}b", "right", "left"}, "Success 0 \"3\""},
	{kv.OpLRange, "{l}b", []string{"0", "-1"}, "Success 0 [3 1]"},
	{kv.OpLMove, "{l}b", []string{"{l}b", "left", "right"}, "Success 0 \"3\""},
	{kv.OpLRange, "{l}b", []string{"0", "-1"}, "Success 0 [1 3]"},
	{kv.OpLMove, "{l}a", []string{"lm", "left", "left"}, "WrongType 0"},
	{kv.OpLRange, "{l}a", []string{"0", "-1"}, "Success 0 [2]"},
	{kv.OpLMove, "{l}a", []string{"{l}b", "up", "left"}, "InvalidRequest 0 \"ERR syntax error\""},
	{kv.OpLMove, "{l}a", []string{"{l}b", "left", "left"}, "Success 0 \"2\""},
	{kv.OpLLen, "{l}a", nil, "NotFound 0"},
	{kv.OpLMove, "{l}a", []string{"{l}b", "left", "left"}, "NotFound 0"},
	{kv.OpLMove, "hn", []string{"{l}b", "left", "left"}, "WrongType 0"},
}

// TestCollectionCommands runs every collection command on an owner's bare store and checks its reply, and
// that a replica applying the ops each write produced holds the same after every step.
func TestCollectionCommands(t *testing.T) {
	p := newReplicatedPair(t)
	tested := map[transport.Op]bool{}
	for i, step := range collectionSteps {
		tested[step.op] = true
		var reply kv.Reply
		if lookupKeyOp(step.op).readOnly {
			reply = p.read(t, step.op, step.key, step.args...)
		} else {
			reply = p.do(step.op, step.key, step.args...)
		}
		got := describeReply(reply)
		switch step.op {
		case kv.OpSMembers, kv.OpHGetAll:
			got = describeSorted(reply, step.op == kv.OpHGetAll)
		case kv.OpSPop: // members chosen at random: only how many
			if reply.Values != nil {
				reply.Values = [][]byte{[]byte(fmt.Sprintf("%d values", len(reply.Values)))}
			}
			got = describeReply(reply)
		}
		if got != step.want {
			t.Errorf("step %d: %s %s %q = %s, want %s", i, opName(step.op), step.key, step.args, got, step.want)
		}
		p.same(t)
	}
	for _, op := range append(opRange(kv.OpHSet, kv.OpHSetNX), kv.OpLMove) {
		if !tested[op] {
			t.Errorf("%s has no step", opName(op))
		}
	}
}

// opRange lists the operations numbered from first to last.
func opRange(first, last transport.Op) []transport.Op {
	var ops []transport.Op
	for op := first; op <= last; op++ {
		ops = append(ops, op)
	}
	return ops
}

// describeSorted describes a reply whose values come in no order, sorted (by pairs when pairs is set).
func describeSorted(r kv.Reply, pairs bool) string {
	stride := 1
	if pairs {
		stride = 2
	}
	var groups [][][]byte
	for i := 0; i+stride <= len(r.Values); i += stride {
		groups = append(groups, r.Values[i:i+stride])
	}
	sort.Slice(groups, func(i, j int) bool { return string(groups[i][0]) < string(groups[j][0]) })
	r.Values = slices.Concat(groups...)
	return describeReply(r)
}

// TestCollectionKinds checks what the string operations and the collection ones do to keys of the other
// kind: WRONGTYPE for reads and writes of contents, while DEL, EXISTS, TTLs and SET work on every kind.
func TestCollectionKinds(t *testing.T) {
	p := newReplicatedPair(t)
	for _, k := range []struct {
		key, kind string
		create    transport.Op
		args      []string
	}{{"h", "hash", kv.OpHSet, []string{"f", "v"}}, {"s", "set", kv.OpSAdd, []string{"m"}},
		{"l", "list", kv.OpRPush, []string{"i"}}, {"z", "zset", kv.OpZAdd, []string{"1", "m"}}} {
		if r := p.do(k.create, k.key, k.args...); r.Status != StatusSuccess {
			t.Fatalf("create %s: %s", k.key, describeReply(r))
		}
		if got := describeReply(p.read(t, kv.OpType, k.key)); got != fmt.Sprintf("Success 0 %q", k.kind) {
			t.Errorf("type %s = %s", k.key, got)
		}
		for _, op := range []transport.Op{kv.OpGet, kv.OpIncr, kv.OpIncrByFloat, kv.OpAppend, kv.OpGetDel, kv.OpGetEx, kv.OpSetRange, kv.OpHGet, kv.OpSIsMember, kv.OpLIndex, kv.OpZScore, kv.OpHSet, kv.OpSAdd, kv.OpRPush, kv.OpZAdd} {
			if op == kv.OpHSet && k.create == kv.OpHSet || op == kv.OpSAdd && k.create == kv.OpSAdd || op == kv.OpRPush && k.create == kv.OpRPush ||
				op == kv.OpZAdd && k.create == kv.OpZAdd || op == kv.OpHGet && k.create == kv.OpHSet || op == kv.OpSIsMember && k.create == kv.OpSAdd ||
				op == kv.OpLIndex && k.create == kv.OpRPush || op == kv.OpZScore && k.create == kv.OpZAdd {
				continue
			}
			args := []string{"1", "1"}
			if op == kv.OpHGet || op == kv.OpSIsMember || op == kv.OpLIndex || op == kv.OpZScore {
				args = args[:1]
			}
			req := kv.Request{Key: k.key, Args: stringArgs(args), Delta: 1, Value: []byte("1")}
			if r := lookupKeyOp(op).apply(p.owner, 0, req, opLimits{maxValueSize: 64, maxReplyBytes: 64}); r.Status != StatusWrongType {
				t.Errorf("%s on a %s: %s, want WrongType", opName(op), k.kind, describeReply(r))
			}
		}
		swap := lookupKeyOp(kv.OpPutIf).apply(p.owner, 0, kv.Request{Key: k.key, Value: []byte("v"), Cond: kv.CondReturnPrev}, testLimits)
		if swap.Status != StatusWrongType {
			t.Errorf("SET GET on a %s: %s, want WrongType", k.kind, describeReply(swap))
		}
		if !p.owner.expire(0, k.key, time.Minute) {
			t.Errorf("expire %s found nothing", k.key)
		}
		last := p.ops[len(p.ops)-1]
		if last.Kind != durability.OpExpireAt || last.ExpireAt == 0 || len(last.Value) > 8 {
			t.Errorf("expire of a %s replicated as %v with %d bytes, want an expiry op", k.kind, last.Kind, len(last.Value))
		}
		if ttl, ok := p.replica.ttl(0, k.key); !ok || ttl != time.Minute {
			t.Errorf("replica's ttl of %s = %v, %v", k.key, ttl, ok)
		}
		if existed, dropped := p.owner.persist(0, k.key); !existed || !dropped {
			t.Errorf("persist %s = %v, %v", k.key, existed, dropped)
		}
		p.same(t)
	}
	p.owner.put(0, "h", []byte("now a string"), forTTL(0))
	if got := describeReply(p.read(t, kv.OpType, "h")); got != `Success 0 "string"` {
		t.Errorf("SET over a hash left type %s", got)
	}
	if !p.owner.remove(0, "s") {
		t.Error("DEL of a set found nothing")
	}
	if r := p.read(t, kv.OpExists, "l"); r.Status != StatusSuccess {
		t.Errorf("EXISTS of a list: %s", describeReply(r))
	}
	p.owner.expire(0, "z", time.Second)
	p.clock.Advance(time.Second)
	if r := p.do(kv.OpZAdd, "z", "2", "n"); r.Status != StatusSuccess || r.Int != 1 {
		t.Errorf("ZADD on an expired sorted set: %s", describeReply(r))
	}
	if got := describeReply(p.read(t, kv.OpZRange, "z", "0", "-1")); got != "Success 0 [n]" {
		t.Errorf("an expired sorted set came back: %s", got)
	}
	p.same(t)
}

// TestCollectionWriteShipsItsChange checks that a write to a large collection produces an op the size of
// its arguments, not of the collection, for every kind.
func TestCollectionWriteShipsItsChange(t *testing.T) {
	t.Parallel()
	p := newReplicatedPair(t)
	value := strings.Repeat("v", 100)
	for i := range 10_000 {
		m := fmt.Sprintf("member-%05d", i)
		p.do(kv.OpHSet, "h", m, value)
		p.do(kv.OpSAdd, "s", m)
		p.do(kv.OpRPush, "l", value)
		p.do(kv.OpZAdd, "z", fmt.Sprint(i), m)
	}
	p.ops = nil
	for _, step := range []struct {
		op   transport.Op
		key  string
		args []string
	}{
		{kv.OpHSet, "h", []string{"member-00001", "new"}}, {kv.OpHIncrBy, "h", []string{"n", "1"}}, {kv.OpHDel, "h", []string{"member-00002"}},
		{kv.OpSAdd, "s", []string{"new"}}, {kv.OpSRem, "s", []string{"member-00003"}},
		{kv.OpLPush, "l", []string{"new"}}, {kv.OpRPop, "l", []string{"3"}}, {kv.OpLTrim, "l", []string{"1", "-2"}},
		{kv.OpZAdd, "z", []string{"0.5", "new"}}, {kv.OpZIncrBy, "z", []string{"2", "member-00004"}}, {kv.OpZRem, "z", []string{"member-00005"}},
	} {
		if r := p.do(step.op, step.key, step.args...); r.Version == 0 {
			t.Fatalf("%s wrote nothing: %s", opName(step.op), describeReply(r))
		}
		op := p.ops[len(p.ops)-1]
		if size := len(durability.AppendOp(nil, &op)); size > 128 {
			t.Errorf("%s on a collection of 10000 elements shipped %d bytes", opName(step.op), size)
		}
	}
	p.same(t)
}

// TestCollectionSnapshotRoundTrip checks that collections survive a snapshot through the durability
// encoding, a large one split in entries of bounded size.
func TestCollectionSnapshotRoundTrip(t *testing.T) {
	p := newReplicatedPair(t)
	value := strings.Repeat("v", 1000)
	for i := range 2_000 {
		p.do(kv.OpHSet, "big", fmt.Sprintf("f%d", i), value)
	}
	p.do(kv.OpSAdd, "s", "a", "b")
	p.do(kv.OpRPush, "l", "x", "y", "x")
	p.do(kv.OpZAdd, "z", "1", "a", "-inf", "b")
	p.owner.put(0, "str", []byte("v"), forTTL(time.Hour))
	p.owner.expire(0, "l", time.Hour)
	rev, entries := p.owner.snapshot(0)
	pieces := 0
	for _, e := range entries {
		if e.Key == "big" {
			pieces++
			if len(e.Value) > collectionChunkBytes+2*len(value) {
				t.Errorf("a snapshot entry holds %d bytes", len(e.Value))
			}
		}
	}
	if pieces < 2 {
		t.Errorf("a hash of 2 MB went in %d snapshot entries", pieces)
	}
	snap := durability.Snapshot{Revision: rev, Entries: entries}
	decoded, err := durability.DecodeSnapshot(durability.AppendSnapshot(nil, &snap))
	if err != nil {
		t.Fatal(err)
	}
	restored := newStore(1, p.clock)
	restored.restore(0, decoded.Revision, decoded.Entries)
	if a, b := p.owner.digest(0), restored.digest(0); a != b || a.Keys != 5 {
		t.Fatalf("restored %+v, want %+v with 5 keys", b, a)
	}
	if ttl, ok := restored.ttl(0, "l"); !ok || ttl != time.Hour {
		t.Errorf("restored list ttl %v, %v", ttl, ok)
	}
	r := lookupKeyOp(kv.OpLRange).apply(restored, 0, kv.Request{Key: "l", Args: stringArgs([]string{"0", "-1"})}, opLimits{maxReplyBytes: 100})
	if describeReply(r) != "Success 0 [x y x]" {
		t.Errorf("restored list: %s", describeReply(r))
	}
}

// TestCollectionLimits checks that arguments and replies beyond the limits are refused as too large.
func TestCollectionLimits(t *testing.T) {
	s, _ := newTestStore()
	lim := opLimits{maxValueSize: 10, maxReplyBytes: 30}
	if r := lookupKeyOp(kv.OpHSet).apply(s, 0, kv.Request{Key: "h", Args: stringArgs([]string{"field", "value!"})}, lim); r.Status != StatusTooLarge {
		t.Errorf("HSET of 11 bytes with a limit of 10: %s", describeReply(r))
	}
	for i := range 5 {
		lookupKeyOp(kv.OpRPush).apply(s, 0, kv.Request{Key: "l", Args: stringArgs([]string{"item-" + fmt.Sprint(i)})}, lim)
	}
	if r := lookupKeyOp(kv.OpLRange).apply(s, 0, kv.Request{Key: "l", Args: stringArgs([]string{"0", "-1"})}, lim); r.Status != StatusTooLarge {
		t.Errorf("LRANGE of 50 bytes with a limit of 30: %s", describeReply(r))
	}
	if r := lookupKeyOp(kv.OpLRange).apply(s, 0, kv.Request{Key: "l", Args: stringArgs([]string{"0", "1"})}, lim); r.Status != StatusSuccess {
		t.Errorf("LRANGE within the limit: %s", describeReply(r))
	}
}

// TestZSkipList checks ranks, positions and score ranges against a sorted slice over random changes.
func TestZSkipList(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	z := newZSet()
	for round := range 3000 {
		m := fmt.Sprintf("m%d", rng.IntN(300))
		if rng.IntN(4) == 0 {
			z.remove(m)
		} else {
			z.set(m, float64(rng.IntN(50)))
		}
		if round%100 != 0 {
			continue
		}
		type pair struct {
			score  float64
			member string
		}
		var want []pair
		for m, s := range z.scores {
			want = append(want, pair{s, m})
		}
		sort.Slice(want, func(i, j int) bool {
			return want[i].score < want[j].score || want[i].score == want[j].score && want[i].member < want[j].member
		})
		if z.list.length != len(want) {
			t.Fatalf("list holds %d, map %d", z.list.length, len(want))
		}
		for i, w := range want {
			if n := z.list.at(i); n == nil || n.member != w.member {
				t.Fatalf("at(%d) = %v, want %s", i, n, w.member)
			}
			if r := z.list.rank(w.score, w.member); r != i {
				t.Fatalf("rank of %s = %d, want %d", w.member, r, i)
			}
		}
		lo, hi := float64(rng.IntN(50)), float64(rng.IntN(50))
		var got []string
		z.byScore(&zrangeArgs{min: lo, max: hi, minEx: true}, func(n *zskipNode) { got = append(got, n.member) })
		var inRange []string
		for _, w := range want {
			if w.score > lo && w.score <= hi {
				inRange = append(inRange, w.member)
			}
		}
		if !slices.Equal(got, inRange) {
			t.Fatalf("(%v, %v]: %v, want %v", lo, hi, got, inRange)
		}
	}
}
