package resp

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/zaris-go/zaris/internal/kv"
)

// LSET, LINSERT and LREM: edits inside a list, composed of pops and pushes at the end nearer the edit, in
// one group of the list's segment. The items between that end and the edit are popped and pushed back
// changed, so an edit near either end moves few items, and the list keeps its expiry.

// listSpan is a stretch of a list at one of its ends: the m items at the head, or at the tail.
type listSpan struct {
	head bool
	m    int
}

// nearerSpan returns the shorter of the spans that reach, from either end, the items from first to last
// (inclusive) of a list of n items.
func nearerSpan(first, last, n int) listSpan {
	if last+1 <= n-first {
		return listSpan{head: true, m: last + 1}
	}
	return listSpan{head: false, m: n - first}
}

// window returns the items of span within items, the whole list.
func (s listSpan) window(items [][]byte) [][]byte {
	if s.head {
		return items[:s.m]
	}
	return items[len(items)-s.m:]
}

// replaceSpan replaces span of the list under key, n items long, with items (in list order). When span is
// the whole list, items are pushed at the other end before it is popped, so that the key never empties
// and keeps its expiry; with no items left, the key is deleted, as an empty list is. The caller has checked
// that the group has room.
func (c *respConn) replaceSpan(key string, span listSpan, n int, items [][]byte) bool {
	if span.m == n && len(items) > 0 {
		return c.pushAt(key, !span.head, items) && c.popAt(key, span.head, span.m)
	}
	return c.popAt(key, span.head, span.m) && c.pushAt(key, span.head, items)
}

// popAt pops m items at the head or the tail of the list under key.
func (c *respConn) popAt(key string, head bool, m int) bool {
	if m == 0 {
		return true
	}
	op := kv.OpRPop
	if head {
		op = kv.OpLPop
	}
	_, ok := c.keyOp(op, &kv.Request{Key: key, Args: [][]byte{strconv.AppendInt(nil, int64(m), 10)}})
	return ok
}

// pushAt pushes items, in list order, at the head or the tail of the list under key.
func (c *respConn) pushAt(key string, head bool, items [][]byte) bool {
	if len(items) == 0 {
		return true
	}
	items = kv.CloneValues(items)
	op := kv.OpRPush
	if head {
		op = kv.OpLPush // each item goes before the previous one
		slices.Reverse(items)
	}
	_, ok := c.keyOp(op, &kv.Request{Key: key, Args: items})
	return ok
}

// spanWriteBytes bounds what replacing a span of the list under key with items takes in an atomic group.
func spanWriteBytes(key string, items [][]byte) int {
	return 2*(len(key)+kv.GroupOpOverhead) + itemsBytes(items)
}

// readList reads the whole list under key; a missing key is reported by the reply's status. A refusal is
// answered and reported false.
func (c *respConn) readList(key string) (kv.Reply, bool) {
	return c.keyOp(kv.OpLRange, &kv.Request{Key: key, Args: [][]byte{[]byte("0"), []byte("-1")}})
}

// cmdLSet serves LSET key index element: the item at index, negative ones counting from the end, becomes
// element.
func (c *respConn) cmdLSet(args [][]byte) {
	c.muteOps()
	key := string(args[1])
	length, ok := c.keyOp(kv.OpLLen, &kv.Request{Key: key})
	switch {
	case !ok:
		return
	case length.Status == kv.StatusNotFound || length.Int == 0:
		c.wr.error("ERR no such key")
		return
	}
	index, ok := kv.ParseCanonicalInt(args[2])
	if !ok {
		c.notInteger()
		return
	}
	n := length.Int
	if index < 0 {
		index += n
	}
	if index < 0 || index >= n {
		c.wr.error("ERR index out of range")
		return
	}
	span := nearerSpan(int(index), int(index), int(n))
	start, stop := int64(0), index
	if !span.head {
		start, stop = index, -1
	}
	window, ok := c.keyOp(kv.OpLRange, &kv.Request{Key: key, Args: [][]byte{strconv.AppendInt(nil, start, 10), strconv.AppendInt(nil, stop, 10)}})
	if !ok {
		return
	}
	items := slices.Clone(window.Values)
	if span.head {
		items[len(items)-1] = args[3]
	} else {
		items[0] = args[3]
	}
	if c.groupHasRoom(spanWriteBytes(key, items)) && c.replaceSpan(key, span, int(n), items) {
		c.notify(notifyList, "lset", args[1])
		c.wr.ok()
	}
}

// cmdLInsert serves LINSERT key BEFORE|AFTER pivot element: element inserted next to the first item equal
// to pivot, answering the list's new length, -1 without such an item, 0 without the list.
func (c *respConn) cmdLInsert(args [][]byte) {
	after := isSubcommand(args[2], "after")
	if !after && !isSubcommand(args[2], "before") {
		c.syntaxError()
		return
	}
	c.muteOps()
	key := string(args[1])
	list, ok := c.readList(key)
	switch {
	case !ok:
		return
	case list.Status == kv.StatusNotFound || len(list.Values) == 0:
		c.wr.int(0)
		return
	}
	pivot := slices.IndexFunc(list.Values, func(item []byte) bool { return bytes.Equal(item, args[3]) })
	if pivot < 0 {
		c.wr.int(-1)
		return
	}
	at := pivot // the index the element takes
	if after {
		at++
	}
	n := len(list.Values)
	// The items on the nearer side of the new element are popped and pushed back around it.
	var span listSpan
	var items [][]byte
	if at <= n-at {
		span = listSpan{head: true, m: at}
		items = append(slices.Clone(list.Values[:at]), args[4])
	} else {
		span = listSpan{head: false, m: n - at}
		items = append([][]byte{args[4]}, list.Values[at:]...)
	}
	if c.groupHasRoom(spanWriteBytes(key, items)) && c.replaceSpan(key, span, n, items) {
		c.notify(notifyList, "linsert", args[1])
		c.wr.int(int64(n + 1))
	}
}

// cmdLRem serves LREM key count element: removes the first count items equal to element from the head, or
// from the tail for a negative count, or all of them for 0, answering how many it removed.
func (c *respConn) cmdLRem(args [][]byte) {
	count, ok := kv.ParseCanonicalInt(args[2])
	if !ok {
		c.notInteger()
		return
	}
	c.muteOps()
	key := string(args[1])
	list, ok := c.readList(key)
	if !ok {
		return
	}
	removed := lremPositions(list.Values, args[3], count)
	if len(removed) == 0 {
		c.wr.int(0)
		return
	}
	n := len(list.Values)
	span := nearerSpan(removed[0], removed[len(removed)-1], n)
	var kept [][]byte
	first := 0
	if !span.head {
		first = n - span.m
	}
	for i, item := range span.window(list.Values) {
		if _, gone := slices.BinarySearch(removed, first+i); !gone {
			kept = append(kept, item)
		}
	}
	if c.groupHasRoom(spanWriteBytes(key, kept)) && c.replaceSpan(key, span, n, kept) {
		c.notify(notifyList, "lrem", args[1])
		if len(removed) == n {
			c.notify(notifyGeneric, "del", args[1])
		}
		c.wr.int(int64(len(removed)))
	}
}

// lremPositions returns, in increasing order, the indexes of the items LREM removes: the first count equal
// to element from the head, from the tail for a negative count, all of them for 0. As in Redis, the most
// negative count stays negative once turned around, so it removes every match.
func lremPositions(items [][]byte, element []byte, count int64) []int {
	fromTail := count < 0
	if fromTail {
		count = -count
	}
	var out []int
	for step := range items {
		i := step
		if fromTail {
			i = len(items) - 1 - step
		}
		if !bytes.Equal(items[i], element) {
			continue
		}
		out = append(out, i)
		if count != 0 && int64(len(out)) == count {
			break
		}
	}
	slices.Sort(out)
	return out
}

// cmdLTrim serves LTRIM key start stop. It runs in a group, as Redis publishes ltrim for a list it leaves
// unchanged too, which the trim alone does not tell.
func (c *respConn) cmdLTrim(args [][]byte) {
	c.muteOps()
	key := string(args[1])
	trimmed, ok := c.keyOp(kv.OpLTrim, &kv.Request{Key: key, Args: kv.CloneValues(args[2:])})
	if !ok {
		return
	}
	exists := trimmed.Version != 0
	if !exists {
		found, ok := c.keyOp(kv.OpExists, &kv.Request{Key: key})
		if !ok {
			return
		}
		exists = found.Status == kv.StatusSuccess
	}
	if exists {
		c.popped(notifyList, "ltrim", args[1], trimmed)
	}
	c.wr.ok()
}
