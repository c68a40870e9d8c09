package zaris

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris/durability"
)

// watchRetain is the op log in memory of the watch tests: small, so that a paused watcher falls behind it.
const watchRetain = 1024

// watchCluster starts n nodes, RF 2, with fast expiry, short polls and a small op log.
func watchCluster(t *testing.T, n int, more ...func(*Config)) *testCluster {
	return startCluster(t, n, replicated(2, append([]func(*Config){func(cfg *Config) {
		cfg.ReapInterval = 5 * time.Millisecond
		cfg.OpLogRetain = watchRetain
		cfg.WatchPoll = 200 * time.Millisecond
		cfg.FailoverTimeout = time.Second
		cfg.EvictionTimeout = 2 * time.Second
		cfg.Segments, cfg.Partitions = 256, 16 // few partitions to move when the cluster changes
	}}, more...)...))
}

// tagInPartition returns a hash tag whose slot falls in partition p.
func tagInPartition(layout Layout, p int) string {
	for i := 0; ; i++ {
		if tag := fmt.Sprintf("w%d", i); layout.KeyPartition("{"+tag+"}") == p {
			return tag
		}
	}
}

// watchLog collects what a watch delivers, and can stop reading it for a while.
type watchLog struct {
	mu     sync.Mutex
	events []WatchEvent
	gate   sync.Mutex // held while reading is paused
	done   chan struct{}
}

func readWatch(ch <-chan WatchEvent) *watchLog {
	l := &watchLog{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ev := range ch {
			l.gate.Lock()
			l.gate.Unlock()
			l.mu.Lock()
			l.events = append(l.events, ev)
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *watchLog) snapshot() []WatchEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]WatchEvent(nil), l.events...)
}

// lastRevision is the revision of the last event delivered, 0 before any.
func (l *watchLog) lastRevision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == 0 {
		return 0
	}
	return l.events[len(l.events)-1].Revision
}

// watchWriters write, delete and let expire the keys of one hash tag from several nodes, each put with a
// value of its own, and remember the values of the puts that were acknowledged.
type watchWriters struct {
	tag     string
	pace    time.Duration // between two writes of a writer; a millisecond when zero
	stop    chan struct{}
	wg      sync.WaitGroup
	acked   sync.Map // value -> key, for every acknowledged put
	puts    atomic.Int64
	lastErr atomic.Value // the last write error, for a failure's message
}

func (w *watchWriters) start(n *Node, seed uint64) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		rng := rand.New(rand.NewPCG(seed, 7))
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			key := fmt.Sprintf("{%s}k%d", w.tag, rng.IntN(16))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			var err error
			switch r := rng.IntN(10); {
			case r < 2:
				_, err = n.Delete(ctx, key)
			default:
				value := fmt.Sprintf("%s/%d", n.id, i)
				var opts []PutOption
				if r < 5 {
					opts = append(opts, WithTTL(time.Duration(1+rng.IntN(20))*time.Millisecond))
				}
				if err = n.Put(ctx, key, []byte(value), opts...); err == nil {
					w.acked.Store(value, key)
					w.puts.Add(1)
				}
			}
			cancel()
			if err != nil {
				w.lastErr.Store(fmt.Errorf("%s: %w", n.id, err))
			}
			if errors.Is(err, ErrClosed) {
				return
			}
			// Paced, so that a watcher that reads on keeps within the op log on a loaded machine too.
			time.Sleep(max(w.pace, time.Millisecond))
		}
	}()
}

// waitPuts waits until count more puts have been acknowledged.
func (w *watchWriters) waitPuts(t *testing.T, count int64) {
	t.Helper()
	target := w.puts.Load() + count
	deadline := time.Now().Add(60 * time.Second)
	for w.puts.Load() < target {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d puts acknowledged in 60s; the last write error: %v", count-(target-w.puts.Load()), count, w.lastErr.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchDeliversEveryEventAcrossFailoverAndMigration watches a hash tag from a node that holds no copy of
// it while writers on several nodes put, delete and let keys expire. The watch is paused until it falls
// behind the owner's op log, its owner is killed (failover), and a node joins and the partition moves.
// Every revision of the segment is delivered once, in order, except across the compaction markers, of
// which the pause forced one; and what the watch delivered rebuilds exactly the keys' final state.
func TestWatchDeliversEveryEventAcrossFailoverAndMigration(t *testing.T) {
	longScenario(t)
	t.Parallel()
	c := watchCluster(t, 3)
	watcherNode, p, nodes := c.awayFromLeader()
	owner, replica := nodes[0], nodes[1]
	tag := tagInPartition(owner.layout, p)
	seg := owner.layout.KeySegment("{" + tag + "}")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := owner.own.store.revision(seg)
	ch, err := watcherNode.WatchTag(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	log := readWatch(ch)
	w := &watchWriters{tag: tag, stop: make(chan struct{})}
	for i, n := range []*Node{watcherNode, owner, replica} {
		w.start(n, uint64(i))
	}
	owners := []NodeID{owner.id}

	w.waitPuts(t, 100)
	// Paused, the watcher stops polling: the owner's log moves past it and it is sent the state.
	log.gate.Lock()
	behind := owner.own.store.revision(seg) + 2*watchRetain
	waitFor(t, 60*time.Second, "the owner's log to move past the paused watcher", func() bool {
		return owner.own.store.revision(seg) > behind
	})
	log.gate.Unlock()
	waitFor(t, 30*time.Second, "a compaction marker", func() bool { return countKind(log.snapshot(), WatchCompacted) > 0 })

	delivered := log.lastRevision()
	c.kill(c.indexOf(owner.id))
	c.waitFailedOver(owner.id, 30*time.Second)
	var promoted *Node // the map may first show the partition with no owner, until the leader promotes one
	waitFor(t, 30*time.Second, "a live owner of the partition", func() bool {
		promoted = c.nodeByID(c.currentMap().Runtime[p].Owner)
		return promoted != nil
	})
	owners = append(owners, promoted.id)
	// Revisions do not go back across failover: the new owner holds every revision the watch delivered.
	if now := promoted.own.store.revision(seg); now < delivered {
		t.Fatalf("the new owner is at revision %d of segment %d; the watch delivered up to %d", now, seg, delivered)
	}
	w.waitPuts(t, 100)
	c.waitStable(60 * time.Second) // the dead node evicted

	// A node joins; the partition moves off its owner of now, which drains as it leaves, if the new plan
	// does not move it already.
	joined := c.add(1)
	c.waitStable(60 * time.Second)
	if current := c.currentMap().Runtime[p].Owner; current == owners[1] {
		t.Logf("the join left the partition on %s, which leaves", current)
		leaving := c.nodeByID(current)
		leaveCtx, stop := context.WithTimeout(context.Background(), 60*time.Second)
		defer stop()
		if err := leaving.Leave(leaveCtx); err != nil {
			t.Fatalf("%s leaves: %v", current, err)
		}
		c.forget(c.indexOf(current), leaving)
	}
	var moved NodeID
	waitFor(t, 60*time.Second, "the partition to move to a third owner", func() bool {
		moved = c.currentMap().Runtime[p].Owner // "" while it has none
		return moved != "" && moved != owners[1] && moved != owner.id && c.nodeByID(moved) != nil
	})
	owners = append(owners, moved)
	w.start(joined, 3)
	w.waitPuts(t, 100)
	close(w.stop)
	w.wg.Wait()

	final := c.nodeByID(owners[2])
	waitWatchCaughtUp(t, final, seg, log)
	cancel()
	<-log.done
	events := log.snapshot()
	t.Logf("owners %v (joined %s); %d events from revision %d to %d", owners, joined.id, len(events), start, final.own.store.revision(seg))

	live, skipped, markers := checkWatchOrder(t, events, start)
	if want := int(final.own.store.revision(seg)-start) - skipped; live != want {
		t.Fatalf("delivered %d events; the segment moved from %d to %d, %d of it compacted: want %d",
			live, start, final.own.store.revision(seg), skipped, want)
	}
	t.Logf("%d compaction markers, skipping %d revisions", markers, skipped)
	if markers == 0 {
		t.Fatal("the paused watcher was never sent a compaction marker")
	}
	for _, kind := range []WatchEventKind{WatchPut, WatchDelete, WatchExpire} {
		if countKind(events, kind) == 0 {
			t.Fatalf("no %v event among %d", kind, len(events))
		}
	}
	checkAckedPutsDelivered(t, w, events, skipped)
	checkWatchRebuildsState(t, events, final, seg, tag)
}

// TestWatchReattachesAfterALostConnection cuts a watcher's node off from the owner while a writer goes on:
// once the link heals, the watch resumes from the last revision it delivered, and from the owner's log,
// which still reaches back that far, so every revision comes once, in order, with no compaction.
func TestWatchReattachesAfterALostConnection(t *testing.T) {
	t.Parallel()
	// Leadership must stay where it is: a watcher's node elected during the cut would cut the owner off from
	// the control plane, and its writes with it.
	c := watchCluster(t, 3, steadyControl)
	leader, p, nodes := c.awayFromLeader()
	owner, watcherNode := nodes[0], nodes[1]
	tag := tagInPartition(owner.layout, p)
	seg := owner.layout.KeySegment("{" + tag + "}")
	ctx, cancel := context.WithCancel(bg(t))
	defer cancel()
	start := owner.own.store.revision(seg)
	ch, err := watcherNode.WatchTag(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	log := readWatch(ch)
	w := &watchWriters{tag: tag, stop: make(chan struct{}), pace: 5 * time.Millisecond}
	w.start(leader, 1)
	w.waitPuts(t, 50)
	c.faults.Partition(string(owner.id), string(watcherNode.id))
	c.faults.Reset(string(owner.id), string(watcherNode.id))
	cutAt := owner.own.store.revision(seg) // no reply received before the cut reveals more
	w.waitPuts(t, 100)
	if got := log.lastRevision(); got > cutAt {
		t.Fatalf("the watch delivered up to %d while cut off from the owner, which was at %d then", got, cutAt)
	}
	c.faults.HealAll()
	w.waitPuts(t, 50)
	close(w.stop)
	w.wg.Wait()
	waitWatchCaughtUp(t, owner, seg, log)
	cancel()
	<-log.done
	events := log.snapshot()
	live, skipped, markers := checkWatchOrder(t, events, start)
	if markers != 0 || live != int(owner.own.store.revision(seg)-start) {
		t.Fatalf("delivered %d events with %d markers skipping %d; want %d, every revision from %d to %d",
			live, markers, skipped, owner.own.store.revision(seg)-start, start, owner.own.store.revision(seg))
	}
	checkAckedPutsDelivered(t, w, events, 0)
	checkWatchRebuildsState(t, events, owner, seg, tag)
}

// checkWatchOrder checks that live events come at consecutive revisions from start, each once, and that
// a compaction marker only moves forward, followed by state at its revision. It returns the live events,
// waitWatchCaughtUp waits until every key of seg with a TTL on owner has expired and the watch has delivered
// up to the segment's revision.
func waitWatchCaughtUp(t *testing.T, owner *Node, seg int, log *watchLog) {
	t.Helper()
	waitFor(t, 30*time.Second, "every key with a TTL to expire and the watch to catch up", func() bool {
		_, entries := owner.own.store.snapshot(seg)
		for _, e := range entries {
			if e.ExpireAt != 0 {
				return false
			}
		}
		return log.lastRevision() == owner.own.store.revision(seg)
	})
}

// the revisions compaction skipped, and the markers.
func checkWatchOrder(t *testing.T, events []WatchEvent, start uint64) (live, skipped, markers int) {
	t.Helper()
	at := start
	for i, ev := range events {
		switch ev.Kind {
		case WatchCompacted:
			if ev.Revision < at {
				t.Fatalf("event %d: compaction marker at %d, behind the %d delivered", i, ev.Revision, at)
			}
			skipped += int(ev.Revision - at)
			markers++
			at = ev.Revision
		case WatchState:
			if ev.Revision != at || ev.Version > at {
				t.Fatalf("event %d: state %s@%d at revision %d, after a marker at %d", i, ev.Key, ev.Version, ev.Revision, at)
			}
		default:
			if ev.Revision != at+1 || ev.Version != ev.Revision {
				t.Fatalf("event %d: %v %s at revision %d (version %d) after %d: a gap or a duplicate", i, ev.Kind, ev.Key, ev.Revision, ev.Version, at)
			}
			live++
			at = ev.Revision
		}
	}
	return live, skipped, markers
}

// checkAckedPutsDelivered checks that every acknowledged put was delivered, but for at most the revisions
// compaction skipped.
func checkAckedPutsDelivered(t *testing.T, w *watchWriters, events []WatchEvent, skipped int) {
	t.Helper()
	delivered := map[string]bool{}
	for _, ev := range events {
		if ev.Kind == WatchPut {
			delivered[string(ev.Value)] = true
		}
	}
	acked, missing := 0, 0
	w.acked.Range(func(value, _ any) bool {
		acked++
		if !delivered[value.(string)] {
			missing++
		}
		return true
	})
	if missing > skipped {
		t.Fatalf("%d of %d acknowledged puts never delivered; compaction skipped only %d revisions", missing, acked, skipped)
	}
	t.Logf("%d acknowledged puts, %d delivered as puts, %d inside compacted spans", acked, acked-missing, missing)
}

// checkWatchRebuildsState replays the events (a marker resets the view to the state after it) and checks
// that the result is the tag's keys as the final owner holds them.
func checkWatchRebuildsState(t *testing.T, events []WatchEvent, owner *Node, seg int, tag string) {
	t.Helper()
	view := map[string]string{}
	for _, ev := range events {
		switch ev.Kind {
		case WatchCompacted:
			view = map[string]string{}
		case WatchPut, WatchState:
			view[ev.Key] = string(ev.Value)
		default:
			delete(view, ev.Key)
		}
	}
	_, entries := owner.own.store.snapshot(seg)
	held := map[string]string{}
	for _, e := range entries {
		if KeySlot(e.Key) == KeySlot("{"+tag+"}") {
			held[e.Key] = string(e.Value)
		}
	}
	if fmt.Sprint(view) != fmt.Sprint(held) {
		t.Fatalf("the watch rebuilds %v; the owner holds %v", view, held)
	}
}

func countKind(events []WatchEvent, kind WatchEventKind) int {
	n := 0
	for _, ev := range events {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// watchWireSeeds are the polls and replies the watch fuzzers start from.
func watchWireSeeds() ([]watchRequest, []watchReply) {
	return []watchRequest{
			{Watcher: 1, Key: "k", After: 9, Wait: int64(time.Second)},
			{Watcher: 2, Key: "{tag}", Slot: true, Latest: true},
		}, []watchReply{
			{Status: StatusSuccess, Revision: 7, Events: []watchEvent{
				{Kind: WatchPut, Key: "k", Value: []byte("v"), Version: 6, Revision: 6},
				{Kind: WatchExpire, Key: "k", Version: 7, Revision: 7}}},
			{Status: StatusSuccess, Revision: 12, Compacted: true,
				State: []durability.Entry{{Key: "{t}a", Value: []byte("x"), ExpireAt: 3, Version: 11}}},
			{Status: StatusMoved, Owner: "n2", Epoch: 4, MapIndex: 30},
			{Status: StatusTooManyWatchers},
		}
}

// FuzzDecodeWatchRequest fuzzes the kv.OpWatch request, read with the reflective codec.
func FuzzDecodeWatchRequest(f *testing.F) {
	requests, _ := watchWireSeeds()
	for i := range requests {
		b, err := encode(&requests[i])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(fuzzReflective[watchRequest])
}

// FuzzDecodeWatchReply fuzzes the kv.OpWatch reply, which the watcher's node reads with the reflective codec.
func FuzzDecodeWatchReply(f *testing.F) {
	_, replies := watchWireSeeds()
	for i := range replies {
		b, err := encode(&replies[i])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(fuzzReflective[watchReply])
}

// nextEvent returns the watch's next event, failing the test if none comes in time.
func nextEvent(t *testing.T, ch <-chan WatchEvent) WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10s")
	}
	return WatchEvent{}
}

// TestWatchFromResumesAfterAVersion checks a key watch on a remote owner: WatchFrom delivers the key's
// events after the version given, then its deletes and expiries as they come, and nothing of other keys.
func TestWatchFromResumesAfterAVersion(t *testing.T) {
	c := watchCluster(t, 2)
	watcherNode := c.node(0)
	key := c.keyOwnedBy("resume", c.node(1))
	other := c.keyOwnedBy("other", c.node(1))
	ctx, cancel := context.WithCancel(bg(t))
	defer cancel()
	var versions []uint64
	for i := 1; i <= 3; i++ {
		if err := c.node(1).Put(ctx, key, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		e, err := watcherNode.GetEntry(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, e.Version)
	}
	for _, tag := range []string{"", "a}b"} {
		if _, err := watcherNode.WatchTag(ctx, tag); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("WatchTag(%q): err = %v; want ErrInvalidRequest", tag, err)
		}
	}
	ch, err := watcherNode.Watch(ctx, key, WatchFrom(versions[0]))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range versions[1:] {
		if ev := nextEvent(t, ch); ev.Kind != WatchPut || ev.Key != key || string(ev.Value) != fmt.Sprint(i+2) || ev.Version != want {
			t.Fatalf("event %d: %+v; want the put of %d at version %d", i, ev, i+2, want)
		}
	}
	if err := watcherNode.Put(ctx, other, []byte("not watched")); err != nil {
		t.Fatal(err)
	}
	if _, err := watcherNode.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, ch); ev.Kind != WatchDelete || ev.Key != key || ev.Version <= versions[2] {
		t.Fatalf("after the delete: %+v; want its delete event after version %d", ev, versions[2])
	}
	if err := watcherNode.Put(ctx, key, []byte("brief"), WithTTL(20*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	put := nextEvent(t, ch)
	expired := nextEvent(t, ch)
	if put.Kind != WatchPut || string(put.Value) != "brief" || expired.Kind != WatchExpire || expired.Key != key || expired.Version <= put.Version {
		t.Fatalf("after a put with a TTL: %+v then %+v; want the put, then its expiry", put, expired)
	}
	cancel()
	for ev := range ch {
		t.Fatalf("event after the watch ended: %+v", ev)
	}
}

// TestWatchersAreBoundedPerOwner checks MaxWatchers: a watch beyond it fails with ErrTooManyWatchers, and a
// watch that ended frees its place once it has stopped polling.
func TestWatchersAreBoundedPerOwner(t *testing.T) {
	t.Parallel()
	c := watchCluster(t, 2, func(cfg *Config) { cfg.MaxWatchers = 1 })
	key := c.keyOwnedBy("bounded", c.node(1))
	first, stop := context.WithCancel(bg(t))
	if _, err := c.node(0).Watch(first, key); err != nil {
		t.Fatal(err)
	}
	if _, err := c.node(0).Watch(bg(t), key); !errors.Is(err, ErrTooManyWatchers) {
		t.Fatalf("second watch on an owner with MaxWatchers 1: err = %v; want ErrTooManyWatchers", err)
	}
	stop()
	waitFor(t, 10*time.Second, "the ended watch to free its place", func() bool {
		ctx, cancel := context.WithCancel(bg(t))
		defer cancel()
		_, err := c.node(0).Watch(ctx, key)
		if err != nil && !errors.Is(err, ErrTooManyWatchers) {
			t.Fatal(err)
		}
		return err == nil
	})
}

// TestWatchConfigIsValidated checks that the watch bounds are refused when they make no sense.
func TestWatchConfigIsValidated(t *testing.T) {
	for name, tweak := range map[string]func(*Config){
		"MaxWatchers negative":          func(c *Config) { c.MaxWatchers = -1 },
		"MaxWatchers over half the cap": func(c *Config) { c.MaxWatchers = c.DataMaxConnRequests/2 + 1 },
		"WatchBufferEvents negative":    func(c *Config) { c.WatchBufferEvents = -1 },
		"WatchBufferBytes negative":     func(c *Config) { c.WatchBufferBytes = -1 },
		"WatchPoll negative":            func(c *Config) { c.WatchPoll = -time.Second },
	} {
		cfg := testConfig("n")
		tweak(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v; want ErrInvalidConfig", name, err)
		}
	}
	cfg := testConfig("n")
	cfg.MaxWatchers, cfg.WatchBufferEvents, cfg.WatchBufferBytes, cfg.WatchPoll = 0, 0, 0, 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("zero watch bounds take their defaults, yet Validate = %v", err)
	}
}
