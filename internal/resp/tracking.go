package resp

import (
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/pubsub"
)

// Tracking is the server side of Redis client-side caching (CLIENT TRACKING, default mode, RESP3): it
// remembers which connections read which keys this node owns, and when such a key is written (from any
// node: every write of it is applied here) or this node stops owning it, it pushes an invalidation to each
// of them and forgets the key, as Redis does. The keys remembered are bounded in number and in bytes;
// beyond, the oldest are invalidated early.
type Tracking struct {
	active   atomic.Int32 // connections with tracking on: writes cost nothing while there are none
	max      int
	maxBytes int64

	mu    sync.Mutex
	keys  map[string]map[*respConn]struct{}
	order []string // keys in the order first remembered, for the bound; may hold forgotten ones
	bytes int64    // what keys and the connections' records of them take (trackedKeyCost, trackedReaderCost)
}

// The bounds of the keys a node remembers for client-side caching: Redis's tracking-table-max-keys
// defaults to a million, and a key may be as long as a value, so the bytes are bounded too.
const (
	TrackedKeys  = 1 << 20
	TrackedBytes = 64 << 20
	// trackedKeyOverhead and trackedReaderCost are what the table keeps per key besides its bytes, and per
	// connection that read it (both maps' entries).
	trackedKeyOverhead = 96
	trackedReaderCost  = 64
)

func NewTracking(max int, maxBytes int64) *Tracking {
	return &Tracking{max: max, maxBytes: maxBytes, keys: map[string]map[*respConn]struct{}{}}
}

func trackedKeyCost(key string) int64 { return int64(len(key)) + trackedKeyOverhead }

// remember records that c read key.
func (t *Tracking) remember(c *respConn, key string) {
	t.mu.Lock()
	readers := t.keys[key]
	if readers == nil {
		readers = map[*respConn]struct{}{}
		t.keys[key] = readers
		t.order = append(t.order, key)
		t.bytes += trackedKeyCost(key)
	}
	if _, ok := readers[c]; !ok {
		readers[c] = struct{}{}
		c.tracked[key] = struct{}{}
		t.bytes += trackedReaderCost
	}
	if len(t.order) > 2*len(t.keys)+1024 { // keys invalidated since: keep the others, in order
		kept := t.order[:0]
		for _, k := range t.order {
			if _, ok := t.keys[k]; ok {
				kept = append(kept, k)
			}
		}
		t.order = kept
	}
	var evicted []trackedKey
	for (len(t.keys) > t.max || t.bytes > t.maxBytes) && len(t.order) > 0 {
		old := t.order[0]
		t.order = t.order[1:]
		if _, ok := t.keys[old]; ok && old != key {
			evicted = append(evicted, trackedKey{old, t.forgetLocked(old)})
		}
	}
	t.mu.Unlock()
	for _, e := range evicted {
		e.push()
	}
}

// trackedKey is a key forgotten and the connections to tell.
type trackedKey struct {
	key     string
	readers map[*respConn]struct{}
}

func (k trackedKey) push() {
	for c := range k.readers {
		c.push(invalidationPush(k.key))
	}
}

// forgetLocked drops key and returns the connections that read it. The caller holds t.mu.
func (t *Tracking) forgetLocked(key string) map[*respConn]struct{} {
	readers, ok := t.keys[key]
	if !ok {
		return nil
	}
	delete(t.keys, key)
	for c := range readers {
		delete(c.tracked, key)
	}
	t.bytes -= trackedKeyCost(key) + int64(len(readers))*trackedReaderCost
	if len(t.keys) == 0 {
		t.order = t.order[:0]
	}
	return readers
}

// written is the tracking table's write listener: a write invalidates the keys it changed.
// Invalidate tells every connection that read key that it changed, and forgets it.
func (t *Tracking) Invalidate(key string) {
	if t.active.Load() == 0 {
		return
	}
	t.mu.Lock()
	readers := t.forgetLocked(key)
	t.mu.Unlock()
	trackedKey{key, readers}.push()
}

// InvalidateWhere invalidates every remembered key for which gone reports true: keys of partitions this
// node no longer owns.
func (t *Tracking) InvalidateWhere(gone func(key string) bool) {
	if t.active.Load() == 0 {
		return
	}
	t.mu.Lock()
	var keys []string
	for key := range t.keys {
		if gone(key) {
			keys = append(keys, key)
		}
	}
	t.mu.Unlock()
	for _, key := range keys {
		t.Invalidate(key)
	}
}

// start counts c as tracking.
func (t *Tracking) start(c *respConn) {
	if c.tracked == nil {
		c.tracked = map[string]struct{}{}
		t.active.Add(1)
	}
}

// stop forgets what c read and stops counting it.
func (t *Tracking) stop(c *respConn) {
	if c.tracked == nil {
		return
	}
	t.mu.Lock()
	for key := range c.tracked {
		if readers := t.keys[key]; readers != nil {
			delete(readers, c)
			t.bytes -= trackedReaderCost
			if len(readers) == 0 {
				delete(t.keys, key)
				t.bytes -= trackedKeyCost(key)
			}
		}
	}
	c.tracked = nil
	t.mu.Unlock()
	t.active.Add(-1)
}

// invalidationPush is the RESP3 push that tells a client key changed.
func invalidationPush(key string) []byte {
	b := make([]byte, 0, 32+len(key))
	b = append(b, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$"...)
	b = strconv.AppendInt(b, int64(len(key)), 10)
	b = append(b, "\r\n"...)
	b = append(b, key...)
	return append(b, "\r\n"...)
}

// respPushes is a connection's side of invalidation pushes. Invalidations come from the goroutines that
// write the store, under a segment's lock, so they only queue a push (bounded) and never touch the socket.
// A goroutine of the connection's own, its pusher, sends what is queued while the connection's goroutine
// waits for input with every reply sent; that goroutine sends what is left before it next waits, and
// waits for the pusher's write in flight before it answers, so pushes fall between replies.
type respPushes struct {
	mu      sync.Mutex
	wake    *sync.Cond
	out     io.Writer // the socket, with its write deadline
	idle    bool      // the connection's goroutine waits for input, its replies sent
	writing bool      // the pusher is writing
	closed  bool
	running bool // the pusher was started
	resp3   bool // pushes exist only in RESP3: a RESP2 client is sent none
	pending []byte
	dropped bool   // the invalidations overflowed: the client is told to drop everything instead
	sent    uint64 // bytes the pusher wrote, not yet in the connection's count (takeSent)

	proto3     bool           // the client speaks RESP3: messages are pushes, else arrays
	messages   int            // bytes of pending that are pub/sub messages
	backlog    pubsub.Backlog // the bound on messages (Options.SubscriberLimit)
	overflowed bool           // messages passed the bound: the connection is being dropped
}

// respPendingPushes bounds the pushes waiting for a connection.
const respPendingPushes = 64 << 10

// flushAll is the push that tells a client to drop every key it caches.
var flushAll = []byte(">2\r\n$10\r\ninvalidate\r\n_\r\n")

// push queues one push for the pusher. It never blocks on the socket.
func (c *respConn) push(frame []byte) {
	p := &c.pushes
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.resp3 || p.closed || p.dropped:
		return
	case len(p.pending)-p.messages+len(frame) > respPendingPushes:
		p.pending, p.dropped = append(p.pending, flushAll...), true
	default:
		p.pending = append(p.pending, frame...)
	}
	p.wake.Broadcast()
}

// pushMessage queues the pub/sub frame that frame builds, for RESP3 or RESP2. A client with more than
// more bytes of messages waiting than its backlog allows is disconnected, as Redis does past its pubsub
// output buffer limit.
func (c *respConn) pushMessage(frame func(proto3 bool) []byte) {
	p := &c.pushes
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.overflowed {
		return
	}
	b := frame(p.proto3)
	if p.backlog.Exceeded(p.messages+len(b), c.srv.clock.Now()) {
		p.overflowed = true
		c.srv.log.Warn("RESP subscriber disconnected: too far behind", "client", c.id, "pending", p.messages,
			"limit", p.backlog.Hard, "soft limit", p.backlog.Soft, "soft time", p.backlog.SoftFor)
		c.conn.Close()
		return
	}
	p.pending = append(p.pending, b...)
	p.messages += len(b)
	p.wake.Broadcast()
}

// startPusher starts the connection's pusher, once.
func (c *respConn) startPusher() {
	p := &c.pushes
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running || p.closed {
		return
	}
	p.running = true
	c.srv.wg.Add(1)
	go func() {
		defer c.srv.wg.Done()
		c.runPusher()
	}()
}

// runPusher sends queued pushes while the connection's goroutine is idle, until the connection closes.
func (c *respConn) runPusher() {
	p := &c.pushes
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for !p.closed && (!p.idle || len(p.pending) == 0) {
			p.wake.Wait()
		}
		if p.closed {
			return
		}
		frames := p.pending
		p.pending, p.dropped, p.writing, p.messages = nil, false, true, 0
		p.mu.Unlock()
		n, err := p.out.Write(frames)
		p.mu.Lock()
		p.sent += uint64(n)
		p.writing = false
		p.wake.Broadcast()
		if err != nil {
			p.closed = true // the connection's goroutine finds the socket broken too
		}
	}
}

// closePushes stops the pusher; the server waits for it.
func (c *respConn) closePushes() {
	p := &c.pushes
	p.mu.Lock()
	p.closed = true
	p.wake.Broadcast()
	p.mu.Unlock()
}

// busy marks the connection's goroutine at work, once the pusher's write in flight is done: pushes wait.
// Those queued already go out before the reply to the command about to run, as in Redis, where they
// would have been sent when the keys changed.
func (c *respConn) busy() {
	p := &c.pushes
	p.mu.Lock()
	for p.writing {
		p.wake.Wait()
	}
	p.idle = false
	c.takeSent()
	if len(p.pending) > 0 {
		c.wr.buf = append(c.wr.buf, p.pending...)
		p.pending, p.dropped, p.messages = p.pending[:0], false, 0
	}
	p.mu.Unlock()
}

// takeSent counts the bytes the pusher wrote as the connection's output. Called with c.pushes.mu held.
func (c *respConn) takeSent() {
	c.stats.counted.netOut += c.pushes.sent
	c.pushes.sent = 0
}

// awaitInput sends the replies and the pushes that waited, and lets the pusher send until the
// connection's goroutine is busy again.
func (c *respConn) awaitInput() error {
	p := &c.pushes
	p.mu.Lock()
	defer p.mu.Unlock()
	c.takeSent()
	if len(p.pending) > 0 {
		c.wr.buf = append(c.wr.buf, p.pending...)
		p.pending, p.dropped, p.messages = p.pending[:0], false, 0
	}
	if err := c.wr.flush(); err != nil {
		return err
	}
	p.idle = true
	return nil
}

// trackMode is how a tracking connection chooses the reads it caches (CLIENT TRACKING ... OPTIN|OPTOUT).
type trackMode uint8

const (
	trackAll    trackMode = iota // every read
	trackOptIn                   // only a command after CLIENT CACHING YES
	trackOptOut                  // every read but a command after CLIENT CACHING NO
)

// cachingChoice is CLIENT CACHING's answer for the next command (and a transaction it opens).
type cachingChoice uint8

const (
	cachingUnset cachingChoice = iota
	cachingYes
	cachingNo
)

// cmdClientTracking serves CLIENT TRACKING ON|OFF [OPTIN|OPTOUT]. Broadcasting, prefixes, redirection and
// NOLOOP are refused: in RESP2 a client can track, but is sent nothing, as in Redis without REDIRECT.
func (c *respConn) cmdClientTracking(args [][]byte) {
	on := isSubcommand(args[0], "ON")
	if !on && !isSubcommand(args[0], "OFF") {
		c.wr.error("ERR syntax error")
		return
	}
	mode := trackAll
	for _, opt := range args[1:] {
		switch {
		case isSubcommand(opt, "OPTIN") && mode != trackOptOut:
			mode = trackOptIn
		case isSubcommand(opt, "OPTOUT") && mode != trackOptIn:
			mode = trackOptOut
		case isSubcommand(opt, "OPTIN"), isSubcommand(opt, "OPTOUT"):
			c.wr.error("ERR You can't use both OPTIN and OPTOUT")
			return
		case isSubcommand(opt, "BCAST"), isSubcommand(opt, "PREFIX"), isSubcommand(opt, "REDIRECT"), isSubcommand(opt, "NOLOOP"):
			c.wr.error("ERR CLIENT TRACKING " + clip(opt, 16) + " is not supported: only the default mode, with OPTIN or OPTOUT, in RESP3")
			return
		default:
			c.wr.error("ERR syntax error")
			return
		}
	}
	switch {
	case !on:
		c.srv.tracking.stop(c)
		c.trackMode, c.caching = trackAll, cachingUnset
	case c.tracked != nil && mode != c.trackMode:
		c.wr.error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.")
		return
	default:
		c.pushes.mu.Lock()
		c.pushes.resp3 = c.wr.proto == 3
		c.pushes.mu.Unlock()
		c.startPusher()
		c.srv.tracking.start(c)
		c.trackMode = mode
	}
	c.wr.ok()
}

// cmdClientCaching serves CLIENT CACHING YES|NO, which chooses whether the next command's reads are cached.
func (c *respConn) cmdClientCaching(choice []byte) {
	switch {
	case c.tracked == nil || c.trackMode == trackAll:
		c.wr.error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
	case isSubcommand(choice, "YES") && c.trackMode == trackOptIn:
		c.caching = cachingYes
		c.wr.ok()
	case isSubcommand(choice, "NO") && c.trackMode == trackOptOut:
		c.caching = cachingNo
		c.wr.ok()
	case isSubcommand(choice, "YES"), isSubcommand(choice, "NO"):
		c.wr.error("ERR CLIENT CACHING " + clip(choice, 4) + " is only valid when tracking is enabled in " +
			map[trackMode]string{trackOptIn: "OPTOUT", trackOptOut: "OPTIN"}[c.trackMode] + " mode.")
	default:
		c.wr.error("ERR syntax error")
	}
}

// writeTrackingInfo answers CLIENT TRACKINGINFO.
func (c *respConn) writeTrackingInfo() {
	var flags []string
	switch {
	case c.tracked == nil:
		flags = []string{"off"}
	case c.trackMode == trackOptIn:
		flags = []string{"on", "optin"}
	case c.trackMode == trackOptOut:
		flags = []string{"on", "optout"}
	default:
		flags = []string{"on"}
	}
	switch c.caching {
	case cachingYes:
		flags = append(flags, "caching-yes")
	case cachingNo:
		flags = append(flags, "caching-no")
	}
	c.wr.mapOf(3)
	c.wr.bulkString("flags")
	if c.wr.proto == 3 {
		c.wr.header('~', len(flags)) // a set, as Redis answers
	} else {
		c.wr.array(len(flags))
	}
	for _, f := range flags {
		c.wr.bulkString(f)
	}
	c.wr.bulkString("redirect")
	if c.tracked == nil {
		c.wr.int(-1)
	} else {
		c.wr.int(0) // on, redirecting nowhere
	}
	c.wr.bulkString("prefixes")
	c.wr.array(0)
}

// trackRead remembers the keys a read-only command read on a tracking connection, when they are in a slot
// this node owns and the connection's mode and CLIENT CACHING let it.
func (c *respConn) trackRead(cmd *respCommand, args [][]byte) {
	if c.tracked == nil || cmd == nil || !cmd.hasFlag("readonly") {
		return
	}
	switch {
	case c.trackMode == trackOptIn && c.caching != cachingYes, c.trackMode == trackOptOut && c.caching == cachingNo:
		return
	}
	keys := cmd.keys(args)
	if len(keys) == 0 {
		return
	}
	m := c.srv.node.Topology()
	for _, key := range keys {
		if p := m.PartitionOf(kv.KeySlotBytes(key)); p == nil || p.Owner != c.srv.id {
			return
		}
	}
	for _, key := range keys {
		c.srv.tracking.remember(c, string(key))
	}
}

// afterCommand ends CLIENT CACHING's choice once the command it was for has run: at once, or, when the
// command opened a transaction, once the transaction ends.
func (c *respConn) afterCommand(cmd *respCommand) {
	if cmd != nil && cmd.name == "client" || c.multi != nil {
		return
	}
	c.caching = cachingUnset
}
