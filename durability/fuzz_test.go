package durability

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeOp checks that DecodeOp never panics, fails only with ErrCorrupt, returns a suffix of its
// input, and that whatever it accepts survives AppendOp and DecodeOp unchanged.
func FuzzDecodeOp(f *testing.F) {
	// Small seeds only: the fuzzer minimizes every new input it finds, which is slow on large ones.
	for _, op := range codecOps() {
		if len(op.Value) < 1024 {
			f.Add(AppendOp(nil, &op))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		op, rest, err := DecodeOp(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeOp failed with %v, not ErrCorrupt", err)
			}
			return
		}
		if len(rest) >= len(b) || !bytes.Equal(b[len(b)-len(rest):], rest) {
			t.Fatalf("rest is not a proper suffix of the input")
		}
		again, rest, err := DecodeOp(AppendOp(nil, &op))
		if err != nil || len(rest) != 0 || !sameOp(again, op) {
			t.Fatalf("round trip of %+v gave %+v, %d bytes left, %v", op, again, len(rest), err)
		}
		if (op.Kind == OpPut) != (op.Value != nil) {
			t.Fatalf("a %v decoded with value %v", op.Kind, op.Value)
		}
	})
}

// FuzzDecodeSnapshot checks the same of DecodeSnapshot, which must consume its whole input.
func FuzzDecodeSnapshot(f *testing.F) {
	for _, s := range []Snapshot{{}, testSnapshot(1, 2, 3)} {
		f.Add(AppendSnapshot(nil, &s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSnapshot(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeSnapshot failed with %v, not ErrCorrupt", err)
			}
			return
		}
		again, err := DecodeSnapshot(AppendSnapshot(nil, &s))
		if err != nil || !sameSnapshot(again, s) {
			t.Fatalf("round trip of %+v gave %+v, %v", s, again, err)
		}
	})
}
