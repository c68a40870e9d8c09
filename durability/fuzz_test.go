package durability

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"
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
		if op.Kind.deletes() == (op.Value != nil) {
			t.Fatalf("a %v decoded with value %v", op.Kind, op.Value)
		}
	})
}

// FuzzDecodeArgs checks that DecodeArgs never panics, fails only with ErrCorrupt, and that whatever it
// accepts survives AppendArgs unchanged.
func FuzzDecodeArgs(f *testing.F) {
	for _, args := range [][][]byte{nil, {{}}, {{1}, []byte("field"), []byte("value")}} {
		f.Add(AppendArgs(nil, args))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		args, err := DecodeArgs(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeArgs failed with %v, not ErrCorrupt", err)
			}
			return
		}
		again, err := DecodeArgs(AppendArgs(nil, args))
		if err != nil || len(again) != len(args) {
			t.Fatalf("round trip of %q gave %q, %v", args, again, err)
		}
		for i := range args {
			if !bytes.Equal(again[i], args[i]) {
				t.Fatalf("round trip of %q gave %q", args, again)
			}
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

// FuzzRaftLogDecode checks that decodeRaftLog never panics, fails only with ErrCorrupt, leaves the log
// alone when it fails, and that whatever it accepts re-encodes to the very same bytes.
func FuzzRaftLogDecode(f *testing.F) {
	for _, l := range codecRaftLogs() {
		if len(l.Data) < 64 {
			f.Add(appendRaftLog(nil, &l))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l := raft.Log{Index: 77}
		if err := decodeRaftLog(b, &l); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeRaftLog failed with %v, not ErrCorrupt", err)
			}
			if l.Index != 77 {
				t.Fatalf("a failed decode changed the log to %+v", l)
			}
			return
		}
		if again := appendRaftLog(nil, &l); !bytes.Equal(again, b) {
			t.Fatalf("%x decoded to %+v, which encodes as %x", b, l, again)
		}
	})
}
