package chaos

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// op builds an op on key spanning [from, to] milliseconds after t0.
func op(client int, kind OpKind, key, value string, out Outcome, from, to int) Op {
	return Op{
		Client: client, Kind: kind, Key: key, Value: value, Outcome: out,
		Start: t0.Add(time.Duration(from) * time.Millisecond),
		End:   t0.Add(time.Duration(to) * time.Millisecond),
	}
}

func TestCheckLinearizableAccepts(t *testing.T) {
	ops := []Op{
		// sequential put then get, and a get before any put
		op(0, Get, "a", "", NotFound, 0, 1),
		op(0, Put, "a", "1", OK, 2, 3),
		op(0, Get, "a", "1", OK, 4, 5),
		// overlapping puts, then a read of either value
		op(0, Put, "b", "x", OK, 10, 20),
		op(1, Put, "b", "y", OK, 12, 18),
		op(2, Get, "b", "x", OK, 21, 22),
		op(3, Get, "b", "x", OK, 23, 24),
		// an unknown put observed later
		op(0, Put, "c", "u", Unknown, 30, 0),
		op(1, Get, "c", "", NotFound, 40, 41),
		op(1, Get, "c", "u", OK, 50, 51),
		// an unknown put never read changes nothing and is left out
		op(3, Put, "b", "z", Unknown, 5, 0),
		// failed ops have no effect and are left out
		op(2, Put, "c", "never", Failed, 52, 53),
		op(2, Get, "c", "garbage", Failed, 54, 55),
	}
	res := CheckLinearizable(ops, 5*time.Second)
	if !res.Ok || res.Unknown || len(res.ViolatingKeys) > 0 {
		t.Fatalf("linearizable history rejected: %+v", res)
	}
	if res.Keys != 3 || res.Ops != 10 {
		t.Fatalf("Keys, Ops = %d, %d, want 3, 10", res.Keys, res.Ops)
	}
}

func TestCheckLinearizableStaleRead(t *testing.T) {
	ops := []Op{
		op(0, Put, "good", "1", OK, 0, 1),
		op(1, Get, "good", "1", OK, 2, 3),
		op(0, Put, "stale", "1", OK, 0, 1),
		op(0, Put, "stale", "2", OK, 2, 3),
		op(1, Get, "stale", "1", OK, 4, 5),
	}
	res := CheckLinearizable(ops, 5*time.Second)
	if res.Ok || !slices.Equal(res.ViolatingKeys, []string{"stale"}) {
		t.Fatalf("stale read not reported on its key: %+v", res)
	}
}

func TestCheckLinearizableUnseenUnknownPut(t *testing.T) {
	ops := []Op{
		op(0, Put, "k", "old", OK, 0, 1),
		op(0, Put, "k", "new", Unknown, 2, 0),
		op(1, Get, "k", "new", OK, 5, 6),
		op(1, Get, "k", "old", OK, 7, 8),
	}
	res := CheckLinearizable(ops, 5*time.Second)
	if res.Ok || !slices.Equal(res.ViolatingKeys, []string{"k"}) {
		t.Fatalf("un-seen unknown put not reported: %+v", res)
	}
}

func TestCheckLinearizablePastDeadlineIsUnknown(t *testing.T) {
	ops := []Op{op(0, Put, "k", "1", OK, 0, 1)}
	res := checkUntil(ops, time.Now().Add(-time.Second))
	if res.Ok || !res.Unknown || len(res.ViolatingKeys) > 0 {
		t.Fatalf("expired check should be unknown, not ok or violated: %+v", res)
	}
}

func TestPhantoms(t *testing.T) {
	ops := []Op{
		op(0, Put, "k", "1", OK, 0, 1),
		op(0, Put, "k", "2", Unknown, 2, 0),
		op(0, Put, "k", "3", Failed, 2, 3),
		op(1, Get, "k", "1", OK, 4, 5),
		op(1, Get, "k", "2", OK, 4, 5),
		op(1, Get, "k", "3", OK, 4, 5),
		op(1, Get, "k", "ghost", OK, 6, 7),
		op(1, Get, "other", "1", OK, 6, 7),
		op(1, Get, "k", "", NotFound, 8, 9),
	}
	got := Phantoms(ops)
	if len(got) != 2 || got[0].Value != "ghost" || got[1].Key != "other" {
		t.Fatalf("Phantoms = %+v, want the ghost read and the read of another key's value", got)
	}
}

func TestFalseNotFound(t *testing.T) {
	ops := []Op{
		op(0, Get, "a", "", NotFound, 0, 1),  // before any put: fine
		op(0, Put, "a", "1", OK, 2, 10),      // acknowledged at 10
		op(1, Get, "a", "", NotFound, 5, 12), // overlaps the put: fine
		op(1, Get, "a", "", NotFound, 11, 12),
		op(0, Put, "b", "1", Unknown, 20, 0), // never acknowledged: not found stays possible
		op(1, Get, "b", "", NotFound, 30, 31),
	}
	res := CheckLinearizable(ops, 5*time.Second)
	if res.FalseNotFound != 1 || res.Ok {
		t.Fatalf("FalseNotFound = %d, Ok = %v; want 1, false", res.FalseNotFound, res.Ok)
	}
}

// casOp builds a cas on key from expected (empty: unset) to value spanning [from, to] milliseconds after t0.
func casOp(client int, key, expected, value string, out Outcome, from, to int) Op {
	o := op(client, Cas, key, value, out, from, to)
	o.Expected = expected
	return o
}

func TestCheckLinearizableCasAccepts(t *testing.T) {
	ops := []Op{
		// swaps from unset and from a value, with a mismatch on a value already replaced
		casOp(0, "a", "", "1", OK, 0, 1),
		op(1, Get, "a", "1", OK, 2, 3),
		casOp(1, "a", "1", "2", OK, 4, 5),
		casOp(2, "a", "1", "3", Mismatch, 6, 7),
		casOp(2, "a", "", "4", Mismatch, 8, 9),
		op(0, Get, "a", "2", OK, 10, 11),
		// two overlapping cas from the same value: one wins, the other mismatches
		op(0, Put, "b", "x", OK, 0, 1),
		casOp(1, "b", "x", "y", Mismatch, 2, 10),
		casOp(2, "b", "x", "z", OK, 3, 9),
		op(0, Get, "b", "z", OK, 11, 12),
		// an unknown cas read later took effect; a failed one did not
		op(0, Put, "c", "p", OK, 0, 1),
		casOp(1, "c", "p", "q", Unknown, 2, 0),
		casOp(2, "c", "p", "never", Failed, 3, 4),
		op(2, Get, "c", "q", OK, 5, 6),
		// an unknown write nobody read explains a later mismatch
		op(0, Put, "d", "m", OK, 0, 1),
		op(1, Put, "d", "n", Unknown, 2, 0),
		casOp(2, "d", "m", "o", Mismatch, 5, 6),
		// an unknown cas that never took effect, though the register held its expected value to the end
		op(0, Put, "e", "f", OK, 0, 1),
		casOp(1, "e", "f", "g", Unknown, 2, 0),
		op(2, Get, "e", "f", OK, 5, 6),
		// an unknown put checked because it started before a mismatch, which it did not take effect for
		op(0, Put, "f", "m", OK, 0, 1),
		op(1, Put, "f", "n", Unknown, 2, 0),
		casOp(2, "f", "x", "o", Mismatch, 3, 4),
		op(2, Get, "f", "m", OK, 7, 8),
	}
	res := CheckLinearizable(ops, 5*time.Second)
	if !res.Ok || res.Unknown || len(res.ViolatingKeys) > 0 {
		t.Fatalf("linearizable cas history rejected: %+v", res)
	}
	if res.Keys != 6 || res.Ops != len(ops)-2 {
		t.Fatalf("Keys, Ops = %d, %d, want 6, %d: the failed cas and the unknown cas with nothing to explain not counted", res.Keys, res.Ops, len(ops)-2)
	}
}

func TestCheckLinearizableCasViolations(t *testing.T) {
	ops := []Op{
		// two cas from the same value both swapped
		op(0, Put, "twice", "x", OK, 0, 1),
		casOp(1, "twice", "x", "y", OK, 2, 3),
		casOp(2, "twice", "x", "z", OK, 4, 5),
		// a cas swapped from a value the register no longer held
		op(0, Put, "stale", "1", OK, 0, 1),
		op(0, Put, "stale", "2", OK, 2, 3),
		casOp(1, "stale", "1", "3", OK, 4, 5),
		// a cas from unset swapped after the key was written
		op(0, Put, "unset", "1", OK, 0, 1),
		casOp(1, "unset", "", "2", OK, 2, 3),
		// a mismatch while the register held the expected value
		op(0, Put, "held", "1", OK, 0, 1),
		casOp(1, "held", "1", "2", Mismatch, 2, 3),
		op(2, Get, "held", "1", OK, 4, 5),
		// a mismatch on an unset key expected unset
		casOp(1, "absent", "", "1", Mismatch, 0, 1),
		// a cas answered mismatch, yet its value is read afterwards, with unknown writes that might
		// explain the mismatch but not the read
		op(0, Put, "retried", "1", OK, 0, 1),
		op(2, Put, "retried", "u1", Unknown, 1, 0),
		op(3, Put, "retried", "u2", Unknown, 1, 0),
		casOp(1, "retried", "1", "2", Mismatch, 2, 3),
		op(0, Get, "retried", "2", OK, 4, 5),
	}
	res := CheckLinearizable(ops, 5*time.Second)
	want := []string{"absent", "held", "retried", "stale", "twice", "unset"}
	if res.Ok || !slices.Equal(res.ViolatingKeys, want) {
		t.Fatalf("ViolatingKeys = %v, want %v: %+v", res.ViolatingKeys, want, res)
	}
}

func TestCasCountsAsWrite(t *testing.T) {
	ops := []Op{
		casOp(0, "k", "", "1", OK, 0, 1),
		casOp(0, "k", "1", "2", Unknown, 2, 0),
		op(1, Get, "k", "", NotFound, 5, 6),
		op(1, Get, "k", "2", OK, 7, 8),
		op(1, Get, "k", "ghost", OK, 9, 10),
	}
	res := CheckLinearizable(ops, 5*time.Second)
	if res.FalseNotFound != 1 {
		t.Fatalf("FalseNotFound = %d, want 1: an acknowledged cas wrote the key", res.FalseNotFound)
	}
	if p := Phantoms(ops); len(p) != 1 || p[0].Value != "ghost" {
		t.Fatalf("Phantoms = %+v, want only the ghost read: values a cas wrote are not invented", p)
	}
}

// TestUnseenUnknownWritesStayCheap gives a key many unknown writes nobody read before one cas mismatch, as
// a partition leaves behind: the check must still decide, refuting the history when the cas's own value
// is read afterwards and accepting it when the next read follows a later write.
func TestUnseenUnknownWritesStayCheap(t *testing.T) {
	history := func(after ...Op) []Op {
		ops := []Op{op(0, Put, "k", "1", OK, 0, 1)}
		for i := range 60 {
			ops = append(ops, op(10+i, Put, "k", fmt.Sprintf("lost-%d", i), Unknown, 2+i%7, 0))
		}
		ops = append(ops, op(1, Get, "k", "1", OK, 2, 3), casOp(1, "k", "1", "2", Mismatch, 70, 71))
		return append(append(ops, after...), op(2, Put, "k", "3", OK, 82, 83), op(2, Get, "k", "3", OK, 84, 85))
	}
	res := CheckLinearizable(history(op(2, Get, "k", "2", OK, 80, 81)), 5*time.Second)
	if res.Unknown || !slices.Equal(res.ViolatingKeys, []string{"k"}) {
		t.Fatalf("a mismatched cas's value read back: %+v, want k refuted", res)
	}
	res = CheckLinearizable(history(), 5*time.Second)
	if res.Unknown || !res.Ok || res.Ops != 6 {
		t.Fatalf("a mismatch that an unknown write explains: %+v, want linearizable with one unknown write of 60 checked", res)
	}
}
