package resp

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
)

// INFO answers with Redis's sections, in Redis's order and framing, so that exporters and redis-cli read
// them. Fields report what they name, from the endpoint's counters, the Go runtime, the process and the
// node; where Zaris has nothing of the kind (save files, evictions, modules) they say so in Redis's terms.

// infoSection is one section of INFO.
type infoSection struct {
	name      string // as its header names it
	byDefault bool   // part of INFO without arguments and of INFO default
	write     func(r *infoRun, w *infoText)
}

// infoSections are INFO's sections in the order Redis 7 writes them. Modules and Latencystats stay empty:
// Zaris has no modules and keeps no latency percentiles per command.
var infoSections = []infoSection{
	{name: "Server", byDefault: true, write: (*infoRun).server},
	{name: "Clients", byDefault: true, write: (*infoRun).clients},
	{name: "Memory", byDefault: true, write: (*infoRun).memory},
	{name: "Persistence", byDefault: true, write: (*infoRun).persistence},
	{name: "Stats", byDefault: true, write: (*infoRun).stats},
	{name: "Replication", byDefault: true, write: (*infoRun).replication},
	{name: "CPU", byDefault: true, write: (*infoRun).cpu},
	{name: "Modules", byDefault: true, write: (*infoRun).nothing},
	{name: "Commandstats", write: (*infoRun).commandstats},
	{name: "Errorstats", byDefault: true, write: (*infoRun).errorstats},
	{name: "Latencystats", write: (*infoRun).nothing},
	{name: "Cluster", byDefault: true, write: (*infoRun).cluster},
	{name: "Keyspace", byDefault: true, write: (*infoRun).keyspace},
}

// selectInfoSections reads INFO's arguments as Redis 7 does: none or "default" for the default sections,
// "all" or "everything" for all of them, else section names in any case. Names it does not know select
// nothing. Sections come out in their own order, whatever the order asked.
func selectInfoSections(args [][]byte) []bool {
	chosen := make([]bool, len(infoSections))
	if len(args) == 0 {
		args = [][]byte{[]byte("default")}
	}
	for _, arg := range args {
		for i, s := range infoSections {
			switch {
			case isSubcommand(arg, "all"), isSubcommand(arg, "everything"):
				chosen[i] = true
			case isSubcommand(arg, "default"):
				chosen[i] = chosen[i] || s.byDefault
			case isSubcommand(arg, s.name):
				chosen[i] = true
			}
		}
	}
	return chosen
}

// cmdInfo serves INFO [section ...].
func (c *respConn) cmdInfo(args [][]byte) {
	chosen := selectInfoSections(args[1:])
	c.publishStats() // this connection's commands so far count, as in Redis, where INFO counts once done
	r := &infoRun{c: c, now: time.Now()}
	var w infoText
	for i, s := range infoSections {
		if chosen[i] {
			w.section(s.name)
			s.write(r, &w)
		}
	}
	c.wr.verbatim(w.b)
}

// verbatim writes text as Redis answers INFO and CLUSTER INFO: a verbatim string of format txt in RESP3,
// a bulk string in RESP2.
func (wr *respWriter) verbatim(text []byte) {
	if wr.proto != 3 {
		wr.bulk(text)
		return
	}
	wr.header('=', len(text)+4)
	wr.buf = append(wr.buf, "txt:"...)
	wr.buf = append(wr.buf, text...)
	wr.buf = append(wr.buf, '\r', '\n')
}

// infoText accumulates INFO's text: "# Name" headers, "field:value" lines, a blank line between sections.
type infoText struct{ b []byte }

func (w *infoText) section(name string) {
	if len(w.b) > 0 {
		w.b = append(w.b, "\r\n"...)
	}
	w.b = append(w.b, "# "+name+"\r\n"...)
}

func (w *infoText) field(name, value string) { w.b = append(w.b, name+":"+value+"\r\n"...) }

func (w *infoText) int(name string, v int64) { w.field(name, strconv.FormatInt(v, 10)) }

func (w *infoText) uint(name string, v uint64) { w.field(name, strconv.FormatUint(v, 10)) }

// float writes v with the given number of decimals, as Redis's "%.2f" and "%.6f".
func (w *infoText) float(name string, v float64, decimals int) {
	w.field(name, strconv.FormatFloat(v, 'f', decimals, 64))
}

// bytes writes a byte count and, beside it as "name_human", the count as Redis words it.
func (w *infoText) bytes(name string, v uint64) {
	w.uint(name, v)
	w.field(name+"_human", humanBytes(v))
}

// humanBytes words a byte count as Redis's bytesToHuman: "512B", "1.50K", "3.25M", ...
func humanBytes(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10) + "B"
	}
	d, unit := float64(n)/1024, 0
	for ; d >= 1024 && unit < len("KMGTP")-1; unit++ {
		d /= 1024
	}
	return strconv.FormatFloat(d, 'f', 2, 64) + "KMGTP"[unit:unit+1]
}

// infoRun is one INFO being answered: what several sections read is gathered once.
type infoRun struct {
	c      *respConn
	now    time.Time
	totals *respTally
}

// tally sums the counts of every connection, open or closed.
func (r *infoRun) tally() *respTally {
	if r.totals == nil {
		t := r.c.srv.totals()
		r.c.srv.mu.Lock()
		t.subtract(&r.c.srv.info.baseline)
		r.c.srv.mu.Unlock()
		r.totals = &t
	}
	return r.totals
}

func (r *infoRun) nothing(*infoText) {}

func (r *infoRun) server(w *infoText) {
	s := r.c.srv
	_, port, _ := splitHostPort(s.addr)
	uptime := r.now.Sub(s.info.started)
	w.field("redis_version", respVersion)
	w.field("redis_mode", "cluster")
	w.field("os", osDescription())
	w.int("arch_bits", strconv.IntSize)
	w.int("process_id", int64(os.Getpid()))
	w.field("run_id", processRunID())
	w.int("tcp_port", int64(port))
	w.int("server_time_usec", r.now.UnixMicro())
	w.int("uptime_in_seconds", int64(uptime/time.Second))
	w.int("uptime_in_days", int64(uptime/(24*time.Hour)))
	w.field("executable", executablePath())
	w.field("zaris_node", string(s.id))
	r.controlPlane(w)
}

// versions writes the node's release and protocol, and the cluster's protocol.
func (r *infoRun) versions(w *infoText, c Control) {
	w.field("zaris_version", c.Release)
	w.int("zaris_protocol", int64(c.Protocol))
	w.int("zaris_cluster_protocol", int64(c.ClusterProtocol))
}

// controlPlane writes the control plane's leader as this node knows it: zaris_control_plane_state is
// "leaderless" once it has had none for a few election timeouts. They close the server section, as the
// cluster section must read as Redis's own.
func (r *infoRun) controlPlane(w *infoText) {
	h := r.c.srv.node.Control()
	r.versions(w, h)
	state := "ok"
	if h.Alarm {
		state = "leaderless"
	}
	w.field("zaris_control_plane_state", state)
	w.field("zaris_control_plane_leader", string(h.Leader))
	w.int("zaris_control_plane_leaderless_seconds", int64(h.Leaderless/time.Second))
}

func (r *infoRun) clients(w *infoText) {
	s := r.c.srv
	w.int("connected_clients", int64(s.Clients()))
	w.int("maxclients", int64(s.maxClients))
	w.int("blocked_clients", int64(s.blocking.waiting.Load()))
	w.int("tracking_clients", int64(s.trackingClients()))
}

func (r *infoRun) memory(w *infoText) {
	used, mapped := goMemory()
	peak := r.c.srv.info.notePeak(used)
	rss, ok := residentMemory()
	if !ok {
		rss = mapped
	}
	w.bytes("used_memory", used)
	w.bytes("used_memory_rss", rss)
	w.bytes("used_memory_peak", peak)
	w.field("used_memory_peak_perc", strconv.FormatFloat(percent(used, peak), 'f', 2, 64)+"%")
	if total, ok := systemMemory(); ok {
		w.bytes("total_system_memory", total)
	}
	w.bytes("maxmemory", uint64(r.c.srv.node.Memory().Limit()))
	w.field("maxmemory_policy", r.c.srv.node.Memory().PolicyName())
	w.float("mem_fragmentation_ratio", ratio(rss, used), 2)
	w.field("mem_allocator", runtime.Version())
}

func percent(part, whole uint64) float64 { return 100 * ratio(part, whole) }

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// persistence says, in Redis's terms, that nothing is saved: Zaris keeps no RDB or AOF file, and the data
// directory it may keep is reloaded before the endpoint opens, so it is never loading either.
func (r *infoRun) persistence(w *infoText) {
	for _, f := range [][2]string{
		{"loading", "0"}, {"async_loading", "0"},
		{"rdb_bgsave_in_progress", "0"},
		{"rdb_last_save_time", strconv.FormatInt(r.c.srv.info.started.Unix(), 10)},
		{"rdb_last_bgsave_status", "ok"}, {"rdb_last_bgsave_time_sec", "-1"}, {"rdb_current_bgsave_time_sec", "-1"},
		{"rdb_saves", "0"},
		{"aof_enabled", "0"}, {"aof_rewrite_in_progress", "0"}, {"aof_rewrite_scheduled", "0"},
		{"aof_last_rewrite_time_sec", "-1"}, {"aof_current_rewrite_time_sec", "-1"},
		{"aof_last_bgrewrite_status", "ok"}, {"aof_rewrites", "0"}, {"aof_last_write_status", "ok"},
	} {
		w.field(f[0], f[1])
	}
}

func (r *infoRun) stats(w *infoText) {
	s := r.c.srv
	t := r.tally()
	rates := s.info.currentRates()
	w.int("total_connections_received", s.nextID.Load())
	w.uint("total_commands_processed", t.commands)
	w.int("instantaneous_ops_per_sec", int64(rates.opsPerSec+0.5))
	w.uint("total_net_input_bytes", t.netIn)
	w.uint("total_net_output_bytes", t.netOut)
	w.float("instantaneous_input_kbps", rates.inputKbps, 2)
	w.float("instantaneous_output_kbps", rates.outputKbps, 2)
	w.uint("rejected_connections", s.info.rejected.Load())
	w.uint("expired_keys", s.node.ExpiredKeys())
	w.uint("evicted_keys", s.node.Memory().Evicted())
	w.uint("keyspace_hits", t.hits)
	w.uint("keyspace_misses", t.misses)
	w.int("tracking_total_keys", int64(s.trackedKeys()))
	w.uint("total_error_replies", t.errorReplies)
}

// replication describes the node as Redis describes a primary. Zaris replicates each partition from its
// owner to the partition's other nodes, so this node is a primary for the partitions it owns and its
// replicas are the nodes it feeds for them (those gossip sees alive). Offsets count writes: the primary's
// is every revision of the segments it owns, a replica's the same less the revisions it is not known to
// hold, so their difference is the replica's lag in writes. The replication id changes whenever the
// partitions this node owns, or their epochs, do: offsets compare only under one id, as in Redis.
func (r *infoRun) replication(w *infoText) {
	s := r.c.srv
	info := s.node.Replication()
	states := s.memberStates()
	replicas := slices.DeleteFunc(info.Replicas, func(rp Replica) bool {
		return states.departed(rp.ID) || states[rp.ID] == MemberFailed
	})
	m := s.node.Topology()
	w.field("role", "master")
	w.int("connected_slaves", int64(len(replicas)))
	for i, rp := range replicas {
		host, port := replicaAddr(m, rp.ID)
		state := "online"
		if !rp.InSync {
			state = "send_bulk" // catching up: not yet in every in-sync set it belongs to
		}
		w.field("slave"+strconv.Itoa(i), "ip="+host+",port="+strconv.Itoa(port)+",state="+state+
			",offset="+strconv.FormatUint(rp.Offset, 10))
	}
	w.field("master_failover_state", "no-failover")
	w.field("master_replid", info.History)
	w.field("master_replid2", strings.Repeat("0", 40))
	w.uint("master_repl_offset", info.Offset)
	w.int("second_repl_offset", -1)
}

// replicaAddr is where a replica's clients reach it: its RESP endpoint, else its data address.
func replicaAddr(m *Topology, id kv.NodeID) (string, int) {
	info := m.Nodes[id]
	if host, port, ok := splitHostPort(info.RESPAddr); ok {
		return host, port
	}
	host, port, _ := splitHostPort(info.DataAddr)
	return host, port
}

func (r *infoRun) cpu(w *infoText) {
	t, ok := cpuTimes()
	if !ok {
		return
	}
	w.float("used_cpu_sys", t.sys.Seconds(), 6)
	w.float("used_cpu_user", t.user.Seconds(), 6)
	w.float("used_cpu_sys_children", t.childSys.Seconds(), 6)
	w.float("used_cpu_user_children", t.childUser.Seconds(), 6)
}

// processCPU is the processor time the process, and its children waited for, have used.
type processCPU struct{ sys, user, childSys, childUser time.Duration }

func (r *infoRun) errorstats(w *infoText) {
	t := r.tally()
	for _, code := range slices.Sorted(maps.Keys(t.errors)) {
		w.field("errorstat_"+code, "count="+strconv.FormatUint(t.errors[code], 10))
	}
}

func (r *infoRun) cluster(w *infoText) { w.int("cluster_enabled", 1) }

// keyspace counts the keys this node holds, and those with a TTL, as its only database. avg_ttl reads 0,
// which Redis also reports when it has not sampled TTLs. As in Redis, a database without keys is not listed.
func (r *infoRun) keyspace(w *infoText) {
	if keys, expiring := r.c.srv.node.KeyCount(), r.c.srv.node.ExpiringKeyCount(); keys > 0 {
		w.field("db0", "keys="+strconv.Itoa(keys)+",expires="+strconv.Itoa(expiring)+",avg_ttl=0")
	}
}

// ---- Counting ----

// respTally is what connections count for INFO.
type respTally struct {
	commands     uint64 // commands run, those run by EXEC included, as Redis counts them
	hits, misses uint64 // reads that found their key, and that did not
	netIn        uint64 // bytes read from clients
	netOut       uint64 // bytes written to clients
	errorReplies uint64
	errors       map[string]uint64        // error replies by code (the message's first word); nil before the first
	perCommand   map[string]commandCounts // by command name (cmdstats.go); nil before the first
}

// respErrorCodes bounds the error codes counted apart, as Redis bounds its error statistics.
const respErrorCodes = 128

// lookup counts a read's outcome: found (of any kind) or not.
func (t *respTally) lookup(status kv.Status) {
	switch status {
	case kv.StatusSuccess, kv.StatusWrongType:
		t.hits++
	case kv.StatusNotFound:
		t.misses++
	}
}

// countErrors counts n error replies of code.
func (t *respTally) countErrors(code string, n uint64) {
	t.errorReplies += n
	t.countCode(code, n)
}

// countCode counts n error replies under their code, unless respErrorCodes others are counted already.
func (t *respTally) countCode(code string, n uint64) {
	if _, known := t.errors[code]; !known && len(t.errors) >= respErrorCodes {
		return
	}
	if t.errors == nil {
		t.errors = map[string]uint64{}
	}
	t.errors[code] += n
}

// add adds o's counts to t.
func (t *respTally) add(o *respTally) {
	t.commands += o.commands
	t.hits += o.hits
	t.misses += o.misses
	t.netIn += o.netIn
	t.netOut += o.netOut
	t.errorReplies += o.errorReplies
	for code, n := range o.errors {
		t.countCode(code, n)
	}
	t.addCommands(o)
}

// subtract takes b's counts, taken earlier, from t's, leaving out what b held all of.
func (t *respTally) subtract(b *respTally) {
	t.commands -= b.commands
	t.hits -= b.hits
	t.misses -= b.misses
	t.netIn -= b.netIn
	t.netOut -= b.netOut
	t.errorReplies -= b.errorReplies
	for code, n := range b.errors {
		if t.errors[code] -= n; t.errors[code] == 0 {
			delete(t.errors, code)
		}
	}
	for name, bc := range b.perCommand {
		cc := t.perCommand[name]
		cc.calls, cc.usec, cc.rejected, cc.failed = cc.calls-bc.calls, cc.usec-bc.usec, cc.rejected-bc.rejected, cc.failed-bc.failed
		if cc == (commandCounts{}) {
			delete(t.perCommand, name)
		} else {
			t.perCommand[name] = cc
		}
	}
}

// resetStats makes INFO's counters read from zero, as CONFIG RESETSTAT does: commands, hits and misses,
// bytes, error and command statistics.
func (s *Server) resetStats(c *respConn) {
	c.publishStats() // the connection's own commands before this one
	t := s.totals()
	s.mu.Lock()
	s.info.baseline = t
	s.mu.Unlock()
}

// isZero reports whether nothing was counted.
func (t *respTally) isZero() bool {
	return t.commands == 0 && t.hits == 0 && t.misses == 0 && t.netIn == 0 && t.netOut == 0 && t.errorReplies == 0 &&
		len(t.perCommand) == 0
}

// reset zeroes the counts, keeping the maps for the next ones.
func (t *respTally) reset() {
	errs, cmds := t.errors, t.perCommand
	clear(errs)
	clear(cmds)
	*t = respTally{errors: errs, perCommand: cmds}
}

// respConnStats is a connection's counts. Its goroutine counts in counted, without atomics or locks, and
// moves the counts to published, which INFO reads, before each read that may block (publishStats): a
// client that has its reply finds its command counted, and the hot path pays one lock per round trip.
type respConnStats struct {
	counted   respTally // the connection's goroutine only
	mu        sync.Mutex
	published respTally
}

// publishStats makes what the connection counted visible to INFO.
func (c *respConn) publishStats() {
	st := &c.stats
	if st.counted.isZero() {
		return
	}
	st.mu.Lock()
	st.published.add(&st.counted)
	st.mu.Unlock()
	st.counted.reset()
}

// countErrorReply counts the reply a command wrote from offset start of the connection's buffer, when
// the writer had flushed sends times, if it is an error, and reports whether it was. An error reply is
// short and written whole, so a command whose reply was flushed meanwhile did not answer one.
func (c *respConn) countErrorReply(start, sends int) bool {
	_, isError := c.countErrorCode(start, sends)
	return isError
}

// countErrorCode is countErrorReply that also returns the error's code.
func (c *respConn) countErrorCode(start, sends int) (string, bool) {
	if c.wr.sends != sends {
		return "", false
	}
	buf := c.wr.buf
	if start >= len(buf) || buf[start] != '-' {
		return "", false
	}
	line := buf[start+1:]
	if end := bytes.IndexAny(line, " \r"); end >= 0 {
		line = line[:end]
	}
	code := string(line)
	c.stats.counted.countErrors(code, 1)
	return code, true
}

// countErrorMessage counts an error reply written with msg.
func (c *respConn) countErrorMessage(msg string) {
	code, _, _ := strings.Cut(msg, " ")
	c.stats.counted.countErrors(code, 1)
}

// countingReader counts the bytes a connection reads.
type countingReader struct {
	src io.Reader
	n   *uint64
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.src.Read(p)
	*r.n += uint64(n)
	return n, err
}

// countingWriter counts the bytes a connection's replies take.
type countingWriter struct {
	dst io.Writer
	n   *uint64
}

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.dst.Write(p)
	*w.n += uint64(n)
	return n, err
}

// respInfo is what the server keeps for INFO besides its connections' counts.
type respInfo struct {
	started  time.Time
	closed   respTally     // the counts of the connections closed, under Server.mu
	baseline respTally     // the counts when CONFIG RESETSTAT last ran, which INFO reads from; under Server.mu
	rejected atomic.Uint64 // connections refused for RESPMaxClients or full query buffers
	peak     atomic.Uint64 // the most heap in use seen, sampled each second and at each INFO
	rates    atomic.Pointer[respRates]
}

// respRates are the rates INFO calls instantaneous, over the last sampling interval.
type respRates struct{ opsPerSec, inputKbps, outputKbps float64 }

// respRateInterval is how often the rates are sampled.
const respRateInterval = time.Second

// currentRates returns the rates last sampled, zero before the first sample.
func (info *respInfo) currentRates() respRates {
	if r := info.rates.Load(); r != nil {
		return *r
	}
	return respRates{}
}

// notePeak records used as the peak if it is one, and returns the peak.
func (info *respInfo) notePeak(used uint64) uint64 {
	for {
		peak := info.peak.Load()
		if used <= peak {
			return peak
		}
		if info.peak.CompareAndSwap(peak, used) {
			return used
		}
	}
}

// totals sums the counts of the connections closed and of those open, as far as they have published.
func (s *Server) totals() respTally {
	var t respTally
	s.mu.Lock()
	defer s.mu.Unlock()
	t.add(&s.info.closed)
	for c := range s.conns {
		c.stats.mu.Lock()
		t.add(&c.stats.published)
		c.stats.mu.Unlock()
	}
	return t
}

// retire adds the counts of a closing connection to those of the connections closed. Called with s.mu
// held, once the connection's goroutine is done counting.
func (s *Server) retire(c *respConn) {
	c.stats.mu.Lock()
	s.info.closed.add(&c.stats.published)
	c.stats.mu.Unlock()
	s.info.closed.add(&c.stats.counted)
}

// sampleRates measures the rates and the heap's peak every respRateInterval until the server closes.
func (s *Server) sampleRates() {
	defer s.wg.Done()
	tick := time.NewTicker(respRateInterval)
	defer tick.Stop()
	prev, prevAt := s.totals(), time.Now()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-tick.C:
			cur := s.totals()
			secs := now.Sub(prevAt).Seconds()
			s.info.rates.Store(&respRates{
				opsPerSec:  float64(cur.commands-prev.commands) / secs,
				inputKbps:  float64(cur.netIn-prev.netIn) / secs / 1024,
				outputKbps: float64(cur.netOut-prev.netOut) / secs / 1024,
			})
			used, _ := goMemory()
			s.info.notePeak(used)
			prev, prevAt = cur, now
		}
	}
}

// trackingClients counts the connections with CLIENT TRACKING on.
func (s *Server) trackingClients() int {
	if s.tracking == nil {
		return 0
	}
	return int(s.tracking.active.Load())
}

// trackedKeys counts the keys remembered for client-side caching.
func (s *Server) trackedKeys() int {
	if s.tracking == nil {
		return 0
	}
	s.tracking.mu.Lock()
	defer s.tracking.mu.Unlock()
	return len(s.tracking.keys)
}

// ---- The process ----

// processRunID identifies this process as Redis's run_id does: 40 random hex digits, fixed for its life.
var processRunID = sync.OnceValue(func() string {
	var b [20]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
})

var executablePath = sync.OnceValue(func() string {
	path, _ := os.Executable()
	return path
})

// goMemory returns the bytes of heap objects in use (what Redis calls used_memory, its allocator's count)
// and all the memory the Go runtime has mapped. runtime/metrics reads them without stopping the world.
func goMemory() (heap, mapped uint64) {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}
	metrics.Read(samples)
	if samples[0].Value.Kind() == metrics.KindUint64 {
		heap = samples[0].Value.Uint64()
	}
	if samples[1].Value.Kind() == metrics.KindUint64 {
		mapped = samples[1].Value.Uint64()
	}
	return heap, mapped
}
