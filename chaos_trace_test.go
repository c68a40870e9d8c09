package zaris

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// mapTrace records, from the maps the nodes apply, every change of a partition's state and of the members'
// processes, each once, with the log index and the time it was first applied: the evidence for a run that
// failed. Every node applies every committed map in log order, so the first node to apply an index records
// it and the others skip it.
type mapTrace struct {
	start time.Time

	mu    sync.Mutex
	last  *ClusterMap
	lines []string
	// lost holds, per partition that lost its owner with no in-sync replica to take over, the nodes the map
	// then kept as the holders of its acknowledged writes, and when, at the latest such loss.
	lost map[int]partitionLoss
}

// partitionLoss is a partition's loss of its owner with no in-sync replica to take over: the nodes the map
// kept as holders of its writes, the processes it knew them as, and when.
type partitionLoss struct {
	holders      []NodeID
	incarnations []uint64
	at           time.Time
	recovered    time.Time // when the partition had an owner again; zero while it has none
}

// before reports whether t came before the partition had an owner again after the loss.
func (l partitionLoss) before(t time.Time) bool { return l.recovered.IsZero() || t.Before(l.recovered) }

// observe is the nodes' beforeApply hook: it records how next differs from the last map recorded.
func (tr *mapTrace) observe(next *ClusterMap) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.last != nil && next.Index <= tr.last.Index {
		return
	}
	prev := tr.last
	tr.last = next
	if prev == nil || len(prev.Runtime) != len(next.Runtime) {
		return
	}
	at := fmt.Sprintf("%7.3fs index %d:", time.Since(tr.start).Seconds(), next.Index)
	for p, st := range next.Runtime {
		if was := prev.Runtime[p]; !samePartitionState(was, st) || !slices.Equal(prev.Assignment[p], next.Assignment[p]) {
			tr.lines = append(tr.lines, fmt.Sprintf("%s partition %d: %s -> %s", at, p, describePartition(prev, p), describePartition(next, p)))
		}
		if loss, lost := tr.lost[p]; lost && loss.recovered.IsZero() && prev.Runtime[p].Owner == "" && st.Owner != "" {
			loss.recovered = time.Now()
			tr.lost[p] = loss
		}
		if prev.Runtime[p].Owner != "" && st.Owner == "" && st.Health == Unavailable {
			if tr.lost == nil {
				tr.lost = map[int]partitionLoss{}
			}
			loss := partitionLoss{holders: slices.Clone(st.InSync), at: time.Now()}
			for _, id := range st.InSync {
				loss.incarnations = append(loss.incarnations, next.Nodes[id].Incarnation)
			}
			tr.lost[p] = loss
		}
	}
	for _, id := range slices.Sorted(maps.Keys(next.Nodes)) {
		if was, ok := prev.Nodes[id]; !ok || was.Incarnation != next.Nodes[id].Incarnation {
			tr.lines = append(tr.lines, fmt.Sprintf("%s node %s process %x", at, id, next.Nodes[id].Incarnation))
		}
	}
}

// samePartitionState reports whether two states of a partition are equal.
func samePartitionState(a, b PartitionState) bool {
	return a.Owner == b.Owner && a.Epoch == b.Epoch && a.Health == b.Health && a.Source == b.Source &&
		slices.Equal(a.InSync, b.InSync) && slices.Equal(a.Target, b.Target) && slices.Equal(a.From, b.From)
}

// describePartition renders partition p's state in m on one line.
func describePartition(m *ClusterMap, p int) string {
	st := m.Runtime[p]
	s := fmt.Sprintf("{owner %s epoch %d %s in-sync %v assigned %v", st.Owner, st.Epoch, st.Health, st.InSync, m.Assignment[p])
	if st.Target != nil {
		s += fmt.Sprintf(" target %v from %v", st.Target, st.From)
	}
	if st.Source != "" {
		s += " source " + string(st.Source)
	}
	return s + "}"
}

// lastLoss returns partition p's latest loss of its owner with no in-sync replica to take over, and false
// when it never lost one.
func (tr *mapTrace) lastLoss(p int) (partitionLoss, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	l, ok := tr.lost[p]
	return l, ok
}

// begin makes the times recorded from now on relative to start, the nemesis's first step.
func (tr *mapTrace) begin(start time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.start = start
}

// dump writes the trace to a file in ZARIS_CHAOS_DUMP, when set, and returns a note naming it.
func (tr *mapTrace) dump(t *testing.T) []string {
	dir := os.Getenv("ZARIS_CHAOS_DUMP")
	if dir == "" {
		return nil
	}
	tr.mu.Lock()
	text := strings.Join(tr.lines, "\n") + "\n"
	tr.mu.Unlock()
	path := filepath.Join(dir, "maps.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Errorf("dump map changes: %v", err)
		return nil
	}
	return []string{"every map change written to " + path}
}

// controlLog keeps the control plane's log lines of every node (raft's own, which the nodes log at debug
// level under a component whose name starts with "raft"): how elections and leadership went, for the dump
// of a failed run.
type controlLog struct {
	start time.Time

	mu    sync.Mutex
	lines []string
}

// logger returns node name's logger: it keeps the control plane's lines and drops the others.
func (cl *controlLog) logger(name string) *slog.Logger {
	return slog.New(&controlHandler{log: cl}).With("node", name)
}

// begin makes the times logged from now on relative to start, the nemesis's first step.
func (cl *controlLog) begin(start time.Time) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.start = start
}

// dump writes the lines to a file in ZARIS_CHAOS_DUMP, when set, and returns a note naming it.
func (cl *controlLog) dump(t *testing.T) []string {
	dir := os.Getenv("ZARIS_CHAOS_DUMP")
	if dir == "" {
		return nil
	}
	cl.mu.Lock()
	text := strings.Join(cl.lines, "\n") + "\n"
	cl.mu.Unlock()
	path := filepath.Join(dir, "control.log")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Errorf("dump control-plane log: %v", err)
		return nil
	}
	return []string{"control-plane log written to " + path}
}

// controlHandler is the slog handler behind controlLog.logger.
type controlHandler struct {
	log   *controlLog
	attrs []slog.Attr
}

func (h *controlHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *controlHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := slices.Clone(h.attrs)
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	var node, component string
	for _, a := range attrs {
		switch a.Key {
		case "node":
			node = a.Value.String()
		case "component":
			component = a.Value.String()
		}
	}
	if !strings.HasPrefix(component, "raft") {
		return nil
	}
	h.log.mu.Lock()
	h.log.lines = append(h.log.lines, fmt.Sprintf("%8.3fs %s %s", r.Time.Sub(h.log.start).Seconds(), node, r.Message))
	h.log.mu.Unlock()
	return nil
}

func (h *controlHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &controlHandler{log: h.log, attrs: append(slices.Clone(h.attrs), attrs...)}
}

func (h *controlHandler) WithGroup(string) slog.Handler { return h }
