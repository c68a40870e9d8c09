package zaris

import (
	"errors"
	"math"
	"reflect"
	"runtime"
	"testing"

	"github.com/tinylib/msgp/msgp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/zaris-go/zaris/internal/kv"
)

func sampleKVRequests() []kv.Request {
	return []kv.Request{
		{},
		{Key: "k"},
		{Key: "k", Value: []byte{}},
		{Key: "user:{42}", Value: []byte("hello"), TTL: int64(time1h)},
		{Key: "n", Delta: -7},
		{Key: "n", Delta: math.MinInt64, TTL: math.MaxInt64},
		{Key: "p", Value: make([]byte, 300), Cond: kv.CondIfAbsent | kv.CondReturnPrev, Concern: WriteConcern(math.MaxUint8)},
		{Key: string(make([]byte, 70000)), Value: make([]byte, 70000), TTL: -1, Cond: kv.Cond(math.MaxUint8), Concern: 1, Version: math.MaxUint64},
		{Key: "cas", Value: []byte("v"), Cond: kv.CondKeepTTL, Version: 42},
		{Key: "h", Args: [][]byte{[]byte("field"), {}, []byte("value")}},
		{Key: "h", Args: [][]byte{}},
	}
}

const time1h = 3600 * 1e9

func sampleKVReplies() []kv.Reply {
	return []kv.Reply{
		{},
		{Status: StatusSuccess, Value: []byte{}},
		{Status: StatusSuccess, Value: []byte("v"), Version: 1},
		{Status: Status(math.MaxUint8), Owner: "node-2", Epoch: math.MaxUint64, MapIndex: 1 << 40},
		{Int: -1},
		{Int: math.MinInt64, Existed: true, Value: make([]byte, 300), Version: math.MaxUint64},
		{Status: StatusSuccess, Value: make([]byte, 70000), Owner: NodeID(make([]byte, 300)), Int: math.MaxInt64},
		{Status: StatusSuccess, Values: [][]byte{[]byte("a"), nil, {}}},
		{Status: StatusWrongType, Values: [][]byte{}},
		{Status: StatusSuccess, Version: 7, Int: 2, Revision: 9, Emptied: true},
		{Status: StatusSuccess, Version: 8, Int: 1, Created: true},
	}
}

// TestKVWireRoundTrip checks that every field survives the hand-written codec, that a nil Value stays nil and
// an empty one empty, and that the reflective codec reads the same bytes the same way in both directions, so
// nodes of either codec understand each other.
func TestKVWireRoundTrip(t *testing.T) {
	for _, want := range sampleKVRequests() {
		b := marshalRequest(&want)
		var got kv.Request
		if err := decodeRequest(&got, b); err != nil {
			t.Fatalf("decodeMsg(%+v): %v", want, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("request round trip: got %+v, want %+v", got, want)
		}
		var viaReflect kv.Request
		if err := msgpack.Unmarshal(b, &viaReflect); err != nil || !reflect.DeepEqual(viaReflect, want) {
			t.Errorf("reflective decoding of the hand-written request: got %+v, %v; want %+v", viaReflect, err, want)
		}
		old, err := encode(&want)
		if err != nil {
			t.Fatal(err)
		}
		var fromOld kv.Request
		if err := decodeRequest(&fromOld, old); err != nil || !reflect.DeepEqual(fromOld, want) {
			t.Errorf("decodeMsg of the reflective encoding: got %+v, %v; want %+v", fromOld, err, want)
		}
	}
	for _, want := range sampleKVReplies() {
		b := marshalReply(&want)
		var got kv.Reply
		if err := decodeReply(&got, b); err != nil {
			t.Fatalf("decodeMsg(%+v): %v", want, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("reply round trip: got %+v, want %+v", got, want)
		}
		var viaReflect kv.Reply
		if err := msgpack.Unmarshal(b, &viaReflect); err != nil || !reflect.DeepEqual(viaReflect, want) {
			t.Errorf("reflective decoding of the hand-written reply: got %+v, %v; want %+v", viaReflect, err, want)
		}
		old, err := encode(&want)
		if err != nil {
			t.Fatal(err)
		}
		var fromOld kv.Reply
		if err := decodeReply(&fromOld, old); err != nil || !reflect.DeepEqual(fromOld, want) {
			t.Errorf("decodeMsg of the reflective encoding: got %+v, %v; want %+v", fromOld, err, want)
		}
	}
}

// TestKVWireSizeBound checks that marshal sizes its buffer right: the overhead constants bound the bytes.
func TestKVWireSizeBound(t *testing.T) {
	for _, r := range sampleKVRequests() {
		if b := marshalRequest(&r); len(b) > requestSizeBound(&r) {
			t.Errorf("request of %d bytes exceeds its bound", len(b))
		}
	}
	for _, r := range sampleKVReplies() {
		if b := marshalReply(&r); len(b) > replySizeBound(&r) {
			t.Errorf("reply of %d bytes exceeds its bound", len(b))
		}
	}
}

// TestKVWireExtraFields checks that readers skip fields appended after those they know.
func TestKVWireExtraFields(t *testing.T) {
	want := kv.Request{Key: "k", Value: []byte("v"), TTL: 5, Delta: 6, Cond: kv.CondKeepTTL, Concern: 2}
	b := appendRequest(&want, nil)
	b[0]++ // one more field
	b = msgp.AppendMapHeader(b, 1)
	b = msgp.AppendString(b, "future")
	b = msgp.AppendArrayHeader(b, 2)
	b = msgp.AppendFloat64(b, 1.5)
	b = msgp.AppendNil(b)
	var got kv.Request
	if err := decodeRequest(&got, b); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("request with an extra field: got %+v, %v; want %+v", got, err, want)
	}

	wantReply := kv.Reply{Status: StatusMoved, Owner: "n1", Epoch: 3, MapIndex: 4, Int: 5, Existed: true}
	rb := appendReply(&wantReply, nil)
	rb[0] += 2
	rb = msgp.AppendString(rb, "x")
	rb = msgp.AppendUint64(rb, 9)
	var gotReply kv.Reply
	if err := decodeReply(&gotReply, rb); err != nil || !reflect.DeepEqual(gotReply, wantReply) {
		t.Errorf("reply with extra fields: got %+v, %v; want %+v", gotReply, err, wantReply)
	}
}

// kvRequestV1 is a request as nodes wrote and read it before requests carried a version.
type kvRequestV1 struct {
	_msgpack struct{} `msgpack:",as_array"`
	Key      string
	Value    []byte
	TTL      int64
	Delta    int64
	Cond     kv.Cond
	Concern  WriteConcern
}

// TestKVWireOlderWriterAndReader checks both directions of compatibility with nodes that know a request
// of six fields, without the version: their requests decode with version 0 whichever codec wrote them, and
// they read this version's requests, skipping the version.
func TestKVWireOlderWriterAndReader(t *testing.T) {
	for _, want := range sampleKVRequests() {
		old := kvRequestV1{Key: want.Key, Value: want.Value, TTL: want.TTL, Delta: want.Delta, Cond: want.Cond, Concern: want.Concern}
		handWritten := msgp.AppendArrayHeader(nil, 6)
		handWritten = msgp.AppendString(handWritten, old.Key)
		handWritten = appendValue(handWritten, old.Value)
		handWritten = msgp.AppendInt64(handWritten, old.TTL)
		handWritten = msgp.AppendInt64(handWritten, old.Delta)
		handWritten = msgp.AppendUint8(handWritten, uint8(old.Cond))
		handWritten = msgp.AppendUint8(handWritten, uint8(old.Concern))
		reflective, err := encode(&old)
		if err != nil {
			t.Fatal(err)
		}
		unversioned := want
		unversioned.Version, unversioned.Args = 0, nil
		for codec, b := range map[string][]byte{"hand-written": handWritten, "reflective": reflective} {
			var got kv.Request
			if err := decodeRequest(&got, b); err != nil || !reflect.DeepEqual(got, unversioned) {
				t.Errorf("%s six-field request: got %+v, %v; want %+v", codec, got, err, unversioned)
			}
		}

		// A hand-written reader of six fields reads the first six and skips the rest. (The reflective codec
		// refuses an array of another length than its struct, so no node reads requests with it.)
		r := wireReader{b: marshalRequest(&want)}
		n := r.fields(6)
		got := kvRequestV1{Key: r.string(), Value: r.value(), TTL: r.int64(), Delta: r.int64(), Cond: kv.Cond(r.uint8()), Concern: WriteConcern(r.uint8())}
		r.skip(n - 6)
		if err := r.done("v1 request"); err != nil || !reflect.DeepEqual(got, old) {
			t.Errorf("six-field hand-written reader: got %+v, %v; want %+v", got, err, old)
		}
	}
}

// TestKVWireRejects checks that malformed messages fail with ErrInvalidRequest and leave a zero message.
func TestKVWireRejects(t *testing.T) {
	good := marshalRequest(&kv.Request{Key: "k", Value: []byte("v")})
	goodReply := marshalReply(&kv.Reply{Status: StatusSuccess, Value: []byte("v")})
	withField := func(b []byte, i int, repl []byte) []byte {
		// Replaces the i-th field of an array whose fields before i are one byte each.
		return append(append(append([]byte(nil), b[:1+i]...), repl...), b[2+i:]...)
	}
	requests := map[string][]byte{
		"empty":            nil,
		"not an array":     msgp.AppendString(nil, "k"),
		"map":              msgp.AppendMapHeader(nil, 0),
		"too few fields":   append([]byte{0x95}, good[1:len(good)-2]...),
		"version negative": append(append(append([]byte(nil), good[:len(good)-3]...), 0xff), good[len(good)-2:]...),
		"version string":   append(append(append([]byte(nil), good[:len(good)-3]...), 0xa1, '1'), good[len(good)-2:]...),
		"args number":      append(append([]byte(nil), good[:len(good)-2]...), 0x01, 0x00),
		"expire at string": append(append([]byte(nil), good[:len(good)-1]...), 0xa1, '1'),
		"truncated":        good[:len(good)-1],
		"trailing bytes":   append(append([]byte(nil), good...), 0xc0),
		"key not string":   append([]byte{0x96, 0x01}, good[3:]...),
		"nil key":          append([]byte{0x96, 0xc0}, good[3:]...),
		"value string":     append([]byte{0x96, 0xa1, 'k', 0xa1, 'v'}, good[6:]...),
		"ttl float":        append(msgp.AppendFloat64([]byte{0x96, 0xa1, 'k', 0xc0}, 1), 0, 0, 0),
		"cond too large":   append([]byte{0x96, 0xa1, 'k', 0xc0, 0, 0}, 0xcd, 1, 0, 0),
		"concern negative": append([]byte{0x96, 0xa1, 'k', 0xc0, 0, 0, 0}, 0xff),
		"huge array":       {0xdd, 0xff, 0xff, 0xff, 0xff},
		"huge extra":       append(append([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, good[1:]...), 0xc0),
		"huge key":         {0x96, 0xdb, 0xff, 0xff, 0xff, 0xff},
	}
	for name, b := range requests {
		var r kv.Request
		r.Key = "stale"
		if err := decodeRequest(&r, b); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("request %s: error %v, want ErrInvalidRequest", name, err)
		}
		if !reflect.DeepEqual(r, kv.Request{}) {
			t.Errorf("request %s: left %+v after an error", name, r)
		}
	}
	replies := map[string][]byte{
		"empty":          nil,
		"too few fields": append([]byte{0x97}, goodReply[1:]...),
		"truncated":      goodReply[:len(goodReply)-1],
		"trailing bytes": append(append([]byte(nil), goodReply...), 0),
		"status string":  withField(goodReply, 0, []byte{0xa1, 'x'}),
		"status large":   append([]byte{0x98, 0xcd, 1, 0}, goodReply[2:]...),
		"existed int":    append(append(append([]byte(nil), goodReply[:len(goodReply)-4]...), 0x01), goodReply[len(goodReply)-3:]...),
		"huge value":     {0x98, 0x00, 0xc6, 0xff, 0xff, 0xff, 0xff},
	}
	for name, b := range replies {
		var r kv.Reply
		r.Owner = "stale"
		if err := decodeReply(&r, b); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("reply %s: error %v, want ErrInvalidRequest", name, err)
		}
		if !reflect.DeepEqual(r, kv.Reply{}) {
			t.Errorf("reply %s: left %+v after an error", name, r)
		}
	}
}

// TestKVWireValueIsCapped checks that a decoded Value, which aliases the payload, cannot be appended to in
// place over the bytes that follow it.
func TestKVWireValueIsCapped(t *testing.T) {
	b := marshalRequest(&kv.Request{Key: "k", Value: []byte("abc"), TTL: 9})
	var r kv.Request
	if err := decodeRequest(&r, b); err != nil {
		t.Fatal(err)
	}
	if cap(r.Value) != len(r.Value) {
		t.Fatalf("Value has cap %d, len %d", cap(r.Value), len(r.Value))
	}
	_ = append(r.Value, 'x', 'x', 'x', 'x')
	var again kv.Request
	if err := decodeRequest(&again, b); err != nil || again.TTL != 9 {
		t.Fatalf("payload changed by an append to Value: %+v, %v", again, err)
	}
}

func TestKVWireAllocations(t *testing.T) {
	req := kv.Request{Key: "bench-key", Value: make([]byte, 64), TTL: 1}
	reqBytes := marshalRequest(&req)
	reply := kv.Reply{Status: StatusSuccess, Value: make([]byte, 64), Version: 1, Owner: "n1"}
	replyBytes := marshalReply(&reply)
	for name, c := range map[string]struct {
		f    func()
		want float64
	}{
		"request marshal":  {func() { _ = marshalRequest(&req) }, 1},
		"reply marshal":    {func() { _ = marshalReply(&reply) }, 1},
		"request decode":   {func() { var r kv.Request; _ = decodeRequest(&r, reqBytes) }, 1}, // the key string
		"reply decode":     {func() { var r kv.Reply; _ = decodeReply(&r, replyBytes) }, 1},   // the owner string
		"request appendTo": {func() { _ = appendRequest(&req, reqBytes[:0]) }, 0},
	} {
		if n := testing.AllocsPerRun(100, c.f); n > c.want {
			t.Errorf("%s allocates %v times, want at most %v", name, n, c.want)
		}
	}
}

// TestDecodeBoundsAllocation checks that a header claiming far more elements than the message holds is
// refused before the reflective codec sizes a slice by it.
func TestDecodeBoundsAllocation(t *testing.T) {
	const count = 50_000_000
	huge := func(prefix ...byte) []byte {
		return msgp.AppendArrayHeader(prefix, count)
	}
	cases := map[string]struct {
		data []byte
		v    any
	}{
		"command in-sync": {huge(0x81, 0xa6, 'I', 'n', 'S', 'y', 'n', 'c'), new(command)},
		"cluster map":     {huge(), new(ClusterMap)},
	}
	for name, c := range cases {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := decode(c.data, c.v)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: error %v, want ErrInvalidRequest", name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: a %d-byte message allocated %d bytes", name, len(c.data), n)
		}
	}
}

// Fuzzing. Seeds are in testdata/fuzz/<name>; add new ones with the encodings of interesting messages.

// FuzzDecodeKVRequest checks that decodeMsg never panics, and that whatever it accepts encodes back to a
// message it decodes the same way.
func FuzzDecodeKVRequest(f *testing.F) {
	for _, r := range sampleKVRequests() {
		if len(r.Key)+len(r.Value) < 1024 {
			f.Add(marshalRequest(&r))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r kv.Request
		if err := decodeRequest(&r, data); err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v does not wrap ErrInvalidRequest", err)
			}
			return
		}
		if len(r.Key)+len(r.Value) > len(data) {
			t.Fatalf("decoded %d key and %d value bytes from %d bytes", len(r.Key), len(r.Value), len(data))
		}
		b := marshalRequest(&r)
		var again kv.Request
		if err := decodeRequest(&again, b); err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v", r, err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip: got %+v, want %+v", again, r)
		}
	})
}

// FuzzDecodeKVReply is FuzzDecodeKVRequest for replies.
func FuzzDecodeKVReply(f *testing.F) {
	for _, r := range sampleKVReplies() {
		if len(r.Value) < 1024 {
			f.Add(marshalReply(&r))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r kv.Reply
		if err := decodeReply(&r, data); err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v does not wrap ErrInvalidRequest", err)
			}
			return
		}
		if len(r.Owner)+len(r.Value) > len(data) {
			t.Fatalf("decoded %d owner and %d value bytes from %d bytes", len(r.Owner), len(r.Value), len(data))
		}
		b := marshalReply(&r)
		var again kv.Reply
		if err := decodeReply(&again, b); err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v", r, err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip: got %+v, want %+v", again, r)
		}
	})
}

// fuzzReflective checks that decode never panics on data and fails only with ErrInvalidRequest, and that
// what it accepts survives encode and decode.
func fuzzReflective[T any](t *testing.T, data []byte) {
	var v T
	if err := decode(data, &v); err != nil {
		if !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("error %v does not wrap ErrInvalidRequest", err)
		}
		return
	}
	b, err := encode(&v)
	if err != nil {
		t.Fatalf("decoded %+v does not encode: %v", v, err)
	}
	var again T
	if err := decode(b, &again); err != nil {
		t.Fatalf("re-encoded %+v does not decode: %v", v, err)
	}
	if !reflect.DeepEqual(again, v) {
		t.Fatalf("round trip: got %+v, want %+v", again, v)
	}
}

// FuzzDecodeCommand fuzzes a control-plane command, read with the reflective codec from proposals and from
// the Raft log.
func FuzzDecodeCommand(f *testing.F) {
	seeds := []command{
		{Kind: cmdUpsertNode, Node: NodeInfo{ID: "n1", DataAddr: "127.0.0.1:1", RESPAddr: "127.0.0.1:2"}},
		{Kind: cmdAssign, Assignment: Assignment{{"n1", "n2"}, {"n2"}}},
		{Kind: cmdDrop, Partition: 3, Epoch: 4, InSync: []NodeID{"n1"}},
		{Kind: cmdAdmit, Partition: 3, Epoch: 4, InSyncIndex: 9, Node: NodeInfo{ID: "n2"}},
	}
	for i := range seeds {
		b, err := encode(&seeds[i])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(fuzzReflective[command])
}
