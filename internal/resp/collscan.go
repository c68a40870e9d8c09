package resp

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/zaris-go/zaris/internal/glob"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// HSCAN, SSCAN and ZSCAN page through one collection. As Redis does for its compact encodings, a small
// collection comes whole in one page with cursor 0. A larger one is paged in the order of a fixed 64-bit
// hash of each field or member, and a cursor is the hash the next page starts from. So an element present
// for the whole scan is returned, however the collection changes meanwhile, and a cursor means the same
// on any node (a failover during a scan continues it). A page holds at least an eighth of the collection,
// whatever COUNT asks, so a scan reads the collection at most about eight times.

// smallCollection is the size up to which a collection comes whole, as Redis's compact encodings do.
const smallCollection = 128

// scanPages is the most pages a scan of a large collection takes (each a page's worth of elements or more).
const scanPages = 8

// collectionScan is how one scan command reads its collection.
type collectionScan struct {
	kind   string
	read   transport.Op // reads the whole collection: flat elements, stride of them per element
	args   [][]byte     // the read's arguments after the key
	stride int          // 1 for set members, 2 for field-value and member-score pairs
}

var (
	hashScan = collectionScan{kind: "hash", read: kv.OpHGetAll, stride: 2}
	setScan  = collectionScan{kind: "set", read: kv.OpSMembers, stride: 1}
	zsetScan = collectionScan{kind: "zset", read: kv.OpZRange, args: [][]byte{[]byte("0"), []byte("-1"), []byte("WITHSCORES")}, stride: 2}
)

func (c *respConn) cmdHScan(args [][]byte) { c.scanCollection(hashScan, args) }
func (c *respConn) cmdSScan(args [][]byte) { c.scanCollection(setScan, args) }
func (c *respConn) cmdZScan(args [][]byte) { c.scanCollection(zsetScan, args) }

// scanCollection serves HSCAN, SSCAN or ZSCAN key cursor [MATCH pattern] [COUNT count], checking the
// cursor, then the key, then the options, as Redis does.
func (c *respConn) scanCollection(s collectionScan, args [][]byte) {
	cursor, ok := parseScanCursor(args[2])
	if !ok {
		c.wr.error("ERR invalid cursor")
		return
	}
	reply, ok := c.keyOp(s.read, &kv.Request{Key: string(args[1]), Args: s.args})
	if !ok {
		return
	}
	if len(reply.Values) == 0 { // no such key: Redis answers before it reads the options
		c.wr.array(2)
		c.wr.bulkString("0")
		c.wr.array(0)
		return
	}
	match, count, ok := c.parseCollectionScan(args[3:])
	if !ok {
		return
	}
	picked, next := scanPage(reply.Values, s.stride, cursor, count)
	if match != nil {
		picked = slices.DeleteFunc(picked, func(i int) bool { return !glob.Match(match, reply.Values[i*s.stride], false) })
	}
	c.wr.array(2)
	c.wr.bulkString(strconv.FormatUint(next, 10))
	c.wr.array(len(picked) * s.stride)
	for _, i := range picked {
		for j := range s.stride {
			c.wr.bulk(reply.Values[i*s.stride+j])
		}
	}
}

// parseCollectionScan reads the options of a collection's scan: a MATCH pattern (nil for none or "*")
// and a COUNT. A bad one is answered and reported false.
func (c *respConn) parseCollectionScan(opts [][]byte) (match []byte, count int, ok bool) {
	count = respScanCount
	for i := 0; i < len(opts); i += 2 {
		if i+1 >= len(opts) {
			c.syntaxError()
			return nil, 0, false
		}
		switch val := opts[i+1]; {
		case isSubcommand(opts[i], "MATCH"):
			if !c.checkPattern(val) {
				return nil, 0, false
			}
			match = val
			if len(val) == 1 && val[0] == '*' {
				match = nil
			}
		case isSubcommand(opts[i], "COUNT"):
			n, ok := kv.ParseCanonicalInt(val)
			switch {
			case !ok:
				c.notInteger()
				return nil, 0, false
			case n < 1:
				c.syntaxError()
				return nil, 0, false
			}
			count = int(min(n, kv.MaxScanCount))
		default:
			c.syntaxError()
			return nil, 0, false
		}
	}
	return match, count, true
}

// scanPage picks the elements of one page of a collection given flat, stride values per element, from
// cursor on, and returns their indexes and the next page's cursor (0: none).
func scanPage(values [][]byte, stride int, cursor uint64, count int) (picked []int, next uint64) {
	n := len(values) / stride
	if n <= smallCollection {
		picked = make([]int, n)
		for i := range picked {
			picked[i] = i
		}
		return picked, 0
	}
	type hashed struct {
		i int
		h uint64
	}
	var ahead []hashed
	for i := range n {
		if h := scanHash(values[i*stride]); h >= cursor {
			ahead = append(ahead, hashed{i, h})
		}
	}
	slices.SortFunc(ahead, func(a, b hashed) int { return cmp.Compare(a.h, b.h) })
	size := max(count, (n+scanPages-1)/scanPages)
	end := min(size, len(ahead))
	for end < len(ahead) && ahead[end].h == ahead[end-1].h {
		end++ // elements of one hash go in one page: a cursor cannot fall between them
	}
	for _, e := range ahead[:end] {
		picked = append(picked, e.i)
	}
	if end < len(ahead) {
		next = ahead[end].h
	}
	return picked, next
}

// scanHash is an element's position in a scan of its collection: FNV-1a of its name, never 0, which
// starts and ends a scan.
func scanHash(name []byte) uint64 {
	h := fnv.New64a()
	h.Write(name)
	return max(h.Sum64(), 1)
}
