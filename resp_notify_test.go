package zaris

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// keyEvents counts the keyspace notifications of some channels that each node's subscribers receive.
type keyEvents struct {
	mu     sync.Mutex
	byNode map[string]map[string]int // node's RESP address -> key -> events
	total  int
}

// subscribeEvents subscribes, on every live node of c, to channels and to marker, and counts the
// notifications each node publishes; markers are counted apart.
func subscribeEvents(t *testing.T, c *testCluster, channels ...string) (*keyEvents, map[string]chan string) {
	t.Helper()
	ev := &keyEvents{byNode: map[string]map[string]int{}}
	markers := map[string]chan string{}
	for _, n := range c.live() {
		addr := n.RESPAddr()
		client := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { client.Close() })
		sub := client.Subscribe(context.Background(), append(channels, "marker")...)
		t.Cleanup(func() { sub.Close() })
		if _, err := sub.Receive(context.Background()); err != nil {
			t.Fatal(err)
		}
		ev.byNode[addr] = map[string]int{}
		mk := make(chan string, 16)
		markers[addr] = mk
		go func() {
			for msg := range sub.Channel() {
				if msg.Channel == "marker" {
					mk <- msg.Payload
					continue
				}
				ev.mu.Lock()
				ev.byNode[addr][msg.Payload]++
				ev.total++
				ev.mu.Unlock()
			}
		}()
	}
	return ev, markers
}

func (ev *keyEvents) count() int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.total
}

// TestRESPKeyspaceNotificationsOfExpiries expires keys on a cluster of three nodes, two copies each, and
// counts the expired notifications: one per key, published by its owner only, none by a replica that
// applied the expiry.
func TestRESPKeyspaceNotificationsOfExpiries(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.NotifyKeyspaceEvents = "Ex"
		cfg.ReapInterval = 50 * time.Millisecond
	}))
	ev, markers := subscribeEvents(t, c, "__keyevent@0__:expired")
	client := newClusterClient(t, c, 2)
	ctx := bg(t)
	const keys = 60
	for i := range keys {
		if err := client.Set(ctx, fmt.Sprintf("exp-%d", i), "v", 20*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "every key's expired notification", func() bool { return ev.count() >= keys })
	waitFor(t, 20*time.Second, "every copy of the keys reaped", func() bool {
		for _, n := range c.live() {
			if n.own.keyCount() != 0 {
				return false
			}
		}
		return true
	})
	// A marker published now reaches every subscriber after any notification a replica's reap published.
	if err := client.Publish(ctx, "marker", "end").Err(); err != nil {
		t.Fatal(err)
	}
	for addr, mk := range markers {
		select {
		case <-mk:
		case <-time.After(10 * time.Second):
			t.Fatalf("no marker at %s", addr)
		}
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.total != keys {
		t.Fatalf("%d expired notifications for %d keys", ev.total, keys)
	}
	for i := range keys {
		key := fmt.Sprintf("exp-%d", i)
		owner := c.owner(key).RESPAddr()
		for addr, counts := range ev.byNode {
			if want := map[bool]int{true: 1, false: 0}[addr == owner]; counts[key] != want {
				t.Errorf("%s: %d expired notifications from %s; want %d (its owner is %s)", key, counts[key], addr, want, owner)
			}
		}
	}
}

// TestRESPKeyspaceNotificationsOfEvictions fills a node past its memory bound and counts the evicted
// notifications: as many as the node's evicted_keys.
func TestRESPKeyspaceNotificationsOfEvictions(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 1, func(cfg *Config) {
		cfg.NotifyKeyspaceEvents = "Ee"
		cfg.MaxMemory, cfg.OpLogRetainBytes, cfg.EvictionPolicy = 2<<20, 512<<10, EvictionAllKeysLRU
	})
	ev, markers := subscribeEvents(t, c, "__keyevent@0__:evicted")
	n := c.node(0)
	ctx := bg(t)
	value := make([]byte, 1024)
	for i := range 6000 {
		if err := n.Put(ctx, fmt.Sprintf("ev-%d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	evicted := n.own.store.budget.evicted()
	if evicted == 0 {
		t.Fatal("nothing evicted")
	}
	if _, err := n.Publish(ctx, "marker", []byte("end")); err != nil {
		t.Fatal(err)
	}
	<-markers[n.RESPAddr()]
	if got := ev.count(); uint64(got) != evicted {
		t.Fatalf("%d evicted notifications; the node evicted %d keys", got, evicted)
	}
}
