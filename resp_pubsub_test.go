package zaris

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// TestRESPBlockedClientsSharePushes blocks clients in BLPOP on one list at its owner and pushes to it:
// every element is received by exactly one client, the clients blocked first are served first, and a
// client that hangs up while blocked takes nothing.
func TestRESPBlockedClientsSharePushes(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 3, nil)
	const list, clients, elements = "{queue}jobs", 20, 1000
	addr := c.owner(list).RESPAddr()
	gone := dialRESP(t, addr) // blocks first, then hangs up: it must take nothing
	gone.send(t, "BLPOP", list, "0")
	waitBlocked := func(n int) {
		waitFor(t, 10*time.Second, fmt.Sprintf("%d clients blocked", n), func() bool {
			info := dialRESP(t, addr)
			info.send(t, "INFO", "clients")
			return strings.Contains(readBulk(t, info), fmt.Sprintf("blocked_clients:%d\r\n", n))
		})
	}
	waitBlocked(1)
	gone.conn.Close()
	waitBlocked(0)
	type delivery struct {
		client  int
		element string
	}
	received := make(chan delivery, elements+clients)
	var wg sync.WaitGroup
	for i := range clients {
		r := dialRESP(t, addr)
		wg.Go(func() {
			for {
				r.send(t, "BLPOP", list, "30")
				frame := readFrame(t, r)
				if len(frame) != 2 {
					t.Errorf("client %d: BLPOP answered %q", i, frame)
					return
				}
				received <- delivery{i, frame[1]}
				if frame[1] == "stop" {
					return
				}
			}
		})
		waitBlocked(i + 1)
	}
	pusher := dialRESP(t, addr)
	if got := pusher.do(t, "RPUSH", list, "first"); got != ":1" && got != ":0" {
		t.Fatalf("RPUSH: %s", got)
	}
	for i := range elements - 1 {
		pusher.do(t, "RPUSH", list, strconv.Itoa(i))
	}
	for range clients {
		pusher.do(t, "RPUSH", list, "stop")
	}
	wg.Wait()
	close(received)
	seen := map[string]int{}
	for d := range received {
		seen[d.element]++
		if d.element == "first" && d.client != 0 {
			t.Errorf("the first element went to client %d, not to the one blocked first", d.client)
		}
	}
	if seen["first"] != 1 || seen["stop"] != clients {
		t.Fatalf("received the first element %d times and %d stops of %d", seen["first"], seen["stop"], clients)
	}
	for i := range elements - 1 {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			t.Fatalf("element %d received %d times", i, n)
		}
	}
	if got := pusher.do(t, "LLEN", list); got != ":0" {
		t.Fatalf("LLEN after every element was taken: %s", got)
	}
}

// readBulk reads one bulk string reply whole.
func readBulk(t *testing.T, r *respLine) string {
	t.Helper()
	head := r.line(t)
	n, err := strconv.Atoi(head[1:])
	if err != nil || head[0] != '$' {
		t.Fatalf("not a bulk string: %q", head)
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r.rd, buf); err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}
