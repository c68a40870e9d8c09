package zaris

import (
	"encoding/binary"
	"hash/fnv"
	"math"

	"github.com/zaris-go/zaris/durability"
)

// kind is the type of value a key holds. The numbers are part of the snapshot format (durability.Entry).
type kind uint8

const (
	kindString kind = iota
	kindHash
	kindSet
	kindList
	kindZSet
)

var kindNames = [...]string{kindString: "string", kindHash: "hash", kindSet: "set", kindList: "list", kindZSet: "zset"}

func (k kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "none"
}

// collection is a hash, set, list or sorted set held by an entry. Unlike a string value it changes in
// place, under its segment's lock: a write to one field must not copy a million.
type collection interface {
	kind() kind
	len() int
	// elements lists the content, for snapshots: field and value pairs, members, items in order, or score
	// and member pairs in order. Elements alias the collection.
	elements() [][]byte
	// load adds elements as elements lists them.
	load(elems [][]byte)
	// digest hashes the content, the same for equal collections whatever their history.
	digest() uint64
	// dataBytes counts the bytes of the elements held: fields and values, members, items.
	dataBytes() int64
}

// stride is how many elements of elements() make one element of a collection of kind k.
func (k kind) stride() int {
	if k == kindHash || k == kindZSet {
		return 2
	}
	return 1
}

func newCollection(k kind) collection {
	switch k {
	case kindHash:
		return &hashColl{fields: map[string][]byte{}}
	case kindSet:
		return &setColl{members: map[string]struct{}{}}
	case kindList:
		return &listColl{}
	case kindZSet:
		return newZSet()
	}
	return nil
}

// collOp is a change to a collection, as replicas and the disk log receive it: one durability op kind, its
// flags and its arguments. The owner and every replica apply it with applyCollOp, so their copies agree.
type collOp struct {
	kind    durability.OpKind
	flags   byte
	args    [][]byte
	encoded []byte // the encoding it was decoded from, if any
}

// Flags of a collection op, in the first byte of its encoded arguments.
const (
	collFresh byte = 1 << iota // start from an empty collection, dropping what the key held (it had expired)
	collLeft                   // a list op at the head rather than the tail
)

// encode returns the op's arguments as durability.Op.Value holds them: the flags, then the arguments.
func (op *collOp) encode() []byte {
	if op.encoded != nil {
		return op.encoded
	}
	all := make([][]byte, 0, 1+len(op.args))
	all = append(all, []byte{op.flags})
	return durability.AppendArgs(nil, append(all, op.args...))
}

// size is at least the length of what encode returns, without encoding.
func (op *collOp) size() int {
	if op.encoded != nil {
		return len(op.encoded)
	}
	return durability.ArgsSize(op.args) + 8 // the flags and the longer array header
}

// decodeCollOp reads what encode wrote.
func decodeCollOp(k durability.OpKind, value []byte) (collOp, error) {
	args, err := durability.DecodeArgs(value)
	if err != nil {
		return collOp{}, err
	}
	op := collOp{kind: k, encoded: value}
	if len(args) > 0 && len(args[0]) == 1 {
		op.flags, args = args[0][0], args[1:]
	}
	op.args = args
	return op, nil
}

// opCollKind is the kind of collection an op applies to, kindString for an op on any kind.
func opCollKind(k durability.OpKind) kind {
	switch k {
	case durability.OpHashSet, durability.OpHashDel:
		return kindHash
	case durability.OpSetAdd, durability.OpSetRem:
		return kindSet
	case durability.OpListPush, durability.OpListPop, durability.OpListTrim:
		return kindList
	case durability.OpZAdd, durability.OpZRem:
		return kindZSet
	}
	return kindString
}

// applyCollOp applies op to cur, key's stored entry (nil if none), changing cur's collection in place,
// and returns the entry that replaces cur: nil when the collection ends up empty. The new entry expires at
// expireAt. An op that does not fit cur (another kind, or no collection when it is not fresh) changes
// nothing.
func applyCollOp(key string, cur *entry, op *collOp, expireAt int64) *entry {
	if op.kind == durability.OpExpireAt {
		if cur == nil {
			return nil
		}
		return cur.withExpiry(expireAt)
	}
	k := opCollKind(op.kind)
	var cv *collValue
	switch {
	case op.flags&collFresh != 0:
		cv = &collValue{c: newCollection(k)}
	case cur == nil || cur.kind() != k:
		return cur
	default:
		cv = cur.coll() // changed in place: the new entry shares it
	}
	applyToCollection(cv.c, op)
	if cv.c.len() == 0 {
		return nil
	}
	return newCollEntry(key, cv, 0, expireAt)
}

func applyToCollection(c collection, op *collOp) {
	switch c := c.(type) {
	case *hashColl:
		if op.kind == durability.OpHashSet {
			c.load(op.args)
		} else {
			for _, f := range op.args {
				c.remove(string(f))
			}
		}
	case *setColl:
		if op.kind == durability.OpSetAdd {
			c.load(op.args)
		} else {
			for _, m := range op.args {
				c.remove(string(m))
			}
		}
	case *listColl:
		c.apply(op)
	case *zsetColl:
		if op.kind == durability.OpZAdd {
			c.load(op.args)
		} else {
			for _, m := range op.args {
				c.remove(string(m))
			}
		}
	}
}

// collectionChunkBytes bounds the elements one snapshot entry carries, so that a large collection travels
// in pieces like many small keys (segmentSnapshot.nextPiece).
const collectionChunkBytes = 256 << 10

// snapshotEntries appends to dst the snapshot entries of a collection entry: one or more, each with part of
// its elements, whole elements in each.
func snapshotEntries(dst []durability.Entry, key string, e *entry) []durability.Entry {
	c := e.coll().c
	elems, k := c.elements(), c.kind()
	stride := k.stride()
	for start := 0; start < len(elems); {
		end, size := start, 0
		for end < len(elems) && (end == start || size < collectionChunkBytes) {
			for _, el := range elems[end : end+stride] {
				size += len(el) + 5
			}
			end += stride
		}
		dst = append(dst, durability.Entry{Key: key, Value: durability.AppendArgs(nil, elems[start:end]),
			ExpireAt: e.expiry(), Version: e.version(), Kind: uint8(k)})
		start = end
	}
	return dst
}

// elementHash hashes one element of a collection, mixed as entryHash mixes.
func elementHash(parts ...[]byte) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return mix64(h.Sum64())
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// ---- Hash ----

type hashColl struct {
	fields map[string][]byte
	bytes  int64 // of fields and values
}

func (h *hashColl) kind() kind { return kindHash }
func (h *hashColl) len() int   { return len(h.fields) }

func (h *hashColl) elements() [][]byte {
	out := make([][]byte, 0, 2*len(h.fields))
	for f, v := range h.fields {
		out = append(out, []byte(f), v)
	}
	return out
}

// load sets fields, each value a copy of its own, so that no request's buffer stays alive behind one; a
// value is never nil, so a nil one in a reply means a missing field.
func (h *hashColl) load(elems [][]byte) {
	for i := 0; i+1 < len(elems); i += 2 {
		v := append([]byte{}, elems[i+1]...)
		f := string(elems[i])
		if old, ok := h.fields[f]; ok {
			h.bytes -= allocSize(len(f)) + allocSize(len(old))
		}
		h.fields[f] = v
		h.bytes += allocSize(len(f)) + allocSize(len(v))
	}
}

func (h *hashColl) remove(f string) {
	if old, ok := h.fields[f]; ok {
		h.bytes -= allocSize(len(f)) + allocSize(len(old))
		delete(h.fields, f)
	}
}

func (h *hashColl) dataBytes() int64 { return h.bytes }

// lookup returns a field's value; h may be nil, as for a key without a hash.
func (h *hashColl) lookup(field string) ([]byte, bool) {
	if h == nil {
		return nil, false
	}
	v, ok := h.fields[field]
	return v, ok
}

func (h *hashColl) digest() uint64 {
	var d uint64
	for f, v := range h.fields {
		d ^= elementHash([]byte(f), v)
	}
	return d
}

// ---- Set ----

type setColl struct {
	members map[string]struct{}
	bytes   int64 // of members
}

func (s *setColl) kind() kind { return kindSet }
func (s *setColl) len() int   { return len(s.members) }

func (s *setColl) elements() [][]byte {
	out := make([][]byte, 0, len(s.members))
	for m := range s.members {
		out = append(out, []byte(m))
	}
	return out
}

func (s *setColl) load(elems [][]byte) {
	for _, m := range elems {
		if _, ok := s.members[string(m)]; !ok {
			s.members[string(m)] = struct{}{}
			s.bytes += allocSize(len(m))
		}
	}
}

func (s *setColl) remove(m string) {
	if _, ok := s.members[m]; ok {
		delete(s.members, m)
		s.bytes -= allocSize(len(m))
	}
}

func (s *setColl) dataBytes() int64 { return s.bytes }

func (s *setColl) digest() uint64 {
	var d uint64
	for m := range s.members {
		d ^= elementHash([]byte(m))
	}
	return d
}

// ---- List ----

// listColl is a ring buffer: push and pop at either end in amortized O(1), and indexing in O(1).
type listColl struct {
	buf   [][]byte
	head  int
	n     int
	bytes int64 // of items
}

func (l *listColl) dataBytes() int64 { return l.bytes }

func (l *listColl) kind() kind { return kindList }
func (l *listColl) len() int   { return l.n }

// at returns item i, counted from the head.
func (l *listColl) at(i int) []byte { return l.buf[(l.head+i)%len(l.buf)] }

func (l *listColl) grow() {
	if l.n < len(l.buf) {
		return
	}
	buf := make([][]byte, max(8, 2*len(l.buf)))
	for i := range l.n {
		buf[i] = l.at(i)
	}
	l.buf, l.head = buf, 0
}

// push adds a copy of v at one end, so that no request's buffer stays alive behind it; a nil v is stored
// empty, so a nil in a reply means a missing item.
func (l *listColl) push(left bool, v []byte) {
	v = append([]byte{}, v...)
	l.grow()
	if left {
		l.head = (l.head - 1 + len(l.buf)) % len(l.buf)
		l.buf[l.head] = v
	} else {
		l.buf[(l.head+l.n)%len(l.buf)] = v
	}
	l.n++
	l.bytes += allocSize(len(v))
}

func (l *listColl) pop(left bool) []byte {
	i := l.head
	if !left {
		i = (l.head + l.n - 1) % len(l.buf)
	}
	v := l.buf[i]
	l.buf[i] = nil
	if left {
		l.head = (l.head + 1) % len(l.buf)
	}
	l.n--
	l.bytes -= allocSize(len(v))
	return v
}

// apply runs a list op: push its items, pop the count it carries (8 bytes, big-endian), or keep the items
// from start to stop, exclusive (two such counts).
func (l *listColl) apply(op *collOp) {
	left := op.flags&collLeft != 0
	switch op.kind {
	case durability.OpListPush:
		for _, v := range op.args {
			l.push(left, v)
		}
	case durability.OpListPop:
		if len(op.args) == 1 {
			for n := min(count64(op.args[0]), l.n); n > 0; n-- {
				l.pop(left)
			}
		}
	case durability.OpListTrim:
		if len(op.args) == 2 {
			start, stop := min(count64(op.args[0]), l.n), min(count64(op.args[1]), l.n)
			stop = max(stop, start)
			for n := l.n - stop; n > 0; n-- {
				l.pop(false)
			}
			for ; start > 0; start-- {
				l.pop(true)
			}
		}
	}
}

func (l *listColl) elements() [][]byte {
	out := make([][]byte, l.n)
	for i := range out {
		out[i] = l.at(i)
	}
	return out
}

func (l *listColl) load(elems [][]byte) {
	for _, v := range elems {
		l.push(false, v)
	}
}

func (l *listColl) digest() uint64 {
	h := fnv.New64a()
	for i := range l.n {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], elementHash(l.at(i)))
		h.Write(b[:])
	}
	return mix64(h.Sum64())
}

// countBytes encodes a non-negative count for a list op.
func countBytes(n int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// count64 decodes what countBytes wrote; anything else counts as 0.
func count64(b []byte) int {
	if len(b) != 8 {
		return 0
	}
	return int(min(binary.BigEndian.Uint64(b), math.MaxInt32))
}

// ---- Sorted set ----

// scoreBytes encodes a score for a sorted set op or snapshot.
func scoreBytes(f float64) []byte { return binary.BigEndian.AppendUint64(nil, math.Float64bits(f)) }

func scoreOf(b []byte) (float64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	f := math.Float64frombits(binary.BigEndian.Uint64(b))
	return f, !math.IsNaN(f)
}

// zsetColl is a sorted set: a map for O(1) score lookup and a skip list (zskip.go) ordered by score, then
// member, with spans for ranks in O(log n).
type zsetColl struct {
	scores map[string]float64
	list   *zskipList
	bytes  int64 // of members
}

func (z *zsetColl) dataBytes() int64 { return z.bytes }

func newZSet() *zsetColl { return &zsetColl{scores: map[string]float64{}, list: newZSkipList()} }

func (z *zsetColl) kind() kind { return kindZSet }
func (z *zsetColl) len() int   { return len(z.scores) }

// set gives member score, adding it if new.
func (z *zsetColl) set(member string, score float64) {
	if old, ok := z.scores[member]; ok {
		if old == score {
			return
		}
		z.list.remove(old, member)
	} else {
		z.bytes += allocSize(len(member))
	}
	z.scores[member] = score
	z.list.insert(score, member)
}

func (z *zsetColl) remove(member string) {
	if old, ok := z.scores[member]; ok {
		z.list.remove(old, member)
		delete(z.scores, member)
		z.bytes -= allocSize(len(member))
	}
}

func (z *zsetColl) elements() [][]byte {
	out := make([][]byte, 0, 2*len(z.scores))
	for n := z.list.first(); n != nil; n = n.next() {
		out = append(out, scoreBytes(n.score), []byte(n.member))
	}
	return out
}

func (z *zsetColl) load(elems [][]byte) {
	for i := 0; i+1 < len(elems); i += 2 {
		if score, ok := scoreOf(elems[i]); ok {
			z.set(string(elems[i+1]), score)
		}
	}
}

func (z *zsetColl) digest() uint64 {
	var d uint64
	for m, s := range z.scores {
		d ^= elementHash([]byte(m), scoreBytes(s))
	}
	return d
}
