package zaris

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRESPReadOnlyClientsReadReplicas drives three nodes, two copies of each partition, with go-redis's
// ClusterClient in ReadOnly mode: CLUSTER SLOTS names each range's in-sync replica, the client reads
// there, and each read returns the value written just before it (an acknowledged write is on every
// in-sync replica). Counted: the hits each node served equal the keys it replicates, none its own.
func TestRESPReadOnlyClientsReadReplicas(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 3, replicated(2))
	c.waitStable(10 * time.Second)
	ctx := bg(t)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.node(0).RESPAddr()}, ReadOnly: true, MaxRedirects: 8})
	t.Cleanup(func() { client.Close() })

	slots, err := client.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slots {
		if len(s.Nodes) != 2 || s.Nodes[0].ID == s.Nodes[1].ID {
			t.Fatalf("CLUSTER SLOTS range %d-%d names %v: want its owner and its one replica", s.Start, s.End, s.Nodes)
		}
	}
	m := c.node(0).ClusterMap()
	layout := m.Layout()
	want := map[NodeID]int{}
	const keys = 200
	for i := range keys {
		key := "ro:" + strconv.Itoa(i)
		st := m.Runtime[layout.KeyPartition(key)]
		for _, id := range st.InSync {
			if id != st.Owner {
				want[id]++
			}
		}
	}
	before := keyspaceHits(t, c)
	for i := range keys {
		key, value := "ro:"+strconv.Itoa(i), "v"+strconv.Itoa(i)
		if err := client.Set(ctx, key, value, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		if got, err := client.Get(ctx, key).Result(); err != nil || got != value {
			t.Fatalf("GET %s just after its SET = %q, %v; want %q", key, got, err, value)
		}
	}
	after := keyspaceHits(t, c)
	for _, n := range c.live() {
		if got := after[n.Name()] - before[n.Name()]; got != want[n.Name()] {
			t.Errorf("node %s served %d hits, want %d: the keys it replicates (map %d)", n.Name(), got, want[n.Name()], m.Version)
		}
	}
}

// keyspaceHits reads INFO's keyspace_hits of every live node.
func keyspaceHits(t *testing.T, c *testCluster) map[NodeID]int {
	t.Helper()
	hits := map[NodeID]int{}
	for _, n := range c.live() {
		rc := redis.NewClient(&redis.Options{Addr: n.RESPAddr()})
		info, err := rc.Info(bg(t), "stats").Result()
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "keyspace_hits:"); ok {
				hits[n.Name()], _ = strconv.Atoi(v)
			}
		}
		if _, ok := hits[n.Name()]; !ok {
			t.Fatalf("INFO stats of %s has no keyspace_hits", n.Name())
		}
	}
	return hits
}
