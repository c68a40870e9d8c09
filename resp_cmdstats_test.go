package zaris

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestRESPCommandstatsMatchRedis runs one sequence on a redis-server in cluster mode and on a Zaris node,
// and compares what INFO commandstats counted meanwhile, command by command: calls, rejected calls (wrong
// arity, refused inside MULTI) and failed calls (error replies), subcommands as parent|sub; then that
// CONFIG RESETSTAT starts them again.
func TestRESPCommandstatsMatchRedis(t *testing.T) {
	t.Parallel()
	redis := startClusterRedis(t)
	c := startRESPCluster(t, 1, nil)
	zaris := dialDiff(t, c.node(0).RESPAddr())
	seq := [][]string{
		{"SET", "{cs}a", "1"}, {"GET", "{cs}a"}, {"GET", "{cs}missing"}, {"SET", "{cs}s", "x"}, {"INCR", "{cs}s"},
		{"GET"}, {"GET", "{cs}a", "extra"}, {"NOSUCHCOMMAND"}, {"LPUSH", "{cs}s", "x"},
		{"MULTI"}, {"SET", "{cs}b", "1"}, {"INCR", "{cs}s"}, {"EXEC"},
		{"MULTI"}, {"GET"}, {"EXEC"},
		{"CONFIG", "GET", "maxmemory"}, {"CLIENT", "ID"}, {"HSET", "{cs}h", "f", "v"}, {"HGET", "{cs}h", "f"},
		{"DEL", "{cs}a", "{cs}b"}, {"PING"}, {"ECHO", "x"},
	}
	counts := func(conn *diffConn) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, f := range infoFields(t, infoOf(t, conn, "commandstats")) {
			name, ok := strings.CutPrefix(f.name, "cmdstat_")
			if !ok {
				t.Fatalf("INFO commandstats line %q", f.name)
			}
			out[name] = f.value
		}
		return out
	}
	delta := func(before, after map[string]string) map[string]string {
		out := map[string]string{}
		for name, v := range after {
			var calls, rejected, failed, bc, br, bf int
			var usec int64
			var perCall float64
			fmt.Sscanf(v, "calls=%d,usec=%d,usec_per_call=%f,rejected_calls=%d,failed_calls=%d", &calls, &usec, &perCall, &rejected, &failed)
			if b, ok := before[name]; ok {
				fmt.Sscanf(b, "calls=%d,usec=%d,usec_per_call=%f,rejected_calls=%d,failed_calls=%d", &bc, &usec, &perCall, &br, &bf)
			}
			if calls != bc || rejected != br || failed != bf {
				out[name] = fmt.Sprintf("calls %d, rejected %d, failed %d", calls-bc, rejected-br, failed-bf)
			}
		}
		return out
	}
	var got [2]map[string]string
	for i, conn := range []*diffConn{redis, zaris} {
		before := counts(conn)
		for _, args := range seq {
			conn.do(t, args)
		}
		got[i] = delta(before, counts(conn))
	}
	for _, name := range slices.Sorted(maps.Keys(got[0])) {
		if got[0][name] != got[1][name] {
			t.Errorf("%s: redis %q, zaris %q", name, got[0][name], got[1][name])
		}
	}
	for name := range got[1] {
		if _, ok := got[0][name]; !ok {
			t.Errorf("%s: zaris %q, redis counted nothing", name, got[1][name])
		}
	}
	if len(got[1]) < 10 {
		t.Fatalf("zaris counted %d commands: %v", len(got[1]), got[1])
	}

	// CONFIG RESETSTAT starts every count again, its own call the first.
	for i, conn := range []*diffConn{redis, zaris} {
		conn.do(t, []string{"CONFIG", "RESETSTAT"})
		conn.do(t, []string{"PING"})
		got[i] = delta(nil, counts(conn))
	}
	want := map[string]string{"config|resetstat": "calls 1, rejected 0, failed 0", "ping": "calls 1, rejected 0, failed 0"}
	if !maps.Equal(got[0], want) || !maps.Equal(got[1], want) {
		t.Fatalf("after CONFIG RESETSTAT: redis %v, zaris %v; want %v", got[0], got[1], want)
	}
}
