package zaris

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// A bug in one operation must not take down a process that serves other clients and other keys, least of
// all a service that embeds a node. Each entry point that runs code on a client's or a peer's behalf
// recovers a panic, logs it at ERROR with its stack, counts it (zaris_panics_total) and answers an internal
// error. Whether the node goes on serving depends on the store: a write changes a segment only once it has
// computed everything it writes, and marks the segment torn from its first change until the write hook has
// seen it (segmentStore.torn). A panic that leaves a segment torn left a change there that replicas, the
// disk and watchers never received; the node then gives up serving, as a crash does (giveUp), so that its
// partitions fail over to in-sync replicas that hold every acknowledged write and none of the torn one.

// panicSite says where a panic was recovered: the where label of zaris_panics_total.
type panicSite uint8

const (
	panicInOp          panicSite = iota // a key operation applied as owner, for the Go API, a peer or RESP
	panicInRESP                         // a RESP command, outside the key operations it ran
	panicInPeer                         // a peer's data-plane or internal request, outside its key operations
	panicInReplication                  // a replica applying its owner's stream
	panicInBackground                   // a background loop of the node
	panicSites
)

var panicSiteNames = [panicSites]string{"op", "resp", "peer", "replication", "background"}

func (s panicSite) String() string { return panicSiteNames[s] }

// panics counts the panics a node recovered, by site.
type panics [panicSites]atomic.Uint64

// panicGuard contains the panics of a node's entry points: it counts and logs them, and gives up serving
// when one left the store torn.
type panicGuard struct {
	counts panics
	gaveUp atomic.Bool
	log    *slog.Logger
	torn   func(seg int) []int // the torn segments: seg, or every one when seg is negative
	stop   func()              // closes the node, from a goroutine of its own
}

// containPanic handles the panic v recovered at site while running what: it logs it with its stack, counts
// it, and reports whether the store is intact. It checks segment seg, or every segment when seg is
// negative; a torn one makes the node give up serving.
func (g *panicGuard) containPanic(site panicSite, seg int, v any, what string) (intact bool) {
	g.counts[site].Add(1)
	g.log.Error("recovered a panic", "where", site.String(), "in", what, "segment", seg,
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	torn := g.torn(seg)
	if len(torn) == 0 {
		return true
	}
	g.giveUp(torn)
	return false
}

// giveUp stops the node serving after a panic left segments torn. It refuses every request at once
// (partitionRefusal, serveInternal) and closes the node in the background, which the cluster sees as a
// crash: the leader fails the node's partitions over to their in-sync replicas and its replicas are fed
// by the new owners. The embedding service's calls on the node fail with ErrClosed from then on.
func (g *panicGuard) giveUp(torn []int) {
	if !g.gaveUp.CompareAndSwap(false, true) {
		return
	}
	g.log.Error("a panic interrupted a write: the store may be inconsistent, so the node stops serving and its partitions fail over",
		"segments", torn)
	g.stop()
}

// recoverOp, deferred by applyStore and applyAtomically, turns a panic of a key operation on segment seg
// into an internal error in *status.
func (g *panicGuard) recoverOp(op transport.Op, seg int, status *Status) {
	if v := recover(); v != nil {
		g.containPanic(panicInOp, seg, v, opName(op))
		*status = StatusInternal
	}
}

// recoverRead, deferred by a batch's reads that bypass applyStore, turns a panic of a read of segment seg
// into an internal error in *out.
func (g *panicGuard) recoverRead(seg int, out *kv.Reply) {
	if v := recover(); v != nil {
		g.containPanic(panicInOp, seg, v, opName(kv.OpGet))
		*out = kv.Reply{Status: StatusInternal}
	}
}

// recoverRequest, deferred by the transport's handlers, turns a panic serving a peer's request into an
// error reply.
func (g *panicGuard) recoverRequest(site panicSite, op transport.Op, err *error) {
	if v := recover(); v != nil {
		g.containPanic(site, -1, v, opName(op))
		*err = fmt.Errorf("%w serving %s", ErrInternal, opName(op))
	}
}

// guarded runs fn, a round of a background loop, recovering a panic: the loop goes on with its next round
// unless the node gave up.
func (g *panicGuard) guarded(what string, fn func()) {
	defer func() {
		if v := recover(); v != nil {
			g.containPanic(panicInBackground, -1, v, what)
		}
	}()
	fn()
}

// panicking returns k, or with the panicOp test hook a copy of k whose apply panics, under the segment's
// lock and before any change, when the hook names the request.
func (o *owner) panicking(k *keyOperation, op transport.Op, key string) *keyOperation {
	hook := o.cfg.hooks.panicOp
	if hook == nil || !hook(op, key) {
		return k
	}
	injected := *k
	injected.apply = func(*store, int, kv.Request, opLimits) kv.Reply {
		panic("zaris: panic injected into " + k.name)
	}
	return &injected
}
