package zaris

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/zscore"
	"github.com/zaris-go/zaris/transport"
)

// FuzzOps decodes its input into a sequence of operations of the registry, every one of them, with
// arguments valid and not (missing keys, other kinds, empty and binary strings, negative, huge and
// overflowing counts and indexes, bad floats, repeated fields, any arity), over four keys, interleaved with
// clock steps, reaping and snapshots. It applies them to an owner's store as the owner does, and checks:
// no panic; the replies and state of strings, counters, hashes, sets, lists and sorted sets as a plain
// model has them; versions and revisions moving as the registry says; the segment's counts of bytes,
// keys with a TTL and internal keys; and a replica fed the ops the owner emitted, as well as a store
// restored from the owner's snapshot, equal to the owner.
func FuzzOps(f *testing.F) {
	for _, seed := range fuzzOpsSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runOps(t, &fuzzInput{data: data})
	})
}

// fuzzOpsSeeds are inputs that reach each kind of operation, beside the corpus in testdata/fuzz/FuzzOps.
func fuzzOpsSeeds() [][]byte {
	var seeds [][]byte
	for i := range fuzzOpList {
		var seed []byte
		for j := range 12 {
			seed = append(seed, byte(i), byte(j), byte(3+j%4), byte(j*7), byte(j*13), byte(j*29), byte(j*31), byte(j*37))
		}
		seeds = append(seeds, seed)
	}
	r := rand.New(rand.NewPCG(40, 41)) // long runs, so that the suite meets keys that live through many kinds
	for range 8 {
		seed := make([]byte, 2000)
		for i := range seed {
			seed[i] = byte(r.Uint32())
		}
		seeds = append(seeds, seed)
	}
	return seeds
}

// fuzzOpList is every operation of the registry.
var fuzzOpList = func() []transport.Op {
	var ops []transport.Op
	for op := range keyOps {
		if lookupKeyOp(transport.Op(op)) != nil {
			ops = append(ops, transport.Op(op))
		}
	}
	return ops
}()

var (
	fuzzKeys   = []string{"a", "b", "{a}c", ""}
	fuzzTokens = []string{
		"f", "g", "h", "", "\x00", "\xff\xfe", "x y",
		"0", "1", "-1", "3", "-3", "10", "007", "+1", " 1", "1 ",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808", "99999999999999999999",
		"1.5", "-2.5", "inf", "-inf", "+inf", "nan", "1e308", "-0", "0x1p3", "1e-320", "3.0", "(1", "(inf",
		"nx", "xx", "gt", "lt", "ch", "incr", "NX", "byscore", "rev", "withscores", "limit", "bylex",
		"left", "RIGHT", "a", "b", "{a}c",
	}
	fuzzTTLs   = []int64{0, -1, int64(time.Millisecond), int64(time.Second), int64(time.Hour), math.MaxInt64, math.MinInt64}
	fuzzDeltas = []int64{0, 1, -1, 5, 63, 64, 1000, math.MaxInt64, math.MinInt64, 1 << 40, -(1 << 40)}
	fuzzSteps  = []time.Duration{time.Millisecond, time.Second, time.Hour}
)

// fuzzArities are the argument counts an operation takes when well formed, which most requests have.
var fuzzArities = map[transport.Op][]int{
	kv.OpHSet: {2, 4}, kv.OpHGet: {1}, kv.OpHMGet: {1, 2}, kv.OpHDel: {1, 2}, kv.OpHIncrBy: {2}, kv.OpHExists: {1},
	kv.OpSAdd: {1, 2}, kv.OpSRem: {1, 2}, kv.OpSIsMember: {1},
	kv.OpLPush: {1, 2}, kv.OpRPush: {1, 2}, kv.OpLPop: {0, 1}, kv.OpRPop: {0, 1}, kv.OpLRange: {2}, kv.OpLIndex: {1}, kv.OpLTrim: {2},
	kv.OpZAdd: {2, 3, 4}, kv.OpZRem: {1, 2}, kv.OpZScore: {1}, kv.OpZRank: {1}, kv.OpZIncrBy: {2}, kv.OpZRange: {2, 3, 4, 5},
	kv.OpSPop: {0, 1}, kv.OpZPopMin: {0, 1}, kv.OpZPopMax: {0, 1}, kv.OpHSetNX: {2}, kv.OpLMove: {3},
}

// fuzzLimits are small, so that sizes reach them.
var fuzzLimits = func() opLimits {
	layout, _ := NewLayout(1, 1)
	return opLimits{maxValueSize: 64, maxReplyBytes: 256, layout: layout}
}()

// fuzzInput hands out the fuzzer's bytes; past their end it hands out zeros and reports done.
type fuzzInput struct {
	data []byte
	pos  int
}

func (in *fuzzInput) done() bool { return in.pos >= len(in.data) }

func (in *fuzzInput) next() byte {
	if in.done() {
		in.pos++
		return 0
	}
	in.pos++
	return in.data[in.pos-1]
}

func (in *fuzzInput) pick(n int) int { return int(in.next()) % n }

// bytes returns an argument: a token, a run of bytes from the input, or a long run that reaches the limits.
func (in *fuzzInput) bytes() []byte {
	switch b := in.next(); b % 8 {
	case 0, 1, 2, 3, 4:
		return []byte(fuzzTokens[in.pick(len(fuzzTokens))])
	case 5:
		n := in.pick(8)
		out := make([]byte, 0, n)
		for range n {
			out = append(out, in.next())
		}
		return out
	case 6:
		if in.next()%4 == 0 {
			return bytes.Repeat([]byte("x"), []int{31, 32, 63, 64, 65}[in.pick(5)])
		}
		return []byte(strconv.Itoa(in.pick(9) - 4)) // an index near a list's ends
	default:
		return nil
	}
}

// request decodes the request of one operation on one of the keys.
func (in *fuzzInput) request(store *store, op transport.Op) kv.Request {
	req := kv.Request{Key: fuzzKeys[in.pick(len(fuzzKeys))]}
	req.Value = in.bytes()
	req.TTL = fuzzTTLs[in.pick(len(fuzzTTLs))]
	req.Delta = fuzzDeltas[in.pick(len(fuzzDeltas))]
	req.Cond = kv.Cond(in.next() & 15)
	switch in.pick(4) {
	case 1:
		_, req.Version, _ = store.get(0, req.Key)
	case 2:
		req.Version = store.revision(0) + 1
	case 3:
		req.Version = math.MaxUint64
	}
	n := in.pick(7)
	if arities := fuzzArities[op]; arities != nil && in.next()%4 != 0 {
		n = arities[in.pick(len(arities))]
	}
	if n > 0 {
		req.Args = make([][]byte, n)
	}
	for i := range n {
		req.Args[i] = in.bytes()
	}
	return req
}

// runOps runs the operations in, checking each step.
func runOps(t *testing.T, in *fuzzInput) {
	p := newReplicatedPair(t)
	m := newOpModel(p.owner, p.clock)
	for step := 0; step < 300 && !in.done(); step++ {
		if b := in.next(); b%16 == 15 {
			switch in.pick(4) {
			case 0:
				p.clock.Advance(fuzzSteps[in.pick(len(fuzzSteps))])
			case 1:
				p.owner.expireSegment(0)
			case 2:
				checkSnapshot(t, p.owner)
			case 3:
				checkUndone(t, p.owner, in)
			}
		} else {
			op := fuzzOpList[int(b)%len(fuzzOpList)]
			req := in.request(p.owner, op)
			before := p.owner.revision(0)
			got := applyAsOwner(p.owner, op, req)
			checkRevision(t, op, req, got, before, p.owner.revision(0))
			m.check(t, op, req, got)
		}
		checkSegment(t, p.owner)
		p.same(t)
		m.compare(t)
	}
}

// checkUndone runs a few operations in an atomic group that then undoes them, by rollback or by a panic,
// and checks that the segment is as before: same revision, same entries, versions and expiries. The
// callers' checks then compare the counts, the replica and the model.
func checkUndone(t *testing.T, s *store, in *fuzzInput) {
	t.Helper()
	before := s.digest(0)
	panics := in.next()%2 == 0
	func() {
		defer func() {
			if r := recover(); r != nil && r != "undone" {
				panic(r)
			}
		}()
		s.atomically(0, func(g *store) {
			for range 1 + in.pick(6) {
				op := fuzzOpList[in.pick(len(fuzzOpList))]
				if lookupKeyOp(op).ownGroup {
					continue // never an item of a group, as transactions refuse it
				}
				lookupKeyOp(op).apply(g, 0, in.request(g, op), fuzzLimits)
				g.takeRefusal()
			}
			if panics {
				panic("undone")
			}
			g.group.rollback()
		})
	}()
	if after := s.digest(0); after != before {
		t.Fatalf("a group undone (panic %v) changed the segment: %+v, before %+v", panics, after, before)
	}
}

// applyAsOwner applies op as a node applying it for a caller does: a write under the segment's lock, unless
// a transaction holds its key; an operation that runs only in a transaction in an atomic group.
func applyAsOwner(s *store, op transport.Op, req kv.Request) (reply kv.Reply) {
	k := lookupKeyOp(op)
	switch {
	case k.txnOnly:
		s.atomically(0, func(g *store) { reply = k.apply(g, 0, req, fuzzLimits) })
		return reply
	case k.readOnly:
		return k.apply(s, 0, req, fuzzLimits)
	}
	return s.applyExclusive(0, k, req, fuzzLimits)
}

// checkRevision checks that a read never moves the segment's revision, and that a write that answers a
// version moved it to that version.
func checkRevision(t *testing.T, op transport.Op, req kv.Request, reply kv.Reply, before, after uint64) {
	t.Helper()
	k := lookupKeyOp(op)
	switch {
	case k.readOnly && after != before:
		t.Fatalf("%s %q: a read moved the revision from %d to %d", k.name, req.Key, before, after)
	case after < before:
		t.Fatalf("%s %q: the revision went back from %d to %d", k.name, req.Key, before, after)
	case k.reveals == revealsUnwritten && reply.Version == 0 && after != before:
		t.Fatalf("%s %q: a reply without a version (%s), but the revision moved from %d to %d", k.name, req.Key, describeReply(reply), before, after)
	case reply.Version != 0 && reply.Status == StatusSuccess && !k.readOnly && reply.Version != after:
		t.Fatalf("%s %q: answered version %d, the revision is %d", k.name, req.Key, reply.Version, after)
	}
}

// checkSegment checks the segment's counts against its entries, and that no empty collection is stored.
func checkSegment(t *testing.T, s *store) {
	t.Helper()
	seg := &s.segments[0]
	seg.mu.RLock()
	defer seg.mu.RUnlock()
	var bytes, expiring int64
	internal := 0
	for key, e := range seg.entries.all() {
		bytes += e.size(key)
		expiring += e.ttlCount()
		if isInternalKey(key) {
			internal++
		}
		if cv := e.coll(); cv != nil && cv.c.len() == 0 {
			t.Fatalf("key %q holds an empty %s", key, cv.c.kind())
		}
		if e.version() == 0 || e.version() > seg.revision {
			t.Fatalf("key %q at version %d, the segment at revision %d", key, e.version(), seg.revision)
		}
	}
	if bytes != seg.bytes.Load() || expiring != seg.expiring.Load() || internal != seg.internal {
		t.Fatalf("the segment counts %d bytes, %d expiring and %d internal keys; its entries %d, %d and %d",
			seg.bytes.Load(), seg.expiring.Load(), seg.internal, bytes, expiring, internal)
	}
	if seg.torn {
		t.Fatal("the segment is torn after a write that returned")
	}
}

// checkSnapshot checks that a store restored from the owner's snapshot equals it.
func checkSnapshot(t *testing.T, s *store) {
	t.Helper()
	revision, entries := s.snapshot(0)
	copied := newStore(1, s.clock)
	copied.restore(0, revision, entries)
	if a, b := s.digest(0), copied.digest(0); a != b {
		t.Fatalf("the owner %+v and a store restored from its snapshot %+v differ", a, b)
	}
}

// opModel is what the keys hold, by plain Go values and the semantics of Redis's commands as the
// operations implement them. An operation it does not model is checked only for the invariants, after
// which the model takes the store's state.
type opModel struct {
	s     *store
	clock Clock
	keys  map[string]*modelValue
}

type modelValue struct {
	kind     kind
	str      []byte
	hash     map[string]string
	set      map[string]bool
	list     []string
	zset     map[string]float64
	expireAt int64
}

func (v *modelValue) len() int {
	switch v.kind {
	case kindHash:
		return len(v.hash)
	case kindSet:
		return len(v.set)
	case kindList:
		return len(v.list)
	case kindZSet:
		return len(v.zset)
	}
	return 1
}

func newOpModel(s *store, clock Clock) *opModel {
	return &opModel{s: s, clock: clock, keys: map[string]*modelValue{}}
}

func (m *opModel) now() int64 { return m.clock.Now().UnixNano() }

// live returns key's value, nil when it has none or it expired.
func (m *opModel) live(key string) *modelValue {
	v := m.keys[key]
	if v != nil && v.expireAt != 0 && m.now() >= v.expireAt {
		delete(m.keys, key)
		return nil
	}
	return v
}

// collection returns key's collection of kind k, creating it when create is set; wrong reports another kind.
func (m *opModel) collection(key string, k kind, create bool) (v *modelValue, wrong bool) {
	v = m.live(key)
	switch {
	case v != nil && v.kind != k:
		return nil, true
	case v == nil && create:
		v = &modelValue{kind: k, hash: map[string]string{}, set: map[string]bool{}, zset: map[string]float64{}}
		m.keys[key] = v
	}
	return v, false
}

// dropEmpty deletes key when its collection is empty.
func (m *opModel) dropEmpty(key string) {
	if v := m.keys[key]; v != nil && v.kind != kindString && v.len() == 0 {
		delete(m.keys, key)
	}
}

// check runs op on the model and compares its reply with got; an operation the model does not run makes
// it take the store's state.
func (m *opModel) check(t *testing.T, op transport.Op, req kv.Request, got kv.Reply) {
	t.Helper()
	if got.Status == StatusLocked || isInternalKey(req.Key) {
		m.sync()
		return
	}
	want, modeled := m.apply(op, req)
	if !modeled {
		m.sync()
		return
	}
	if !sameModelReply(op, want, got) {
		t.Fatalf("%s %q value %q args %q delta %d ttl %d: got %s, the model %s", opName(op), req.Key, req.Value, req.Args,
			req.Delta, req.TTL, describeReply(got), describeReply(want))
	}
}

// sameModelReply compares the parts of replies the model predicts: the status, the message or refusal code
// of a refusal, and what a success or not-found answers; fields and members in any order.
func sameModelReply(op transport.Op, want, got kv.Reply) bool {
	if want.Status != got.Status {
		return false
	}
	switch want.Status {
	case StatusSuccess, StatusNotFound, StatusInvalidRequest:
	default:
		return true
	}
	if want.Int != got.Int || !bytes.Equal(want.Value, got.Value) {
		return false
	}
	if want.Status != StatusSuccess {
		return true
	}
	a, b := describeValues(want.Values), describeValues(got.Values)
	if op == kv.OpHGetAll || op == kv.OpSMembers {
		slices.Sort(a)
		slices.Sort(b)
	}
	return slices.Equal(a, b)
}

func describeValues(values [][]byte) []string {
	out := make([]string, len(values))
	for i, v := range values {
		if v == nil {
			out[i] = "(nil)"
		} else {
			out[i] = strconv.Quote(string(v))
		}
	}
	return out
}

// compare checks that the store holds what the model does, key by key.
func (m *opModel) compare(t *testing.T) {
	t.Helper()
	for _, key := range fuzzKeys {
		want, got := m.describe(key), describeStored(m.s, key)
		if want != got {
			t.Fatalf("key %q holds %s, the model %s", key, got, want)
		}
	}
}

func (m *opModel) describe(key string) string {
	v := m.live(key)
	if v == nil {
		return "nothing"
	}
	var parts []string
	switch v.kind {
	case kindString:
		parts = append(parts, strconv.Quote(string(v.str)))
	case kindHash:
		for f, val := range v.hash {
			parts = append(parts, strconv.Quote(f)+"="+strconv.Quote(val))
		}
	case kindSet:
		for member := range v.set {
			parts = append(parts, strconv.Quote(member))
		}
	case kindList:
		for _, item := range v.list {
			parts = append(parts, strconv.Quote(item))
		}
	case kindZSet:
		for member, score := range v.zset {
			parts = append(parts, strconv.Quote(member)+"="+string(zscore.Format(score)))
		}
	}
	if v.kind != kindList {
		slices.Sort(parts)
	}
	return fmt.Sprintf("%s expiring at %d: %s", v.kind, v.expireAt, strings.Join(parts, " "))
}

// describeStored describes key's live value in the store as describe does the model's.
func describeStored(s *store, key string) string {
	seg := &s.segments[0]
	seg.mu.RLock()
	defer seg.mu.RUnlock()
	v := modelOf(seg.entries.get(key), s.now())
	if v == nil {
		return "nothing"
	}
	m := &opModel{clock: s.clock, keys: map[string]*modelValue{key: v}}
	return m.describe(key)
}

// modelOf turns a stored entry into the model's value, nil when it has expired.
func modelOf(e *entry, now int64) *modelValue {
	if e == nil || e.expired(now) {
		return nil
	}
	v := &modelValue{kind: e.kind(), expireAt: e.expiry(), hash: map[string]string{}, set: map[string]bool{}, zset: map[string]float64{}}
	switch c := e.coll(); {
	case c == nil:
		v.str = slices.Clone(e.value())
	case v.kind == kindHash:
		for f, val := range c.c.(*hashColl).fields {
			v.hash[f] = string(val)
		}
	case v.kind == kindSet:
		for member := range c.c.(*setColl).members {
			v.set[member] = true
		}
	case v.kind == kindList:
		for _, item := range c.c.elements() {
			v.list = append(v.list, string(item))
		}
	case v.kind == kindZSet:
		maps.Copy(v.zset, c.c.(*zsetColl).scores)
	}
	return v
}

// sync makes the model take the store's state.
func (m *opModel) sync() {
	seg := &m.s.segments[0]
	seg.mu.RLock()
	defer seg.mu.RUnlock()
	clear(m.keys)
	for _, key := range fuzzKeys {
		if v := modelOf(seg.entries.get(key), m.s.now()); v != nil {
			m.keys[key] = v
		}
	}
}

// fuzzWrites are the collection writes collectionOp bounds.
var fuzzWrites = map[transport.Op]bool{kv.OpHSet: true, kv.OpHDel: true, kv.OpHIncrBy: true, kv.OpHSetNX: true, kv.OpSAdd: true, kv.OpSRem: true,
	kv.OpLPush: true, kv.OpRPush: true, kv.OpLPop: true, kv.OpRPop: true, kv.OpLTrim: true, kv.OpZAdd: true, kv.OpZRem: true, kv.OpZIncrBy: true}

// apply runs op on the model and returns the reply it expects, or false for an operation it does not run.
func (m *opModel) apply(op transport.Op, req kv.Request) (kv.Reply, bool) {
	if fuzzWrites[op] {
		size := 0
		for _, a := range req.Args {
			size += len(a)
		}
		if size > fuzzLimits.maxValueSize {
			return kv.Reply{Status: StatusTooLarge}, true
		}
	}
	switch op {
	case kv.OpGet, kv.OpPut, kv.OpDelete, kv.OpIncr, kv.OpAppend, kv.OpGetDel, kv.OpExists, kv.OpType:
		return m.applyString(op, req), true
	case kv.OpHSet, kv.OpHGet, kv.OpHMGet, kv.OpHDel, kv.OpHGetAll, kv.OpHLen, kv.OpHIncrBy, kv.OpHExists:
		return m.applyHash(op, req), true
	case kv.OpSAdd, kv.OpSRem, kv.OpSMembers, kv.OpSIsMember, kv.OpSCard:
		return m.applySet(op, req), true
	case kv.OpLPush, kv.OpRPush, kv.OpLPop, kv.OpRPop, kv.OpLRange, kv.OpLLen, kv.OpLIndex, kv.OpLTrim:
		return m.applyList(op, req), true
	case kv.OpZAdd, kv.OpZRem, kv.OpZScore, kv.OpZCard:
		return m.applyZSet(op, req)
	case kv.OpHSetNX:
		return m.applyHSetNX(req), true
	case kv.OpZPopMin, kv.OpZPopMax:
		return m.applyZPop(op == kv.OpZPopMax, req), true
	case kv.OpLMove:
		return m.applyLMove(req), true
	}
	return kv.Reply{}, false
}

func (m *opModel) applyHSetNX(req kv.Request) kv.Reply {
	if len(req.Args) != 2 {
		return arity("hsetnx")
	}
	field := string(req.Args[0])
	switch h, wrong := m.collection(req.Key, kindHash, false); {
	case wrong:
		return kv.Reply{Status: StatusWrongType}
	case h != nil:
		if _, held := h.hash[field]; held {
			return kv.Reply{Status: StatusSuccess}
		}
	}
	h, _ := m.collection(req.Key, kindHash, true)
	h.hash[field] = string(req.Args[1])
	return kv.Reply{Status: StatusSuccess, Int: 1}
}

// applyZPop pops the members of lowest score, by member among equal scores, or the highest in the
// reverse order.
func (m *opModel) applyZPop(highest bool, req kv.Request) kv.Reply {
	count := int64(1)
	switch len(req.Args) {
	case 0:
	case 1:
		var ok bool
		if count, ok = kv.ParseCanonicalInt(req.Args[0]); !ok || count < 0 {
			return invalidArgs("ERR value is out of range, must be positive")
		}
	default:
		return arity(map[bool]string{false: "zpopmin", true: "zpopmax"}[highest])
	}
	z, wrong := m.collection(req.Key, kindZSet, false)
	switch {
	case wrong:
		return kv.Reply{Status: StatusWrongType}
	case z == nil:
		return kv.Reply{Status: StatusNotFound}
	}
	members := slices.SortedFunc(maps.Keys(z.zset), func(a, b string) int {
		return cmp.Or(cmp.Compare(z.zset[a], z.zset[b]), strings.Compare(a, b))
	})
	if highest {
		slices.Reverse(members)
	}
	popped := [][]byte{}
	for _, member := range members[:min(count, int64(len(members)))] {
		popped = append(popped, []byte(member), zscore.Format(z.zset[member]))
		delete(z.zset, member)
	}
	m.dropEmpty(req.Key)
	return kv.Reply{Status: StatusSuccess, Values: popped}
}

func (m *opModel) applyLMove(req kv.Request) kv.Reply {
	if len(req.Args) != 3 {
		return arity("lmove")
	}
	side := func(b []byte) (left, ok bool) {
		s := strings.ToLower(string(b))
		return s == "left", s == "left" || s == "right"
	}
	fromLeft, ok1 := side(req.Args[1])
	toLeft, ok2 := side(req.Args[2])
	if !ok1 || !ok2 {
		return invalidArgs(msgSyntax)
	}
	dst := string(req.Args[0])
	if isInternalKey(dst) {
		return invalidArgs(fmt.Sprintf("ERR key %q is reserved", dst))
	}
	src, wrong := m.collection(req.Key, kindList, false)
	switch {
	case wrong:
		return kv.Reply{Status: StatusWrongType}
	case src == nil:
		return kv.Reply{Status: StatusNotFound}
	}
	if _, wrong := m.collection(dst, kindList, false); wrong {
		return kv.Reply{Status: StatusWrongType}
	}
	var item string
	if fromLeft {
		item, src.list = src.list[0], src.list[1:]
	} else {
		item, src.list = src.list[len(src.list)-1], src.list[:len(src.list)-1]
	}
	m.dropEmpty(req.Key)
	to, _ := m.collection(dst, kindList, true)
	if toLeft {
		to.list = append([]string{item}, to.list...)
	} else {
		to.list = append(to.list, item)
	}
	return kv.Reply{Status: StatusSuccess, Value: []byte(item)}
}

func (m *opModel) applyString(op transport.Op, req kv.Request) kv.Reply {
	v := m.live(req.Key)
	isColl := v != nil && v.kind != kindString
	switch op {
	case kv.OpGet:
		switch {
		case v == nil:
			return kv.Reply{Status: StatusNotFound}
		case isColl:
			return kv.Reply{Status: StatusWrongType}
		}
		reply := kv.Reply{Status: StatusSuccess, Value: v.str}
		if v.expireAt != 0 {
			reply.Int = v.expireAt - m.now()
		}
		return reply
	case kv.OpPut:
		if len(req.Value) > fuzzLimits.maxValueSize {
			return kv.Reply{Status: StatusInvalidRequest}
		}
		m.keys[req.Key] = &modelValue{kind: kindString, str: slices.Clone(req.Value), expireAt: modelExpiry(m.now(), req.TTL)}
		return kv.Reply{Status: StatusSuccess}
	case kv.OpDelete, kv.OpExists:
		if v == nil {
			return kv.Reply{Status: StatusNotFound}
		}
		if op == kv.OpDelete {
			delete(m.keys, req.Key)
		}
		return kv.Reply{Status: StatusSuccess}
	case kv.OpType:
		if v == nil {
			return kv.Reply{Status: StatusSuccess, Value: []byte("none")}
		}
		return kv.Reply{Status: StatusSuccess, Value: []byte(v.kind.String())}
	case kv.OpGetDel:
		switch {
		case v == nil:
			return kv.Reply{Status: StatusNotFound}
		case isColl:
			return kv.Reply{Status: StatusWrongType}
		}
		delete(m.keys, req.Key)
		return kv.Reply{Status: StatusSuccess, Value: v.str}
	}
	if isColl {
		return kv.Reply{Status: StatusWrongType}
	}
	existed := v != nil
	if !existed {
		v = &modelValue{kind: kindString}
	}
	if op == kv.OpAppend {
		if len(v.str)+len(req.Value) > fuzzLimits.maxValueSize {
			return kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedTooLarge}
		}
		v.str = append(slices.Clone(v.str), req.Value...)
		m.keys[req.Key] = v
		return kv.Reply{Status: StatusSuccess, Int: int64(len(v.str))}
	}
	base := int64(0)
	if existed {
		n, err := strconv.ParseInt(string(v.str), 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != string(v.str) {
			return kv.Reply{Status: StatusInvalidRequest}
		}
		base = n
	}
	sum := base + req.Delta
	if (req.Delta > 0 && sum < base) || (req.Delta < 0 && sum > base) {
		return kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedIncrOverflow}
	}
	v.str = []byte(strconv.FormatInt(sum, 10))
	m.keys[req.Key] = v
	return kv.Reply{Status: StatusSuccess, Int: sum}
}

// modelExpiry is when a value written with ttl expires: never for a ttl that is not positive, and at the
// end of time for one past it.
func modelExpiry(now, ttl int64) int64 {
	switch {
	case ttl <= 0:
		return 0
	case ttl > math.MaxInt64-now:
		return math.MaxInt64
	}
	return now + ttl
}

func arity(cmd string) kv.Reply { return wrongArgCount(cmd) }

func (m *opModel) applyHash(op transport.Op, req kv.Request) kv.Reply {
	args := req.Args
	switch {
	case op == kv.OpHSet && (len(args) < 2 || len(args)%2 != 0):
		return arity("hset")
	case (op == kv.OpHGet || op == kv.OpHExists) && len(args) != 1:
		return arity(map[transport.Op]string{kv.OpHGet: "hget", kv.OpHExists: "hexists"}[op])
	case op == kv.OpHMGet && len(args) < 1:
		return arity("hmget")
	case op == kv.OpHDel && len(args) < 1:
		return arity("hdel")
	case op == kv.OpHIncrBy && len(args) != 2:
		return arity("hincrby")
	}
	var delta int64
	if op == kv.OpHIncrBy {
		var ok bool
		if delta, ok = kv.ParseCanonicalInt(args[1]); !ok {
			return invalidArgs(msgNotInteger)
		}
	}
	h, wrong := m.collection(req.Key, kindHash, op == kv.OpHSet || op == kv.OpHIncrBy)
	if wrong {
		return kv.Reply{Status: StatusWrongType}
	}
	if h == nil {
		switch op {
		case kv.OpHMGet:
			return kv.Reply{Status: StatusNotFound, Values: make([][]byte, len(args))}
		case kv.OpHDel:
			return kv.Reply{Status: StatusSuccess}
		}
		return kv.Reply{Status: StatusNotFound}
	}
	switch op {
	case kv.OpHSet:
		added := 0
		for i := 0; i < len(args); i += 2 {
			if _, ok := h.hash[string(args[i])]; !ok {
				added++
			}
			h.hash[string(args[i])] = string(args[i+1])
		}
		return kv.Reply{Status: StatusSuccess, Int: int64(added)}
	case kv.OpHGet:
		val, ok := h.hash[string(args[0])]
		if !ok {
			return kv.Reply{Status: StatusNotFound}
		}
		return kv.Reply{Status: StatusSuccess, Value: []byte(val)}
	case kv.OpHExists:
		_, ok := h.hash[string(args[0])]
		return kv.Reply{Status: StatusSuccess, Int: kv.BoolInt(ok)}
	case kv.OpHMGet:
		values := make([][]byte, len(args))
		for i, f := range args {
			if val, ok := h.hash[string(f)]; ok {
				values[i] = []byte(val)
			}
		}
		return modelRead(values)
	case kv.OpHGetAll:
		var values [][]byte
		for f, val := range h.hash {
			values = append(values, []byte(f), []byte(val))
		}
		return modelRead(values)
	case kv.OpHLen:
		return kv.Reply{Status: StatusSuccess, Int: int64(len(h.hash))}
	case kv.OpHDel:
		n := 0
		for _, f := range args {
			if _, ok := h.hash[string(f)]; ok {
				delete(h.hash, string(f))
				n++
			}
		}
		m.dropEmpty(req.Key)
		return kv.Reply{Status: StatusSuccess, Int: int64(n)}
	}
	// HINCRBY
	var base int64
	if val, ok := h.hash[string(args[0])]; ok {
		if base, ok = kv.ParseCanonicalInt([]byte(val)); !ok {
			m.dropEmpty(req.Key)
			return invalidArgs("ERR hash value is not an integer")
		}
	}
	if addOverflows(base, delta) {
		m.dropEmpty(req.Key)
		return invalidArgs(msgOverflow)
	}
	h.hash[string(args[0])] = strconv.FormatInt(base+delta, 10)
	return kv.Reply{Status: StatusSuccess, Int: base + delta}
}

// modelRead answers values, or TooLarge past the reply limit.
func modelRead(values [][]byte) kv.Reply {
	size := 0
	for _, v := range values {
		size += len(v) + 5
	}
	if size > fuzzLimits.maxReplyBytes {
		return kv.Reply{Status: StatusTooLarge}
	}
	return kv.Reply{Status: StatusSuccess, Values: values}
}

func (m *opModel) applySet(op transport.Op, req kv.Request) kv.Reply {
	args := req.Args
	switch {
	case (op == kv.OpSAdd || op == kv.OpSRem) && len(args) < 1:
		return arity(map[transport.Op]string{kv.OpSAdd: "sadd", kv.OpSRem: "srem"}[op])
	case op == kv.OpSIsMember && len(args) != 1:
		return arity("sismember")
	}
	s, wrong := m.collection(req.Key, kindSet, op == kv.OpSAdd)
	switch {
	case wrong:
		return kv.Reply{Status: StatusWrongType}
	case s == nil && op == kv.OpSRem:
		return kv.Reply{Status: StatusSuccess}
	case s == nil:
		return kv.Reply{Status: StatusNotFound}
	}
	switch op {
	case kv.OpSAdd, kv.OpSRem:
		n := 0
		for _, a := range args {
			if s.set[string(a)] == (op == kv.OpSRem) {
				n++
			}
			if op == kv.OpSAdd {
				s.set[string(a)] = true
			} else {
				delete(s.set, string(a))
			}
		}
		m.dropEmpty(req.Key)
		return kv.Reply{Status: StatusSuccess, Int: int64(n)}
	case kv.OpSIsMember:
		return kv.Reply{Status: StatusSuccess, Int: kv.BoolInt(s.set[string(args[0])])}
	case kv.OpSCard:
		return kv.Reply{Status: StatusSuccess, Int: int64(len(s.set))}
	}
	var members [][]byte
	for member := range s.set {
		members = append(members, []byte(member))
	}
	return modelRead(members)
}

func (m *opModel) applyList(op transport.Op, req kv.Request) kv.Reply {
	args := req.Args
	name := map[transport.Op]string{kv.OpLPush: "lpush", kv.OpRPush: "rpush", kv.OpLPop: "lpop", kv.OpRPop: "rpop", kv.OpLRange: "lrange",
		kv.OpLIndex: "lindex", kv.OpLTrim: "ltrim"}[op]
	var start, stop int64
	switch op {
	case kv.OpLPush, kv.OpRPush:
		if len(args) < 1 {
			return arity(name)
		}
	case kv.OpLPop, kv.OpRPop:
		if len(args) > 1 {
			return arity(name)
		}
		start = 1
		if len(args) == 1 {
			var ok bool
			if start, ok = kv.ParseCanonicalInt(args[0]); !ok || start < 0 {
				return invalidArgs("ERR value is out of range, must be positive")
			}
		}
	case kv.OpLIndex:
		if len(args) != 1 {
			return arity(name)
		}
		var ok bool
		if start, ok = kv.ParseCanonicalInt(args[0]); !ok {
			// a missing key or another type answers before a bad index, as in Redis
			switch l, wrong := m.collection(req.Key, kindList, false); {
			case wrong:
				return kv.Reply{Status: StatusWrongType}
			case l == nil:
				return kv.Reply{Status: StatusNotFound}
			}
			return invalidArgs(msgNotInteger)
		}
	case kv.OpLRange, kv.OpLTrim:
		if len(args) != 2 {
			return arity(name)
		}
		var ok1, ok2 bool
		start, ok1 = kv.ParseCanonicalInt(args[0])
		stop, ok2 = kv.ParseCanonicalInt(args[1])
		if !ok1 || !ok2 {
			return invalidArgs(msgNotInteger)
		}
	}
	push := op == kv.OpLPush || op == kv.OpRPush
	l, wrong := m.collection(req.Key, kindList, push && req.Cond&kv.CondIfExists == 0)
	switch {
	case wrong:
		return kv.Reply{Status: StatusWrongType}
	case l == nil && (op == kv.OpLTrim || push): // LPUSHX and RPUSHX of a missing key
		return kv.Reply{Status: StatusSuccess}
	case l == nil:
		return kv.Reply{Status: StatusNotFound}
	}
	n := int64(len(l.list))
	switch op {
	case kv.OpLPush, kv.OpRPush:
		for _, a := range args {
			if op == kv.OpLPush {
				l.list = append([]string{string(a)}, l.list...)
			} else {
				l.list = append(l.list, string(a))
			}
		}
		return kv.Reply{Status: StatusSuccess, Int: int64(len(l.list))}
	case kv.OpLPop, kv.OpRPop:
		count := min(start, n)
		popped := make([][]byte, count)
		for i := range popped {
			if op == kv.OpLPop {
				popped[i] = []byte(l.list[i])
			} else {
				popped[i] = []byte(l.list[n-1-int64(i)])
			}
		}
		if op == kv.OpLPop {
			l.list = l.list[count:]
		} else {
			l.list = l.list[:n-count]
		}
		m.dropEmpty(req.Key)
		if len(args) == 0 {
			return kv.Reply{Status: StatusSuccess, Value: popped[0]}
		}
		return kv.Reply{Status: StatusSuccess, Values: popped}
	case kv.OpLLen:
		return kv.Reply{Status: StatusSuccess, Int: n}
	case kv.OpLIndex:
		if start < 0 {
			start += n
		}
		if start < 0 || start >= n {
			return kv.Reply{Status: StatusNotFound}
		}
		return kv.Reply{Status: StatusSuccess, Value: []byte(l.list[start])}
	}
	if start < 0 {
		start = max(start+n, 0)
	}
	if stop < 0 {
		stop += n
	}
	stop = min(stop, n-1)
	var kept []string
	if start <= stop {
		kept = l.list[start : stop+1]
	}
	if op == kv.OpLTrim {
		l.list = slices.Clone(kept)
		m.dropEmpty(req.Key)
		return kv.Reply{Status: StatusSuccess}
	}
	items := [][]byte{}
	for _, item := range kept {
		items = append(items, []byte(item))
	}
	return modelRead(items)
}

// applyZSet runs ZADD without options, ZREM, ZSCORE and ZCARD.
func (m *opModel) applyZSet(op transport.Op, req kv.Request) (kv.Reply, bool) {
	args := req.Args
	var scores []float64
	switch op {
	case kv.OpZAdd:
		if len(args) > 0 && slices.Contains([]string{"nx", "xx", "gt", "lt", "ch", "incr"}, strings.ToLower(string(args[0]))) {
			return kv.Reply{}, false
		}
		if len(args) == 0 || len(args)%2 != 0 {
			return invalidArgs(msgSyntax), true
		}
		for i := 0; i < len(args); i += 2 {
			score, ok := zscore.Parse(args[i])
			if !ok {
				return invalidArgs("ERR value is not a valid float"), true
			}
			scores = append(scores, score)
		}
	case kv.OpZRem:
		if len(args) < 1 {
			return arity("zrem"), true
		}
	case kv.OpZScore:
		if len(args) != 1 {
			return arity("zscore"), true
		}
	}
	z, wrong := m.collection(req.Key, kindZSet, op == kv.OpZAdd)
	switch {
	case wrong:
		return kv.Reply{Status: StatusWrongType}, true
	case z == nil && op == kv.OpZRem:
		return kv.Reply{Status: StatusSuccess}, true
	case z == nil:
		return kv.Reply{Status: StatusNotFound}, true
	}
	switch op {
	case kv.OpZAdd:
		added := 0
		for i, score := range scores {
			member := string(args[2*i+1])
			if _, ok := z.zset[member]; !ok {
				added++
			}
			z.zset[member] = score
		}
		return kv.Reply{Status: StatusSuccess, Int: int64(added)}, true
	case kv.OpZRem:
		n := 0
		for _, a := range args {
			if _, ok := z.zset[string(a)]; ok {
				delete(z.zset, string(a))
				n++
			}
		}
		m.dropEmpty(req.Key)
		return kv.Reply{Status: StatusSuccess, Int: int64(n)}, true
	case kv.OpZScore:
		score, ok := z.zset[string(args[0])]
		if !ok {
			return kv.Reply{Status: StatusNotFound}, true
		}
		return kv.Reply{Status: StatusSuccess, Value: zscore.Format(score)}, true
	}
	return kv.Reply{Status: StatusSuccess, Int: int64(len(z.zset))}, true
}
