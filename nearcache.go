package zaris

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/zaris-go/zaris/internal/glob"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// A node's near cache (Config.NearCache) keeps the values Get reads from other owners, in a ristretto cache
// bounded in bytes, and serves them from memory while they are known current:
//
//   - Every segment holding cached values is followed: a poller per owner long-polls it (kv.OpNearWatch) for
//     the keys written after the revision the cache has seen, and drops those keys. When the owner's log
//     no longer reaches back, the owner no longer serves the segment, a poll fails, or the caching node's
//     map shows the partition with another owner or epoch, every value of the segment is dropped at once
//     (its generation moves on).
//   - A fill starts from the segment's revision read before the value (kv.OpNearGet), so every later write of
//     the key reaches the cache after it; a fill during which the key was dropped keeps nothing.
//   - This node's own writes drop the key before they return, so a Get never serves a value older than
//     the caller's acknowledged write.
//   - With MaxStaleness set, a value read or checked longer ago than that is checked again by version
//     before it is served, so even a report that went missing leaves no value stale for longer.
type nearCache struct {
	cfg    NearCacheConfig
	clock  Clock
	layout Layout
	log    *slog.Logger
	values *ristretto.Cache[string, *nearEntry]
	// life orders keep's and forget's use of values with close: ristretto's Wait blocks forever on a cache
	// closed under it, and its Set panics. They run under the read lock and do nothing once closed is set.
	life   sync.RWMutex
	closed bool
	id     uint64 // what owners count this cache as, among their watchers
	wait   time.Duration
	// startPoller runs the node's pollOwner for an owner in a goroutine the node waits for.
	startPoller func(owner NodeID)

	gens []atomic.Uint64 // per segment: moved on when all its values must go

	mu      sync.Mutex
	seq     uint64            // counts the keys dropped
	dropped map[string]uint64 // key -> seq of its latest drop, for the fills in flight
	ring    []string          // the keys of dropped, oldest first from head, to bound it
	head    int
	floor   uint64 // the seq of the newest drop forgotten: fills begun before it keep nothing
	subs    map[int]*nearSub
	pollers map[NodeID]*nearPoller

	stats nearStats
}

// nearEntry is one cached value.
type nearEntry struct {
	value    []byte
	version  uint64
	expireAt int64 // clock nanos; 0 without expiry
	gen      uint64
	fetched  int64 // clock nanos at the start of the read that brought it
}

// nearSub is a followed segment: its owner and the revision the cache has seen up to.
type nearSub struct {
	owner  NodeID
	cursor uint64
	epoch  uint64 // the partition's, as the map showed it when the segment was first cached
}

// nearPoller long-polls one owner for the segments followed there.
type nearPoller struct {
	cancel context.CancelFunc // ends the poll in flight, so the next one asks for new segments too
}

// nearFill is what a fill remembers from its start.
type nearFill struct {
	seq, gen uint64
	at       int64
}

// nearDropMemory is how many dropped keys a near cache remembers for the fills in flight.
const nearDropMemory = 1 << 14

// nearEntryOverhead approximates the bytes a cached value takes beyond its key and value.
const nearEntryOverhead = 96

func newNearCache(cfg Config, layout Layout, log *slog.Logger, startPoller func(NodeID)) (*nearCache, error) {
	items := max(cfg.NearCache.MaxBytes/256, 1024)
	values, err := ristretto.NewCache(&ristretto.Config[string, *nearEntry]{
		NumCounters: 10 * items,
		MaxCost:     cfg.NearCache.MaxBytes,
		BufferItems: 64,
		Metrics:     true,
	})
	if err != nil {
		return nil, err
	}
	return &nearCache{
		cfg: cfg.NearCache, clock: cfg.Clock, layout: layout, log: log, values: values,
		id: rand.Uint64() | 1, wait: cfg.WatchPoll, startPoller: startPoller,
		gens:    make([]atomic.Uint64, layout.Segments),
		dropped: map[string]uint64{}, ring: make([]string, 0, nearDropMemory),
		subs: map[int]*nearSub{}, pollers: map[NodeID]*nearPoller{},
	}, nil
}

// wants reports whether key may be cached.
func (c *nearCache) wants(key string) bool {
	if c.cfg.Keys == nil {
		return true
	}
	for _, pattern := range c.cfg.Keys {
		if glob.Match([]byte(pattern), []byte(key), false) {
			return true
		}
	}
	return false
}

// lookup returns key's cached entry while its segment's generation holds and it has not expired. check is
// true when it was read or checked more than MaxStaleness ago: it must be checked before it is served,
// whatever the owner's reports said, since a report may have been lost.
func (c *nearCache) lookup(key string, seg int) (e *nearEntry, check bool) {
	e, ok := c.values.Get(key)
	now := c.clock.Now().UnixNano()
	if !ok || e.gen != c.gens[seg].Load() || e.expireAt != 0 && now >= e.expireAt {
		c.stats.misses.Add(1)
		return nil, false
	}
	if s := c.cfg.MaxStaleness; s > 0 && now-e.fetched > int64(s) {
		return e, true
	}
	c.stats.hits.Add(1)
	return e, false
}

// begin marks the start of a fill of segment seg.
func (c *nearCache) begin(seg int) nearFill {
	c.mu.Lock()
	defer c.mu.Unlock()
	return nearFill{seq: c.seq, gen: c.gens[seg].Load(), at: c.clock.Now().UnixNano()}
}

// keep caches what a fill begun at f read of key from owner, at the segment revision read before the
// value, unless the key or its segment was dropped since f: then the value may predate the change that
// dropped it. It returns once the value is in the cache (or refused by its admission policy), so that
// the next read finds it: ristretto applies a Set in the background, and under a busy scheduler that
// background can lag many reads behind.
func (c *nearCache) keep(key string, seg int, f nearFill, e *nearEntry, owner NodeID, epoch, revision uint64) {
	c.life.RLock()
	defer c.life.RUnlock()
	if !c.closed && c.set(key, seg, f, e, owner, epoch, revision) {
		c.values.Wait()
	}
}

// set is keep's decision and its Set, under mu so that it is ordered with the drops. It reports whether
// it set the value.
func (c *nearCache) set(key string, seg int, f nearFill, e *nearEntry, owner NodeID, epoch, revision uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gens[seg].Load() != f.gen || c.floor > f.seq || c.dropped[key] > f.seq {
		c.stats.refused.Add(1)
		return false
	}
	sub := c.subs[seg]
	switch {
	case sub == nil:
		c.subs[seg] = &nearSub{owner: owner, cursor: revision, epoch: epoch}
		c.follow(owner)
	case sub.owner != owner || sub.epoch != epoch:
		c.stats.refused.Add(1) // the map moved during the fill: its poller will find out
		return false
	}
	e.gen, e.fetched = f.gen, f.at
	return c.values.Set(key, e, int64(len(key)+len(e.value)+nearEntryOverhead))
}

// forget drops key and waits until the cache has applied the drop: a Set still queued in ristretto would
// otherwise land after it.
func (c *nearCache) forget(key string) {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed {
		return
	}
	c.mu.Lock()
	c.dropLocked(key)
	c.mu.Unlock()
	c.values.Wait()
}

// dropLocked drops key and remembers it for the fills in flight. The caller holds mu.
func (c *nearCache) dropLocked(key string) {
	c.seq++
	c.values.Del(key)
	if len(c.ring) < nearDropMemory {
		c.ring = append(c.ring, key)
	} else {
		old := c.ring[c.head]
		if seq := c.dropped[old]; seq > c.floor {
			c.floor = seq
		}
		delete(c.dropped, old)
		c.ring[c.head] = key
		c.head = (c.head + 1) % nearDropMemory
	}
	c.dropped[key] = c.seq
}

// dropSegment drops every value of segment seg and stops following it. The caller holds mu.
func (c *nearCache) dropSegment(seg int, why string) {
	c.gens[seg].Add(1) // fills in flight too, followed or not
	if c.subs[seg] == nil {
		return
	}
	delete(c.subs, seg)
	c.stats.segmentsDropped.Add(1)
	c.log.Debug("near cache: segment dropped", "segment", seg, "why", why)
}

// remapped drops the segments of every partition whose owner or epoch changed between old and next,
// once the routing table sends requests by next.
func (c *nearCache) remapped(old, next *ClusterMap) {
	if old == nil || len(old.Runtime) != len(next.Runtime) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, st := range next.Runtime {
		if was := old.Runtime[p]; was.Owner == st.Owner && was.Epoch == st.Epoch {
			continue
		}
		first, end := c.layout.PartitionSegments(p)
		for seg := first; seg < end; seg++ {
			c.dropSegment(seg, "partition changed owner or epoch") // fills in flight too: none is followed yet
		}
	}
}

// follow makes sure a poller follows owner's segments, and has it ask again now if it is waiting.
// The caller holds mu.
func (c *nearCache) follow(owner NodeID) {
	if p := c.pollers[owner]; p != nil {
		if p.cancel != nil {
			p.cancel()
		}
		return
	}
	c.pollers[owner] = &nearPoller{}
	c.startPoller(owner)
}

// pollRequest builds the next poll of owner's segments, and a context its next follow can end. It
// reports false, forgetting the poller, when no segment is followed there any more.
func (c *nearCache) pollRequest(life context.Context, owner NodeID) (*nearWatchRequest, context.Context, context.CancelFunc, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := &nearWatchRequest{Cache: c.id, Wait: int64(c.wait)}
	for seg, sub := range c.subs {
		if sub.owner == owner {
			req.Segments = append(req.Segments, uint32(seg))
			req.After = append(req.After, sub.cursor)
		}
	}
	if len(req.Segments) == 0 {
		delete(c.pollers, owner)
		return nil, nil, nil, false
	}
	ctx, cancel := context.WithCancel(life)
	c.pollers[owner].cancel = cancel
	return req, ctx, cancel, true
}

// apply takes an owner's answer to req: the keys to drop, and the segments to drop whole.
func (c *nearCache) apply(owner NodeID, req *nearWatchRequest, reply *nearWatchReply) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range reply.Segments {
		seg := int(req.Segments[i])
		sub := c.subs[seg]
		if sub == nil || sub.owner != owner || sub.cursor != req.After[i] {
			continue // dropped, or followed anew, since the poll was sent
		}
		switch {
		case r.Status != StatusSuccess:
			c.dropSegment(seg, "owner no longer serves it: "+r.Status.String())
			continue
		case r.Gap, r.Epoch != sub.epoch: // the keys changed are not all known: drop them all, keep following
			c.gens[seg].Add(1)
			c.stats.segmentsDropped.Add(1)
		}
		for _, key := range r.Keys {
			c.dropLocked(key)
		}
		c.stats.invalidations.Add(uint64(len(r.Keys)))
		sub.cursor, sub.epoch = r.Revision, r.Epoch
	}
}

// lost drops every segment req followed at owner, whose poll failed: changes may go unreported.
func (c *nearCache) lost(owner NodeID, req *nearWatchRequest, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, seg := range req.Segments {
		if sub := c.subs[int(seg)]; sub != nil && sub.owner == owner {
			c.dropSegment(int(seg), why)
		}
	}
}

// close stops the cache; the node has stopped its pollers.
func (c *nearCache) close() {
	c.life.Lock()
	defer c.life.Unlock()
	c.closed = true
	c.values.Close()
}

// NearCacheStats are a node's near cache counters.
type NearCacheStats struct {
	Hits, Misses uint64
	// Revalidations counts values checked with their owner after MaxStaleness; Unchanged, those the owner
	// confirmed without resending them.
	Revalidations, Unchanged uint64
	// Invalidations counts keys dropped on their owners' reports of a change.
	Invalidations uint64
	// SegmentsDropped counts segments whose every value was dropped at once: on a gap in the owner's
	// reports, a change of owner or epoch, or a failed poll.
	SegmentsDropped uint64
	// Refused counts values read from an owner and not kept, because the key or its segment was dropped
	// while they were read.
	Refused uint64
	// Bytes is what the cached keys and values take, as the cache counts them.
	Bytes int64
}

type nearStats struct {
	hits, misses, revalidations, unchanged, invalidations, segmentsDropped, refused atomic.Uint64
}

// NearCacheStats returns the near cache's counters; all zero when it is off.
func (n *Node) NearCacheStats() NearCacheStats {
	c := n.client.near
	if c == nil {
		return NearCacheStats{}
	}
	m := c.values.Metrics
	return NearCacheStats{
		Hits: c.stats.hits.Load(), Misses: c.stats.misses.Load(),
		Revalidations: c.stats.revalidations.Load(), Unchanged: c.stats.unchanged.Load(),
		Invalidations: c.stats.invalidations.Load(), SegmentsDropped: c.stats.segmentsDropped.Load(),
		Refused: c.stats.refused.Load(), Bytes: int64(m.CostAdded()) - int64(m.CostEvicted()),
	}
}

// nearGet serves Get from the near cache when key's owner is another node: from memory when the value is
// known current, otherwise from the owner, keeping what it read.
func (c *client) nearGet(ctx context.Context, key string) (value []byte, served bool, err error) {
	near := c.near
	if near == nil || !near.wants(key) {
		return nil, false, nil
	}
	seg := c.layout.KeySegment(key)
	if p := c.router.current().segmentPeer[seg]; p == nil || p.local {
		return nil, false, nil
	}
	e, check := near.lookup(key, seg)
	if e != nil && !check {
		return bytes.Clone(e.value), true, nil
	}
	req := kv.Request{Key: key}
	if e != nil {
		req.Version = e.version
		near.stats.revalidations.Add(1)
	}
	f := near.begin(seg)
	reply, err := c.execute(ctx, kv.OpNearGet, &req)
	var refused *transport.RemoteError
	if errors.As(err, &refused) {
		return nil, false, nil // an owner of an older version, which knows no kv.OpNearGet: read it uncached
	}
	if err != nil {
		return nil, true, err
	}
	if err := replyErr(reply); err != nil {
		return nil, true, err
	}
	if reply.Existed && e != nil {
		near.stats.unchanged.Add(1)
		reply.Value = e.value
	}
	kept := &nearEntry{value: bytes.Clone(reply.Value), version: reply.Version}
	if reply.Int > 0 {
		kept.expireAt = f.at + reply.Int
	}
	if t := c.router.current(); t.segmentPeer[seg] != nil && !t.segmentPeer[seg].local {
		near.keep(key, seg, f, kept, t.segmentPeer[seg].id, t.m.Runtime[c.layout.SegmentPartition(seg)].Epoch, reply.Revision)
	}
	return bytes.Clone(kept.value), true, nil
}

// pollOwner follows the segments cached from owner until none is left or the node stops.
func (c *client) pollOwner(owner NodeID) {
	near := c.near
	backoff := c.cfg.RetryBackoff
	for c.life.Err() == nil {
		req, ctx, cancel, ok := near.pollRequest(c.life, owner)
		if !ok {
			return
		}
		reply, err := c.pollNear(ctx, owner, req)
		kicked := ctx.Err() != nil && c.life.Err() == nil
		cancel()
		switch {
		case kicked:
		case err != nil || reply.Status != StatusSuccess:
			why := "poll failed"
			if err != nil {
				why += ": " + err.Error()
			} else {
				why += ": " + reply.Status.String()
			}
			near.lost(owner, req, why)
			sleepStop(c.cfg.Clock, c.life.Done(), backoff)
			backoff = min(2*backoff, c.cfg.WatchPoll)
		default:
			if h := c.cfg.hooks.nearReport; h != nil {
				h(&reply)
			}
			near.apply(owner, req, &reply)
			backoff = c.cfg.RetryBackoff
		}
	}
}

// pollNear sends one poll to owner, through the routing table's connection to it.
func (c *client) pollNear(ctx context.Context, owner NodeID, req *nearWatchRequest) (nearWatchReply, error) {
	p := c.router.peerByID(owner)
	if p == nil || p.local {
		return nearWatchReply{Status: StatusMoved}, nil
	}
	return c.sendNearWatch(ctx, p, req)
}

// startNearPoller runs pollOwner for owner unless the node is stopping.
func (c *client) startNearPoller(owner NodeID) {
	if c.life.Err() != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.pollOwner(owner)
	}()
}

// sendNearWatch sends one poll to p, allowing for the owner's wait.
func (c *client) sendNearWatch(ctx context.Context, p *peer, req *nearWatchRequest) (nearWatchReply, error) {
	payload, err := encode(req)
	if err != nil {
		return nearWatchReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(req.Wait)+c.cfg.ReplicaAckTimeout+time.Second)
	defer cancel()
	resp, err := p.client.Call(ctx, kv.OpNearWatch, payload)
	if err != nil {
		return nearWatchReply{}, fmt.Errorf("zaris: near cache poll to node %s (%s): %w", p.id, p.addr, err)
	}
	var reply nearWatchReply
	if err := decode(resp, &reply); err != nil {
		return nearWatchReply{}, fmt.Errorf("zaris: near cache poll reply from node %s: %w", p.id, err)
	}
	if len(reply.Segments) != len(req.Segments) && reply.Status == StatusSuccess {
		return nearWatchReply{}, fmt.Errorf("zaris: near cache poll reply from node %s: %d segments for %d", p.id, len(reply.Segments), len(req.Segments))
	}
	return reply, nil
}
