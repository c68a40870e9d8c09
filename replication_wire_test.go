package zaris

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"

	"github.com/zaris-go/zaris/durability"
)

// everyOpKind lists the kinds durability.Op has.
var everyOpKind = []durability.OpKind{
	durability.OpPut, durability.OpDelete, durability.OpHashSet, durability.OpHashDel, durability.OpSetAdd,
	durability.OpSetRem, durability.OpListPush, durability.OpListPop, durability.OpListTrim, durability.OpZAdd,
	durability.OpZRem, durability.OpExpireAt, durability.OpExpire, durability.OpMulti,
}

// bareOps returns n deletes with every other field zero.
func bareOps(n int) []durability.Op {
	ops := make([]durability.Op, n)
	for i := range ops {
		ops[i].Kind = durability.OpDelete
	}
	return ops
}

// sampleOps returns one op of every kind, with values as each kind carries them.
func sampleOps() []durability.Op {
	ops := make([]durability.Op, 0, len(everyOpKind))
	for i, kind := range everyOpKind {
		op := durability.Op{Segment: uint32(i), Revision: uint64(i + 1), Epoch: 3, Kind: kind, Key: "key-" + kind.String(),
			ExpireAt: int64(i) * 1e9, Version: uint64(100 + i), Time: 1_700_000_000_000_000_000 + int64(i)}
		switch {
		case kind == durability.OpMulti:
			op.Value = durability.AppendMulti(nil, []durability.Op{{Kind: durability.OpPut, Key: "a", Value: []byte("1")},
				{Kind: durability.OpDelete, Key: "b"}})
		case kind.HasArgs():
			op.Value = durability.AppendArgs(nil, [][]byte{[]byte("field"), []byte("value")})
		case kind != durability.OpDelete && kind != durability.OpExpire:
			op.Value = []byte("value of " + kind.String())
		}
		ops = append(ops, op)
	}
	return ops
}

// samplePieces returns a segment snapshot cut in three pieces, with string and collection entries and
// nil, empty and large values.
func samplePieces() []segmentSnapshot {
	return []segmentSnapshot{
		{Segment: 7, Revision: 90, Epoch: 4, Part: 0, More: true, Entries: []durability.Entry{
			{Key: "a", Value: []byte("1"), Version: 1},
			{Key: "b", Value: []byte{}, ExpireAt: math.MaxInt64, Version: math.MaxUint64},
			{Key: "c", Version: 2},
		}},
		{Segment: 7, Revision: 90, Epoch: 4, Part: 1, More: true, Entries: []durability.Entry{
			{Key: "h", Value: durability.AppendArgs(nil, [][]byte{[]byte("f"), []byte("v")}), Version: 3, Kind: uint8(kindHash)},
			{Key: strings.Repeat("k", 300), Value: bytes.Repeat([]byte{0xab}, 70_000), ExpireAt: -1, Kind: math.MaxUint8},
		}},
		{Segment: 7, Revision: 90, Epoch: 4, Part: 2, Entries: []durability.Entry{}},
	}
}

func sampleReplicateRequests() []replicateRequest {
	return []replicateRequest{
		{},
		{From: "n1", FromIncarnation: 1},
		{From: "n1", Snapshots: []segmentSnapshot{}, Ops: []durability.Op{}, Probe: []int{}, Epochs: map[int]uint64{}},
		{From: "n2", FromIncarnation: math.MaxUint64, Ops: sampleOps(), Epochs: map[int]uint64{0: 5}, Incarnation: 9},
		{From: "n3", Snapshots: samplePieces(), Epochs: map[int]uint64{1: math.MaxUint64}},
		{From: "n3", Snapshots: []segmentSnapshot{{Segment: 1, Revision: 2, Epoch: 3}}, Ops: sampleOps()[:1]},
		{From: "n4", Probe: []int{0, 7, 127, 128, 255, 256, 65535, 65536, math.MaxInt32 + 1, math.MaxInt}},
		{From: "n4", Epochs: map[int]uint64{2: 7}, Pull: &pullRequest{Segment: 16, Part: 3}},
		{From: "n5", Epochs: map[int]uint64{-1: 2}, Pull: &pullRequest{Segment: -1, Part: math.MinInt}, Probe: []int{-32, -33, -129, -32769, math.MinInt32 - 1}},
		{From: "n6", Pull: &pullRequest{}},
		{From: NodeID(strings.Repeat("n", 40)), Ops: []durability.Op{{Kind: durability.OpPut, Key: strings.Repeat("k", 70_000),
			Value: make([]byte, 70_000), ExpireAt: math.MinInt64, Time: math.MinInt64}, {Kind: durability.OpPut, Key: "", Value: []byte{}}}},
		{From: "n7", Ops: bareOps(20), Probe: make([]int, 70_000)},
	}
}

func sampleReplicateReplies() []replicateReply {
	return []replicateReply{
		{},
		{Status: StatusSuccess, Revisions: map[int]uint64{}, Incarnation: 1},
		{Status: StatusSuccess, Revisions: map[int]uint64{3: 9}, Lines: map[int]uint64{3: 2}, Incarnation: math.MaxUint64},
		{Status: StatusReplicaWriteRejected, Epoch: math.MaxUint64, Segment: -1},
		{Status: StatusInvalidRequest, Segment: math.MaxInt, Lines: map[int]uint64{}},
		{Status: StatusSuccess, Revisions: map[int]uint64{70_000: 1 << 40}, Snapshots: samplePieces()[1:2]},
		{Status: Status(math.MaxUint8), Snapshots: []segmentSnapshot{}},
	}
}

// TestReplicateWireMatchesReflective checks that the hand-written codec writes the bytes the reflective
// codec writes, and that each reads the other's output as the message written, so nodes of either codec
// replicate to each other.
func TestReplicateWireMatchesReflective(t *testing.T) {
	for i, want := range sampleReplicateRequests() {
		checkAgainstReflective(t, "request", i, &want, (*replicateRequest).marshal, (*replicateRequest).decodeMsg)
	}
	for i, want := range sampleReplicateReplies() {
		checkAgainstReflective(t, "reply", i, &want, (*replicateReply).marshal, (*replicateReply).decodeMsg)
	}
}

// checkAgainstReflective compares the two codecs on want: the same bytes, each reading the other's.
func checkAgainstReflective[T any](t *testing.T, what string, i int, want *T, marshal func(*T) []byte, decodeMsg func(*T, []byte) error) {
	t.Helper()
	hand := marshal(want)
	reflective, err := encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hand, reflective) {
		t.Errorf("%s %d: hand-written encoding differs from the reflective one\nhand:       %x\nreflective: %x", what, i, headOf(hand), headOf(reflective))
	}
	var fromReflective, fromHand T
	if err := decodeMsg(&fromReflective, reflective); err != nil || !reflect.DeepEqual(&fromReflective, want) {
		t.Errorf("%s %d: decodeMsg of the reflective encoding: %v, equal %v", what, i, err, reflect.DeepEqual(&fromReflective, want))
	}
	if err := decode(hand, &fromHand); err != nil || !reflect.DeepEqual(&fromHand, want) {
		t.Errorf("%s %d: reflective decoding of the hand-written encoding: %v, equal %v", what, i, err, reflect.DeepEqual(&fromHand, want))
	}
}

func headOf(b []byte) []byte { return b[:min(len(b), 256)] }

// TestReplicateWireMaps checks maps of several entries, which both codecs write in the map's iteration
// order: the encodings have the same length, and each codec reads the other's as the map written.
func TestReplicateWireMaps(t *testing.T) {
	many := map[int]uint64{}
	for i := range 40 {
		many[i*i-200] = uint64(i) << (i % 64)
	}
	checkMapsAgainstReflective(t, &replicateRequest{From: "n1", Epochs: many}, (*replicateRequest).marshal, (*replicateRequest).decodeMsg)
	checkMapsAgainstReflective(t, &replicateReply{Revisions: many, Lines: map[int]uint64{1: 1, 2: 2, 3: 3}},
		(*replicateReply).marshal, (*replicateReply).decodeMsg)
}

// checkMapsAgainstReflective is checkAgainstReflective for messages whose maps have several entries, whose
// order differs from one encoding to the next.
func checkMapsAgainstReflective[T any](t *testing.T, want *T, marshal func(*T) []byte, decodeMsg func(*T, []byte) error) {
	t.Helper()
	hand := marshal(want)
	reflective, err := encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(reflective) != len(hand) {
		t.Errorf("%T: %d bytes by hand, %d by reflection", want, len(hand), len(reflective))
	}
	var fromReflective, fromHand T
	if err := decodeMsg(&fromReflective, reflective); err != nil || !reflect.DeepEqual(&fromReflective, want) {
		t.Errorf("%T: decodeMsg of the reflective encoding: %v", want, err)
	}
	if err := decode(hand, &fromHand); err != nil || !reflect.DeepEqual(&fromHand, want) {
		t.Errorf("%T: reflective decoding of the hand-written encoding: %v", want, err)
	}
}

// TestReplicateWireSizeBound checks that marshal sizes its buffer right: the overhead constants bound the
// bytes, so appending grows no buffer.
func TestReplicateWireSizeBound(t *testing.T) {
	for i, r := range sampleReplicateRequests() {
		if b := r.marshal(); len(b) > r.sizeBound() {
			t.Errorf("request %d: %d bytes exceed the bound %d", i, len(b), r.sizeBound())
		}
	}
	for i, r := range sampleReplicateReplies() {
		if b := r.marshal(); len(b) > r.sizeBound() {
			t.Errorf("reply %d: %d bytes exceed the bound %d", i, len(b), r.sizeBound())
		}
	}
	ops := sampleOps()
	if n := testing.AllocsPerRun(20, func() { _ = (&replicateRequest{From: "n1", Ops: ops}).marshal() }); n != 1 {
		t.Errorf("marshal allocates %v times, want 1", n)
	}
}

// TestReplicateWireDecodedMemory checks that decoded keys and values do not alias the message, which
// a replica's store keeps long after the request, and that a nil value stays nil and an empty one empty.
func TestReplicateWireDecodedMemory(t *testing.T) {
	want := replicateRequest{From: "n1", Ops: sampleOps(), Snapshots: samplePieces()}
	b := want.marshal()
	var got replicateRequest
	if err := got.decodeMsg(b); err != nil {
		t.Fatal(err)
	}
	clear(b)
	if !reflect.DeepEqual(got, want) {
		t.Fatal("decoded message changed with the bytes it was decoded from")
	}
}

// TestReplicateWireExtraFields checks that readers skip array fields appended after those they know and
// map entries of fields they do not know, wherever they come, so later versions can add fields.
func TestReplicateWireExtraFields(t *testing.T) {
	op := durability.Op{Segment: 1, Revision: 2, Epoch: 3, Kind: durability.OpPut, Key: "k", Value: []byte("v"), Version: 4, Time: 5}
	entry := durability.Entry{Key: "e", Value: []byte("w"), Version: 6, Kind: 1}
	want := replicateRequest{From: "n1", FromIncarnation: 7, Ops: []durability.Op{op},
		Snapshots: []segmentSnapshot{{Segment: 2, Revision: 8, Epoch: 3, Entries: []durability.Entry{entry}, More: true}},
		Probe:     []int{4}, Epochs: map[int]uint64{0: 3}, Pull: &pullRequest{Segment: 5, Part: 6}, Incarnation: 9}

	b := msgp.AppendArrayHeader(nil, replicateRequestFields+2)
	b = msgp.AppendString(b, string(want.From))
	b = appendFullUint64(b, want.FromIncarnation)
	b = msgp.AppendArrayHeader(b, 1)
	b = msgp.AppendArrayHeader(b, segmentSnapshotFields+1)
	b = appendFullUint64(appendFullUint64(appendInt(b, 2), 8), 3)
	b = msgp.AppendArrayHeader(b, 1)
	b = append(b, withUnknownField(t, appendEntries(nil, []durability.Entry{entry})[1:])...)
	b = msgp.AppendBool(appendInt(b, 0), true)
	b = appendFutureValue(b)
	b = msgp.AppendArrayHeader(b, 1)
	b = append(b, withUnknownField(t, appendOps(nil, []durability.Op{op})[1:])...)
	b = appendIntMap(appendInts(b, want.Probe), want.Epochs)
	b = msgp.AppendArrayHeader(b, pullRequestFields+1)
	b = appendFutureValue(appendInt(appendInt(b, 5), 6))
	b = appendFullUint64(b, want.Incarnation)
	b = msgp.AppendString(appendFutureValue(b), "later")
	var got replicateRequest
	if err := got.decodeMsg(b); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("request with extra fields: got %+v, %v; want %+v", got, err, want)
	}

	wantReply := replicateReply{Status: StatusSuccess, Epoch: 1, Segment: 2, Incarnation: 3, Revisions: map[int]uint64{2: 4}}
	rb := wantReply.marshal()
	rb[0]++
	rb = appendFutureValue(rb)
	var gotReply replicateReply
	if err := gotReply.decodeMsg(rb); err != nil || !reflect.DeepEqual(gotReply, wantReply) {
		t.Errorf("reply with an extra field: got %+v, %v; want %+v", gotReply, err, wantReply)
	}
}

// appendFutureValue appends the value of a field of a later version: a map holding an array.
func appendFutureValue(b []byte) []byte {
	b = msgp.AppendMapHeader(b, 1)
	b = msgp.AppendString(b, "future")
	b = msgp.AppendArrayHeader(b, 2)
	b = msgp.AppendFloat64(b, 1.5)
	return msgp.AppendNil(b)
}

// withUnknownField returns the encoded map of a struct's fields with a field of a later version first.
func withUnknownField(t *testing.T, fields []byte) []byte {
	t.Helper()
	n, rest, err := msgp.ReadMapHeaderBytes(fields)
	if err != nil {
		t.Fatal(err)
	}
	b := msgp.AppendMapHeader(nil, n+1)
	b = appendFutureValue(msgp.AppendString(b, "Later"))
	return append(b, rest...)
}

// TestReplicateWireFieldOrder checks that the fields of an op or entry are read by name, in any order,
// as the reflective codec reads them.
func TestReplicateWireFieldOrder(t *testing.T) {
	op := durability.Op{Segment: 1, Revision: 2, Epoch: 3, Kind: durability.OpPut, Key: "k", Value: []byte("v"), ExpireAt: -4, Version: 5, Time: 6}
	b := msgp.AppendArrayHeader(nil, replicateRequestFields)
	b = appendFullUint64(msgp.AppendString(b, "n1"), 0)
	b = msgp.AppendNil(b)
	b = msgp.AppendArrayHeader(b, 1)
	b = msgp.AppendMapHeader(b, opFieldCount)
	b = appendFullInt64(appendFieldName(b, "Time"), op.Time)
	b = appendFullUint64(appendFieldName(b, "Version"), op.Version)
	b = appendFullInt64(appendFieldName(b, "ExpireAt"), op.ExpireAt)
	b = appendValue(appendFieldName(b, "Value"), op.Value)
	b = msgp.AppendString(appendFieldName(b, "Key"), op.Key)
	b = appendFullUint8(appendFieldName(b, "Kind"), uint8(op.Kind))
	b = appendFullUint64(appendFieldName(b, "Epoch"), op.Epoch)
	b = appendFullUint64(appendFieldName(b, "Revision"), op.Revision)
	b = appendFullUint32(appendFieldName(b, "Segment"), op.Segment)
	b = msgp.AppendNil(msgp.AppendNil(msgp.AppendNil(b))) // probe, epochs, pull
	b = appendFullUint64(b, 0)
	want := replicateRequest{From: "n1", Ops: []durability.Op{op}}
	var got, viaReflect replicateRequest
	if err := got.decodeMsg(b); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("op in reverse order: got %+v, %v; want %+v", got, err, want)
	}
	if err := decode(b, &viaReflect); err != nil || !reflect.DeepEqual(viaReflect, want) {
		t.Errorf("reflective reading of the op in reverse order: got %+v, %v", viaReflect, err)
	}
}

// TestReplicateWireRejects checks that malformed messages, every truncation of good ones among them, fail
// with ErrInvalidRequest, the error of the reflective path, and leave a zero message.
func TestReplicateWireRejects(t *testing.T) {
	good := replicateRequest{From: "n1", Ops: sampleOps()[:2], Snapshots: samplePieces()[:1], Probe: []int{1},
		Epochs: map[int]uint64{0: 1}, Pull: &pullRequest{Segment: 1}}
	goodBytes := good.marshal()
	goodReply := (&replicateReply{Status: StatusSuccess, Revisions: map[int]uint64{1: 2}, Snapshots: samplePieces()[:1]}).marshal()
	for n := range len(goodBytes) {
		expectRefused(t, "request truncated", goodBytes[:n])
	}
	for n := range len(goodReply) {
		expectRefused(t, "reply truncated", goodReply[:n])
	}

	header := func(fields int) []byte { return append(msgp.AppendArrayHeader(nil, uint32(fields)), 0xa2, 'n', '1', 0) }
	opBytes := appendOps(nil, sampleOps()[:1])[1:]
	cases := map[string][]byte{
		"trailing bytes":      append(append([]byte(nil), goodBytes...), 0xc0),
		"not an array":        msgp.AppendString(nil, "n1"),
		"map":                 msgp.AppendMapHeader(nil, 0),
		"too few fields":      {0x97, 0xa2, 'n', '1', 0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0},
		"empty array":         {0x90},
		"nil":                 {0xc0},
		"from not a string":   {0x98, 0x01, 0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0},
		"huge array":          {0xdd, 0xff, 0xff, 0xff, 0xff},
		"huge snapshots":      append(header(8), 0xdd, 0xff, 0xff, 0xff, 0xff),
		"huge ops":            append(header(8), 0xc0, 0xdd, 0xff, 0xff, 0xff, 0xff),
		"huge probe":          append(header(8), 0xc0, 0xc0, 0xdd, 0xff, 0xff, 0xff, 0xff),
		"huge epochs":         append(header(8), 0xc0, 0xc0, 0xc0, 0xdf, 0xff, 0xff, 0xff, 0xff),
		"huge op map":         append(header(8), 0xc0, 0x91, 0xdf, 0xff, 0xff, 0xff, 0xff),
		"huge entries":        append(header(8), 0x91, 0x96, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff),
		"huge key":            append(header(8), 0xc0, 0x91, 0x81, 0xa3, 'K', 'e', 'y', 0xdb, 0xff, 0xff, 0xff, 0xff),
		"op of no fields":     append(header(8), 0xc0, 0x91, 0x80, 0xc0, 0xc0, 0xc0, 0),
		"op not a map":        append(header(8), 0xc0, 0x91, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0xc0, 0xc0, 0),
		"op missing a field":  append(append(append(header(8), 0xc0, 0x91), withoutLastField(t, opBytes)...), 0xc0, 0xc0, 0xc0, 0),
		"op value string":     append(append(append(header(8), 0xc0, 0x91), bytes.Replace(opBytes, []byte("\xa5Value\xc4"), []byte("\xa5Value\xd9"), 1)...), 0xc0, 0xc0, 0xc0, 0),
		"op name not string":  append(header(8), 0xc0, 0x91, 0x81, 0x01, 0x01, 0xc0, 0xc0, 0xc0, 0),
		"op segment negative": append(header(8), 0xc0, 0x91, 0x81, 0xa7, 'S', 'e', 'g', 'm', 'e', 'n', 't', 0xff, 0xc0, 0xc0, 0xc0, 0),
		"probe string":        append(header(8), 0xc0, 0xc0, 0x91, 0xa1, '1', 0xc0, 0xc0, 0),
		"epoch negative":      append(header(8), 0xc0, 0xc0, 0xc0, 0x81, 0x01, 0xff, 0xc0, 0),
		"pull of one field":   append(header(8), 0xc0, 0xc0, 0xc0, 0xc0, 0x91, 0x01, 0),
		"more not a bool":     append(header(8), 0x91, 0x96, 0, 0, 0, 0xc0, 0, 0x01, 0xc0, 0xc0, 0xc0, 0xc0, 0),
		"incarnation missing": header(8)[:len(header(8))-1],
	}
	withOp := func(op durability.Op) []byte {
		return append(append(append(header(8), 0xc0, 0x91), appendOps(nil, []durability.Op{op})[1:]...), 0xc0, 0xc0, 0xc0, 0)
	}
	put := durability.Op{Kind: durability.OpPut, Key: "a", Value: []byte("1")}
	inner := durability.AppendMulti(nil, []durability.Op{put})
	cases["op of no kind"] = withOp(durability.Op{Key: "a"})
	cases["op of an unknown kind"] = withOp(durability.Op{Kind: math.MaxUint8, Key: "a", Value: []byte("1")})
	cases["collection op of bad arguments"] = withOp(durability.Op{Kind: durability.OpHashSet, Key: "h", Value: []byte{0xc1}})
	cases["multi op of bad ops"] = withOp(durability.Op{Kind: durability.OpMulti, Key: "a", Value: inner[:len(inner)-1]})
	cases["multi op inside a multi op"] = withOp(durability.Op{Kind: durability.OpMulti, Key: "a",
		Value: durability.AppendMulti(nil, []durability.Op{{Kind: durability.OpMulti, Key: "a", Value: inner}})})
	for name, b := range cases {
		expectRefused(t, name, b)
	}
	replies := map[string][]byte{
		"too few fields":   {0x96, 0, 0, 0, 0, 0xc0, 0xc0},
		"status too large": {0x97, 0xcd, 0x01, 0x00, 0, 0, 0, 0xc0, 0xc0, 0xc0},
		"segment string":   {0x97, 0, 0, 0xa1, '1', 0, 0xc0, 0xc0, 0xc0},
		"huge revisions":   {0x97, 0, 0, 0, 0, 0xdf, 0xff, 0xff, 0xff, 0xff},
		"huge snapshots":   {0x97, 0, 0, 0, 0, 0xc0, 0xc0, 0xdd, 0xff, 0xff, 0xff, 0xff},
		"trailing bytes":   append(append([]byte(nil), goodReply...), 0),
	}
	for name, b := range replies {
		var r replicateReply
		r.Status = StatusSuccess
		if err := r.decodeMsg(b); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("reply %s: error %v, want ErrInvalidRequest", name, err)
		}
		if !reflect.DeepEqual(r, replicateReply{}) {
			t.Errorf("reply %s: left %+v after an error", name, r)
		}
	}
}

// expectRefused checks that b does not decode as a request, with ErrInvalidRequest and a zero request left.
func expectRefused(t *testing.T, name string, b []byte) {
	t.Helper()
	r := replicateRequest{From: "stale"}
	if err := r.decodeMsg(b); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("request %s (%x): error %v, want ErrInvalidRequest", name, headOf(b), err)
	}
	if !reflect.DeepEqual(r, replicateRequest{}) {
		t.Errorf("request %s: left %+v after an error", name, r)
	}
}

// withoutLastField returns an encoded op's map without its last field.
func withoutLastField(t *testing.T, op []byte) []byte {
	t.Helper()
	n, rest, err := msgp.ReadMapHeaderBytes(op)
	if err != nil {
		t.Fatal(err)
	}
	b := msgp.AppendMapHeader(nil, n-1)
	for range 2 * (n - 1) {
		next, err := msgp.Skip(rest)
		if err != nil {
			t.Fatal(err)
		}
		b, rest = append(b, rest[:len(rest)-len(next)]...), next
	}
	return b
}

// TestReplicateWireGarbage checks that random bytes, and good messages with random bytes changed, never
// make the readers panic, and fail, if at all, with ErrInvalidRequest.
func TestReplicateWireGarbage(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	good := (&replicateRequest{From: "n1", Ops: sampleOps(), Snapshots: samplePieces()[:1], Epochs: map[int]uint64{0: 1}}).marshal()
	for range 20_000 {
		var b []byte
		if rng.IntN(2) == 0 {
			b = make([]byte, rng.IntN(64))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
		} else {
			b = append([]byte(nil), good...)
			for range 1 + rng.IntN(4) {
				b[rng.IntN(len(b))] = byte(rng.Uint32())
			}
		}
		checkReplicateWire(t, b)
	}
}

// TestReplicateWireBoundsAllocation checks that a header claiming far more elements than the message holds
// is refused before anything is sized by it.
func TestReplicateWireBoundsAllocation(t *testing.T) {
	const count = 50_000_000
	prefix := []byte{0x98, 0xa1, 'n', 0}
	for name, b := range map[string][]byte{
		"ops":     msgp.AppendArrayHeader(append(prefix, 0xc0), count),
		"probe":   msgp.AppendArrayHeader(append(prefix, 0xc0, 0xc0), count),
		"epochs":  msgp.AppendMapHeader(append(prefix, 0xc0, 0xc0, 0xc0), count),
		"entries": msgp.AppendArrayHeader(append(prefix, 0x91, 0x96, 0, 0, 0), count),
	} {
		b = append(b, make([]byte, 1000)...) // room for some elements, not for the count
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var r replicateRequest
		err := r.decodeMsg(b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: error %v, want ErrInvalidRequest", name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("%s: a %d-byte message allocated %d bytes", name, len(b), n)
		}
	}
}

// checkReplicateWire decodes data as a request and as a reply. Either must fail with ErrInvalidRequest or
// give a message that both codecs encode, and that both codecs read back as the same message.
func checkReplicateWire(t *testing.T, data []byte) {
	var req replicateRequest
	checkDecoded(t, data, &req, req.decodeMsg, func() []byte { return req.marshal() }, (*replicateRequest).decodeMsg)
	var reply replicateReply
	checkDecoded(t, data, &reply, reply.decodeMsg, func() []byte { return reply.marshal() }, (*replicateReply).decodeMsg)
}

// checkDecoded checks what decodeInto made of data, v, as checkReplicateWire says.
func checkDecoded[T any](t *testing.T, data []byte, v *T, decodeInto func([]byte) error, marshal func() []byte, decodeMsg func(*T, []byte) error) {
	t.Helper()
	if err := decodeInto(data); err != nil {
		if !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("error %v does not wrap ErrInvalidRequest", err)
		}
		return
	}
	b := marshal()
	var again, viaReflect T
	if err := decodeMsg(&again, b); err != nil || !reflect.DeepEqual(&again, v) {
		t.Fatalf("hand-written round trip of %x: %v, equal %v", headOf(data), err, reflect.DeepEqual(&again, v))
	}
	if err := decode(b, &viaReflect); err != nil || !reflect.DeepEqual(&viaReflect, v) {
		t.Fatalf("reflective reading of the re-encoded %x: %v, equal %v", headOf(data), err, reflect.DeepEqual(&viaReflect, v))
	}
	reflective, err := encode(v)
	if err != nil {
		t.Fatal(err)
	}
	var fromReflective T
	if err := decodeMsg(&fromReflective, reflective); err != nil || !reflect.DeepEqual(&fromReflective, v) {
		t.Fatalf("hand-written reading of the reflective encoding of %x: %v", headOf(data), err)
	}
}

// FuzzReplicateWire checks that the readers never panic, fail only with ErrInvalidRequest, and that what
// they accept survives both codecs. Seeds are in testdata/fuzz/FuzzReplicateWire.
func FuzzReplicateWire(f *testing.F) {
	for _, r := range sampleReplicateRequests() {
		if b := r.marshal(); len(b) < 4096 {
			f.Add(b)
		}
	}
	for _, r := range sampleReplicateReplies() {
		if b := r.marshal(); len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Fuzz(checkReplicateWire)
}

// replicateBenchRequest is a request of 64 ops with 64-byte values, as a busy owner sends.
func replicateBenchRequest() *replicateRequest {
	req := &replicateRequest{From: "node-1", FromIncarnation: 0x1234_5678_9abc_def1, Epochs: map[int]uint64{3: 7},
		Incarnation: 0x0fed_cba9_8765_4321}
	for i := range 64 {
		req.Ops = append(req.Ops, durability.Op{Segment: 100, Revision: uint64(1000 + i), Epoch: 7, Kind: durability.OpPut,
			Key: "user:" + strings.Repeat("x", 10) + string(rune('a'+i%26)), Value: bytes.Repeat([]byte{byte(i)}, 64),
			Version: uint64(1000 + i), Time: 1_700_000_000_000_000_000 + int64(i)})
	}
	return req
}

// BenchmarkReplicateWire compares the codecs on a busy owner's request.
func BenchmarkReplicateWire(b *testing.B) {
	req := replicateBenchRequest()
	payload := req.marshal()
	b.Run("encode/reflective", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			if _, err := encode(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/hand", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			_ = req.marshal()
		}
	})
	b.Run("decode/reflective", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			var r replicateRequest
			if err := decode(payload, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/hand", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			var r replicateRequest
			if err := r.decodeMsg(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
