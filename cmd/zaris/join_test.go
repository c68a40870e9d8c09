package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/internal/ports"
)

// TestJoinRetriesAtOnceAndOften checks the pauses of a node that starts before the member it joins through
// listens, as when the nodes of a new cluster are started together: it tries again within joinRetryFirst,
// and the pauses grow to joinRetryMax and no further.
func TestJoinRetriesAtOnceAndOften(t *testing.T) {
	const failures = 40
	var pauses []time.Duration
	tries := 0
	node, err := retryJoin(context.Background(), joinRetry{
		addrs: []string{"127.0.0.1:1"}, timeout: time.Hour, log: slog.New(slog.DiscardHandler),
		join: func() (*zaris.Node, error) {
			if tries++; tries <= failures {
				return nil, errors.New("connection refused")
			}
			return nil, nil
		},
		await: func(_ context.Context, d time.Duration) error { pauses = append(pauses, d); return nil },
	})
	if err != nil || node != nil {
		t.Fatalf("retryJoin = %v, %v; want the try that succeeded", node, err)
	}
	if tries != failures+1 || len(pauses) != failures {
		t.Fatalf("%d tries and %d pauses, want %d and %d", tries, len(pauses), failures+1, failures)
	}
	if pauses[0] > 20*time.Millisecond {
		t.Errorf("first pause %v: nodes started together wait that long for the one they join through", pauses[0])
	}
	if last := pauses[len(pauses)-1]; last != joinRetryMax {
		t.Errorf("last pause %v, want joinRetryMax", last)
	}
	for i, d := range pauses {
		if d <= 0 || d > joinRetryMax {
			t.Errorf("pause %d is %v, want (0, %v]", i+1, d, joinRetryMax)
		}
	}
}

// TestJoinPauseEndsWhenTheSeedListens checks that a pause between two tries of a join ends as soon as the
// member joined through accepts connections, and lasts its whole length while it does not, or while it
// already did when the pause began (the join failed for another reason).
func TestJoinPauseEndsWhenTheSeedListens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var up atomic.Bool
	probes := make(chan struct{}, 1)
	listening := func() bool { signalProbe(probes); return up.Load() }

	for _, already := range []bool{false, true} {
		up.Store(already)
		start := time.Now()
		if err := awaitListening(ctx, 50*time.Millisecond, time.Millisecond, listening); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < 50*time.Millisecond {
			t.Errorf("listening from the start %v: the pause ended after %v, want 50ms", already, waited)
		}
	}

	up.Store(false)
	woke := make(chan error, 1)
	go func() { woke <- awaitListening(ctx, time.Hour, time.Millisecond, listening) }()
	<-probes // the first probe, which may not have read up yet
	<-probes // a later one: the first found nothing listening
	up.Store(true)
	if err := <-woke; err != nil { // an hour's pause: only the seed's start ends it before the minute is up
		t.Fatalf("the pause ended with %v, want it to end once the seed listens", err)
	}
}

// signalProbe notes a probe in ch, a channel of capacity one.
func signalProbe(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// TestAnyListening checks the probe of the members to join through against a listener and a closed port.
func TestAnyListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ports.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	closed := "127.0.0.1:" + strconv.Itoa(p[0])
	ctx := context.Background()
	if !anyListening(ctx, []string{closed, ln.Addr().String()}, time.Second) {
		t.Error("a listener was not found")
	}
	ln.Close()
	if anyListening(ctx, []string{closed, ln.Addr().String()}, time.Second) {
		t.Error("closed ports were found listening")
	}
}

// TestJoinRetryStops checks that a join fails for good on a configuration error, with nothing to join
// through, and once the context ends.
func TestJoinRetryStops(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		addrs []string
		err   error
	}{
		{"invalid config", []string{"127.0.0.1:1"}, zaris.ErrInvalidConfig},
		{"cluster mismatch", []string{"127.0.0.1:1"}, zaris.ErrClusterMismatch},
		{"incompatible versions", []string{"127.0.0.1:1"}, zaris.ErrIncompatibleVersion},
		{"no address to join", nil, errors.New("refused")},
	} {
		tries := 0
		_, err := retryJoin(context.Background(), joinRetry{addrs: tc.addrs, timeout: time.Hour, log: quiet,
			join:  func() (*zaris.Node, error) { tries++; return nil, tc.err },
			await: func(context.Context, time.Duration) error { return nil }})
		if !errors.Is(err, tc.err) || tries != 1 {
			t.Errorf("%s: %d tries, err %v; want 1 try and %v", tc.name, tries, err, tc.err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := retryJoin(ctx, joinRetry{addrs: []string{"127.0.0.1:1"}, timeout: time.Hour, log: quiet,
		join: func() (*zaris.Node, error) { return nil, errors.New("refused") },
		await: func(ctx context.Context, d time.Duration) error {
			return awaitListening(ctx, d, d, func() bool { return false })
		}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("after the context ended: %v, want context.Canceled", err)
	}
}
