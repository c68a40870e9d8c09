package zaris

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// BLPop pops the first item of the first of keys that holds a list, waiting for one to hold an item until
// ctx ends (then it returns ctx's error). It returns the key popped from and the item, or ErrWrongType
// when a key it tries before finding an item holds another kind of value. The pop is LPop's, at the key's
// owner, so each item goes to one caller; callers waiting on the same keys are not served in the order
// they began to wait, as RESP's BLPOP clients are. An item whose pop fails with ErrUnconfirmed may have
// been popped. The callers of one node waiting on a key share one Watch of it.
func (n *Node) BLPop(ctx context.Context, keys ...string) (key string, item []byte, err error) {
	return n.client.pops.pop(ctx, kv.OpLPop, keys)
}

// BRPop is BLPop from the tail of the lists.
func (n *Node) BRPop(ctx context.Context, keys ...string) (key string, item []byte, err error) {
	return n.client.pops.pop(ctx, kv.OpRPop, keys)
}

// blockingPops serves the pops that wait for an item. A caller tries each of its keys in order, and waits
// for a change of one of them between tries. The callers on this node waiting for a key share one watch
// of it, so that an owner serves one watcher per waiting node and key, whatever the number of callers.
type blockingPops struct {
	popOne     func(ctx context.Context, op transport.Op, key string) ([][]byte, error)
	watch      func(ctx context.Context, key string) (<-chan WatchEvent, error)
	background func(fn func()) bool // runs fn in a goroutine Close waits for, unless closing
	life       context.Context      // ends when the node closes
	clock      Clock
	backoff    time.Duration // between tries while a key's owner cannot answer

	mu   sync.Mutex
	keys map[string]*keyWait
}

// keyWait is the watch of one key and the callers it signals.
type keyWait struct {
	ready   chan struct{} // closed once the watch is attached, or failed with err
	err     error
	stop    context.CancelFunc
	waiters map[chan<- struct{}]struct{}
}

// pop pops one item with op from the first of keys holding one, waiting as BLPop does. The keys are
// waited for before the first try, so no push between a try and the wait goes unnoticed.
func (b *blockingPops) pop(ctx context.Context, op transport.Op, keys []string) (string, []byte, error) {
	if len(keys) == 0 {
		return "", nil, fmt.Errorf("%w: no key to pop from", ErrInvalidRequest)
	}
	changed := make(chan struct{}, 1)
	for _, key := range keys {
		leave, err := b.wait(ctx, key, changed)
		if err != nil {
			return "", nil, err
		}
		defer leave()
	}
	for {
		again := false
		for _, key := range keys {
			items, err := b.popOne(ctx, op, key)
			switch {
			case ownerAway(err) && ctx.Err() == nil:
				again = true // tried again once the key's owner answers, as a blocked client waits out a failover
			case err != nil:
				return "", nil, err // ErrWrongType for a key of another kind, as BLPOP answers
			case len(items) > 0:
				return key, items[0], nil
			}
		}
		if err := b.awaitChange(ctx, changed, again); err != nil {
			return "", nil, err
		}
	}
}

// ownerAway reports whether err says that a key's owner could not answer for now: gone, moving or not
// known yet. A pop that failed so is tried again after a pause; one whose connection broke may have
// popped its item, as a Redis client's BLPOP whose connection breaks may have.
func ownerAway(err error) bool {
	for _, away := range []error{ErrPartitionUnavailable, ErrOwnershipChanging, ErrRetriesExhausted, ErrNotReady,
		ErrNotEnoughReplicas, ErrMoved, transport.ErrConnectionLost, transport.ErrUnreachable, transport.ErrTooManyConns} {
		if errors.Is(err, away) {
			return true
		}
	}
	return false
}

// awaitChange waits for a signal on changed, or for the backoff when retry is set, or for the end of ctx
// or of the node.
func (b *blockingPops) awaitChange(ctx context.Context, changed <-chan struct{}, retry bool) error {
	var pause <-chan time.Time
	if retry {
		t := b.clock.NewTimer(b.backoff)
		defer t.Stop()
		pause = t.C()
	}
	select {
	case <-changed:
	case <-pause:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.life.Done():
		return ErrClosed
	}
	return nil
}

// wait signals changed, without blocking, at every change of key from its return until leave is called.
func (b *blockingPops) wait(ctx context.Context, key string, changed chan<- struct{}) (leave func(), err error) {
	b.mu.Lock()
	kw, found := b.keys[key]
	if !found {
		kw = &keyWait{ready: make(chan struct{}), waiters: map[chan<- struct{}]struct{}{}}
		b.keys[key] = kw
	}
	kw.waiters[changed] = struct{}{}
	b.mu.Unlock()
	leave = func() { b.leave(key, kw, changed) }
	if !found {
		b.attach(key, kw)
	}
	select {
	case <-kw.ready:
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
	if kw.err != nil {
		leave()
		return nil, kw.err
	}
	return leave, nil
}

// attach starts kw's watch of key and the goroutine that signals its waiters.
func (b *blockingPops) attach(key string, kw *keyWait) {
	defer close(kw.ready)
	ctx, stop := context.WithCancel(b.life)
	events, err := b.watch(ctx, key)
	if err == nil && !b.background(func() { b.signal(kw, events) }) {
		err = ErrClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		stop()
		kw.err = err
		if b.keys[key] == kw {
			delete(b.keys, key) // the next caller tries again
		}
		return
	}
	kw.stop = stop
	if len(kw.waiters) == 0 { // every caller left while it attached
		b.drop(key, kw)
	}
}

// signal tells kw's waiters of each change its watch delivers, until the watch ends.
func (b *blockingPops) signal(kw *keyWait, events <-chan WatchEvent) {
	for range events {
		b.mu.Lock()
		for ch := range kw.waiters {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		b.mu.Unlock()
	}
}

// leave ends one caller's wait; the last one's ends the watch.
func (b *blockingPops) leave(key string, kw *keyWait, changed chan<- struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(kw.waiters, changed)
	if len(kw.waiters) == 0 && kw.stop != nil {
		b.drop(key, kw)
	}
}

// drop ends kw's watch and forgets it. Callers hold b.mu.
func (b *blockingPops) drop(key string, kw *keyWait) {
	kw.stop()
	if b.keys[key] == kw {
		delete(b.keys, key)
	}
}

// watched counts the keys watched for waiting callers.
func (b *blockingPops) watched() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.keys)
}

// waiting counts the callers waiting for key.
func (b *blockingPops) waiting(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if kw := b.keys[key]; kw != nil {
		return len(kw.waiters)
	}
	return 0
}
