package zaris

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRESPTime checks TIME against the node's clock, through go-redis.
func TestRESPTime(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 1, nil)
	client := redis.NewClient(&redis.Options{Addr: c.node(0).RESPAddr()})
	defer client.Close()
	before := time.Now().Truncate(time.Microsecond)
	got, err := client.Time(context.Background()).Result()
	after := time.Now()
	if err != nil || got.Before(before) || got.After(after) {
		t.Fatalf("TIME = %v, %v; want between %v and %v", got, err, before, after)
	}
}
