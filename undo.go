package zaris

import "github.com/zaris-go/zaris/durability"

// undoStep puts back one write of an atomic group: revert, when set, undoes what the write changed in
// place in a collection, and then key gets the entry it held before the write.
type undoStep struct {
	key    string
	old    *entry
	revert func()
}

// rollback undoes the group's writes, newest first, and forgets them: the segment is as it was when the
// group began, and the group ends having written nothing. Called with the segment's lock held.
func (g *writeGroup) rollback() {
	g.rollbackTo(0, 0)
	g.undo, g.ops = nil, nil
	g.seg.torn = false
}

// rollbackTo undoes the group's writes after its first writes ones, which took bytes, newest first.
func (g *writeGroup) rollbackTo(writes, bytes int) {
	for i := len(g.undo) - 1; i >= writes; i-- {
		u := g.undo[i]
		if u.revert != nil {
			u.revert() // first: set counts the entry's bytes from its collection as it is then
		}
		g.seg.set(u.key, u.old)
	}
	g.undo, g.ops = g.undo[:min(writes, len(g.undo))], g.ops[:min(writes, len(g.ops))]
	g.bytes, g.refused, g.writing = bytes, false, false
}

// revertOf returns what undoes op on c, read from c before op is applied to it. Ops that apply to
// another kind of collection change nothing and need nothing.
func revertOf(c collection, op *collOp) func() {
	switch c := c.(type) {
	case *hashColl:
		return c.revertOf(op)
	case *setColl:
		return c.revertOf(op)
	case *listColl:
		return c.revertOf(op)
	case *zsetColl:
		return c.revertOf(op)
	}
	return nil
}

// revertOf records the prior value of every field op sets or deletes.
func (h *hashColl) revertOf(op *collOp) func() {
	step := 1
	if op.kind == durability.OpHashSet {
		step = 2
	}
	type prior struct {
		field string
		value []byte // nil for a field that did not exist: a stored value is never nil
	}
	fields := make([]prior, 0, len(op.args)/step)
	for i := 0; i+step-1 < len(op.args); i += step {
		f := string(op.args[i])
		fields = append(fields, prior{f, h.fields[f]})
	}
	return func() {
		for _, p := range fields {
			if p.value == nil {
				h.remove(p.field)
			} else {
				h.load([][]byte{[]byte(p.field), p.value})
			}
		}
	}
}

// revertOf records which members op adds or removes.
func (s *setColl) revertOf(op *collOp) func() {
	var changed []string
	adding := op.kind == durability.OpSetAdd
	for _, m := range op.args {
		if _, ok := s.members[string(m)]; ok != adding {
			changed = append(changed, string(m))
		}
	}
	return func() {
		for _, m := range changed {
			if adding {
				s.remove(m)
			} else {
				s.load([][]byte{[]byte(m)})
			}
		}
	}
}

// revertOf records the prior score of every member op adds, changes or removes.
func (z *zsetColl) revertOf(op *collOp) func() {
	step, at := 1, 0
	if op.kind == durability.OpZAdd {
		step, at = 2, 1 // score and member pairs
	}
	type prior struct {
		member string
		score  float64
		had    bool
	}
	var members []prior
	for i := 0; i+step-1 < len(op.args); i += step {
		m := string(op.args[i+at])
		score, had := z.scores[m]
		members = append(members, prior{m, score, had})
	}
	return func() {
		for _, p := range members {
			if p.had {
				z.set(p.member, p.score)
			} else {
				z.remove(p.member)
			}
		}
	}
}

// revertOf records the items op pops or trims, or how many it pushes.
func (l *listColl) revertOf(op *collOp) func() {
	left := op.flags&collLeft != 0
	switch op.kind {
	case durability.OpListPush:
		n := len(op.args)
		return func() {
			for range n {
				l.pop(left)
			}
		}
	case durability.OpListPop:
		if len(op.args) != 1 {
			return nil
		}
		n := min(count64(op.args[0]), l.n)
		if left {
			return l.restorer(l.items(0, n), nil)
		}
		return l.restorer(nil, l.items(l.n-n, l.n))
	case durability.OpListTrim:
		if len(op.args) != 2 {
			return nil
		}
		start, stop := min(count64(op.args[0]), l.n), min(count64(op.args[1]), l.n)
		stop = max(stop, start)
		return l.restorer(l.items(0, start), l.items(stop, l.n))
	}
	return nil
}

// items returns the items from i to j, exclusive, counted from the head.
func (l *listColl) items(i, j int) [][]byte {
	out := make([][]byte, 0, j-i)
	for ; i < j; i++ {
		out = append(out, l.at(i))
	}
	return out
}

// restorer returns what puts head back in front of the list and tail back behind it.
func (l *listColl) restorer(head, tail [][]byte) func() {
	return func() {
		for i := len(head) - 1; i >= 0; i-- {
			l.push(true, head[i])
		}
		for _, v := range tail {
			l.push(false, v)
		}
	}
}
