package transport

import (
	"context"
	"testing"
)

func TestSemaphoreIsFirstComeFirstServed(t *testing.T) {
	s := newSemaphore(10)
	ctx := testContext(t)
	if err := s.acquire(ctx, 8); err != nil {
		t.Fatal(err)
	}
	large := make(chan error, 1)
	go func() { large <- s.acquire(ctx, 5) }()
	waitUntil(t, "the large claim waits", func() bool { _, waiting := s.state(); return waiting == 1 })

	small := make(chan error, 1)
	go func() { small <- s.acquire(ctx, 1) }() // it would fit, but the large claim came first
	waitUntil(t, "the small claim queues behind it", func() bool { _, waiting := s.state(); return waiting == 2 })

	s.release(8)
	receive(t, large, "large claim")
	receive(t, small, "small claim")
	if used, waiting := s.state(); used != 6 || waiting != 0 {
		t.Fatalf("used %d, waiting %d: want 6 and 0", used, waiting)
	}
}

func TestSemaphoreClaimGivesUpWithItsContext(t *testing.T) {
	s := newSemaphore(4)
	ctx := testContext(t)
	if err := s.acquire(ctx, 4); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- s.acquire(cancelled, 3) }()
	next := make(chan error, 1)
	waitUntil(t, "the first claim waits", func() bool { _, waiting := s.state(); return waiting == 1 })
	go func() { next <- s.acquire(ctx, 1) }()
	waitUntil(t, "the second claim waits", func() bool { _, waiting := s.state(); return waiting == 2 })

	cancel()
	if err := receive(t, gaveUp, "cancelled claim"); err != context.Canceled {
		t.Fatalf("got %v, want Canceled", err)
	}
	s.release(1)
	receive(t, next, "claim behind the cancelled one")
	if used, waiting := s.state(); used != 4 || waiting != 0 {
		t.Fatalf("used %d, waiting %d: want 4 and 0", used, waiting)
	}
}
