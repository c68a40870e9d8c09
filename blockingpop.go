package zaris

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zaris-go/zaris/transport"
)

// BLPop pops the first item of the first of keys that holds a list, waiting for one to hold an item until
// ctx ends (then it returns ctx's error). It returns the key popped from and the item, or ErrWrongType
// when a key it tries before finding an item holds another kind of value. The pop is LPop's, at the key's
// owner, so each item goes to one caller; callers waiting on the same keys are not served in the order
// they began to wait, as RESP's BLPOP clients are. An item whose pop fails with ErrUnconfirmed may have
// been popped. The callers of one node waiting on a key share one Watch of it.
func (n *Node) BLPop(ctx context.Context, keys ...string) (key string, item []byte, err error) {
	return n.blockingPop(ctx, n.LPop, keys)
}

// BRPop is BLPop from the tail of the lists.
func (n *Node) BRPop(ctx context.Context, keys ...string) (key string, item []byte, err error) {
	return n.blockingPop(ctx, n.RPop, keys)
}

// blockingPop tries pop on each of keys in order, and waits for a change of one of them between tries.
// The keys are waited for before the first try, so no push between a try and the wait goes unnoticed.
func (n *Node) blockingPop(ctx context.Context, pop func(context.Context, string, int) ([][]byte, error), keys []string) (string, []byte, error) {
	if len(keys) == 0 {
		return "", nil, fmt.Errorf("%w: no key to pop from", ErrInvalidRequest)
	}
	changed := make(chan struct{}, 1)
	for _, key := range keys {
		leave, err := n.waits.wait(ctx, key, changed)
		if err != nil {
			return "", nil, err
		}
		defer leave()
	}
	for {
		again := false
		for _, key := range keys {
			items, err := pop(ctx, key, 1)
			switch {
			case ownerAway(err) && ctx.Err() == nil:
				again = true // tried again once the key's owner answers, as a blocked client waits out a failover
				continue
			case err != nil:
				return "", nil, err // ErrWrongType for a key of another kind, as BLPOP answers
			case len(items) > 0:
				return key, items[0], nil
			}
		}
		if err := n.awaitChange(ctx, changed, again); err != nil {
			return "", nil, err
		}
	}
}

// awaitChange waits for a signal on changed, or RetryBackoff when retry is set, or the end of ctx or of the
// node.
func (n *Node) awaitChange(ctx context.Context, changed <-chan struct{}, retry bool) error {
	var pause <-chan time.Time
	if retry {
		t := n.cfg.Clock.NewTimer(n.cfg.RetryBackoff)
		defer t.Stop()
		pause = t.C()
	}
	select {
	case <-changed:
	case <-pause:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.life.ctx.Done():
		return ErrClosed
	}
	return nil
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

// keyWaits shares one Watch of a key among the callers on this node that wait for it to change, so that
// an owner serves one watcher per waiting node and key, whatever the number of callers.
type keyWaits struct {
	watch      func(ctx context.Context, key string) (<-chan WatchEvent, error)
	background func(fn func()) bool // runs fn in a goroutine Close waits for, unless closing
	life       context.Context      // ends when the node closes

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

func newKeyWaits(watch func(context.Context, string) (<-chan WatchEvent, error), background func(func()) bool, life context.Context) *keyWaits {
	return &keyWaits{watch: watch, background: background, life: life, keys: map[string]*keyWait{}}
}

// wait signals changed, without blocking, at every change of key from its return until leave is called.
func (w *keyWaits) wait(ctx context.Context, key string, changed chan<- struct{}) (leave func(), err error) {
	w.mu.Lock()
	kw, found := w.keys[key]
	if !found {
		kw = &keyWait{ready: make(chan struct{}), waiters: map[chan<- struct{}]struct{}{}}
		w.keys[key] = kw
	}
	kw.waiters[changed] = struct{}{}
	w.mu.Unlock()
	leave = func() { w.leave(key, kw, changed) }
	if !found {
		w.attach(key, kw)
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
func (w *keyWaits) attach(key string, kw *keyWait) {
	defer close(kw.ready)
	ctx, stop := context.WithCancel(w.life)
	events, err := w.watch(ctx, key)
	if err == nil && !w.background(func() { w.signal(key, kw, events) }) {
		err = ErrClosed
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		stop()
		kw.err = err
		if w.keys[key] == kw {
			delete(w.keys, key) // the next caller tries again
		}
		return
	}
	kw.stop = stop
	if len(kw.waiters) == 0 { // every caller left while it attached
		w.drop(key, kw)
	}
}

// signal tells kw's waiters of each change of key, until its watch ends.
func (w *keyWaits) signal(key string, kw *keyWait, events <-chan WatchEvent) {
	for range events {
		w.mu.Lock()
		for ch := range kw.waiters {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		w.mu.Unlock()
	}
}

// leave ends one caller's wait; the last one's ends the watch.
func (w *keyWaits) leave(key string, kw *keyWait, changed chan<- struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(kw.waiters, changed)
	if len(kw.waiters) == 0 && kw.stop != nil {
		w.drop(key, kw)
	}
}

// drop ends kw's watch and forgets it. Callers hold w.mu.
func (w *keyWaits) drop(key string, kw *keyWait) {
	kw.stop()
	if w.keys[key] == kw {
		delete(w.keys, key)
	}
}

// watched counts the keys watched for waiting callers.
func (w *keyWaits) watched() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.keys)
}

// waiting counts the callers waiting for key.
func (w *keyWaits) waiting(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if kw := w.keys[key]; kw != nil {
		return len(kw.waiters)
	}
	return 0
}
