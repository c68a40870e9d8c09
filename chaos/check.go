package chaos

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// LinearizabilityResult is the outcome of checking every key's history against a single register.
type LinearizabilityResult struct {
	Keys          int      // keys checked
	Ops           int      // ops checked, failed ones and unread unknown writes excluded
	Ok            bool     // every key was proven linearizable
	Unknown       bool     // some key's check ran out of time: neither proven nor refuted
	ViolatingKeys []string // keys proven not linearizable, sorted
	// FalseNotFound counts gets that found nothing after an acknowledged put of their key had returned:
	// keys are never deleted, so each denies an acknowledged write, whatever the check's time allowed.
	FalseNotFound int
}

// register is the per-key model state: the last value written, if any.
type register struct {
	set   bool
	value string
}

// regInput is a call on the register: a get, a put of value, or a cas from expected (empty: unset) to value.
type regInput struct {
	kind     OpKind
	value    string
	expected string
}

// regOutput is what the call returned: a get's value, or whether a cas swapped. A put's is ignored.
type regOutput struct {
	outcome Outcome // OK or NotFound for a get; OK, Mismatch or Unknown for a cas
	value   string  // the value a get read
}

// registerModel is the sequential specification of one key: an initially unset register.
var registerModel = porcupine.Model{
	Init:              func() any { return register{} },
	Step:              stepRegister,
	DescribeOperation: describeRegisterOp,
}

// stepRegister applies a call to the register, reporting whether its output is possible.
func stepRegister(state, input, output any) (bool, any) {
	st := state.(register)
	in := input.(regInput)
	out := output.(regOutput)
	written := register{set: true, value: in.value}
	switch in.kind {
	case Put:
		return true, written
	case Cas:
		return stepCas(st, in.expected, written, out.outcome)
	}
	if out.outcome == NotFound {
		return !st.set, st
	}
	return st.set && st.value == out.value, st
}

// stepCas applies a cas from expected to written. An unknown cas swaps where it can and is a no-op
// elsewhere: one that took no effect is placed where it cannot, or last, with nothing after to tell.
func stepCas(st register, expected string, written register, outcome Outcome) (bool, any) {
	holds := st == register{set: expected != "", value: expected}
	switch outcome {
	case OK:
		return holds, written
	case Mismatch:
		return !holds, st
	}
	if holds {
		return true, written
	}
	return true, st
}

// describeRegisterOp renders a call for visualizations.
func describeRegisterOp(input, output any) string {
	in, out := input.(regInput), output.(regOutput)
	switch {
	case in.kind == Put:
		return fmt.Sprintf("put(%q)", in.value)
	case in.kind == Cas:
		return fmt.Sprintf("cas(%s, %q) -> %s", describeExpected(in.expected), in.value, out.outcome)
	case out.outcome == OK:
		return fmt.Sprintf("get() -> %q", out.value)
	}
	return "get() -> not found"
}

// CheckLinearizable checks that each key's history is that of a single register, initially unset. Failed
// ops are left out. Unknown writes may take effect at any time after their call, or never; those whose
// value is never read are left out too, since taking effect after everything else they change nothing.
// Only when a key fails without them are they checked, those that start before a cas mismatch returned,
// as one may explain the mismatch. Keys are
// checked separately so violations can be named, all within timeout (none if timeout <= 0); a key whose
// check runs out of time makes the result Unknown, not a violation.
func CheckLinearizable(ops []Op, timeout time.Duration) LinearizabilityResult {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	return checkUntil(ops, deadline)
}

// checkUntil is CheckLinearizable with an absolute deadline; the zero time means no deadline.
func checkUntil(ops []Op, deadline time.Time) LinearizabilityResult {
	keys, byKey, unread := partitionByKey(ops)
	res := LinearizabilityResult{Keys: len(keys), FalseNotFound: falseNotFounds(ops)}
	for _, k := range keys {
		res.Ops += len(byKey[k])
	}
	for i, r := range checkKeys(keys, byKey, unread, deadline) {
		switch r {
		case porcupine.Illegal:
			res.ViolatingKeys = append(res.ViolatingKeys, keys[i])
		case porcupine.Unknown:
			res.Unknown = true
		}
	}
	res.Ok = !res.Unknown && len(res.ViolatingKeys) == 0
	return res
}

// falseNotFounds counts the gets that found nothing although an acknowledged put of their key had returned
// before they were called.
func falseNotFounds(ops []Op) int {
	firstAck := make(map[string]time.Time)
	for _, op := range ops {
		if t, seen := firstAck[op.Key]; isWrite(op.Kind) && op.Outcome == OK && (!seen || op.End.Before(t)) {
			firstAck[op.Key] = op.End
		}
	}
	n := 0
	for _, op := range ops {
		if t, acked := firstAck[op.Key]; op.Kind == Get && op.Outcome == NotFound && acked && op.Start.After(t) {
			n++
		}
	}
	return n
}

// write is a value on a key.
type write struct{ key, value string }

// isWrite reports whether kind writes a value: a put or a cas.
func isWrite(kind OpKind) bool { return kind == Put || kind == Cas }

// partitionByKey turns the checkable ops into checker operations grouped by key, with sorted keys, and
// apart from them the unread unknown writes that may explain a mismatch.
func partitionByKey(ops []Op) (keys []string, byKey, unread map[string][]porcupine.Operation) {
	base := earliestStart(ops)
	read, mismatchEnd := readValues(ops), lastMismatch(ops)
	byKey, unread = make(map[string][]porcupine.Operation), make(map[string][]porcupine.Operation)
	for _, op := range ops {
		switch {
		case checkable(op, read):
			byKey[op.Key] = append(byKey[op.Key], operation(op, base))
		case isWrite(op.Kind) && op.Outcome == Unknown && op.Start.Before(mismatchEnd[op.Key]):
			unread[op.Key] = append(unread[op.Key], operation(op, base))
		}
	}
	return slices.Sorted(maps.Keys(byKey)), byKey, unread
}

// readValues returns the values that gets returned and that swapped cas found, by key.
func readValues(ops []Op) map[write]bool {
	read := make(map[write]bool)
	for _, op := range ops {
		switch {
		case op.Kind == Get && op.Outcome == OK:
			read[write{op.Key, op.Value}] = true
		case op.Kind == Cas && op.Outcome == OK && op.Expected != "":
			read[write{op.Key, op.Expected}] = true
		}
	}
	return read
}

// lastMismatch returns, by key, when the last cas that found another value returned.
func lastMismatch(ops []Op) map[string]time.Time {
	last := make(map[string]time.Time)
	for _, op := range ops {
		if op.Kind == Cas && op.Outcome == Mismatch && op.End.After(last[op.Key]) {
			last[op.Key] = op.End
		}
	}
	return last
}

// checkable reports whether op constrains the register: failed calls had no effect, and an unknown write
// nobody read can be placed after every other op.
func checkable(op Op, read map[write]bool) bool {
	switch op.Outcome {
	case OK, Mismatch:
		return true
	case NotFound:
		return op.Kind == Get
	case Unknown:
		return isWrite(op.Kind) && read[write{op.Key, op.Value}]
	}
	return false
}

// earliestStart returns the first call time, the origin for relative timestamps.
func earliestStart(ops []Op) time.Time {
	var base time.Time
	for i, op := range ops {
		if i == 0 || op.Start.Before(base) {
			base = op.Start
		}
	}
	return base
}

// operation converts op into a checker operation with nanoseconds since base; an unknown write stays
// pending forever.
func operation(op Op, base time.Time) porcupine.Operation {
	call := int64(op.Start.Sub(base))
	ret := int64(math.MaxInt64)
	if op.Outcome != Unknown {
		ret = max(call, int64(op.End.Sub(base)))
	}
	return porcupine.Operation{
		ClientId: op.Client,
		Input:    regInput{kind: op.Kind, value: op.Value, expected: op.Expected},
		Call:     call,
		Output:   regOutput{outcome: op.Outcome, value: op.Value},
		Return:   ret,
	}
}

// checkKeys checks each key's operations in parallel, one worker per processor.
func checkKeys(keys []string, byKey, unread map[string][]porcupine.Operation, deadline time.Time) []porcupine.CheckResult {
	results := make([]porcupine.CheckResult, len(keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(keys)) {
		wg.Go(func() {
			for i := range next {
				results[i] = checkKey(byKey[keys[i]], unread[keys[i]], deadline)
			}
		})
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

// checkKey checks one key's operations with whatever time is left before deadline, then again with its
// unread unknown writes if it fails without them: a linearization without them is one with them last.
func checkKey(ops, unread []porcupine.Operation, deadline time.Time) porcupine.CheckResult {
	r := checkOps(ops, deadline)
	if r != porcupine.Illegal || len(unread) == 0 {
		return r
	}
	return checkOps(append(slices.Clip(ops), unread...), deadline)
}

// checkOps checks operations with whatever time is left before deadline.
func checkOps(ops []porcupine.Operation, deadline time.Time) porcupine.CheckResult {
	if deadline.IsZero() {
		return porcupine.CheckOperationsTimeout(registerModel, ops, 0)
	}
	left := time.Until(deadline)
	if left <= 0 {
		return porcupine.Unknown
	}
	return porcupine.CheckOperationsTimeout(registerModel, ops, left)
}

// Phantoms returns the gets that read a value no put or cas on that key ever tried to write, whatever the
// write's outcome: such a value can only have been invented.
func Phantoms(ops []Op) []Op {
	written := make(map[write]bool)
	for _, op := range ops {
		if isWrite(op.Kind) {
			written[write{op.Key, op.Value}] = true
		}
	}
	var phantoms []Op
	for _, op := range ops {
		if op.Kind == Get && op.Outcome == OK && !written[write{op.Key, op.Value}] {
			phantoms = append(phantoms, op)
		}
	}
	return phantoms
}
