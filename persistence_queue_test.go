package zaris

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zaris-go/zaris/durability"
)

// gatedStore holds every Append until its gate opens, and records the bytes of each batch.
type gatedStore struct {
	durability.Store
	gate    chan struct{}
	mu      sync.Mutex
	batches []int64
}

func (s *gatedStore) Append(ops []durability.Op) error {
	var size int64
	for i := range ops {
		size += int64(opBytes(&ops[i]))
	}
	s.mu.Lock()
	s.batches = append(s.batches, size)
	s.mu.Unlock()
	<-s.gate
	return s.Store.Append(ops)
}

// TestDiskQueueIsBoundedInBytes holds the disk writer while a writer keeps queueing ops: the queue stops
// taking ops once it holds DiskQueueBytes, so no batch the disk receives is larger, and every op still
// reaches the disk in order.
func TestDiskQueueIsBoundedInBytes(t *testing.T) {
	const limit, ops = 1000, 10
	store := &gatedStore{Store: durability.NewMemory(), gate: make(chan struct{})}
	life, end := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	d := newDiskLog(store, diskLogConfig{cfg: &Config{DiskQueueBytes: limit}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		life: life, wg: &wg}, true)
	wg.Add(1)
	go d.run()
	defer func() { end(); wg.Wait() }()

	item := func(i int) diskItem {
		return diskItem{op: durability.Op{Kind: durability.OpPut, Segment: 0, Revision: uint64(i), Key: fmt.Sprintf("k%02d", i), Value: []byte(strings.Repeat("v", 300))}}
	}
	first := item(1)
	size := first.size()
	produced, last := make(chan struct{}), uint64(0)
	go func() {
		defer close(produced)
		for i := 1; i <= ops; i++ {
			last = d.enqueue(item(i))
		}
	}()
	// Open the gate once the queue is full (a bounded queue) or every op is queued (an unbounded one).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		d.mu.Lock()
		full := d.bytes+size > limit
		d.mu.Unlock()
		select {
		case <-produced:
			full = true
		default:
		}
		if full || time.Now().After(deadline) {
			break
		}
	}
	close(store.gate)
	<-produced
	if err := d.flushedTo(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	for i, b := range store.batches {
		if b > limit {
			t.Fatalf("batch %d of %v holds %d bytes, over DiskQueueBytes %d", i, store.batches, b, limit)
		}
	}
	got, err := store.Ops(0, 0, 0)
	if err != nil || len(got) != ops {
		t.Fatalf("disk holds %d ops (err %v), want %d", len(got), err, ops)
	}
	for i, op := range got {
		if op.Revision != uint64(i+1) {
			t.Fatalf("op %d has revision %d: out of order", i, op.Revision)
		}
	}
}
