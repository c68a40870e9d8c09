package zaris

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// infoField is one "name:value" line of INFO, with the section it is in.
type infoField struct{ section, name, value string }

// infoPayload returns the text of an INFO or CLUSTER INFO reply, a bulk or verbatim string.
func infoPayload(t *testing.T, reply string) string {
	t.Helper()
	header, body, ok := strings.Cut(reply, "\r\n")
	if !ok || (header[0] != '$' && header[0] != '=') || !strings.HasSuffix(body, "\r\n") {
		t.Fatalf("not a string reply: %q", reply)
	}
	body = strings.TrimSuffix(body, "\r\n")
	if header[0] == '=' {
		body = strings.TrimPrefix(body, "txt:")
	}
	if n, _ := strconv.Atoi(header[1:]); n != len(reply)-len(header)-4 {
		t.Fatalf("reply length %s does not match %q", header, reply)
	}
	return body
}

// infoOf sends INFO with args on conn and returns its text.
func infoOf(t *testing.T, conn *diffConn, args ...string) string {
	t.Helper()
	return infoPayload(t, conn.do(t, append([]string{"INFO"}, args...)))
}

// infoSkeleton keeps of INFO's text its section headers and blank lines, in order: its framing.
func infoSkeleton(text string) []string {
	var out []string
	for _, line := range strings.SplitAfter(text, "\r\n") {
		if strings.HasPrefix(line, "#") || line == "\r\n" {
			out = append(out, line)
		}
	}
	return out
}

// infoFields parses INFO's text into its fields, in order.
func infoFields(t *testing.T, text string) []infoField {
	t.Helper()
	var out []infoField
	section := ""
	for _, line := range strings.Split(strings.TrimSuffix(text, "\r\n"), "\r\n") {
		switch {
		case line == "":
		case strings.HasPrefix(line, "# "):
			section = line[2:]
		default:
			name, value, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("line %q of section %s is not name:value", line, section)
			}
			out = append(out, infoField{section: section, name: name, value: value})
		}
	}
	return out
}

// infoMap indexes fields by name.
func infoMap(fields []infoField) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		m[f.name] = f.value
	}
	return m
}

// infoShapes classify values the way a parser of INFO reads them.
var infoShapes = []struct {
	name string
	re   *regexp.Regexp
}{
	{"integer", regexp.MustCompile(`^-?\d+$`)},
	{"decimal", regexp.MustCompile(`^-?\d+\.\d+$`)},
	{"human bytes", regexp.MustCompile(`^\d+(\.\d\d)?[BKMGTP]$`)},
	{"percentage", regexp.MustCompile(`^\d+\.\d\d%$`)},
	{"hex id", regexp.MustCompile(`^[0-9a-f]{40}$`)},
	{"keyspace", regexp.MustCompile(`^keys=\d+,expires=\d+,avg_ttl=\d+$`)},
	{"error count", regexp.MustCompile(`^count=\d+$`)},
}

func infoShape(value string) string {
	for _, s := range infoShapes {
		if s.re.MatchString(value) {
			return s.name
		}
	}
	return "text"
}

// exporterFields are fields that exporters, redis-cli --stat and keyspace parsers read.
var exporterFields = []string{
	"redis_version", "redis_mode", "os", "arch_bits", "process_id", "run_id", "tcp_port", "uptime_in_seconds",
	"uptime_in_days", "connected_clients", "blocked_clients", "tracking_clients", "maxclients", "used_memory",
	"used_memory_human", "used_memory_rss", "used_memory_peak", "maxmemory", "maxmemory_policy",
	"mem_fragmentation_ratio", "loading", "rdb_last_bgsave_status", "aof_enabled", "total_connections_received",
	"total_commands_processed", "instantaneous_ops_per_sec", "total_net_input_bytes", "total_net_output_bytes",
	"rejected_connections", "expired_keys", "evicted_keys", "keyspace_hits", "keyspace_misses",
	"total_error_replies", "role", "connected_slaves", "master_replid", "master_repl_offset", "used_cpu_sys",
	"used_cpu_user", "errorstat_ERR", "cluster_enabled", "db0",
}

// replicaLine names INFO's lines of replicas, which a redis-server without replicas does not write.
var replicaLine = regexp.MustCompile(`^slave\d+$`)

// startClusterRedis starts a redis-server in cluster mode serving every slot and waits until its cluster is ok.
func startClusterRedis(t *testing.T) *diffConn {
	t.Helper()
	redis := dialDiff(t, startRedisServer(t, "--cluster-enabled", "yes"))
	if reply := redis.do(t, []string{"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}); reply != "+OK\r\n" {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %q", reply)
	}
	waitFor(t, 10*time.Second, "redis-server's cluster to be ok", func() bool {
		return strings.Contains(redis.do(t, []string{"CLUSTER", "INFO"}), "cluster_state:ok")
	})
	return redis
}

// TestRESPInfoMatchesRedis compares INFO and CLUSTER INFO with a real redis-server in cluster mode: the
// sections each selection of INFO writes and their framing, the fields exporters read and the shape of
// their values, that every field Zaris writes is one Redis writes, in Redis's order, and CLUSTER INFO's
// fields in order.
func TestRESPInfoMatchesRedis(t *testing.T) {
	t.Parallel()
	redis := startClusterRedis(t)
	cluster := startRESPCluster(t, 3, func(cfg *Config) { cfg.ReplicationFactor = 2 })
	const tag = "{info}"
	zaris := dialDiff(t, cluster.owner(tag).RESPAddr())
	for _, conn := range []*diffConn{redis, zaris} {
		conn.do(t, []string{"SET", tag + "k", "v"})
		conn.do(t, []string{"GET", tag + "k"})
		conn.do(t, []string{"GET", tag + "missing"})
		conn.do(t, []string{"NOSUCHCOMMAND"})
	}

	t.Run("sections", func(t *testing.T) {
		for _, args := range [][]string{
			nil, {"default"}, {"all"}, {"everything"}, {"server"}, {"clients"}, {"memory"}, {"persistence"},
			{"stats"}, {"replication"}, {"cpu"}, {"modules"}, {"commandstats"}, {"errorstats"}, {"latencystats"},
			{"cluster"}, {"keyspace"}, {"keyspace", "server", "cpu"}, {"stats", "stats"}, {"nosuch"},
			{"nosuch", "cluster"}, {"SeRvEr", "KEYSPACE"}, {"ALL", "default"}, {"default", "commandstats"},
			{"Everything", "nosuch"},
		} {
			want, got := infoSkeleton(infoOf(t, redis, args...)), infoSkeleton(infoOf(t, zaris, args...))
			if !slices.Equal(got, want) {
				t.Errorf("INFO %s: sections\n%q\nwant, as redis-server writes them,\n%q", strings.Join(args, " "), got, want)
			}
		}
	})

	t.Run("fields", func(t *testing.T) {
		want, got := infoFields(t, infoOf(t, redis, "everything")), infoFields(t, infoOf(t, zaris, "everything"))
		wantMap, gotMap := infoMap(want), infoMap(got)
		for _, name := range exporterFields {
			w, inRedis := wantMap[name]
			_, inZaris := gotMap[name]
			switch {
			case !inRedis:
				t.Errorf("redis-server does not write %s: the list of fields is wrong", name)
			case !inZaris:
				t.Errorf("INFO lacks %s (redis-server: %q)", name, w)
			}
		}
		for name, want := range map[string]string{"zaris_version": Version,
			"zaris_protocol": fmt.Sprint(ProtocolVersion), "zaris_cluster_protocol": fmt.Sprint(ProtocolVersion)} {
			if gotMap[name] != want {
				t.Errorf("INFO server's %s is %q, want %q", name, gotMap[name], want)
			}
		}
		var common []string
		for _, f := range got {
			w, ok := wantMap[f.name]
			switch {
			case strings.HasPrefix(f.name, "zaris_"):
			case replicaLine.MatchString(f.name):
			case !ok:
				t.Errorf("INFO writes %s:%s, which redis-server does not write", f.name, f.value)
			case infoShape(f.value) != infoShape(w):
				t.Errorf("%s:%q is %s; redis-server's %q is %s", f.name, f.value, infoShape(f.value), w, infoShape(w))
			default:
				common = append(common, f.section+"/"+f.name)
			}
		}
		var redisOrder []string
		for _, f := range want {
			if _, ok := gotMap[f.name]; ok {
				redisOrder = append(redisOrder, f.section+"/"+f.name)
			}
		}
		// Redis lists its command statistics in its command table's hash order; Zaris sorts them.
		commands := func(x string) bool { return strings.HasPrefix(x, "Commandstats/") }
		if got, want := slices.Sorted(slices.Values(common)), slices.Sorted(slices.Values(redisOrder)); !slices.Equal(
			slices.DeleteFunc(got, func(x string) bool { return !commands(x) }), slices.DeleteFunc(want, func(x string) bool { return !commands(x) })) {
			t.Errorf("command statistics %q, want %q", got, want)
		}
		common, redisOrder = slices.DeleteFunc(common, commands), slices.DeleteFunc(redisOrder, commands)
		if !slices.Equal(common, redisOrder) {
			t.Errorf("fields in sections and order\n%q\nwant, as redis-server writes them,\n%q", common, redisOrder)
		}
	})

	t.Run("replication", func(t *testing.T) {
		// The owner's replicas connect in the background: wait for them, then check what INFO says of them.
		var fields map[string]string
		var replicas int
		waitFor(t, time.Minute, "connected_slaves above 0 in a cluster that replicates", func() bool {
			fields = infoMap(infoFields(t, infoOf(t, zaris, "replication")))
			replicas, _ = strconv.Atoi(fields["connected_slaves"])
			return replicas > 0
		})
		primary, _ := strconv.ParseUint(fields["master_repl_offset"], 10, 64)
		line := regexp.MustCompile(`^ip=127\.0\.0\.1,port=\d+,state=(online|send_bulk),offset=(\d+)$`)
		for i := range replicas {
			m := line.FindStringSubmatch(fields["slave"+strconv.Itoa(i)])
			if m == nil {
				t.Fatalf("slave%d:%q is not a replica line (%v)", i, fields["slave"+strconv.Itoa(i)], fields)
			}
			if offset, _ := strconv.ParseUint(m[2], 10, 64); offset > primary {
				t.Errorf("slave%d's offset %d passes master_repl_offset %d", i, offset, primary)
			}
		}
		if _, ok := fields["slave"+strconv.Itoa(replicas)]; ok {
			t.Errorf("more replica lines than connected_slaves:%d: %v", replicas, fields)
		}
	})

	t.Run("resp3", func(t *testing.T) {
		redis3, zaris3 := dialDiff(t, redis.conn.RemoteAddr().String()), dialDiff(t, zaris.conn.RemoteAddr().String())
		for _, args := range [][]string{{"HELLO", "3"}, {"INFO", "cluster"}, {"INFO", "nosuch"}, {"INFO", "modules", "CLUSTER"}} {
			want, got := redis3.do(t, args), zaris3.do(t, args)
			if args[0] == "HELLO" {
				continue
			}
			if got != want {
				t.Errorf("%s in RESP3: %q; redis-server: %q", strings.Join(args, " "), got, want)
			}
		}
		infoPayload(t, zaris3.do(t, []string{"CLUSTER", "INFO"}))
	})

	t.Run("cluster info", func(t *testing.T) {
		names := func(conn *diffConn) []string {
			var out []string
			for _, line := range strings.Split(strings.TrimSuffix(infoPayload(t, conn.do(t, []string{"CLUSTER", "INFO"})), "\r\n"), "\r\n") {
				name, _, _ := strings.Cut(line, ":")
				out = append(out, name)
			}
			return out
		}
		if want, got := names(redis), names(zaris); !slices.Equal(got, want) {
			t.Errorf("CLUSTER INFO fields\n%q\nwant, as redis-server writes them,\n%q", got, want)
		}
		fields := infoMap(infoFields(t, infoPayload(t, zaris.do(t, []string{"CLUSTER", "INFO"}))))
		for name, want := range map[string]string{"cluster_state": "ok", "cluster_slots_assigned": "16384",
			"cluster_slots_ok": "16384", "cluster_slots_pfail": "0", "cluster_slots_fail": "0", "cluster_known_nodes": "3"} {
			if fields[name] != want {
				t.Errorf("CLUSTER INFO %s:%s; want %s", name, fields[name], want)
			}
		}
		if fields["cluster_stats_messages_sent"] == "0" && fields["cluster_stats_messages_received"] == "0" {
			t.Errorf("CLUSTER INFO counts no message between three nodes that formed a cluster: %v", fields)
		}
	})
}

// TestRESPInfoExpiredAndTracking checks expired_keys and tracking_clients on a node: a key its owner
// expires is counted, and a connection with CLIENT TRACKING on is.
func TestRESPInfoExpiredAndTracking(t *testing.T) {
	cluster := startRESPCluster(t, 1, func(cfg *Config) { cfg.ReapInterval = 20 * time.Millisecond })
	conn := dialDiff(t, cluster.node(0).RESPAddr())
	stat := func(name string) string { return infoMap(infoFields(t, infoOf(t, conn, "everything")))[name] }
	if got := stat("expired_keys"); got != "0" {
		t.Fatalf("expired_keys:%s before any key expired", got)
	}
	for i := range 3 {
		conn.do(t, []string{"SET", fmt.Sprintf("short%d", i), "v", "PX", "1"})
	}
	conn.do(t, []string{"SET", "long", "v", "EX", "1000"})
	waitFor(t, 10*time.Second, "expired_keys:3", func() bool { return stat("expired_keys") == "3" })
	if got := stat("db0"); got != "keys=1,expires=1,avg_ttl=0" {
		t.Errorf("db0:%s; want the one key left, with its TTL", got)
	}
	conn.do(t, []string{"PERSIST", "long"})
	if got := stat("db0"); got != "keys=1,expires=0,avg_ttl=0" {
		t.Errorf("db0:%s after PERSIST", got)
	}
	conn.do(t, []string{"EXPIRE", "long", "1000"})

	tracker := dialDiff(t, cluster.node(0).RESPAddr())
	tracker.do(t, []string{"HELLO", "3"})
	tracker.do(t, []string{"CLIENT", "TRACKING", "ON"})
	tracker.do(t, []string{"GET", "long"})
	if got := stat("tracking_clients"); got != "1" {
		t.Fatalf("tracking_clients:%s with one connection tracking", got)
	}
	if got := stat("tracking_total_keys"); got != "1" {
		t.Fatalf("tracking_total_keys:%s after one tracked read", got)
	}
}

// TestRESPInfoCounters drives the endpoint on a bare store and checks that INFO's counters move with what
// clients do: commands, hits and misses, bytes each way, errors, connections, refusals and keys.
func TestRESPInfoCounters(t *testing.T) {
	owner := newStoreOwner()
	s := startBareRESP(t, owner, func(cfg *Config) { cfg.RESPMaxClients = 2 })

	var keys, missing []string
	for i := 0; len(keys) < 20 || len(missing) < 5; i++ {
		switch key := fmt.Sprintf("k%d", i); {
		case !owner.owns(key):
		case len(keys) < 20:
			keys = append(keys, key)
		default:
			missing = append(missing, key)
		}
	}
	conn := dialDiff(t, s.Addr())
	info := func() map[string]string { return infoMap(infoFields(t, infoOf(t, conn, "everything"))) }
	before := info()

	var sent, received int
	do := func(args ...string) {
		sent += len(respCmd(args...))
		received += len(conn.do(t, args))
	}
	for _, k := range keys {
		do("SET", k, "value of "+k)
	}
	for _, k := range keys {
		do("GET", k)
	}
	for _, k := range missing {
		do("GET", k)
	}
	do("NOSUCHCOMMAND")
	after := info()

	delta := func(name string) int64 {
		t.Helper()
		a, errA := strconv.ParseInt(after[name], 10, 64)
		b, errB := strconv.ParseInt(before[name], 10, 64)
		if errA != nil || errB != nil {
			t.Fatalf("%s: %q then %q", name, before[name], after[name])
		}
		return a - b
	}
	for _, check := range []struct {
		name     string
		min, max int64
	}{
		{"total_commands_processed", int64(2*len(keys) + 5 + 1), int64(2*len(keys) + 5 + 1)}, // the first INFO too
		{"keyspace_hits", int64(len(keys)), int64(len(keys))},
		{"keyspace_misses", 5, 5},
		{"total_net_input_bytes", int64(sent), 1 << 40},
		{"total_net_output_bytes", int64(received), 1 << 40},
		{"total_error_replies", 1, 1},
	} {
		if d := delta(check.name); d < check.min || d > check.max {
			t.Errorf("%s grew by %d; want [%d, %d]", check.name, d, check.min, check.max)
		}
	}
	if after["errorstat_ERR"] != "count=1" {
		t.Errorf("errorstat_ERR:%s after one unknown command", after["errorstat_ERR"])
	}
	if want := fmt.Sprintf("keys=%d,expires=0,avg_ttl=0", owner.store.len()); after["db0"] != want {
		t.Errorf("db0:%s; want %s", after["db0"], want)
	}
	if after["connected_clients"] != "1" {
		t.Errorf("connected_clients:%s with one connection", after["connected_clients"])
	}

	second := dialDiff(t, s.Addr())
	second.do(t, []string{"PING"})
	if got := info()["connected_clients"]; got != "2" {
		t.Errorf("connected_clients:%s with two connections", got)
	}
	third := dialDiff(t, s.Addr())
	if reply := third.do(t, []string{"PING"}); !strings.HasPrefix(reply, "-ERR max number of clients reached") {
		t.Fatalf("a third connection over RESPMaxClients 2 was answered %q", reply)
	}
	now := info()
	if now["rejected_connections"] != "1" || now["total_connections_received"] != "2" {
		t.Errorf("rejected_connections:%s total_connections_received:%s; want 1 and 2",
			now["rejected_connections"], now["total_connections_received"])
	}
	second.do(t, []string{"GET", keys[0]})
	second.conn.Close()
	waitFor(t, 5*time.Second, "connected_clients:1", func() bool { return info()["connected_clients"] == "1" })
	if got := info()["keyspace_hits"]; got != strconv.Itoa(len(keys)+1) {
		t.Errorf("keyspace_hits:%s; want %d, a closed connection's hit included", got, len(keys)+1)
	}
	waitFor(t, 5*time.Second, "instantaneous_ops_per_sec above 0", func() bool {
		return info()["instantaneous_ops_per_sec"] != "0"
	})
}
