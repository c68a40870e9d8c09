package zaris

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkBackup backs up a 3-node RF 2 cluster of 200,000 keys of 64 bytes, in one process, and reports
// the backup's throughput.
func BenchmarkBackup(b *testing.B) {
	c := startCluster(b, 3, replicated(2, func(*Config) {}))
	ctx := bg(b)
	const keys = 200_000
	value := make([]byte, 64)
	for first := 0; first < keys; first += 1000 {
		var kvs []KeyValue
		for i := first; i < first+1000; i++ {
			kvs = append(kvs, KeyValue{Key: fmt.Sprintf("key-%d", i), Value: value})
		}
		if _, err := c.node(0).PutMany(ctx, kvs); err != nil {
			b.Fatal(err)
		}
	}
	var bytes int64
	b.ResetTimer()
	for i := range b.N {
		rep, err := c.node(i%3).Backup(ctx, filepath.Join(b.TempDir(), fmt.Sprint(i)))
		if err != nil {
			b.Fatal(err)
		}
		bytes += rep.Bytes
	}
	b.ReportMetric(float64(bytes)/1e6/b.Elapsed().Seconds(), "MB/s")
}
