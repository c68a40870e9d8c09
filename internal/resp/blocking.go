package resp

import (
	"errors"
	"math"
	"math/big"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/longdouble"
)

// Blocking list commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH) wait at the key's owner on the connection's
// own goroutine, so a waiting client costs no goroutine beyond the one its connection has, besides a
// short-lived reader that notices the client hang up. Clients blocked on a key are served in the order
// they blocked: a write of the key wakes the first of them, which tries again, and one leaving (served,
// timed out, gone) wakes the next. A change of ownership wakes them all, and one whose key this node no
// longer owns is answered with the redirect.

// Blocking is the node's record of the clients blocked on its keys, which its writes wake.
type Blocking struct {
	waiting atomic.Int32 // clients blocked: a write costs nothing while there are none

	mu   sync.Mutex
	keys map[string][]*blockedClient // the clients blocked on each key, in the order they blocked
}

func NewBlocking() *Blocking { return &Blocking{keys: map[string][]*blockedClient{}} }

// blockedClient is one blocked command.
type blockedClient struct {
	keys []string
	wake chan struct{} // signalled when it should try again
}

func (b *blockedClient) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (bl *Blocking) add(b *blockedClient) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	for _, key := range b.keys {
		bl.keys[key] = append(bl.keys[key], b)
	}
	bl.waiting.Add(1)
}

// remove forgets b and wakes the clients that are now first on its keys: b may have been woken for an
// element it did not take.
func (bl *Blocking) remove(b *blockedClient) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	for _, key := range b.keys {
		queue := bl.keys[key]
		for i, w := range queue {
			if w == b {
				queue = append(queue[:i:i], queue[i+1:]...)
				break
			}
		}
		if len(queue) == 0 {
			delete(bl.keys, key)
			continue
		}
		bl.keys[key] = queue
		queue[0].signal()
	}
	bl.waiting.Add(-1)
}

// Written wakes the first client blocked on key, which the node just wrote.
func (bl *Blocking) Written(key string) {
	if bl.waiting.Load() == 0 {
		return
	}
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if queue := bl.keys[key]; len(queue) > 0 {
		queue[0].signal()
	}
}

// WakeAll wakes every blocked client, as when the node's ownership changed: each checks its keys again.
func (bl *Blocking) WakeAll() {
	if bl.waiting.Load() == 0 {
		return
	}
	bl.mu.Lock()
	defer bl.mu.Unlock()
	for _, queue := range bl.keys {
		for _, b := range queue {
			b.signal()
		}
	}
}

// cmdBPop serves BLPOP and BRPOP key [key ...] timeout: the first element of the first non-empty list,
// waiting for one up to timeout seconds (0: forever).
func (c *respConn) cmdBPop(args [][]byte) {
	op := kv.OpLPop
	if isSubcommand(args[0], "brpop") {
		op = kv.OpRPop
	}
	keys := args[1 : len(args)-1]
	c.block(keys, args[len(args)-1], (*respConn).nullArray, func() bool {
		for _, key := range keys {
			typ, ok := c.keyType(key)
			switch {
			case !ok:
				return true
			case typ == "none" || typ != "list" && c.exec.retry:
				continue
			case typ != "list":
				c.wr.error(wrongTypeMessage)
				return true
			}
			if reply, ok := c.keyOp(op, &kv.Request{Key: string(key)}); ok {
				c.wr.array(2)
				c.wr.bulk(key)
				c.wr.bulk(reply.Value)
			}
			return true
		}
		return false
	})
}

// cmdBLMove serves BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout and BRPOPLPUSH source
// destination timeout: LMOVE, waiting for the source to hold an element.
func (c *respConn) cmdBLMove(args [][]byte) {
	move := [][]byte{[]byte("rpoplpush"), args[1], args[2]}
	if isSubcommand(args[0], "blmove") {
		_, okFrom := listEnd(args[3], kv.OpLPop, kv.OpRPop)
		_, okTo := listEnd(args[4], kv.OpLPush, kv.OpRPush)
		if !okFrom || !okTo {
			c.syntaxError()
			return
		}
		move = [][]byte{[]byte("lmove"), args[1], args[2], args[3], args[4]}
	}
	c.block(args[1:2], args[len(args)-1], (*respConn).nullArray, func() bool {
		if typ, ok := c.keyType(args[1]); ok && (typ == "none" || typ != "list" && c.exec.retry) && c.exec.waits {
			return false // inside MULTI, LMOVE answers a missing source at once
		}
		c.cmdLMove(move)
		return true
	})
}

// block runs try, in one group of the keys' segment, until it answers (it reports true once it has
// written a reply), waiting between tries for a write of one of keys. It answers timedOut's reply when
// timeout passes first. Inside MULTI it tries once, as Redis does. The keys' slot is checked first, then
// the timeout.
func (c *respConn) block(keys [][]byte, timeout []byte, timedOut func(*respConn), try func() bool) {
	seg, ok := c.ownKeys(keys)
	if !ok {
		return
	}
	wait, ok := c.blockTimeout(timeout)
	if !ok {
		return
	}
	if c.exec != nil {
		if !try() {
			timedOut(c)
		}
		return
	}
	b := &blockedClient{wake: make(chan struct{}, 1)}
	for _, key := range keys {
		b.keys = append(b.keys, string(key))
	}
	c.srv.blocking.add(b)
	defer c.srv.blocking.remove(b)
	var expired <-chan time.Time
	if wait > 0 {
		t := c.srv.clock.NewTimer(wait)
		defer t.Stop()
		expired = t.C()
	}
	hangUp := c.watchHangUp()
	defer hangUp.stop()
	for retry := false; ; retry = true {
		replies, status := c.inGroup(seg, keys, retry, try)
		switch {
		case status != kv.StatusSuccess:
			c.refuse(kv.KeySlotBytes(keys[0]), kv.Reply{Status: status})
			return
		case replies != nil:
			if replies.incomplete {
				replies.release()
				c.wr.error(replyTooLargeMessage)
				return
			}
			replies.sendTo(c)
			return
		}
		// The replies to the commands before this one go out, and pushes flow while it waits.
		if err := c.awaitInput(); err != nil {
			c.quit, c.hangUp = true, true
			return
		}
		woken, gone := false, false
		select {
		case <-b.wake:
			woken = true
		case <-expired:
		case <-hangUp.gone:
			gone = true
		case <-c.srv.ctx.Done():
			gone = true
		}
		c.busy()
		switch {
		case gone:
			c.quit, c.hangUp = true, true
			return
		case !woken:
			timedOut(c)
			return
		}
	}
}

// inGroup runs run, a blocked command's try (a retry after a wake with retry set), in one write group of
// segment seg over keys, with its replies buffered. It returns them when run reports true, nil when it
// reports false (and wrote nothing), and the group's status.
func (c *respConn) inGroup(seg int, keys [][]byte, retry bool, run func() bool) (*replyBuffer, kv.Status) {
	var replies *replyBuffer
	answered, abandoned, events := false, false, len(c.events)
	fn := func(g kv.Group) {
		c.exec = &execGroup{g: g, seg: seg, waits: true, retry: retry}
		defer func() { c.exec = nil }() // also when a command panics (panics.go)
		replies = c.buffered(func() { answered = run() })
		if replies.incomplete || replies.isError() {
			g.Abandon() // a command answered with an error writes nothing, as in Redis
			abandoned = true
		}
	}
	status := c.srv.node.ApplyAtomically(c.srv.ctx, seg, keyNames(keys), fn)
	if abandoned || status != kv.StatusSuccess {
		c.dropEventsSince(events)
	}
	if status != kv.StatusSuccess || !answered {
		if replies != nil {
			replies.release()
		}
		return nil, status
	}
	return replies, status
}

// blockTimeout reads a blocking command's timeout in seconds as Redis does on x86-64: a long double
// rounded up to the millisecond, where a count of milliseconds past int64 converts to the most negative
// one and so reads as negative. 0 waits forever, and so does a timeout too far to keep as a deadline
// (past 2262), which no client outlives.
func (c *respConn) blockTimeout(arg []byte) (time.Duration, bool) {
	x, inf, ok := longdouble.Parse(arg)
	if !ok {
		c.wr.error("ERR timeout is not a float or out of range")
		return 0, false
	}
	ms := new(big.Float).Mul(x, big.NewFloat(1000))
	whole, acc := ms.Int64() // toward zero: the ceiling of a negative value
	if acc == big.Below && whole < math.MaxInt64 {
		whole++ // the ceiling of a positive one
	}
	if inf || ms.Cmp(big.NewFloat(math.MinInt64)) < 0 || ms.Cmp(big.NewFloat(math.MaxInt64)) >= 0 || whole < 0 {
		c.wr.error("ERR timeout is negative")
		return 0, false
	}
	if whole > math.MaxInt64/int64(time.Millisecond) || !c.deadlineFits(time.Duration(whole)*time.Millisecond) {
		return 0, true
	}
	return time.Duration(whole) * time.Millisecond, true
}

// hangUpWatch reads the client's socket while its command is blocked, to notice it hang up. Whatever
// the client sends meanwhile (pipelined commands) is kept for the connection's reader, up to what one
// command may hold in memory: a client that sends more is disconnected.
type hangUpWatch struct {
	c    *respConn
	gone chan struct{} // closed when the client hung up or its socket failed
	done chan struct{} // closed when the watch's reader returned
	read []byte
}

func (c *respConn) watchHangUp() *hangUpWatch {
	w := &hangUpWatch{c: c, gone: make(chan struct{}), done: make(chan struct{})}
	c.conn.SetReadDeadline(time.Time{}) // the blocked command's timeout bounds the wait, not the idle one
	c.deadline = time.Time{}
	c.srv.wg.Add(1)
	go func() {
		defer c.srv.wg.Done()
		defer close(w.done)
		buf := make([]byte, 4096)
		for {
			n, err := c.rd.src.Read(buf)
			w.read = append(w.read, buf[:n]...)
			switch {
			case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
				return
			case err != nil, len(w.read) > c.rd.lim.maxQuery: // gone, or past what one command may hold
				close(w.gone)
				return
			}
		}
	}()
	return w
}

// stop ends the watch's reader and hands what it read to the connection's reader.
func (w *hangUpWatch) stop() {
	w.c.conn.SetReadDeadline(time.Unix(1, 0))
	<-w.done
	w.c.conn.SetReadDeadline(time.Time{})
	w.c.deadline = time.Time{}
	w.c.rd.appendInput(w.read)
}
