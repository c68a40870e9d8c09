package zaris

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// ScanOption configures Scan.
type ScanOption func(*scanOptions)

type scanOptions struct {
	match []byte
	count int
}

// DefaultScanCount is the keys a page of Scan visits unless ScanCount says otherwise.
const DefaultScanCount = 1000

// ScanMatch makes Scan return only the keys that match pattern, a Redis glob: * any run of bytes, ? one
// byte, [abc], [^abc] and [a-z] one byte of a class, \ making the next byte literal. The owners filter the
// keys, so the ones that do not match never cross the network. A pattern longer than 64 KiB is refused
// (ErrInvalidRequest).
func ScanMatch(pattern string) ScanOption {
	return func(o *scanOptions) { o.match = []byte(pattern) }
}

// ScanCount sets how many keys one page visits on its owner (DefaultScanCount when n < 1). A page also
// stops at a frame's worth of keys, and at the end of the ranges its owner serves.
func ScanCount(n int) ScanOption {
	return func(o *scanOptions) { o.count = n }
}

// Scan iterates over the keys of the whole cluster. It walks the key space in slot order, one page at a
// time, asking the owner of each range for the keys from where the last page stopped, so it follows moves
// and failovers as they happen: a page refused by a node that no longer owns its range goes to the new
// owner, and a page whose owner cannot be reached, or is handing its range over, goes again until the range
// has an owner that serves it, for up to EvictionTimeout (the longest the cluster leaves a range of a failed
// node without one) or until ctx ends.
//
// As Redis's SCAN, it returns every key present for the whole scan at least once; keys written or deleted
// during the scan may or may not be returned, and expired keys are not. Unlike Redis's, it never returns a
// key twice: a key's position in the walk is the same on every node and the walk only moves forward. Scan yields keys alone: reading values in the same
// pass would make every page as large as its values, and the values would be no more consistent with each
// other than those of a later GetMany, which fetches them one request per owner.
//
// An error ends the iteration: it is yielded once, with an empty key.
func (n *Node) Scan(ctx context.Context, opts ...ScanOption) iter.Seq2[string, error] {
	o := scanOptions{count: DefaultScanCount}
	for _, opt := range opts {
		opt(&o)
	}
	if o.count < 1 {
		o.count = DefaultScanCount
	}
	return func(yield func(string, error) bool) {
		req := kv.ScanRequest{Cursor: kv.ScanDone, Count: o.count, Match: o.match}
		for {
			reply, err := n.client.scanPage(ctx, &req)
			if err != nil {
				yield("", err)
				return
			}
			for _, key := range reply.Keys {
				if !yield(key, nil) {
					return
				}
			}
			if reply.Next == kv.ScanDone {
				return
			}
			req.Cursor = reply.Next
		}
	}
}

// scanPage sends one page to the owner of the cursor's range, as execute sends a key operation: a reply
// that names another owner refreshes the routing table and goes again, a bounded number of times. A page
// is only a read, so one whose owner cannot be reached, or is changing, goes again too, until the range has
// an owner that serves it or EvictionTimeout has passed.
func (c *client) scanPage(ctx context.Context, req *kv.ScanRequest) (reply kv.ScanReply, err error) {
	seg := c.layout.SlotSegment(kv.ScanSlot(req.Cursor))
	part := c.layout.SegmentPartition(seg)
	pace := c.pacer()
	pace.maxPause = max(c.cfg.FailoverTimeout/8, c.cfg.RetryBackoff)
	var waitingSince time.Time // since the owner was first found unreachable or changing
	err = c.routeSegment(ctx, seg, pace, func(p *peer, t *routingTable) (nextAttempt, refusal, error) {
		var err error
		reply, err = c.sendScan(ctx, p, req)
		transient := lostOwner(err) || err == nil && reply.Status == StatusOwnershipChanging
		switch {
		case err == nil && reply.Status == StatusSuccess:
			return attemptDone, refusal{}, nil
		case transient:
			now := c.cfg.Clock.Now()
			if waitingSince.IsZero() {
				waitingSince = now
			} else if now.Sub(waitingSince) > c.cfg.EvictionTimeout {
				return attemptDone, refusal{}, scanFailed(part, p, reply, err)
			}
			c.router.refreshAfter(ctx, p, reply.MapIndex, t)
			if err := pace.wait(ctx); err != nil {
				return attemptDone, refusal{}, err
			}
			c.stats.retries.Add(1)
			return attemptAgain, refusal{}, nil
		case err != nil || !scanRedirects(&reply, t.m.Index):
			return attemptDone, refusal{}, scanFailed(part, p, reply, err)
		}
		return attemptRedirected, refusal{reply.Status, reply.MapIndex}, nil
	})
	if err != nil {
		return kv.ScanReply{}, err
	}
	return reply, nil
}

// scanFailed is the error of a page that failed on p: err if the request failed, else the reply's status.
func scanFailed(part int, p *peer, reply kv.ScanReply, err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("zaris: scan of partition %d on node %s: %w", part, p.id, statusErr(reply.Status))
}

// lostOwner reports whether err says the owner could not be reached, as when it has just died.
func lostOwner(err error) bool {
	return errors.Is(err, transport.ErrUnreachable) || errors.Is(err, transport.ErrConnectionLost)
}

// scanRedirects is redirects for a scan's reply.
func scanRedirects(reply *kv.ScanReply, index uint64) bool {
	return redirects(&kv.Reply{Status: reply.Status, MapIndex: reply.MapIndex}, index)
}

// sendScan sends one page request to p: in-process when p is this node.
func (c *client) sendScan(ctx context.Context, p *peer, req *kv.ScanRequest) (kv.ScanReply, error) {
	if p.local {
		c.stats.localOps.Add(1)
		return c.local.serveScan(ctx, req, scanRouted), nil
	}
	payload, err := encode(req)
	if err != nil {
		return kv.ScanReply{}, err
	}
	p.sent.Add(1)
	resp, err := p.client.Call(ctx, kv.OpScan, payload)
	if err != nil {
		return kv.ScanReply{}, fmt.Errorf("zaris: scan to node %s (%s): %w", p.id, p.addr, err)
	}
	var reply kv.ScanReply
	if err := decode(resp, &reply); err != nil {
		return kv.ScanReply{}, fmt.Errorf("zaris: scan reply from node %s: %w", p.id, err)
	}
	return reply, nil
}
