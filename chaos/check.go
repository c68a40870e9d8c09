package chaos

import (
	"fmt"
	"maps"
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
	UndecidedKeys []string // keys whose check ran out of time, sorted
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

// registerModel is the sequential specification of one key: an initially unset register. It is
// nondeterministic because a write whose outcome is unknown may have taken effect or not.
var registerModel = (&porcupine.NondeterministicModel{
	Init:              func() []any { return []any{register{}} },
	Step:              stepRegister,
	DescribeOperation: describeRegisterOp,
}).ToModel()

// stepRegister returns the states the register may be in after a call with that output, none when the
// output is impossible.
func stepRegister(state, input, output any) []any {
	st := state.(register)
	in := input.(regInput)
	out := output.(regOutput)
	written := register{set: true, value: in.value}
	switch {
	case in.kind == Put && out.outcome == Unknown:
		return []any{written, st}
	case in.kind == Put:
		return []any{written}
	case in.kind == Cas:
		return stepCas(st, in.expected, written, out.outcome)
	case out.outcome == NotFound && !st.set, out.outcome == OK && st.set && st.value == out.value:
		return []any{st}
	}
	return nil
}

// stepCas applies a cas from expected to written. An unknown one swaps or not where it holds.
func stepCas(st register, expected string, written register, outcome Outcome) []any {
	holds := st == register{set: expected != "", value: expected}
	switch {
	case !holds && outcome != OK:
		return []any{st}
	case holds && outcome == OK:
		return []any{written}
	case holds && outcome == Unknown:
		return []any{written, st}
	}
	return nil
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
// ops are left out. An unknown write may take effect once after its call, or never. If its value was
// read, it took effect before the last read of it returned. If not, it matters only as the cause of a cas
// mismatch, and only as many of them are checked as the key has mismatches (explainers). Keys are
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
	keys, byKey := partitionByKey(ops)
	res := LinearizabilityResult{Keys: len(keys), FalseNotFound: falseNotFounds(ops)}
	for _, k := range keys {
		res.Ops += len(byKey[k])
	}
	for i, r := range checkKeys(keys, byKey, deadline) {
		switch r {
		case porcupine.Illegal:
			res.ViolatingKeys = append(res.ViolatingKeys, keys[i])
		case porcupine.Unknown:
			res.Unknown = true
			res.UndecidedKeys = append(res.UndecidedKeys, keys[i])
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

// partitionByKey turns the checkable ops into checker operations grouped by key, with sorted keys.
func partitionByKey(ops []Op) (keys []string, byKey map[string][]porcupine.Operation) {
	base := earliestStart(ops)
	lastRead, mismatched := lastReads(ops), casMismatches(ops)
	byKey = make(map[string][]porcupine.Operation)
	add := func(op Op, end time.Time) { byKey[op.Key] = append(byKey[op.Key], operation(op, end, base)) }
	unseen := make(map[string][]Op)
	for _, op := range ops {
		end, read := lastRead[write{op.Key, op.Value}]
		switch {
		case checkable(op):
			add(op, op.End)
		case op.Outcome != Unknown || !isWrite(op.Kind):
		case read:
			add(op, end) // it took effect before its value was read
		case op.Start.Before(mismatched[op.Key].last):
			unseen[op.Key] = append(unseen[op.Key], op)
		}
	}
	for key, writes := range unseen {
		m := mismatched[key]
		for _, op := range explainers(writes, m.count) {
			add(op, m.last)
		}
	}
	return slices.Sorted(maps.Keys(byKey)), byKey
}

// explainers returns the unknown writes of one key whose values nobody read that the check needs: as many
// as the key has cas mismatches, the earliest called. Taking effect, such a write leaves a value nobody
// saw, which only a cas mismatch can witness before another write replaces it. So a linearization needs
// at most one per mismatch, they are interchangeable, and the earliest called can stand wherever any could.
// After the key's last mismatch they change nothing seen, hence the bound on when they take effect.
func explainers(writes []Op, mismatches int) []Op {
	slices.SortFunc(writes, func(a, b Op) int { return a.Start.Compare(b.Start) })
	return writes[:min(len(writes), mismatches)]
}

// mismatches counts a key's cas mismatches and notes when the last one returned.
type mismatches struct {
	count int
	last  time.Time
}

// casMismatches returns the cas mismatches of each key.
func casMismatches(ops []Op) map[string]mismatches {
	byKey := make(map[string]mismatches)
	for _, op := range ops {
		if op.Kind == Cas && op.Outcome == Mismatch {
			m := byKey[op.Key]
			m.count++
			if op.End.After(m.last) {
				m.last = op.End
			}
			byKey[op.Key] = m
		}
	}
	return byKey
}

// lastReads returns, by value, when the last get that returned it or swapped cas that found it returned.
func lastReads(ops []Op) map[write]time.Time {
	last := make(map[write]time.Time)
	for _, op := range ops {
		var w write
		switch {
		case op.Kind == Get && op.Outcome == OK:
			w = write{op.Key, op.Value}
		case op.Kind == Cas && op.Outcome == OK && op.Expected != "":
			w = write{op.Key, op.Expected}
		default:
			continue
		}
		if op.End.After(last[w]) {
			last[w] = op.End
		}
	}
	return last
}

// checkable reports whether an op with a known outcome constrains the register: failed calls had no
// effect.
func checkable(op Op) bool {
	switch op.Outcome {
	case OK, Mismatch:
		return true
	case NotFound:
		return op.Kind == Get
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

// operation converts op, returned at end, into a checker operation with nanoseconds since base.
func operation(op Op, end, base time.Time) porcupine.Operation {
	call := int64(op.Start.Sub(base))
	ret := max(call, int64(end.Sub(base)))
	return porcupine.Operation{
		ClientId: op.Client,
		Input:    regInput{kind: op.Kind, value: op.Value, expected: op.Expected},
		Call:     call,
		Output:   regOutput{outcome: op.Outcome, value: op.Value},
		Return:   ret,
	}
}

// checkKeys checks each key's operations in parallel, one worker per processor.
func checkKeys(keys []string, byKey map[string][]porcupine.Operation, deadline time.Time) []porcupine.CheckResult {
	results := make([]porcupine.CheckResult, len(keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(keys)) {
		wg.Go(func() {
			for i := range next {
				results[i] = checkKey(byKey[keys[i]], deadline)
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

// checkKey checks one key's operations with whatever time is left before deadline.
func checkKey(ops []porcupine.Operation, deadline time.Time) porcupine.CheckResult {
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
