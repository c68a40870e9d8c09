package zaris

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/clocktest"
)

func TestAccessStamps(t *testing.T) {
	sec := int64(time.Second)
	minute := int64(time.Minute)
	cases := []struct {
		name string
		got  uint64
		want uint64
	}{
		{"lru idle", evictionRank(accessLRU, lruStamp(100*sec), 130*sec), 30},
		{"lru idle across the wrap", evictionRank(accessLRU, lruStamp(65530*sec), 65546*sec), 16},
		{"lru fresh write", evictionRank(accessLRU, written(accessLRU, nil, 7*sec), 7*sec), 0},
		{"lfu new key", uint64(lfuDecayed(written(accessLFU, nil, 0), 0)), lfuInitial},
		{"lfu decays a unit a minute", uint64(lfuDecayed(lfuStamp(9, 10*minute), 13*minute)), 6},
		{"lfu decays to zero, no lower", uint64(lfuDecayed(lfuStamp(9, 10*minute), 40*minute)), 0},
		{"lfu decay across the wrap", uint64(lfuDecayed(lfuStamp(9, 254*minute), 258*minute)), 5},
		{"lfu rank", evictionRank(accessLFU, lfuStamp(200, 0), 0), 55},
		{"lfu counter stays at its ceiling", uint64(lfuIncrement(255)), 255},
		{"lfu below the initial value always counts", uint64(lfuIncrement(2)), 3},
		{"no tracking", uint64(written(accessNone, nil, 99*sec)), 0},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	// The counter grows ever more slowly: a thousand accesses take it far above the initial value and far
	// below its ceiling.
	a := written(accessLFU, nil, 0)
	for range 1000 {
		a = touched(accessLFU, a, 0)
	}
	if c := lfuDecayed(a, 0); c < 10 || c > 40 { // about 20; below 10 has a chance near e^-22
		t.Errorf("a thousand accesses left the LFU counter at %d", c)
	}
}

// TestEntryStampKeepsVersion checks that access stamps never disturb an entry's version.
func TestEntryStampKeepsVersion(t *testing.T) {
	e := newStringEntry("k", []byte("v"), versionMask, 0)
	e.touch(accessLFU, 0)
	e.touch(accessLRU, int64(time.Hour))
	if e.version() != versionMask || e.access() != lruStamp(int64(time.Hour)) {
		t.Fatalf("version %d, access %d after touches", e.version(), e.access())
	}
	e.stamp(42, 0xffff)
	if e.version() != 42 || e.access() != 0xffff {
		t.Fatalf("version %d, access %d after a stamp", e.version(), e.access())
	}
}

// TestEvictionByUse fills one node, makes some keys hot by reading them, then floods it while they stay in
// use: under the LRU and LFU policies the hot keys survive while the flood evicts the cold ones;
// allkeys-random, which ignores use, is the control and must lose hot keys too.
func TestEvictionByUse(t *testing.T) {
	for _, policy := range []string{EvictionAllKeysLRU, EvictionAllKeysLFU, EvictionVolatileLRU, EvictionVolatileLFU, EvictionAllKeysRandom} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			hot, cold := evictByUse(t, policy)
			t.Logf("%s: %.3f of the hot keys and %.3f of the cold ones survive", policy, hot, cold)
			switch {
			case policy == EvictionAllKeysRandom && hot > 0.9:
				t.Fatalf("allkeys-random kept %.3f of the hot keys: the check cannot tell use from chance", hot)
			case policy != EvictionAllKeysRandom && (hot < 0.98 || cold > 0.85):
				t.Fatalf("%s kept %.3f of the hot keys and %.3f of the cold ones", policy, hot, cold)
			}
		})
	}
}

// evictByUse writes 2,000 keys to a node that holds several times as many, reads a quarter of them a few
// times, and writes more until evictions number nine tenths of the unread ones; it returns the fractions of the read (hot) and unread (cold) first keys that survive.
func evictByUse(t *testing.T, policy string) (hot, cold float64) {
	const first, flood, valueSize = 2000, 20000, 512
	clock := clocktest.New(time.Unix(1_000_000, 0))
	c := startCluster(t, 1, func(cfg *Config) {
		cfg.Clock = clock
		cfg.MaxMemory, cfg.OpLogRetainBytes, cfg.EvictionPolicy = 4<<20, 1<<20, policy
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := c.node(0)
	value := make([]byte, valueSize)
	put := func(key string) {
		if err := n.Put(ctx, key, value, WithTTL(24*time.Hour)); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	for i := range first {
		put(fmt.Sprintf("first-%d", i))
	}
	clock.Advance(10 * time.Second)
	passes := 4 // LRU needs one; LFU's counter, as Redis's, rises by one for the first read, then rarely
	if policyAccess(policy) == accessLFU {
		passes = 40
	}
	for range passes {
		for i := 0; i < first; i += 4 {
			if _, err := n.Get(ctx, fmt.Sprintf("first-%d", i)); err != nil {
				t.Fatalf("get before the flood: %v", err)
			}
		}
	}
	clock.Advance(10 * time.Second)
	// Flood until evictions number about as many as the cold keys: the LRU and LFU policies should take
	// nearly all of those, and no hot one.
	// The hot keys stay in use during the flood, and time passes, a second per 200 puts.
	for i := 0; n.own.store.budget.evicted() < first*3/4*9/10; i++ {
		if i == flood {
			t.Fatalf("a flood of %d keys evicted only %d", flood, n.own.store.budget.evicted())
		}
		put(fmt.Sprintf("flood-%d", i))
		if i%2 == 0 {
			if _, err := n.Get(ctx, fmt.Sprintf("first-%d", (i/2)%(first/4)*4)); err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatalf("get during the flood: %v", err)
			}
		}
		if i%200 == 199 {
			clock.Advance(time.Second)
		}
	}
	var hotLeft, coldLeft int
	for i := range first {
		_, err := n.Get(ctx, fmt.Sprintf("first-%d", i))
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			t.Fatal(err)
		case i%4 == 0:
			hotLeft++
		default:
			coldLeft++
		}
	}
	return float64(hotLeft) / float64(first/4), float64(coldLeft) / float64(first-first/4)
}
