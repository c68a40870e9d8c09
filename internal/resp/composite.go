package resp

import (
	"bytes"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/longdouble"
	"github.com/zaris-go/zaris/transport"
)

// Redis commands composed of key operations already served: each runs them in one group of its slot's
// segment (respCommand.grouped, or a command on several keys), so no other command sees it half done, and
// its writes reach replicas, the disk and watchers as one atomic op.

// cmdSMIsMember serves SMISMEMBER key member [member ...]: SISMEMBER of each member.
func (c *respConn) cmdSMIsMember(args [][]byte) {
	found := make([]int64, 0, len(args)-2)
	for _, member := range args[2:] {
		reply, ok := c.keyOp(kv.OpSIsMember, &kv.Request{Key: string(args[1]), Args: [][]byte{member}})
		if !ok {
			return
		}
		found = append(found, reply.Int)
	}
	c.wr.array(len(found))
	for _, n := range found {
		c.wr.int(n)
	}
}

// cmdZMScore serves ZMSCORE key member [member ...]: ZSCORE of each member, null for one absent.
func (c *respConn) cmdZMScore(args [][]byte) {
	scores := make([][]byte, 0, len(args)-2)
	for _, member := range args[2:] {
		reply, ok := c.keyOp(kv.OpZScore, &kv.Request{Key: string(args[1]), Args: [][]byte{member}})
		if !ok {
			return
		}
		scores = append(scores, reply.Value)
	}
	c.wr.array(len(scores))
	for _, score := range scores {
		c.score(score)
	}
}

// cmdHSetNX serves HSETNX key field value: HSET unless the field exists, answering 1 if it wrote.
func (c *respConn) cmdHSetNX(args [][]byte) {
	key := string(args[1])
	exists, ok := c.keyOp(kv.OpHExists, &kv.Request{Key: key, Args: [][]byte{args[2]}})
	if !ok {
		return
	}
	if exists.Int == 1 {
		c.wr.int(0)
		return
	}
	if _, ok := c.keyOp(kv.OpHSet, &kv.Request{Key: key, Args: kv.CloneValues(args[2:4])}); ok {
		c.wr.int(1)
	}
}

// cmdZRevRank serves ZREVRANK key member: the member's rank from the highest score.
func (c *respConn) cmdZRevRank(args [][]byte) {
	key := string(args[1])
	rank, ok := c.keyOp(kv.OpZRank, &kv.Request{Key: key, Args: [][]byte{args[2]}})
	if !ok {
		return
	}
	if rank.Status == kv.StatusNotFound {
		c.wr.null()
		return
	}
	card, ok := c.keyOp(kv.OpZCard, &kv.Request{Key: key})
	if ok {
		c.wr.int(card.Int - 1 - rank.Int)
	}
}

// cmdZPop serves ZPOPMIN and ZPOPMAX key [count]: the count members of lowest (highest) score, removed,
// with their scores.
func (c *respConn) cmdZPop(args [][]byte) {
	count, withCount, ok := c.popCount(args)
	if !ok {
		return
	}
	c.muteOps()
	key := string(args[1])
	var popped [][]byte // member, score pairs
	if count > 0 {
		rangeArgs := [][]byte{[]byte("0"), strconv.AppendInt(nil, count-1, 10), []byte("WITHSCORES")}
		if isSubcommand(args[0], "zpopmax") {
			rangeArgs = append(rangeArgs, []byte("REV"))
		}
		reply, ok := c.keyOp(kv.OpZRange, &kv.Request{Key: key, Args: rangeArgs})
		if !ok {
			return
		}
		popped = reply.Values
	} else if _, ok := c.keyOp(kv.OpZCard, &kv.Request{Key: key}); !ok { // a key of another type is still refused
		return
	}
	if len(popped) > 0 {
		members := make([][]byte, 0, len(popped)/2)
		for i := 0; i < len(popped); i += 2 {
			members = append(members, popped[i])
		}
		removed, ok := c.keyOp(kv.OpZRem, &kv.Request{Key: key, Args: kv.CloneValues(members)})
		if !ok {
			return
		}
		c.popped(notifyZSet, strings.ToLower(string(args[0])), args[1], removed)
	}
	c.writePairs(popped, withCount)
}

// popCount parses the optional count of a pop (key [count]): 1 without one. A bad one is answered and
// reported false.
func (c *respConn) popCount(args [][]byte) (count int64, withCount, ok bool) {
	if len(args) > 3 {
		c.syntaxError()
		return 0, false, false
	}
	if len(args) < 3 {
		return 1, false, true
	}
	n, valid := kv.ParseCanonicalInt(args[2])
	if !valid || n < 0 {
		c.wr.error("ERR value is out of range, must be positive")
		return 0, false, false
	}
	return n, true, true
}

// writePairs writes member and score pairs: flat in RESP2, and in RESP3 as pairs when the command asked
// for a count, as Redis does.
func (c *respConn) writePairs(pairs [][]byte, nested bool) {
	if c.wr.proto != 3 || !nested {
		c.wr.array(len(pairs))
		for i := 0; i+1 < len(pairs); i += 2 {
			c.wr.bulk(pairs[i])
			c.score(pairs[i+1])
		}
		return
	}
	c.wr.array(len(pairs) / 2)
	for i := 0; i+1 < len(pairs); i += 2 {
		c.wr.array(2)
		c.wr.bulk(pairs[i])
		c.score(pairs[i+1])
	}
}

// keyType returns the type of key as TYPE names it, "none" for a missing key; a refusal is answered and
// reported false.
func (c *respConn) keyType(key []byte) (string, bool) {
	reply, ok := c.keyOp(kv.OpType, &kv.Request{Key: string(key)})
	return string(reply.Value), ok
}

// holds reports whether key is missing or of type want, and otherwise answers WRONGTYPE. A refusal is
// answered too.
func (c *respConn) holds(key []byte, want string) bool {
	typ, ok := c.keyType(key)
	if ok && typ != want && typ != "none" {
		c.wr.error(wrongTypeMessage)
		return false
	}
	return ok
}

// cmdSMove serves SMOVE source destination member. As in Redis, a missing source answers 0 before the
// types are checked.
func (c *respConn) cmdSMove(args [][]byte) {
	src, dst, member := string(args[1]), string(args[2]), args[3]
	typ, ok := c.keyType(args[1])
	switch {
	case !ok:
		return
	case typ == "none":
		c.wr.int(0)
		return
	case typ != "set" || !c.holds(args[2], "set"):
		if typ != "set" {
			c.wr.error(wrongTypeMessage)
		}
		return
	}
	if src == dst {
		if reply, ok := c.keyOp(kv.OpSIsMember, &kv.Request{Key: src, Args: [][]byte{member}}); ok {
			c.wr.int(reply.Int)
		}
		return
	}
	removed, ok := c.keyOp(kv.OpSRem, &kv.Request{Key: src, Args: [][]byte{bytes.Clone(member)}})
	if !ok || removed.Int == 0 {
		if ok {
			c.wr.int(0)
		}
		return
	}
	if _, ok := c.keyOp(kv.OpSAdd, &kv.Request{Key: dst, Args: [][]byte{bytes.Clone(member)}}); ok {
		c.wr.int(1)
	}
}

// cmdLMove serves LMOVE source destination LEFT|RIGHT LEFT|RIGHT and RPOPLPUSH source destination (RIGHT
// LEFT): pops an element from one end of source and pushes it on an end of destination. As in Redis, a
// missing source answers null before the destination's type is checked.
func (c *respConn) cmdLMove(args [][]byte) {
	from, to := []byte("right"), []byte("left")
	if isSubcommand(args[0], "lmove") {
		from, to = args[3], args[4]
	}
	popOp, okFrom := listEnd(from, kv.OpLPop, kv.OpRPop)
	pushOp, okTo := listEnd(to, kv.OpLPush, kv.OpRPush)
	if !okFrom || !okTo {
		c.syntaxError()
		return
	}
	typ, ok := c.keyType(args[1])
	switch {
	case !ok:
		return
	case typ == "none":
		c.wr.null()
		return
	case typ != "list":
		c.wr.error(wrongTypeMessage)
		return
	case !c.holds(args[2], "list"):
		return
	}
	c.muteOps()
	popped, ok := c.keyOp(popOp, &kv.Request{Key: string(args[1])})
	if !ok {
		return
	}
	element := bytes.Clone(popped.Value)
	if pushed, ok := c.keyOp(pushOp, &kv.Request{Key: string(args[2]), Args: [][]byte{element}}); ok {
		// As in Redis: the push, then the pop, then the source's removal if it emptied. A list rotated in
		// place was never without its key there.
		if !bytes.Equal(args[1], args[2]) {
			c.created(pushed, args[2])
		}
		c.notify(notifyList, opEventOf[pushOp].event, args[2])
		c.notify(notifyList, opEventOf[popOp].event, args[1])
		if popped.Emptied && !bytes.Equal(args[1], args[2]) {
			c.notify(notifyGeneric, "del", args[1])
		}
		c.wr.bulk(element)
	}
}

// listEnd returns left or right for the end LEFT or RIGHT names.
func listEnd(end []byte, left, right transport.Op) (transport.Op, bool) {
	switch {
	case bytes.EqualFold(end, []byte("left")):
		return left, true
	case bytes.EqualFold(end, []byte("right")):
		return right, true
	}
	return 0, false
}

// cmdMSetNX serves MSETNX key value [key value ...]: MSET if no key exists, answering 1, else 0.
func (c *respConn) cmdMSetNX(args [][]byte) {
	seg, ok := c.ownPairs(args)
	if !ok {
		return
	}
	for i := 1; i < len(args); i += 2 {
		reply, ok := c.apply(kv.OpExists, seg, &kv.Request{Key: string(args[i])})
		if !ok {
			return
		}
		if reply.Status == kv.StatusSuccess {
			c.wr.int(0)
			return
		}
	}
	if c.putPairs(seg, args) {
		c.wr.int(1)
	}
}

// setAlgebra is how SINTER, SUNION and SDIFF combine their sets.
type setAlgebra uint8

const (
	setInter setAlgebra = iota
	setUnion
	setDiff
)

// algebraOf returns the combination a command of the SINTER, SUNION and SDIFF families names.
func algebraOf(name []byte) setAlgebra {
	switch lower := bytes.ToLower(name); {
	case bytes.HasPrefix(lower, []byte("sinter")):
		return setInter
	case bytes.HasPrefix(lower, []byte("sunion")):
		return setUnion
	}
	return setDiff
}

// combineSets reads the sets of keys and combines them by a, in no particular order; a missing key is an
// empty set. A refusal is answered and reported false.
func (c *respConn) combineSets(keys [][]byte, a setAlgebra) ([][]byte, bool) {
	var acc map[string]bool
	for i, key := range keys {
		reply, ok := c.keyOp(kv.OpSMembers, &kv.Request{Key: string(key)})
		if !ok {
			return nil, false
		}
		members := make(map[string]bool, len(reply.Values))
		for _, m := range reply.Values {
			members[string(m)] = true
		}
		switch {
		case i == 0:
			acc = members
		case a == setUnion:
			for m := range members {
				acc[m] = true
			}
		case a == setInter:
			for m := range acc {
				if !members[m] {
					delete(acc, m)
				}
			}
		default:
			for m := range members {
				delete(acc, m)
			}
		}
	}
	out := make([][]byte, 0, len(acc))
	for m := range acc {
		out = append(out, []byte(m))
	}
	slices.SortFunc(out, bytes.Compare) // one order for every run, as a set has none
	return out, true
}

// cmdSetAlgebra serves SINTER, SUNION and SDIFF key [key ...].
func (c *respConn) cmdSetAlgebra(args [][]byte) {
	members, ok := c.combineSets(args[1:], algebraOf(args[0]))
	if ok {
		setReply(c, args, kv.Reply{Values: members})
	}
}

// cmdSInterCard serves SINTERCARD numkeys key [key ...] [LIMIT limit]: the size of the sets'
// intersection, at most limit unless it is 0.
func (c *respConn) cmdSInterCard(args [][]byte) {
	n, ok := kv.ParseCanonicalInt(args[1])
	switch {
	case !ok || n < 1:
		c.wr.error("ERR numkeys should be greater than 0")
		return
	case n > int64(len(args)-2):
		c.wr.error("ERR Number of keys can't be greater than number of args")
		return
	}
	limit := int64(0)
	for i := 2 + int(n); i < len(args); i++ {
		if !isSubcommand(args[i], "limit") || i+1 == len(args) {
			c.syntaxError()
			return
		}
		i++
		if limit, ok = kv.ParseCanonicalInt(args[i]); !ok || limit < 0 {
			c.wr.error("ERR LIMIT can't be negative")
			return
		}
	}
	members, ok := c.combineSets(args[2:2+n], setInter)
	if !ok {
		return
	}
	card := int64(len(members))
	if limit > 0 {
		card = min(card, limit)
	}
	c.wr.int(card)
}

// cmdSetAlgebraStore serves SINTERSTORE, SUNIONSTORE and SDIFFSTORE destination key [key ...]: the result
// replaces destination, whatever it held, and its size is the reply.
func (c *respConn) cmdSetAlgebraStore(args [][]byte) {
	members, ok := c.combineSets(args[2:], algebraOf(args[0]))
	if !ok {
		return
	}
	c.muteOps()
	dst := string(args[1])
	deleted, ok := c.keyOp(kv.OpDelete, &kv.Request{Key: dst})
	if !ok {
		return
	}
	if len(members) > 0 {
		if _, ok := c.keyOp(kv.OpSAdd, &kv.Request{Key: dst, Args: members}); !ok {
			return
		}
	}
	c.stored(notifySet, strings.ToLower(string(args[0])), args[1], deleted, len(members))
	c.wr.int(int64(len(members)))
}

// cmdHIncrByFloat serves HINCRBYFLOAT key field increment: the field's value plus increment, as long
// doubles, as INCRBYFLOAT adds.
func (c *respConn) cmdHIncrByFloat(args [][]byte) {
	c.muteOps()
	incr, incrInf, ok := longdouble.Parse(args[3])
	switch {
	case !ok:
		c.wr.error("ERR value is not a valid float")
		return
	case incrInf:
		c.wr.error("ERR value is NaN or Infinity")
		return
	}
	key := string(args[1])
	cur, ok := c.keyOp(kv.OpHGet, &kv.Request{Key: key, Args: [][]byte{args[2]}})
	if !ok {
		return
	}
	base, baseInf := new(big.Float), false
	if cur.Status == kv.StatusSuccess {
		if base, baseInf, ok = longdouble.Parse(cur.Value); !ok {
			c.wr.error("ERR hash value is not a float")
			return
		}
	}
	sum, finite := longdouble.Add(base, incr)
	if baseInf || !finite {
		c.wr.error("ERR increment would produce NaN or Infinity")
		return
	}
	text := longdouble.Format(sum)
	if set, ok := c.keyOp(kv.OpHSet, &kv.Request{Key: key, Args: [][]byte{bytes.Clone(args[2]), text}}); ok {
		c.created(set, args[1])
		c.notify(notifyHash, "hincrbyfloat", args[1])
		c.wr.bulk(text)
	}
}

// cmdZCount serves ZCOUNT key min max: how many members score within the range.
func (c *respConn) cmdZCount(args [][]byte) {
	reply, ok := c.keyOp(kv.OpZRange, &kv.Request{Key: string(args[1]), Args: [][]byte{args[2], args[3], []byte("BYSCORE")}})
	if ok {
		c.wr.int(int64(len(reply.Values)))
	}
}

// cmdZLexCount serves ZLEXCOUNT key min max: the members in a range of members, read whole within the
// reply's bounds.
func (c *respConn) cmdZLexCount(args [][]byte) {
	reply, ok := c.keyOp(kv.OpZRange, &kv.Request{Key: string(args[1]), Args: [][]byte{args[2], args[3], []byte("BYLEX")}})
	if ok {
		c.wr.int(int64(len(reply.Values)))
	}
}

// maxRandomMembers bounds the members SRANDMEMBER with a negative count repeats: the reply would otherwise
// be as long as the client asks.
const maxRandomMembers = 1 << 20

// cmdSRandMember serves SRANDMEMBER key [count]: random members, distinct for a positive count, repeated
// as chance has it for a negative one.
func (c *respConn) cmdSRandMember(args [][]byte) {
	if len(args) > 3 {
		c.syntaxError()
		return
	}
	count, withCount := int64(1), len(args) == 3
	if withCount {
		n, ok := kv.ParseCanonicalInt(args[2])
		if !ok || n == math.MinInt64 {
			c.notInteger()
			return
		}
		count = n
	}
	members, ok := c.keyOp(kv.OpSMembers, &kv.Request{Key: string(args[1])})
	switch {
	case !ok:
		return
	case !withCount:
		if len(members.Values) == 0 {
			c.wr.null()
			return
		}
		c.wr.bulk(members.Values[rand.IntN(len(members.Values))])
		return
	case count < 0 && len(members.Values) > 0:
		if -count > maxRandomMembers {
			c.wr.error(replyTooLargeMessage)
			return
		}
		c.wr.array(int(-count))
		for range -count {
			c.wr.bulk(members.Values[rand.IntN(len(members.Values))])
		}
		return
	}
	c.values(randomMembers(members.Values, max(count, 0)))
}

// cmdSPop serves SPOP key [count]: random members, removed.
func (c *respConn) cmdSPop(args [][]byte) {
	count, withCount, ok := c.popCount(args)
	if !ok {
		return
	}
	c.muteOps()
	key := string(args[1])
	members, ok := c.keyOp(kv.OpSMembers, &kv.Request{Key: key})
	if !ok {
		return
	}
	popped := kv.CloneValues(randomMembers(members.Values, count))
	if len(popped) > 0 {
		removed, ok := c.keyOp(kv.OpSRem, &kv.Request{Key: key, Args: kv.CloneValues(popped)})
		if !ok {
			return
		}
		c.popped(notifySet, "spop", args[1], removed)
	}
	switch {
	case withCount:
		setReply(c, args, kv.Reply{Values: popped})
	case len(popped) == 0:
		c.wr.null()
	default:
		c.wr.bulk(popped[0])
	}
}

// randomMembers returns n distinct members chosen at random, all of them when there are no more.
func randomMembers(members [][]byte, n int64) [][]byte {
	if n >= int64(len(members)) {
		return members
	}
	picked := slices.Clone(members)
	for i := range int(n) {
		j := i + rand.IntN(len(picked)-i)
		picked[i], picked[j] = picked[j], picked[i]
	}
	return picked[:n]
}

// lposOptions are LPOS's options: the match to start from (negative: scanning from the tail), how many
// matches to answer (-1: one, not in an array; 0: all), and how many items to scan (0: all).
type lposOptions struct {
	rank, count, maxLen int64
}

// parseLPos reads LPOS's options, answering Redis's error for a bad one.
func (c *respConn) parseLPos(args [][]byte) (lposOptions, bool) {
	o := lposOptions{rank: 1, count: -1}
	for i := 0; i < len(args); i++ {
		more := i+1 < len(args)
		switch {
		case more && isSubcommand(args[i], "rank"):
			i++
			n, ok := kv.ParseCanonicalInt(args[i])
			switch {
			case !ok:
				c.notInteger()
				return o, false
			case n == 0:
				c.wr.error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
				return o, false
			}
			o.rank = n
		case more && (isSubcommand(args[i], "count") || isSubcommand(args[i], "maxlen")):
			name := strings.ToUpper(string(args[i]))
			i++
			n, ok := kv.ParseCanonicalInt(args[i])
			if !ok || n < 0 {
				c.wr.error("ERR " + name + " can't be negative")
				return o, false
			}
			if name == "COUNT" {
				o.count = n
			} else {
				o.maxLen = n
			}
		default:
			c.syntaxError()
			return o, false
		}
	}
	return o, true
}

// cmdLPos serves LPOS key element [RANK rank] [COUNT count] [MAXLEN len]: the indexes at which element
// appears in the list, counted from the head whichever way the scan goes.
func (c *respConn) cmdLPos(args [][]byte) {
	o, ok := c.parseLPos(args[3:])
	if !ok {
		return
	}
	key, element := string(args[1]), args[2]
	length, ok := c.keyOp(kv.OpLLen, &kv.Request{Key: key})
	if !ok {
		return
	}
	fromTail := o.rank < 0
	if fromTail {
		o.rank = -o.rank // as Redis does: the most negative rank stays negative, so any match counts
	}
	// Only the items the scan may reach are read: the first maxLen from the end it starts at.
	start, stop := int64(0), int64(-1)
	if o.maxLen > 0 && fromTail {
		start = -o.maxLen
	} else if o.maxLen > 0 {
		stop = o.maxLen - 1
	}
	items, ok := c.keyOp(kv.OpLRange, &kv.Request{Key: key, Args: [][]byte{strconv.AppendInt(nil, start, 10), strconv.AppendInt(nil, stop, 10)}})
	if !ok {
		return
	}
	found := lposMatches(items.Values, element, o, fromTail, length.Int)
	switch {
	case o.count != -1:
		c.wr.array(len(found))
		for _, i := range found {
			c.wr.int(i)
		}
	case len(found) == 0:
		c.wr.null()
	default:
		c.wr.int(found[0])
	}
}

// lposMatches scans items, the list's first or (fromTail) last ones of length in all, for element, and
// returns the indexes LPOS answers, counted from the head: from the rank-th match on, count of them (one
// without COUNT, all for 0).
func lposMatches(items [][]byte, element []byte, o lposOptions, fromTail bool, length int64) []int64 {
	var found []int64
	var matches int64
	for step := range len(items) {
		pos, index := step, int64(step)
		if fromTail {
			pos, index = len(items)-1-step, length-1-int64(step)
		}
		if !bytes.Equal(items[pos], element) {
			continue
		}
		matches++
		if matches < o.rank {
			continue
		}
		found = append(found, index)
		if o.count == -1 || o.count != 0 && matches-o.rank+1 >= o.count {
			break
		}
	}
	return found
}

// cmdHRandField serves HRANDFIELD key [count [WITHVALUES]]: random fields, with their values if asked,
// distinct for a positive count, repeated as chance has it for a negative one.
func (c *respConn) cmdHRandField(args [][]byte) {
	c.randomPairs(args, "withvalues", kv.OpHGetAll, nil, false)
}

// cmdZRandMember serves ZRANDMEMBER key [count [WITHSCORES]], as HRANDFIELD does for a hash.
func (c *respConn) cmdZRandMember(args [][]byte) {
	c.randomPairs(args, "withscores", kv.OpZRange, zsetScan.args, true)
}

// randomPairs serves HRANDFIELD and ZRANDMEMBER: key [count [with]] over the pairs read answers (field and
// value, or member and score).
func (c *respConn) randomPairs(args [][]byte, with string, read transport.Op, readArgs [][]byte, scores bool) {
	count, withCount, withValues := int64(1), len(args) > 2, false
	if withCount {
		n, ok := kv.ParseCanonicalInt(args[2])
		switch {
		case !ok:
			c.notInteger()
			return
		case n == math.MinInt64:
			c.wr.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
			return
		case len(args) > 4 || len(args) == 4 && !isSubcommand(args[3], with):
			c.syntaxError()
			return
		case len(args) == 4 && (n < -math.MaxInt64/2 || n > math.MaxInt64/2):
			c.wr.error("ERR value is out of range")
			return
		}
		count, withValues = n, len(args) == 4
	}
	pairs, ok := c.keyOp(read, &kv.Request{Key: string(args[1]), Args: readArgs})
	switch {
	case !ok:
		return
	case !withCount && len(pairs.Values) == 0:
		c.wr.null()
		return
	case !withCount:
		c.wr.bulk(pairs.Values[2*rand.IntN(len(pairs.Values)/2)])
		return
	case -count > maxRandomMembers:
		c.wr.error(replyTooLargeMessage)
		return
	}
	n := len(pairs.Values) / 2
	var picked []int // the pairs answered, by index
	switch {
	case count < 0 && n > 0:
		for range -count {
			picked = append(picked, rand.IntN(n))
		}
	case count > 0:
		picked = rand.Perm(n)[:min(int64(n), count)]
	}
	c.writeFields(pairs.Values, picked, withValues, scores)
}

// writeFields writes the picked pairs of a hash's field-value pairs (or a sorted set's member-score pairs,
// with scores): their fields, or with values, the pairs flat in RESP2 and nested in RESP3, as Redis does.
func (c *respConn) writeFields(pairs [][]byte, picked []int, withValues, scores bool) {
	switch {
	case !withValues:
		c.wr.array(len(picked))
	case c.wr.proto == 3:
		c.wr.array(len(picked))
	default:
		c.wr.array(2 * len(picked))
	}
	for _, i := range picked {
		if withValues && c.wr.proto == 3 {
			c.wr.array(2)
		}
		c.wr.bulk(pairs[2*i])
		switch {
		case withValues && scores:
			c.score(pairs[2*i+1])
		case withValues:
			c.wr.bulk(pairs[2*i+1])
		}
	}
}
