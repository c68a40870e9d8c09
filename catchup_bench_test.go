package zaris

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"
)

// The data a replica of BenchmarkCatchUp misses per iteration: catchUpBenchKeys ops of catchUpBenchValue
// bytes each, one per key, so that a snapshot of the segment carries the same keys and values as the ops.
const (
	catchUpBenchKeys  = 20000
	catchUpBenchValue = 1024
)

// BenchmarkCatchUp compares, in one run, how fast a replica catches up on ops it missed: read from the
// owner's durable log, or sent as a snapshot of the same data once that log was trimmed past the replica.
// Each iteration holds the owner's link to the replica of one partition (3 nodes, RF 2, Async, a data dir
// each, 16 ops per segment in memory), overwrites catchUpBenchKeys keys of one segment, releases the link
// and times it until the replica has confirmed holding the whole segment, which must then match the
// owner's. The figures are the ops and the payload (keys and values) caught up per second; ns/op also
// covers the writes.
func BenchmarkCatchUp(b *testing.B) {
	for _, tc := range []struct {
		name string
		trim bool // the durable log no longer reaches the replica: a snapshot
	}{{"disk-log", false}, {"snapshot", true}} {
		b.Run(tc.name, func(b *testing.B) {
			base := b.TempDir()
			c := startSocketCluster(b, 3, func(cfg *Config) {
				cfg.Dialer = nil
				cfg.ReplicationFactor = 2
				cfg.WriteConcern = Async
				cfg.DataDir = filepath.Join(base, cfg.Name)
				cfg.OpLogRetain = 16
				cfg.DiskRetainBytes = 1 << 30
			})
			_, p, nodes := c.awayFromLeader()
			owner, replica := nodes[0], nodes[1]
			tag := "{bench}"
			for i := 0; owner.layout.KeyPartition(tag) != p; i++ {
				tag = fmt.Sprintf("{bench%d}", i)
			}
			seg := owner.layout.KeySegment(tag)
			link := owner.own.repl.link(replica.id)
			var took time.Duration
			var payload int
			before := owner.ReplicationStats()
			for i := 0; b.Loop(); i++ {
				holdLink(link, p)
				value := bytes.Repeat([]byte{byte('a' + i%26)}, catchUpBenchValue)
				for k := range catchUpBenchKeys {
					key := fmt.Sprintf("%s:%d", tag, k)
					if err := owner.Put(context.Background(), key, value); err != nil {
						b.Fatal(err)
					}
					payload += len(key) + len(value)
				}
				if tc.trim {
					owner.own.repl.checkpointToDisk(seg)
					if err := owner.own.disk.flushedTo(context.Background(), owner.own.disk.mark()); err != nil {
						b.Fatal(err)
					}
				}
				start := time.Now()
				releaseLink(link, p)
				for !acked(link, seg, owner.own.store.revision(seg)) {
					if time.Since(start) > time.Minute {
						b.Fatal("the replica did not catch up within a minute")
					}
					time.Sleep(time.Millisecond)
				}
				took += time.Since(start)
				if replica.SegmentDigest(seg) != owner.SegmentDigest(seg) {
					b.Fatal("the replica acknowledged the segment but its copy differs")
				}
			}
			after := owner.ReplicationStats()
			b.ReportMetric(float64(b.N*catchUpBenchKeys)/took.Seconds(), "ops/s")
			b.ReportMetric(float64(payload)/took.Seconds()/(1<<20), "MiB/s")
			b.ReportMetric(float64(after.OpsFromDisk-before.OpsFromDisk)/float64(b.N), "disk-ops/op")
			b.ReportMetric(float64(after.SnapshotsSent-before.SnapshotsSent)/float64(b.N), "snapshots/op")
			c.stopAll()
		})
	}
}

// acked reports whether the replica has confirmed, to link's owner, holding segment seg up to revision.
func acked(l *replicaLink, seg int, revision uint64) bool {
	l.lock()
	defer l.unlock()
	rev, ok := l.acked[seg]
	return ok && rev >= revision
}

// holdLink makes link send nothing of partition p, as if the replica had fenced this node off: nothing
// fails meanwhile, so no retry backoff delays the catch-up once releaseLink lets it go.
func holdLink(l *replicaLink, p int) {
	l.lock()
	l.fenced[p] = math.MaxUint64
	l.unlock()
}

// releaseLink undoes holdLink and wakes the link.
func releaseLink(l *replicaLink, p int) {
	l.lock()
	delete(l.fenced, p)
	l.unlock()
	signal(l.wake)
}
