package resp

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
)

// RedisNodeID is the 40-hex-digit node id Redis Cluster clients expect, derived from the node's name so it is
// the same on every node and across restarts.
func RedisNodeID(id kv.NodeID) string {
	sum := sha1.Sum([]byte(id))
	return hex.EncodeToString(sum[:])
}

// slotRange is a run of slots served by one node, with the same replicas.
type slotRange struct {
	first, last uint16
	owner       kv.NodeID
	replicas    []kv.NodeID
}

// slotRanges lists the slots of m that a RESP client can be sent to, in slot order, merging neighbouring
// partitions with the same owner. Partitions without an owner, or whose owner has no RESP endpoint, are
// left out.
func slotRanges(m *Topology) []slotRange {
	if m.Version == 0 {
		return nil
	}
	var out []slotRange
	for i := range m.Partitions {
		p := &m.Partitions[i]
		if !m.served(p) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].owner == p.Owner && out[n-1].last+1 == p.First &&
			slices.Equal(out[n-1].replicas, p.Replicas) {
			out[n-1].last = p.Last
			continue
		}
		out = append(out, slotRange{first: p.First, last: p.Last, owner: p.Owner, replicas: p.Replicas})
	}
	return out
}

// respNode is a cluster member as RESP clients see it.
type respNode struct {
	id      kv.NodeID
	host    string
	port    int
	busPort int
	epoch   uint64
	slots   []slotRange
	failed  bool // gossip reports it failed
}

// memberStates says what gossip knows of each member. An absent member left long ago or was never seen.
type memberStates map[kv.NodeID]MemberState

// memberStates returns the members' states as gossip sees them, or nil before the node gossips.
func (s *Server) memberStates() memberStates { return s.node.Members() }

// departed reports whether gossip says id left the cluster, or no longer knows it.
func (st memberStates) departed(id kv.NodeID) bool {
	if st == nil {
		return false
	}
	status, known := st[id]
	return !known || status == MemberLeft
}

// respNodes lists the members of m with a RESP endpoint, sorted by name, with the slot ranges they serve.
// A member that departed (states) is left out unless it still serves slots.
func respNodes(m *Topology, ranges []slotRange, states memberStates) []respNode {
	byID := map[kv.NodeID]*respNode{}
	var out []respNode
	for id, info := range m.Nodes {
		host, port, ok := splitHostPort(info.RESPAddr)
		if !ok {
			continue
		}
		_, bus, _ := splitHostPort(info.DataAddr)
		out = append(out, respNode{id: id, host: host, port: port, busPort: bus,
			failed: states[id] == MemberFailed})
	}
	slices.SortFunc(out, func(a, b respNode) int { return strings.Compare(string(a.id), string(b.id)) })
	for i := range out {
		byID[out[i].id] = &out[i]
	}
	for _, r := range ranges {
		if n := byID[r.owner]; n != nil {
			n.slots = append(n.slots, r)
		}
	}
	for _, p := range m.Partitions {
		if n := byID[p.Owner]; n != nil {
			n.epoch = max(n.epoch, p.Epoch)
		}
	}
	return slices.DeleteFunc(out, func(n respNode) bool { return len(n.slots) == 0 && states.departed(n.id) })
}

func splitHostPort(addr string) (string, int, bool) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	port, err := strconv.Atoi(portStr)
	return host, port, err == nil
}

// cmdCluster serves the CLUSTER subcommands cluster clients and tools use.
func (c *respConn) cmdCluster(args [][]byte) {
	sub := args[1]
	switch {
	case isSubcommand(sub, "SLOTS") && len(args) == 2:
		c.clusterSlots()
	case isSubcommand(sub, "SHARDS") && len(args) == 2:
		c.clusterShards()
	case isSubcommand(sub, "NODES") && len(args) == 2:
		c.clusterNodes()
	case isSubcommand(sub, "INFO") && len(args) == 2:
		c.clusterInfo()
	case isSubcommand(sub, "KEYSLOT") && len(args) == 3:
		c.wr.int(int64(kv.KeySlotBytes(args[2])))
	case (isSubcommand(sub, "MYID") || isSubcommand(sub, "MYSHARDID")) && len(args) == 2:
		c.wr.bulkString(RedisNodeID(c.srv.id))
	default:
		c.unknownSubcommand("cluster", sub)
	}
}

// clusterSlots writes CLUSTER SLOTS: per slot range, its bounds, its owner and then its in-sync replicas
// that gossip does not report failed, each as host, port and id. A client that sent READONLY may read a
// replica's copy.
func (c *respConn) clusterSlots() {
	m := c.srv.node.Topology()
	ranges := slotRanges(m)
	states := c.srv.memberStates()
	c.wr.array(len(ranges))
	for _, r := range ranges {
		nodes := []kv.NodeID{r.owner}
		for _, id := range r.replicas {
			if m.Nodes[id].RESPAddr != "" && states[id] != MemberFailed && !states.departed(id) {
				nodes = append(nodes, id)
			}
		}
		c.wr.array(2 + len(nodes))
		c.wr.int(int64(r.first))
		c.wr.int(int64(r.last))
		for _, id := range nodes {
			host, port, _ := splitHostPort(m.Nodes[id].RESPAddr)
			c.wr.array(3)
			c.wr.bulkString(host)
			c.wr.int(int64(port))
			c.wr.bulkString(RedisNodeID(id))
		}
	}
}

// clusterShards writes CLUSTER SHARDS: one shard per node, each with its slot ranges and the node itself.
func (c *respConn) clusterShards() {
	m := c.srv.node.Topology()
	nodes := respNodes(m, slotRanges(m), c.srv.memberStates())
	c.wr.array(len(nodes))
	for _, n := range nodes {
		c.wr.mapOf(2)
		c.wr.bulkString("slots")
		c.wr.array(2 * len(n.slots))
		for _, r := range n.slots {
			c.wr.int(int64(r.first))
			c.wr.int(int64(r.last))
		}
		c.wr.bulkString("nodes")
		c.wr.array(1)
		c.wr.mapOf(7)
		health := "online"
		if n.failed {
			health = "fail"
		}
		for _, kv := range [][2]string{{"id", RedisNodeID(n.id)}, {"ip", n.host}, {"endpoint", n.host}, {"role", "master"}, {"health", health}} {
			c.wr.bulkString(kv[0])
			c.wr.bulkString(kv[1])
		}
		c.wr.bulkString("port")
		c.wr.int(int64(n.port))
		c.wr.bulkString("replication-offset")
		c.wr.int(0)
	}
}

// clusterNodes writes CLUSTER NODES: one line per node in Redis's format.
func (c *respConn) clusterNodes() {
	m := c.srv.node.Topology()
	var b strings.Builder
	for _, n := range respNodes(m, slotRanges(m), c.srv.memberStates()) {
		flags, link := "master", "connected"
		switch {
		case n.id == c.srv.id:
			flags = "myself,master"
		case n.failed:
			flags, link = "master,fail", "disconnected"
		}
		b.WriteString(RedisNodeID(n.id) + " " + net.JoinHostPort(n.host, strconv.Itoa(n.port)) + "@" + strconv.Itoa(n.busPort) +
			" " + flags + " - 0 0 " + strconv.FormatUint(n.epoch, 10) + " " + link)
		for _, r := range n.slots {
			b.WriteString(" " + strconv.Itoa(int(r.first)))
			if r.last != r.first {
				b.WriteString("-" + strconv.Itoa(int(r.last)))
			}
		}
		b.WriteByte('\n')
	}
	c.wr.bulkString(b.String())
}

// clusterInfo writes CLUSTER INFO, with Redis's fields in Redis's order. Zaris has no cluster bus: the
// messages it counts are those that carry data between nodes (Node.Messages). A control plane without a
// leader for longer than a few election timeouts fails the cluster's state whatever the slots, and a last
// field, zaris_cluster_state_reason, says so: nothing can fail over or move meanwhile.
func (c *respConn) clusterInfo() {
	m, states := c.srv.node.Topology(), c.srv.memberStates()
	slots := countSlots(m, states)
	nodes := respNodes(m, slotRanges(m), states)
	size := 0
	var epoch, myEpoch uint64
	for _, n := range nodes {
		if len(n.slots) > 0 {
			size++
		}
		epoch = max(epoch, n.epoch)
		if n.id == c.srv.id {
			myEpoch = n.epoch
		}
	}
	control := c.srv.node.Control()
	state := "fail"
	if slots.served() == kv.NumSlots && !control.Alarm {
		state = "ok"
	}
	sent, received := c.srv.node.Messages()
	var w infoText
	w.field("cluster_state", state)
	w.int("cluster_slots_assigned", int64(slots.assigned))
	w.int("cluster_slots_ok", int64(slots.ok))
	w.int("cluster_slots_pfail", int64(slots.pfail))
	w.int("cluster_slots_fail", int64(slots.fail))
	w.int("cluster_known_nodes", int64(len(nodes)))
	w.int("cluster_size", int64(size))
	w.uint("cluster_current_epoch", epoch)
	w.uint("cluster_my_epoch", myEpoch)
	w.uint("cluster_stats_messages_sent", sent)
	w.uint("cluster_stats_messages_received", received)
	w.int("total_cluster_links_buffer_limit_exceeded", 0) // no cluster bus, so no link buffer to outgrow
	if control.Alarm {
		w.field("zaris_cluster_state_reason", control.Reason)
	}
	c.wr.verbatim(w.b)
}

// slotCounts sorts the hash slots as CLUSTER INFO counts them. Assigned slots are ok, pfail or fail;
// the others belong to a partition the map gives to no node.
type slotCounts struct {
	assigned int
	ok       int // served by an owner gossip sees alive
	pfail    int // served by an owner gossip suspects has failed, before the cluster acts on it
	fail     int // not served: no active owner, the partition unavailable, or its owner without a RESP endpoint
}

// served counts the slots a client is sent to an owner for.
func (n slotCounts) served() int { return n.ok + n.pfail }

// countSlots sorts the slots of m by what serves them, with gossip's view of the members in states.
func countSlots(m *Topology, states memberStates) slotCounts {
	var n slotCounts
	if m.Version == 0 {
		return n
	}
	for i := range m.Partitions {
		p := &m.Partitions[i]
		slots := int(p.Last-p.First) + 1
		switch {
		case p.Owner == "" && !p.Assigned:
			continue
		case !m.served(p):
			n.fail += slots
		case states[p.Owner] == MemberFailed:
			n.pfail += slots
		default:
			n.ok += slots
		}
		n.assigned += slots
	}
	return n
}

// ---- The keys this node owns ----

// respScanCount is the keys SCAN visits per call without COUNT, as in Redis.
const respScanCount = 10

// parseScanCursor reads a SCAN cursor as Redis does, with C's strtoul: decimal digits after an optional sign,
// a negative number wrapping around 2^64, an empty cursor 0. A leading blank, anything after the digits or
// a number past 64 bits is refused.
func parseScanCursor(arg []byte) (uint64, bool) {
	digits, negative := arg, false
	if len(digits) > 0 && (digits[0] == '+' || digits[0] == '-') {
		digits, negative = digits[1:], digits[0] == '-'
		if len(digits) == 0 {
			return 0, false // strtoul converts nothing and stops at the sign
		}
	}
	var n uint64
	for _, ch := range digits {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		d := uint64(ch - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if negative {
		n = -n
	}
	return n, true
}

// parseScan parses SCAN cursor [MATCH pattern] [COUNT count] [TYPE type], writing the error of a bad one.
// A later option overrides an earlier one of the same name, as in Redis.
func (c *respConn) parseScan(args [][]byte) (kv.ScanRequest, bool) {
	cursor, ok := parseScanCursor(args[1])
	if !ok {
		c.wr.error("ERR invalid cursor")
		return kv.ScanRequest{}, false
	}
	req := kv.ScanRequest{Cursor: cursor, Count: respScanCount}
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			c.syntaxError()
			return kv.ScanRequest{}, false
		}
		opt, val := args[i], args[i+1]
		switch {
		case isSubcommand(opt, "MATCH"):
			if !c.checkPattern(val) {
				return kv.ScanRequest{}, false
			}
			req.Match = val
			if len(val) == 1 && val[0] == '*' {
				req.Match = nil
			}
		case isSubcommand(opt, "COUNT"):
			n, ok := kv.ParseCanonicalInt(val)
			if !ok {
				c.notInteger()
				return kv.ScanRequest{}, false
			}
			if n < 1 {
				c.syntaxError()
				return kv.ScanRequest{}, false
			}
			req.Count = int(min(n, kv.MaxScanCount))
		case isSubcommand(opt, "TYPE"):
			req.Type = strings.ToLower(string(val))
		default:
			c.syntaxError()
			return kv.ScanRequest{}, false
		}
	}
	return req, true
}

// cmdScan serves SCAN over the keys of the partitions this node owns, as a Redis Cluster primary scans its
// own: the cursor is a scan position, and the ranges of other nodes are skipped.
func (c *respConn) cmdScan(args [][]byte) {
	req, ok := c.parseScan(args)
	if !ok {
		return
	}
	reply := c.srv.node.ServeOwnedScan(c.srv.ctx, &req)
	if reply.Status != kv.StatusSuccess {
		c.refuse(kv.ScanSlot(req.Cursor), kv.Reply{Status: reply.Status, Owner: reply.Owner})
		return
	}
	keys := c.user.visible(reply.Keys)
	c.wr.array(2)
	c.wr.bulkString(strconv.FormatUint(reply.Next, 10))
	c.wr.array(len(keys))
	for _, k := range keys {
		c.wr.bulkString(k)
	}
}

// cmdRandomKey serves RANDOMKEY: a key of the partitions this node owns, the first found from a random
// scan position (wrapping around once), or null when it owns none this client may see. As Redis's, the
// choice favours keys after a gap.
func (c *respConn) cmdRandomKey([][]byte) {
	start := max(rand.Uint64(), 1)
	req := kv.ScanRequest{Cursor: start, Count: randomKeyPage}
	wrapped := false
	for {
		reply := c.srv.node.ServeOwnedScan(c.srv.ctx, &req)
		if reply.Status != kv.StatusSuccess {
			c.refuse(kv.ScanSlot(req.Cursor), kv.Reply{Status: reply.Status, Owner: reply.Owner})
			return
		}
		if keys := c.user.visible(reply.Keys); len(keys) > 0 {
			c.wr.bulkString(keys[rand.IntN(len(keys))])
			return
		}
		switch next := reply.Next; {
		case next == kv.ScanDone && !wrapped:
			wrapped, req.Cursor = true, kv.ScanDone
		case next == kv.ScanDone || wrapped && next >= start:
			c.wr.null()
			return
		default:
			req.Cursor = next
		}
	}
}

// randomKeyPage is how many keys a page of RANDOMKEY's scan visits.
const randomKeyPage = 64

// cmdKeys serves KEYS over the keys of the partitions this node owns. It walks them a page at a time, so a
// segment's writers never wait for more than a page. The keys it gathers count in the budget the
// connections' query buffers share: a reply past it is refused, with SCAN as the way to list so many.
func (c *respConn) cmdKeys(args [][]byte) {
	if !c.checkPattern(args[1]) {
		return
	}
	req := kv.ScanRequest{Count: kv.MaxScanCount, Match: args[1]}
	if len(req.Match) == 1 && req.Match[0] == '*' {
		req.Match = nil
	}
	var keys []string
	held := 0
	defer func() { c.srv.budget.release(held) }()
	for {
		reply := c.srv.node.ServeOwnedScan(c.srv.ctx, &req)
		if reply.Status != kv.StatusSuccess {
			c.refuse(kv.ScanSlot(req.Cursor), kv.Reply{Status: reply.Status, Owner: reply.Owner})
			return
		}
		page := c.user.visible(reply.Keys)
		size := 0
		for _, k := range page {
			size += len(k) + kv.ScanKeyOverhead
		}
		if !c.srv.budget.reserve(size) {
			c.wr.error(keysTooLargeMessage)
			return
		}
		held += size
		keys = append(keys, page...)
		if reply.Next == kv.ScanDone {
			break
		}
		req.Cursor = reply.Next
	}
	c.wr.array(len(keys))
	for _, k := range keys {
		c.wr.bulkString(k)
	}
}

// keysTooLargeMessage refuses a KEYS whose reply would pass the reply budget.
const keysTooLargeMessage = "ERR KEYS would return more than the server's reply budget; list the keys with SCAN"

// checkPattern refuses, with an error reply, a MATCH or KEYS pattern longer than maxMatchPattern.
func (c *respConn) checkPattern(pattern []byte) bool {
	if len(pattern) > kv.MaxMatchPattern {
		c.wr.error("ERR pattern longer than " + strconv.Itoa(kv.MaxMatchPattern) + " bytes")
		return false
	}
	return true
}

// cmdDBSize serves DBSIZE: the keys of the partitions this node owns, or for a user limited to some keys,
// those of them it may access, counted a page at a time as KEYS walks them.
func (c *respConn) cmdDBSize([][]byte) {
	if c.user.keys == nil {
		c.wr.int(int64(c.srv.node.OwnedKeyCount()))
		return
	}
	req := kv.ScanRequest{Count: kv.MaxScanCount}
	count := 0
	for {
		reply := c.srv.node.ServeOwnedScan(c.srv.ctx, &req)
		if reply.Status != kv.StatusSuccess {
			c.refuse(kv.ScanSlot(req.Cursor), kv.Reply{Status: reply.Status, Owner: reply.Owner})
			return
		}
		count += len(c.user.visible(reply.Keys))
		if reply.Next == kv.ScanDone {
			break
		}
		req.Cursor = reply.Next
	}
	c.wr.int(int64(count))
}

// recoverCommandTimeout bounds a RECOVER command: the survey, the new starts and the first election.
const recoverCommandTimeout = time.Minute

// cmdRecover is RECOVER, an administrator's RecoverControlPlane over RESP (`zaris recover`): it replies
// with the report, or with the reason it refused.
func (c *respConn) cmdRecover([][]byte) {
	if c.srv.node.Members() == nil {
		c.wr.error("ERR RECOVER: the node has not joined its cluster yet")
		return
	}
	ctx, cancel := context.WithTimeout(c.srv.ctx, recoverCommandTimeout)
	defer cancel()
	report, err := c.srv.node.Recover(ctx)
	switch {
	case errors.Is(err, ErrQuorumReachable):
		c.wr.error("QUORUM " + err.Error())
	case err != nil:
		c.wr.error("ERR " + err.Error())
	default:
		c.wr.bulkString(report)
	}
}

// backupCommandTimeout bounds a BACKUP command: the copy of the whole cluster's data to or from disk.
const backupCommandTimeout = 30 * time.Minute

// cmdBackup is BACKUP SAVE dir [RATE bytes-per-second] and BACKUP LOAD dir [REPLACE], an administrator's
// Backup and Restore over RESP (`zaris backup`, `zaris restore`): dir is on this node's machine, under its
// backup directory. It replies with a line describing what was done, or with the reason it failed.
func (c *respConn) cmdBackup(args [][]byte) {
	sub, dir := args[1], string(args[2])
	replace := len(args) == 4 && isSubcommand(args[3], "REPLACE")
	var rate int64
	if len(args) == 5 && isSubcommand(args[3], "RATE") {
		var ok bool
		if rate, ok = parseRESPInt(args[4]); !ok || rate < 0 {
			c.wr.error("ERR BACKUP SAVE RATE: want bytes a second, 0 or more")
			return
		}
	}
	ctx, cancel := context.WithTimeout(c.srv.ctx, backupCommandTimeout)
	defer cancel()
	var report string
	var err error
	switch {
	case isSubcommand(sub, "SAVE") && (len(args) == 3 || len(args) == 5 && isSubcommand(args[3], "RATE")):
		report, err = c.srv.node.Backup(ctx, dir, rate)
	case isSubcommand(sub, "LOAD") && (len(args) == 3 || replace):
		report, err = c.srv.node.Restore(ctx, dir, replace)
	default:
		c.wr.error("ERR syntax error: BACKUP SAVE dir [RATE bytes-per-second] | BACKUP LOAD dir [REPLACE]")
		return
	}
	if err != nil {
		c.wr.error("ERR " + strings.ReplaceAll(err.Error(), "\n", " "))
		return
	}
	c.wr.bulkString(report)
}
