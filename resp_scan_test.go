package zaris

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/zaris-go/zaris/internal/kv"
)

// TestRESPScanGoRedisCluster scans a three-node cluster the way go-redis users do, SCAN on every master:
// together the masters return every key exactly once, DBSIZE summed over them is the number of keys, and
// KEYS and MATCH split the key space the same way.
func TestRESPScanGoRedisCluster(t *testing.T) {
	c := startRESPCluster(t, 3, nil)
	ctx := bg(t)
	client := newClusterClient(t, c, 2)
	const n = 2000
	keys := numberedKeys("scan:", n)
	pipe := client.Pipeline()
	for _, k := range keys {
		pipe.Set(ctx, k, "v", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.Set(ctx, "other", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	seen, keysSeen := map[string]int{}, map[string]int{}
	var masters, dbsize int64
	err := client.ForEachMaster(ctx, func(ctx context.Context, master *redis.Client) error {
		var mine []string
		iter := master.Scan(ctx, 0, "scan:*", 100).Iterator()
		for iter.Next(ctx) {
			mine = append(mine, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		size, err := master.DBSize(ctx).Result()
		if err != nil {
			return err
		}
		listed, err := master.Keys(ctx, "scan:*").Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		masters++
		dbsize += size
		for _, k := range mine {
			seen[k]++
		}
		for _, k := range listed {
			keysSeen[k]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if masters != 3 {
		t.Fatalf("%d masters; want 3", masters)
	}
	checkEachOnce(t, seen, keys)
	checkEachOnce(t, keysSeen, keys)
	if dbsize != n+1 {
		t.Fatalf("DBSIZE summed over the masters is %d; want %d", dbsize, n+1)
	}
}

// TestRESPClusterCallDBSize runs redis-cli --cluster call DBSIZE, which asks every node of the cluster: the
// answers add up to the number of keys. Without redis-cli the test is skipped, unless ZARIS_NEED_REDIS is set.
func TestRESPClusterCallDBSize(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("ZARIS_NEED_REDIS") != "" {
			t.Fatal("redis-cli is not installed (apt-get install redis-tools)")
		}
		t.Skip("redis-cli is not installed")
	}
	c := startRESPCluster(t, 3, nil)
	const n = 700
	putKeys(t, bg(t), c.node(0), numberedKeys("cli:", n))
	out, err := exec.Command(cli, "--cluster", "call", c.node(1).RESPAddr(), "DBSIZE").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster call DBSIZE: %v: %s", err, out)
	}
	total, answers := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		addr, count, found := strings.Cut(line, ": ")
		if _, _, err := net.SplitHostPort(addr); !found || err != nil {
			continue
		}
		size, err := strconv.Atoi(strings.TrimSpace(count))
		if err != nil {
			t.Fatalf("redis-cli --cluster call DBSIZE: line %q", line)
		}
		total += size
		answers++
	}
	t.Logf("redis-cli --cluster call DBSIZE:\n%s", out)
	if answers != 3 || total != n {
		t.Fatalf("redis-cli --cluster call DBSIZE: %d nodes answered, %d keys in all; want 3 and %d:\n%s", answers, total, n, out)
	}
}

// TestRESPScanCursorWalk drives SCAN by hand on one node of a two-node cluster: small pages come with a
// cursor other than 0 until the last, every key of the node comes once, and none of the other node.
func TestRESPScanCursorWalk(t *testing.T) {
	c := startRESPCluster(t, 2, nil)
	ctx := bg(t)
	keys := numberedKeys("walk:", 500)
	putKeys(t, ctx, c.node(0), keys)
	node := c.node(1)
	var mine []string
	for _, k := range keys {
		if c.owner(k) == node {
			mine = append(mine, k)
		}
	}
	client := redis.NewClient(&redis.Options{Addr: node.RESPAddr()})
	defer client.Close()
	seen := map[string]int{}
	pages := 0
	for cursor := uint64(0); ; pages++ {
		page, next, err := client.Scan(ctx, cursor, "", 7).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 7 {
			t.Fatalf("a page of COUNT 7 has %d keys", len(page))
		}
		for _, k := range page {
			seen[k]++
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	checkEachOnce(t, seen, mine)
	if pages < len(mine)/7 {
		t.Fatalf("%d keys in %d pages of 7", len(mine), pages)
	}
}

// TestRESPScanMatchesRedis compares SCAN, KEYS and DBSIZE with a real redis-server where Redis defines the
// reply whatever the cursor means: errors, options, and key spaces small enough for one page.
func TestRESPScanMatchesRedis(t *testing.T) {
	redisAddr := startRedisServer(t)
	zaris := startRESPCluster(t, 1, nil)
	compareWithRedis(t, redisAddr, zaris.node(0).RESPAddr(), scanCases())
}

func scanCases() []redisCase {
	var bad string
	for _, args := range [][]string{
		{"SCAN", "abc"}, {"SCAN", "1.5"}, {"SCAN", "18446744073709551616"}, {"SCAN", "1 "}, {"SCAN", "0x10"}, {"SCAN", "0000000000000000000000000"},
		{"SCAN", "0", "COUNT", "0"}, {"SCAN", "0", "COUNT", "-1"}, {"SCAN", "0", "COUNT", "abc"},
		{"SCAN", "0", "COUNT", "9223372036854775808"}, {"SCAN", "0", "COUNT"}, {"SCAN", "0", "MATCH"},
		{"SCAN", "0", "TYPE"}, {"SCAN", "0", "FOO", "bar"}, {"SCAN", "0", "MATCH", "*", "COUNT"}, {"SCAN"},
		{"KEYS"}, {"KEYS", "a", "b"}, {"DBSIZE", "x"},
	} {
		bad += respCmd(args...)
	}
	return []redisCase{
		{name: "errors", input: bad + "QUIT\r\n"},
		{name: "empty", input: respCmd("DBSIZE") + respCmd("SCAN", "0") + respCmd("KEYS", "*") + "QUIT\r\n"},
		{name: "one key", input: respCmd("SET", "k1", "v") + respCmd("DBSIZE") + respCmd("SCAN", "0") +
			respCmd("SCAN", "0", "MATCH", "k*", "COUNT", "100") + respCmd("SCAN", "0", "MATCH", "x*") +
			respCmd("SCAN", "0", "count", "5", "match", "k?") + respCmd("SCAN", "0", "COUNT", "1", "COUNT", "1000") +
			respCmd("SCAN", "0", "MATCH", "x", "MATCH", "k1") + respCmd("SCAN", "0", "TYPE", "string") +
			respCmd("SCAN", "0", "TYPE", "STRING") + respCmd("SCAN", "0", "TYPE", "hash") +
			respCmd("KEYS", "*") + respCmd("KEYS", "k[0-9]") + respCmd("KEYS", "z*") + "QUIT\r\n"},
		{name: "kinds", input: respCmd("HSET", "h", "f", "v") + respCmd("SADD", "s", "m") + respCmd("RPUSH", "l", "x") +
			respCmd("ZADD", "z", "1", "m") + respCmd("SCAN", "0", "TYPE", "hash", "COUNT", "100") +
			respCmd("SCAN", "0", "TYPE", "set", "COUNT", "100") + respCmd("SCAN", "0", "TYPE", "list", "COUNT", "100") +
			respCmd("SCAN", "0", "TYPE", "zset", "COUNT", "100") + respCmd("SCAN", "0", "TYPE", "string", "COUNT", "100") +
			respCmd("DBSIZE") + "QUIT\r\n"},
	}
}

// TestRESPScanBounds checks the bounds on listing keys: a MATCH or KEYS pattern past maxMatchPattern is
// refused, one within it is served, and a KEYS reply past the RESP reply budget is refused with an error
// rather than gathered, while SCAN still lists every key a page at a time.
func TestRESPScanBounds(t *testing.T) {
	c := startRESPCluster(t, 1, func(cfg *Config) {
		cfg.MaxValueSize, cfg.RESPMaxQueryBufferTotal = 256<<10, 2<<20
	})
	ctx := bg(t)
	pad := strings.Repeat("k", 1000)
	keys := numberedKeys("long:"+pad+":", 2500) // 2.5 MB of keys, more than the whole budget
	putKeys(t, ctx, c.node(0), keys)
	client := redis.NewClient(&redis.Options{Addr: c.node(0).RESPAddr()})
	defer client.Close()

	long := strings.Repeat("*a", kv.MaxMatchPattern/2) + "*"
	if err := client.Scan(ctx, 0, long, 10).Err(); err == nil || !strings.Contains(err.Error(), "pattern longer") {
		t.Fatalf("SCAN with a %d-byte pattern: %v, want a refusal", len(long), err)
	}
	if err := client.Keys(ctx, long).Err(); err == nil || !strings.Contains(err.Error(), "pattern longer") {
		t.Fatalf("KEYS with a %d-byte pattern: %v, want a refusal", len(long), err)
	}
	var scanErr error
	for _, err := range c.node(0).Scan(ctx, ScanMatch(long)) {
		scanErr = err
		break
	}
	if !errors.Is(scanErr, ErrInvalidRequest) {
		t.Fatalf("Scan with a %d-byte pattern: %v, want ErrInvalidRequest", len(long), scanErr)
	}
	within := strings.Repeat("*k", kv.MaxMatchPattern/4) + "*"
	if got, err := client.Keys(ctx, "long:"+pad+":1?").Result(); err != nil || len(got) != 10 {
		t.Fatalf("KEYS of ten keys: %d keys, %v", len(got), err)
	}
	if _, _, err := client.Scan(ctx, 0, within, 100).Result(); err != nil {
		t.Fatalf("SCAN with a %d-byte pattern: %v", len(within), err)
	}
	if err := client.Keys(ctx, "*").Err(); err == nil || !strings.Contains(err.Error(), "use SCAN") && !strings.Contains(err.Error(), "with SCAN") {
		t.Fatalf("KEYS of 2.5 MB under a 2 MiB budget: %v, want a refusal", err)
	}
	seen := map[string]int{}
	for cursor := uint64(0); ; {
		page, next, err := client.Scan(ctx, cursor, "", 200).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page {
			seen[k]++
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	checkEachOnce(t, seen, keys)
	if err := client.Set(ctx, "after", "1", 0).Err(); err != nil {
		t.Fatalf("SET after the refused KEYS: %v (its budget was not given back?)", err)
	}
}

// TestRESPCollectionScanGoRedis pages through large collections with go-redis's HSCAN, SSCAN and ZSCAN
// iterators, on a cluster whose nodes own some slots each, while other fields are written: every element
// present throughout comes back once, with its value or score.
func TestRESPCollectionScanGoRedis(t *testing.T) {
	c := startRESPCluster(t, 2, nil)
	ctx := bg(t)
	client := newClusterClient(t, c, 2)
	const n = 1500
	pipe := client.Pipeline()
	for i := range n {
		pipe.HSet(ctx, "{cs}h", "f"+strconv.Itoa(i), "v"+strconv.Itoa(i))
		pipe.SAdd(ctx, "{cs}s", "m"+strconv.Itoa(i))
		pipe.ZAdd(ctx, "{cs}z", redis.Z{Score: float64(i), Member: "m" + strconv.Itoa(i)})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	scans := map[string]func(cursor uint64) *redis.ScanCmd{
		"{cs}h": func(cursor uint64) *redis.ScanCmd { return client.HScan(ctx, "{cs}h", cursor, "", 10) },
		"{cs}s": func(cursor uint64) *redis.ScanCmd { return client.SScan(ctx, "{cs}s", cursor, "", 10) },
		"{cs}z": func(cursor uint64) *redis.ScanCmd { return client.ZScan(ctx, "{cs}z", cursor, "", 10) },
	}
	for key, scan := range scans {
		seen := map[string]int{}
		cursor, pages := uint64(0), 0
		for {
			page, next, err := scan(cursor).Result()
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			pages++
			stride := 2
			if key == "{cs}s" {
				stride = 1
			}
			for i := 0; i < len(page); i += stride {
				seen[page[i]]++
				if stride == 2 && !strings.HasPrefix(page[i], "new") && strings.TrimPrefix(page[i+1], "v") != strings.TrimLeft(page[i], "fm") {
					t.Fatalf("%s: %q comes with %q", key, page[i], page[i+1])
				}
			}
			// Fields that come and go while the scan runs.
			client.HSet(ctx, "{cs}h", "new"+strconv.Itoa(pages), "x")
			client.SAdd(ctx, "{cs}s", "new"+strconv.Itoa(pages))
			client.SRem(ctx, "{cs}s", "new"+strconv.Itoa(pages-1))
			if cursor = next; cursor == 0 {
				break
			}
		}
		for i := range n {
			name := "m" + strconv.Itoa(i)
			if key == "{cs}h" {
				name = "f" + strconv.Itoa(i)
			}
			if seen[name] != 1 {
				t.Fatalf("%s: %s returned %d times in %d pages, want once", key, name, seen[name], pages)
			}
		}
	}
}

// TestRESPRandomKey checks RANDOMKEY on every master of a cluster: null while a node owns no key, then
// only keys that node owns, several distinct ones over many calls, and for a user limited to some keys,
// only those.
func TestRESPRandomKey(t *testing.T) {
	c := startRESPCluster(t, 3, func(cfg *Config) {
		cfg.RESPUsers = []RESPUser{{Name: "default", NoPass: true}, {Name: "app", Passwords: []string{"pw"}, Keys: []string{"app:*"}}}
	})
	ctx := bg(t)
	for _, n := range c.live() {
		client := redis.NewClient(&redis.Options{Addr: n.RESPAddr(), Protocol: 2})
		defer client.Close()
		if _, err := client.RandomKey(ctx).Result(); !errors.Is(err, redis.Nil) {
			t.Fatalf("RANDOMKEY at %s with no key: %v, want null", n.id, err)
		}
	}
	keys := append(numberedKeys("other:", 300), numberedKeys("app:", 5)...)
	for _, k := range keys {
		if err := c.node(0).Put(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.live() {
		client := redis.NewClient(&redis.Options{Addr: n.RESPAddr(), Protocol: 2})
		defer client.Close()
		seen := map[string]bool{}
		for range 50 {
			k, err := client.RandomKey(ctx).Result()
			if err != nil {
				t.Fatalf("RANDOMKEY at %s: %v", n.id, err)
			}
			if owner := c.owner(k); owner != n {
				t.Fatalf("RANDOMKEY at %s answered %q, which %s owns", n.id, k, owner.id)
			}
			seen[k] = true
		}
		if len(seen) < 5 {
			t.Errorf("RANDOMKEY at %s drew only %d distinct keys in 50 calls: %v", n.id, len(seen), seen)
		}
		app := redis.NewClient(&redis.Options{Addr: n.RESPAddr(), Protocol: 2, Username: "app", Password: "pw"})
		defer app.Close()
		for range 10 {
			k, err := app.RandomKey(ctx).Result()
			if errors.Is(err, redis.Nil) {
				break // this node owns no app: key
			}
			if err != nil || !strings.HasPrefix(k, "app:") || c.owner(k) != n {
				t.Fatalf("RANDOMKEY as app at %s = %q, %v; want an app: key it owns", n.id, k, err)
			}
		}
	}
}

// TestRESPMemoryUsage checks that MEMORY USAGE answers, at a key's owner, what the node counts for the key
// against its memory bound: more for a larger value and for more fields, the same whatever SAMPLES says,
// null for a missing key, and a redirect at another node.
func TestRESPMemoryUsage(t *testing.T) {
	c := startRESPCluster(t, 3, nil)
	ctx := bg(t)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.node(0).RESPAddr()}})
	defer client.Close()
	usage := func(key string, samples ...int) int64 {
		t.Helper()
		n, err := client.MemoryUsage(ctx, key, samples...).Result()
		if err != nil {
			t.Fatalf("MEMORY USAGE %s: %v", key, err)
		}
		return n
	}
	client.Set(ctx, "small", "v", 0)
	client.Set(ctx, "large", strings.Repeat("v", 10_000), 0)
	client.HSet(ctx, "h1", "f0", "v")
	for i := range 100 {
		client.HSet(ctx, "h100", fmt.Sprintf("f%d", i), "v")
	}
	small, large := usage("small"), usage("large")
	if small <= 0 || large < small+10_000 || large > small+12_000 {
		t.Errorf("a 1-byte value takes %d bytes and a 10,000-byte one %d; want the second about 10,000 more", small, large)
	}
	if h1, h100 := usage("h1"), usage("h100"); h100 < h1+99*2 {
		t.Errorf("a hash of 1 field takes %d bytes, of 100 fields %d", h1, h100)
	}
	if got := usage("large", 0); got != large {
		t.Errorf("with SAMPLES 0: %d, without: %d", got, large)
	}
	if _, err := client.MemoryUsage(ctx, "missing").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("MEMORY USAGE of a missing key: %v, want null", err)
	}
	var other *Node
	for _, n := range c.live() {
		if n != c.owner("large") {
			other = n
		}
	}
	direct := redis.NewClient(&redis.Options{Addr: other.RESPAddr()})
	defer direct.Close()
	if _, err := direct.MemoryUsage(ctx, "large").Result(); err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
		t.Errorf("MEMORY USAGE at a node not owning the key: %v, want MOVED", err)
	}
}
