package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/chaos"
)

// slots is the number of Redis Cluster slots, each written once at the end of a -nemesis replace run.
const slots = 16384

// checkReplaced ends a -nemesis replace run: it waits until the map lists no copy on a replaced server and
// writes through every slot, then notes the replacements, the final map and the control plane's voters.
// It reports whether the waits succeeded.
func (h *harness) checkReplaced(ctx context.Context) bool {
	retired := h.nem.retirements()
	h.notes = append(h.notes, replacementSummary(retired, h.o.nodes))
	ok := h.settle(ctx, h.awaitRetiredGone, "no replaced server holds a copy in the map, %v after the checks began")
	if ok {
		h.notes = append(h.notes, decidedAfterLastKill(retired))
	}
	ok = h.settle(ctx, h.awaitEverySlot, "a write to each of the "+strconv.Itoa(slots)+" slots acknowledged in %v") && ok
	h.notes = append(h.notes, mapSummary(h.lite.ClusterMap(), h.c)...)
	return h.noteVoters() && ok
}

// replacementSummary says how many servers were replaced and how many of the first ones are gone.
func replacementSummary(retired []retirement, founders int) string {
	first := 0
	for _, r := range retired {
		if serverNumber(r.s.name) <= founders {
			first++
		}
	}
	return fmt.Sprintf("replacements: %d; %d of the %d first servers replaced", len(retired), first, founders)
}

// serverNumber returns n of a server named zaris-n, 0 for another name.
func serverNumber(name string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(name, "zaris-"))
	return n
}

// decidedAfterLastKill says what the map proves once no replaced server holds a copy: the control plane
// committed decisions after the last replaced server died, so a quorum of its voters then were live.
func decidedAfterLastKill(retired []retirement) string {
	if len(retired) == 0 || !retired[len(retired)-1].held {
		return "control plane after the last replacement: not shown by the map (no replaced server held a copy)"
	}
	return fmt.Sprintf("control plane after the last replacement: decided (the copies of %s, killed last, moved "+
		"to live servers), so a quorum of its voters were live processes", retired[len(retired)-1].s.name)
}

// awaitRetiredGone waits until the map lists no copy on any replaced server: their partitions failed over
// and were rebalanced to live ones.
func (h *harness) awaitRetiredGone(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	for {
		left := retiredHolders(h.lite.ClusterMap(), h.nem.retirements())
		if len(left) == 0 {
			return time.Since(start), nil
		}
		if !chaos.Sleep(ctx, pollPause) {
			return time.Since(start), fmt.Errorf("replaced servers %v still hold copies in the map after %v: %w", left,
				settleBound, ctx.Err())
		}
	}
}

// retiredHolders returns the replaced servers m still lists a copy on.
func retiredHolders(m *zaris.ClusterMap, retired []retirement) []string {
	var out []string
	for _, r := range retired {
		if holdsCopy(m, zaris.NodeID(r.s.name)) {
			out = append(out, r.s.name)
		}
	}
	return out
}

// awaitEverySlot writes one key in each slot through the lite member, a few at a time, until each is
// acknowledged, and returns how long that took.
func (h *harness) awaitEverySlot(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	keys := make(chan string)
	var mu sync.Mutex
	var failed []error
	var workers sync.WaitGroup
	for range clients {
		workers.Go(func() {
			for key := range keys {
				if err := h.writeUntilAcked(ctx, key); err != nil {
					mu.Lock()
					failed = append(failed, fmt.Errorf("slot %d: %w", zaris.KeySlot(key), err))
					mu.Unlock()
				}
			}
		})
	}
	for _, key := range slotKeys("every-slot") {
		keys <- key
	}
	close(keys)
	workers.Wait()
	if len(failed) > 0 {
		return time.Since(start), fmt.Errorf("%d slots not writable within %v; first: %w", len(failed), settleBound, failed[0])
	}
	return time.Since(start), nil
}

// slotKeys returns one key with the given prefix in each slot, indexed by slot.
func slotKeys(prefix string) []string {
	keys, found := make([]string, slots), 0
	for i := 0; found < slots; i++ {
		key := prefix + "-" + strconv.Itoa(i)
		if slot := zaris.KeySlot(key); keys[slot] == "" {
			keys[slot], found = key, found+1
		}
	}
	return keys
}

// mapSummary describes the final map: its nodes, who owns how many partitions, the partitions' health,
// and any owner or in-sync replica that is not a running server.
func mapSummary(m *zaris.ClusterMap, c *cluster) []string {
	owners, health := map[string]int{}, map[string]int{}
	var dead []string
	for _, st := range m.Runtime {
		owners[string(st.Owner)]++
		health[st.Health.String()]++
		for _, id := range append([]zaris.NodeID{st.Owner}, st.InSync...) {
			if id != "" && !runningServer(c, string(id)) && !slices.Contains(dead, string(id)) {
				dead = append(dead, string(id))
			}
		}
	}
	out := []string{
		fmt.Sprintf("final map: nodes %v", slices.Sorted(maps.Keys(m.Nodes))),
		"final map: owners " + formatTally(owners) + "; health " + formatTally(health),
	}
	if len(dead) > 0 {
		return append(out, fmt.Sprintf("final map: owners or in-sync replicas that are not running servers: %v", dead))
	}
	return append(out, "final map: every owner and in-sync replica is a running server")
}

// formatTally renders counts sorted by name, like "a=2 b=1".
func formatTally(counts map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	return strings.Join(parts, " ")
}

// runningServer reports whether name is a server of c whose process runs.
func runningServer(c *cluster, name string) bool {
	return slices.ContainsFunc(c.list(), func(s *server) bool { return s.name == name && c.running(s) })
}

// serverChangeLine matches the raft leader's log line for a change to the control plane's servers.
var serverChangeLine = regexp.MustCompile(`msg="control-plane server change" .*\bchange=("[^"]*"|\S+) server=("[^"]*"|\S+)`)

// controlChange is one logged change to the control plane's servers: its kind and the server's node name.
type controlChange struct{ kind, node string }

// parseServerChanges returns the server changes logged in r, in order.
func parseServerChanges(r io.Reader) []controlChange {
	var out []controlChange
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if f := serverChangeLine.FindStringSubmatch(sc.Text()); f != nil {
			server := unquote(f[2])
			if i := strings.LastIndexByte(server, '#'); i >= 0 {
				server = server[:i]
			}
			out = append(out, controlChange{kind: unquote(f[1]), node: server})
		}
	}
	return out
}

// unquote strips the quotes of a quoted log value.
func unquote(v string) string {
	if s, err := strconv.Unquote(v); err == nil {
		return s
	}
	return v
}

// finalVoters returns, sorted, the voters after changes: the founders, plus the servers promoted, minus
// the ones removed. It assumes, as under -nemesis replace, that each node name is one process, removed
// at most once and never added back.
func finalVoters(founders []string, changes []controlChange) []string {
	voters := map[string]bool{}
	for _, f := range founders {
		voters[f] = true
	}
	for _, ch := range changes {
		if ch.kind == "promote to voter" {
			voters[ch.node] = true
		}
	}
	for _, ch := range changes {
		if ch.kind == "remove" {
			delete(voters, ch.node)
		}
	}
	return slices.Sorted(maps.Keys(voters))
}

// noteVoters notes the control plane's voters at the end as the leaders' logs tell them (no API shows a
// lite member the raft configuration): the founders, promoted and removed servers. It reports false when
// one of them is not a running server; with logs on stderr (-v) it can tell nothing and reports true.
func (h *harness) noteVoters() bool {
	if h.c.logDir == "" {
		h.notes = append(h.notes, "control-plane voters: not read (server logs on stderr)")
		return true
	}
	var changes []controlChange
	for _, s := range h.c.list() {
		f, err := os.Open(filepath.Join(h.c.logDir, s.name+".log"))
		if err != nil {
			h.notes = append(h.notes, "control-plane voters: "+err.Error())
			return false
		}
		changes = append(changes, parseServerChanges(f)...)
		f.Close()
	}
	voters := finalVoters(founders(h.o.nodes), changes)
	var dead []string
	for _, v := range voters {
		if !runningServer(h.c, v) {
			dead = append(dead, v)
		}
	}
	h.notes = append(h.notes, fmt.Sprintf("control-plane voters at the end, per the leaders' logs: %v; %d removals, %d promotions logged",
		voters, countKind(changes, "remove"), countKind(changes, "promote to voter")))
	if len(dead) > 0 {
		h.notes = append(h.notes, fmt.Sprintf("control-plane voters that are not running servers: %v", dead))
		return false
	}
	h.notes = append(h.notes, "control-plane voters: all live processes")
	return true
}

// founders returns the names of the servers that bootstrap the control plane as voters: the first ones by
// name, up to the servers' default MaxVoters.
func founders(nodes int) []string {
	var names []string
	for i := 1; i <= nodes; i++ {
		names = append(names, "zaris-"+strconv.Itoa(i))
	}
	slices.Sort(names)
	return names[:min(nodes, zaris.DefaultConfig().MaxVoters)]
}

// countKind counts the changes of the given kind.
func countKind(changes []controlChange, kind string) int {
	n := 0
	for _, ch := range changes {
		if ch.kind == kind {
			n++
		}
	}
	return n
}
