package zaris

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// BatchOp is the operation of one batch item.
type BatchOp uint8

const (
	BatchGet    BatchOp = iota + 1 // read the key's value, as Get
	BatchPut                       // store Value under the key, with TTL, as Put
	BatchDelete                    // remove the key, as Delete; NotFound if it held no value
)

func (op BatchOp) String() string {
	switch op {
	case BatchGet:
		return "Get"
	case BatchPut:
		return "Put"
	case BatchDelete:
		return "Delete"
	}
	return fmt.Sprintf("BatchOp(%d)", uint8(op))
}

// BatchItem is one operation of a batch.
type BatchItem struct {
	// Index is the caller's stamp for the item; results come back sorted by it.
	Index int
	Op    BatchOp
	Key   string
	// Value is the value to store (BatchPut only). The caller may reuse it once ExecuteBatch returns.
	Value []byte
	// TTL makes a put value expire (BatchPut only); zero or negative means no expiry.
	TTL time.Duration
}

// putValue is the value the item sends: a put's, and nothing for other operations.
func (it *BatchItem) putValue() []byte {
	if it.Op != BatchPut {
		return nil
	}
	return it.Value
}

// BatchResult is the outcome of one batch item.
type BatchResult struct {
	Index int
	Key   string
	Op    BatchOp
	// Status is the owner's answer, or StatusNoReply when none came.
	Status Status
	// Version is the value's version for a get, the new version for a put, and zero otherwise.
	Version uint64
	// TTL is the time a get's value has left to live; zero when it never expires, and for other operations.
	// Owners running a version of this package that does not report it answer zero.
	TTL time.Duration
	// Value is the value read by a get, nil when it found none. The values of one reply share memory, so
	// keeping one keeps the others alive too: copy a value held for long.
	Value []byte
	// Err is nil exactly when the item succeeded. Otherwise it matches Status's sentinel with errors.Is
	// (ErrNotFound for a get or delete of a missing key), or says why no answer came.
	Err error
}

// KeyValue is one entry for PutMany.
type KeyValue struct {
	Key   string
	Value []byte
}

// TypedResult is the outcome of one key of GetManyTyped.
type TypedResult[T any] struct {
	Index   int
	Key     string
	Status  Status
	Version uint64
	TTL     time.Duration
	Value   T
	// Err is nil exactly when the value was read and decoded. A value that does not decode fails with
	// ErrDecode while Status stays StatusSuccess.
	Err error
}

// batchRun is one ExecuteBatch call on the sending side. Items are held sorted by Index, and an item's
// position there (its sequence number) is what travels on the wire and orders the replies.
type batchRun struct {
	*batchSender
	items   []BatchItem
	results []BatchResult
	tries   []int // sends of each item that came back refused for a stale table; nil until one does
}

// batchSender is what the sending side of a batch uses of its node.
type batchSender struct {
	cfg    *Config
	router *router
	stats  *nodeStats
	// serveOwned serves the items of w whose owner is this node, in process, leaving the replies in w.
	serveOwned func(ctx context.Context, w *batchWork, budget int)
}

func newBatchRun(s *batchSender, items []BatchItem) *batchRun {
	sorted := items // only read, never changed
	byIndex := func(a, b BatchItem) int { return cmp.Compare(a.Index, b.Index) }
	if !slices.IsSortedFunc(sorted, byIndex) {
		sorted = slices.Clone(items)
		slices.SortStableFunc(sorted, byIndex)
	}
	b := &batchRun{batchSender: s, items: sorted, results: make([]BatchResult, len(sorted))}
	for seq, it := range sorted {
		b.results[seq] = BatchResult{Index: it.Index, Key: it.Key, Op: it.Op, Status: StatusNoReply}
	}
	return b
}

// ownerGroup is the pending items one owner gets in a round.
type ownerGroup struct {
	p    *peer
	seqs []int
}

// ownerOutcome is what a round learned from one owner: the items to resend after a refresh (and the map
// index of the owner that refused them), and the items it held back to keep its reply within a frame.
type ownerOutcome struct {
	p          *peer
	redirected []int
	mapIndex   uint64
	withheld   []int
	again      map[string]bool // keys with an item that goes again: their later items wait for it
}

func (o *ownerOutcome) goesAgain(key string) {
	if o.again == nil {
		o.again = map[string]bool{}
	}
	o.again[key] = true
}

// run sends rounds until every item has a final result. A round groups the pending items by owner with the
// current table and sends the groups at once. The next round carries only the items refused for a stale
// table (after a refresh) and those an owner held back.
func (b *batchRun) run(ctx context.Context, t *routingTable) {
	pending := b.admit()
	pace := redirectPacer{router: b.router, clock: b.cfg.Clock, pause: b.cfg.RetryBackoff} // items count their own refusals (replan)
	for len(pending) > 0 {
		if err := ctx.Err(); err != nil {
			b.abandon(pending, err)
			return
		}
		outcomes := b.sendRound(ctx, b.group(t, pending))
		var refreshed bool
		pending, refreshed = b.replan(ctx, t, outcomes)
		if !refreshed && b.anyRedirected(outcomes) && len(pending) > 0 {
			if err := pace.wait(ctx); err != nil {
				b.abandon(pending, err)
				return
			}
		}
		t = b.router.current()
	}
}

// admit fails the items that are malformed before anything is sent and returns the others.
func (b *batchRun) admit() []int {
	pending := make([]int, 0, len(b.items))
	for seq, it := range b.items {
		switch {
		case batchOps[it.Op] == 0:
			b.fail(seq, StatusInvalidRequest, fmt.Errorf("%w: key %q: unknown batch op %d", ErrInvalidRequest, it.Key, it.Op))
		case it.Op == BatchPut && len(it.Value) > b.cfg.MaxValueSize:
			b.fail(seq, StatusInvalidRequest, fmt.Errorf("%w: key %q: %d bytes, limit %d",
				ErrValueTooLarge, it.Key, len(it.Value), b.cfg.MaxValueSize))
		default:
			pending = append(pending, seq)
		}
	}
	return pending
}

// group assigns each pending item to the peer of its key's active owner, with the same placement and
// table as single operations. Items whose partition has no owner fail here.
func (b *batchRun) group(t *routingTable, pending []int) []ownerGroup {
	var groups []ownerGroup
	index := map[*peer]int{}
	layout := t.layout()
	for _, seq := range pending {
		seg := layout.KeySegment(b.items[seq].Key)
		p := t.segmentPeer[seg]
		if p == nil {
			b.fail(seq, StatusPartitionUnavailable, fmt.Errorf("%w: partition %d has no active owner",
				ErrPartitionUnavailable, layout.SegmentPartition(seg)))
			continue
		}
		i, ok := index[p]
		if !ok {
			i = len(groups)
			index[p] = i
			groups = append(groups, ownerGroup{p: p})
		}
		groups[i].seqs = append(groups[i].seqs, seq)
	}
	return groups
}

// sendRound sends every group at once, serving this node's own group in-process, and waits for all.
func (b *batchRun) sendRound(ctx context.Context, groups []ownerGroup) []ownerOutcome {
	outcomes := make([]ownerOutcome, len(groups))
	var wg sync.WaitGroup
	local := -1
	for i, g := range groups {
		if g.p.local {
			local = i
			continue
		}
		wg.Go(func() { outcomes[i] = b.sendRemote(ctx, g) })
	}
	if local >= 0 {
		outcomes[local] = b.serveLocal(ctx, groups[local])
	}
	wg.Wait()
	return outcomes
}

// serveLocal serves this node's own items in-process, with no network call, as send does for single ops.
func (b *batchRun) serveLocal(ctx context.Context, g ownerGroup) ownerOutcome {
	b.stats.localOps.Add(uint64(len(g.seqs)))
	w := getBatchWork()
	defer w.release()
	w.items = resize(w.items, len(g.seqs))
	for i, seq := range g.seqs {
		w.items[i] = b.wireItem(seq) // the store copies the values it keeps
	}
	b.serveOwned(ctx, w, unlimitedReply)
	copyValues(w.replies) // the store's values must not reach the caller
	out := ownerOutcome{p: g.p}
	for i := range w.replies {
		b.absorb(&out, &w.replies[i])
	}
	return out
}

// copyValues gives the replies' values memory of their own, one buffer for all of them.
func copyValues(replies []batchItemReply) {
	size := 0
	for i := range replies {
		size += len(replies[i].Reply.Value)
	}
	buf := make([]byte, 0, size)
	for i := range replies {
		r := &replies[i].Reply
		if r.Value == nil {
			continue
		}
		start := len(buf)
		buf = append(buf, r.Value...)
		r.Value = buf[start:len(buf):len(buf)]
	}
}

// sendRemote sends one owner's items, in as many requests as its frame limit needs, one after another so
// that items of one key stay in order.
func (b *batchRun) sendRemote(ctx context.Context, g ownerGroup) ownerOutcome {
	out := ownerOutcome{p: g.p}
	chunks := b.split(g.seqs)
	for i, chunk := range chunks {
		if chunk = b.deferKeys(chunk, &out); len(chunk) == 0 {
			continue
		}
		if err := b.call(ctx, &out, chunk); err != nil {
			b.noReply(chunk, err)
			for _, rest := range chunks[i+1:] {
				b.noReply(rest, err)
			}
			break
		}
	}
	return out
}

// deferKeys moves to the next round the items of keys that have an earlier item going again.
func (b *batchRun) deferKeys(chunk []int, out *ownerOutcome) []int {
	if len(out.again) == 0 {
		return chunk
	}
	kept := chunk[:0:0]
	for _, seq := range chunk {
		if out.again[b.items[seq].Key] {
			out.withheld = append(out.withheld, seq)
		} else {
			kept = append(kept, seq)
		}
	}
	return kept
}

// split cuts seqs into requests that fit in a frame and whose reply leaves room for at least one value of
// the largest allowed size. The items of one segment go in one request where they fit in one, so that its
// owner reads its gets at one revision; each request's items are in order.
func (b *batchRun) split(seqs []int) [][]int {
	limit := b.cfg.MaxFrameSize - transport.EnvelopeOverhead - batchHeaderOverhead - b.cfg.MaxValueSize
	total := 0
	for _, seq := range seqs {
		total += b.itemCost(seq)
	}
	if total <= limit {
		return [][]int{seqs}
	}
	layout := b.router.current().layout()
	segment := func(seq int) int { return layout.KeySegment(b.items[seq].Key) }
	ordered := slices.Clone(seqs)
	slices.SortStableFunc(ordered, func(x, y int) int { return cmp.Compare(segment(x), segment(y)) })
	var chunks [][]int
	start, size, run, runSize := 0, 0, 0, 0 // run: where the current segment's items start
	for i, seq := range ordered {
		if i > 0 && segment(seq) != segment(ordered[i-1]) {
			run, runSize = i, 0
		}
		cost := b.itemCost(seq)
		if i > start && size+cost > limit {
			cut := i
			if run > start {
				cut = run // the segment's items so far move to the next request with the rest
			}
			chunks = append(chunks, ordered[start:cut])
			start, size = cut, 0
			if cut == run {
				size = runSize
			} else {
				run, runSize = i, 0
			}
		}
		size += cost
		runSize += cost
	}
	chunks = append(chunks, ordered[start:])
	for _, chunk := range chunks {
		slices.Sort(chunk)
	}
	return chunks
}

// itemCost bounds the bytes an item adds to its request plus the fixed part of its reply.
func (b *batchRun) itemCost(seq int) int {
	return b.requestSize(seq) + batchReplyItemOverhead
}

// requestSize bounds the bytes an item adds to its request.
func (b *batchRun) requestSize(seq int) int {
	it := &b.items[seq]
	return batchRequestItemOverhead + len(it.Key) + len(it.putValue())
}

// call sends one request of items to out's peer and absorbs the reply, which must answer exactly those
// items, in order. On error nothing of the reply is kept.
func (b *batchRun) call(ctx context.Context, out *ownerOutcome, seqs []int) error {
	p := out.p
	buf := wireBuffers.Get().(*[]byte)
	payload := b.encodeRequest(*buf, seqs)
	p.sent.Add(1)
	resp, err := p.client.Call(ctx, kv.OpBatch, payload)
	putWireBuffer(buf, payload) // Call copied the payload before returning
	if err != nil {
		return fmt.Errorf("zaris: batch of %d items to node %s (%s): %w", len(seqs), p.id, p.addr, err)
	}
	withheld, redirected, answered := len(out.withheld), len(out.redirected), 0
	err = decodeBatchReply(resp, func(r *batchItemReply) error {
		if answered == len(seqs) || r.Index != seqs[answered] {
			return errors.New("reply does not answer the items sent")
		}
		answered++
		b.absorb(out, r)
		return nil
	})
	if err == nil && answered != len(seqs) {
		err = fmt.Errorf("%w: %d answers for %d items", ErrInvalidRequest, answered, len(seqs))
	}
	if err != nil {
		out.withheld, out.redirected = out.withheld[:withheld], out.redirected[:redirected]
		return fmt.Errorf("zaris: batch reply from node %s: %w", p.id, err)
	}
	return nil
}

// encodeRequest encodes the request for items seqs into dst's memory.
func (b *batchRun) encodeRequest(dst []byte, seqs []int) []byte {
	size := batchHeaderOverhead
	for _, seq := range seqs {
		size += b.requestSize(seq)
	}
	payload := appendBatchHeader(slices.Grow(dst[:0], size), len(seqs))
	for _, seq := range seqs {
		it := b.wireItem(seq)
		payload = appendBatchRequestItem(payload, &it)
	}
	return payload
}

// maxPooledRequest caps the request and reply buffers kept for reuse, so that one huge batch does not
// keep its buffer in memory.
const maxPooledRequest = 256 << 10

// wireBuffers holds encode buffers of batch requests and replies between calls.
var wireBuffers = sync.Pool{New: func() any { return new([]byte) }}

// putWireBuffer returns buf to the pool with the memory of used, unless that is above the cap.
func putWireBuffer(buf *[]byte, used []byte) {
	if cap(used) > maxPooledRequest {
		return
	}
	*buf = used[:0]
	wireBuffers.Put(buf)
}

// wireItem is the owner-side form of item seq, stamped with its sequence number.
func (b *batchRun) wireItem(seq int) batchItemWire {
	it := &b.items[seq]
	return batchItemWire{Index: seq, Op: batchOps[it.Op], Req: kv.Request{Key: it.Key, Value: it.putValue(), TTL: int64(it.TTL)}}
}

// absorb records one owner's answer for an item and notes whether the item must go again.
func (b *batchRun) absorb(out *ownerOutcome, r *batchItemReply) {
	if r.Withheld {
		out.withheld = append(out.withheld, r.Index)
		out.goesAgain(b.items[r.Index].Key)
		return
	}
	res := &b.results[r.Index]
	res.Status, res.Version, res.Value, res.Err = r.Reply.Status, r.Reply.Version, nil, replyErr(r.Reply)
	if r.Reply.Status == StatusSuccess {
		res.Value = r.Reply.Value // a miss reads nil whichever owner answered it
	}
	if res.Op == BatchGet {
		res.TTL = time.Duration(r.Reply.Int)
	}
	if r.Reply.Status != StatusSuccess && b.refused(&r.Reply) {
		out.redirected = append(out.redirected, r.Index)
		out.mapIndex = max(out.mapIndex, r.Reply.MapIndex)
		out.goesAgain(b.items[r.Index].Key)
	}
}

// refused reports whether reply did not settle its item, which goes again: it was refused for a stale
// table, or a transaction holds the key. The item was not applied.
func (b *batchRun) refused(reply *kv.Reply) bool {
	return redirects(reply, b.router.current().m.Index) || reply.Status == StatusLocked
}

// replan refreshes the routing table once per owner that refused items (refreshes coalesce), and returns
// the items for the next round, in order: the refused ones still within their retries, and the withheld.
// refreshed reports whether some refresh means the retry may go at once.
func (b *batchRun) replan(ctx context.Context, t *routingTable, outcomes []ownerOutcome) (next []int, refreshed bool) {
	var redirected, resent uint64
	for _, o := range outcomes {
		next = append(next, o.withheld...)
		if len(o.redirected) == 0 {
			continue
		}
		redirected += uint64(len(o.redirected))
		if b.tries == nil {
			b.tries = make([]int, len(b.items))
		}
		if b.router.refreshAfter(ctx, o.p, o.mapIndex, t) {
			refreshed = true
		}
		for _, seq := range o.redirected {
			b.tries[seq]++
			if b.tries[seq] > b.cfg.MaxRetries {
				b.exhausted(seq, t.layout())
				continue
			}
			next = append(next, seq)
			resent++
		}
	}
	b.stats.redirects.Add(redirected)
	b.stats.retries.Add(resent)
	slices.Sort(next)
	return next, refreshed
}

func (b *batchRun) anyRedirected(outcomes []ownerOutcome) bool {
	for _, o := range outcomes {
		if len(o.redirected) > 0 {
			return true
		}
	}
	return false
}

// exhausted fails an item that kept landing on non-owners, naming its partition.
func (b *batchRun) exhausted(seq int, layout Layout) {
	res := &b.results[seq]
	res.Err = &RoutingError{Partition: layout.KeyPartition(res.Key), Attempts: b.tries[seq], Last: res.Status}
}

func (b *batchRun) fail(seq int, status Status, err error) {
	b.results[seq].Status, b.results[seq].Err = status, err
}

// noReply fails items whose request got no answer.
func (b *batchRun) noReply(seqs []int, cause error) {
	for _, seq := range seqs {
		b.fail(seq, StatusNoReply, fmt.Errorf("%w: %w", ErrNoReply, cause))
	}
}

// abandon fails the items still pending when ctx ended, keeping the status of the last refusal if any.
func (b *batchRun) abandon(pending []int, cause error) {
	for _, seq := range pending {
		res := &b.results[seq]
		if res.Status == StatusNoReply {
			res.Err = fmt.Errorf("%w: key %q not sent: %w", ErrNoReply, res.Key, cause)
		} else {
			res.Err = fmt.Errorf("%w; key %q not resent: %w", statusErr(res.Status), res.Key, cause)
		}
	}
}

// serveBatch answers one batch request from another node. Each item gets the same ownership check and
// store operation as a single-key request. The reply is written into a pooled buffer, which the transport
// hands back once it has copied it (dataHandler).
func (o *owner) serveBatch(ctx context.Context, payload []byte) ([]byte, error) {
	w := getBatchWork()
	defer w.release()
	if err := w.decodeRequest(payload); err != nil {
		return nil, err
	}
	o.stats.served.Add(1)
	o.stats.batchItems.Add(uint64(len(w.items)))
	budget := o.cfg.MaxFrameSize - transport.EnvelopeOverhead - batchHeaderOverhead - len(w.items)*batchReplyItemOverhead
	o.serveBatchItems(ctx, w, budget)
	buf := wireBuffers.Get().(*[]byte) // its memory goes back to the pool with another box (dataHandler)
	return appendBatchReply(slices.Grow((*buf)[:0], batchReplySize(w.replies)), w.replies), nil
}

// unlimitedReply is the reply budget of in-process batches, which never cross a frame.
const unlimitedReply = int(^uint(0) >> 1)

// batchWork is the memory one batch is served in on its owner: the items, their replies and what serving
// them takes. It is pooled, so that serving a batch allocates nothing per item.
type batchWork struct {
	items   []batchItemWire
	replies []batchItemReply
	left    replyBudget
	waits   syncWaits
	// The lanes' memory (keyLanes).
	positions, laneOf []int32
	laneSizes         []int
	lanes             [][]int32
	// The keys that share one string, end to end, and where each ends (decodeRequest).
	sharedKeys []byte
	keyEnds    []int
	reads      readVerdicts
}

// maxPooledItems caps the items of the batch memory kept for reuse, so that one huge batch does not keep
// its memory.
const maxPooledItems = 4096

var batchWorkPool = sync.Pool{New: func() any { return new(batchWork) }}

func getBatchWork() *batchWork { return batchWorkPool.Get().(*batchWork) }

// release returns w to the pool, unless it grew too large to keep.
func (w *batchWork) release() {
	if w.reusable() {
		w.reset()
		batchWorkPool.Put(w)
	}
}

// reset empties w for the next batch, dropping every reference its items and replies hold, so that pooled
// memory keeps neither keys nor values alive.
func (w *batchWork) reset() {
	clear(w.items)
	clear(w.replies)
	w.items, w.replies = w.items[:0], w.replies[:0]
	w.waits.reset()
	w.reads.reset()
}

// reusable reports whether w is within the caps of the memory kept for reuse.
func (w *batchWork) reusable() bool {
	return cap(w.items) <= maxPooledItems && cap(w.replies) <= maxPooledItems && cap(w.reads.segments) <= maxPooledItems &&
		cap(w.reads.group) <= maxPooledItems && cap(w.reads.grouped) <= maxPooledItems && cap(w.sharedKeys) <= maxPooledRequest
}

// resize returns s with length n, in its own memory when that is large enough. Elements past n are
// zeroed, so that the memory past a slice's length holds nothing; those within keep what they held.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	if n < len(s) {
		clear(s[n:])
	}
	return s[:n]
}

// serveBatchItems runs w's items on this node in up to Config.BatchParallelism lanes and leaves their replies
// in w.replies, in Index order. A key always falls in one lane, which runs its items in Index order, so a
// key's items apply in order. Once one is refused or held back, the key's later items are held back too, so
// a resend keeps order. Reads and refusals that would take the reply past budget are held back (Withheld)
// and resent by the sender. The clock is read once for the batch's reads (serveLane).
func (o *owner) serveBatchItems(ctx context.Context, w *batchWork, budget int) {
	byIndex := func(a, b batchItemWire) int { return cmp.Compare(a.Index, b.Index) }
	if !slices.IsSortedFunc(w.items, byIndex) {
		slices.SortStableFunc(w.items, byIndex)
	}
	w.replies = resize(w.replies, len(w.items))
	w.left.n.Store(int64(budget))
	o.judgeReads(w)
	now := o.store.now()
	w.readGroups(o.layout, func(seg int, positions []int32) { o.serveReadGroup(w, seg, positions, now) })
	lanes := w.keyLanes(min(o.cfg.BatchParallelism, (len(w.items)+minLaneItems-1)/minLaneItems))
	var wg sync.WaitGroup
	for _, lane := range lanes[1:] {
		wg.Go(func() { o.serveLane(ctx, w, lane, now) })
	}
	o.serveLane(ctx, w, lanes[0], now)
	wg.Wait()
	w.waits.await(ctx, o.repl, w.replies)
	if o.loads != nil {
		o.loads.each(w.missingGets(), func(i int32) {
			reply := o.serveKV(ctx, kv.OpGet, &w.items[i].Req)                              // loads the key, as a Get does
			if size := len(reply.Value) + len(reply.Owner); !w.left.take(size, size == 0) { // a miss or a failure always fits
				reply = kv.Reply{}
				w.replies[i].Withheld = true
			}
			w.replies[i].Reply = reply
		})
	}
}

// missingGets returns the positions of the gets answered not found, for a loader to fill, but for keys the
// batch also writes: their items apply in order, and a load now would answer a get after a later write.
func (w *batchWork) missingGets() []int32 {
	var missing []int32
	for i := range w.items {
		if w.items[i].Op == kv.OpGet && !w.replies[i].Withheld && w.replies[i].Reply.Status == StatusNotFound {
			missing = append(missing, int32(i))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	written := map[string]bool{}
	for i := range w.items {
		if w.items[i].Op != kv.OpGet {
			written[w.items[i].Req.Key] = true
		}
	}
	return slices.DeleteFunc(missing, func(i int32) bool { return written[w.items[i].Req.Key] })
}

// syncWaits collects, per segment, the highest revision a batch wrote (or a read revealed) under the Sync
// concern, so that the batch waits for replicas once per segment rather than once per item.
type syncWaits struct {
	mu     sync.Mutex
	rev    map[int]uint64
	items  map[int][]int32
	writes map[int]map[int32]bool // per segment, the items that wrote
}

func (w *syncWaits) add(seg int, rev uint64, item int32, write bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rev == nil {
		w.rev, w.items, w.writes = map[int]uint64{}, map[int][]int32{}, map[int]map[int32]bool{}
	}
	w.rev[seg] = max(w.rev[seg], rev)
	w.items[seg] = append(w.items[seg], item)
	if write {
		if w.writes[seg] == nil {
			w.writes[seg] = map[int32]bool{}
		}
		w.writes[seg][item] = true
	}
}

// reset forgets every wait, for the next batch.
func (w *syncWaits) reset() { w.rev, w.items, w.writes = nil, nil, nil }

// await waits for the replicas of every segment the batch touched. When a segment's replicas cannot confirm,
// its items get the failing status, settled for the writes (settleApplied), except that
// StatusNotEnoughReplicas fails only its writes.
func (w *syncWaits) await(ctx context.Context, repl *replication, replies []batchItemReply) {
	for seg, rev := range w.rev {
		status := repl.awaitReplicas(ctx, seg, rev, len(w.writes[seg]) > 0)
		if status == StatusSuccess {
			continue
		}
		for _, i := range w.items[seg] {
			switch {
			case w.writes[seg][i]:
				replies[i].Reply = kv.Reply{Status: settleApplied(status)}
			case status != StatusNotEnoughReplicas:
				replies[i].Reply = kv.Reply{Status: status}
			}
		}
	}
}

// minLaneItems is the fewest items worth a lane of their own. A lane costs a goroutine, whose stack grows
// on its first items, and the wake-up of a thread to run it, tens of microseconds on a busy machine: a lane
// earns that back only with about a hundred microseconds of work, some 256 gets.
const minLaneItems = 256

// laneSeed seeds the hash that spreads keys over lanes.
var laneSeed = maphash.MakeSeed()

// keyLanes splits the positions of w's items that no read group served into count lanes by a hash of
// their key, each lane in order, in w's memory.
func (w *batchWork) keyLanes(count int) [][]int32 {
	w.positions = resize(w.positions, len(w.items))
	if count <= 1 {
		w.positions = w.positions[:0]
		for i := range w.items {
			if !w.grouped(i) {
				w.positions = append(w.positions, int32(i))
			}
		}
		w.lanes = append(w.lanes[:0], w.positions)
		return w.lanes
	}
	w.laneOf, w.laneSizes = resize(w.laneOf, len(w.items)), resize(w.laneSizes, count)
	clear(w.laneSizes)
	for i := range w.items {
		w.laneOf[i] = -1
		if !w.grouped(i) {
			w.laneOf[i] = int32(maphash.String(laneSeed, w.items[i].Req.Key) % uint64(count))
			w.laneSizes[w.laneOf[i]]++
		}
	}
	w.lanes = resize(w.lanes, count)
	for l, start := 0, 0; l < count; l++ {
		w.lanes[l] = w.positions[start : start : start+w.laneSizes[l]]
		start += w.laneSizes[l]
	}
	for i, l := range w.laneOf {
		if l >= 0 {
			w.lanes[l] = append(w.lanes[l], int32(i))
		}
	}
	return w.lanes
}

// grouped reports whether the item at pos was served in a read group.
func (w *batchWork) grouped(pos int) bool {
	return pos < len(w.reads.group) && w.reads.group[pos]
}

// readGroups calls serve with each group of gets of w: the positions, in order, of the gets of one segment
// that has two gets or more and that no item of w writes, and marks them grouped. Each group is read at one
// revision of its segment (serveReadGroup), so that a batch never sees part of an atomic write. The gets of
// a segment the batch also writes keep the order of the batch's items instead. It allocates nothing once
// w's memory has grown.
func (w *batchWork) readGroups(layout Layout, serve func(seg int, positions []int32)) {
	v := &w.reads
	if len(v.perSegment) != layout.Segments {
		v.perSegment, v.touched = make([]int32, layout.Segments), v.touched[:0]
	}
	const writes = -1 // a segment that an item of the batch writes
	for i := range w.items {
		seg := int(v.segments[i])
		if seg < 0 {
			seg = layout.KeySegment(w.items[i].Req.Key)
		}
		if v.perSegment[seg] == 0 {
			v.touched = append(v.touched, int32(seg))
		}
		switch {
		case v.segments[i] < 0:
			v.perSegment[seg] = writes
		case v.perSegment[seg] != writes:
			v.perSegment[seg]++
		}
	}
	v.grouped = v.grouped[:0]
	for i := range w.items {
		if seg := v.segments[i]; seg >= 0 && v.perSegment[seg] >= 2 {
			v.grouped = append(v.grouped, int32(i))
		}
	}
	if len(v.grouped) == 0 {
		return
	}
	v.group = resize(v.group, len(w.items))
	for _, i := range v.grouped {
		v.group[i] = true
	}
	slices.SortStableFunc(v.grouped, func(a, b int32) int { return cmp.Compare(v.segments[a], v.segments[b]) })
	for start := 0; start < len(v.grouped); {
		seg := v.segments[v.grouped[start]]
		end := start + 1
		for end < len(v.grouped) && v.segments[v.grouped[end]] == seg {
			end++
		}
		serve(int(seg), v.grouped[start:end])
		start = end
	}
}

// serveReadGroup answers the gets at positions, all of segment seg, from one revision of the segment and
// at the instant now, under the partition's verdict as serveJudgedGet does, or under a check of its own
// when the verdict no longer held after the read. They are answered alike: all refused, all held by a
// transaction (StatusLocked), all held back for the reply's budget, or all read; so that those that go
// again go together. Only a group whose values exceed a whole reply frame is answered in parts.
func (o *owner) serveReadGroup(w *batchWork, seg int, positions []int32, now int64) {
	p := o.layout.SegmentPartition(seg)
	refusal, owned := w.reads.refusals[p], w.reads.owned[p] == verdictOwned
	var rev uint64
	if owned {
		rev = o.readGroup(w, seg, positions, now)
		if o.view.clusterMap() != w.reads.m || o.cut.isSealed(p) || !o.leaseHeld() {
			if refusal, owned = o.partitionRefusal(p); owned {
				rev = o.readGroup(w, seg, positions, now)
			}
		}
	}
	cost := 0
	for _, i := range positions {
		r := &w.replies[i]
		r.Index, r.Withheld = w.items[i].Index, false
		if !owned {
			r.Reply = refusal
			o.countRefusal(&r.Reply)
		}
		o.awaitRead(w, seg, rev, i, &r.Reply)
		cost += len(r.Reply.Value) + len(r.Reply.Owner)
	}
	if w.left.take(cost, false) {
		return
	}
	for _, i := range positions {
		r := &w.replies[i]
		// The first item is answered whatever its size, so that every request makes progress; a group
		// that holds it and does not fit in the reply left is larger than a frame, and goes in parts.
		if positions[0] != 0 || !w.left.take(len(r.Reply.Value)+len(r.Reply.Owner), i == 0) {
			*r = batchItemReply{Index: w.items[i].Index, Withheld: true}
		}
	}
}

// readGroup reads the gets at positions, all of segment seg, at one revision of it, which it returns, and
// at the instant now. When a transaction's intent holds one of their keys, all are answered StatusLocked.
func (o *owner) readGroup(w *batchWork, seg int, positions []int32, now int64) uint64 {
	var failed kv.Reply
	defer func() {
		if failed.Status == StatusInternal {
			for _, i := range positions {
				w.replies[i].Reply = failed
			}
		}
	}()
	defer o.panics.recoverRead(seg, &failed)
	locked := false
	rev := o.store.readAtomically(seg, func(g *store) {
		for _, i := range positions {
			getFrom(g, seg, w.items[i].Req.Key, now, &w.replies[i].Reply)
			locked = locked || w.replies[i].Reply.Status == StatusLocked
		}
	})
	if locked {
		for _, i := range positions {
			w.replies[i].Reply = kv.Reply{Status: StatusLocked}
		}
	}
	return rev
}

// readVerdicts is one batch's ownership check of the partitions its gets read: taken once per partition
// before the lanes start, under one cluster map, and confirmed after each read (serveJudgedGet), so that a
// get costs a hash and a store read rather than a check of its own.
type readVerdicts struct {
	m        *ClusterMap      // the map the verdicts were taken under; nil outside a batch being served
	segments []int32          // per item, its key's segment; -1 for an item that is not a get
	owned    []int8           // per partition: 0 not judged, verdictOwned or verdictRefused
	refusals map[int]kv.Reply // the refusal of each refused partition
	judged   []int32          // the partitions with a verdict, to clear
	// The read groups (readGroups): per item, whether a group served it; per segment, its gets, or -1 when
	// the batch writes it; the segments counted, to clear; the grouped positions.
	group      []bool
	perSegment []int32
	touched    []int32
	grouped    []int32
}

const (
	verdictOwned   int8 = 1
	verdictRefused int8 = 2
)

// reset forgets the verdicts, for the next batch.
func (v *readVerdicts) reset() {
	for _, p := range v.judged {
		v.owned[p] = 0
	}
	for _, seg := range v.touched {
		v.perSegment[seg] = 0
	}
	clear(v.group)
	v.m, v.judged, v.group, v.touched, v.grouped = nil, v.judged[:0], v.group[:0], v.touched[:0], v.grouped[:0]
	clear(v.refusals)
}

// judgeReads takes the ownership verdict of each partition that w's gets read. The map is loaded before
// any verdict, so a verdict taken under a newer one fails every confirmation and leaves its gets to a
// check of their own.
func (o *owner) judgeReads(w *batchWork) {
	v := &w.reads
	v.m = o.view.clusterMap()
	v.segments = resize(v.segments, len(w.items))
	if len(v.owned) != o.layout.Partitions {
		v.owned, v.judged = make([]int8, o.layout.Partitions), v.judged[:0]
	}
	for i := range w.items {
		if w.items[i].Op != kv.OpGet {
			v.segments[i] = -1
			continue
		}
		seg := o.layout.KeySegment(w.items[i].Req.Key)
		v.segments[i] = int32(seg)
		p := o.layout.SegmentPartition(seg)
		if v.owned[p] != 0 {
			continue
		}
		v.judged = append(v.judged, int32(p))
		refusal, owned := o.partitionRefusal(p)
		if owned {
			v.owned[p] = verdictOwned
			continue
		}
		v.owned[p] = verdictRefused
		if v.refusals == nil {
			v.refusals = map[int]kv.Reply{}
		}
		v.refusals[p] = refusal
	}
}

// serveJudgedGet answers the get at pos from its partition's verdict: refused as the verdict says, or read
// at the instant now if the verdict still holds after the read (no newer map, the partition not sealed
// for a hand-over, no lapse of the lease noticed), as it held before. served is false for any other item,
// and for a get whose verdict did not hold: those take a check of their own. A lapse is noticed by the
// first check after it, and at the latest by the node's periodic one, FailoverTimeout/8 later: still well
// before another node may be promoted, a whole FailoverTimeout after the last contact.
func (o *owner) serveJudgedGet(w *batchWork, it *batchItemWire, pos int32, now int64, reply *kv.Reply) (served bool) {
	v := &w.reads
	if v.m == nil || v.segments[pos] < 0 {
		return false
	}
	seg := int(v.segments[pos])
	p := o.layout.SegmentPartition(seg)
	if v.owned[p] == verdictRefused {
		*reply = v.refusals[p]
		o.countRefusal(reply)
		return true
	}
	rev := o.getAt(seg, it.Req.Key, now, reply)
	if o.view.clusterMap() != v.m || o.cut.isSealed(p) || !o.leaseHeld() {
		return false // the item's own check writes its reply anew
	}
	o.awaitRead(w, seg, rev, pos, reply)
	return true
}

// serveLane serves the items of w at positions, in order. Its gets read the store at the batch's instant
// now, unless the lane wrote since: then at an instant after that write, so that no get reads at a time
// before a write it follows.
func (o *owner) serveLane(ctx context.Context, w *batchWork, positions []int32, now int64) {
	items, replies := w.items, w.replies // read here once: the lanes write w.left, next to them, all along
	var held map[string]bool             // keys whose later items are held back
	for _, i := range positions {
		it := &items[i]
		if held[it.Req.Key] {
			replies[i] = batchItemReply{Index: it.Index, Withheld: true}
			continue
		}
		o.serveBatchItem(ctx, w, it, i, now, &replies[i])
		if it.Op != kv.OpGet {
			now = o.store.now()
		}
		if replies[i].Withheld || replies[i].Reply.Status.RequiresRefresh() {
			if held == nil {
				held = map[string]bool{}
			}
			held[it.Req.Key] = true
		}
	}
}

// serveBatchItem checks ownership and applies it, the item of w at pos, as serveKV does for a single
// request, and writes its reply to out. The first item of a request is always answered, so that every
// request makes progress.
func (o *owner) serveBatchItem(ctx context.Context, w *batchWork, it *batchItemWire, pos int32, now int64, out *batchItemReply) {
	out.Index, out.Withheld = it.Index, false
	reply := &out.Reply // written whole by whichever serves the item
	if !o.serveJudgedGet(w, it, pos, now, reply) {
		o.serveCheckedItem(ctx, w, it, pos, now, reply)
	}
	// Only reads and refusals carry bytes back, and neither changed anything.
	if cost := len(reply.Value) + len(reply.Owner); cost > 0 && !w.left.take(cost, pos == 0) {
		*out = batchItemReply{Index: it.Index, Withheld: true}
	}
}

// serveCheckedItem checks the item's ownership on its own and applies it: a get at the instant now, any
// other item as applyStore runs a single request.
func (o *owner) serveCheckedItem(ctx context.Context, w *batchWork, it *batchItemWire, pos int32, now int64, reply *kv.Reply) {
	seg, refusal, owned := o.checkOwner(it.Req.Key)
	if !owned {
		*reply = refusal
		return
	}
	if it.Op == kv.OpGet {
		rev := o.getAt(seg, it.Req.Key, now, reply)
		o.awaitRead(w, seg, rev, pos, reply)
		return
	}
	*reply = o.applyStore(ctx, it.Op, seg, &it.Req)
	if o.awaitsReplicas(it.Op, &it.Req, reply) {
		w.waits.add(seg, o.store.revision(seg), pos, true)
	} else if rev, wait := o.unconfirmed(it.Op, seg, reply); wait {
		w.waits.add(seg, rev, pos, false)
	}
}

// awaitRead makes the batch wait, before it answers, until the in-sync replicas hold the revision rev of
// seg that a get's reply revealed (see unconfirmed).
func (o *owner) awaitRead(w *batchWork, seg int, rev uint64, pos int32, reply *kv.Reply) {
	if o.unconfirmedAt(kv.OpGet, seg, rev, reply) {
		w.waits.add(seg, rev, pos, false)
	}
}

// getAt answers a get as applyStore and applyGet do, except that it reads the entry at the instant now
// rather than at a clock read of its own: an entry expired at now is a miss. It returns the segment's
// revision the read saw. It writes the reply to out.
func (o *owner) getAt(seg int, key string, now int64, out *kv.Reply) uint64 {
	defer o.panics.recoverRead(seg, out)
	return getFrom(o.store, seg, key, now, out)
}

// getFrom is getAt on the store s, which may be a view.
func getFrom(s *store, seg int, key string, now int64, out *kv.Reply) uint64 {
	if refusal := refuseKeyOp(&keyOps[kv.OpGet], key); refusal != nil {
		*out = *refusal
		return 0
	}
	if s.writeIntentOn(seg, key) {
		*out = kv.Reply{Status: StatusLocked} // a committed transaction may be about to change it
		return 0
	}
	e, ttl, ok, rev := s.getEntryAt(seg, key, now)
	switch {
	case !ok:
		*out = kv.Reply{Status: StatusNotFound}
	case e.coll() != nil:
		*out = kv.Reply{Status: StatusWrongType}
	default:
		*out = kv.Reply{Status: StatusSuccess, Value: e.value(), Version: e.version(), Int: int64(ttl)}
	}
	return rev
}

// replyBudget is the room left in a reply frame for values and owner names, shared by the workers.
type replyBudget struct{ n atomic.Int64 }

// take reserves bytes if they fit, or regardless when forced, and reports whether it did.
func (r *replyBudget) take(bytes int, force bool) bool {
	if force {
		r.n.Add(-int64(bytes))
		return true
	}
	for {
		left := r.n.Load()
		if int64(bytes) > left {
			return false
		}
		if r.n.CompareAndSwap(left, left-int64(bytes)) {
			return true
		}
	}
}
