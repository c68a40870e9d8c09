package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/zaris-go/zaris"
)

// A node started before the member it joins through listens (the nodes of a new cluster are often started
// together, in any order) tries again after joinRetryFirst, then after pauses that double up to
// joinRetryMax. Each pause ends early once a member to join through accepts a connection, which is checked
// every joinProbeEvery: a try builds a whole node, a probe only dials.
const (
	joinRetryFirst = 20 * time.Millisecond
	joinRetryMax   = time.Second
	joinProbeEvery = 20 * time.Millisecond
	// joinRetryLogEvery keeps the warning to one every few tries.
	joinRetryLogEvery = 10
)

// joinWithRetry joins the cluster, retrying for up to timeout while the members to join through do not
// answer yet, so the nodes of a cluster can be started in any order. Configuration errors are final.
func joinWithRetry(ctx context.Context, cfg zaris.Config, timeout time.Duration, log *slog.Logger) (*zaris.Node, error) {
	return retryJoin(ctx, joinRetry{
		addrs:   cfg.Join,
		timeout: timeout,
		log:     log,
		join:    func() (*zaris.Node, error) { return zaris.Join(ctx, cfg) },
		await: func(ctx context.Context, d time.Duration) error {
			return awaitListening(ctx, d, joinProbeEvery, func() bool { return anyListening(ctx, cfg.Join, joinProbeEvery) })
		},
	})
}

// joinRetry is what retryJoin needs: the addresses joined through, how long to keep trying, one try, and
// the pause between two tries.
type joinRetry struct {
	addrs   []string
	timeout time.Duration
	log     *slog.Logger
	join    func() (*zaris.Node, error)
	// await pauses for up to d, and returns early once a member to join through answers.
	await func(ctx context.Context, d time.Duration) error
}

// retryJoin tries r.join until it succeeds, fails for good, or r.timeout has passed.
func retryJoin(ctx context.Context, r joinRetry) (*zaris.Node, error) {
	deadline := time.Now().Add(r.timeout)
	pause := joinRetryFirst
	for tries := 1; ; tries++ {
		node, err := r.join()
		if err == nil || len(r.addrs) == 0 || errors.Is(err, zaris.ErrInvalidConfig) ||
			errors.Is(err, zaris.ErrClusterMismatch) || errors.Is(err, zaris.ErrIncompatibleVersion) || time.Now().After(deadline) {
			return node, err
		}
		if tries == 1 || tries%joinRetryLogEvery == 0 {
			r.log.Warn("join failed; retrying", "join", r.addrs, "tries", tries, "err", err)
		}
		if err := r.await(ctx, pause); err != nil {
			return nil, err
		}
		pause = min(2*pause, joinRetryMax)
	}
}

// awaitListening waits for d, or until listening, asked every probe, starts to report that a member to
// join through accepts connections; it fails only when ctx ends. When one already accepts, the try that
// failed did not wait for it, and the whole of d is waited.
func awaitListening(ctx context.Context, d, probe time.Duration, listening func() bool) error {
	already := listening()
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(probe)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end.C:
			return nil
		case <-tick.C:
			if !already && listening() {
				return nil
			}
		}
	}
}

// anyListening reports whether one of addrs accepts a TCP connection within timeout.
func anyListening(ctx context.Context, addrs []string, timeout time.Duration) bool {
	dialer := net.Dialer{Timeout: timeout}
	for _, addr := range addrs {
		conn, err := dialer.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return true
		}
	}
	return false
}
