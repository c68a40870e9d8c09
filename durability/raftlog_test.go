package durability

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// codecRaftLogs covers every field's edge values, each at its own index.
func codecRaftLogs() []raft.Log {
	appended := time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC)
	return []raft.Log{
		{Index: 1, Term: 1, Type: raft.LogNoop},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("set x=1"), AppendedAt: appended},
		{Index: 3, Term: 2, Type: raft.LogConfiguration, Data: bytes.Repeat([]byte{0xab}, 300),
			Extensions: []byte("ext"), AppendedAt: appended.Local()},
		{Index: 4, Term: 2, Type: raft.LogBarrier, Extensions: []byte{0}, AppendedAt: time.Unix(0, 0)},
		{Index: 5, Term: 3, Type: raft.LogType(255), Data: []byte{0}, AppendedAt: time.Unix(0, -1)},
		{Index: 6, Term: 3, Type: raft.LogCommand, Data: []byte("x"), AppendedAt: time.Unix(0, math.MinInt64)},
		{Index: 7, Term: 3, Type: raft.LogCommand, AppendedAt: time.Unix(0, math.MaxInt64)},
		{Index: math.MaxUint64, Term: math.MaxUint64, Type: raft.LogCommand, Data: []byte("last")},
	}
}

// sameRaftLog compares logs field by field, counting nil and empty bytes as equal and times by instant.
func sameRaftLog(a, b raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type && bytes.Equal(a.Data, b.Data) &&
		bytes.Equal(a.Extensions, b.Extensions) && a.AppendedAt.IsZero() == b.AppendedAt.IsZero() &&
		a.AppendedAt.Equal(b.AppendedAt)
}

func TestRaftLogCodecRoundTrip(t *testing.T) {
	for _, l := range codecRaftLogs() {
		encoded := appendRaftLog([]byte("prefix"), &l)[len("prefix"):]
		var got raft.Log
		if err := decodeRaftLog(encoded, &got); err != nil {
			t.Fatalf("log %d: %v", l.Index, err)
		}
		if !sameRaftLog(got, l) {
			t.Fatalf("log %d: decoded %+v, want %+v", l.Index, got, l)
		}
		if l.AppendedAt.IsZero() && !got.AppendedAt.IsZero() {
			t.Fatalf("log %d: zero time came back as %v", l.Index, got.AppendedAt)
		}
		if !bytes.Equal(appendRaftLog(nil, &got), encoded) {
			t.Fatalf("log %d: re-encoding differs", l.Index)
		}
	}
}

func TestRaftLogDecodeCopies(t *testing.T) {
	l := raft.Log{Index: 9, Term: 1, Data: []byte("data"), Extensions: []byte("ext")}
	encoded := appendRaftLog(nil, &l)
	var got raft.Log
	if err := decodeRaftLog(encoded, &got); err != nil {
		t.Fatal(err)
	}
	clear(encoded)
	if string(got.Data) != "data" || string(got.Extensions) != "ext" {
		t.Fatalf("decoded log aliases its input: %q %q", got.Data, got.Extensions)
	}
}

func TestRaftLogDecodeTruncated(t *testing.T) {
	for _, l := range codecRaftLogs() {
		encoded := appendRaftLog(nil, &l)
		for n := range len(encoded) {
			var got raft.Log
			if err := decodeRaftLog(encoded[:n], &got); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("log %d: decoding the first %d of %d bytes = %v, want ErrCorrupt", l.Index, n, len(encoded), err)
			}
		}
	}
}

func TestRaftLogDecodeMalformed(t *testing.T) {
	valid := raft.Log{Index: 5, Term: 2, Data: []byte("ab"), AppendedAt: time.Unix(0, 1)}
	encoded := appendRaftLog(nil, &valid) // 01 05 02 00 02 'a' 'b' 00 01 02
	with := func(at int, b ...byte) []byte {
		return append(append(append([]byte(nil), encoded[:at]...), b...), encoded[at+1:]...)
	}
	cases := map[string][]byte{
		"empty":                    nil,
		"unknown version":          with(0, 2),
		"version zero":             with(0, 0),
		"overlong index":           with(1, 0x85, 0x00),
		"index overflows":          with(1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02),
		"overlong term":            with(2, 0x82, 0x80, 0x00),
		"data length beyond input": with(4, 0x40),
		"huge data length":         with(4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"overlong zero length":     with(7, 0x80, 0x00),
		"presence byte 2":          with(8, 2),
		"overlong time":            with(9, 0x82, 0x00),
		"trailing byte":            append(append([]byte(nil), encoded...), 0),
		"zero time with nanos":     append(with(8, 0), 0x02),
	}
	for name, b := range cases {
		got := raft.Log{Index: 77}
		if err := decodeRaftLog(b, &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decode = %v, want ErrCorrupt", name, err)
		}
		if got.Index != 77 {
			t.Errorf("%s: a failed decode changed the log", name)
		}
	}
}

func BenchmarkRaftLogCodec(b *testing.B) {
	l := raft.Log{Index: 1 << 40, Term: 9, Type: raft.LogCommand, Data: bytes.Repeat([]byte("v"), 100),
		AppendedAt: time.Now()}
	buf := appendRaftLog(nil, &l)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendRaftLog(buf[:0], &l)
		if err := decodeRaftLog(buf, &l); err != nil {
			b.Fatal(err)
		}
	}
}
