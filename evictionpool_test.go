package zaris

import (
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/clocktest"
)

// TestEvictionPoolKeepsTheBest checks the pool: each take returns the highest ranked of the pool and the
// sample, keeps the next best up to its size, replaces a candidate sampled again, and keeps no long key.
func TestEvictionPoolKeepsTheBest(t *testing.T) {
	pool := newEvictionPool(2)
	byIdle := rankerOf(EvictionAllKeysLRU)
	sec := int64(time.Second)
	now := 1000 * sec
	cand := func(key string, lastUsed int64) evictionCandidate {
		return evictionCandidate{key: key, word: uint64(lruStamp(lastUsed*sec)) << versionBits}
	}
	var sample []evictionCandidate
	for i := range evictionPoolSize + 4 {
		sample = append(sample, cand(string(rune('a'+i)), int64(900+i))) // "a" idle longest
	}
	sample = append(sample, cand(strings.Repeat("x", evictionPoolKeyMax+1), 100))
	got, ok := pool.take(0, sample, byIdle, now)
	if !ok || len(got.key) != evictionPoolKeyMax+1 {
		t.Fatalf("first take: %q, %v; want the long key, idle longest", got.key, ok)
	}
	if n := len(pool.parts[0].candidates); n != evictionPoolSize {
		t.Fatalf("the pool keeps %d candidates, want %d", n, evictionPoolSize)
	}
	if got, _ := pool.take(0, nil, byIdle, now); got.key != "a" {
		t.Fatalf("second take: %q, want a", got.key)
	}
	// "b", used since, is sampled again: it drops to the bottom.
	if got, _ := pool.take(0, []evictionCandidate{cand("b", 999)}, byIdle, now); got.key != "c" {
		t.Fatalf("third take: %q, want c", got.key)
	}
	if _, ok := pool.take(1, nil, byIdle, now); ok {
		t.Fatal("an empty partition's pool gave a candidate")
	}
	for _, c := range pool.parts[0].candidates {
		if c.key == "b" && c.access() != lruStamp(999*sec) {
			t.Fatalf("b kept its old stamp %d", c.access())
		}
	}
	pool.clear()
	if _, ok := pool.take(0, nil, byIdle, now); ok {
		t.Fatal("a cleared pool gave a candidate")
	}
}

// TestEvictSkipsAChangedEntry checks that evict takes a sampled key only while its entry is the one
// sampled: not once it was overwritten, nor once it was read under an access-tracking policy.
func TestEvictSkipsAChangedEntry(t *testing.T) {
	clock := clocktest.New(time.Unix(1_000_000, 0))
	s := newStore(1, clock)
	cfg := DefaultConfig()
	cfg.EvictionPolicy = EvictionAllKeysLRU
	s.budget = newMemoryBudget(&cfg, Layout{Segments: 1, Partitions: 1}, s)
	s.put(0, "k", []byte("v"), forTTL(0))
	sampled := func() uint64 {
		var c evictionCandidate
		s.sampleKey(0, evictionSample{intn: func(int) int { return 0 }, want: 1, offer: func(o evictionCandidate) { c = o }})
		return c.word
	}
	word := sampled()
	s.put(0, "k", []byte("w"), forTTL(0))
	if _, ok := s.evict(0, "k", word); ok {
		t.Fatal("evicted a key overwritten since it was sampled")
	}
	word = sampled()
	clock.Advance(2 * time.Second)
	s.get(0, "k")
	if _, ok := s.evict(0, "k", word); ok {
		t.Fatal("evicted a key read since it was sampled")
	}
	if _, ok := s.evict(0, "k", sampled()); !ok {
		t.Fatal("did not evict a key unchanged since it was sampled")
	}
}
