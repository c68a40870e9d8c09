package zaris

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestSegment256MiBReachesRestartedReplica fills one segment with 256 MiB (256 values of 1 MiB under one
// hash tag) and restarts its replica with an op log too short to replay: the owner must send the whole
// segment in pieces, and the replica's copy must match the owner's. It logs how long the copy took and the
// process's peak heap meanwhile (all three nodes share the process). It needs ZARIS_LARGE=1.
func TestSegment256MiBReachesRestartedReplica(t *testing.T) {
	if os.Getenv("ZARIS_LARGE") != "1" {
		t.Skip("copies a 256 MiB segment and needs about 1 GiB of heap: set ZARIS_LARGE=1 to run it")
	}
	const values, valueSize = 256, 1 << 20
	c := startSocketCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.OpLogRetain = 4
		cfg.ReplicaAckTimeout = 5 * time.Second // a loaded machine may take a while over a 4 MiB piece
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	tag := hashTagIn(owner.layout, p)
	seg := owner.layout.KeySegment(tag)
	start := time.Now()
	for i := range values {
		if err := owner.Put(ctx, fmt.Sprintf("%s:%d", tag, i), patterned(i, valueSize)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d MiB to one segment in %v", values*valueSize>>20, time.Since(start).Round(time.Millisecond))

	sentBefore := owner.ReplicationStats()
	ri := c.indexOf(replica.id)
	c.kill(ri)
	runtime.GC()
	before := heapInUse()
	peak := sampleHeapPeak(t)
	start = time.Now()
	replica = c.restart(ri)
	joined := time.Since(start)
	// Poll the revision: a digest hashes the whole segment, and polling it would slow the copy down.
	var firstPiece time.Duration
	waitFor(t, 90*time.Second, "the restarted replica to hold the whole segment", func() bool {
		if firstPiece == 0 && owner.ReplicationStats().BytesSent != sentBefore.BytesSent {
			firstPiece = time.Since(start)
		}
		return replica.own.store.revision(seg) == owner.own.store.revision(seg)
	})
	took := time.Since(start)
	if got, want := replica.SegmentDigest(seg), owner.SegmentDigest(seg); got != want || got.Keys != values {
		t.Fatalf("replica's copy %+v, owner's %+v; want equal, with %d keys", got, want, values)
	}
	waitFor(t, 30*time.Second, "the restarted replica back in sync", func() bool {
		return slices.Contains(owner.ClusterMap().Runtime[p].InSync, replica.id)
	})
	t.Logf("restarted replica joined after %v, was sent a first piece after %v, held the segment after %v, was in sync after %v",
		joined.Round(time.Millisecond), firstPiece.Round(time.Millisecond), took.Round(time.Millisecond),
		time.Since(start).Round(time.Millisecond))
	sentAfter := owner.ReplicationStats()
	if sentAfter.SnapshotsSent == sentBefore.SnapshotsSent {
		t.Fatal("the segment reached the replica without a snapshot: the test did not cover the pieces")
	}
	total := float64(values * valueSize)
	highest := peak()
	runtime.GC()
	t.Logf("copied %d MiB to the restarted replica in %v: %.0f MB/s, %d MiB sent; heap in use %d MiB before the copy, "+
		"%d MiB at its peak, %d MiB live after it", values*valueSize>>20, took.Round(time.Millisecond),
		total/took.Seconds()/1e6, (sentAfter.BytesSent-sentBefore.BytesSent)>>20, before>>20, highest>>20, heapInUse()>>20)
}

// patterned is a value of size bytes that differs for each i, so digests tell the values apart.
func patterned(i, size int) []byte {
	v := make([]byte, size)
	for j := range v {
		v[j] = byte(i*31 + j)
	}
	return v
}

// heapInUse returns the bytes in in-use heap spans.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// sampleHeapPeak samples the heap in use every 20 ms until the test ends; the function it returns reads
// the highest sample so far.
func sampleHeapPeak(t *testing.T) func() uint64 {
	var peak atomic.Uint64
	peak.Store(heapInUse())
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if h := heapInUse(); h > peak.Load() {
					peak.Store(h)
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func() uint64 {
		if h := heapInUse(); h > peak.Load() {
			peak.Store(h)
		}
		return peak.Load()
	}
}
