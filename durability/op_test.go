package durability

import (
	"bytes"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/tinylib/msgp/msgp"
)

func codecOps() []Op {
	return []Op{
		putOp(1, 1),
		{Segment: math.MaxUint32, Revision: math.MaxUint64, Epoch: math.MaxUint64, Kind: OpPut, Key: "k",
			Value: bytes.Repeat([]byte{0xAB}, 70_000), ExpireAt: math.MinInt64, Version: math.MaxUint64, Time: math.MaxInt64},
		{Kind: OpPut, Value: []byte{}},
		{Segment: 3, Revision: 9, Kind: OpDelete, Key: "gone\x00\xff", Version: 2, Time: -1},
		{Segment: 4, Revision: 10, Kind: OpHashSet, Key: "h", Value: AppendArgs(nil, [][]byte{{1}, []byte("f"), []byte("v")}), Version: 10},
		{Segment: 4, Revision: 11, Kind: OpZAdd, Key: "z", Value: AppendArgs(nil, [][]byte{{0}, make([]byte, 8), []byte("m")})},
		{Segment: 4, Revision: 12, Kind: OpExpireAt, Key: "h", Value: AppendArgs(nil, nil), ExpireAt: 99},
		{Segment: 4, Revision: 13, Kind: OpListPop, Key: "l", Value: AppendArgs(nil, [][]byte{{}})},
		{Segment: 4, Revision: 14, Epoch: 2, Kind: OpExpire, Key: "ttl", ExpireAt: 99, Version: 14, Time: 100},
		{Segment: 4, Revision: 15, Epoch: 2, Kind: OpMulti, Key: "a", Value: AppendMulti(nil, multiOps()), Version: 15},
		{Segment: 4, Revision: 16, Epoch: 2, Kind: OpEvict, Key: "evicted", Version: 16, Time: 101},
	}
}

// multiOps are the writes of a transaction at revision 15 of segment 4.
func multiOps() []Op {
	return []Op{
		{Segment: 4, Revision: 15, Kind: OpPut, Key: "a", Value: []byte("1"), Version: 15},
		{Segment: 4, Revision: 15, Kind: OpDelete, Key: "b"},
		{Segment: 4, Revision: 15, Kind: OpHashSet, Key: "h", Value: AppendArgs(nil, [][]byte{{1}, []byte("f"), []byte("v")}), Version: 15},
	}
}

func TestOpRoundTrip(t *testing.T) {
	var stream []byte
	for _, op := range codecOps() {
		encoded := AppendOp(nil, &op)
		got, rest, err := DecodeOp(encoded)
		if err != nil {
			t.Fatalf("DecodeOp(AppendOp(%+v)): %v", op, err)
		}
		if !sameOp(got, op) || len(rest) != 0 {
			t.Fatalf("round trip gave %+v and %d bytes, want %+v", got, len(rest), op)
		}
		if op.Kind == OpPut && got.Value == nil {
			t.Fatal("a put came back with a nil value")
		}
		stream = AppendOp(stream, &op)
	}
	for _, want := range codecOps() {
		var got Op
		var err error
		if got, stream, err = DecodeOp(stream); err != nil || !sameOp(got, want) {
			t.Fatalf("decoding a stream: %+v, %v; want %+v", got, err, want)
		}
	}
	if len(stream) != 0 {
		t.Fatalf("%d bytes left after the stream", len(stream))
	}
}

func TestDecodeOpCopies(t *testing.T) {
	op := putOp(1, 2)
	encoded := AppendOp(nil, &op)
	got, _, err := DecodeOp(encoded)
	if err != nil {
		t.Fatal(err)
	}
	clear(encoded)
	if !sameOp(got, op) {
		t.Fatal("the decoded op aliases its input")
	}
}

func TestDecodeOpSkipsLaterFields(t *testing.T) {
	op := putOp(4, 5)
	encoded := AppendOp(nil, &op)
	encoded[0]++ // one more field in the array header (a fixarray)
	encoded = msgp.AppendMapHeader(encoded, 1)
	encoded = msgp.AppendString(encoded, "future")
	encoded = msgp.AppendArrayHeader(encoded, 2)
	encoded = msgp.AppendInt(encoded, 1)
	encoded = msgp.AppendString(encoded, "x")
	got, rest, err := DecodeOp(encoded)
	if err != nil || !sameOp(got, op) || len(rest) != 0 {
		t.Fatalf("DecodeOp with a later field = %+v, %d bytes left, %v", got, len(rest), err)
	}
}

func TestDecodeOpCorrupt(t *testing.T) {
	valid := putOp(1, 2)
	encoded := AppendOp(nil, &valid)
	for n := range len(encoded) {
		if _, _, err := DecodeOp(encoded[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeOp of the first %d of %d bytes = %v, want ErrCorrupt", n, len(encoded), err)
		}
	}
	header := func(fields uint32) []byte { return msgp.AppendArrayHeader(nil, fields) }
	// upToKind encodes the fields before the key.
	upToKind := func(kind uint8) []byte {
		b := header(opFields)
		b = msgp.AppendUint32(b, 1)
		b = msgp.AppendUint64(b, 1)
		b = msgp.AppendUint64(b, 1)
		return msgp.AppendUint8(b, kind)
	}
	withValue := func(kind uint8, value []byte) []byte {
		b := msgp.AppendString(upToKind(kind), "k")
		if value == nil {
			b = msgp.AppendNil(b)
		} else {
			b = msgp.AppendBytes(b, value)
		}
		b = msgp.AppendInt64(b, 0)
		b = msgp.AppendUint64(b, 0)
		return msgp.AppendInt64(b, 0)
	}
	moreFields := bytes.Clone(encoded)
	moreFields[0]++ // a fixarray header claiming a tenth field that is not there
	for name, b := range map[string][]byte{
		"empty":             nil,
		"not an array":      msgp.AppendString(nil, "op"),
		"too few fields":    header(opFields - 1),
		"unknown kind":      withValue(17, []byte("v")),
		"args malformed":    withValue(uint8(OpHashSet), []byte("v")),
		"delete with value": withValue(uint8(OpDelete), []byte("v")),
		"expiry with value": withValue(uint8(OpExpire), []byte("v")),
		"put without value": withValue(uint8(OpPut), nil),
		"segment overflow":  msgp.AppendUint64(header(opFields), math.MaxUint32+1),
		"key length lies":   append(upToKind(1), 0xdb, 0xff, 0xff, 0xff, 0xff, 'k'),
		"bin length lies":   append(msgp.AppendString(upToKind(1), "k"), 0xc6, 0xff, 0xff, 0xff, 0xff, 'v'),
		"key is bin":        msgp.AppendBytes(upToKind(1), []byte("k")),
		"missing field":     moreFields,
		"huge field count":  append([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, encoded[1:]...),
		"negative revision": msgp.AppendInt64(msgp.AppendUint32(header(opFields), 1), -1),
	} {
		if _, _, err := DecodeOp(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: DecodeOp = %v, want ErrCorrupt", name, err)
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, s := range []Snapshot{
		{},
		testSnapshot(7, 100, 1),
		testSnapshot(math.MaxUint32, math.MaxUint64, 500),
		{Segment: 1, Entries: []Entry{{Key: "", Value: bytes.Repeat([]byte("x"), 100_000)}}},
	} {
		encoded := AppendSnapshot(nil, &s)
		got, err := DecodeSnapshot(encoded)
		if err != nil {
			t.Fatalf("DecodeSnapshot(AppendSnapshot(segment %d)): %v", s.Segment, err)
		}
		if !sameSnapshot(got, s) {
			t.Fatalf("round trip of segment %d changed it", s.Segment)
		}
		clear(encoded)
		if !sameSnapshot(got, s) {
			t.Fatal("the decoded snapshot aliases its input")
		}
	}
}

func TestDecodeSnapshotCorrupt(t *testing.T) {
	s := testSnapshot(2, 3, 20)
	encoded := AppendSnapshot(nil, &s)
	for n := range len(encoded) {
		if _, err := DecodeSnapshot(encoded[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeSnapshot of the first %d of %d bytes = %v, want ErrCorrupt", n, len(encoded), err)
		}
	}
	prefix := func() []byte {
		b := msgp.AppendArrayHeader(nil, snapshotFields)
		b = msgp.AppendUint32(b, 1)
		b = msgp.AppendUint64(b, 1)
		return msgp.AppendUint64(b, 1)
	}
	for name, b := range map[string][]byte{
		"trailing byte":       append(encoded[:len(encoded):len(encoded)], 0),
		"too few fields":      msgp.AppendArrayHeader(nil, snapshotFields-1),
		"entry count lies":    append(msgp.AppendArrayHeader(prefix(), math.MaxUint32), make([]byte, 64)...),
		"entry too short":     msgp.AppendArrayHeader(msgp.AppendArrayHeader(prefix(), 1), 3),
		"entries not array":   msgp.AppendNil(prefix()),
		"entry value is text": append(msgp.AppendString(msgp.AppendString(msgp.AppendArrayHeader(msgp.AppendArrayHeader(prefix(), 1), entryFields), "k"), "v"), 0, 0),
	} {
		if _, err := DecodeSnapshot(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: DecodeSnapshot = %v, want ErrCorrupt", name, err)
		}
	}
}

// TestDecodeSnapshotBoundedAllocation feeds a header that claims as many entries as the input could
// hold and checks that decoding allocates in proportion to the input, not the claim.
func TestDecodeSnapshotBoundedAllocation(t *testing.T) {
	b := msgp.AppendArrayHeader(nil, snapshotFields)
	b = msgp.AppendUint32(b, 1)
	b = msgp.AppendUint64(b, 1)
	b = msgp.AppendUint64(b, 1)
	b = msgp.AppendArrayHeader(b, 1<<20)
	b = append(b, make([]byte, 6<<20)...) // room for the claim, but zeros are not entries
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := DecodeSnapshot(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("DecodeSnapshot = %v, want ErrCorrupt", err)
	}
	runtime.ReadMemStats(&after)
	// The claim alone would take 1<<20 entries of about 56 bytes each: 56 MiB.
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 2*uint64(len(b)) {
		t.Fatalf("rejecting a lying header allocated %d bytes for %d bytes of input", allocated, len(b))
	}
}

// TestCheckOp checks that CheckOp accepts every op DecodeOp returns and refuses, with ErrCorrupt, the ops
// DecodeOp would have refused for their kind or value.
func TestCheckOp(t *testing.T) {
	for _, op := range codecOps() {
		decoded, _, err := DecodeOp(AppendOp(nil, &op))
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckOp(&decoded); err != nil {
			t.Errorf("CheckOp of a decoded %s op = %v", decoded.Kind, err)
		}
	}
	put := Op{Kind: OpPut, Key: "a", Value: []byte("1")}
	multi := AppendMulti(nil, []Op{put})
	for name, op := range map[string]Op{
		"no kind":         {Key: "a"},
		"unknown kind":    {Kind: 18, Key: "a"},
		"args malformed":  {Kind: OpHashSet, Key: "h", Value: []byte("v")},
		"multi truncated": {Kind: OpMulti, Key: "a", Value: multi[:len(multi)-1]},
		"multi inside":    {Kind: OpMulti, Key: "a", Value: AppendMulti(nil, []Op{{Kind: OpMulti, Key: "a", Value: multi}})},
		"multi of no ops": {Kind: OpMulti, Key: "a", Value: msgp.AppendArrayHeader(nil, 0)},
	} {
		if err := CheckOp(&op); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: CheckOp = %v, want ErrCorrupt", name, err)
		}
	}
}
