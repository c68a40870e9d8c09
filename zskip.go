package zaris

import "math/rand/v2"

// zskipList orders a sorted set's members by score, then member, as Redis does. Each forward link counts
// the nodes it skips (its span), so a member's rank and the member at a rank take O(log n).
type zskipList struct {
	head   *zskipNode
	length int
	level  int
}

type zskipNode struct {
	member string
	score  float64
	back   *zskipNode
	levels []zskipLevel
}

type zskipLevel struct {
	next *zskipNode
	span int
}

const zskipMaxLevel = 32

func newZSkipList() *zskipList {
	return &zskipList{head: &zskipNode{levels: make([]zskipLevel, zskipMaxLevel)}, level: 1}
}

// next is the node after n, nil at the end.
func (n *zskipNode) next() *zskipNode { return n.levels[0].next }

// after reports whether n sorts after (score, member).
func (n *zskipNode) after(score float64, member string) bool {
	return n.score > score || n.score == score && n.member > member
}

// precedes reports whether n sorts before (score, member).
func (n *zskipNode) precedes(score float64, member string) bool {
	return n.score < score || n.score == score && n.member < member
}

func randomLevel() int {
	level := 1
	for level < zskipMaxLevel && rand.Uint32()&3 == 0 {
		level++
	}
	return level
}

func (l *zskipList) first() *zskipNode { return l.head.next() }

// insert adds (score, member), which must not be in the list.
func (l *zskipList) insert(score float64, member string) {
	var update [zskipMaxLevel]*zskipNode
	var rank [zskipMaxLevel]int
	x := l.head
	for i := l.level - 1; i >= 0; i-- {
		if i < l.level-1 {
			rank[i] = rank[i+1]
		}
		for x.levels[i].next != nil && x.levels[i].next.precedes(score, member) {
			rank[i] += x.levels[i].span
			x = x.levels[i].next
		}
		update[i] = x
	}
	level := randomLevel()
	if level > l.level {
		for i := l.level; i < level; i++ {
			rank[i], update[i] = 0, l.head
			update[i].levels[i].span = l.length
		}
		l.level = level
	}
	n := &zskipNode{member: member, score: score, levels: make([]zskipLevel, level)}
	for i := range level {
		n.levels[i].next = update[i].levels[i].next
		update[i].levels[i].next = n
		n.levels[i].span = update[i].levels[i].span - (rank[0] - rank[i])
		update[i].levels[i].span = rank[0] - rank[i] + 1
	}
	for i := level; i < l.level; i++ {
		update[i].levels[i].span++
	}
	if update[0] != l.head {
		n.back = update[0]
	}
	if next := n.next(); next != nil {
		next.back = n
	}
	l.length++
}

// remove deletes (score, member) if present.
func (l *zskipList) remove(score float64, member string) {
	var update [zskipMaxLevel]*zskipNode
	x := l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.levels[i].next != nil && x.levels[i].next.precedes(score, member) {
			x = x.levels[i].next
		}
		update[i] = x
	}
	n := x.next()
	if n == nil || n.score != score || n.member != member {
		return
	}
	for i := range l.level {
		if update[i].levels[i].next == n {
			update[i].levels[i].span += n.levels[i].span - 1
			update[i].levels[i].next = n.levels[i].next
		} else {
			update[i].levels[i].span--
		}
	}
	if next := n.next(); next != nil {
		next.back = n.back
	}
	for l.level > 1 && l.head.levels[l.level-1].next == nil {
		l.level--
	}
	l.length--
}

// rank returns the 0-based rank of (score, member), which must be in the list.
func (l *zskipList) rank(score float64, member string) int {
	rank := 0
	x := l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.levels[i].next != nil && !x.levels[i].next.after(score, member) {
			rank += x.levels[i].span
			x = x.levels[i].next
		}
		if x != l.head && x.member == member && x.score == score {
			return rank - 1
		}
	}
	return rank - 1
}

// at returns the node at 0-based rank r, or nil when r is out of range.
func (l *zskipList) at(r int) *zskipNode {
	if r < 0 || r >= l.length {
		return nil
	}
	traversed := 0
	x := l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.levels[i].next != nil && traversed+x.levels[i].span <= r+1 {
			traversed += x.levels[i].span
			x = x.levels[i].next
		}
		if traversed == r+1 {
			return x
		}
	}
	return nil
}

// firstFrom returns the first node whose score is above min (or at it, when inclusive).
func (l *zskipList) firstFrom(min float64, exclusive bool) *zskipNode {
	x := l.head
	below := func(n *zskipNode) bool { return n.score < min || exclusive && n.score == min }
	for i := l.level - 1; i >= 0; i-- {
		for x.levels[i].next != nil && below(x.levels[i].next) {
			x = x.levels[i].next
		}
	}
	return x.next()
}

// firstWhere returns the first node whose member passes from, searched as the list's levels lead when it
// is ordered by member (as Redis searches a range of members).
func (l *zskipList) firstWhere(from func(member string) bool) *zskipNode {
	x := l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.levels[i].next != nil && !from(x.levels[i].next.member) {
			x = x.levels[i].next
		}
	}
	return x.next()
}

// lastWhere returns the last node whose member passes upTo, searched as firstWhere does.
func (l *zskipList) lastWhere(upTo func(member string) bool) *zskipNode {
	x := l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.levels[i].next != nil && upTo(x.levels[i].next.member) {
			x = x.levels[i].next
		}
	}
	if x == l.head {
		return nil
	}
	return x
}

// lastUpTo returns the last node whose score is below max (or at it, when inclusive).
func (l *zskipList) lastUpTo(max float64, exclusive bool) *zskipNode {
	x := l.head
	within := func(n *zskipNode) bool { return n.score < max || !exclusive && n.score == max }
	for i := l.level - 1; i >= 0; i-- {
		for x.levels[i].next != nil && within(x.levels[i].next) {
			x = x.levels[i].next
		}
	}
	if x == l.head {
		return nil
	}
	return x
}
