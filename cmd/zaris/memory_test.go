package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaris-go/zaris/internal/ports"
)

// residentBase is what a node's resident memory may take beyond --maxmemory and 15% of it: the runtime,
// the control plane, and the buffers of the clients flooding it.
const residentBase = 96 << 20

// TestMaxMemoryBoundsResidentMemory (ZARIS_RSS=1) floods one zaris process started with --maxmemory 16mb
// and allkeys-lru, through RESP, with ten times that of strings and ten times that of each kind of
// collection: the process keeps serving, evicts, and its peak resident memory stays within --maxmemory
// plus 15% plus residentBase. The server is a build of its own, without the race detector.
func TestMaxMemoryBoundsResidentMemory(t *testing.T) {
	if os.Getenv("ZARIS_RSS") == "" {
		t.Skip("set ZARIS_RSS=1 to flood a process past --maxmemory and measure its resident memory")
	}
	const maxMemory = 16 << 20
	bin := filepath.Join(t.TempDir(), "zaris")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	p, err := ports.Free(3)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(p[i]) }
	cmd := exec.Command(bin, "--name", "rss", "--gossip-addr", addr(0), "--data-addr", addr(1), "--resp-addr", addr(2),
		"--timing", "local", "--log-level", "warn", "--maxmemory", "16mb", "--maxmemory-policy", "allkeys-lru")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	redis.SetLogger(quietRedis{})
	rdb := redis.NewClient(&redis.Options{Addr: addr(2), ReadTimeout: 30 * time.Second})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for rdb.Ping(ctx).Err() != nil {
		if ctx.Err() != nil {
			t.Fatal("the server never answered")
		}
		time.Sleep(20 * time.Millisecond)
	}

	kib := strings.Repeat("x", 1024)
	floods := []struct {
		name string
		cmd  func(p redis.Pipeliner, i int)
	}{
		{"SET of 4 KiB", func(p redis.Pipeliner, i int) { p.Set(ctx, fmt.Sprintf("s:%d", i), strings.Repeat(kib, 4), 0) }},
		{"HSET of 1 KiB", func(p redis.Pipeliner, i int) { p.HSet(ctx, fmt.Sprintf("h:%d", i%4000), strconv.Itoa(i), kib) }},
		{"RPUSH of 1 KiB", func(p redis.Pipeliner, i int) { p.RPush(ctx, fmt.Sprintf("l:%d", i%4000), kib) }},
		{"SADD of 1 KiB", func(p redis.Pipeliner, i int) { p.SAdd(ctx, fmt.Sprintf("e:%d", i%4000), strconv.Itoa(i)+kib) }},
		{"ZADD of 1 KiB", func(p redis.Pipeliner, i int) {
			p.ZAdd(ctx, fmt.Sprintf("z:%d", i%4000), redis.Z{Score: float64(i), Member: strconv.Itoa(i) + kib})
		}},
	}
	for _, f := range floods {
		writes := 10 * maxMemory / 1024
		if strings.HasPrefix(f.name, "SET") {
			writes /= 4
		}
		for start := 0; start < writes; start += 200 {
			pipe := rdb.Pipeline()
			for i := start; i < min(start+200, writes); i++ {
				f.cmd(pipe, i)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatalf("%s flood: %v", f.name, err)
			}
		}
		peak := peakResident(t, cmd.Process.Pid)
		t.Logf("after a %s flood of %d MiB: peak resident %d MiB", f.name, 10*maxMemory>>20, peak>>20)
		if bound := int64(maxMemory + maxMemory*15/100 + residentBase); peak > bound {
			t.Fatalf("after a %s flood, peak resident memory %d MiB, over the bound %d MiB", f.name, peak>>20, bound>>20)
		}
	}
	info, err := rdb.Info(ctx, "stats").Result()
	if err != nil || !strings.Contains(info, "evicted_keys:") || strings.Contains(info, "evicted_keys:0\r") {
		t.Fatalf("INFO stats after the floods: %v\n%s", err, info)
	}
}

// peakResident reads a process's peak resident memory from /proc.
func peakResident(t *testing.T, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}
