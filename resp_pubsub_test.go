package zaris

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
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

// TestRESPShardMessagesReachOnlyTheSlotsNodes publishes shard messages at a slot's owner and at its
// replica, with subscribers at both and a third node subscribed to the same name as a channel and to
// every pattern: the slot's subscribers receive every message in order, the third node none.
func TestRESPShardMessagesReachOnlyTheSlotsNodes(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 3, replicated(2))
	c.waitStable(20 * time.Second)
	m := c.node(0).ClusterMap()
	const ch = "{shard}news"
	p := m.Layout().KeyPartition(ch)
	owner := c.owner(ch)
	var replica, other *Node
	for _, n := range c.live() {
		switch {
		case n == owner:
		case slices.Contains(m.Assignment[p], n.id):
			replica = n
		default:
			other = n
		}
	}
	if replica == nil || other == nil {
		t.Fatalf("partition %d: assignment %v, owner %s: no replica and third node", p, m.Assignment[p], owner.id)
	}
	subscribe := func(n *Node, args ...string) *respLine {
		r := dialRESP(t, n.RESPAddr())
		r.send(t, args...)
		for range 6 {
			r.line(t)
		}
		return r
	}
	atOwner, atReplica := subscribe(owner, "SSUBSCRIBE", ch), subscribe(replica, "SSUBSCRIBE", ch)
	plain, patterns := subscribe(other, "SUBSCRIBE", ch), subscribe(other, "PSUBSCRIBE", "*")
	if got := dialRESP(t, other.RESPAddr()).do(t, "SSUBSCRIBE", ch); !strings.HasPrefix(got, "-MOVED ") {
		t.Fatalf("SSUBSCRIBE at a node without the slot: %s", got)
	}
	const perPublisher = 200
	for i, n := range []*Node{owner, replica} {
		pub := dialRESP(t, n.RESPAddr())
		for seq := range perPublisher {
			if got := pub.do(t, "SPUBLISH", ch, fmt.Sprintf("%d:%d", i, seq)); got != ":1" {
				t.Fatalf("SPUBLISH at %s: %s", n.id, got)
			}
		}
	}
	dialRESP(t, owner.RESPAddr()).do(t, "PUBLISH", ch, "end") // a channel message, which the third node receives
	for _, sub := range []*respLine{atOwner, atReplica} {
		next := [2]int{}
		for range 2 * perPublisher {
			frame := readFrame(t, sub)
			var from, seq int
			if len(frame) != 3 || frame[0] != "smessage" || frame[1] != ch {
				t.Fatalf("a shard subscriber received %q", frame)
			}
			fmt.Sscanf(frame[2], "%d:%d", &from, &seq)
			if seq != next[from] {
				t.Fatalf("message %q, want %d:%d next", frame[2], from, next[from])
			}
			next[from]++
		}
	}
	if frame := readFrame(t, plain); !slices.Equal(frame, []string{"message", ch, "end"}) {
		t.Fatalf("the channel subscriber at the third node received %q first", frame)
	}
	if frame := readFrame(t, patterns); !slices.Equal(frame, []string{"pmessage", "*", ch, "end"}) {
		t.Fatalf("the pattern subscriber at the third node received %q first", frame)
	}
	// Counted where they arrive: the third node took one message from the owner, and none from the replica.
	other.pubsub.recvMu.Lock()
	defer other.pubsub.recvMu.Unlock()
	fromOwner, fromReplica := other.pubsub.seen[owner.id], other.pubsub.seen[replica.id]
	if fromOwner.seq != 1 || fromReplica.seq != 0 {
		t.Fatalf("the third node took %d messages from the owner and %d from the replica; want 1 and 0", fromOwner.seq, fromReplica.seq)
	}
}

// readFrame reads one array of bulk strings, as a subscriber is sent.
func readFrame(t *testing.T, r *respLine) []string {
	t.Helper()
	head := r.line(t)
	n, err := strconv.Atoi(head[1:])
	if err != nil || head[0] != '*' && head[0] != '>' {
		t.Fatalf("not an array: %q", head)
	}
	out := make([]string, n)
	for i := range out {
		r.line(t) // $len
		out[i] = r.line(t)
	}
	return out
}
