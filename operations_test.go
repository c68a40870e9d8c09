package zaris

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/resp"
	"github.com/zaris-go/zaris/transport"
)

// wireOps pins every operation number: they are the wire format, so a renumbering must fail here.
var wireOps = []struct {
	name   string
	op     transport.Op
	number transport.Op
	key    bool // a key operation, declared in keyOps
}{
	{"OpGet", kv.OpGet, 1, true},
	{"OpPut", kv.OpPut, 2, true},
	{"OpDelete", kv.OpDelete, 3, true},
	{"OpGetMap", kv.OpGetMap, 4, false},
	{"OpBatch", kv.OpBatch, 5, false},
	{"OpIncr", kv.OpIncr, 10, true},
	{"OpExpire", kv.OpExpire, 11, true},
	{"OpPersist", kv.OpPersist, 12, true},
	{"OpTTL", kv.OpTTL, 13, true},
	{"OpExpiryTime", kv.OpExpiryTime, 46, true},
	{"OpExists", kv.OpExists, 14, true},
	{"OpPutIf", kv.OpPutIf, 15, true},
	{"OpGetEntry", kv.OpGetEntry, 16, true},
	{"OpPutIfVersion", kv.OpPutIfVersion, 17, true},
	{"OpDeleteIfVersion", kv.OpDeleteIfVersion, 18, true},
	{"OpIncrByFloat", kv.OpIncrByFloat, 40, true},
	{"OpAppend", kv.OpAppend, 41, true},
	{"OpGetDel", kv.OpGetDel, 42, true},
	{"OpGetEx", kv.OpGetEx, 43, true},
	{"OpType", kv.OpType, 44, true},
	{"OpObject", kv.OpObject, 19, true},
	{"OpSetRange", kv.OpSetRange, 45, true},
	{"OpHSet", kv.OpHSet, 48, true},
	{"OpHGet", kv.OpHGet, 49, true},
	{"OpHMGet", kv.OpHMGet, 50, true},
	{"OpHDel", kv.OpHDel, 51, true},
	{"OpHGetAll", kv.OpHGetAll, 52, true},
	{"OpHLen", kv.OpHLen, 53, true},
	{"OpHIncrBy", kv.OpHIncrBy, 54, true},
	{"OpHExists", kv.OpHExists, 55, true},
	{"OpSAdd", kv.OpSAdd, 56, true},
	{"OpSRem", kv.OpSRem, 57, true},
	{"OpSMembers", kv.OpSMembers, 58, true},
	{"OpSIsMember", kv.OpSIsMember, 59, true},
	{"OpSCard", kv.OpSCard, 60, true},
	{"OpLPush", kv.OpLPush, 61, true},
	{"OpRPush", kv.OpRPush, 62, true},
	{"OpLPop", kv.OpLPop, 63, true},
	{"OpRPop", kv.OpRPop, 64, true},
	{"OpLRange", kv.OpLRange, 65, true},
	{"OpLLen", kv.OpLLen, 66, true},
	{"OpLIndex", kv.OpLIndex, 67, true},
	{"OpLTrim", kv.OpLTrim, 68, true},
	{"OpZAdd", kv.OpZAdd, 69, true},
	{"OpZRem", kv.OpZRem, 70, true},
	{"OpZScore", kv.OpZScore, 71, true},
	{"OpZRange", kv.OpZRange, 72, true},
	{"OpZRank", kv.OpZRank, 73, true},
	{"OpZCard", kv.OpZCard, 74, true},
	{"OpZIncrBy", kv.OpZIncrBy, 75, true},
	{"OpSPop", kv.OpSPop, 76, true},
	{"OpZPopMin", kv.OpZPopMin, 77, true},
	{"OpZPopMax", kv.OpZPopMax, 78, true},
	{"OpHSetNX", kv.OpHSetNX, 79, true},
	{"OpLMove", kv.OpLMove, 100, true},
	{"OpReplicate", kv.OpReplicate, 20, false},
	{"OpPropose", kv.OpPropose, 21, false},
	{"OpServerProgress", kv.OpServerProgress, 22, false},
	{"OpRecoverySurvey", kv.OpRecoverySurvey, 30, false},
	{"OpRecoveryInstall", kv.OpRecoveryInstall, 31, false},
	{"OpPublish", kv.OpPublish, 32, false},
	{"OpBackup", kv.OpBackup, 33, false},
	{"OpRestore", kv.OpRestore, 34, false},
	{"OpScan", kv.OpScan, 80, false},
	{"OpWatch", kv.OpWatch, 85, false},
	{"OpNearGet", kv.OpNearGet, 86, true},
	{"OpNearWatch", kv.OpNearWatch, 87, false},
	{"OpTxn", kv.OpTxn, 90, true},
	{"OpCheckVersion", kv.OpCheckVersion, 91, true},
	{"OpIntent", kv.OpIntent, 92, true},
	{"OpResolve", kv.OpResolve, 93, true},
	{"OpDecide", kv.OpDecide, 94, true},
	{"OpForget", kv.OpForget, 95, true},
}

func TestOperationWireNumbers(t *testing.T) {
	declared := opConstants(t)
	pinned := map[string]bool{}
	numbers := map[transport.Op]string{}
	for _, w := range wireOps {
		pinned[w.name] = true
		if w.op != w.number {
			t.Errorf("%s = %d, the wire format says %d", w.name, w.op, w.number)
		}
		if other, dup := numbers[w.op]; dup {
			t.Errorf("%s and %s share number %d", w.name, other, w.op)
		}
		numbers[w.op] = w.name
		if !slices.Contains(declared, w.name) {
			t.Errorf("%s is pinned but not declared as a transport.Op constant", w.name)
		}
		if isKey := lookupKeyOp(w.op) != nil; isKey != w.key {
			t.Errorf("%s: in keyOps = %v, want %v", w.name, isKey, w.key)
		}
	}
	for _, name := range declared {
		if !pinned[name] {
			t.Errorf("operation constant %s has no pinned wire number in wireOps", name)
		}
	}
	if len(declared) < len(wireOps) {
		t.Errorf("found %d operation constants in the sources, %d pinned", len(declared), len(wireOps))
	}
}

// opConstants returns the names of the transport.Op constants that internal/kv declares.
func opConstants(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("internal/kv/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			if gen, ok := decl.(*ast.GenDecl); ok && gen.Tok == token.CONST {
				names = append(names, opSpecs(gen)...)
			}
		}
	}
	return names
}

// opSpecs returns the names of the transport.Op constants of one const block, following iota's implicit
// repetition of the previous type.
func opSpecs(gen *ast.GenDecl) []string {
	var names []string
	typ := ""
	for _, spec := range gen.Specs {
		vs := spec.(*ast.ValueSpec)
		switch {
		case vs.Type != nil:
			typ = types.ExprString(vs.Type)
		case len(vs.Values) == 1:
			typ = ""
			if call, ok := vs.Values[0].(*ast.CallExpr); ok {
				typ = types.ExprString(call.Fun)
			}
		}
		if typ != "transport.Op" {
			continue
		}
		for _, name := range vs.Names {
			names = append(names, name.Name)
		}
	}
	return names
}

func TestKeyOperationsDeclared(t *testing.T) {
	names := map[string]transport.Op{}
	count := 0
	for i := range keyOps {
		op, k := transport.Op(i), &keyOps[i]
		if k.apply == nil {
			if k.name != "" || k.readOnly || k.reveals != 0 || k.batch != 0 || k.resp != nil {
				t.Errorf("keyOps[%d] (%q) is declared without an apply function", i, k.name)
			}
			continue
		}
		count++
		if k.name == "" {
			t.Errorf("operation %d has no name", op)
		}
		if other, dup := names[k.name]; dup {
			t.Errorf("operations %d and %d are both named %q", other, op, k.name)
		}
		names[k.name] = op
		if opName(op) != k.name {
			t.Errorf("opName(%d) = %q, want %q", op, opName(op), k.name)
		}
		if k.reveals < revealsAlways || k.reveals > revealsUnwritten {
			t.Errorf("%s: reveals = %d, not a revelation", k.name, k.reveals)
		}
		if k.readOnly != (k.reveals == revealsAlways) {
			t.Errorf("%s: readOnly = %v but reveals = %d: a read reveals every reply, a write not", k.name, k.readOnly, k.reveals)
		}
		if readOnly(op) != k.readOnly {
			t.Errorf("readOnly(%s) = %v, want %v", k.name, readOnly(op), k.readOnly)
		}
	}
	want := 0
	for _, w := range wireOps {
		if w.key {
			want++
		}
	}
	if count != want {
		t.Errorf("%d key operations declared, %d pinned", count, want)
	}
	if opName(kv.OpBatch) != "operation 5" || opName(999) != "operation 999" {
		t.Errorf("opName of operations that are not key ones: %q, %q", opName(kv.OpBatch), opName(999))
	}
	if lookupKeyOp(transport.Op(len(keyOps))) != nil || lookupKeyOp(math.MaxUint16) != nil || lookupKeyOp(0) != nil {
		t.Error("lookupKeyOp found an operation beyond those declared")
	}
}

// TestBatchOperations checks that each batch item operation runs the key operation of the same name, and
// that no other does.
func TestBatchOperations(t *testing.T) {
	mapped := 0
	for b := range len(batchOps) {
		op := batchOps[b]
		if op == 0 {
			continue
		}
		mapped++
		k := lookupKeyOp(op)
		if k == nil {
			t.Errorf("%v runs operation %d, which is not a key operation", BatchOp(b), op)
			continue
		}
		if strings.ToLower(BatchOp(b).String()) != k.name {
			t.Errorf("%v runs %q", BatchOp(b), k.name)
		}
	}
	if mapped != int(BatchDelete) || batchOps[BatchGet] != kv.OpGet || batchOps[BatchPut] != kv.OpPut || batchOps[BatchDelete] != kv.OpDelete {
		t.Errorf("batch operations map to %v, want get, put, delete", batchOps[:BatchDelete+1])
	}
}

// TestKeyOperationsRESPBindings checks that each RESP command an operation names exists and is flagged
// read-only or write as the operation is, and that every RESP command with keys names its operation, but
// those composed of several (resp.CommandSpec.Grouped).
func TestKeyOperationsRESPBindings(t *testing.T) {
	bound, commands := map[string]bool{}, resp.Commands()
	for _, k := range keyOps {
		for _, name := range k.resp {
			bound[name] = true
			cmd, ok := commands[name]
			if !ok {
				t.Errorf("%s: RESP command %q does not exist", k.name, name)
				continue
			}
			flag := "write"
			if k.readOnly {
				flag = "readonly"
			}
			if !slices.Contains(cmd.Flags, flag) {
				t.Errorf("%s: RESP command %q is not flagged %s: %v", k.name, name, flag, cmd.Flags)
			}
		}
	}
	for name, cmd := range commands {
		// WATCH reads versions in the store itself; SPUBLISH's key is a channel, which names a slot only.
		if cmd.FirstKey != 0 && !bound[name] && !cmd.Grouped && name != "watch" && name != "spublish" {
			t.Errorf("RESP command %q takes keys but no key operation names it", name)
		}
	}
}

// opFixtures gives each key operation a store state and a request under which it succeeds, writing if it is
// a write.
var opFixtures = map[transport.Op]struct {
	setup func(s *store)
	req   kv.Request
}{
	kv.OpGet:        {putKey("k", "v", 0), kv.Request{Key: "k"}},
	kv.OpPut:        {nil, kv.Request{Key: "k", Value: []byte("v")}},
	kv.OpDelete:     {putKey("k", "v", 0), kv.Request{Key: "k"}},
	kv.OpIncr:       {putKey("k", "41", 0), kv.Request{Key: "k", Delta: 1}},
	kv.OpExpire:     {putKey("k", "v", 0), kv.Request{Key: "k", TTL: int64(time.Hour)}},
	kv.OpPersist:    {putKey("k", "v", time.Hour), kv.Request{Key: "k"}},
	kv.OpTTL:        {putKey("k", "v", time.Hour), kv.Request{Key: "k"}},
	kv.OpExpiryTime: {putKey("k", "v", time.Hour), kv.Request{Key: "k"}},
	kv.OpExists:     {putKey("k", "v", 0), kv.Request{Key: "k"}},
	kv.OpPutIf:      {putKey("k", "v", 0), kv.Request{Key: "k", Value: []byte("w"), Cond: kv.CondIfExists}},

	kv.OpGetEntry:        {putKey("k", "v", time.Hour), kv.Request{Key: "k"}},
	kv.OpNearGet:         {putKey("k", "v", time.Hour), kv.Request{Key: "k"}},
	kv.OpPutIfVersion:    {putKey("k", "v", 0), kv.Request{Key: "k", Value: []byte("w"), Version: 1}},
	kv.OpDeleteIfVersion: {putKey("k", "v", 0), kv.Request{Key: "k", Version: 1}},

	kv.OpIncrByFloat: {putKey("k", "1.5", 0), kv.Request{Key: "k", Value: []byte("0.25")}},
	kv.OpAppend:      {putKey("k", "v", 0), kv.Request{Key: "k", Value: []byte("w")}},
	kv.OpGetDel:      {putKey("k", "v", 0), kv.Request{Key: "k"}},
	kv.OpGetEx:       {putKey("k", "v", 0), kv.Request{Key: "k", TTL: int64(time.Hour)}},
	kv.OpType:        {putKey("k", "v", 0), kv.Request{Key: "k"}},
	kv.OpObject:      {putKey("k", "v", 0), kv.Request{Key: "k", Args: [][]byte{[]byte("encoding")}}},
	kv.OpSetRange:    {putKey("k", "v", 0), kv.Request{Key: "k", Delta: 2, Value: []byte("w")}},
	kv.OpHSet:        {nil, collReq("f", "v")},
	kv.OpHGet:        {collKey(kv.OpHSet, "f", "v"), collReq("f")},
	kv.OpHMGet:       {collKey(kv.OpHSet, "f", "v"), collReq("f", "g")},
	kv.OpHDel:        {collKey(kv.OpHSet, "f", "v", "g", "w"), collReq("f")},
	kv.OpHGetAll:     {collKey(kv.OpHSet, "f", "v"), collReq()},
	kv.OpHLen:        {collKey(kv.OpHSet, "f", "v"), collReq()},
	kv.OpHIncrBy:     {collKey(kv.OpHSet, "f", "1"), collReq("f", "2")},
	kv.OpHExists:     {collKey(kv.OpHSet, "f", "v"), collReq("f")},

	kv.OpSAdd:      {nil, collReq("m")},
	kv.OpSRem:      {collKey(kv.OpSAdd, "m", "n"), collReq("m")},
	kv.OpSMembers:  {collKey(kv.OpSAdd, "m"), collReq()},
	kv.OpSIsMember: {collKey(kv.OpSAdd, "m"), collReq("m")},
	kv.OpSCard:     {collKey(kv.OpSAdd, "m"), collReq()},

	kv.OpLPush:  {nil, collReq("a")},
	kv.OpRPush:  {collKey(kv.OpRPush, "a"), collReq("b")},
	kv.OpLPop:   {collKey(kv.OpRPush, "a", "b"), collReq()},
	kv.OpRPop:   {collKey(kv.OpRPush, "a", "b"), collReq("1")},
	kv.OpLRange: {collKey(kv.OpRPush, "a", "b"), collReq("0", "-1")},
	kv.OpLLen:   {collKey(kv.OpRPush, "a"), collReq()},
	kv.OpLIndex: {collKey(kv.OpRPush, "a"), collReq("0")},
	kv.OpLTrim:  {collKey(kv.OpRPush, "a", "b"), collReq("0", "0")},

	kv.OpZAdd:    {nil, collReq("1", "m")},
	kv.OpZRem:    {collKey(kv.OpZAdd, "1", "m", "2", "n"), collReq("m")},
	kv.OpZScore:  {collKey(kv.OpZAdd, "1", "m"), collReq("m")},
	kv.OpZRange:  {collKey(kv.OpZAdd, "1", "m"), collReq("0", "-1")},
	kv.OpZRank:   {collKey(kv.OpZAdd, "1", "m"), collReq("m")},
	kv.OpZCard:   {collKey(kv.OpZAdd, "1", "m"), collReq()},
	kv.OpZIncrBy: {collKey(kv.OpZAdd, "1", "m"), collReq("2", "m")},
	kv.OpSPop:    {collKey(kv.OpSAdd, "m", "n"), collReq()},
	kv.OpZPopMin: {collKey(kv.OpZAdd, "1", "m", "2", "n"), collReq("1")},
	kv.OpZPopMax: {collKey(kv.OpZAdd, "1", "m", "2", "n"), collReq()},
	kv.OpHSetNX:  {collKey(kv.OpHSet, "f", "v"), collReq("g", "w")},
	kv.OpLMove:   {collKey(kv.OpRPush, "a", "b"), collReq("k", "left", "right")},

	kv.OpCheckVersion: {putKey("k", "v", 0), kv.Request{Key: "k", Version: 1}},
	kv.OpTxn: {putKey("k", "v", 0), kv.Request{Key: "k", Args: txnArgs(
		txnItem{op: kv.OpCheckVersion, req: kv.Request{Key: "k", Version: 1}},
		txnItem{op: kv.OpPut, req: kv.Request{Key: "k", Value: []byte("w")}},
		txnItem{op: kv.OpHSet, req: kv.Request{Key: "h", Args: stringArgs([]string{"f", "v"})}},
	)}},
	kv.OpIntent:  {nil, kv.Request{Key: "k", Value: (&intent{txn: "t", anchor: "a", action: intentPut, value: []byte("v")}).encode(), Delta: int64(time.Second)}},
	kv.OpResolve: {holdKey("k", "t"), kv.Request{Key: "k", Value: []byte("t"), Delta: 1}},
	kv.OpDecide:  {nil, kv.Request{Key: "k", Value: []byte("t"), Delta: 1, TTL: int64(time.Hour)}},
	kv.OpForget:  {func(s *store) { s.put(0, recordKey("t"), []byte{recordCommitted}, forTTL(0)) }, kv.Request{Key: "k", Value: []byte("t")}},
}

// holdKey places transaction txn's intent to put "v" on key.
func holdKey(key, txn string) func(s *store) {
	return func(s *store) {
		s.put(0, intentKey(key), (&intent{txn: txn, anchor: key, action: intentPut, value: []byte("v")}).encode(), forTTL(0))
	}
}

// txnArgs encodes items as a transaction request's arguments.
func txnArgs(items ...txnItem) [][]byte { return encodeTxnItems(items) }

// collReq is a request for a collection operation on key k.
func collReq(args ...string) kv.Request { return kv.Request{Key: "k", Args: stringArgs(args)} }

// collKey creates the collection k with op.
func collKey(op transport.Op, args ...string) func(s *store) {
	return func(s *store) { lookupKeyOp(op).apply(s, 0, collReq(args...), opLimits{maxValueSize: 1 << 10}) }
}

func putKey(key, value string, ttl time.Duration) func(s *store) {
	return func(s *store) { s.put(0, key, []byte(value), forTTL(ttl)) }
}

// testStart is when a test store's clock starts, in Unix nanoseconds.
const testStart = int64(1_000_000 * time.Second)

func newTestStore() (*store, *clocktest.Manual) {
	clock := clocktest.New(time.Unix(0, testStart))
	return newStore(4, clock), clock
}

var testLimits = opLimits{maxValueSize: 8, maxReplyBytes: 64}

// applyFixture applies k to segment 0 of s as the node would: in an atomic group when it runs only in a
// transaction.
func applyFixture(s *store, k *keyOperation, req kv.Request) (reply kv.Reply) {
	if !k.txnOnly {
		return k.apply(s, 0, req, testLimits)
	}
	s.atomically(0, func(g *store) { reply = k.apply(g, 0, req, testLimits) })
	return reply
}

// TestKeyOperationsWriteOrNot applies every operation to a bare store: a write moves the segment's
// revision once, a read-only operation never moves it, whatever the state it meets.
func TestKeyOperationsWriteOrNot(t *testing.T) {
	for i := range keyOps {
		op, k := transport.Op(i), &keyOps[i]
		if k.apply == nil {
			continue
		}
		fx, ok := opFixtures[op]
		if !ok {
			t.Errorf("%s has no fixture in opFixtures", k.name)
			continue
		}
		s, _ := newTestStore()
		if fx.setup != nil {
			fx.setup(s)
		}
		before := s.revision(0)
		req := fx.req
		if reply := applyFixture(s, k, req); reply.Status != StatusSuccess {
			t.Errorf("%s on its fixture: %v", k.name, reply.Status)
		}
		moved := s.revision(0) - before
		switch {
		case k.readOnly && moved != 0:
			t.Errorf("read-only %s moved the revision by %d", k.name, moved)
		case !k.readOnly && moved != 1:
			t.Errorf("write %s moved the revision by %d, want 1", k.name, moved)
		}
		if !k.readOnly {
			continue
		}
		for _, other := range opFixtures { // every state and request the fixtures know
			s, _ := newTestStore()
			if other.setup != nil {
				other.setup(s)
			}
			before, req := s.revision(0), other.req
			k.apply(s, 0, req, testLimits)
			if s.revision(0) != before {
				t.Errorf("read-only %s wrote on request %+v", k.name, other.req)
			}
		}
	}
}

// TestApplyFunctions runs each operation's apply function against a bare store, without a cluster.
func TestApplyFunctions(t *testing.T) {
	type stored struct {
		value string // "" for no live value
		ttl   time.Duration
	}
	cases := []struct {
		name  string
		op    transport.Op
		setup func(s *store, clock *clocktest.Manual)
		req   kv.Request
		want  kv.Reply
		after *stored // the key's state after, when the case checks it
	}{
		{name: "get missing", op: kv.OpGet, req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusNotFound}},
		{name: "get", op: kv.OpGet, setup: put("k", "v", 0), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v"), Version: 1}},
		{name: "get with ttl", op: kv.OpGet, setup: putThen("k", "v", time.Hour, time.Minute), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v"), Version: 1, Int: int64(59 * time.Minute)}},
		{name: "get expired", op: kv.OpGet, setup: putThen("k", "v", time.Second, 2*time.Second), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusNotFound}},

		{name: "put", op: kv.OpPut, req: kv.Request{Key: "k", Value: []byte("v"), TTL: int64(time.Hour)},
			want: kv.Reply{Status: StatusSuccess, Version: 1}, after: &stored{"v", time.Hour}},
		{name: "put until a time", op: kv.OpPut, req: kv.Request{Key: "k", Value: []byte("v"), TTL: int64(time.Minute), ExpireAt: testStart + int64(time.Hour)},
			want: kv.Reply{Status: StatusSuccess, Version: 1}, after: &stored{"v", time.Hour}},
		{name: "put over", op: kv.OpPut, setup: put("k", "v", 0), req: kv.Request{Key: "k", Value: []byte("w")},
			want: kv.Reply{Status: StatusSuccess, Version: 2}, after: &stored{"w", NoExpiry}},
		{name: "put too large", op: kv.OpPut, req: kv.Request{Key: "k", Value: []byte("123456789")},
			want: kv.Reply{Status: StatusInvalidRequest}, after: &stored{}},

		{name: "delete", op: kv.OpDelete, setup: put("k", "v", 0), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess}, after: &stored{}},
		{name: "delete missing", op: kv.OpDelete, req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusNotFound}},

		{name: "incr missing", op: kv.OpIncr, req: kv.Request{Key: "k", Delta: -3},
			want: kv.Reply{Status: StatusSuccess, Int: -3}, after: &stored{"-3", NoExpiry}},
		{name: "incr keeps ttl", op: kv.OpIncr, setup: put("k", "41", time.Hour), req: kv.Request{Key: "k", Delta: 1},
			want: kv.Reply{Status: StatusSuccess, Int: 42}, after: &stored{"42", time.Hour}},
		{name: "incr not canonical", op: kv.OpIncr, setup: put("k", "01", 0), req: kv.Request{Key: "k", Delta: 1},
			want: kv.Reply{Status: StatusInvalidRequest}, after: &stored{"01", NoExpiry}},
		{name: "incr overflow", op: kv.OpIncr, setup: put("k", strconv.FormatInt(math.MaxInt64, 10), 0), req: kv.Request{Key: "k", Delta: 1},
			want: kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedIncrOverflow}},

		{name: "expire", op: kv.OpExpire, setup: put("k", "v", 0), req: kv.Request{Key: "k", TTL: int64(time.Minute)},
			want: kv.Reply{Status: StatusSuccess}, after: &stored{"v", time.Minute}},
		{name: "expire at a time", op: kv.OpExpire, setup: put("k", "v", 0), req: kv.Request{Key: "k", TTL: int64(time.Minute), ExpireAt: testStart + int64(time.Hour)},
			want: kv.Reply{Status: StatusSuccess}, after: &stored{"v", time.Hour}},
		{name: "expire at a time past deletes", op: kv.OpExpire, setup: put("k", "v", 0), req: kv.Request{Key: "k", TTL: int64(time.Minute), ExpireAt: testStart},
			want: kv.Reply{Status: StatusSuccess}, after: &stored{}},
		{name: "expire missing", op: kv.OpExpire, req: kv.Request{Key: "k", TTL: int64(time.Minute)},
			want: kv.Reply{Status: StatusNotFound}, after: &stored{}},
		{name: "expire non-positive deletes", op: kv.OpExpire, setup: put("k", "v", 0), req: kv.Request{Key: "k", TTL: -1},
			want: kv.Reply{Status: StatusSuccess}, after: &stored{}},

		{name: "persist", op: kv.OpPersist, setup: put("k", "v", time.Hour), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Int: 1}, after: &stored{"v", NoExpiry}},
		{name: "persist without expiry", op: kv.OpPersist, setup: put("k", "v", 0), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess}},
		{name: "persist missing", op: kv.OpPersist, req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusNotFound}},

		{name: "ttl", op: kv.OpTTL, setup: putThen("k", "v", time.Hour, 10*time.Minute), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Int: int64(50 * time.Minute)}},
		{name: "ttl without expiry", op: kv.OpTTL, setup: put("k", "v", 0), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Int: int64(NoExpiry)}},
		{name: "ttl missing", op: kv.OpTTL, req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusNotFound}},
		{name: "expirytime", op: kv.OpExpiryTime, setup: putThen("k", "v", time.Hour, 10*time.Minute), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Int: testStart + int64(time.Hour)}},
		{name: "expirytime without expiry", op: kv.OpExpiryTime, setup: put("k", "v", 0), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Int: int64(NoExpiry)}},
		{name: "expirytime missing", op: kv.OpExpiryTime, req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusNotFound}},

		{name: "exists", op: kv.OpExists, setup: put("k", "v", 0), req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusSuccess}},
		{name: "exists missing", op: kv.OpExists, req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusNotFound}},

		{name: "putif absent", op: kv.OpPutIf, req: kv.Request{Key: "k", Value: []byte("v"), Cond: kv.CondIfAbsent},
			want: kv.Reply{Status: StatusSuccess, Int: 1}, after: &stored{"v", NoExpiry}},
		{name: "putif absent unmet", op: kv.OpPutIf, setup: put("k", "v", 0), req: kv.Request{Key: "k", Value: []byte("w"), Cond: kv.CondIfAbsent | kv.CondReturnPrev},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v"), Existed: true}, after: &stored{"v", NoExpiry}},
		{name: "putif exists unmet", op: kv.OpPutIf, req: kv.Request{Key: "k", Value: []byte("w"), Cond: kv.CondIfExists},
			want: kv.Reply{Status: StatusSuccess}, after: &stored{}},
		{name: "putif keepttl swap", op: kv.OpPutIf, setup: put("k", "v", time.Hour), req: kv.Request{Key: "k", Value: []byte("w"), Cond: kv.CondIfExists | kv.CondKeepTTL | kv.CondReturnPrev},
			want: kv.Reply{Status: StatusSuccess, Int: 1, Value: []byte("v"), Existed: true}, after: &stored{"w", time.Hour}},
		{name: "putif both conditions", op: kv.OpPutIf, req: kv.Request{Key: "k", Value: []byte("v"), Cond: kv.CondIfAbsent | kv.CondIfExists},
			want: kv.Reply{Status: StatusInvalidRequest}, after: &stored{}},
		{name: "putif too large", op: kv.OpPutIf, req: kv.Request{Key: "k", Value: []byte("123456789")},
			want: kv.Reply{Status: StatusInvalidRequest}, after: &stored{}},

		{name: "getentry", op: kv.OpGetEntry, setup: putThen("k", "v", time.Hour, time.Minute), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v"), Version: 1, Int: int64(59 * time.Minute)}},
		{name: "getentry without expiry", op: kv.OpGetEntry, setup: writes(put("k", "v", 0), put("other", "x", 0), put("k", "w", 0)),
			req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusSuccess, Value: []byte("w"), Version: 3}},
		{name: "getentry missing", op: kv.OpGetEntry, req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusNotFound}},
		{name: "getentry expired", op: kv.OpGetEntry, setup: putThen("k", "v", time.Second, time.Second), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusNotFound}},
		{name: "nearget", op: kv.OpNearGet, setup: writes(put("k", "v", time.Hour), put("other", "x", 0)), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v"), Version: 1, Int: int64(time.Hour), Revision: 2}},
		{name: "nearget unchanged", op: kv.OpNearGet, setup: writes(put("k", "v", 0), put("other", "x", 0)), req: kv.Request{Key: "k", Version: 1},
			want: kv.Reply{Status: StatusSuccess, Version: 1, Existed: true, Revision: 2}},
		{name: "nearget changed", op: kv.OpNearGet, setup: writes(put("k", "v", 0), put("k", "w", 0)), req: kv.Request{Key: "k", Version: 1},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("w"), Version: 2, Revision: 2}},
		{name: "nearget missing", op: kv.OpNearGet, setup: put("other", "x", 0), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusNotFound, Revision: 1}},

		{name: "putifversion absent", op: kv.OpPutIfVersion, req: kv.Request{Key: "k", Value: []byte("v"), TTL: int64(time.Hour)},
			want: kv.Reply{Status: StatusSuccess, Version: 1}, after: &stored{"v", time.Hour}},
		{name: "putifversion absent unmet", op: kv.OpPutIfVersion, setup: put("k", "v", 0), req: kv.Request{Key: "k", Value: []byte("w")},
			want: kv.Reply{Status: StatusVersionMismatch, Version: 1}, after: &stored{"v", NoExpiry}},
		{name: "putifversion match", op: kv.OpPutIfVersion, setup: writes(put("k", "v", 0), put("other", "x", 0)),
			req: kv.Request{Key: "k", Value: []byte("w"), Version: 1}, want: kv.Reply{Status: StatusSuccess, Version: 3}, after: &stored{"w", NoExpiry}},
		{name: "putifversion stale", op: kv.OpPutIfVersion, setup: writes(put("k", "v", 0), put("k", "w", 0)),
			req: kv.Request{Key: "k", Value: []byte("x"), Version: 1}, want: kv.Reply{Status: StatusVersionMismatch, Version: 2}, after: &stored{"w", NoExpiry}},
		{name: "putifversion missing", op: kv.OpPutIfVersion, req: kv.Request{Key: "k", Value: []byte("v"), Version: 1},
			want: kv.Reply{Status: StatusVersionMismatch}, after: &stored{}},
		{name: "putifversion expired", op: kv.OpPutIfVersion, setup: putThen("k", "v", time.Second, time.Second),
			req: kv.Request{Key: "k", Value: []byte("w"), Version: 1}, want: kv.Reply{Status: StatusVersionMismatch}, after: &stored{}},
		{name: "putifversion keepttl", op: kv.OpPutIfVersion, setup: putThen("k", "v", time.Hour, time.Minute),
			req:  kv.Request{Key: "k", Value: []byte("w"), Cond: kv.CondKeepTTL, Version: 1, TTL: int64(time.Second)},
			want: kv.Reply{Status: StatusSuccess, Version: 2}, after: &stored{"w", 59 * time.Minute}},
		{name: "putifversion with ifabsent", op: kv.OpPutIfVersion, req: kv.Request{Key: "k", Value: []byte("v"), Cond: kv.CondIfAbsent},
			want: kv.Reply{Status: StatusInvalidRequest}, after: &stored{}},
		{name: "putifversion too large", op: kv.OpPutIfVersion, req: kv.Request{Key: "k", Value: []byte("123456789")},
			want: kv.Reply{Status: StatusInvalidRequest}, after: &stored{}},

		{name: "deleteifversion", op: kv.OpDeleteIfVersion, setup: writes(put("other", "x", 0), put("k", "v", 0)), req: kv.Request{Key: "k", Version: 2},
			want: kv.Reply{Status: StatusSuccess}, after: &stored{}},
		{name: "deleteifversion stale", op: kv.OpDeleteIfVersion, setup: writes(put("k", "v", 0), put("k", "w", 0)), req: kv.Request{Key: "k", Version: 1},
			want: kv.Reply{Status: StatusVersionMismatch, Version: 2}, after: &stored{"w", NoExpiry}},
		{name: "deleteifversion missing", op: kv.OpDeleteIfVersion, req: kv.Request{Key: "k", Version: 1},
			want: kv.Reply{Status: StatusVersionMismatch}},
		{name: "deleteifversion absent as asked", op: kv.OpDeleteIfVersion, req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusNotFound}},
		{name: "deleteifversion absent unmet", op: kv.OpDeleteIfVersion, setup: put("k", "v", 0), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusVersionMismatch, Version: 1}, after: &stored{"v", NoExpiry}},

		{name: "incrbyfloat missing", op: kv.OpIncrByFloat, req: kv.Request{Key: "k", Value: []byte("0.1")},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("0.1")}, after: &stored{"0.1", NoExpiry}},
		{name: "incrbyfloat keeps ttl", op: kv.OpIncrByFloat, setup: put("k", "10.50", time.Hour), req: kv.Request{Key: "k", Value: []byte("0.1")},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("10.6")}, after: &stored{"10.6", time.Hour}},
		{name: "incrbyfloat of text", op: kv.OpIncrByFloat, setup: put("k", "1x", 0), req: kv.Request{Key: "k", Value: []byte("1")},
			want: kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedNotFloat}, after: &stored{"1x", NoExpiry}},
		{name: "incrbyfloat by text", op: kv.OpIncrByFloat, setup: put("k", "1", 0), req: kv.Request{Key: "k", Value: []byte("nan")},
			want: kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedNotFloat}, after: &stored{"1", NoExpiry}},
		{name: "incrbyfloat to infinity", op: kv.OpIncrByFloat, setup: put("k", "1", 0), req: kv.Request{Key: "k", Value: []byte("-inf")},
			want: kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedNotFinite}, after: &stored{"1", NoExpiry}},
		{name: "incrbyfloat overflow", op: kv.OpIncrByFloat, setup: put("k", "1.1e4932", 0), req: kv.Request{Key: "k", Value: []byte("1e4932")},
			want: kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedNotFinite}},

		{name: "append missing", op: kv.OpAppend, req: kv.Request{Key: "k", Value: []byte("ab")},
			want: kv.Reply{Status: StatusSuccess, Int: 2}, after: &stored{"ab", NoExpiry}},
		{name: "append keeps ttl", op: kv.OpAppend, setup: put("k", "ab", time.Hour), req: kv.Request{Key: "k", Value: []byte("cd")},
			want: kv.Reply{Status: StatusSuccess, Int: 4}, after: &stored{"abcd", time.Hour}},
		{name: "append up to the limit", op: kv.OpAppend, setup: put("k", "1234", 0), req: kv.Request{Key: "k", Value: []byte("5678")},
			want: kv.Reply{Status: StatusSuccess, Int: 8}, after: &stored{"12345678", NoExpiry}},
		{name: "append too large", op: kv.OpAppend, setup: put("k", "12345", 0), req: kv.Request{Key: "k", Value: []byte("6789")},
			want: kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedTooLarge}, after: &stored{"12345", NoExpiry}},

		{name: "getdel", op: kv.OpGetDel, setup: put("k", "v", time.Hour), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v")}, after: &stored{}},
		{name: "getdel missing", op: kv.OpGetDel, req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusNotFound}},
		{name: "getdel expired", op: kv.OpGetDel, setup: putThen("k", "v", time.Second, time.Second), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusNotFound}},

		{name: "getex sets ttl", op: kv.OpGetEx, setup: put("k", "v", 0), req: kv.Request{Key: "k", TTL: int64(time.Minute)},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v"), Int: 1}, after: &stored{"v", time.Minute}},
		{name: "getex until a time", op: kv.OpGetEx, setup: put("k", "v", 0), req: kv.Request{Key: "k", TTL: int64(time.Minute), ExpireAt: testStart + int64(time.Hour)},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v"), Int: 1}, after: &stored{"v", time.Hour}},
		{name: "getex keeps ttl", op: kv.OpGetEx, setup: put("k", "v", time.Hour), req: kv.Request{Key: "k", Cond: kv.CondKeepTTL},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v")}, after: &stored{"v", time.Hour}},
		{name: "getex persists", op: kv.OpGetEx, setup: put("k", "v", time.Hour), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v"), Int: 1}, after: &stored{"v", NoExpiry}},
		{name: "getex persists without expiry", op: kv.OpGetEx, setup: put("k", "v", 0), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v")}, after: &stored{"v", NoExpiry}},
		{name: "getex negative deletes", op: kv.OpGetEx, setup: put("k", "v", 0), req: kv.Request{Key: "k", TTL: -1},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("v"), Int: 1}, after: &stored{}},
		{name: "getex missing", op: kv.OpGetEx, req: kv.Request{Key: "k", TTL: int64(time.Minute)},
			want: kv.Reply{Status: StatusNotFound}, after: &stored{}},
		{name: "getex with a condition", op: kv.OpGetEx, setup: put("k", "v", 0), req: kv.Request{Key: "k", Cond: kv.CondIfExists},
			want: kv.Reply{Status: StatusInvalidRequest}, after: &stored{"v", NoExpiry}},

		{name: "setrange missing pads", op: kv.OpSetRange, req: kv.Request{Key: "k", Delta: 2, Value: []byte("ab")},
			want: kv.Reply{Status: StatusSuccess, Int: 4}, after: &stored{"\x00\x00ab", NoExpiry}},
		{name: "setrange inside keeps ttl", op: kv.OpSetRange, setup: put("k", "hello", time.Hour), req: kv.Request{Key: "k", Delta: 1, Value: []byte("EL")},
			want: kv.Reply{Status: StatusSuccess, Int: 5}, after: &stored{"hELlo", time.Hour}},
		{name: "setrange past the end", op: kv.OpSetRange, setup: put("k", "ab", 0), req: kv.Request{Key: "k", Delta: 1, Value: []byte("xyz")},
			want: kv.Reply{Status: StatusSuccess, Int: 4}, after: &stored{"axyz", NoExpiry}},
		{name: "setrange up to the limit", op: kv.OpSetRange, req: kv.Request{Key: "k", Delta: 7, Value: []byte("z")},
			want: kv.Reply{Status: StatusSuccess, Int: 8}, after: &stored{"\x00\x00\x00\x00\x00\x00\x00z", NoExpiry}},
		{name: "setrange too large", op: kv.OpSetRange, setup: put("k", "ab", 0), req: kv.Request{Key: "k", Delta: 8, Value: []byte("z")},
			want: kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedTooLarge}, after: &stored{"ab", NoExpiry}},
		{name: "setrange huge offset", op: kv.OpSetRange, req: kv.Request{Key: "k", Delta: math.MaxInt64, Value: []byte("z")},
			want: kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedTooLarge}, after: &stored{}},
		{name: "setrange negative offset", op: kv.OpSetRange, req: kv.Request{Key: "k", Delta: -1, Value: []byte("z")},
			want: kv.Reply{Status: StatusInvalidRequest}, after: &stored{}},
		{name: "setrange empty", op: kv.OpSetRange, setup: put("k", "ab", 0), req: kv.Request{Key: "k", Delta: 1},
			want: kv.Reply{Status: StatusInvalidRequest}, after: &stored{"ab", NoExpiry}},

		{name: "type string", op: kv.OpType, setup: put("k", "v", 0), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("string")}},
		{name: "type none", op: kv.OpType, req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusSuccess, Value: []byte("none")}},
		{name: "type expired", op: kv.OpType, setup: putThen("k", "v", time.Second, time.Second), req: kv.Request{Key: "k"},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("none")}},

		{name: "object encoding int", op: kv.OpObject, setup: put("k", "-12", 0), req: kv.Request{Key: "k", Args: [][]byte{[]byte("encoding")}},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("int")}},
		{name: "object encoding not canonical", op: kv.OpObject, setup: put("k", "012", 0), req: kv.Request{Key: "k", Args: [][]byte{[]byte("encoding")}},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("embstr")}},
		{name: "object encoding raw", op: kv.OpObject, setup: put("k", strings.Repeat("x", 45), 0), req: kv.Request{Key: "k", Args: [][]byte{[]byte("encoding")}},
			want: kv.Reply{Status: StatusSuccess, Value: []byte("raw")}},
		{name: "object missing", op: kv.OpObject, req: kv.Request{Key: "k", Args: [][]byte{[]byte("encoding")}}, want: kv.Reply{Status: StatusNotFound}},
		{name: "object expired", op: kv.OpObject, setup: putThen("k", "v", time.Second, time.Second), req: kv.Request{Key: "k", Args: [][]byte{[]byte("freq")}},
			want: kv.Reply{Status: StatusNotFound}},
		{name: "object freq without lfu", op: kv.OpObject, setup: put("k", "v", 0), req: kv.Request{Key: "k", Args: [][]byte{[]byte("freq")}},
			want: kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedNoFrequency}},
		{name: "object idletime without a policy", op: kv.OpObject, setup: put("k", "v", 0), req: kv.Request{Key: "k", Args: [][]byte{[]byte("idletime")}},
			want: kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedNoIdleTime}},
		{name: "object unknown", op: kv.OpObject, setup: put("k", "v", 0), req: kv.Request{Key: "k", Args: [][]byte{[]byte("refs")}},
			want: kv.Reply{Status: StatusInvalidRequest}},

		{name: "checkversion", op: kv.OpCheckVersion, setup: put("k", "v", 0), req: kv.Request{Key: "k", Version: 1},
			want: kv.Reply{Status: StatusSuccess, Version: 1}},
		{name: "checkversion mismatch", op: kv.OpCheckVersion, setup: put("k", "v", 0), req: kv.Request{Key: "k", Version: 2},
			want: kv.Reply{Status: StatusVersionMismatch, Version: 1}},
		{name: "checkversion absent", op: kv.OpCheckVersion, req: kv.Request{Key: "k"}, want: kv.Reply{Status: StatusSuccess}},
		{name: "txn", op: kv.OpTxn, setup: put("k", "v", 0), req: kv.Request{Key: "k", Args: txnArgs(
			txnItem{op: kv.OpCheckVersion, req: kv.Request{Key: "k", Version: 1}}, txnItem{op: kv.OpPut, req: kv.Request{Key: "k", Value: []byte("w")}})},
			want: kv.Reply{Status: StatusSuccess}, after: &stored{"w", NoExpiry}},
		{name: "txn conflict", op: kv.OpTxn, setup: put("k", "v", 0), req: kv.Request{Key: "k", Args: txnArgs(
			txnItem{op: kv.OpPut, req: kv.Request{Key: "k", Value: []byte("w")}}, txnItem{op: kv.OpCheckVersion, req: kv.Request{Key: "k", Version: 5}})},
			want: kv.Reply{Status: StatusVersionMismatch, Version: 1, Int: 1}, after: &stored{"v", NoExpiry}},
		{name: "txn on a held key", op: kv.OpTxn, setup: held("k", "other"), req: kv.Request{Key: "k", Args: txnArgs(
			txnItem{op: kv.OpPut, req: kv.Request{Key: "k", Value: []byte("w")}})},
			want: kv.Reply{Status: StatusLocked}, after: &stored{}},
		{name: "intent", op: kv.OpIntent, req: kv.Request{Key: "k", Value: intentOf("t", "w"), Delta: int64(time.Second)},
			want: kv.Reply{Status: StatusSuccess, Version: 1}, after: &stored{}},
		{name: "intent held by another", op: kv.OpIntent, setup: held("k", "other"), req: kv.Request{Key: "k", Value: intentOf("t", "w")},
			want: kv.Reply{Status: StatusLocked}},
		{name: "intent again", op: kv.OpIntent, setup: held("k", "t"), req: kv.Request{Key: "k", Value: intentOf("t", "w")},
			want: kv.Reply{Status: StatusSuccess}},
		{name: "intent malformed", op: kv.OpIntent, req: kv.Request{Key: "k", Value: []byte("x")},
			want: invalidArgs("ERR invalid intent: intent: msgp: attempted to decode type \"int\" with method for \"array\"")},
		{name: "resolve commit", op: kv.OpResolve, setup: held("k", "t"), req: kv.Request{Key: "k", Value: []byte("t"), Delta: 1},
			want: kv.Reply{Status: StatusSuccess, Int: 1}, after: &stored{"v", NoExpiry}},
		{name: "resolve abort", op: kv.OpResolve, setup: writes(put("k", "old", 0), held("k", "t")), req: kv.Request{Key: "k", Value: []byte("t")},
			want: kv.Reply{Status: StatusSuccess, Int: 1}, after: &stored{"old", NoExpiry}},
		{name: "resolve another's", op: kv.OpResolve, setup: held("k", "u"), req: kv.Request{Key: "k", Value: []byte("t"), Delta: 1},
			want: kv.Reply{Status: StatusSuccess}, after: &stored{}},
		{name: "decide commit", op: kv.OpDecide, req: kv.Request{Key: "k", Value: []byte("t"), Delta: 1},
			want: kv.Reply{Status: StatusSuccess, Int: 1, Version: 1}},
		{name: "decide another outcome aborts", op: kv.OpDecide, req: kv.Request{Key: "k", Value: []byte("t"), Delta: 5},
			want: kv.Reply{Status: StatusSuccess, Version: 1}},
		{name: "decide abort after a commit", op: kv.OpDecide, setup: recorded("t", recordCommitted), req: kv.Request{Key: "k", Value: []byte("t")},
			want: kv.Reply{Status: StatusSuccess, Int: 1}},
		{name: "decide commit after an abort", op: kv.OpDecide, setup: recorded("t", recordAborted), req: kv.Request{Key: "k", Value: []byte("t"), Delta: 1},
			want: kv.Reply{Status: StatusSuccess}},
		{name: "forget", op: kv.OpForget, setup: recorded("t", recordCommitted), req: kv.Request{Key: "k", Value: []byte("t")},
			want: kv.Reply{Status: StatusSuccess}},
		{name: "forget missing", op: kv.OpForget, req: kv.Request{Key: "k", Value: []byte("t")}, want: kv.Reply{Status: StatusNotFound}},
	}
	tested := map[transport.Op]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tested[tc.op] = true
			s, clock := newTestStore()
			if tc.setup != nil {
				tc.setup(s, clock)
			}
			got := applyFixture(s, lookupKeyOp(tc.op), tc.req)
			if got.Status != tc.want.Status || !bytes.Equal(got.Value, tc.want.Value) || got.Version != tc.want.Version ||
				got.Int != tc.want.Int || got.Existed != tc.want.Existed {
				t.Errorf("reply = %+v, want %+v", got, tc.want)
			}
			if tc.after == nil {
				return
			}
			value, _, ok := s.get(0, "k")
			ttl, _ := s.ttl(0, "k")
			if (tc.after.value == "") == ok || string(value) != tc.after.value || ok && ttl != tc.after.ttl {
				t.Errorf("stored %q (live %v, ttl %v), want %q (ttl %v)", value, ok, ttl, tc.after.value, tc.after.ttl)
			}
		})
	}
	for i, k := range keyOps {
		op := transport.Op(i)
		collection := slices.ContainsFunc(collectionSteps, func(step collectionStep) bool { return step.op == op })
		if k.apply != nil && !tested[op] && !collection { // collections' cases are in TestCollectionCommands
			t.Errorf("%s has no case", k.name)
		}
	}
}

// held places transaction txn's intent to put "v" on key.
func held(key, txn string) func(*store, *clocktest.Manual) {
	return func(s *store, _ *clocktest.Manual) { holdKey(key, txn)(s) }
}

// recorded records outcome for transaction txn.
func recorded(txn string, outcome byte) func(*store, *clocktest.Manual) {
	return func(s *store, _ *clocktest.Manual) { s.put(0, recordKey(txn), []byte{outcome}, forTTL(0)) }
}

// intentOf encodes transaction txn's intent to put value.
func intentOf(txn, value string) []byte {
	return (&intent{txn: txn, anchor: "a", action: intentPut, value: []byte(value)}).encode()
}

func put(key, value string, ttl time.Duration) func(*store, *clocktest.Manual) {
	return func(s *store, _ *clocktest.Manual) { s.put(0, key, []byte(value), forTTL(ttl)) }
}

// writes runs setups one after another.
func writes(setups ...func(*store, *clocktest.Manual)) func(*store, *clocktest.Manual) {
	return func(s *store, clock *clocktest.Manual) {
		for _, setup := range setups {
			setup(s, clock)
		}
	}
}

// putThen puts key and lets the clock run for elapsed.
func putThen(key, value string, ttl, elapsed time.Duration) func(*store, *clocktest.Manual) {
	return func(s *store, clock *clocktest.Manual) {
		s.put(0, key, []byte(value), forTTL(ttl))
		clock.Advance(elapsed)
	}
}

func TestRevealsState(t *testing.T) {
	success, notFound, written := kv.Reply{Status: StatusSuccess}, kv.Reply{Status: StatusNotFound}, kv.Reply{Status: StatusSuccess, Int: 1}
	cases := []struct {
		op    transport.Op
		reply kv.Reply
		want  bool
	}{
		{kv.OpGet, success, true},
		{kv.OpGet, notFound, true},
		{kv.OpTTL, written, true},
		{kv.OpExpiryTime, written, true},
		{kv.OpExists, notFound, true},
		{kv.OpPut, success, false},
		{kv.OpDelete, success, false},
		{kv.OpDelete, notFound, true},
		{kv.OpExpire, notFound, true},
		{kv.OpPersist, success, false},
		{kv.OpIncr, success, false},
		{kv.OpIncr, kv.Reply{Status: StatusInvalidRequest}, false},
		{kv.OpPutIf, written, false},
		{kv.OpPutIf, success, true}, // the condition was false: nothing written
		{kv.OpPutIf, kv.Reply{Status: StatusInvalidRequest}, false},
		{kv.OpGetEntry, success, true},
		{kv.OpGetEntry, notFound, true},
		{kv.OpNearGet, success, true},
		{kv.OpNearGet, notFound, true},
		{kv.OpPutIfVersion, kv.Reply{Status: StatusSuccess, Version: 3}, false},
		{kv.OpPutIfVersion, kv.Reply{Status: StatusVersionMismatch, Version: 2}, true},
		{kv.OpPutIfVersion, kv.Reply{Status: StatusInvalidRequest}, false},
		{kv.OpDeleteIfVersion, success, false},
		{kv.OpDeleteIfVersion, notFound, true}, // asked to delete only an absent key: nothing written
		{kv.OpDeleteIfVersion, kv.Reply{Status: StatusVersionMismatch}, true},
		{kv.OpPut, kv.Reply{Status: StatusVersionMismatch}, false},
		{kv.OpIncrByFloat, success, false},
		{kv.OpIncrByFloat, kv.Reply{Status: StatusInvalidRequest, Int: kv.RefusedNotFloat}, false},
		{kv.OpAppend, written, false},
		{kv.OpGetDel, success, false},
		{kv.OpGetDel, notFound, true},
		{kv.OpGetEx, written, false},
		{kv.OpGetEx, success, true}, // kept the expiry: a read
		{kv.OpGetEx, notFound, true},
		{kv.OpType, success, true},
		{kv.OpObject, success, true},
		{kv.OpSetRange, written, false},
		{kv.OpHSet, kv.Reply{Status: StatusSuccess, Version: 3, Int: 0}, false},
		{kv.OpHDel, success, true}, // no version: nothing deleted
		{kv.OpZAdd, kv.Reply{Status: StatusWrongType}, true},
		{kv.OpZRange, success, true},
		{kv.OpBatch, notFound, false},
		{999, success, false},
	}
	for _, tc := range cases {
		if got := revealsState(tc.op, &tc.reply); got != tc.want {
			t.Errorf("revealsState(%s, %v, Int %d) = %v, want %v", opName(tc.op), tc.reply.Status, tc.reply.Int, got, tc.want)
		}
	}
}

// TestKeyOperationDispatchAllocations checks that looking an operation up and running a read allocates
// nothing, not even the request it is given: every request does it.
func TestKeyOperationDispatchAllocations(t *testing.T) {
	s, _ := newTestStore()
	s.put(0, "k", []byte("v"), forTTL(0))
	allocs := testing.AllocsPerRun(100, func() {
		req := kv.Request{Key: "k"}
		reply := lookupKeyOp(kv.OpGet).apply(s, 0, req, testLimits)
		if !readOnly(kv.OpGet) || !revealsState(kv.OpGet, &reply) || reply.Status != StatusSuccess {
			t.Fatal("get did not read")
		}
	})
	if allocs != 0 {
		t.Errorf("dispatching a get allocates %v times", allocs)
	}
}
