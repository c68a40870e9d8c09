package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestBucketBounds checks that every value lands in a bucket whose bounds hold it, within 1/subBuckets.
func TestBucketBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		v := r.Uint64N(1 << 38)
		idx := bucketOf(v)
		hi := upperBound(idx)
		lo := uint64(0)
		if idx > 0 {
			lo = upperBound(idx-1) + 1
		}
		if v < lo || v > hi {
			t.Fatalf("value %d in bucket %d [%d, %d]", v, idx, lo, hi)
		}
		if float64(hi-lo) > float64(v)/subBuckets+1 {
			t.Fatalf("bucket %d [%d, %d] too wide for %d", idx, lo, hi, v)
		}
	}
}

// TestQuantile checks quantiles of a uniform spread of latencies against their exact values.
func TestQuantile(t *testing.T) {
	var h histogram
	for i := 1; i <= 10_000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		want := q * 10_000 * float64(time.Microsecond)
		got := float64(h.quantile(q))
		if got < want || got > want*1.04 {
			t.Errorf("quantile %v = %v, want about %v", q, time.Duration(got), time.Duration(want))
		}
	}
	rows := h.rows(8)
	if last := rows[len(rows)-1]; last.cumulative != 100 {
		t.Errorf("last row cumulative %v%%, want 100%%", last.cumulative)
	}
}
