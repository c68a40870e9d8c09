package main

import (
	"math/bits"
	"time"
)

// Latencies are kept in a log-linear histogram: values below 2^subBits nanoseconds exactly, larger
// ones in 2^subBits equal-width buckets per power of two, so every bucket is within about 3% of its
// values and the memory is fixed however many operations a phase runs.
const (
	subBits    = 5
	subBuckets = 1 << subBits
	maxOctave  = 40 // values up to 2^40 ns (about 18 minutes); larger ones land in the last bucket
	numBuckets = (maxOctave - subBits + 1) * subBuckets
)

// histogram counts latencies in fixed buckets; one goroutine records into its own, and they are merged
// after the phase.
type histogram struct {
	counts [numBuckets]uint64
	total  uint64
}

// bucketOf returns the index of the bucket holding v nanoseconds.
func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1
	idx := (shift+1)*subBuckets + int(v>>shift) - subBuckets
	return min(idx, numBuckets-1)
}

// upperBound returns the largest value, in nanoseconds, that bucket idx holds.
func upperBound(idx int) uint64 {
	if idx < 2*subBuckets {
		return uint64(idx)
	}
	shift := idx/subBuckets - 1
	low := uint64(idx%subBuckets+subBuckets) << shift
	return low + (1 << shift) - 1
}

// record adds one latency.
func (h *histogram) record(d time.Duration) {
	h.counts[bucketOf(uint64(max(d, 0)))]++
	h.total++
}

// merge adds every count of o to h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
}

// quantile returns the upper bound of the bucket holding the q-th fraction of the recorded values.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q*float64(h.total) + 0.5)
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(upperBound(i))
		}
	}
	return time.Duration(upperBound(numBuckets - 1))
}

// histRow is one line of a printed histogram.
type histRow struct {
	upper      time.Duration
	count      uint64
	cumulative float64 // percent of all values at or below upper
}

// rows returns the non-empty buckets merged by group consecutive buckets (a power of two dividing
// subBuckets), so a printed histogram has subBuckets/group rows per power of two.
func (h *histogram) rows(group int) []histRow {
	var out []histRow
	var seen uint64
	for start := 0; start < numBuckets; start += group {
		var c uint64
		for _, n := range h.counts[start : start+group] {
			c += n
		}
		if c == 0 {
			continue
		}
		seen += c
		out = append(out, histRow{
			upper:      time.Duration(upperBound(start + group - 1)),
			count:      c,
			cumulative: 100 * float64(seen) / float64(h.total),
		})
	}
	return out
}
