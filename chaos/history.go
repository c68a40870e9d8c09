// Package chaos drives a workload against a cluster while faults are injected, records what clients saw,
// and checks it: no acknowledged write lost, no phantom value, every key's history linearizable.
package chaos

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"
)

// OpKind says which call an Op records. The zero value is invalid so an unset kind is never mistaken for
// a real call.
type OpKind uint8

// The calls a client makes.
const (
	Get OpKind = iota + 1 // a read of one key
	Put                   // a write of one key
	Cas                   // a write of one key conditioned on the value it holds
)

// String returns "get", "put" or "cas", the form used in reports.
func (k OpKind) String() string {
	switch k {
	case Get:
		return "get"
	case Put:
		return "put"
	case Cas:
		return "cas"
	}
	return "OpKind(" + strconv.Itoa(int(k)) + ")"
}

// Outcome is what a client learned from a call. The zero value is invalid so an unset outcome is never
// mistaken for an acknowledgement.
type Outcome uint8

// The outcomes a call can have, as far as the client can tell.
const (
	OK       Outcome = iota + 1 // the write was acknowledged, or the get returned a value
	NotFound                    // the get found nothing
	Failed                      // the call definitely had no effect: a failed get, or a write refused before it was applied
	Unknown                     // the write may or may not have been applied
	Mismatch                    // the cas was not applied: the key held another value than the one expected
)

// String returns the outcome's name, the form used in reports.
func (o Outcome) String() string {
	switch o {
	case OK:
		return "OK"
	case NotFound:
		return "NotFound"
	case Failed:
		return "Failed"
	case Unknown:
		return "Unknown"
	case Mismatch:
		return "Mismatch"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Op is one client call as the client saw it.
type Op struct {
	Client   int
	Kind     OpKind
	Key      string
	Value    string // Put and Cas: the value written; Get with OK: the value read
	Expected string // Cas: the value the key was expected to hold, empty for none (values are never empty)
	Outcome  Outcome
	Start    time.Time
	End      time.Time // ignored for Unknown: the write may take effect at any later time
}

// History collects ops from concurrent clients. The zero value is ready to use.
type History struct {
	mu  sync.Mutex
	ops []Op
}

// Record appends op to the history. It is safe for concurrent use.
func (h *History) Record(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// Ops returns a copy of the recorded ops in the order they were recorded.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// WriteKeyHistory writes every op on key, in call order, one per line, with start and end times relative
// to the history's first call: the evidence to read when a key's history is not linearizable.
func WriteKeyHistory(w io.Writer, ops []Op, key string) error {
	base := earliestStart(ops)
	var mine []Op
	for _, op := range ops {
		if op.Key == key {
			mine = append(mine, op)
		}
	}
	slices.SortFunc(mine, func(a, b Op) int { return a.Start.Compare(b.Start) })
	for _, op := range mine {
		_, err := fmt.Fprintf(w, "%12v %12v client %-3d %s %s %s\n", op.Start.Sub(base), op.End.Sub(base), op.Client, op.Kind, describeArgs(op), op.Outcome)
		if err != nil {
			return err
		}
	}
	return nil
}

// describeArgs renders an op's values: the value, or for a cas the expected value and the new one.
func describeArgs(op Op) string {
	if op.Kind != Cas {
		return strconv.Quote(op.Value)
	}
	return describeExpected(op.Expected) + " -> " + strconv.Quote(op.Value)
}

// describeExpected renders a cas's expected value, "unset" for none.
func describeExpected(v string) string {
	if v == "" {
		return "unset"
	}
	return strconv.Quote(v)
}
