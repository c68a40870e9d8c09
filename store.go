package zaris

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
)

// entry is one stored value: a string, or a collection. An entry never changes once stored but for its
// access stamp (access.go), so a string can be read outside the segment's lock; a collection changes in
// place, under the lock (collections.go).
//
// entry is only the header. A string's header, its expiry when it has one, key and value are one
// allocation holding no pointers (newStringEntry), which the collector never scans; a collection's header
// starts a collEntry.
type entry struct {
	word uint64 // the version in its low versionBits, the access stamp (access.go) above: atomic
	klen uint32 // the key's length; entryExpires is set when an expiry follows the header
	vlen uint32 // collMark for a collection
}

// collEntry is a collection's entry: its header, then its expiry and what the collector must see.
type collEntry struct {
	entry
	expireAt int64
	coll     *collValue
	key      string
}

const (
	collMark     = math.MaxUint32
	entryExpires = 1 << 31
	entryHeader  = unsafe.Sizeof(entry{})
	expirySize   = 8
)

// newStringEntry returns an entry of key holding a copy of value. expireAt is a Unix time in nanoseconds;
// zero means no expiry.
func newStringEntry(key string, value []byte, version uint64, expireAt int64) *entry {
	e, v := newSizedEntry(key, len(value), version, expireAt)
	copy(v, value)
	return e
}

// newSizedEntry returns an entry of key whose value is size zero bytes, and that value, for the caller to
// fill in place before it stores the entry. Only an entry that expires holds an expiry.
func newSizedEntry(key string, size int, version uint64, expireAt int64) (*entry, []byte) {
	if uint64(len(key)) >= entryExpires || uint64(size) >= collMark {
		panic("zaris: a key of 2 GiB or a value of 4 GiB")
	}
	start := int(entryHeader)
	if expireAt != 0 {
		start += expirySize
	}
	b := make([]byte, start+len(key)+size)
	copy(b[start:], key)
	e := (*entry)(unsafe.Pointer(unsafe.SliceData(b)))
	e.word, e.klen, e.vlen = version&versionMask, uint32(len(key)), uint32(size)
	if expireAt != 0 {
		e.klen |= entryExpires
		*(*int64)(unsafe.Add(unsafe.Pointer(e), entryHeader)) = expireAt
	}
	return e, b[len(b)-size:]
}

// newCollEntry returns an entry of key holding cv.
func newCollEntry(key string, cv *collValue, version uint64, expireAt int64) *entry {
	c := &collEntry{entry: entry{word: version & versionMask, vlen: collMark}, expireAt: expireAt, coll: cv, key: key}
	return &c.entry
}

// withExpiry returns a new entry like e, which expires at expireAt. A collection shares e's.
func (e *entry) withExpiry(expireAt int64) *entry {
	if cv := e.coll(); cv != nil {
		return newCollEntry(e.key(), cv, e.version(), expireAt)
	}
	return newStringEntry(e.key(), e.value(), e.version(), expireAt)
}

// expiry is when e expires, a Unix time in nanoseconds; zero means never.
func (e *entry) expiry() int64 {
	switch {
	case e.vlen == collMark:
		return (*collEntry)(unsafe.Pointer(e)).expireAt
	case e.klen&entryExpires == 0:
		return 0
	}
	return *(*int64)(unsafe.Add(unsafe.Pointer(e), entryHeader))
}

// keyAt is where a string's key starts, after its header and expiry, and keyLen its length.
func (e *entry) keyAt() unsafe.Pointer {
	if e.klen&entryExpires != 0 {
		return unsafe.Add(unsafe.Pointer(e), entryHeader+expirySize)
	}
	return unsafe.Add(unsafe.Pointer(e), entryHeader)
}

func (e *entry) keyLen() int { return int(e.klen &^ entryExpires) }

// key is the key e is stored under.
func (e *entry) key() string {
	switch {
	case e.vlen == collMark:
		return (*collEntry)(unsafe.Pointer(e)).key
	case e.keyLen() == 0:
		return ""
	}
	return unsafe.String((*byte)(e.keyAt()), e.keyLen())
}

// value is a string's value, which callers must not modify; nil for a collection.
func (e *entry) value() []byte {
	switch {
	case e.vlen == collMark:
		return nil
	case e.vlen == 0:
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Add(e.keyAt(), e.keyLen())), e.vlen)
}

// coll is a collection's value, nil for a string.
func (e *entry) coll() *collValue {
	if e.vlen != collMark {
		return nil
	}
	return (*collEntry)(unsafe.Pointer(e)).coll
}

// collValue is the value of a collection entry. Writes change the collection in place, and the entry
// they make shares its collValue with the one it replaces, so the footprint the segment's bytes counted
// lives here: a string entry's is its size, which never changes.
type collValue struct {
	c         collection
	footprint int64 // what the entry was counted for in its segment's bytes when it was last stored
}

// counted is what e was counted for under key in its segment's bytes when it was stored.
func (e *entry) counted(key string) int64 {
	if cv := e.coll(); cv != nil {
		return cv.footprint
	}
	return e.size(key)
}

// count records and returns what e counts for under key in its segment's bytes, as it is stored.
func (e *entry) count(key string) int64 {
	n := e.size(key)
	if cv := e.coll(); cv != nil {
		cv.footprint = n
	}
	return n
}

// Estimates behind the store's byte count: what Go spends on a string's entry and its tree item beyond
// the key and value bytes (its header, its size class's rounding, an item in a partly filled node), and
// what a collection's entry takes beyond that. BenchmarkStoreAccounting measures them against the heap.
const (
	entryOverhead     = 48
	collEntryOverhead = 64
	tableItemOverhead = 24 // a string's position and pointer in a key-table leaf, and the leaf's free room
)

// elementCost is what an element of a collection of kind k takes on average beyond its bytes (counted
// apart, dataBytes): a map entry and its string headers for a hash or a set, an item's slice for a list,
// and for a sorted set a map entry beside a skip-list node of random height.
func elementCost(k kind) int64 {
	switch k {
	case kindHash:
		return 98
	case kindSet:
		return 66
	case kindList:
		return 60
	case kindZSet:
		return 300
	}
	return 64
}

// ttlCount is 1 for an entry with a TTL, 0 for one without, for the segment's count of them.
func (e *entry) ttlCount() int64 {
	if e.expiry() != 0 {
		return 1
	}
	return 0
}

// size estimates the memory the entry takes under key: a string's one allocation, rounded up as the
// allocator rounds it, and its item in the key table; a collection's entry, key, structure and elements.
func (e *entry) size(key string) int64 {
	if cv := e.coll(); cv != nil {
		return int64(len(key)+entryOverhead) + collEntryOverhead + int64(cv.c.len())*elementCost(cv.c.kind()) + cv.c.dataBytes()
	}
	n := int(entryHeader) + len(key) + int(e.vlen)
	if e.klen&entryExpires != 0 {
		n += expirySize
	}
	return allocSize(n) + tableItemOverhead
}

// allocClasses are the sizes the Go allocator rounds a small allocation up to.
var allocClasses = [...]int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288,
	320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304,
	2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288,
	13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// allocSize is what an allocation of n bytes takes: its size class, or whole 8 KiB pages past the largest.
func allocSize(n int) int64 {
	if n <= 0 {
		return 0
	}
	if m := int64(n); m > allocClasses[len(allocClasses)-1] {
		return (m + 8191) &^ 8191
	}
	i, _ := slices.BinarySearch(allocClasses[:], int64(n))
	return allocClasses[i]
}

func (e *entry) expired(now int64) bool {
	at := e.expiry()
	return at != 0 && now >= at
}

// kind is the type of value e holds.
func (e *entry) kind() kind {
	if cv := e.coll(); cv != nil {
		return cv.c.kind()
	}
	return kindString
}

// segmentStore holds the entries of one segment. Writes to different segments never contend.
type segmentStore struct {
	mu       sync.RWMutex
	entries  keyTable // in scan order
	internal int      // the internal keys among entries (intents, transaction records)
	// revision counts the segment's writes. A key's version is the revision of its last write, so
	// versions grow across delete and re-create.
	revision uint64
	intents  atomic.Int64 // the transaction intents among entries (txn_intent.go); read without the lock
	bytes    atomic.Int64 // the entries' footprints; written under the lock, read without it
	expiring atomic.Int64 // the entries with a TTL; written under the lock, read without it
	// torn is set, under the lock, from a write's first change to the segment until the write hook has
	// seen it (for an atomic group, until the group's end). A panic that unwinds through a write leaves it
	// set: the segment may hold a change that replicas, the disk and watchers never received (panics.go).
	torn bool
}

// writeHook observes every write of the store, under the segment's lock, so it sees a segment's writes in
// revision order. next is the key's entry after the write, nil for a delete, and change says what made it
// beyond that. epoch is the epoch a replicated write carried, or 0 for a write this node made as owner (the
// hook knows the owner's epoch).
type writeHook func(segment int, revision, epoch uint64, key string, next *entry, change writeChange)

// writeListeners are the hooks every committed write goes to, in order.
type writeListeners []writeHook

// fanOut returns the store's write hook that calls each listener in turn.
func (ls writeListeners) fanOut() writeHook {
	return func(segment int, revision, epoch uint64, key string, next *entry, change writeChange) {
		for _, l := range ls {
			l(segment, revision, epoch, key, next, change)
		}
	}
}

// writeChange says what made a write, beyond the entry it left: a collection op, which is what replicas
// and the disk log receive instead of the collection, or an expiry.
type writeChange struct {
	coll    *collOp // the collection op that made the entry; nil for a put or a delete
	expired bool    // a delete that expired the key
	evicted bool    // a delete that evicted the key to keep within the memory bound
	// multi are the writes of an atomic group (store.atomically), all at one revision. The hook is then
	// called once, with no key and a nil entry.
	multi []durability.Op
	at    int64 // when the write was made, by the store's clock (Unix ns): one clock read serves both
	// revert undoes what coll changed in place, for an atomic group's rollback (revertOf).
	revert func()
}

// store is a node's local data: one table per segment (keytable.go), with TTLs that are checked on every
// read. The owner of a segment reclaims its expired entries in the background by writes of their own
// (expireSegment).
type store struct {
	clock    Clock
	segments []segmentStore
	onWrite  writeHook // nil: nobody listens
	// group is set on a view of the store whose caller holds one segment's lock (applyExclusive,
	// atomically): its methods take no lock and touch that segment only.
	group *writeGroup
	views []store // one view per segment, for applyExclusive
	// maxGroupBytes bounds the ops of an atomic group, which travel to replicas as one op in one frame
	// (groupWriteBytes counts them); 0 for no bound.
	maxGroupBytes int
	// budget bounds what the segments hold (Config.MaxMemory); nil: no bound.
	budget *memoryBudget
}

// opOfWrite is the op that tells replicas and the disk log of a store write (see writeHook): a put of next,
// its collection op, a delete, an expiry, or the ops of an atomic group.
func opOfWrite(segment int, revision uint64, key string, next *entry, change writeChange) durability.Op {
	op := durability.Op{Segment: uint32(segment), Revision: revision, Key: key, Kind: durability.OpDelete}
	switch {
	case len(change.multi) > 0:
		op.Kind, op.Key, op.Version = durability.OpMulti, change.multi[0].Key, revision
		op.Value = durability.AppendMulti(nil, change.multi)
	case change.expired:
		op.Kind = durability.OpExpire
	case change.evicted:
		op.Kind = durability.OpEvict
	case change.coll != nil:
		op.Kind, op.Value = change.coll.kind, change.coll.encode()
	case next != nil:
		op.Kind, op.Value = durability.OpPut, next.value()
	}
	if next != nil { // the entry's own key, which the op then shares
		op.Key, op.ExpireAt, op.Version = next.key(), next.expiry(), next.version()
	}
	return op
}

// groupWriteBytes is what the op of a write (opOfWrite) takes in its atomic group's op.
func groupWriteBytes(key string, next *entry, change writeChange) int {
	n := len(key) + kv.GroupOpOverhead
	switch {
	case change.coll != nil:
		n += change.coll.size()
	case next != nil:
		n += len(next.value())
	}
	return n
}

// writeGroup is what a view of the store knows of its segment and its writes.
type writeGroup struct {
	parent  *store
	segment int
	seg     *segmentStore
	// atomic makes writes join ops, at the revision the group takes when it ends (atomically), instead of
	// each taking a revision of its own.
	atomic bool
	ops    []durability.Op
	bytes  int // what ops take (groupWriteBytes)
	// maxBytes bounds bytes: the store's maxGroupBytes, 0 for no bound (liftBound).
	maxBytes int
	// refused is set by a write refused for taking the group past maxBytes, and every
	// write after it is refused too, until takeRefusal clears it.
	refused bool
	// read marks a view of readAtomically, under the segment's read lock: it must not write.
	read bool
	// created is set by a write that gives a key without a live value one, until takeCreated clears it.
	created bool
	// undo puts ops back, newest last (rollback). writing is set while a write changes the segment before
	// its step is in undo: a panic then leaves a change no step undoes.
	undo    []undoStep
	writing bool
}

// enter checks that a group's view touches only its own segment: it holds no other segment's lock.
func (g *writeGroup) enter(seg *segmentStore) {
	if seg != g.seg {
		panic("zaris: a view of the store touched a segment outside its own")
	}
}

// accessMode is what the eviction policy tracks of each entry's use. Views ask the store they were made
// from, which holds the budget.
func (s *store) accessMode() accessMode {
	if s.group != nil {
		return s.group.parent.budget.accessMode()
	}
	return s.budget.accessMode()
}

// hook returns the write hook, which views find on the store they were made from.
func (s *store) hook() writeHook {
	if s.group != nil {
		return s.group.parent.onWrite
	}
	return s.onWrite
}

// admits reports whether a write, whose op opOfWrite(key, next, change) makes, fits in the atomic group of
// this view, and otherwise marks the group refused. Writes ask before they change anything, so a refused
// write leaves the store as it was. Outside an atomic group every write fits: one op is bounded by
// MaxValueSize.
func (s *store) admits(key string, next *entry, change writeChange) bool {
	g := s.group
	if g == nil || !g.atomic || g.maxBytes == 0 {
		return true
	}
	if !g.refused && g.bytes+groupWriteBytes(key, next, change) <= g.maxBytes {
		return true
	}
	g.refused = true
	return false
}

// groupHasRoom reports whether writes taking n bytes (groupWriteBytes) would fit in the atomic group of this
// view, for a command that writes several keys and must write all of them or none.
func (s *store) groupHasRoom(n int) bool {
	g := s.group
	return g == nil || !g.atomic || g.maxBytes == 0 || !g.refused && g.bytes+n <= g.maxBytes
}

// liftBound lets the atomic group of this view take any size: for the writes of a transaction's
// two-phase commit, which the transaction's own size bounds (Tx.buffer) and which must never stop half way.
func (s *store) liftBound() {
	if s.group != nil {
		s.group.maxBytes = 0
	}
}

// takeRefusal reports whether a write was refused since the last call (admits), and clears it.
func (s *store) takeRefusal() bool {
	g := s.group
	if g == nil || !g.refused {
		return false
	}
	g.refused = false
	return true
}

// lock, unlock, rlock and runlock take a segment's lock, except on an atomic group's view, whose caller
// holds it already.
func (s *store) lock(seg *segmentStore) {
	if s.group != nil {
		s.group.enter(seg)
		if s.group.read {
			panic("zaris: a write through a read-only view of the store")
		}
		return
	}
	seg.mu.Lock()
}

func (s *store) unlock(seg *segmentStore) {
	if s.group == nil {
		seg.mu.Unlock()
	}
}

func (s *store) rlock(seg *segmentStore) {
	if s.group != nil {
		s.group.enter(seg)
		return
	}
	seg.mu.RLock()
}

func (s *store) runlock(seg *segmentStore) {
	if s.group == nil {
		seg.mu.RUnlock()
	}
}

// atomically runs fn with a view of the store on which every read and write of segment sees no other
// writer, and whose writes become one write of the segment: all at its next revision, which is every
// written key's new version, and one op for replicas, the disk and watchers (an OpMulti, unless there was
// a single write). fn must touch only segment. It returns the segment's revision afterwards. A panic of fn
// between two writes undoes them (rollback); one in the middle of a write leaves the segment torn.
func (s *store) atomically(segment int, fn func(g *store)) uint64 {
	root := s
	if s.group != nil { // a view from applyExclusive: its caller holds the lock
		root = s.group.parent
		s.group.enter(&root.segments[segment])
	} else {
		root.segments[segment].mu.Lock()
		defer root.segments[segment].mu.Unlock()
	}
	seg := &root.segments[segment]
	g := &store{clock: root.clock, segments: root.segments, group: &writeGroup{parent: root, segment: segment, seg: seg, atomic: true, maxBytes: root.maxGroupBytes}}
	done := false
	defer func() {
		if !done && !g.group.writing { // fn panicked between writes: none of them stays
			g.group.rollback()
		}
	}()
	fn(g)
	done = true
	ops := g.group.ops
	if len(ops) == 0 {
		return seg.revision
	}
	seg.revision++
	if root.onWrite != nil {
		root.onWrite(segment, seg.revision, 0, "", nil, writeChange{multi: ops, at: root.now()})
	}
	seg.torn = false
	return seg.revision
}

// readAtomically runs fn with a view of the store on which every read of segment sees one state of it: no
// write of the segment lands while fn runs. It returns the revision fn saw. fn must only read, and only
// segment. A command that reads several keys reads them this way, so that it never sees part of an atomic
// group.
func (s *store) readAtomically(segment int, fn func(v *store)) uint64 {
	seg := &s.segments[segment]
	if s.group != nil { // a view whose caller holds the lock already
		s.group.enter(seg)
		fn(s)
		return seg.revision
	}
	seg.mu.RLock()
	defer seg.mu.RUnlock()
	fn(&store{clock: s.clock, segments: s.segments, group: &writeGroup{parent: s, segment: segment, seg: seg, read: true}})
	return seg.revision
}

func newStore(segments int, clock Clock) *store {
	s := &store{clock: clock, segments: make([]segmentStore, segments), views: make([]store, segments)}
	for i := range s.segments {
		s.segments[i].entries = newKeyTable()
		s.views[i] = store{clock: clock, segments: s.segments, group: &writeGroup{parent: s, segment: i, seg: &s.segments[i]}}
	}
	return s
}

// applyExclusive runs key operation k on segment seg under the segment's lock, unless a transaction
// holds the operation's key: then it answers StatusLocked, having done nothing. Holding the
// lock from the check to the write keeps a transaction's intent from landing in between.
func (s *store) applyExclusive(seg int, k *keyOperation, req kv.Request, lim opLimits) kv.Reply {
	ss := &s.segments[seg]
	ss.mu.Lock()
	defer ss.mu.Unlock()
	v := &s.views[seg]
	if !k.ownLocks && v.lockedBy(seg, req.Key) != "" {
		return kv.Reply{Status: StatusLocked}
	}
	if !k.readOnly && lim.deposedFrom(seg) {
		return kv.Reply{Status: StatusOwnershipChanging}
	}
	if lim.refusesGrowth(k, seg, &req) {
		return kv.Reply{Status: StatusOutOfMemory}
	}
	v.takeCreated()
	reply := k.apply(v, seg, req, lim)
	reply.Created = v.takeCreated()
	return reply
}

// takeCreated reports whether a write of the view's group created a key since the last call, and clears
// it. A view outside a group reports false.
func (s *store) takeCreated() bool {
	if s.group == nil {
		return false
	}
	created := s.group.created
	s.group.created = false
	return created
}

// applyRead runs read-only key operation k on segment seg. A read that raced the discard of a deposed
// owner's copy, which precedes the map that deposes it, is refused: it may have seen the copy emptied.
func (s *store) applyRead(seg int, k *keyOperation, req kv.Request, lim opLimits) kv.Reply {
	reply := k.apply(s, seg, req, lim)
	if lim.deposedFrom(seg) {
		return kv.Reply{Status: StatusOwnershipChanging}
	}
	return reply
}

func (s *store) now() int64 { return s.clock.Now().UnixNano() }

// get returns the stored value without copying it: callers must not modify it. Expired entries are invisible.
func (s *store) get(segment int, key string) (value []byte, version uint64, ok bool) {
	e, _ := s.lookup(segment, key)
	if e == nil || e.expired(s.now()) {
		return nil, 0, false
	}
	return e.value(), e.version(), true
}

// lookup returns key's stored entry, expired or not, and the segment's revision, under the read lock: one
// deferred unlock, so that no panic leaves the lock held (panics.go).
func (s *store) lookup(segment int, key string) (*entry, uint64) {
	seg := &s.segments[segment]
	s.rlock(seg)
	defer s.runlock(seg)
	e := seg.entries.get(key)
	if mode := s.accessMode(); mode != accessNone && e != nil {
		e.touch(mode, s.now())
	}
	return e, seg.revision
}

// getEntry returns key's live entry, which callers must not modify, and the time it has left, zero when it
// never expires.
func (s *store) getEntry(segment int, key string) (e *entry, ttl time.Duration, ok bool) {
	e, ttl, ok, _ = s.getEntryAt(segment, key, s.now())
	return e, ttl, ok
}

// getEntryAt is getEntry at the instant now (Unix nanoseconds), for a caller that reads many keys at one
// instant and so reads the clock once for all of them. It also returns the segment's revision the read
// saw, found or not.
func (s *store) getEntryAt(segment int, key string, now int64) (e *entry, ttl time.Duration, ok bool, revision uint64) {
	e, revision = s.lookup(segment, key)
	if e == nil || e.expired(now) {
		return nil, 0, false, revision
	}
	if e.expiry() != 0 {
		ttl = time.Duration(e.expiry() - now)
	}
	return e, ttl, true, revision
}

// update runs fn on key's live entry (nil when absent or expired) under the segment's lock. When fn says
// write, the store replaces the entry with next (nil deletes it), stamping next with the key's new version.
// Entries are never modified once stored: fn must build a new one. Writes to collections go through
// writeCollection instead; both end in commit, the one place that orders a segment's writes. A write its
// atomic group refuses (admits) returns next unstored.
func (s *store) update(segment int, key string, fn func(cur *entry, now int64) (next *entry, write bool)) *entry {
	now := s.now()
	seg := &s.segments[segment]
	s.lock(seg)
	defer s.unlock(seg)
	cur := seg.entries.get(key)
	if cur != nil && cur.expired(now) {
		cur = nil
	}
	next, write := fn(cur, now)
	if !write {
		return cur
	}
	if !s.admits(key, next, writeChange{}) {
		return next // unstored, as callers of a write expect an entry; the group answers for the refusal
	}
	s.commit(segment, seg, key, next, writeChange{at: now})
	return next
}

// commit stores next under key as the segment's next revision and tells the write hook, with op when a
// collection op made next. It returns that revision. Called with seg.mu held. In an atomic group, the
// write joins the group instead, at the revision the group will take.
func (s *store) commit(segment int, seg *segmentStore, key string, next *entry, change writeChange) uint64 {
	revision := seg.revision + 1
	seg.torn = true
	g := s.group
	if g != nil && g.atomic {
		g.writing = true
	}
	old := seg.set(key, next)
	if g != nil && next != nil && (old == nil || old.expired(cmp.Or(change.at, s.now()))) {
		g.created = true
	}
	if next != nil {
		var access uint16
		if mode := s.accessMode(); mode != accessNone { // the clock is read only when a policy needs it
			access = written(mode, old, cmp.Or(change.at, s.now()))
		}
		next.stamp(revision, access)
	}
	if g != nil && g.atomic {
		if g.undo == nil { // room for a typical group at once, rather than growing 1, 2, 4, 8
			g.undo, g.ops = make([]undoStep, 0, 8), make([]durability.Op, 0, 8)
		}
		g.undo = append(g.undo, undoStep{key: key, old: old, revert: change.revert})
		g.writing = false
		g.ops = append(g.ops, opOfWrite(segment, revision, key, next, change))
		g.bytes += groupWriteBytes(key, next, change)
		return revision // the group's end clears torn
	}
	seg.revision = revision
	if hook := s.hook(); hook != nil {
		hook(segment, revision, 0, key, next, change)
	}
	seg.torn = false
	return revision
}

// reapKey deletes key if its entry has expired, by a write of its own that the hook sees as an expiry, and
// reports whether it did.
func (s *store) reapKey(segment int, key string) bool {
	now := s.now()
	seg := &s.segments[segment]
	s.lock(seg)
	defer s.unlock(seg)
	if cur := seg.entries.get(key); cur == nil || !cur.expired(now) {
		return false
	}
	if _, held := seg.intentOf(key, now); held {
		return false // a transaction holds it: it expires once resolved
	}
	if !s.admits(key, nil, writeChange{}) {
		return false
	}
	s.commit(segment, seg, key, nil, writeChange{expired: true, at: now})
	return true
}

// expireSegment expires every entry of segment whose time has passed, one write each, and returns how
// many it expired. Only the segment's owner calls it: its replicas and watchers learn of each expiry from
// the op it writes.
func (s *store) expireSegment(segment int) int {
	expired := 0
	for _, key := range s.expiredKeys(segment) {
		if s.reapKey(segment, key) {
			expired++
		}
	}
	return expired
}

// expiredKeys lists the keys of segment whose entries have expired.
func (s *store) expiredKeys(segment int) []string {
	now := s.now()
	seg := &s.segments[segment]
	s.rlock(seg)
	defer s.runlock(seg)
	var keys []string
	for key, e := range seg.entries.all() {
		if e.expired(now) {
			keys = append(keys, key)
		}
	}
	return keys
}

// readCollection runs fn on key's live collection of kind k, under the segment's read lock. It returns
// StatusNotFound, without calling fn, when key has no live value, and StatusWrongType when it holds
// another kind.
func (s *store) readCollection(segment int, key string, k kind, fn func(c collection)) Status {
	now := s.now()
	seg := &s.segments[segment]
	s.rlock(seg)
	defer s.runlock(seg)
	e := seg.entries.get(key)
	switch {
	case e == nil || e.expired(now):
		return StatusNotFound
	case e.kind() != k:
		return StatusWrongType
	}
	if mode := s.accessMode(); mode != accessNone {
		e.touch(mode, now)
	}
	fn(e.coll().c)
	return StatusSuccess
}

// writeCollection runs fn, under the segment's lock, on key's live collection of kind k, nil when key has
// no live value, and applies the op fn returns, if any (kind not 0). It returns StatusWrongType, without
// calling fn, when key holds another kind, and otherwise the key's version after the op, 0 if none was
// applied. A collection the op empties is deleted, and replicas receive a delete.
func (s *store) writeCollection(segment int, key string, k kind, fn func(c collection) collOp) collWrite {
	now := s.now()
	seg := &s.segments[segment]
	s.lock(seg)
	defer s.unlock(seg)
	cur := seg.entries.get(key)
	if cur != nil && cur.expired(now) {
		cur = nil
	}
	if cur != nil && cur.kind() != k {
		return collWrite{status: StatusWrongType}
	}
	var c collection
	if cur != nil {
		c = cur.coll().c
	}
	op := fn(c)
	if op.kind == 0 {
		return collWrite{status: StatusSuccess}
	}
	var expireAt int64
	if cur == nil {
		op.flags |= collFresh
	} else {
		expireAt = cur.expiry()
	}
	if !s.admits(key, nil, writeChange{coll: &op}) {
		return collWrite{status: StatusTooLarge}
	}
	var revert func()
	if g := s.group; g != nil && g.atomic {
		if cur != nil {
			revert = revertOf(cur.coll().c, &op)
		}
		g.writing = true
	}
	seg.torn = true // the op changes cur's collection in place; commit clears it
	next := applyCollOp(key, cur, &op, expireAt)
	if next == nil {
		return collWrite{version: s.commit(segment, seg, key, nil, writeChange{at: now, revert: revert}), status: StatusSuccess, emptied: true}
	}
	s.commit(segment, seg, key, next, writeChange{coll: &op, at: now, revert: revert})
	return collWrite{version: next.version(), status: StatusSuccess}
}

// setExpiry runs expiry on key's live value, under the segment's lock, and gives the value the expiry it
// returns (0 for none), deletes it (del), or writes nothing (!write). A collection keeps its content
// without being copied: replicas receive an expiry op rather than the value. It reports whether the key had
// a live value.
func (s *store) setExpiry(segment int, key string, expiry func(cur *entry, now int64) (expireAt int64, del, write bool)) (existed bool) {
	now := s.now()
	seg := &s.segments[segment]
	s.lock(seg)
	defer s.unlock(seg)
	cur := seg.entries.get(key)
	if cur == nil || cur.expired(now) {
		return false
	}
	expireAt, del, write := expiry(cur, now)
	switch {
	case !write:
	case del:
		if s.admits(key, nil, writeChange{}) {
			s.commit(segment, seg, key, nil, writeChange{at: now})
		}
	case cur.coll() == nil:
		if next := cur.withExpiry(expireAt); s.admits(key, next, writeChange{}) {
			s.commit(segment, seg, key, next, writeChange{at: now})
		}
	default:
		op := collOp{kind: durability.OpExpireAt}
		if s.admits(key, nil, writeChange{coll: &op}) {
			s.commit(segment, seg, key, applyCollOp(key, cur, &op, expireAt), writeChange{coll: &op, at: now})
		}
	}
	return true
}

// set stores e under key, or deletes key when e is nil, and keeps the counts of internal keys, bytes and
// entries with a TTL in step. Called with seg.mu held.
func (seg *segmentStore) set(key string, e *entry) (old *entry) {
	if e == nil {
		old = seg.entries.remove(key)
	} else {
		old = seg.entries.set(key, e)
	}
	var bytes, expiring int64
	had := old != nil
	if had { // old's count first: e.count overwrites the footprint a collection's entries share
		bytes, expiring = -old.counted(key), -old.ttlCount()
	}
	if e != nil {
		bytes += e.count(key)
		expiring += e.ttlCount()
	}
	seg.bytes.Add(bytes)
	if expiring != 0 {
		seg.expiring.Add(expiring)
	}
	if had != (e != nil) {
		seg.keysChanged(key, e != nil)
	}
	return old
}

// keysChanged keeps the counts of internal keys and intents in step with a key added to the segment or
// removed from it.
func (seg *segmentStore) keysChanged(key string, added bool) {
	if !isInternalKey(key) {
		return
	}
	d := 1
	if !added {
		d = -1
	}
	seg.internal += d
	if isIntentKey(key) {
		seg.intents.Add(int64(d))
	}
}

// put stores a copy of value under key, expiring as ask says, and returns the key's new version.
func (s *store) put(segment int, key string, value []byte, ask expiryAsk) uint64 {
	e := s.update(segment, key, func(_ *entry, now int64) (*entry, bool) {
		return newStringEntry(key, value, 0, ask.expiry(now)), true
	})
	return e.version()
}

// remove deletes key and reports whether a live (unexpired) entry existed.
func (s *store) remove(segment int, key string) bool {
	existed := false
	s.update(segment, key, func(cur *entry, _ int64) (*entry, bool) {
		existed = cur != nil
		return nil, existed
	})
	return existed
}

// expiryAsk is how long a written value lives, as its request asked: ttl from the instant the write
// applies, or, when at is set, until at in Unix nanoseconds: a deadline the client named (EXPIREAT,
// SET PXAT), which no delay between the client and the owner may move.
type expiryAsk struct {
	ttl time.Duration
	at  int64
}

// forTTL is the expiryAsk of ttl from the write.
func forTTL(ttl time.Duration) expiryAsk { return expiryAsk{ttl: ttl} }

// expiryOf is the expiry req asks for.
func expiryOf(req *kv.Request) expiryAsk {
	return expiryAsk{ttl: time.Duration(req.TTL), at: req.ExpireAt}
}

// expiry is the expiry of a value written at now: 0 for none when the ttl is not positive.
func (a expiryAsk) expiry(now int64) int64 {
	if a.at != 0 {
		return a.at
	}
	return expiryFrom(now, a.ttl)
}

// deadline is when an expiry set at now falls, and whether it has passed: a ttl that is not positive
// ends at once, as EXPIRE with one deletes the key.
func (a expiryAsk) deadline(now int64) (at int64, passed bool) {
	switch {
	case a.at != 0:
		return a.at, a.at <= now
	case a.ttl <= 0:
		return now + int64(a.ttl), true
	}
	return expiryFrom(now, a.ttl), false
}

// expiryFrom turns a TTL into an absolute expiry; zero or negative means none. A TTL past the end of
// time expires at its end, rather than overflow into the past.
func expiryFrom(now int64, ttl time.Duration) int64 {
	switch {
	case ttl <= 0:
		return 0
	case int64(ttl) > math.MaxInt64-now:
		return math.MaxInt64
	}
	return now + int64(ttl)
}

// bytes estimates the memory the stored entries take: keys, values and Go's overhead per entry.
func (s *store) bytes() int64 {
	var n int64
	for i := range s.segments {
		n += s.segments[i].bytes.Load()
	}
	return n
}

// segmentBytes estimates what segment seg's entries take, as bytes does.
func (s *store) segmentBytes(seg int) int64 { return s.segments[seg].bytes.Load() }

// expiringLen counts the stored entries with a TTL, expired ones not yet reclaimed included.
func (s *store) expiringLen() int {
	var n int64
	for i := range s.segments {
		n += s.segments[i].expiring.Load()
	}
	return int(n)
}

// len counts stored entries, expired ones not yet reclaimed included.
func (s *store) len() int {
	n := 0
	for i := range s.segments {
		seg := &s.segments[i]
		seg.mu.RLock()
		n += seg.entries.len()
		seg.mu.RUnlock()
	}
	return n
}

// segmentKeys counts the keys of segment seg, transactions' intents and records among them.
func (s *store) segmentKeys(seg int) int {
	ss := &s.segments[seg]
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	return ss.entries.len()
}

// applyAt applies an op that the segment's owner made at op.Revision, on a replica. It applies only the
// next revision in order: an older one is a duplicate (already applied) and a later one reveals a gap.
// A collection op changes the key's collection as it changed the owner's; a multi op applies all its ops.
// It returns whether it applied and the segment's revision afterwards.
func (s *store) applyAt(segment int, epoch uint64, op *durability.Op) (applied bool, have uint64) {
	seg := &s.segments[segment]
	s.lock(seg)
	defer s.unlock(seg)
	if op.Revision != seg.revision+1 {
		return false, seg.revision
	}
	seg.torn = true
	seg.revision = op.Revision
	if op.Kind == durability.OpMulti {
		ops, _ := durability.DecodeMulti(op.Value) // checked when the op was decoded
		for i := range ops {
			next, _ := applyOp(seg, &ops[i])
			s.setApplied(seg, ops[i].Key, next)
		}
		if s.onWrite != nil {
			s.onWrite(segment, op.Revision, epoch, "", nil, writeChange{multi: ops, at: s.now()})
		}
		seg.torn = false
		return true, op.Revision
	}
	next, change := applyOp(seg, op)
	s.setApplied(seg, op.Key, next)
	if s.onWrite != nil {
		change.at = s.now()
		s.onWrite(segment, op.Revision, epoch, op.Key, next, change)
	}
	seg.torn = false
	return true, op.Revision
}

// setApplied stores next, which a replicated op left, under key: written at the time it arrives, for the
// eviction policy. Called with seg.mu held.
func (s *store) setApplied(seg *segmentStore, key string, next *entry) {
	if old := seg.set(key, next); next != nil {
		if mode := s.accessMode(); mode != accessNone {
			next.stamp(next.version(), written(mode, old, s.now()))
		}
	}
}

// applyOp returns the entry op leaves under its key, nil for none, and what made it, as the owner's write
// hook saw it. A collection op changes the key's collection in place. Called with seg.mu held.
func applyOp(seg *segmentStore, op *durability.Op) (next *entry, change writeChange) {
	switch {
	case op.Kind == durability.OpExpire:
		change.expired = true
	case op.Kind == durability.OpEvict:
		change.evicted = true
	case op.Kind == durability.OpPut:
		next = newStringEntry(op.Key, op.Value, op.Version, op.ExpireAt)
	case op.Kind.HasArgs():
		if c, err := decodeCollOp(op.Kind, op.Value); err == nil {
			change.coll = &c
			cur := seg.entries.get(op.Key)
			if next = applyCollOp(op.Key, cur, change.coll, op.ExpireAt); next == cur && cur != nil {
				next = cur.withExpiry(cur.expiry()) // a copy: readers may hold the stored entry
			}
			if next != nil {
				next.stamp(op.Version, next.access())
			}
		}
	}
	return next, change
}

// tornSegments lists the segments a panic left in the middle of a write (segmentStore.torn), of seg alone
// when it is not negative. It takes each segment's lock, so a write in progress elsewhere is not taken for
// one a panic interrupted.
func (s *store) tornSegments(seg int) []int {
	var torn []int
	for i := range s.segments {
		if seg >= 0 && i != seg {
			continue
		}
		ss := &s.segments[i]
		ss.mu.Lock()
		if ss.torn {
			torn = append(torn, i)
		}
		ss.mu.Unlock()
	}
	return torn
}

// revision returns the segment's current revision.
func (s *store) revision(segment int) uint64 {
	seg := &s.segments[segment]
	s.rlock(seg)
	defer s.runlock(seg)
	return seg.revision
}

// snapshot copies the segment's entries (expired ones included: every copy expires them at the same
// instant) and its revision, consistently. A collection is encoded under the lock, since it changes in
// place, into one or more entries (snapshotEntries).
func (s *store) snapshot(segment int) (revision uint64, entries []durability.Entry) {
	s.snapshotThen(segment, func(rev uint64, e []durability.Entry) { revision, entries = rev, e })
	return revision, entries
}

// snapshotThen takes a snapshot as snapshot does and hands it to fn before the segment's lock is
// released, so that no write of the segment comes between the two.
func (s *store) snapshotThen(segment int, fn func(revision uint64, entries []durability.Entry)) {
	seg := &s.segments[segment]
	s.rlock(seg)
	defer s.runlock(seg)
	entries := make([]durability.Entry, 0, seg.entries.len())
	for k, e := range seg.entries.all() {
		if e.coll() != nil {
			entries = snapshotEntries(entries, k, e)
			continue
		}
		entries = append(entries, durability.Entry{Key: k, Value: e.value(), ExpireAt: e.expiry(), Version: e.version()})
	}
	fn(seg.revision, entries)
}

// restore replaces the segment's whole content with a snapshot taken at revision. The entries of one
// collection are joined.
func (s *store) restore(segment int, revision uint64, snap []durability.Entry) {
	s.restoreThen(segment, revision, snap, func() {})
}

// restoreThen restores as restore does and runs then before the segment's lock is released, so that no
// write of the segment comes between the two.
func (s *store) restoreThen(segment int, revision uint64, snap []durability.Entry, then func()) {
	entries := newKeyTable()
	for i := range snap {
		d := &snap[i]
		if d.Kind == uint8(kindString) {
			entries.set(d.Key, newStringEntry(d.Key, d.Value, d.Version, d.ExpireAt))
			continue
		}
		e := entries.get(d.Key)
		if e == nil || e.kind() != kind(d.Kind) {
			c := newCollection(kind(d.Kind))
			if c == nil {
				continue
			}
			e = newCollEntry(d.Key, &collValue{c: c}, d.Version, d.ExpireAt)
			entries.set(d.Key, e)
		}
		if elems, err := durability.DecodeArgs(d.Value); err == nil {
			e.coll().c.load(elems)
		}
	}
	seg := &s.segments[segment]
	s.lock(seg)
	defer s.unlock(seg)
	seg.entries = entries
	seg.internal = 0
	seg.intents.Store(0)
	var bytes, expiring int64
	mode, now := s.accessMode(), s.now()
	for k, e := range entries.all() {
		if mode != accessNone {
			e.stamp(e.version(), written(mode, nil, now))
		}
		seg.keysChanged(k, true)
		bytes += e.count(k)
		expiring += e.ttlCount()
	}
	seg.bytes.Store(bytes)
	seg.expiring.Store(expiring)
	seg.revision = revision
	seg.torn = false // the snapshot replaced whatever a write left half done
	then()
}

// Digest summarises one segment's content so copies can be compared cheaply: the revision plus an
// order-independent hash of every entry.
type Digest struct {
	Segment  int
	Revision uint64
	Hash     uint64
	Keys     int
}

// digest computes the segment's Digest.
func (s *store) digest(segment int) Digest {
	seg := &s.segments[segment]
	s.rlock(seg)
	defer s.runlock(seg)
	d := Digest{Segment: segment, Revision: seg.revision, Keys: seg.entries.len()}
	for k, e := range seg.entries.all() {
		d.Hash ^= entryHash(k, e)
	}
	return d
}

// entryHash is FNV-1a over the key, the value (a collection's kind and digest), the expiry and the version, mixed so that XOR-combining
// many of them stays sensitive to every field.
func entryHash(key string, e *entry) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(e.value())
	if cv := e.coll(); cv != nil {
		var c [9]byte
		c[0] = byte(cv.c.kind())
		binary.LittleEndian.PutUint64(c[1:], cv.c.digest())
		h.Write(c[:])
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(e.expiry()))
	binary.LittleEndian.PutUint64(b[8:], e.version())
	h.Write(b[:])
	x := h.Sum64()
	// A final avalanche (splitmix64) so XOR of many hashes does not cancel structure.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// evictionCandidate is a key eviction may take: its segment, its expiry (0 for none), and its entry's word
// (version and access stamp) when sampled, which a later eviction checks has not changed.
type evictionCandidate struct {
	segment  int
	key      string
	expireAt int64
	word     uint64
	rank     uint64 // its rank when last compared (evictionPool.take)
}

// access is the candidate's access stamp when sampled.
func (c *evictionCandidate) access() uint16 { return uint16(c.word >> versionBits) }

// sampleKey offers sample.offer the first sample.want keys eviction may take (see evictable), met in scan
// order from a key of segment seg chosen at random, wrapping around once, and returns how many it offered.
// A sample of keys with a TTL looks further the fewer of the segment's keys have one.
func (s *store) sampleKey(seg int, sample evictionSample) (taken int) {
	ss := &s.segments[seg]
	s.rlock(ss)
	defer s.runlock(ss)
	start, any := ss.entries.samplePosition(sample.intn)
	if !any {
		return 0
	}
	looks := 16 + sample.want
	if sample.withTTL {
		expiring := ss.expiring.Load()
		if expiring == 0 {
			return 0
		}
		// Keys with a TTL may be few among the others: look far enough to meet a few of them.
		looks += int(min(int64(ss.entries.len()), int64(sample.want)*4*int64(ss.entries.len())/expiring))
	}
	now := s.now()
	seen, wrapped := 0, false
	pick := func(pos uint64, e *entry) bool {
		if wrapped && pos >= start {
			return false // back where the sample began
		}
		seen++
		key := e.key()
		if evictable(ss, key, e, sample.withTTL, now) {
			sample.offer(evictionCandidate{segment: seg, key: key, expireAt: e.expiry(), word: atomic.LoadUint64(&e.word)})
			taken++
		}
		return taken < sample.want && seen < looks
	}
	ss.entries.from(start)(pick)
	if taken < sample.want && seen < looks {
		wrapped = true
		ss.entries.from(0)(pick)
	}
	return taken
}

// evictable reports whether eviction may take key, whose entry is e: a key a client wrote, with an expiry
// when withTTL asks for one, that no transaction holds. Called with seg.mu held.
func evictable(seg *segmentStore, key string, e *entry, withTTL bool, now int64) bool {
	if isInternalKey(key) || withTTL && e.expiry() == 0 {
		return false
	}
	_, held := seg.intentOf(key, now)
	return !held
}

// evict deletes key from segment seg to make room, as a write of its own that the hook sees as an
// eviction, unless it is gone, a transaction holds it, or its entry's word is no longer word (it was
// written or used since it was sampled; 0 takes any). It returns what the entry took.
func (s *store) evict(seg int, key string, word uint64) (freed int64, ok bool) {
	ss := &s.segments[seg]
	s.lock(ss)
	defer s.unlock(ss)
	cur, now := ss.entries.get(key), s.now()
	if cur == nil || !evictable(ss, key, cur, false, now) || word != 0 && atomic.LoadUint64(&cur.word) != word {
		return 0, false
	}
	freed = cur.counted(key)
	s.commit(seg, ss, key, nil, writeChange{evicted: true, at: now})
	return freed, true
}
