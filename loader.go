package zaris

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// Loader loads a key the cluster does not hold, for read-through caching (Config.Loader). It returns the
// value and the time it lives (zero: no expiry), or an error; an error matching ErrNotFound says there is
// no such key.
type Loader func(ctx context.Context, key string) (value []byte, ttl time.Duration, err error)

// Loader defaults.
const (
	defaultLoaderConcurrency = 16
	defaultLoaderTimeout     = 10 * time.Second
	// maxLoadErrorBytes bounds the loader error text a reply carries to the callers.
	maxLoadErrorBytes = 1 << 10
	// maxAbsentKeys bounds the keys an owner remembers the loader found missing (LoaderNegativeTTL).
	maxAbsentKeys = 1 << 16
)

// loadsOnMiss reports whether op, finding its key missing at the owner, loads it: the reads of a string's
// value.
func loadsOnMiss(op transport.Op) bool {
	return op == kv.OpGet || op == kv.OpGetEntry || op == kv.OpNearGet
}

// readThrough is an owner's side of Config.Loader: it loads the keys reads find missing, one load per key
// at a time however many callers wait for it, and stores what it loads through the owner's write path, so
// that the value is replicated as a Put is. Every read of a key routes to its owner, so one load per key
// at a time on the owner is one in the whole cluster. A write of the key during its load is newer than
// what the load returns, so the load then stores nothing.
type readThrough struct {
	load Loader
	// write runs fn on an atomic group of key's segment, ownership checked, as a write of the owner is run.
	write    func(ctx context.Context, key string, fn func(kv.Group)) kv.Reply
	spawn    func(fn func()) bool // runs fn in a goroutine Close waits for, unless closing
	life     context.Context      // ends when the node closes
	clock    Clock
	log      *slog.Logger
	timeout  time.Duration
	negTTL   time.Duration
	parallel int
	slots    chan struct{} // one per load running, up to LoaderConcurrency

	mu       sync.Mutex
	flights  map[string]*loadFlight
	inflight atomic.Int32         // len(flights), read by the write listener without the lock
	absent   map[string]time.Time // keys the loader found missing, until when

	loads, failures, absentHits atomic.Uint64
	waiting                     atomic.Int64 // callers waiting for a load under way
}

// loadFlight is one load under way; waiters read reply once done is closed.
type loadFlight struct {
	done       chan struct{}
	reply      kv.Reply
	superseded atomic.Bool // the key was written during the load
}

func newReadThrough(cfg *Config, write func(context.Context, string, func(kv.Group)) kv.Reply, spawn func(func()) bool, life context.Context, log *slog.Logger) *readThrough {
	parallel := cmp.Or(cfg.LoaderConcurrency, defaultLoaderConcurrency)
	return &readThrough{
		load: cfg.Loader, write: write, spawn: spawn, life: life, clock: cfg.Clock, log: log,
		timeout:  cmp.Or(cfg.LoaderTimeout, defaultLoaderTimeout),
		negTTL:   cfg.LoaderNegativeTTL,
		parallel: parallel,
		slots:    make(chan struct{}, parallel),
		flights:  map[string]*loadFlight{}, absent: map[string]time.Time{},
	}
}

// covers reports whether a read by op of key, found missing, loads it.
func (rt *readThrough) covers(op transport.Op, key string) bool {
	return rt != nil && loadsOnMiss(op) && !isInternalKey(key)
}

// readThrough loads key, which a read found missing, and once it is stored reads it again with reread.
func (rt *readThrough) readThrough(ctx context.Context, key string, reread func() kv.Reply) kv.Reply {
	if loaded := rt.fill(ctx, key); loaded.Status != StatusSuccess {
		return loaded
	}
	return reread()
}

// fill loads key, which a read found missing, and stores it: it returns StatusSuccess once the key may be
// read again (it holds the loaded value, or what a write during the load left), StatusNotFound when the
// loader found no such key, StatusLoadFailed with the loader's error in Value, or the refusal of an owner
// that could not store it. The load runs apart from the caller, so a caller that gives up leaves it to the
// others waiting.
func (rt *readThrough) fill(ctx context.Context, key string) kv.Reply {
	if rt.knownAbsent(key) {
		rt.absentHits.Add(1)
		return kv.Reply{Status: StatusNotFound}
	}
	rt.mu.Lock()
	f, running := rt.flights[key]
	if !running {
		f = &loadFlight{done: make(chan struct{})}
		rt.flights[key] = f
		rt.inflight.Add(1)
	}
	rt.mu.Unlock()
	if !running && !rt.spawn(func() { rt.run(key, f) }) {
		rt.finish(key, f, kv.Reply{Status: StatusLoadFailed, Value: []byte(ErrClosed.Error())})
	}
	rt.waiting.Add(1)
	defer rt.waiting.Add(-1)
	select {
	case <-f.done:
		return f.reply
	case <-ctx.Done():
		return kv.Reply{Status: StatusLoadFailed, Value: []byte(ctx.Err().Error())}
	}
}

// run loads key and stores the value, then hands the outcome to the flight's waiters, whatever happens.
func (rt *readThrough) run(key string, f *loadFlight) {
	reply := kv.Reply{Status: StatusInternal}
	defer func() { rt.finish(key, f, reply) }()
	select {
	case rt.slots <- struct{}{}:
		defer func() { <-rt.slots }()
	case <-rt.life.Done():
		reply = kv.Reply{Status: StatusLoadFailed, Value: []byte(ErrClosed.Error())}
		return
	}
	ctx, cancel := context.WithTimeout(rt.life, rt.timeout)
	defer cancel()
	rt.loads.Add(1)
	value, ttl, err := rt.call(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		rt.noteAbsent(key)
		reply = kv.Reply{Status: StatusNotFound}
	case err != nil:
		rt.failures.Add(1)
		rt.log.Debug("load failed", "key", key, "err", err)
		reply = kv.Reply{Status: StatusLoadFailed, Value: loadErrorText(err)}
	default:
		reply = rt.store(key, f, value, ttl)
	}
}

// call runs the loader, turning a panic into an error.
func (rt *readThrough) call(ctx context.Context, key string) (value []byte, ttl time.Duration, err error) {
	defer func() {
		if v := recover(); v != nil {
			rt.log.Error("loader panicked", "key", key, "panic", v)
			value, err = nil, fmt.Errorf("loader panicked: %v", v)
		}
	}()
	return rt.load(ctx, key)
}

// storeTimeout bounds the write of a loaded value, which waits for the replicas as a Put does.
const storeTimeout = 5 * time.Second

// store writes a loaded value, unless the key was written during the load (its flight is superseded) or
// holds a value: what was written meanwhile is newer. The check runs in the key's atomic group, which a
// write of the key marking the flight also holds, so no write slips between the check and the store.
func (rt *readThrough) store(key string, f *loadFlight, value []byte, ttl time.Duration) kv.Reply {
	if ttl < 0 {
		return kv.Reply{Status: StatusNotFound} // expired as it was loaded
	}
	ctx, cancel := context.WithTimeout(rt.life, storeTimeout)
	defer cancel()
	put := kv.Reply{Status: StatusSuccess}
	reply := rt.write(ctx, key, func(g kv.Group) {
		if !f.superseded.Load() {
			put, _ = g.Apply(kv.OpPutIf, &kv.Request{Key: key, Value: value, TTL: int64(ttl), Cond: kv.CondIfAbsent})
		}
	})
	switch {
	case reply.Status == StatusUnconfirmed:
		return kv.Reply{Status: StatusSuccess} // stored, maybe: the read that follows finds out
	case reply.Status != StatusSuccess:
		return reply // the owner could not store it (it lost the partition, say): the caller's read goes again
	case put.Status != StatusSuccess:
		rt.failures.Add(1)
		return kv.Reply{Status: StatusLoadFailed, Value: []byte(fmt.Sprintf("loaded value not stored: %v", put.Status))}
	}
	return kv.Reply{Status: StatusSuccess}
}

// written is the loader's write listener: a write of a key being loaded supersedes the load.
func (rt *readThrough) written(_ int, _, _ uint64, key string, _ *entry, change writeChange) {
	if rt.inflight.Load() == 0 {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if f := rt.flights[key]; f != nil {
		f.superseded.Store(true)
	}
	for i := range change.multi {
		if f := rt.flights[change.multi[i].Key]; f != nil {
			f.superseded.Store(true)
		}
	}
}

// finish ends flight f of key with reply.
func (rt *readThrough) finish(key string, f *loadFlight, reply kv.Reply) {
	rt.mu.Lock()
	delete(rt.flights, key)
	rt.inflight.Add(-1)
	rt.mu.Unlock()
	f.reply = reply
	close(f.done)
}

// each runs fn for every one of items, up to LoaderConcurrency at once: the loads of one batch.
func (rt *readThrough) each(items []int32, fn func(int32)) {
	sem := make(chan struct{}, rt.parallel)
	var wg sync.WaitGroup
	for _, i := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}

// knownAbsent reports whether the loader found key missing within LoaderNegativeTTL.
func (rt *readThrough) knownAbsent(key string) bool {
	if rt.negTTL <= 0 {
		return false
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	until, ok := rt.absent[key]
	if ok && !rt.clock.Now().Before(until) {
		delete(rt.absent, key)
		return false
	}
	return ok
}

// noteAbsent remembers that the loader found key missing, for LoaderNegativeTTL. At the bound, the
// entries that lapsed go first, and then an arbitrary half.
func (rt *readThrough) noteAbsent(key string) {
	if rt.negTTL <= 0 {
		return
	}
	now := rt.clock.Now()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.absent) >= maxAbsentKeys {
		for k, until := range rt.absent {
			if !now.Before(until) || len(rt.absent) >= maxAbsentKeys/2 {
				delete(rt.absent, k)
			}
		}
	}
	rt.absent[key] = now.Add(rt.negTTL)
}

// loadErrorText is the loader error's text a reply carries: bounded, on one line.
func loadErrorText(err error) []byte {
	text := []byte(err.Error())
	if len(text) > maxLoadErrorBytes {
		text = text[:maxLoadErrorBytes]
	}
	for i, c := range text {
		if c == '\r' || c == '\n' {
			text[i] = ' '
		}
	}
	return text
}

// LoaderStats are an owner's read-through counters.
type LoaderStats struct {
	// Loads counts the loader's calls; Failures, those that failed or whose value could not be stored.
	Loads, Failures uint64
	// AbsentHits counts the misses answered from LoaderNegativeTTL without a call.
	AbsentHits uint64
	// Waiting is the number of reads waiting, at this owner, for a load under way.
	Waiting int64
}

func (rt *readThrough) stats() LoaderStats {
	if rt == nil {
		return LoaderStats{}
	}
	return LoaderStats{Loads: rt.loads.Load(), Failures: rt.failures.Load(), AbsentHits: rt.absentHits.Load(), Waiting: rt.waiting.Load()}
}
