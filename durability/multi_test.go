package durability

import (
	"bytes"
	"errors"
	"testing"
)

func TestMultiRoundTrip(t *testing.T) {
	want := multiOps()
	got, err := DecodeMulti(AppendMulti(nil, want))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("decoded %d ops, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameOp(got[i], want[i]) {
			t.Fatalf("op %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestMultiRefusesMalformed(t *testing.T) {
	nested := Op{Kind: OpMulti, Key: "a", Value: AppendMulti(nil, multiOps())}
	good := AppendMulti(nil, multiOps())
	for name, b := range map[string][]byte{
		"empty":        AppendMulti(nil, nil),
		"nested":       AppendMulti(nil, []Op{nested}),
		"trailing":     append(bytes.Clone(good), 0xc0),
		"truncated":    good[:len(good)-1],
		"huge count":   {0xdd, 0xff, 0xff, 0xff, 0xff},
		"not an array": {0xc0},
		"unknown kind": AppendMulti(nil, []Op{{Kind: OpKind(99), Key: "x"}}),
	} {
		if _, err := DecodeMulti(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: DecodeMulti returned %v, want ErrCorrupt", name, err)
		}
	}
	op := Op{Kind: OpMulti, Key: "a", Value: AppendMulti(nil, nil)}
	if _, _, err := DecodeOp(AppendOp(nil, &op)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("DecodeOp of a multi op without ops returned %v, want ErrCorrupt", err)
	}
}

// FuzzDecodeMulti checks that DecodeMulti never panics, fails only with ErrCorrupt, and that whatever it
// accepts survives AppendMulti unchanged.
func FuzzDecodeMulti(f *testing.F) {
	f.Add(AppendMulti(nil, multiOps()))
	f.Add(AppendMulti(nil, multiOps()[:1]))
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := DecodeMulti(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeMulti failed with %v, not ErrCorrupt", err)
			}
			return
		}
		again, err := DecodeMulti(AppendMulti(nil, ops))
		if err != nil || len(again) != len(ops) {
			t.Fatalf("round trip of %d ops gave %d, %v", len(ops), len(again), err)
		}
		for i := range ops {
			if !sameOp(again[i], ops[i]) || ops[i].Kind == OpMulti {
				t.Fatalf("round trip of %+v gave %+v", ops[i], again[i])
			}
		}
	})
}
