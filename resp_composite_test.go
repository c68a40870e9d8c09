package zaris

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRESPComposedCommandsAreAtomic moves items between two lists (RPOPLPUSH, LMOVE) and members between
// two sets (SMOVE) from several clients while others count both in one EXEC: a command composed of a pop
// and a push, or a removal and an addition, is never seen half done, so every count adds up.
func TestRESPComposedCommandsAreAtomic(t *testing.T) {
	t.Parallel()
	const items, movers, readers, moves = 40, 4, 2, 300
	c := startRESPCluster(t, 1, nil)
	client := redis.NewClient(&redis.Options{Addr: c.node(0).RESPAddr(), PoolSize: movers + readers})
	defer client.Close()
	ctx := context.Background()
	la, lb, sa, sb := "{atom}la", "{atom}lb", "{atom}sa", "{atom}sb"
	for i := range items {
		must(t, client.RPush(ctx, la, fmt.Sprint("item", i)).Err())
		must(t, client.SAdd(ctx, sa, fmt.Sprint("member", i)).Err())
	}
	var wg sync.WaitGroup
	var done atomic.Bool
	var moved, counted atomic.Int64
	errs := make(chan error, movers+readers)
	for w := range movers {
		wg.Go(func() {
			for i := range moves {
				var err error
				from, to := la, lb
				if (w+i)%2 == 1 {
					from, to = lb, la
				}
				switch i % 3 {
				case 0:
					err = client.RPopLPush(ctx, from, to).Err()
				case 1:
					err = client.LMove(ctx, from, to, "LEFT", "RIGHT").Err()
				default:
					src, dst := sa, sb
					if (w+i)%2 == 1 {
						src, dst = sb, sa
					}
					err = client.SMove(ctx, src, dst, fmt.Sprint("member", i%items)).Err()
				}
				if err != nil && !errors.Is(err, redis.Nil) {
					errs <- fmt.Errorf("move: %w", err)
					return
				}
				moved.Add(1)
			}
		})
	}
	var readersWG sync.WaitGroup
	for range readers {
		readersWG.Go(func() {
			for !done.Load() {
				cmds, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.LLen(ctx, la)
					p.LLen(ctx, lb)
					p.SCard(ctx, sa)
					p.SCard(ctx, sb)
					return nil
				})
				if err != nil {
					errs <- fmt.Errorf("count: %w", err)
					return
				}
				n := make([]int64, 4)
				for i, cmd := range cmds {
					n[i] = cmd.(*redis.IntCmd).Val()
				}
				if n[0]+n[1] != items || n[2]+n[3] != items {
					errs <- fmt.Errorf("counted lists %d+%d and sets %d+%d; want %d each: a move was seen half done", n[0], n[1], n[2], n[3], items)
					return
				}
				counted.Add(1)
			}
		})
	}
	wg.Wait()
	done.Store(true)
	readersWG.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if moved.Load() != movers*moves || counted.Load() == 0 {
		t.Fatalf("%d moves and %d counts made; want %d moves and some counts", moved.Load(), counted.Load(), movers*moves)
	}
	t.Logf("%d moves, %d counts, every one adding up", moved.Load(), counted.Load())
}
