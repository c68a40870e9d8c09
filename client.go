package zaris

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

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
	local   localOwner
	stats   *nodeStats
	metrics *opMetrics      // nil with Config.DisableMetrics
	life    context.Context // ends when the node closes
	wg      *sync.WaitGroup // the node's, which Close waits on
	log     *slog.Logger
}

// localOwner serves in process what the routing table sends to this node.
type localOwner interface {
	serveKV(ctx context.Context, op transport.Op, req *kvRequest) kvReply
	serveScan(ctx context.Context, req *scanRequest, mode scanMode) scanReply
	serveWatch(ctx context.Context, req *watchRequest) watchReply
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

// errNoPeer says the routing table holds no connection to a node: the map does not list it, or it is this
// node.
var errNoPeer = errors.New("zaris: no connection to node")

// callInternal sends one request on the internal lane to node id, over the routing table's connection.
func (c *client) callInternal(ctx context.Context, id NodeID, op transport.Op, payload []byte) ([]byte, error) {
	p := c.router.peerByID(id)
	if p == nil || p.local {
		return nil, fmt.Errorf("%w %s", errNoPeer, id)
	}
	return p.internal.Call(ctx, op, payload)
}
