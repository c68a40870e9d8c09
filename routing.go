package zaris

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// peer is the one connection this node keeps to another node, or the node itself (local: served in-process).
type peer struct {
	id       NodeID
	addr     string
	local    bool
	client   *transport.Client // the data lane: key and batch requests
	internal *transport.Client // the internal lane: replication, proposals, maps (see muxInternal)
	sent     atomic.Uint64     // key requests sent over client
}

// close closes the peer's connections; a local peer has none.
func (p *peer) close() {
	if p.local {
		return
	}
	p.client.Close()
	p.internal.Close()
}

// routingTable is an immutable routing snapshot: segment -> the peer of its partition's active owner,
// resolved ahead of time so routing a key costs a hash and an array index.
type routingTable struct {
	m           *ClusterMap
	segmentPeer []*peer
}

func (t *routingTable) layout() Layout { return t.m.Layout() }

// refreshCause says what installed a routing table.
type refreshCause int

const (
	causePush  refreshCause = iota // a committed change applied on this node
	causePoll                      // the periodic backstop
	causeReact                     // a reply said this node's map was stale
)

// routingStats counts the routing table's installs by cause, and the reactive refreshes that found the
// table already fresh because a concurrent one had just installed it.
type routingStats struct {
	refreshes [3]atomic.Uint64 // indexed by refreshCause
	coalesced atomic.Uint64
}

// routerConfig is what a router needs from its node.
type routerConfig struct {
	id         NodeID
	clusterMap func() *ClusterMap // the map this node has committed
	leader     func() NodeID      // the control plane's leader, "" when unknown
	// fetch asks a peer for its committed map.
	fetch func(ctx context.Context, p *peer) (*ClusterMap, error)
	// dialOptions are the transport options of a lane, for the connections to peers.
	dialOptions func(lane byte) transport.Options
	pollTimeout time.Duration   // bounds one backstop fetch from the leader
	life        context.Context // ends when the node closes
	// installed, when set, learns of each table installed, once requests go by it.
	installed func(old, next *ClusterMap)
	log       *slog.Logger
	stats     *routingStats
}

// router keeps the routing table honest by push, poll and react, and swaps it atomically.
type router struct {
	routerConfig
	table atomic.Pointer[routingTable]
	ready chan struct{} // closed once a table with an assigned partition map is installed

	mu    sync.Mutex // serialises installs and guards peers
	peers map[NodeID]*peer

	refreshMu sync.Mutex // one reactive refresh at a time; the others find the map already fresh
}

func newRouter(cfg routerConfig) *router {
	return &router{routerConfig: cfg, ready: make(chan struct{}), peers: map[NodeID]*peer{}}
}

func (r *router) current() *routingTable { return r.table.Load() }

// latest returns the routing table, first installing this node's committed map if the push of it has not
// landed yet: a caller that saw the map commit is routed by it.
func (r *router) latest() *routingTable {
	if t, m := r.current(), r.clusterMap(); m != nil && (t == nil || m.Index > t.m.Index) {
		r.install(m, causePush)
	}
	return r.current()
}

// await returns the routing table once the cluster has a partition map.
func (r *router) await(ctx context.Context) (*routingTable, error) {
	select {
	case <-r.ready:
		return r.current(), nil
	default:
	}
	select {
	case <-r.ready:
		return r.current(), nil
	case <-r.life.Done():
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrNotReady, ctx.Err())
	}
}

// install swaps in a table for m if m is newer than the current one and reports whether it did.
func (r *router) install(m *ClusterMap, cause refreshCause) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.table.Load()
	if old != nil && old.m.Index >= m.Index {
		return false
	}
	r.table.Store(r.build(old, m))
	r.stats.refreshes[cause].Add(1)
	if r.installed != nil && old != nil {
		r.installed(old.m, m)
	}
	if m.Version > 0 {
		select {
		case <-r.ready:
		default:
			close(r.ready)
		}
	}
	return true
}

// build derives the table for m from old by cloning old's segment array and repointing only the segments
// of partitions whose owner (or the owner's address) changed.
func (r *router) build(old *routingTable, m *ClusterMap) *routingTable {
	layout := m.Layout()
	var segs []*peer
	if old != nil && old.layout() == layout {
		segs = append([]*peer(nil), old.segmentPeer...)
	} else {
		segs = make([]*peer, layout.Segments)
	}
	for p, st := range m.Runtime {
		target := r.peerFor(m, st.Owner)
		first, end := layout.PartitionSegments(p)
		if segs[first] == target {
			continue
		}
		for s := first; s < end; s++ {
			segs[s] = target
		}
	}
	return &routingTable{m: m, segmentPeer: segs}
}

// peerFor returns the connection to id as m describes it, reusing the existing one when the address is
// unchanged. Called with r.mu held.
func (r *router) peerFor(m *ClusterMap, id NodeID) *peer {
	if id == "" {
		return nil
	}
	info, known := m.Nodes[id]
	if p := r.peers[id]; p != nil && (p.local || p.addr == info.DataAddr) {
		return p
	}
	if !known {
		return nil
	}
	p := &peer{id: id, addr: info.DataAddr, local: id == r.id}
	if !p.local {
		p.client = transport.NewClient(info.DataAddr, r.dialOptions(muxData))
		p.internal = transport.NewClient(info.DataAddr, r.dialOptions(muxInternal))
	}
	if prev := r.peers[id]; prev != nil {
		prev.close()
	}
	r.peers[id] = p
	return p
}

// refreshAfter reacts to a redirect from p, whose map is at index theirs, of a request routed with table
// used. It reports whether a retry may go at once, because the table has changed since (by this refresh
// or a concurrent one). False means p is no further ahead than this node, and the caller should back off.
func (r *router) refreshAfter(ctx context.Context, p *peer, theirs uint64, used *routingTable) bool {
	if r.current() != used {
		r.stats.coalesced.Add(1)
		return true
	}
	if theirs <= used.m.Index {
		return false
	}
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	if r.current() != used {
		r.stats.coalesced.Add(1)
		return true
	}
	m, err := r.fetch(ctx, p)
	if err != nil {
		r.log.Debug("refresh routing table", "from", p.id, "err", err)
		return false
	}
	return r.install(m, causeReact)
}

// pollOnce is the backstop, run every PollInterval: it fetches the leader's map in case a push was missed.
func (r *router) pollOnce() {
	m := r.clusterMap()
	if leader := r.leader(); leader != "" && leader != r.id {
		r.mu.Lock()
		p := r.peers[leader]
		r.mu.Unlock()
		if p != nil {
			ctx, cancel := context.WithTimeout(r.life, r.pollTimeout)
			fetched, err := r.fetch(ctx, p)
			cancel()
			if err == nil && fetched.Index > m.Index {
				m = fetched
			}
		}
	}
	r.install(m, causePoll)
}

func (r *router) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.peers {
		p.close()
	}
}

func add(c *atomic.Uint64, n uint64) {
	if c != nil {
		c.Add(n)
	}
}

// redirects reports whether reply, to a caller whose routing table is at map index, sends the caller
// elsewhere or to try again rather than settle the operation. The operation was never applied.
func redirects(reply *kv.Reply, index uint64) bool {
	switch reply.Status {
	case StatusNotReady:
		return true
	case StatusPartitionUnavailable:
		// Refused from an older map than the caller's, as by a restarted node still replaying its maps.
		return reply.MapIndex != 0 && reply.MapIndex < index
	}
	return reply.Status.RequiresRefresh()
}

// fetchMap asks p for its committed cluster map.
func (c *client) fetchMap(ctx context.Context, p *peer) (*ClusterMap, error) {
	if p.local {
		return c.router.clusterMap(), nil
	}
	resp, err := p.internal.Call(ctx, kv.OpGetMap, nil)
	if err != nil {
		return nil, err
	}
	var m ClusterMap
	if err := decode(resp, &m); err != nil {
		return nil, err
	}
	if err := m.fits(c.layout); err != nil {
		return nil, fmt.Errorf("%w (from %s)", err, p.id)
	}
	return &m, nil
}

// peerByID returns the connection to node id as the current map describes it, or nil if unknown.
func (r *router) peerByID(id NodeID) *peer {
	if id == "" {
		return nil
	}
	m := r.clusterMap()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peerFor(m, id)
}
