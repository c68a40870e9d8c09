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
	"github.com/zaris-go/zaris/transport"
)

// wireOps pins every operation number: they are the wire format, so a renumbering must fail here.
var wireOps = []struct {
	name   string
	op     transport.Op
	number transport.Op
	key    bool // a key operation, declared in keyOps
}{
	{"opGet", opGet, 1, true},
	{"opPut", opPut, 2, true},
	{"opDelete", opDelete, 3, true},
	{"opGetMap", opGetMap, 4, false},
	{"opBatch", opBatch, 5, false},
	{"opIncr", opIncr, 10, true},
	{"opExpire", opExpire, 11, true},
	{"opPersist", opPersist, 12, true},
	{"opTTL", opTTL, 13, true},
	{"opExists", opExists, 14, true},
	{"opPutIf", opPutIf, 15, true},
	{"opGetEntry", opGetEntry, 16, true},
	{"opPutIfVersion", opPutIfVersion, 17, true},
	{"opDeleteIfVersion", opDeleteIfVersion, 18, true},
	{"opIncrByFloat", opIncrByFloat, 40, true},
	{"opAppend", opAppend, 41, true},
	{"opGetDel", opGetDel, 42, true},
	{"opGetEx", opGetEx, 43, true},
	{"opType", opType, 44, true},
	{"opObject", opObject, 19, true},
	{"opSetRange", opSetRange, 45, true},
	{"opHSet", opHSet, 48, true},
	{"opHGet", opHGet, 49, true},
	{"opHMGet", opHMGet, 50, true},
	{"opHDel", opHDel, 51, true},
	{"opHGetAll", opHGetAll, 52, true},
	{"opHLen", opHLen, 53, true},
	{"opHIncrBy", opHIncrBy, 54, true},
	{"opHExists", opHExists, 55, true},
	{"opSAdd", opSAdd, 56, true},
	{"opSRem", opSRem, 57, true},
	{"opSMembers", opSMembers, 58, true},
	{"opSIsMember", opSIsMember, 59, true},
	{"opSCard", opSCard, 60, true},
	{"opLPush", opLPush, 61, true},
	{"opRPush", opRPush, 62, true},
	{"opLPop", opLPop, 63, true},
	{"opRPop", opRPop, 64, true},
	{"opLRange", opLRange, 65, true},
	{"opLLen", opLLen, 66, true},
	{"opLIndex", opLIndex, 67, true},
	{"opLTrim", opLTrim, 68, true},
	{"opZAdd", opZAdd, 69, true},
	{"opZRem", opZRem, 70, true},
	{"opZScore", opZScore, 71, true},
	{"opZRange", opZRange, 72, true},
	{"opZRank", opZRank, 73, true},
	{"opZCard", opZCard, 74, true},
	{"opZIncrBy", opZIncrBy, 75, true},
	{"opReplicate", opReplicate, 20, false},
	{"opPropose", opPropose, 21, false},
	{"opServerProgress", opServerProgress, 22, false},
	{"opRecoverySurvey", opRecoverySurvey, 30, false},
	{"opRecoveryInstall", opRecoveryInstall, 31, false},
	{"opScan", opScan, 80, false},
	{"opWatch", opWatch, 85, false},
	{"opNearGet", opNearGet, 86, true},
	{"opNearWatch", opNearWatch, 87, false},
	{"opTxn", opTxn, 90, true},
	{"opCheckVersion", opCheckVersion, 91, true},
	{"opIntent", opIntent, 92, true},
	{"opResolve", opResolve, 93, true},
	{"opDecide", opDecide, 94, true},
	{"opForget", opForget, 95, true},
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

// opConstants returns the names of the transport.Op constants the package's sources declare.
func opConstants(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
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
	if opName(opBatch) != "operation 5" || opName(999) != "operation 999" {
		t.Errorf("opName of operations that are not key ones: %q, %q", opName(opBatch), opName(999))
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
	if mapped != int(BatchDelete) || batchOps[BatchGet] != opGet || batchOps[BatchPut] != opPut || batchOps[BatchDelete] != opDelete {
		t.Errorf("batch operations map to %v, want get, put, delete", batchOps[:BatchDelete+1])
	}
}

// TestKeyOperationsRESPBindings checks that each RESP command an operation names exists and is flagged
// read-only or write as the operation is, and that every RESP command with keys names its operation, but
// those composed of several (respCommand.grouped).
func TestKeyOperationsRESPBindings(t *testing.T) {
	bound := map[string]bool{}
	for _, k := range keyOps {
		for _, name := range k.resp {
			bound[name] = true
			cmd, ok := respCommandTable[name]
			if !ok {
				t.Errorf("%s: RESP command %q does not exist", k.name, name)
				continue
			}
			flag := "write"
			if k.readOnly {
				flag = "readonly"
			}
			if !cmd.hasFlag(flag) {
				t.Errorf("%s: RESP command %q is not flagged %s: %v", k.name, name, flag, cmd.flags)
			}
		}
	}
	for name, cmd := range respCommandTable {
		if cmd.firstKey != 0 && !bound[name] && !cmd.grouped && name != "watch" { // WATCH reads versions in the store itself
			t.Errorf("RESP command %q takes keys but no key operation names it", name)
		}
	}
}

// opFixtures gives each key operation a store state and a request under which it succeeds, writing if it is
// a write.
var opFixtures = map[transport.Op]struct {
	setup func(s *store)
	req   kvRequest
}{
	opGet:     {putKey("k", "v", 0), kvRequest{Key: "k"}},
	opPut:     {nil, kvRequest{Key: "k", Value: []byte("v")}},
	opDelete:  {putKey("k", "v", 0), kvRequest{Key: "k"}},
	opIncr:    {putKey("k", "41", 0), kvRequest{Key: "k", Delta: 1}},
	opExpire:  {putKey("k", "v", 0), kvRequest{Key: "k", TTL: int64(time.Hour)}},
	opPersist: {putKey("k", "v", time.Hour), kvRequest{Key: "k"}},
	opTTL:     {putKey("k", "v", time.Hour), kvRequest{Key: "k"}},
	opExists:  {putKey("k", "v", 0), kvRequest{Key: "k"}},
	opPutIf:   {putKey("k", "v", 0), kvRequest{Key: "k", Value: []byte("w"), Cond: condIfExists}},

	opGetEntry:        {putKey("k", "v", time.Hour), kvRequest{Key: "k"}},
	opNearGet:         {putKey("k", "v", time.Hour), kvRequest{Key: "k"}},
	opPutIfVersion:    {putKey("k", "v", 0), kvRequest{Key: "k", Value: []byte("w"), Version: 1}},
	opDeleteIfVersion: {putKey("k", "v", 0), kvRequest{Key: "k", Version: 1}},

	opIncrByFloat: {putKey("k", "1.5", 0), kvRequest{Key: "k", Value: []byte("0.25")}},
	opAppend:      {putKey("k", "v", 0), kvRequest{Key: "k", Value: []byte("w")}},
	opGetDel:      {putKey("k", "v", 0), kvRequest{Key: "k"}},
	opGetEx:       {putKey("k", "v", 0), kvRequest{Key: "k", TTL: int64(time.Hour)}},
	opType:        {putKey("k", "v", 0), kvRequest{Key: "k"}},
	opObject:      {putKey("k", "v", 0), kvRequest{Key: "k", Args: [][]byte{[]byte("encoding")}}},
	opSetRange:    {putKey("k", "v", 0), kvRequest{Key: "k", Delta: 2, Value: []byte("w")}},
	opHSet:        {nil, collReq("f", "v")},
	opHGet:        {collKey(opHSet, "f", "v"), collReq("f")},
	opHMGet:       {collKey(opHSet, "f", "v"), collReq("f", "g")},
	opHDel:        {collKey(opHSet, "f", "v", "g", "w"), collReq("f")},
	opHGetAll:     {collKey(opHSet, "f", "v"), collReq()},
	opHLen:        {collKey(opHSet, "f", "v"), collReq()},
	opHIncrBy:     {collKey(opHSet, "f", "1"), collReq("f", "2")},
	opHExists:     {collKey(opHSet, "f", "v"), collReq("f")},

	opSAdd:      {nil, collReq("m")},
	opSRem:      {collKey(opSAdd, "m", "n"), collReq("m")},
	opSMembers:  {collKey(opSAdd, "m"), collReq()},
	opSIsMember: {collKey(opSAdd, "m"), collReq("m")},
	opSCard:     {collKey(opSAdd, "m"), collReq()},

	opLPush:  {nil, collReq("a")},
	opRPush:  {collKey(opRPush, "a"), collReq("b")},
	opLPop:   {collKey(opRPush, "a", "b"), collReq()},
	opRPop:   {collKey(opRPush, "a", "b"), collReq("1")},
	opLRange: {collKey(opRPush, "a", "b"), collReq("0", "-1")},
	opLLen:   {collKey(opRPush, "a"), collReq()},
	opLIndex: {collKey(opRPush, "a"), collReq("0")},
	opLTrim:  {collKey(opRPush, "a", "b"), collReq("0", "0")},

	opZAdd:    {nil, collReq("1", "m")},
	opZRem:    {collKey(opZAdd, "1", "m", "2", "n"), collReq("m")},
	opZScore:  {collKey(opZAdd, "1", "m"), collReq("m")},
	opZRange:  {collKey(opZAdd, "1", "m"), collReq("0", "-1")},
	opZRank:   {collKey(opZAdd, "1", "m"), collReq("m")},
	opZCard:   {collKey(opZAdd, "1", "m"), collReq()},
	opZIncrBy: {collKey(opZAdd, "1", "m"), collReq("2", "m")},

	opCheckVersion: {putKey("k", "v", 0), kvRequest{Key: "k", Version: 1}},
	opTxn: {putKey("k", "v", 0), kvRequest{Key: "k", Args: txnArgs(
		txnItem{op: opCheckVersion, req: kvRequest{Key: "k", Version: 1}},
		txnItem{op: opPut, req: kvRequest{Key: "k", Value: []byte("w")}},
		txnItem{op: opHSet, req: kvRequest{Key: "h", Args: stringArgs([]string{"f", "v"})}},
	)}},
	opIntent:  {nil, kvRequest{Key: "k", Value: (&intent{txn: "t", anchor: "a", action: intentPut, value: []byte("v")}).encode(), Delta: int64(time.Second)}},
	opResolve: {holdKey("k", "t"), kvRequest{Key: "k", Value: []byte("t"), Delta: 1}},
	opDecide:  {nil, kvRequest{Key: "k", Value: []byte("t"), Delta: 1, TTL: int64(time.Hour)}},
	opForget:  {func(s *store) { s.put(0, recordKey("t"), []byte{recordCommitted}, 0) }, kvRequest{Key: "k", Value: []byte("t")}},
}

// holdKey places transaction txn's intent to put "v" on key.
func holdKey(key, txn string) func(s *store) {
	return func(s *store) {
		s.put(0, intentKey(key), (&intent{txn: txn, anchor: key, action: intentPut, value: []byte("v")}).encode(), 0)
	}
}

// txnArgs encodes items as a transaction request's arguments.
func txnArgs(items ...txnItem) [][]byte { return encodeTxnItems(items) }

// collReq is a request for a collection operation on key k.
func collReq(args ...string) kvRequest { return kvRequest{Key: "k", Args: stringArgs(args)} }

// collKey creates the collection k with op.
func collKey(op transport.Op, args ...string) func(s *store) {
	return func(s *store) { lookupKeyOp(op).apply(s, 0, collReq(args...), opLimits{maxValueSize: 1 << 10}) }
}

func putKey(key, value string, ttl time.Duration) func(s *store) {
	return func(s *store) { s.put(0, key, []byte(value), ttl) }
}

func newTestStore() (*store, *clocktest.Manual) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	return newStore(4, clock), clock
}

var testLimits = opLimits{maxValueSize: 8, maxReplyBytes: 64}

// applyFixture applies k to segment 0 of s as the node would: in an atomic group when it runs only in a
// transaction.
func applyFixture(s *store, k *keyOperation, req kvRequest) (reply kvReply) {
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
		req   kvRequest
		want  kvReply
		after *stored // the key's state after, when the case checks it
	}{
		{name: "get missing", op: opGet, req: kvRequest{Key: "k"}, want: kvReply{Status: StatusNotFound}},
		{name: "get", op: opGet, setup: put("k", "v", 0), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Value: []byte("v"), Version: 1}},
		{name: "get with ttl", op: opGet, setup: putThen("k", "v", time.Hour, time.Minute), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Value: []byte("v"), Version: 1, Int: int64(59 * time.Minute)}},
		{name: "get expired", op: opGet, setup: putThen("k", "v", time.Second, 2*time.Second), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusNotFound}},

		{name: "put", op: opPut, req: kvRequest{Key: "k", Value: []byte("v"), TTL: int64(time.Hour)},
			want: kvReply{Status: StatusSuccess, Version: 1}, after: &stored{"v", time.Hour}},
		{name: "put over", op: opPut, setup: put("k", "v", 0), req: kvRequest{Key: "k", Value: []byte("w")},
			want: kvReply{Status: StatusSuccess, Version: 2}, after: &stored{"w", NoExpiry}},
		{name: "put too large", op: opPut, req: kvRequest{Key: "k", Value: []byte("123456789")},
			want: kvReply{Status: StatusInvalidRequest}, after: &stored{}},

		{name: "delete", op: opDelete, setup: put("k", "v", 0), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess}, after: &stored{}},
		{name: "delete missing", op: opDelete, req: kvRequest{Key: "k"}, want: kvReply{Status: StatusNotFound}},

		{name: "incr missing", op: opIncr, req: kvRequest{Key: "k", Delta: -3},
			want: kvReply{Status: StatusSuccess, Int: -3}, after: &stored{"-3", NoExpiry}},
		{name: "incr keeps ttl", op: opIncr, setup: put("k", "41", time.Hour), req: kvRequest{Key: "k", Delta: 1},
			want: kvReply{Status: StatusSuccess, Int: 42}, after: &stored{"42", time.Hour}},
		{name: "incr not canonical", op: opIncr, setup: put("k", "01", 0), req: kvRequest{Key: "k", Delta: 1},
			want: kvReply{Status: StatusInvalidRequest}, after: &stored{"01", NoExpiry}},
		{name: "incr overflow", op: opIncr, setup: put("k", strconv.FormatInt(math.MaxInt64, 10), 0), req: kvRequest{Key: "k", Delta: 1},
			want: kvReply{Status: StatusInvalidRequest, Int: incrOverflowed}},

		{name: "expire", op: opExpire, setup: put("k", "v", 0), req: kvRequest{Key: "k", TTL: int64(time.Minute)},
			want: kvReply{Status: StatusSuccess}, after: &stored{"v", time.Minute}},
		{name: "expire missing", op: opExpire, req: kvRequest{Key: "k", TTL: int64(time.Minute)},
			want: kvReply{Status: StatusNotFound}, after: &stored{}},
		{name: "expire non-positive deletes", op: opExpire, setup: put("k", "v", 0), req: kvRequest{Key: "k", TTL: -1},
			want: kvReply{Status: StatusSuccess}, after: &stored{}},

		{name: "persist", op: opPersist, setup: put("k", "v", time.Hour), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Int: 1}, after: &stored{"v", NoExpiry}},
		{name: "persist without expiry", op: opPersist, setup: put("k", "v", 0), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess}},
		{name: "persist missing", op: opPersist, req: kvRequest{Key: "k"}, want: kvReply{Status: StatusNotFound}},

		{name: "ttl", op: opTTL, setup: putThen("k", "v", time.Hour, 10*time.Minute), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Int: int64(50 * time.Minute)}},
		{name: "ttl without expiry", op: opTTL, setup: put("k", "v", 0), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Int: int64(NoExpiry)}},
		{name: "ttl missing", op: opTTL, req: kvRequest{Key: "k"}, want: kvReply{Status: StatusNotFound}},

		{name: "exists", op: opExists, setup: put("k", "v", 0), req: kvRequest{Key: "k"}, want: kvReply{Status: StatusSuccess}},
		{name: "exists missing", op: opExists, req: kvRequest{Key: "k"}, want: kvReply{Status: StatusNotFound}},

		{name: "putif absent", op: opPutIf, req: kvRequest{Key: "k", Value: []byte("v"), Cond: condIfAbsent},
			want: kvReply{Status: StatusSuccess, Int: 1}, after: &stored{"v", NoExpiry}},
		{name: "putif absent unmet", op: opPutIf, setup: put("k", "v", 0), req: kvRequest{Key: "k", Value: []byte("w"), Cond: condIfAbsent | condReturnPrev},
			want: kvReply{Status: StatusSuccess, Value: []byte("v"), Existed: true}, after: &stored{"v", NoExpiry}},
		{name: "putif exists unmet", op: opPutIf, req: kvRequest{Key: "k", Value: []byte("w"), Cond: condIfExists},
			want: kvReply{Status: StatusSuccess}, after: &stored{}},
		{name: "putif keepttl swap", op: opPutIf, setup: put("k", "v", time.Hour), req: kvRequest{Key: "k", Value: []byte("w"), Cond: condIfExists | condKeepTTL | condReturnPrev},
			want: kvReply{Status: StatusSuccess, Int: 1, Value: []byte("v"), Existed: true}, after: &stored{"w", time.Hour}},
		{name: "putif both conditions", op: opPutIf, req: kvRequest{Key: "k", Value: []byte("v"), Cond: condIfAbsent | condIfExists},
			want: kvReply{Status: StatusInvalidRequest}, after: &stored{}},
		{name: "putif too large", op: opPutIf, req: kvRequest{Key: "k", Value: []byte("123456789")},
			want: kvReply{Status: StatusInvalidRequest}, after: &stored{}},

		{name: "getentry", op: opGetEntry, setup: putThen("k", "v", time.Hour, time.Minute), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Value: []byte("v"), Version: 1, Int: int64(59 * time.Minute)}},
		{name: "getentry without expiry", op: opGetEntry, setup: writes(put("k", "v", 0), put("other", "x", 0), put("k", "w", 0)),
			req: kvRequest{Key: "k"}, want: kvReply{Status: StatusSuccess, Value: []byte("w"), Version: 3}},
		{name: "getentry missing", op: opGetEntry, req: kvRequest{Key: "k"}, want: kvReply{Status: StatusNotFound}},
		{name: "getentry expired", op: opGetEntry, setup: putThen("k", "v", time.Second, time.Second), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusNotFound}},
		{name: "nearget", op: opNearGet, setup: writes(put("k", "v", time.Hour), put("other", "x", 0)), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Value: []byte("v"), Version: 1, Int: int64(time.Hour), Revision: 2}},
		{name: "nearget unchanged", op: opNearGet, setup: writes(put("k", "v", 0), put("other", "x", 0)), req: kvRequest{Key: "k", Version: 1},
			want: kvReply{Status: StatusSuccess, Version: 1, Existed: true, Revision: 2}},
		{name: "nearget changed", op: opNearGet, setup: writes(put("k", "v", 0), put("k", "w", 0)), req: kvRequest{Key: "k", Version: 1},
			want: kvReply{Status: StatusSuccess, Value: []byte("w"), Version: 2, Revision: 2}},
		{name: "nearget missing", op: opNearGet, setup: put("other", "x", 0), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusNotFound, Revision: 1}},

		{name: "putifversion absent", op: opPutIfVersion, req: kvRequest{Key: "k", Value: []byte("v"), TTL: int64(time.Hour)},
			want: kvReply{Status: StatusSuccess, Version: 1}, after: &stored{"v", time.Hour}},
		{name: "putifversion absent unmet", op: opPutIfVersion, setup: put("k", "v", 0), req: kvRequest{Key: "k", Value: []byte("w")},
			want: kvReply{Status: StatusVersionMismatch, Version: 1}, after: &stored{"v", NoExpiry}},
		{name: "putifversion match", op: opPutIfVersion, setup: writes(put("k", "v", 0), put("other", "x", 0)),
			req: kvRequest{Key: "k", Value: []byte("w"), Version: 1}, want: kvReply{Status: StatusSuccess, Version: 3}, after: &stored{"w", NoExpiry}},
		{name: "putifversion stale", op: opPutIfVersion, setup: writes(put("k", "v", 0), put("k", "w", 0)),
			req: kvRequest{Key: "k", Value: []byte("x"), Version: 1}, want: kvReply{Status: StatusVersionMismatch, Version: 2}, after: &stored{"w", NoExpiry}},
		{name: "putifversion missing", op: opPutIfVersion, req: kvRequest{Key: "k", Value: []byte("v"), Version: 1},
			want: kvReply{Status: StatusVersionMismatch}, after: &stored{}},
		{name: "putifversion expired", op: opPutIfVersion, setup: putThen("k", "v", time.Second, time.Second),
			req: kvRequest{Key: "k", Value: []byte("w"), Version: 1}, want: kvReply{Status: StatusVersionMismatch}, after: &stored{}},
		{name: "putifversion keepttl", op: opPutIfVersion, setup: putThen("k", "v", time.Hour, time.Minute),
			req:  kvRequest{Key: "k", Value: []byte("w"), Cond: condKeepTTL, Version: 1, TTL: int64(time.Second)},
			want: kvReply{Status: StatusSuccess, Version: 2}, after: &stored{"w", 59 * time.Minute}},
		{name: "putifversion with ifabsent", op: opPutIfVersion, req: kvRequest{Key: "k", Value: []byte("v"), Cond: condIfAbsent},
			want: kvReply{Status: StatusInvalidRequest}, after: &stored{}},
		{name: "putifversion too large", op: opPutIfVersion, req: kvRequest{Key: "k", Value: []byte("123456789")},
			want: kvReply{Status: StatusInvalidRequest}, after: &stored{}},

		{name: "deleteifversion", op: opDeleteIfVersion, setup: writes(put("other", "x", 0), put("k", "v", 0)), req: kvRequest{Key: "k", Version: 2},
			want: kvReply{Status: StatusSuccess}, after: &stored{}},
		{name: "deleteifversion stale", op: opDeleteIfVersion, setup: writes(put("k", "v", 0), put("k", "w", 0)), req: kvRequest{Key: "k", Version: 1},
			want: kvReply{Status: StatusVersionMismatch, Version: 2}, after: &stored{"w", NoExpiry}},
		{name: "deleteifversion missing", op: opDeleteIfVersion, req: kvRequest{Key: "k", Version: 1},
			want: kvReply{Status: StatusVersionMismatch}},
		{name: "deleteifversion absent as asked", op: opDeleteIfVersion, req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusNotFound}},
		{name: "deleteifversion absent unmet", op: opDeleteIfVersion, setup: put("k", "v", 0), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusVersionMismatch, Version: 1}, after: &stored{"v", NoExpiry}},

		{name: "incrbyfloat missing", op: opIncrByFloat, req: kvRequest{Key: "k", Value: []byte("0.1")},
			want: kvReply{Status: StatusSuccess, Value: []byte("0.1")}, after: &stored{"0.1", NoExpiry}},
		{name: "incrbyfloat keeps ttl", op: opIncrByFloat, setup: put("k", "10.50", time.Hour), req: kvRequest{Key: "k", Value: []byte("0.1")},
			want: kvReply{Status: StatusSuccess, Value: []byte("10.6")}, after: &stored{"10.6", time.Hour}},
		{name: "incrbyfloat of text", op: opIncrByFloat, setup: put("k", "1x", 0), req: kvRequest{Key: "k", Value: []byte("1")},
			want: kvReply{Status: StatusInvalidRequest, Int: refusedNotFloat}, after: &stored{"1x", NoExpiry}},
		{name: "incrbyfloat by text", op: opIncrByFloat, setup: put("k", "1", 0), req: kvRequest{Key: "k", Value: []byte("nan")},
			want: kvReply{Status: StatusInvalidRequest, Int: refusedNotFloat}, after: &stored{"1", NoExpiry}},
		{name: "incrbyfloat to infinity", op: opIncrByFloat, setup: put("k", "1", 0), req: kvRequest{Key: "k", Value: []byte("-inf")},
			want: kvReply{Status: StatusInvalidRequest, Int: refusedNotFinite}, after: &stored{"1", NoExpiry}},
		{name: "incrbyfloat overflow", op: opIncrByFloat, setup: put("k", "1.1e4932", 0), req: kvRequest{Key: "k", Value: []byte("1e4932")},
			want: kvReply{Status: StatusInvalidRequest, Int: refusedNotFinite}},

		{name: "append missing", op: opAppend, req: kvRequest{Key: "k", Value: []byte("ab")},
			want: kvReply{Status: StatusSuccess, Int: 2}, after: &stored{"ab", NoExpiry}},
		{name: "append keeps ttl", op: opAppend, setup: put("k", "ab", time.Hour), req: kvRequest{Key: "k", Value: []byte("cd")},
			want: kvReply{Status: StatusSuccess, Int: 4}, after: &stored{"abcd", time.Hour}},
		{name: "append up to the limit", op: opAppend, setup: put("k", "1234", 0), req: kvRequest{Key: "k", Value: []byte("5678")},
			want: kvReply{Status: StatusSuccess, Int: 8}, after: &stored{"12345678", NoExpiry}},
		{name: "append too large", op: opAppend, setup: put("k", "12345", 0), req: kvRequest{Key: "k", Value: []byte("6789")},
			want: kvReply{Status: StatusInvalidRequest, Int: refusedTooLarge}, after: &stored{"12345", NoExpiry}},

		{name: "getdel", op: opGetDel, setup: put("k", "v", time.Hour), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Value: []byte("v")}, after: &stored{}},
		{name: "getdel missing", op: opGetDel, req: kvRequest{Key: "k"}, want: kvReply{Status: StatusNotFound}},
		{name: "getdel expired", op: opGetDel, setup: putThen("k", "v", time.Second, time.Second), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusNotFound}},

		{name: "getex sets ttl", op: opGetEx, setup: put("k", "v", 0), req: kvRequest{Key: "k", TTL: int64(time.Minute)},
			want: kvReply{Status: StatusSuccess, Value: []byte("v"), Int: 1}, after: &stored{"v", time.Minute}},
		{name: "getex keeps ttl", op: opGetEx, setup: put("k", "v", time.Hour), req: kvRequest{Key: "k", Cond: condKeepTTL},
			want: kvReply{Status: StatusSuccess, Value: []byte("v")}, after: &stored{"v", time.Hour}},
		{name: "getex persists", op: opGetEx, setup: put("k", "v", time.Hour), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Value: []byte("v"), Int: 1}, after: &stored{"v", NoExpiry}},
		{name: "getex persists without expiry", op: opGetEx, setup: put("k", "v", 0), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Value: []byte("v")}, after: &stored{"v", NoExpiry}},
		{name: "getex negative deletes", op: opGetEx, setup: put("k", "v", 0), req: kvRequest{Key: "k", TTL: -1},
			want: kvReply{Status: StatusSuccess, Value: []byte("v"), Int: 1}, after: &stored{}},
		{name: "getex missing", op: opGetEx, req: kvRequest{Key: "k", TTL: int64(time.Minute)},
			want: kvReply{Status: StatusNotFound}, after: &stored{}},
		{name: "getex with a condition", op: opGetEx, setup: put("k", "v", 0), req: kvRequest{Key: "k", Cond: condIfExists},
			want: kvReply{Status: StatusInvalidRequest}, after: &stored{"v", NoExpiry}},

		{name: "setrange missing pads", op: opSetRange, req: kvRequest{Key: "k", Delta: 2, Value: []byte("ab")},
			want: kvReply{Status: StatusSuccess, Int: 4}, after: &stored{"\x00\x00ab", NoExpiry}},
		{name: "setrange inside keeps ttl", op: opSetRange, setup: put("k", "hello", time.Hour), req: kvRequest{Key: "k", Delta: 1, Value: []byte("EL")},
			want: kvReply{Status: StatusSuccess, Int: 5}, after: &stored{"hELlo", time.Hour}},
		{name: "setrange past the end", op: opSetRange, setup: put("k", "ab", 0), req: kvRequest{Key: "k", Delta: 1, Value: []byte("xyz")},
			want: kvReply{Status: StatusSuccess, Int: 4}, after: &stored{"axyz", NoExpiry}},
		{name: "setrange up to the limit", op: opSetRange, req: kvRequest{Key: "k", Delta: 7, Value: []byte("z")},
			want: kvReply{Status: StatusSuccess, Int: 8}, after: &stored{"\x00\x00\x00\x00\x00\x00\x00z", NoExpiry}},
		{name: "setrange too large", op: opSetRange, setup: put("k", "ab", 0), req: kvRequest{Key: "k", Delta: 8, Value: []byte("z")},
			want: kvReply{Status: StatusInvalidRequest, Int: refusedTooLarge}, after: &stored{"ab", NoExpiry}},
		{name: "setrange huge offset", op: opSetRange, req: kvRequest{Key: "k", Delta: math.MaxInt64, Value: []byte("z")},
			want: kvReply{Status: StatusInvalidRequest, Int: refusedTooLarge}, after: &stored{}},
		{name: "setrange negative offset", op: opSetRange, req: kvRequest{Key: "k", Delta: -1, Value: []byte("z")},
			want: kvReply{Status: StatusInvalidRequest}, after: &stored{}},
		{name: "setrange empty", op: opSetRange, setup: put("k", "ab", 0), req: kvRequest{Key: "k", Delta: 1},
			want: kvReply{Status: StatusInvalidRequest}, after: &stored{"ab", NoExpiry}},

		{name: "type string", op: opType, setup: put("k", "v", 0), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Value: []byte("string")}},
		{name: "type none", op: opType, req: kvRequest{Key: "k"}, want: kvReply{Status: StatusSuccess, Value: []byte("none")}},
		{name: "type expired", op: opType, setup: putThen("k", "v", time.Second, time.Second), req: kvRequest{Key: "k"},
			want: kvReply{Status: StatusSuccess, Value: []byte("none")}},

		{name: "object encoding int", op: opObject, setup: put("k", "-12", 0), req: kvRequest{Key: "k", Args: [][]byte{[]byte("encoding")}},
			want: kvReply{Status: StatusSuccess, Value: []byte("int")}},
		{name: "object encoding not canonical", op: opObject, setup: put("k", "012", 0), req: kvRequest{Key: "k", Args: [][]byte{[]byte("encoding")}},
			want: kvReply{Status: StatusSuccess, Value: []byte("embstr")}},
		{name: "object encoding raw", op: opObject, setup: put("k", strings.Repeat("x", 45), 0), req: kvRequest{Key: "k", Args: [][]byte{[]byte("encoding")}},
			want: kvReply{Status: StatusSuccess, Value: []byte("raw")}},
		{name: "object missing", op: opObject, req: kvRequest{Key: "k", Args: [][]byte{[]byte("encoding")}}, want: kvReply{Status: StatusNotFound}},
		{name: "object expired", op: opObject, setup: putThen("k", "v", time.Second, time.Second), req: kvRequest{Key: "k", Args: [][]byte{[]byte("freq")}},
			want: kvReply{Status: StatusNotFound}},
		{name: "object freq without lfu", op: opObject, setup: put("k", "v", 0), req: kvRequest{Key: "k", Args: [][]byte{[]byte("freq")}},
			want: kvReply{Status: StatusInvalidRequest, Int: refusedNoFrequency}},
		{name: "object idletime without a policy", op: opObject, setup: put("k", "v", 0), req: kvRequest{Key: "k", Args: [][]byte{[]byte("idletime")}},
			want: kvReply{Status: StatusInvalidRequest, Int: refusedNoIdleTime}},
		{name: "object unknown", op: opObject, setup: put("k", "v", 0), req: kvRequest{Key: "k", Args: [][]byte{[]byte("refs")}},
			want: kvReply{Status: StatusInvalidRequest}},

		{name: "checkversion", op: opCheckVersion, setup: put("k", "v", 0), req: kvRequest{Key: "k", Version: 1},
			want: kvReply{Status: StatusSuccess, Version: 1}},
		{name: "checkversion mismatch", op: opCheckVersion, setup: put("k", "v", 0), req: kvRequest{Key: "k", Version: 2},
			want: kvReply{Status: StatusVersionMismatch, Version: 1}},
		{name: "checkversion absent", op: opCheckVersion, req: kvRequest{Key: "k"}, want: kvReply{Status: StatusSuccess}},
		{name: "txn", op: opTxn, setup: put("k", "v", 0), req: kvRequest{Key: "k", Args: txnArgs(
			txnItem{op: opCheckVersion, req: kvRequest{Key: "k", Version: 1}}, txnItem{op: opPut, req: kvRequest{Key: "k", Value: []byte("w")}})},
			want: kvReply{Status: StatusSuccess}, after: &stored{"w", NoExpiry}},
		{name: "txn conflict", op: opTxn, setup: put("k", "v", 0), req: kvRequest{Key: "k", Args: txnArgs(
			txnItem{op: opPut, req: kvRequest{Key: "k", Value: []byte("w")}}, txnItem{op: opCheckVersion, req: kvRequest{Key: "k", Version: 5}})},
			want: kvReply{Status: StatusVersionMismatch, Version: 1, Int: 1}, after: &stored{"v", NoExpiry}},
		{name: "txn on a held key", op: opTxn, setup: held("k", "other"), req: kvRequest{Key: "k", Args: txnArgs(
			txnItem{op: opPut, req: kvRequest{Key: "k", Value: []byte("w")}})},
			want: kvReply{Status: StatusLocked}, after: &stored{}},
		{name: "intent", op: opIntent, req: kvRequest{Key: "k", Value: intentOf("t", "w"), Delta: int64(time.Second)},
			want: kvReply{Status: StatusSuccess, Version: 1}, after: &stored{}},
		{name: "intent held by another", op: opIntent, setup: held("k", "other"), req: kvRequest{Key: "k", Value: intentOf("t", "w")},
			want: kvReply{Status: StatusLocked}},
		{name: "intent again", op: opIntent, setup: held("k", "t"), req: kvRequest{Key: "k", Value: intentOf("t", "w")},
			want: kvReply{Status: StatusSuccess}},
		{name: "intent malformed", op: opIntent, req: kvRequest{Key: "k", Value: []byte("x")},
			want: invalidArgs("ERR invalid intent: intent: msgp: attempted to decode type \"int\" with method for \"array\"")},
		{name: "resolve commit", op: opResolve, setup: held("k", "t"), req: kvRequest{Key: "k", Value: []byte("t"), Delta: 1},
			want: kvReply{Status: StatusSuccess, Int: 1}, after: &stored{"v", NoExpiry}},
		{name: "resolve abort", op: opResolve, setup: writes(put("k", "old", 0), held("k", "t")), req: kvRequest{Key: "k", Value: []byte("t")},
			want: kvReply{Status: StatusSuccess, Int: 1}, after: &stored{"old", NoExpiry}},
		{name: "resolve another's", op: opResolve, setup: held("k", "u"), req: kvRequest{Key: "k", Value: []byte("t"), Delta: 1},
			want: kvReply{Status: StatusSuccess}, after: &stored{}},
		{name: "decide commit", op: opDecide, req: kvRequest{Key: "k", Value: []byte("t"), Delta: 1},
			want: kvReply{Status: StatusSuccess, Int: 1, Version: 1}},
		{name: "decide another outcome aborts", op: opDecide, req: kvRequest{Key: "k", Value: []byte("t"), Delta: 5},
			want: kvReply{Status: StatusSuccess, Version: 1}},
		{name: "decide abort after a commit", op: opDecide, setup: recorded("t", recordCommitted), req: kvRequest{Key: "k", Value: []byte("t")},
			want: kvReply{Status: StatusSuccess, Int: 1}},
		{name: "decide commit after an abort", op: opDecide, setup: recorded("t", recordAborted), req: kvRequest{Key: "k", Value: []byte("t"), Delta: 1},
			want: kvReply{Status: StatusSuccess}},
		{name: "forget", op: opForget, setup: recorded("t", recordCommitted), req: kvRequest{Key: "k", Value: []byte("t")},
			want: kvReply{Status: StatusSuccess}},
		{name: "forget missing", op: opForget, req: kvRequest{Key: "k", Value: []byte("t")}, want: kvReply{Status: StatusNotFound}},
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
	return func(s *store, _ *clocktest.Manual) { s.put(0, recordKey(txn), []byte{outcome}, 0) }
}

// intentOf encodes transaction txn's intent to put value.
func intentOf(txn, value string) []byte {
	return (&intent{txn: txn, anchor: "a", action: intentPut, value: []byte(value)}).encode()
}

func put(key, value string, ttl time.Duration) func(*store, *clocktest.Manual) {
	return func(s *store, _ *clocktest.Manual) { s.put(0, key, []byte(value), ttl) }
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
		s.put(0, key, []byte(value), ttl)
		clock.Advance(elapsed)
	}
}

func TestRevealsState(t *testing.T) {
	success, notFound, written := kvReply{Status: StatusSuccess}, kvReply{Status: StatusNotFound}, kvReply{Status: StatusSuccess, Int: 1}
	cases := []struct {
		op    transport.Op
		reply kvReply
		want  bool
	}{
		{opGet, success, true},
		{opGet, notFound, true},
		{opTTL, written, true},
		{opExists, notFound, true},
		{opPut, success, false},
		{opDelete, success, false},
		{opDelete, notFound, true},
		{opExpire, notFound, true},
		{opPersist, success, false},
		{opIncr, success, false},
		{opIncr, kvReply{Status: StatusInvalidRequest}, false},
		{opPutIf, written, false},
		{opPutIf, success, true}, // the condition was false: nothing written
		{opPutIf, kvReply{Status: StatusInvalidRequest}, false},
		{opGetEntry, success, true},
		{opGetEntry, notFound, true},
		{opNearGet, success, true},
		{opNearGet, notFound, true},
		{opPutIfVersion, kvReply{Status: StatusSuccess, Version: 3}, false},
		{opPutIfVersion, kvReply{Status: StatusVersionMismatch, Version: 2}, true},
		{opPutIfVersion, kvReply{Status: StatusInvalidRequest}, false},
		{opDeleteIfVersion, success, false},
		{opDeleteIfVersion, notFound, true}, // asked to delete only an absent key: nothing written
		{opDeleteIfVersion, kvReply{Status: StatusVersionMismatch}, true},
		{opPut, kvReply{Status: StatusVersionMismatch}, false},
		{opIncrByFloat, success, false},
		{opIncrByFloat, kvReply{Status: StatusInvalidRequest, Int: refusedNotFloat}, false},
		{opAppend, written, false},
		{opGetDel, success, false},
		{opGetDel, notFound, true},
		{opGetEx, written, false},
		{opGetEx, success, true}, // kept the expiry: a read
		{opGetEx, notFound, true},
		{opType, success, true},
		{opObject, success, true},
		{opSetRange, written, false},
		{opHSet, kvReply{Status: StatusSuccess, Version: 3, Int: 0}, false},
		{opHDel, success, true}, // no version: nothing deleted
		{opZAdd, kvReply{Status: StatusWrongType}, true},
		{opZRange, success, true},
		{opBatch, notFound, false},
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
	s.put(0, "k", []byte("v"), 0)
	allocs := testing.AllocsPerRun(100, func() {
		req := kvRequest{Key: "k"}
		reply := lookupKeyOp(opGet).apply(s, 0, req, testLimits)
		if !readOnly(opGet) || !revealsState(opGet, &reply) || reply.Status != StatusSuccess {
			t.Fatal("get did not read")
		}
	})
	if allocs != 0 {
		t.Errorf("dispatching a get allocates %v times", allocs)
	}
}
