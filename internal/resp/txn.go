package resp

import (
	"bytes"
	"errors"
	"strings"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// Redis transactions. MULTI queues a connection's commands and EXEC runs them as one atomic write of their
// slot's segment (Node.ApplyAtomically): replicas, the disk and watchers see all of it or none. WATCH makes
// EXEC run only if the watched keys kept the versions they had. As in Redis Cluster, every key of a
// transaction must be in one slot this node owns. Readers never see part of an EXEC: a command on several
// keys reads them through one read-only view of their segment (runCommand, Node.ReadAtomically).

// respMulti is a connection's open transaction.
type respMulti struct {
	queue   []queuedCommand
	flagged bool // a command was refused while queueing: EXEC discards the transaction
}

// queuedCommand is a command MULTI queued, with its own copy of the arguments.
type queuedCommand struct {
	cmd  *respCommand
	args [][]byte
}

// watchedKey is a key WATCH recorded with its version then, zero for no live value.
type watchedKey struct {
	key     string
	version uint64
}

// execGroup is where the key operations of a running EXEC or command on several keys go: the atomic
// group of segment seg, or a read-only view of it.
type execGroup struct {
	g   kv.Group
	seg int
	// waits: the group is a blocked command's try (blocking.go), which waits where a command inside
	// MULTI would answer.
	waits bool
	// retry: the try follows a wake, where a key of another type is passed over as Redis leaves a client
	// blocked on it, rather than answered WRONGTYPE.
	retry bool
}

// errReplyTooLarge fails the writes of a replyBuffer past the server's budget.
var errReplyTooLarge = errors.New("zaris: the reply exceeds the RESP query buffer budget")

// respTxnOverhead is what the connection keeps per queued command or watched key besides its bytes.
const respTxnOverhead = 64

const (
	execAbortedMessage   = "EXECABORT Transaction discarded because of previous errors."
	noMultiMessage       = "ERR Command not allowed inside a transaction"
	replyTooLargeMessage = "ERR the arguments or the reply exceed the size limits"
	// execReplyTooLargeMessage answers an EXEC whose reply would pass the budget: nothing of it is applied.
	execReplyTooLargeMessage = "EXECABORT Transaction discarded because its reply exceeds the size limits"
	groupTooLargeMessage     = "ERR the transaction's writes exceed the size one replication message can carry"
	txnTooLargeMessage       = "ERR the transaction exceeds the query buffer limit"
	watchInMultiMessage      = "ERR WATCH inside MULTI is not allowed"
)

// reject answers a command refused before it ran. Inside MULTI the refusal dooms the transaction, and a
// refused EXEC discards it at once, as in Redis.
func (c *respConn) reject(cmd *respCommand, msg string) {
	if cmd != nil && cmd.name == "exec" {
		c.endTxn()
		c.wr.error("EXECABORT Transaction discarded because of: " + strings.TrimPrefix(msg, "ERR "))
		return
	}
	c.flagMulti()
	c.wr.error(msg)
}

func (c *respConn) flagMulti() {
	if c.multi != nil {
		c.multi.flagged = true
	}
}

// queues reports whether cmd is queued rather than run: inside MULTI, every command but those that
// control the transaction or the connection's end.
func (c *respConn) queues(cmd *respCommand) bool { return c.multi != nil && !cmd.controlsMulti }

// enqueue queues a command inside MULTI after the checks Redis Cluster makes of a single command: its keys
// in one slot this node serves. A refused command flags the transaction.
func (c *respConn) enqueue(cmd *respCommand, args [][]byte) {
	if cmd.noMulti {
		c.reject(cmd, noMultiMessage)
		return
	}
	if keys := cmd.keys(args); len(keys) > 0 {
		if _, ok := c.ownKeys(keys); !ok {
			c.flagMulti()
			return
		}
	}
	if c.multi.flagged {
		// As in Redis, a doomed transaction queues no more: EXEC checks the slots of the commands queued
		// before the refusal only.
		c.wr.simple("QUEUED")
		return
	}
	if !c.holdTxn(argsSize(args)) {
		c.reject(cmd, txnTooLargeMessage)
		return
	}
	c.multi.queue = append(c.multi.queue, queuedCommand{cmd: cmd, args: kv.CloneValues(args)})
	c.wr.simple("QUEUED")
}

func argsSize(args [][]byte) int {
	n := respTxnOverhead
	for _, a := range args {
		n += len(a) + respArgOverhead
	}
	return n
}

// holdTxn counts n more bytes of queued commands or watched keys, within the query buffer limit of one
// command and the budget every connection shares, and reports false when they do not fit.
func (c *respConn) holdTxn(n int) bool {
	if c.txnHeld+n > c.srv.limits.maxQuery || !c.srv.budget.reserve(n) {
		return false
	}
	c.txnHeld += n
	return true
}

// endTxn forgets the transaction and the watched keys, and gives their bytes back to the budget.
func (c *respConn) endTxn() {
	c.multi, c.watched, c.watchedSet = nil, nil, nil
	c.srv.budget.release(c.txnHeld)
	c.txnHeld = 0
}

func (c *respConn) cmdMulti([][]byte) {
	if c.multi != nil {
		c.wr.error("ERR MULTI calls can not be nested")
		return
	}
	c.multi = &respMulti{}
	c.wr.ok()
}

func (c *respConn) cmdDiscard([][]byte) {
	if c.multi == nil {
		c.wr.error("ERR DISCARD without MULTI")
		return
	}
	c.endTxn()
	c.wr.ok()
}

// cmdWatch records the versions of keys, which must share a slot this node owns. A key watched already
// keeps the version it had then.
func (c *respConn) cmdWatch(args [][]byte) {
	if c.multi != nil {
		// Redis Cluster checks where the keys live first: a refusal there dooms the transaction.
		if _, ok := c.ownKeys(args[1:]); !ok {
			c.flagMulti()
			return
		}
		c.wr.error(watchInMultiMessage)
		return
	}
	seg, ok := c.ownKeys(args[1:])
	if !ok {
		return
	}
	watched, ok := c.currentVersions(seg, args[1:])
	if !ok {
		return
	}
	for _, w := range watched {
		if c.watches(w.key) {
			continue
		}
		if !c.holdTxn(len(w.key) + respTxnOverhead) {
			c.wr.error(txnTooLargeMessage)
			return
		}
		if c.watchedSet == nil {
			c.watchedSet = map[string]struct{}{}
		}
		c.watched = append(c.watched, w)
		c.watchedSet[w.key] = struct{}{}
	}
	c.wr.ok()
}

func (c *respConn) watches(key string) bool {
	_, ok := c.watchedSet[key]
	return ok
}

// currentVersions reads the versions of keys of segment seg, zero for a key without a live value, all at
// one revision: an EXEC that wrote some of them wrote them all before, or none. A refusal is written and
// reported false.
func (c *respConn) currentVersions(seg int, keys [][]byte) ([]watchedKey, bool) {
	names := keyNames(keys)
	watched := make([]watchedKey, len(keys))
	var refused *kv.Request
	var refusal kv.Reply
	status := c.srv.node.ReadAtomically(c.srv.ctx, seg, names, func(g kv.Group) {
		for i, key := range names {
			req := kv.Request{Key: key}
			reply, _ := g.Apply(kv.OpCheckVersion, &req)
			if reply.Status != kv.StatusSuccess && reply.Status != kv.StatusVersionMismatch {
				refused, refusal = &req, reply
				return
			}
			watched[i] = watchedKey{key: key, version: reply.Version}
		}
	})
	switch {
	case status != kv.StatusSuccess:
		c.refuse(kv.KeySlotBytes(keys[0]), kv.Reply{Status: status})
		return nil, false
	case refused != nil:
		if _, answered := c.answered(kv.OpCheckVersion, refused, refusal); answered {
			c.wr.error("ERR " + refusal.Status.String())
		}
		return nil, false
	}
	return watched, true
}

func keyNames(keys [][]byte) []string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = string(k)
	}
	return names
}

// cmdUnwatch forgets the watched keys. Inside MULTI it is queued, and EXEC forgets them anyway.
func (c *respConn) cmdUnwatch([][]byte) {
	if c.multi == nil {
		c.endTxn()
	}
	c.wr.ok()
}

// cmdExec runs the queued commands, all or none of their writes taking effect, and replies the array of
// their replies. A runtime error of one command is its reply; the others still run. A watched key that
// changed makes EXEC run nothing and reply a null array.
func (c *respConn) cmdExec([][]byte) {
	m, watched := c.multi, c.watched
	if m == nil {
		c.wr.error("ERR EXEC without MULTI")
		return
	}
	defer c.endTxn()
	keys := txnKeys(m.queue, watched)
	seg, ok := c.txnSegment(keys)
	switch {
	case !ok:
	case m.flagged:
		c.wr.error(execAbortedMessage)
	case len(keys) == 0:
		c.writeExec(c.runQueued(m.queue), len(m.queue)) // no key: nothing to undo
	default:
		c.execAtomically(seg, keys, m.queue, watched)
	}
}

// txnSegment checks, as Redis Cluster does at EXEC, that the keys of a transaction share one slot this
// node owns, and returns their segment. A transaction without keys needs none.
func (c *respConn) txnSegment(keys [][]byte) (int, bool) {
	if len(keys) == 0 {
		return 0, true
	}
	return c.ownKeys(keys)
}

// txnKeys returns every key of the queued commands and the watched keys.
func txnKeys(queue []queuedCommand, watched []watchedKey) [][]byte {
	var keys [][]byte
	for _, q := range queue {
		keys = append(keys, q.cmd.keys(q.args)...)
	}
	for _, w := range watched {
		keys = append(keys, []byte(w.key))
	}
	return keys
}

// execAtomically runs the queued commands in one atomic group of seg, unless a watched key changed. A
// reply past the budget aborts the transaction: its writes are undone and EXEC answers an error.
func (c *respConn) execAtomically(seg int, keys [][]byte, queue []queuedCommand, watched []watchedKey) {
	names := keyNames(keys)
	var replies *replyBuffer
	ran, events := false, len(c.events)
	status := c.srv.node.ApplyAtomically(c.srv.ctx, seg, names, func(g kv.Group) {
		if changedSince(g, watched) {
			return
		}
		c.exec = &execGroup{g: g, seg: seg}
		defer func() { c.exec = nil }() // also when a command panics (panics.go)
		replies, ran = c.runQueued(queue), true
		if replies.incomplete {
			g.Abandon()
		}
	})
	if replies != nil && (status != kv.StatusSuccess || !ran) {
		replies.release()
	}
	if status != kv.StatusSuccess || !ran || replies.incomplete {
		c.dropEventsSince(events)
	}
	switch {
	case status != kv.StatusSuccess:
		c.refuse(kv.KeySlotBytes(keys[0]), kv.Reply{Status: status})
	case !ran:
		c.nullArray()
	default:
		c.writeExec(replies, len(queue))
	}
}

// changedSince reports whether a watched key's version is no longer the one WATCH recorded.
func changedSince(g kv.Group, watched []watchedKey) bool {
	for _, w := range watched {
		if g.Version(w.key) != w.version {
			return true
		}
	}
	return false
}

// runQueued runs the queued commands and returns their replies, written in the connection's protocol
// into a buffer of their own, so that nothing goes out before EXEC knows it succeeded.
func (c *respConn) runQueued(queue []queuedCommand) *replyBuffer {
	return c.buffered(func() {
		for _, q := range queue {
			group := c.exec // nil for a transaction without keys
			replyAt, sends := len(c.wr.buf), c.wr.sends
			var mark kv.GroupMark
			if group != nil {
				mark = group.g.Mark()
			}
			events := len(c.events)
			c.reading = q.cmd.hasFlag("readonly")
			start := time.Now()
			q.cmd.run(c, q.args)
			c.eventsMuted = false
			c.stats.counted.commands++
			code, failed := c.countErrorCode(replyAt, sends)
			c.countRun(q.cmd, q.args, time.Since(start), code, failed)
			if failed && group != nil {
				group.g.RollbackTo(mark) // a command answered with an error writes nothing, as in Redis
				c.dropEventsSince(events)
			}
			c.trackRead(q.cmd, q.args)
		}
	})
}

// buffered runs fn with the connection's replies written into a buffer of their own, in its protocol,
// and returns them.
func (c *respConn) buffered(fn func()) *replyBuffer {
	out := &replyBuffer{budget: c.srv.budget}
	conn := c.wr
	c.wr = newRESPWriter(out)
	defer func() { c.wr = conn }() // also when a command panics (panics.go)
	c.wr.proto = conn.proto
	fn()
	c.wr.flush()
	return out
}

// replyBuffer holds the replies of commands run inside a segment's group until the group ends. Its bytes
// count in the budget the connections' query buffers share, so that a small command with a huge reply
// (MGET of one large key a million times) cannot take the process's memory: once the budget is spent,
// writes fail and the reply is marked incomplete.
type replyBuffer struct {
	buf        bytes.Buffer
	budget     *respBudget
	held       int
	incomplete bool
}

// isError reports whether the buffer holds a reply that is an error.
func (b *replyBuffer) isError() bool { return b.buf.Len() > 0 && b.buf.Bytes()[0] == '-' }

func (b *replyBuffer) Write(p []byte) (int, error) {
	if b.incomplete || !b.budget.reserve(len(p)) {
		b.incomplete = true
		return 0, errReplyTooLarge
	}
	b.held += len(p)
	return b.buf.Write(p)
}

// sendTo writes the replies to the connection's writer and gives their bytes back to the budget. An
// incomplete reply is never sent: callers answer an error instead.
func (b *replyBuffer) sendTo(c *respConn) {
	defer b.release()
	c.wr.raw(b.buf.Bytes())
}

func (b *replyBuffer) release() {
	b.budget.release(b.held)
	b.held = 0
}

// runCommand runs a command outside a transaction. A command on several keys (MGET, MSET, DEL, EXISTS),
// or composed of several key operations (respCommand.grouped), runs as one group of their segment, as a command runs in Redis, where no other command runs in its
// middle: a read sees every key at one revision, so never part of an EXEC, and writes become one atomic
// write. Its reply goes out only once the group is acknowledged.
func (c *respConn) runCommand(cmd *respCommand, args [][]byte) {
	c.reading, c.onReplica = cmd.hasFlag("readonly"), false
	keys := cmd.keys(args)
	if len(keys) < 2 && !cmd.grouped || len(keys) == 0 || c.multi != nil || c.exec != nil || cmd.controlsMulti || cmd.blocks ||
		!cmd.wholeSteps(args) {
		cmd.run(c, args) // alone, or refusing its arguments
		return
	}
	seg, ok := c.ownKeys(keys)
	if !ok {
		return
	}
	write := cmd.hasFlag("write")
	var replies *replyBuffer
	abandoned, events := false, len(c.events)
	run := func(g kv.Group) {
		c.exec = &execGroup{g: g, seg: seg}
		defer func() { c.exec = nil }() // also when a command panics (panics.go)
		replies = c.buffered(func() { cmd.run(c, args) })
		// A command answered with an error writes nothing, as in Redis, though it wrote before its refusal.
		if (replies.incomplete || replies.isError()) && write {
			g.Abandon()
			abandoned = true
		}
	}
	var status kv.Status
	switch {
	case write:
		status = c.srv.node.ApplyAtomically(c.srv.ctx, seg, keyNames(keys), run)
	case c.onReplica:
		status = c.srv.node.ReadReplicaAtomically(seg, keyNames(keys), run)
	default:
		status = c.srv.node.ReadAtomically(c.srv.ctx, seg, keyNames(keys), run)
	}
	if abandoned || status != kv.StatusSuccess {
		c.dropEventsSince(events)
	}
	switch {
	case status != kv.StatusSuccess:
		if replies != nil {
			replies.release()
		}
		c.refuse(kv.KeySlotBytes(keys[0]), kv.Reply{Status: status})
	case replies.incomplete:
		replies.release()
		c.wr.error(replyTooLargeMessage)
	default:
		replies.sendTo(c)
	}
}

// writeExec writes EXEC's array of n replies, or, when they did not fit in the budget (and the writes
// were undone), an error.
func (c *respConn) writeExec(replies *replyBuffer, n int) {
	if replies.incomplete {
		replies.release()
		c.wr.error(execReplyTooLargeMessage)
		return
	}
	c.wr.array(n)
	replies.sendTo(c)
}

// applyKV runs one key operation on an owned segment: through the owner, or within the atomic group of
// the EXEC being run.
func (c *respConn) applyKV(op transport.Op, seg int, req *kv.Request) kv.Reply {
	write := !c.srv.node.ReadOnly(op)
	if write {
		c.noteWrite(req.Key)
	}
	var reply kv.Reply
	if c.exec == nil && c.onReplica {
		reply = c.srv.node.ReadReplica(op, seg, req)
	} else if c.exec == nil {
		reply = c.srv.node.ApplyKV(c.srv.ctx, op, seg, req)
	} else if r, full := c.exec.g.Apply(op, req); full {
		reply = kv.Reply{Status: kv.StatusTooLarge, Value: []byte(groupTooLargeMessage)}
	} else {
		reply = r
	}
	if write {
		c.opEvents(op, req, reply)
	}
	return reply
}

// groupHasRoom reports whether writes taking n bytes (groupWriteBytes) fit in the atomic group the command
// runs in, if any, and otherwise answers the command with an error: a command on several keys asks before
// its first write, so that it writes all of them or none.
func (c *respConn) groupHasRoom(n int) bool {
	if c.exec == nil || c.exec.g.HasRoom(n) {
		return true
	}
	c.wr.error(groupTooLargeMessage)
	return false
}
