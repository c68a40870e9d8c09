package zaris

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPubSubDeliversEveryMessageOnceInOrder publishes from every node of three to subscribers on every
// node, by channel and by pattern, and counts: each subscriber receives each message of its channels once,
// in the order its publisher sent them, and none of another channel.
func TestPubSubDeliversEveryMessageOnceInOrder(t *testing.T) {
	t.Parallel()
	const perNode = 2000
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
