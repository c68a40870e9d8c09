package resp

import (
	"slices"
	"strings"
	"testing"

	"github.com/zaris-go/zaris/internal/kv"
)

// TestRESPInfoSelection checks the sections each selection of INFO writes, without a redis-server.
func TestRESPInfoSelection(t *testing.T) {
	names := func(args ...string) []string {
		var out []string
		for i, chosen := range selectInfoSections(byteArgs(args)) {
			if chosen {
				out = append(out, infoSections[i].name)
			}
		}
		return out
	}
	defaults := []string{"Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "CPU", "Modules", "Errorstats", "Cluster", "Keyspace"}
	all := []string{"Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "CPU", "Modules", "Commandstats", "Errorstats", "Latencystats", "Cluster", "Keyspace"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, defaults}, {[]string{"default"}, defaults}, {[]string{"DEFAULT"}, defaults},
		{[]string{"all"}, all}, {[]string{"everything"}, all}, {[]string{"default", "all"}, all},
		{[]string{"keyspace", "SERVER"}, []string{"Server", "Keyspace"}}, {[]string{"nosuch"}, nil},
		{[]string{"default", "commandstats"}, slices.Insert(slices.Clone(defaults), 8, "Commandstats")},
	} {
		if got := names(tc.args...); !slices.Equal(got, tc.want) {
			t.Errorf("INFO %s: %v; want %v", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

func byteArgs(args []string) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}

// TestRESPClusterInfoSlots checks how CLUSTER INFO sorts slots: served by an owner gossip sees alive (ok),
// by one it suspects (pfail), not served (fail), or given to no node.
func TestRESPClusterInfoSlots(t *testing.T) {
	const parts, per = 8, kv.NumSlots / 8
	m := &Topology{Version: 1, Nodes: map[kv.NodeID]NodeAddrs{"a": {RESPAddr: "127.0.0.1:7001"},
		"b": {RESPAddr: "127.0.0.1:7002"}, "c": {}}}
	for p := range parts {
		m.Partitions = append(m.Partitions, Partition{First: uint16(p * per), Last: uint16((p+1)*per - 1),
			Owner: "a", Assigned: true})
	}
	m.Partitions[1].Owner = "b"
	m.Partitions[2].Unavailable = true
	m.Partitions[3].Owner = "c" // no RESP endpoint
	m.Partitions[4].Owner = ""  // its owner failed, no replica took over
	m.Partitions[5].Owner, m.Partitions[5].Assigned = "", false
	states := memberStates{"a": MemberAlive, "b": MemberFailed, "c": MemberAlive}
	want := slotCounts{assigned: 7 * per, ok: 3 * per, pfail: per, fail: 3 * per}
	if got := countSlots(m, states); got != want {
		t.Errorf("countSlots = %+v; want %+v", got, want)
	}
	if got := countSlots(&Topology{}, states); got != (slotCounts{}) {
		t.Errorf("countSlots before any map = %+v; want nothing assigned", got)
	}
}
