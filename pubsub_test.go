package zaris

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/pubsub"
)

// TestPubSubDeliversEveryMessageOnceInOrder publishes from every node of three to subscribers on every
// node, by channel and by pattern, and counts: each subscriber receives each message of its channels once,
// in the order its publisher sent them, and none of another channel. ZARIS_PUBSUB_MESSAGES sets the
// messages each node publishes (default 2000).
func TestPubSubDeliversEveryMessageOnceInOrder(t *testing.T) {
	t.Parallel()
	perNode := 2000
	if n, err := strconv.Atoi(os.Getenv("ZARIS_PUBSUB_MESSAGES")); err == nil && n > 0 {
		perNode = n
	}
	c := startCluster(t, 3, nil)
	c.waitStable(10 * time.Second)
	ctx, cancel := context.WithCancel(bg(t))
	defer cancel()
	type sub struct {
		name string
		ch   <-chan Message
	}
	var subs []sub
	for i := range 3 {
		n := c.node(i)
		byName, err := n.Subscribe(ctx, "news")
		if err != nil {
			t.Fatal(err)
		}
		byPattern, err := n.PSubscribe(ctx, "ne*")
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub{string(n.id) + " channel", byName}, sub{string(n.id) + " pattern", byPattern})
	}
	var publishers sync.WaitGroup
	for i := range 3 {
		n := c.node(i)
		publishers.Go(func() {
			for seq := range perNode {
				if _, err := n.Publish(ctx, "news", []byte(fmt.Sprintf("%d:%d", i, seq))); err != nil {
					t.Error(err)
					return
				}
				if seq%10 == 0 {
					n.Publish(ctx, "other", []byte("x")) // matches no subscription
				}
			}
		})
	}
	var readers sync.WaitGroup
	for _, s := range subs {
		readers.Go(func() {
			next := [3]int{}
			for got := 0; got < 3*perNode; got++ {
				var m Message
				select {
				case m = <-s.ch:
				case <-time.After(30 * time.Second):
					t.Errorf("%s: %d of %d messages, then none for 30s (next expected per publisher %v)", s.name, got, 3*perNode, next)
					return
				}
				if m.Channel != "news" {
					t.Errorf("%s: a message of channel %q", s.name, m.Channel)
					return
				}
				from, seq, _ := strings.Cut(string(m.Payload), ":")
				p, _ := strconv.Atoi(from)
				q, _ := strconv.Atoi(seq)
				if p < 0 || p > 2 || q != next[p] {
					t.Errorf("%s: message %q, want %d:%d next", s.name, m.Payload, p, next[p])
					return
				}
				next[p]++
			}
		})
	}
	publishers.Wait()
	readers.Wait()
	// Nothing more arrives: each message came once.
	n := c.node(0)
	if _, err := n.Publish(ctx, "news", []byte("end")); err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		select {
		case m := <-s.ch:
			if string(m.Payload) != "end" {
				t.Fatalf("%s: %q after every message, want the end marker", s.name, m.Payload)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no end marker", s.name)
		}
	}
}

// TestPubSubEndsASlowSubscriber checks that a subscriber that stops reading is ended at its buffer's
// bound, and that Publish goes on meanwhile.
func TestPubSubEndsASlowSubscriber(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, func(cfg *Config) { cfg.SubscriberBuffer = 16 << 10 })
	c.waitStable(10 * time.Second)
	n := c.node(0)
	slow, err := n.Subscribe(bg(t), "ch")
	if err != nil {
		t.Fatal(err)
	}
	const total = 1000
	payload := make([]byte, 1024)
	for range total {
		if got, err := n.Publish(bg(t), "ch", payload); err != nil || got > 1 {
			t.Fatalf("Publish = %d, %v", got, err)
		}
	}
	received := 0
	for range slow {
		received++
	}
	if received >= total {
		t.Fatalf("the slow subscriber received all %d messages, none dropped at its bound", received)
	}
	if got, _ := n.Publish(bg(t), "ch", payload); got != 0 {
		t.Fatalf("Publish after the subscriber ended reached %d subscribers", got)
	}
}

// TestPubSubRefusesWhatItCannotCarry checks the errors of Publish and Subscribe.
func TestPubSubRefusesWhatItCannotCarry(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, func(cfg *Config) { cfg.MaxValueSize = 1024 })
	n := c.node(0)
	if _, err := n.Publish(bg(t), "ch", make([]byte, 1024)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("Publish of a message over MaxValueSize: %v", err)
	}
	if _, err := n.Subscribe(bg(t)); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("Subscribe to nothing: %v", err)
	}
}

// FuzzPublishBatch feeds the decoder of OpPublish requests arbitrary bytes: it must refuse what is not a
// batch without panicking, and a batch it accepts must encode to bytes it decodes to the same batch.
func FuzzPublishBatch(f *testing.F) {
	f.Add((&publishBatch{From: "a", Incarnation: 7, Seq: 1, Messages: []publishedMessage{
		{channel: "news", payload: []byte("hello")}, {shard: true, channel: "{t}s", payload: nil},
	}}).marshal())
	f.Add((&publishBatch{From: "node-1", Seq: 1 << 40}).marshal())
	f.Add([]byte{})
	f.Add([]byte{1, 'a', 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		var b publishBatch
		if err := b.unmarshal(data); err != nil {
			return
		}
		var again publishBatch
		if err := again.unmarshal(b.marshal()); err != nil || !reflect.DeepEqual(again, b) {
			t.Fatalf("decoded %x as %+v, which encodes to %+v (%v)", data, b, again, err)
		}
	})
}

// TestBrokerDeliversABatchSentAgainOnce checks the receiver's numbering: a batch sent again after a lost
// reply, whole or overlapping, delivers only the messages not delivered yet, and a restarted sender's new
// numbering is taken from its start.
func TestBrokerDeliversABatchSentAgainOnce(t *testing.T) {
	b := newBroker(brokerConfig{self: "r", clusterMap: func() *ClusterMap { return &ClusterMap{} }})
	s := &goSubscriber{backlog: pubsub.Backlog{Limit: pubsub.Limit{Hard: 1 << 20}}, clock: systemClock{}, wake: make(chan struct{}, 1)}
	b.hub.Subscribe(s, 0, "ch")
	batch := func(inc, seq uint64, payloads ...string) []byte {
		out := publishBatch{From: "a", Incarnation: inc, Seq: seq}
		for _, p := range payloads {
			out.Messages = append(out.Messages, publishedMessage{channel: "ch", payload: []byte(p)})
		}
		return out.marshal()
	}
	for _, req := range [][]byte{
		batch(1, 1, "a", "b"), batch(1, 1, "a", "b"), batch(1, 2, "b", "c"), batch(1, 4, "d"), batch(1, 3, "c"),
		batch(2, 1, "e"),
	} {
		if _, err := b.serve(req); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, m := range s.queue {
		got = append(got, string(m.Payload))
	}
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
	if _, err := b.serve([]byte{9, 9, 9}); err == nil {
		t.Fatal("a malformed batch was taken")
	}
}

// TestSubscriberEndedOverItsSoftBoundTooLong holds a Go subscriber more than its soft bound behind (its
// first message taken, not received) and ends it once it has stayed there longer than the soft time, as
// Redis's soft pubsub limit does; one that catches up within the time receives every message.
func TestSubscriberEndedOverItsSoftBoundTooLong(t *testing.T) {
	limit := pubsub.Limit{Hard: 1 << 20, Soft: 4 << 10, SoftFor: time.Minute}
	for _, tc := range []struct {
		behind time.Duration
		ended  bool
	}{{behind: time.Minute, ended: false}, {behind: time.Minute + time.Millisecond, ended: true}} {
		t.Run(tc.behind.String(), func(t *testing.T) {
			clk := clocktest.New(time.Unix(1_700_000_000, 0))
			s := &goSubscriber{backlog: pubsub.Backlog{Limit: limit}, clock: clk, wake: make(chan struct{}, 1)}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := make(chan Message)
			go func() {
				defer close(out)
				s.pump(ctx, context.Background(), out)
			}()
			msg := pubsub.Message{Channel: "ch", Payload: make([]byte, 1024)}
			s.Deliver(msg)
			waitFor(t, 10*time.Second, "the first message taken from the queue", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return len(s.queue) == 0
			})
			const behind = 8 // 8 KiB behind: over the soft bound, under the hard one
			for range behind {
				s.Deliver(msg)
			}
			clk.Advance(tc.behind)
			s.Deliver(msg)
			received := 0
			for range out {
				if received++; received == behind+2 {
					break
				}
			}
			if ended := received < behind+2; ended != tc.ended {
				t.Fatalf("received %d of %d messages after %v over the soft bound; want it ended: %v", received, behind+2, tc.behind, tc.ended)
			}
		})
	}
}
