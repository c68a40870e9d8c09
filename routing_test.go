package zaris

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// routerFixture is a router wired to fakes, without a cluster: the test sets the committed map, the leader
// and the map each peer answers a fetch with, and counts the fetches.
type routerFixture struct {
	r     *router
	stats routingStats
	life  context.Context
	end   context.CancelFunc

	mu        sync.Mutex
	committed *ClusterMap
	leader    NodeID
	remote    map[NodeID]*ClusterMap // a peer missing here fails the fetch
	fetched   []NodeID
}

func newRouterFixture(t *testing.T, id NodeID) *routerFixture {
	f := &routerFixture{remote: map[NodeID]*ClusterMap{}}
	f.life, f.end = context.WithCancel(context.Background())
	f.r = newRouter(routerConfig{
		id:          id,
		clusterMap:  func() *ClusterMap { f.mu.Lock(); defer f.mu.Unlock(); return f.committed },
		leader:      func() NodeID { f.mu.Lock(); defer f.mu.Unlock(); return f.leader },
		fetch:       f.fetch,
		dialOptions: func(lane byte) transport.Options { return transport.Options{MuxByte: lane} },
		pollTimeout: time.Second,
		life:        f.life,
		log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		stats:       &f.stats,
	})
	t.Cleanup(f.r.close)
	return f
}

func (f *routerFixture) fetch(ctx context.Context, p *peer) (*ClusterMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetched = append(f.fetched, p.id)
	if m := f.remote[p.id]; m != nil {
		return m, nil
	}
	return nil, errors.New("unreachable")
}

func (f *routerFixture) fetches() []NodeID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]NodeID(nil), f.fetched...)
}

// routedMap returns an assigned map at index over 4 partitions of 2 segments each, partition p owned by
// owners[p%len(owners)]; every owner is a known node.
func routedMap(index uint64, owners ...NodeID) *ClusterMap {
	m := newClusterMap(Layout{Segments: 8, Partitions: 4}, 1)
	m.Index, m.Version = index, 1
	for _, id := range owners {
		m.Nodes[id] = NodeInfo{ID: id, DataAddr: string(id) + ".invalid:7000"}
	}
	for p := range m.Runtime {
		m.Runtime[p] = PartitionState{Owner: owners[p%len(owners)], Epoch: 1, Health: Healthy}
	}
	return m
}

// segmentOwners returns the node each segment of t routes to.
func segmentOwners(t *routingTable) []NodeID {
	out := make([]NodeID, len(t.segmentPeer))
	for s, p := range t.segmentPeer {
		if p != nil {
			out[s] = p.id
		}
	}
	return out
}

// TestRouterInstallsOnlyNewerMaps checks the push path: a newer map is installed and repoints the segments
// whose owner changed, keeping the connections to unchanged owners, while an older or equal map is ignored.
func TestRouterInstallsOnlyNewerMaps(t *testing.T) {
	f := newRouterFixture(t, "a")
	select {
	case <-f.r.ready:
		t.Fatal("ready before any map")
	default:
	}
	if !f.r.install(routedMap(5, "a", "b"), causePush) {
		t.Fatal("first map not installed")
	}
	<-f.r.ready
	first := f.r.current()
	if got := segmentOwners(first); got[0] != "a" || got[2] != "b" || !first.segmentPeer[0].local || first.segmentPeer[2].local {
		t.Fatalf("segments route to %v; want partition 0 to this node, partition 1 to b", got)
	}
	for _, index := range []uint64{3, 5} {
		if f.r.install(routedMap(index, "c"), causePush) {
			t.Fatalf("map at index %d installed over index 5", index)
		}
	}
	if f.r.current() != first {
		t.Fatal("an older map replaced the table")
	}
	if !f.r.install(routedMap(7, "a", "c"), causePush) {
		t.Fatal("newer map not installed")
	}
	next := f.r.current()
	if got := segmentOwners(next); got[2] != "c" || got[3] != "c" || got[0] != "a" {
		t.Fatalf("after the move segments route to %v; want partition 1 to c", got)
	}
	if next.segmentPeer[0] != first.segmentPeer[0] {
		t.Fatal("an unchanged owner's peer was replaced")
	}
	if got := f.stats.refreshes[causePush].Load(); got != 2 {
		t.Fatalf("%d push installs counted; want 2", got)
	}
	if len(f.fetches()) != 0 {
		t.Fatalf("a push fetched maps: %v", f.fetches())
	}
}

// TestRouterAwaitsAnAssignedMap checks that await waits for a map with partitions assigned, and gives up
// when the router stops.
func TestRouterAwaitsAnAssignedMap(t *testing.T) {
	f := newRouterFixture(t, "a")
	unassigned := routedMap(1, "a")
	unassigned.Version = 0
	f.r.install(unassigned, causePush)
	got := make(chan *routingTable, 1)
	go func() {
		table, err := f.r.await(context.Background())
		if err != nil {
			t.Errorf("await: %v", err)
		}
		got <- table
	}()
	f.r.install(routedMap(2, "a"), causePush)
	if table := <-got; table == nil || table.m.Index != 2 {
		t.Fatalf("await returned %+v; want the table at index 2", table)
	}

	stopped := newRouterFixture(t, "a")
	stopped.end()
	if _, err := stopped.r.await(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("await on a stopped router: %v; want ErrClosed", err)
	}
}

// TestPollInstallsTheLeadersNewerMap checks the backstop: the poll fetches the leader's map and installs it
// when it is newer than the committed one, installs the committed map when the leader's is older, and
// fetches nothing when this node leads.
func TestPollInstallsTheLeadersNewerMap(t *testing.T) {
	f := newRouterFixture(t, "a")
	f.committed = routedMap(5, "a", "b")
	f.leader = "b"
	f.remote["b"] = routedMap(9, "b")
	f.r.install(f.committed, causePush)

	f.r.pollOnce()
	if got := f.r.current().m.Index; got != 9 {
		t.Fatalf("after the poll the table is at index %d; want the leader's 9", got)
	}
	if got := f.fetches(); len(got) != 1 || got[0] != "b" {
		t.Fatalf("the poll fetched from %v; want the leader b once", got)
	}
	if got := f.stats.refreshes[causePoll].Load(); got != 1 {
		t.Fatalf("%d poll installs counted; want 1", got)
	}

	f.mu.Lock()
	f.remote["b"] = routedMap(4, "b")
	f.committed = routedMap(11, "a", "b")
	f.mu.Unlock()
	f.r.pollOnce()
	if got := f.r.current().m.Index; got != 11 {
		t.Fatalf("with the leader behind, the table is at index %d; want the committed 11", got)
	}

	f.mu.Lock()
	f.leader = "a"
	f.committed = routedMap(12, "a", "b")
	f.mu.Unlock()
	f.r.pollOnce()
	if got := len(f.fetches()); got != 2 {
		t.Fatalf("%d fetches after polling as the leader; want still 2", got)
	}
	if got := f.r.current().m.Index; got != 12 {
		t.Fatalf("the leader's poll left the table at index %d; want 12", got)
	}
	if got := f.stats.refreshes[causePoll].Load(); got != 3 {
		t.Fatalf("%d poll installs counted; want 3", got)
	}
}

// TestMovedWithNewerMapRefreshesOnce checks the reactive path: many callers redirected at once by Moved
// replies carrying a newer map index cause one fetch and one install; every other caller coalesces onto it
// and may retry at once.
func TestMovedWithNewerMapRefreshesOnce(t *testing.T) {
	const callers = 32
	f := newRouterFixture(t, "a")
	f.r.install(routedMap(5, "a", "b"), causePush)
	f.remote["b"] = routedMap(9, "b")
	used := f.r.current()
	b := used.segmentPeer[2]
	reply := kv.Reply{Status: StatusMoved, Owner: "b", MapIndex: 9}
	if !redirects(&reply, used.m.Index) {
		t.Fatal("a Moved reply does not redirect")
	}

	start := make(chan struct{})
	var retryNow atomic.Int32
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if f.r.refreshAfter(context.Background(), b, reply.MapIndex, used) {
				retryNow.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()

	if got := f.fetches(); len(got) != 1 || got[0] != "b" {
		t.Fatalf("fetched from %v; want b once", got)
	}
	if got := f.r.current().m.Index; got != 9 {
		t.Fatalf("table at index %d; want 9", got)
	}
	if got := f.stats.refreshes[causeReact].Load(); got != 1 {
		t.Fatalf("%d reactive installs; want 1", got)
	}
	if got := f.stats.coalesced.Load(); got != callers-1 {
		t.Fatalf("%d refreshes coalesced; want %d", got, callers-1)
	}
	if got := retryNow.Load(); got != callers {
		t.Fatalf("%d of %d callers may retry at once; want all", got, callers)
	}
}

// TestMovedWithOlderMapDoesNotRefresh checks that a Moved reply from a peer whose map is no newer than the
// caller's fetches nothing and tells the caller to back off, and that a failed fetch installs nothing.
func TestMovedWithOlderMapDoesNotRefresh(t *testing.T) {
	f := newRouterFixture(t, "a")
	f.r.install(routedMap(5, "a", "b"), causePush)
	used := f.r.current()
	b := used.segmentPeer[2]
	for _, theirs := range []uint64{3, 5} {
		if f.r.refreshAfter(context.Background(), b, theirs, used) {
			t.Fatalf("a Moved reply at index %d allowed an immediate retry", theirs)
		}
	}
	if got := f.fetches(); len(got) != 0 {
		t.Fatalf("fetched from %v for replies no newer than the table", got)
	}

	if f.r.refreshAfter(context.Background(), b, 9, used) {
		t.Fatal("a failed fetch allowed an immediate retry")
	}
	if got := len(f.fetches()); got != 1 {
		t.Fatalf("%d fetches; want 1", got)
	}
	if f.r.current() != used || f.stats.refreshes[causeReact].Load() != 0 || f.stats.coalesced.Load() != 0 {
		t.Fatal("the table changed or a refresh was counted without a newer map")
	}
}

// TestFoundersReceiveTheFirstMapByPush starts a new cluster whose routing backstop never runs: every founder
// installs the first partition map as the control plane commits it to that founder, and is ready with no
// poll and no redirect, so that all the founders of a new cluster serve together.
func TestFoundersReceiveTheFirstMapByPush(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *Config) { cfg.PollInterval = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), minWait)
	defer cancel()
	for _, n := range c.live() {
		if err := n.Ready(ctx); err != nil {
			t.Fatalf("%s: %v", n.id, err)
		}
		s := &n.stats.routingStats
		if push, poll, react := s.refreshes[causePush].Load(), s.refreshes[causePoll].Load(), s.refreshes[causeReact].Load(); push == 0 || poll+react != 0 {
			t.Errorf("%s installed its maps %d times by push, %d by poll and %d on a redirect; want every one by push", n.id, push, poll, react)
		}
	}
}
