package zaris

import (
	"context"
	"math"
	"strconv"
	"strings"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/zscore"
	"github.com/zaris-go/zaris/transport"
)

// Sorted set operations: a key holding members ordered by score. A write ships the members it changes
// with their new scores.

// zaddFlags are ZADD's options.
type zaddFlags struct{ nx, xx, gt, lt, ch, incr bool }

// parseZAdd reads ZADD's options and its score and member pairs.
func parseZAdd(args [][]byte) (f zaddFlags, scores []float64, members [][]byte, refused kv.Reply) {
	i := 0
options:
	for ; i < len(args); i++ {
		switch strings.ToLower(string(args[i])) {
		case "nx":
			f.nx = true
		case "xx":
			f.xx = true
		case "gt":
			f.gt = true
		case "lt":
			f.lt = true
		case "ch":
			f.ch = true
		case "incr":
			f.incr = true
		default:
			break options
		}
	}
	pairs := args[i:]
	switch {
	case len(pairs) == 0 || len(pairs)%2 != 0:
		return f, nil, nil, invalidArgs(msgSyntax)
	case f.nx && f.xx:
		return f, nil, nil, invalidArgs("ERR XX and NX options at the same time are not compatible")
	case f.gt && f.lt || f.nx && (f.gt || f.lt):
		return f, nil, nil, invalidArgs("ERR GT, LT, and/or NX options at the same time are not compatible")
	case f.incr && len(pairs) > 2:
		return f, nil, nil, invalidArgs("ERR INCR option supports a single increment-element pair")
	}
	for j := 0; j < len(pairs); j += 2 {
		score, ok := zscore.Parse(pairs[j])
		if !ok {
			return f, nil, nil, invalidArgs("ERR value is not a valid float")
		}
		scores, members = append(scores, score), append(members, pairs[j+1])
	}
	return f, scores, members, kv.Reply{}
}

// applyZAdd sets members' scores under ZADD's options. It answers in Int how many members are new (or,
// with CH, changed); with INCR, the new score in Value, nil when the options left the member alone.
func applyZAdd(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	f, scores, members, refused := parseZAdd(req.Args)
	if refused.Status != StatusSuccess {
		return refused
	}
	var count int
	var incremented []byte
	var nan bool
	w := s.writeCollection(seg, req.Key, kindZSet, func(c collection) collOp {
		z, _ := c.(*zsetColl)
		changes := map[string]float64{}
		var args [][]byte
		for i, m := range members {
			old, exists := changes[string(m)]
			if !exists {
				old, exists = z.score(string(m))
			}
			score := scores[i]
			if f.incr && exists {
				if score += old; math.IsNaN(score) {
					nan = true
					return collOp{}
				}
			}
			if exists && f.nx || !exists && f.xx || exists && (f.gt && score <= old || f.lt && score >= old) {
				continue
			}
			switch {
			case !exists:
				count++
			case f.ch && score != old:
				count++
			}
			if f.incr {
				incremented = zscore.Format(score)
				if score == 0 && math.Signbit(score) {
					incremented = []byte("-0") // Redis answers the sum's sign but stores a zero as 0
				}
			}
			if score == 0 {
				score = 0
			}
			if exists && score == old {
				continue
			}
			changes[string(m)] = score
			args = append(args, scoreBytes(score), m)
		}
		if len(args) == 0 {
			return collOp{}
		}
		return collOp{kind: durability.OpZAdd, args: args}
	})
	if nan {
		return invalidArgs("ERR resulting score is not a number (NaN)")
	}
	reply := w.reply(count)
	reply.Value = incremented
	return reply
}

// applyZIncrBy adds to a member's score (a missing member counts as 0) and answers the new score in Value.
func applyZIncrBy(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	if len(req.Args) != 2 {
		return wrongArgCount("zincrby")
	}
	return applyZAdd(s, seg, kv.Request{Key: req.Key, Args: [][]byte{[]byte("incr"), req.Args[0], req.Args[1]}}, lim)
}

// applyZRem removes members and answers in Int how many there were.
func applyZRem(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) < 1 {
		return wrongArgCount("zrem")
	}
	var removed [][]byte
	w := s.writeCollection(seg, req.Key, kindZSet, func(c collection) collOp {
		z, _ := c.(*zsetColl)
		for _, m := range distinct(req.Args) {
			if _, ok := z.score(string(m)); ok {
				removed = append(removed, m)
			}
		}
		if len(removed) == 0 {
			return collOp{}
		}
		return collOp{kind: durability.OpZRem, args: removed}
	})
	return w.reply(len(removed))
}

// applyZPop removes the members of lowest score (highest with max) and answers them with their scores, in
// that order, in Values: one without a count, as many as the optional count says with one. A missing key
// answers StatusNotFound.
func applyZPop(highest bool, cmd string) applyFunc {
	return func(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
		count, refused := popCount(req.Args, cmd)
		if refused.Status != StatusSuccess {
			return refused
		}
		var popped [][]byte // member and score pairs
		w := s.writeCollection(seg, req.Key, kindZSet, func(c collection) collOp {
			z, _ := c.(*zsetColl)
			if z == nil {
				return collOp{}
			}
			r := zrangeArgs{start: 0, stop: count - 1, rev: highest}
			popped = make([][]byte, 0, 2*min(count, int64(z.len())))
			if count > 0 {
				z.byRank(&r, func(n *zskipNode) { popped = append(popped, []byte(n.member), zscore.Format(n.score)) })
			}
			if len(popped) == 0 {
				return collOp{}
			}
			members := make([][]byte, 0, len(popped)/2)
			for i := 0; i < len(popped); i += 2 {
				members = append(members, popped[i])
			}
			return collOp{kind: durability.OpZRem, args: members}
		})
		reply := w.reply(0)
		switch {
		case w.status != StatusSuccess:
		case popped == nil:
			reply.Status = StatusNotFound
		default:
			reply.Values = popped
		}
		return reply
	}
}

// applyZScore answers a member's score in Value, or StatusNotFound.
func applyZScore(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) != 1 {
		return wrongArgCount("zscore")
	}
	var score []byte
	status := s.readCollection(seg, req.Key, kindZSet, func(c collection) {
		if f, ok := c.(*zsetColl).score(string(req.Args[0])); ok {
			score = zscore.Format(f)
		}
	})
	if status == StatusSuccess && score == nil {
		status = StatusNotFound
	}
	return kv.Reply{Status: status, Value: score}
}

// applyZRank answers a member's 0-based rank by ascending score in Int, or StatusNotFound.
func applyZRank(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	if len(req.Args) != 1 {
		return wrongArgCount("zrank")
	}
	rank := -1
	status := s.readCollection(seg, req.Key, kindZSet, func(c collection) {
		z := c.(*zsetColl)
		if f, ok := z.score(string(req.Args[0])); ok {
			rank = z.list.rank(f, string(req.Args[0]))
		}
	})
	if status == StatusSuccess && rank < 0 {
		status = StatusNotFound
	}
	return kv.Reply{Status: status, Int: int64(rank)}
}

// applyZCard answers the number of members in Int.
func applyZCard(s *store, seg int, req kv.Request, _ opLimits) kv.Reply {
	var n int
	status := s.readCollection(seg, req.Key, kindZSet, func(c collection) { n = c.len() })
	return kv.Reply{Status: status, Int: int64(n)}
}

// zrangeArgs is a parsed ZRANGE: key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES].
type zrangeArgs struct {
	byScore, byLex, rev, withScores, limited bool
	start, stop                              int64   // by rank
	min, max                                 float64 // by score
	minEx, maxEx                             bool
	lexMin, lexMax                           lexBound // by member
	offset, count                            int64
}

// lexBound is one end of a range of members: "[m" takes m, "(m" stops short of it, "-" and "+" are the
// ends of all members.
type lexBound struct {
	value     string
	exclusive bool
	inf       int // -1 for "-", +1 for "+"
}

// parseLexBound parses a bound as Redis does.
func parseLexBound(b []byte) (lexBound, bool) {
	switch {
	case len(b) == 1 && b[0] == '-':
		return lexBound{inf: -1}, true
	case len(b) == 1 && b[0] == '+':
		return lexBound{inf: 1}, true
	case len(b) > 0 && (b[0] == '[' || b[0] == '('):
		return lexBound{value: string(b[1:]), exclusive: b[0] == '('}, true
	}
	return lexBound{}, false
}

// above reports whether member is past min: within the range on its low side.
func (min lexBound) above(member string) bool {
	switch {
	case min.inf != 0:
		return min.inf < 0
	case min.exclusive:
		return member > min.value
	}
	return member >= min.value
}

// below reports whether member is short of max: within the range on its high side.
func (max lexBound) below(member string) bool {
	switch {
	case max.inf != 0:
		return max.inf > 0
	case max.exclusive:
		return member < max.value
	}
	return member <= max.value
}

func parseZRange(args [][]byte) (r zrangeArgs, refused kv.Reply) {
	if len(args) < 2 {
		return r, wrongArgCount("zrange")
	}
	for i := 2; i < len(args); i++ {
		// As in Redis, REV and BYSCORE may each be given once.
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "byscore" && !r.byScore && !r.byLex:
			r.byScore = true
		case opt == "bylex" && !r.byScore && !r.byLex:
			r.byLex = true
		case opt == "rev" && !r.rev:
			r.rev = true
		case opt == "withscores":
			r.withScores = true
		case opt == "limit" && i+2 < len(args):
			off, ok1 := parseInt(args[i+1])
			cnt, ok2 := parseInt(args[i+2])
			if !ok1 || !ok2 {
				return r, invalidArgs(msgNotInteger)
			}
			r.limited, r.offset, r.count = true, off, cnt
			i += 2
		default:
			return r, invalidArgs(msgSyntax)
		}
	}
	if r.withScores && r.byLex {
		return r, invalidArgs("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
	}
	if r.limited && r.count != -1 && !r.byScore && !r.byLex { // Redis reads a count of -1 as no LIMIT given
		return r, invalidArgs("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
	}
	if r.byLex {
		lo, hi := args[0], args[1]
		if r.rev {
			lo, hi = hi, lo
		}
		var ok1, ok2 bool
		r.lexMin, ok1 = parseLexBound(lo)
		r.lexMax, ok2 = parseLexBound(hi)
		if !ok1 || !ok2 {
			return r, invalidArgs("ERR min or max not valid string range item")
		}
		return r, kv.Reply{}
	}
	if !r.byScore {
		start, ok1 := parseInt(args[0])
		stop, ok2 := parseInt(args[1])
		if !ok1 || !ok2 {
			return r, invalidArgs(msgNotInteger)
		}
		r.start, r.stop = start, stop
		return r, kv.Reply{}
	}
	lo, hi := args[0], args[1]
	if r.rev {
		lo, hi = hi, lo
	}
	var ok1, ok2 bool
	r.min, r.minEx, ok1 = scoreBound(lo)
	r.max, r.maxEx, ok2 = scoreBound(hi)
	if !ok1 || !ok2 {
		return r, invalidArgs("ERR min or max is not a float")
	}
	return r, kv.Reply{}
}

// scoreBound parses a score range bound, exclusive with a leading '(', as Redis does: what strtod reads up to
// the end or a NUL byte, leading space allowed, an empty bound 0, an overflow infinite, never NaN.
func scoreBound(b []byte) (score float64, exclusive, ok bool) {
	if len(b) > 0 && b[0] == '(' {
		exclusive, b = true, b[1:]
	}
	s := string(b)
	if nul := strings.IndexByte(s, 0); nul >= 0 {
		s = s[:nul]
	}
	score, n, _ := zscore.Strtod(s)
	return score, exclusive, n == len(s) && !math.IsNaN(score)
}

// applyZRange answers members, with their scores when asked, by rank or by score, ascending or descending.
func applyZRange(s *store, seg int, req kv.Request, lim opLimits) kv.Reply {
	r, refused := parseZRange(req.Args)
	if refused.Status != StatusSuccess {
		return refused
	}
	values := [][]byte{}
	status := s.readCollection(seg, req.Key, kindZSet, func(c collection) {
		z := c.(*zsetColl)
		add := func(n *zskipNode) {
			values = append(values, []byte(n.member))
			if r.withScores {
				values = append(values, zscore.Format(n.score))
			}
		}
		switch {
		case r.byScore:
			z.byScore(&r, add)
		case r.byLex:
			z.byLex(&r, add)
		default:
			z.byRank(&r, add)
		}
	})
	return readReply(status, values, lim) // a missing key answers no members, with StatusNotFound
}

// byRank calls add on the members from r.start to r.stop, inclusive, ranked descending with r.rev.
func (z *zsetColl) byRank(r *zrangeArgs, add func(*zskipNode)) {
	from, to := listRange(r.start, r.stop, z.len())
	if from >= to {
		return
	}
	if !r.rev {
		for n, i := z.list.at(from), from; n != nil && i < to; n, i = n.next(), i+1 {
			add(n)
		}
		return
	}
	for n, i := z.list.at(z.len()-1-from), from; n != nil && i < to; n, i = n.back, i+1 {
		add(n)
	}
}

// byScore calls add on the members with scores in r's range, skipping r.offset and taking at most r.count
// (all when negative), descending with r.rev.
func (z *zsetColl) byScore(r *zrangeArgs, add func(*zskipNode)) {
	if r.limited && r.offset < 0 {
		return
	}
	inRange := func(n *zskipNode) bool {
		return (n.score > r.min || !r.minEx && n.score == r.min) && (n.score < r.max || !r.maxEx && n.score == r.max)
	}
	var n *zskipNode
	if r.rev {
		n = z.list.lastUpTo(r.max, r.maxEx)
	} else {
		n = z.list.firstFrom(r.min, r.minEx)
	}
	z.walkLimited(r, n, inRange, add)
}

// byLex calls add on the members in r's range of members, skipping r.offset and taking at most r.count
// (all when negative), descending with r.rev. As in Redis, the range is meant for members of one score:
// with several, it walks the list as if it were ordered by member.
func (z *zsetColl) byLex(r *zrangeArgs, add func(*zskipNode)) {
	if r.limited && r.offset < 0 {
		return
	}
	var n *zskipNode
	if r.rev {
		n = z.list.lastWhere(r.lexMax.below)
	} else {
		n = z.list.firstWhere(r.lexMin.above)
	}
	inRange := func(n *zskipNode) bool { return r.lexMin.above(n.member) && r.lexMax.below(n.member) }
	z.walkLimited(r, n, inRange, add)
}

// walkLimited calls add on the nodes from n on, in r's direction, while inRange holds, skipping r.offset
// and taking at most r.count (all when negative).
func (z *zsetColl) walkLimited(r *zrangeArgs, n *zskipNode, inRange func(*zskipNode) bool, add func(*zskipNode)) {
	skip, left := r.offset, r.count
	for ; n != nil && inRange(n); n = z.step(n, r.rev) {
		if skip > 0 {
			skip--
			continue
		}
		if r.limited && left >= 0 {
			if left == 0 {
				return
			}
			left--
		}
		add(n)
	}
}

func (z *zsetColl) step(n *zskipNode, rev bool) *zskipNode {
	if rev {
		return n.back
	}
	return n.next()
}

// score returns member's score; z may be nil, as for a key without a sorted set.
func (z *zsetColl) score(member string) (float64, bool) {
	if z == nil {
		return 0, false
	}
	f, ok := z.scores[member]
	return f, ok
}

// ZMember is a sorted set member and its score.
type ZMember struct {
	Member string
	Score  float64
}

// ZAddOptions are ZADD's conditions: IfAbsent (NX) only adds new members, IfExists (XX) only updates
// existing ones, GreaterThan (GT) and LessThan (LT) update a member only to a higher or lower score, and
// CountChanged (CH) counts updated members as well as new ones.
type ZAddOptions struct {
	IfAbsent, IfExists, GreaterThan, LessThan, CountChanged bool
}

// args returns the options as ZADD's arguments.
func (o ZAddOptions) args() [][]byte {
	var args [][]byte
	for _, opt := range []struct {
		set  bool
		name string
	}{{o.IfAbsent, "nx"}, {o.IfExists, "xx"}, {o.GreaterThan, "gt"}, {o.LessThan, "lt"}, {o.CountChanged, "ch"}} {
		if opt.set {
			args = append(args, []byte(opt.name))
		}
	}
	return args
}

// ZAdd sets the scores of members of the sorted set under key, creating it if need be, and returns how
// many members are new.
func (n *Node) ZAdd(ctx context.Context, key string, members ...ZMember) (int, error) {
	return n.ZAddWith(ctx, key, ZAddOptions{}, members...)
}

// ZAddWith is ZAdd under opts. It returns how many members were added, and with CountChanged updated too.
// Incompatible options fail with ErrInvalidRequest.
func (n *Node) ZAddWith(ctx context.Context, key string, opts ZAddOptions, members ...ZMember) (int, error) {
	args := opts.args()
	for _, m := range members {
		args = append(args, strconv.AppendFloat(nil, m.Score, 'g', -1, 64), []byte(m.Member))
	}
	reply, err := n.client.collectionCall(ctx, kv.OpZAdd, key, args...)
	return int(reply.Int), err
}

// ZIncrBy adds delta to member's score in the sorted set under key (a missing member counts as 0) and
// returns the new score.
func (n *Node) ZIncrBy(ctx context.Context, key, member string, delta float64) (float64, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpZIncrBy, key, strconv.AppendFloat(nil, delta, 'g', -1, 64), []byte(member))
	if err != nil {
		return 0, err
	}
	score, _ := zscore.Parse(reply.Value)
	return score, nil
}

// ZRem removes members from the sorted set under key and returns how many it held.
func (n *Node) ZRem(ctx context.Context, key string, members ...string) (int, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpZRem, key, stringArgs(members)...)
	return int(reply.Int), err
}

// ZScore returns member's score in the sorted set under key, or an error matching ErrNotFound.
func (n *Node) ZScore(ctx context.Context, key, member string) (float64, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpZScore, key, []byte(member))
	if err == nil && reply.Status == StatusNotFound {
		return 0, ErrNotFound
	}
	score, _ := zscore.Parse(reply.Value)
	return score, err
}

// ZRank returns member's 0-based rank by ascending score, or an error matching ErrNotFound.
func (n *Node) ZRank(ctx context.Context, key, member string) (int, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpZRank, key, []byte(member))
	if err == nil && reply.Status == StatusNotFound {
		return 0, ErrNotFound
	}
	return int(reply.Int), err
}

// ZCard returns the number of members of the sorted set under key, 0 without the key.
func (n *Node) ZCard(ctx context.Context, key string) (int, error) {
	reply, err := n.client.collectionCall(ctx, kv.OpZCard, key)
	return int(reply.Int), err
}

// ZRange returns the members of the sorted set under key ranked start to stop, inclusive, by ascending
// score; negative ranks count from the end.
func (n *Node) ZRange(ctx context.Context, key string, start, stop int64) ([]ZMember, error) {
	return n.client.zrange(ctx, key, intArg(start), intArg(stop))
}

// ZRevRange is ZRange from the highest score: rank 0 is the member of highest score.
func (n *Node) ZRevRange(ctx context.Context, key string, start, stop int64) ([]ZMember, error) {
	return n.client.zrange(ctx, key, intArg(start), intArg(stop), []byte("rev"))
}

// ZPopMin removes up to count members of lowest score from the sorted set under key and returns them,
// lowest first: none without the key. A sorted set left empty is deleted.
func (n *Node) ZPopMin(ctx context.Context, key string, count int) ([]ZMember, error) {
	return n.client.zpop(ctx, kv.OpZPopMin, key, count)
}

// ZPopMax removes up to count members of highest score and returns them, highest first.
func (n *Node) ZPopMax(ctx context.Context, key string, count int) ([]ZMember, error) {
	return n.client.zpop(ctx, kv.OpZPopMax, key, count)
}

func (c *client) zpop(ctx context.Context, op transport.Op, key string, count int) ([]ZMember, error) {
	reply, err := c.collectionCall(ctx, op, key, intArg(int64(count)))
	if err != nil {
		return nil, err
	}
	return zmembersOf(reply.Values), nil
}

// ZRangeByScore returns the members of the sorted set under key whose scores are from min to max,
// inclusive, by ascending score, skipping offset and returning at most count (all when count is negative).
func (n *Node) ZRangeByScore(ctx context.Context, key string, min, max float64, offset, count int64) ([]ZMember, error) {
	return n.client.zrange(ctx, key, zscore.Format(min), zscore.Format(max), []byte("byscore"),
		[]byte("limit"), intArg(offset), intArg(count))
}

func (c *client) zrange(ctx context.Context, key string, args ...[]byte) ([]ZMember, error) {
	reply, err := c.collectionCall(ctx, kv.OpZRange, key, append(args, []byte("withscores"))...)
	if err != nil {
		return nil, err
	}
	return zmembersOf(reply.Values), nil
}

// zmembersOf reads member and score pairs.
func zmembersOf(values [][]byte) []ZMember {
	members := make([]ZMember, 0, len(values)/2)
	for i := 0; i+1 < len(values); i += 2 {
		score, _ := zscore.Parse(values[i+1])
		members = append(members, ZMember{Member: string(values[i]), Score: score})
	}
	return members
}
