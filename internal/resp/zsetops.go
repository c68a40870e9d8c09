package resp

import (
	"bytes"
	"cmp"
	"math"
	"slices"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/zscore"
)

// ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD combine the sorted sets (and sets, whose
// members score 1) of one slot as Redis does: inputs taken from the smallest, weights applied, scores
// aggregated in that order, a NaN counted as 0.

// zsetOp is which combination a command makes.
type zsetOp uint8

const (
	zsetUnion zsetOp = iota
	zsetInter
	zsetDiff
)

// zsetInput is one input of a combination: its members and scores, and its weight.
type zsetInput struct {
	members [][]byte
	scores  []float64
	weight  float64
}

// zsetCombine is a parsed ZUNION, ZINTER or ZDIFF, store form or not.
type zsetCombine struct {
	op         zsetOp
	name       string
	dst        []byte // nil unless a STORE form
	keys       [][]byte
	weights    []float64
	aggregate  string // "sum", "min" or "max"
	withScores bool
}

func (c *respConn) cmdZUnion(args [][]byte)      { c.zsetCombine(args, zsetUnion, false) }
func (c *respConn) cmdZInter(args [][]byte)      { c.zsetCombine(args, zsetInter, false) }
func (c *respConn) cmdZDiff(args [][]byte)       { c.zsetCombine(args, zsetDiff, false) }
func (c *respConn) cmdZUnionStore(args [][]byte) { c.zsetCombine(args, zsetUnion, true) }
func (c *respConn) cmdZInterStore(args [][]byte) { c.zsetCombine(args, zsetInter, true) }
func (c *respConn) cmdZDiffStore(args [][]byte)  { c.zsetCombine(args, zsetDiff, true) }

// zsetCombine runs one combination, in Redis's order of checks: numkeys, the inputs' types, then the
// options.
func (c *respConn) zsetCombine(args [][]byte, op zsetOp, store bool) {
	z := zsetCombine{op: op, name: string(bytes.ToLower(args[0])), aggregate: "sum"}
	at := 1
	if store {
		z.dst, at = args[1], 2
	}
	n, ok := kv.ParseCanonicalInt(args[at])
	switch {
	case !ok:
		c.notInteger()
		return
	case n < 1:
		c.wr.error("ERR at least 1 input key is needed for '" + z.name + "' command")
		return
	case n > int64(len(args)-at-1):
		c.syntaxError()
		return
	}
	z.keys = args[at+1 : at+1+int(n)]
	inputs, ok := c.zsetInputs(z.keys)
	if !ok || !c.parseCombineOptions(&z, args[at+1+int(n):], store) {
		return
	}
	for i := range inputs {
		inputs[i].weight = 1
		if z.weights != nil {
			inputs[i].weight = z.weights[i]
		}
	}
	members, scores := combine(op, inputs, z.aggregate)
	if store {
		c.storeZSet(z.dst, members, scores, z.name)
		return
	}
	c.writeCombined(members, scores, z.withScores)
}

// parseCombineOptions reads WEIGHTS, AGGREGATE and, unless storing, WITHSCORES (ZDIFF takes only
// WITHSCORES).
func (c *respConn) parseCombineOptions(z *zsetCombine, opts [][]byte, store bool) bool {
	for j := 0; j < len(opts); j++ {
		remaining := len(opts) - j - 1
		switch opt := bytes.ToLower(opts[j]); {
		case z.op != zsetDiff && string(opt) == "weights" && remaining >= len(z.keys):
			z.weights = make([]float64, len(z.keys))
			for i := range z.keys {
				j++
				w, ok := zscore.Parse(opts[j])
				if !ok {
					c.wr.error("ERR weight value is not a float")
					return false
				}
				z.weights[i] = w
			}
		case z.op != zsetDiff && string(opt) == "aggregate" && remaining >= 1:
			j++
			switch a := string(bytes.ToLower(opts[j])); a {
			case "sum", "min", "max":
				z.aggregate = a
			default:
				c.syntaxError()
				return false
			}
		case !store && string(opt) == "withscores":
			z.withScores = true
		default:
			c.syntaxError()
			return false
		}
	}
	return true
}

// zsetInputs reads the sorted sets and sets at keys, a missing key as empty; any other type is answered
// WRONGTYPE. A refusal is answered too.
func (c *respConn) zsetInputs(keys [][]byte) ([]zsetInput, bool) {
	inputs := make([]zsetInput, len(keys))
	for i, key := range keys {
		typ, ok := c.keyType(key)
		if !ok {
			return nil, false
		}
		switch typ {
		case "none":
		case "set":
			reply, ok := c.keyOp(kv.OpSMembers, &kv.Request{Key: string(key)})
			if !ok {
				return nil, false
			}
			inputs[i].members = reply.Values
			inputs[i].scores = make([]float64, len(reply.Values))
			for j := range inputs[i].scores {
				inputs[i].scores[j] = 1
			}
		case "zset":
			reply, ok := c.keyOp(kv.OpZRange, &kv.Request{Key: string(key), Args: [][]byte{[]byte("0"), []byte("-1"), []byte("WITHSCORES")}})
			if !ok {
				return nil, false
			}
			for j := 0; j+1 < len(reply.Values); j += 2 {
				s, _ := zscore.Parse(reply.Values[j+1]) // written by the store: exact
				inputs[i].members = append(inputs[i].members, reply.Values[j])
				inputs[i].scores = append(inputs[i].scores, s)
			}
		default:
			c.wr.error(wrongTypeMessage)
			return nil, false
		}
	}
	return inputs, true
}

// combine computes the combination of inputs, sorted as a sorted set is (by score, then member).
func combine(op zsetOp, inputs []zsetInput, aggregate string) ([][]byte, []float64) {
	if op == zsetDiff {
		return zsetDifference(inputs)
	}
	// From the smallest input, as Redis takes them (its sort keeps equal sizes in order).
	order := slices.Clone(inputs)
	slices.SortStableFunc(order, func(a, b zsetInput) int { return cmp.Compare(len(a.members), len(b.members)) })
	acc := map[string]float64{}
	var members []string
	if op == zsetUnion {
		for _, in := range order {
			for j, m := range in.members {
				s := weighted(in, j)
				if cur, ok := acc[string(m)]; ok {
					acc[string(m)] = aggregateScores(cur, s, aggregate)
				} else {
					acc[string(m)] = s
					members = append(members, string(m))
				}
			}
		}
	} else if len(order) > 0 {
		sets := make([]map[string]int, len(order))
		for i, in := range order {
			sets[i] = make(map[string]int, len(in.members))
			for j, m := range in.members {
				sets[i][string(m)] = j
			}
		}
	next:
		for j, m := range order[0].members {
			s := weighted(order[0], j)
			for i := 1; i < len(order); i++ {
				k, ok := sets[i][string(m)]
				if !ok {
					continue next
				}
				s = aggregateScores(s, weighted(order[i], k), aggregate)
			}
			acc[string(m)] = s
			members = append(members, string(m))
		}
	}
	return sortedZSet(members, acc)
}

// weighted is input in's j-th score times its weight, a NaN (0 times infinity) taken as 0.
func weighted(in zsetInput, j int) float64 {
	s := in.weight * in.scores[j]
	if math.IsNaN(s) {
		return 0
	}
	return s
}

func aggregateScores(cur, s float64, aggregate string) float64 {
	switch aggregate {
	case "min":
		return min(cur, s)
	case "max":
		return max(cur, s)
	}
	sum := cur + s
	if math.IsNaN(sum) { // inf plus -inf
		return 0
	}
	return sum
}

// zsetDifference is the members of the first input in none of the others, with their scores.
func zsetDifference(inputs []zsetInput) ([][]byte, []float64) {
	acc := map[string]float64{}
	var members []string
members:
	for j, m := range inputs[0].members {
		for _, in := range inputs[1:] {
			if slices.ContainsFunc(in.members, func(o []byte) bool { return bytes.Equal(o, m) }) {
				continue members
			}
		}
		acc[string(m)] = inputs[0].scores[j]
		members = append(members, string(m))
	}
	return sortedZSet(members, acc)
}

func sortedZSet(members []string, scores map[string]float64) ([][]byte, []float64) {
	slices.SortFunc(members, func(a, b string) int {
		if c := cmp.Compare(scores[a], scores[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	outMembers := make([][]byte, len(members))
	outScores := make([]float64, len(members))
	for i, m := range members {
		outMembers[i], outScores[i] = []byte(m), scores[m]
	}
	return outMembers, outScores
}

// writeCombined answers ZUNION, ZINTER or ZDIFF: the members, with their scores when asked (pairs in
// RESP3).
func (c *respConn) writeCombined(members [][]byte, scores []float64, withScores bool) {
	if !withScores {
		c.values(members)
		return
	}
	pairs := make([][]byte, 0, 2*len(members))
	for i, m := range members {
		s := zscore.Format(scores[i])
		if scores[i] == 0 && math.Signbit(scores[i]) {
			s = []byte("-0") // as Redis answers a computed score; one it stores reads back as 0
		}
		pairs = append(pairs, m, s)
	}
	c.writePairs(pairs, true)
}

// storeZSet replaces dst with the sorted set of members and scores, deleting it when there are none, and
// answers the members' count. The command, named event, publishes that event, or del for a dst it
// deleted.
func (c *respConn) storeZSet(dst []byte, members [][]byte, scores []float64, event string) {
	c.muteOps()
	deleted, ok := c.keyOp(kv.OpDelete, &kv.Request{Key: string(dst)})
	if !ok {
		return
	}
	for start := 0; start < len(members); {
		args, size := [][]byte{}, 0
		end := start
		for ; end < len(members) && (end == start || size+len(members[end])+32 <= c.srv.limits.maxBulk/2); end++ {
			s := zscore.Format(scores[end])
			args = append(args, s, members[end])
			size += len(members[end]) + len(s)
		}
		if _, ok := c.keyOp(kv.OpZAdd, &kv.Request{Key: string(dst), Args: args}); !ok {
			return
		}
		start = end
	}
	c.stored(notifyZSet, event, dst, deleted, len(members))
	c.wr.int(int64(len(members)))
}

// cmdZInterCard serves ZINTERCARD numkeys key [key ...] [LIMIT limit]: the size of the intersection,
// counted up to limit (0: no limit).
func (c *respConn) cmdZInterCard(args [][]byte) {
	n, ok := kv.ParseCanonicalInt(args[1])
	switch {
	case !ok:
		c.notInteger()
		return
	case n < 1:
		c.wr.error("ERR at least 1 input key is needed for 'zintercard' command")
		return
	case n > int64(len(args)-2):
		c.syntaxError()
		return
	}
	keys := args[2 : 2+n]
	inputs, ok := c.zsetInputs(keys)
	if !ok {
		return
	}
	limit := int64(0)
	for opts := args[2+n:]; len(opts) > 0; opts = opts[2:] {
		if len(opts) < 2 || !bytes.EqualFold(opts[0], []byte("limit")) {
			c.syntaxError()
			return
		}
		if limit, ok = kv.ParseCanonicalInt(opts[1]); !ok {
			c.wr.error("ERR LIMIT can't be negative")
			return
		}
		if limit < 0 {
			c.wr.error("ERR LIMIT can't be negative")
			return
		}
	}
	for i := range inputs {
		inputs[i].weight = 1
	}
	members, _ := combine(zsetInter, inputs, "sum")
	count := int64(len(members))
	if limit > 0 {
		count = min(count, limit)
	}
	c.wr.int(count)
}

// cmdZRangeStore serves ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]: ZRANGE's
// members of src, with their scores, stored at dst, answering how many.
func (c *respConn) cmdZRangeStore(args [][]byte) {
	byLex := slices.ContainsFunc(args[5:], func(arg []byte) bool { return bytes.EqualFold(arg, []byte("bylex")) })
	rangeArgs := kv.CloneValues(args[3:5])
	if !byLex { // a range of members is refused WITHSCORES: their scores are read one by one
		rangeArgs = append(rangeArgs, []byte("WITHSCORES")) // before the options, which may end short
	}
	for _, opt := range args[5:] {
		if bytes.EqualFold(opt, []byte("withscores")) {
			opt = nil // refused as ZRANGESTORE refuses it, a syntax error where it stands among the options
		}
		rangeArgs = append(rangeArgs, opt)
	}
	reply, ok := c.keyOp(kv.OpZRange, &kv.Request{Key: string(args[2]), Args: rangeArgs})
	if !ok {
		return
	}
	var members [][]byte
	var scores []float64
	for i := 0; i < len(reply.Values); i++ {
		member := bytes.Clone(reply.Values[i])
		scoreText := []byte(nil)
		if byLex {
			got, ok := c.keyOp(kv.OpZScore, &kv.Request{Key: string(args[2]), Args: [][]byte{member}})
			if !ok {
				return
			}
			scoreText = got.Value
		} else {
			i++
			scoreText = reply.Values[i]
		}
		s, _ := zscore.Parse(scoreText) // written by the store: exact
		members = append(members, member)
		scores = append(scores, s)
	}
	c.storeZSet(args[1], members, scores, "zrangestore")
}
