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
	Ops           int      // ops checked, failed ones excluded
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

// regInput is a call on the register: a put of value, or a get.
type regInput struct {
	put   bool
	value string
}

// regOutput is what a get returned; it is ignored for puts.
type regOutput struct {
	found bool
	value string
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
	if in.put {
		return true, register{set: true, value: in.value}
	}
	out := output.(regOutput)
	if !out.found {
		return !st.set, st
	}
	return st.set && st.value == out.value, st
}

// describeRegisterOp renders a call for visualizations.
func describeRegisterOp(input, output any) string {
	in := input.(regInput)
	if in.put {
		return fmt.Sprintf("put(%q)", in.value)
	}
	if out := output.(regOutput); out.found {
		return fmt.Sprintf("get() -> %q", out.value)
	}
	return "get() -> not found"
}

// CheckLinearizable checks that each key's history is that of a single register, initially unset. Failed
// ops are left out; unknown puts may take effect at any time after their call, and those whose value is
// never read are left out too, since taking effect after everything else they change nothing. Keys are
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
		if t, seen := firstAck[op.Key]; op.Kind == Put && op.Outcome == OK && (!seen || op.End.Before(t)) {
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

// partitionByKey turns the checkable ops into checker operations grouped by key, with sorted keys.
func partitionByKey(ops []Op) ([]string, map[string][]porcupine.Operation) {
	base := earliestStart(ops)
	read := readValues(ops)
	byKey := make(map[string][]porcupine.Operation)
	for _, op := range ops {
		if checkable(op, read) {
			byKey[op.Key] = append(byKey[op.Key], operation(op, base))
		}
	}
	return slices.Sorted(maps.Keys(byKey)), byKey
}

// readValues returns the values that gets returned, by key.
func readValues(ops []Op) map[write]bool {
	read := make(map[write]bool)
	for _, op := range ops {
		if op.Kind == Get && op.Outcome == OK {
			read[write{op.Key, op.Value}] = true
		}
	}
	return read
}

// checkable reports whether op constrains the register: failed calls had no effect, and an unknown put
// nobody read can be placed after every other op.
func checkable(op Op, read map[write]bool) bool {
	switch op.Kind {
	case Put:
		return op.Outcome == OK || op.Outcome == Unknown && read[write{op.Key, op.Value}]
	case Get:
		return op.Outcome == OK || op.Outcome == NotFound
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

// operation converts op into a checker operation with nanoseconds since base; an unknown put stays
// pending forever.
func operation(op Op, base time.Time) porcupine.Operation {
	call := int64(op.Start.Sub(base))
	ret := int64(math.MaxInt64)
	if op.Outcome != Unknown {
		ret = max(call, int64(op.End.Sub(base)))
	}
	return porcupine.Operation{
		ClientId: op.Client,
		Input:    regInput{put: op.Kind == Put, value: op.Value},
		Call:     call,
		Output:   regOutput{found: op.Outcome == OK, value: op.Value},
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

// Phantoms returns the gets that read a value no put on that key ever tried to write, whatever the put's
// outcome: such a value can only have been invented.
func Phantoms(ops []Op) []Op {
	written := make(map[write]bool)
	for _, op := range ops {
		if op.Kind == Put {
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
