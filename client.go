package zaris

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// client is a node's caller side. It sends each key operation, scan page, watch poll and batch to the owner
// its routing table names, in one hop, and serves reads of other owners' keys from the near cache. What
// routes to this node is served in process by the owner side (localOwner).
type client struct {
	cfg     *Config
	layout  Layout
	router  *router
	batch   batchSender
	near    *nearCache // nil unless Config.NearCache.MaxBytes is set
	pops    *blockingPops
	local   localOwner
	stats   *nodeStats
	metrics *opMetrics      // nil with Config.DisableMetrics
	life    context.Context // ends when the node closes
	wg      *sync.WaitGroup // the node's, which Close waits on
	// incarnation is this process's, which every replication request carries.
	incarnation uint64
	log         *slog.Logger
}

// localOwner serves in process what the routing table sends to this node.
type localOwner interface {
	serveKV(ctx context.Context, op transport.Op, req *kv.Request) kv.Reply
	serveScan(ctx context.Context, req *kv.ScanRequest, mode scanMode) kv.ScanReply
	serveWatch(ctx context.Context, req *watchRequest) watchReply
	serveBackup(payload []byte) ([]byte, error)
	serveRestore(ctx context.Context, payload []byte) []byte
}

// nextAttempt says what the route loop does after one attempt of a request.
type nextAttempt uint8

const (
	attemptDone       nextAttempt = iota // the attempt settles the request, with its error if any
	attemptRedirected                    // refused for a stale routing table: refresh it and go again (redirectPacer)
	attemptAgain                         // go again by the current table: the attempt paced itself
)

// refusal is what an owner's refusal of a redirected attempt said: its status and its map's index.
type refusal struct {
	status   Status
	mapIndex uint64
}

// routeSegment is the one route-and-retry loop of keys, scan pages and watches: it makes attempts at a
// request for segment seg, each to the owner the routing table then names, until one settles it. A
// partition without an owner fails with ErrPartitionUnavailable, unless a newer map is already committed.
func (c *client) routeSegment(ctx context.Context, seg int, pace *redirectPacer, attempt func(p *peer, t *routingTable) (nextAttempt, refusal, error)) error {
	t, err := c.router.await(ctx)
	if err != nil {
		return err
	}
	part := c.layout.SegmentPartition(seg)
	for {
		p := t.segmentPeer[seg]
		if p == nil {
			if latest := c.router.latest(); latest != t {
				t = latest // the committed map is newer than the table: its push is on its way
				continue
			}
			return fmt.Errorf("%w: partition %d has no active owner", ErrPartitionUnavailable, part)
		}
		next, refused, err := attempt(p, t)
		switch {
		case err != nil || next == attemptDone:
			return err
		case next == attemptRedirected:
			if t, err = pace.again(ctx, part, p, refused.status, refused.mapIndex, t); err != nil {
				return err
			}
		default:
			t = c.router.current()
		}
	}
}

// pacer paces the resends of one request by the routing settings.
func (c *client) pacer() *redirectPacer { return newRedirectPacer(c.router, c.cfg, c.stats) }

// callInternal sends one request on the internal lane to node id, over the routing table's connection.
func (c *client) callInternal(ctx context.Context, id NodeID, op transport.Op, payload []byte) ([]byte, error) {
	p := c.router.peerByID(id)
	if p == nil || p.local {
		return nil, fmt.Errorf("%w %s", errNoPeer, id)
	}
	return p.internal.Call(ctx, op, payload)
}

// callNode sends a backup's or a restore's request to node id: OpRestore on the data lane, the others on
// the internal lane, this node's own straight to its owner.
func (c *client) callNode(ctx context.Context, id NodeID, op transport.Op, payload []byte) ([]byte, error) {
	p := c.router.peerByID(id)
	switch {
	case p == nil:
		return nil, fmt.Errorf("%w %s", errNoPeer, id)
	case p.local && op == kv.OpRestore:
		return c.local.serveRestore(ctx, payload), nil
	case p.local:
		return c.local.serveBackup(payload)
	case op == kv.OpRestore:
		return p.client.Call(ctx, op, payload)
	}
	return p.internal.Call(ctx, op, payload)
}

// execute routes one key operation to the active owner of its partition, in one hop. Replies that say the
// map is stale refresh it and retry, a bounded number of times; other failures return at once.
func (c *client) execute(ctx context.Context, op transport.Op, req *kv.Request) (kv.Reply, error) {
	return c.route(ctx, op, req, true)
}

// route is execute; with waitLocks false, a key held by a transaction answers StatusLocked at once instead
// of being waited for. A write, whatever its outcome, drops the key from the near cache before it returns.
func (c *client) route(ctx context.Context, op transport.Op, req *kv.Request, waitLocks bool) (kv.Reply, error) {
	if c.near != nil && !readOnly(op) {
		defer c.near.forget(req.Key)
	}
	start := time.Now()
	reply, err := c.routeKey(ctx, op, req, waitLocks)
	c.callerOp(op, reply.Status, err, start)
	return reply, err
}

func (c *client) routeKey(ctx context.Context, op transport.Op, req *kv.Request, waitLocks bool) (reply kv.Reply, err error) {
	if c.life.Err() != nil {
		return kv.Reply{}, ErrClosed
	}
	var locked lockWait
	err = c.routeSegment(ctx, c.layout.KeySegment(req.Key), c.pacer(), func(p *peer, t *routingTable) (nextAttempt, refusal, error) {
		var err error
		reply, err = c.send(ctx, p, op, req)
		switch {
		case err == nil && reply.Status == StatusLocked && waitLocks:
			return attemptAgain, refusal{}, locked.wait(ctx, *c.cfg) // waiting for a transaction is not a routing retry
		case err != nil || !redirects(&reply, t.m.Index):
			return attemptDone, refusal{}, err
		}
		return attemptRedirected, refusal{reply.Status, reply.MapIndex}, nil
	})
	if err != nil {
		return kv.Reply{}, err
	}
	return reply, nil
}

// redirectPacer paces the resends of one request that owners refuse for a stale routing table, for every
// path that routes by the table (keys, scans, watches): a refusal refreshes the table, and the request goes
// again at once when that brought a newer one, or else after a pause that doubles, up to maxPause; past
// MaxRetries refusals it fails with a RoutingError.
type redirectPacer struct {
	router   *router
	clock    Clock
	pause    time.Duration
	maxPause time.Duration // 0: no bound
	limit    int
	refused  int
	// redirects and retries count the refusals and the resends; nil counts nothing.
	redirects, retries *atomic.Uint64
}

// newRedirectPacer returns a pacer with the routing settings of cfg, counting into stats (nil: not counted).
func newRedirectPacer(r *router, cfg *Config, stats *nodeStats) *redirectPacer {
	rp := &redirectPacer{router: r, clock: cfg.Clock, pause: cfg.RetryBackoff, limit: cfg.MaxRetries}
	if stats != nil {
		rp.redirects, rp.retries = &stats.redirects, &stats.retries
	}
	return rp
}

// again takes a refusal, with status last, by p (whose map is at index theirs) of a request for partition
// part routed with table used, and returns the table to route the next attempt with.
func (rp *redirectPacer) again(ctx context.Context, part int, p *peer, last Status, theirs uint64, used *routingTable) (*routingTable, error) {
	if err := rp.refuse(part, last); err != nil {
		return nil, err
	}
	if err := rp.resend(ctx, rp.router.refreshAfter(ctx, p, theirs, used)); err != nil {
		return nil, err
	}
	return rp.router.current(), nil
}

// refuse counts a refusal, with status last, of a request for partition part, and fails past the limit.
func (rp *redirectPacer) refuse(part int, last Status) error {
	rp.refused++
	add(rp.redirects, 1)
	if rp.refused > rp.limit {
		return &RoutingError{Partition: part, Attempts: rp.refused, Last: last}
	}
	return nil
}

// resend readies the next attempt: at once when refreshed says the routing table is newer, or else after a
// pause.
func (rp *redirectPacer) resend(ctx context.Context, refreshed bool) error {
	if !refreshed {
		if err := rp.wait(ctx); err != nil {
			return err
		}
	}
	add(rp.retries, 1)
	return nil
}

// wait pauses before a resend that no refresh made worth sending at once, and doubles the next pause.
func (rp *redirectPacer) wait(ctx context.Context) error {
	if err := sleepCtx(ctx, rp.clock, rp.pause); err != nil {
		return err
	}
	rp.pause *= 2
	if rp.maxPause > 0 {
		rp.pause = min(rp.pause, rp.maxPause)
	}
	return nil
}

// lockWait paces the retries of an operation whose key a transaction holds. The transaction resolves the
// key, or its owner does within TxnTimeout of the prepare: past twice that, the operation fails with
// ErrLocked.
type lockWait struct {
	since time.Time
	pause time.Duration
}

func (w *lockWait) wait(ctx context.Context, cfg Config) error {
	now := cfg.Clock.Now()
	if w.since.IsZero() {
		w.since, w.pause = now, cfg.RetryBackoff
	}
	if waited := now.Sub(w.since); waited > 2*cfg.TxnTimeout {
		return fmt.Errorf("%w: still held after %v", ErrLocked, waited.Round(time.Millisecond))
	}
	if err := sleepCtx(ctx, cfg.Clock, w.pause); err != nil {
		return err
	}
	w.pause = min(2*w.pause, max(cfg.TxnTimeout/16, cfg.RetryBackoff))
	return nil
}

// send delivers one key operation to p: in-process when p is this node, else one request on p's connection.
func (c *client) send(ctx context.Context, p *peer, op transport.Op, req *kv.Request) (kv.Reply, error) {
	if p.local {
		c.stats.localOps.Add(1)
		local := *req
		local.Args = kv.CloneValues(req.Args) // a collection keeps its arguments; the store copies a value
		reply := c.local.serveKV(ctx, op, &local)
		reply.Value = bytes.Clone(reply.Value) // nor may it change the stored value; an empty one stays non-nil
		reply.Values = kv.CloneValues(reply.Values)
		return reply, nil
	}
	p.sent.Add(1)
	resp, err := p.client.Call(ctx, op, marshalRequest(req))
	if err != nil {
		return kv.Reply{}, fmt.Errorf("zaris: %s to node %s (%s): %w", opName(op), p.id, p.addr, err)
	}
	var reply kv.Reply
	if err := decodeReply(&reply, resp); err != nil { // reply.Value aliases resp, which is ours alone
		return kv.Reply{}, fmt.Errorf("zaris: reply from node %s: %w", p.id, err)
	}
	return reply, nil
}

// callerOp and ownerOp count an operation on each side; both do nothing when metrics are off.
func (c *client) callerOp(op transport.Op, status Status, err error, since time.Time) {
	if c.metrics != nil {
		c.metrics.caller.observe(op, status, err, time.Since(since))
	}
}
