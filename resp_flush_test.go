package zaris

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRESPFlushAllEveryNode writes keys of every type across three nodes, refuses FLUSHALL to users not
// allowed every key, then flushes each node: through the Go API every key is gone, and so is every copy,
// replicas' included.
func TestRESPFlushAllEveryNode(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.RESPUsers = []RESPUser{
			{Name: "default", NoPass: true},
			{Name: "app", Passwords: []string{"a"}, Keys: []string{"app:*"}},
			{Name: "reader", Passwords: []string{"r"}, ReadOnly: true},
		}
	}))
	c.waitStable(20 * time.Second)
	ctx := bg(t)
	n := c.node(0)
	const keys = 3000
	for i := range keys {
		key := fmt.Sprintf("k%d", i)
		var err error
		switch i % 3 {
		case 0:
			err = n.Put(ctx, key, []byte("v"))
		case 1:
			_, err = n.HSet(ctx, key, map[string][]byte{"f": []byte("v")})
		default:
			_, err = n.RPush(ctx, key, []byte("v"))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, user := range []string{"app", "reader"} {
		cl := redis.NewClient(&redis.Options{Addr: n.RESPAddr(), Username: user, Password: user[:1]})
		defer cl.Close()
		if err := cl.FlushAll(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Fatalf("FLUSHALL as %s: %v", user, err)
		}
	}
	if exists, err := n.Exists(ctx, "k0"); err != nil || !exists {
		t.Fatalf("after refused flushes: Exists(k0) = %v, %v", exists, err)
	}
	for _, node := range c.live() {
		cl := redis.NewClient(&redis.Options{Addr: node.RESPAddr()})
		defer cl.Close()
		if err := cl.FlushAll(ctx).Err(); err != nil {
			t.Fatalf("FLUSHALL at %s: %v", node.id, err)
		}
	}
	for i := range keys {
		if exists, err := n.Exists(ctx, fmt.Sprintf("k%d", i)); err != nil || exists {
			t.Fatalf("k%d after FLUSHALL on every node: exists %v, %v", i, exists, err)
		}
	}
	waitFor(t, 10*time.Second, "every copy gone", func() bool {
		for _, node := range c.live() {
			if node.own.keyCount() != 0 {
				return false
			}
		}
		return true
	})
}
