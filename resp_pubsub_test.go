package zaris

import (
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestRESPDropsASlowSubscriber subscribes a client that never reads, publishes far more than its buffer
// and the socket hold, and checks that the node drops the client, forgets its subscription, goes on
// serving the publisher, and keeps its heap bounded meanwhile. It runs alone, so that the heap measured
// is this cluster's.
func TestRESPDropsASlowSubscriber(t *testing.T) {
	const buffer = 256 << 10
	c := startRESPCluster(t, 1, func(cfg *Config) { cfg.SubscriberBuffer = buffer })
	addr := c.node(0).RESPAddr()
	slow := dialRESP(t, addr)
	slow.send(t, "SUBSCRIBE", "ch")
	for range 3 {
		slow.line(t) // *3, $9, subscribe: the rest is read at the end
	}
	pub := dialRESP(t, addr)
	payload := strings.Repeat("x", 4096)
	const messages = 16 << 10 // 64 MiB published in all
	var peak uint64
	for i := range messages {
		reply := pub.do(t, "PUBLISH", "ch", payload)
		if reply != ":1" && reply != ":0" {
			t.Fatalf("PUBLISH %d: %s", i, reply)
		}
		if i%1024 == 0 {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	if got := pub.do(t, "PUBSUB", "NUMSUB", "ch"); got != "*2" {
		t.Fatalf("PUBSUB NUMSUB: %s", got)
	}
	pub.line(t)
	pub.line(t)
	if got := pub.line(t); got != ":0" {
		t.Fatalf("the dropped subscriber still counts: NUMSUB %s", got)
	}
	slow.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	read, err := io.Copy(io.Discard, slow.rd)
	if err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("reading what the slow subscriber was sent: %v", err)
	}
	if read >= int64(messages*len(payload)) {
		t.Fatalf("the slow subscriber was sent all %d bytes", read)
	}
	t.Logf("the slow subscriber was sent %d KiB of %d MiB before being dropped; heap in use peaked at %d MiB",
		read>>10, messages*len(payload)>>20, peak>>20)
	if peak > 48<<20 { // the test process holds the whole node: its heap is far below what was published
		t.Fatalf("heap in use peaked at %d MiB while publishing to a subscriber bounded at %d KiB", peak>>20, buffer>>10)
	}
}
