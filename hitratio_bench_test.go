package zaris

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaris-go/zaris/internal/ports"
)

// BenchmarkHitRatio replays one cache-aside trace (GET, and SET of a 64-byte value on a miss) against a
// cmd/zaris process and a redis-server, side by side at the same maxmemory and policy: keys drawn from 1M
// by a Zipfian law (theta 0.99), and, in the scan variants, one read in ten of a key never read before, as
// a sequential scan makes. It reports the hit ratio of the Zipfian reads after a warm-up, the keys held,
// and each server's resident memory. It runs the whole trace whatever b.N: use -benchtime 1x.
//
//	go test -run '^$' -bench BenchmarkHitRatio -benchtime 1x
func BenchmarkHitRatio(b *testing.B) {
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		b.Skip("redis-server is not installed")
	}
	zarisBin := filepath.Join(b.TempDir(), "zaris")
	if out, err := exec.Command("go", "build", "-o", zarisBin, "./cmd/zaris").CombinedOutput(); err != nil {
		b.Fatalf("build cmd/zaris: %v\n%s", err, out)
	}
	const maxMemory = "24mb"
	for _, scans := range []bool{false, true} {
		for _, policy := range []string{EvictionAllKeysLRU, EvictionAllKeysLFU} {
			for _, system := range []string{"redis", "zaris"} {
				name := fmt.Sprintf("%s/%s/scans=%v", policy, system, scans)
				b.Run(name, func(b *testing.B) {
					var srv *exec.Cmd
					var addr string
					if system == "redis" {
						srv, addr = startRedisProcess(b, redisBin, "--maxmemory", maxMemory, "--maxmemory-policy", policy)
					} else {
						srv, addr = startZarisProcess(b, zarisBin, "--maxmemory", maxMemory, "--maxmemory-policy", policy)
					}
					r := replayCacheAside(b, addr, scans)
					rss, peak := processMemory(srv.Process.Pid)
					b.ReportMetric(r.hitRatio, "hit-ratio")
					b.ReportMetric(float64(r.keys), "keys-held")
					b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
					b.ReportMetric(float64(peak)/(1<<20), "peak-rss-MiB")
					b.ReportMetric(r.opsPerSec, "requests/s")
				})
			}
		}
	}
}

type cacheAsideResult struct {
	hitRatio  float64
	keys      int64
	opsPerSec float64
}

// replayCacheAside runs the trace against addr with 16 clients and returns the hit ratio of the Zipfian
// reads of its second half.
func replayCacheAside(b *testing.B, addr string, scans bool) cacheAsideResult {
	const keys, requests, clients = 1_000_000, 2_000_000, 16
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: clients, ReadTimeout: 10 * time.Second})
	defer rdb.Close()
	z := newZipfian(keys, 0.99)
	value := []byte(strings.Repeat("v", 64))
	var next, scanned, hits, counted atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 99))
			for {
				i := next.Add(1)
				if i > requests {
					return
				}
				zipf := !scans || rng.IntN(10) != 0
				key := fmt.Sprintf("scan:%d", scanned.Add(1))
				if zipf {
					key = fmt.Sprintf("key:%d", z.next(rng))
				}
				_, err := rdb.Get(ctx, key).Result()
				hit := err == nil
				switch {
				case err == redis.Nil:
					if err := rdb.Set(ctx, key, value, 0).Err(); err != nil {
						b.Errorf("SET %s: %v", key, err)
						return
					}
				case err != nil:
					b.Errorf("GET %s: %v", key, err)
					return
				}
				if zipf && i > requests/2 {
					counted.Add(1)
					if hit {
						hits.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	held, err := rdb.DBSize(ctx).Result()
	if err != nil {
		b.Fatalf("DBSIZE: %v", err)
	}
	return cacheAsideResult{hitRatio: float64(hits.Load()) / float64(counted.Load()), keys: held,
		opsPerSec: float64(requests) / elapsed.Seconds()}
}

// zipfian draws ranks in [0, n) with P(rank i) proportional to 1/(i+1)^theta, for theta below 1 too
// (Gray et al., "Quickly generating billion-record synthetic databases").
type zipfian struct {
	n                         int
	theta, alpha, zetan, eta  float64
	secondBound, firstOverall float64
}

func newZipfian(n int, theta float64) *zipfian {
	zeta := func(n int) float64 {
		s := 0.0
		for i := 1; i <= n; i++ {
			s += 1 / math.Pow(float64(i), theta)
		}
		return s
	}
	zetan, zeta2 := zeta(n), zeta(2)
	return &zipfian{n: n, theta: theta, alpha: 1 / (1 - theta), zetan: zetan,
		eta:         (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/zetan),
		secondBound: 1 + math.Pow(0.5, theta)}
}

func (z *zipfian) next(rng *rand.Rand) int {
	uz := rng.Float64() * z.zetan
	switch {
	case uz < 1:
		return 0
	case uz < z.secondBound:
		return 1
	}
	return min(z.n-1, int(float64(z.n)*math.Pow(z.eta*uz/z.zetan-z.eta+1, z.alpha)))
}

// startRedisProcess runs redis-server, memory only, with args, and returns it and its address.
func startRedisProcess(b *testing.B, bin string, args ...string) (*exec.Cmd, string) {
	p, err := ports.Free(1)
	if err != nil {
		b.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p[0]))
	argv := append([]string{"--port", strconv.Itoa(p[0]), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", b.TempDir()}, args...)
	return startServerProcess(b, exec.Command(bin, argv...), addr), addr
}

// startZarisProcess runs a one-node cmd/zaris, memory only, with args, and returns it and its RESP address.
func startZarisProcess(b *testing.B, bin string, args ...string) (*exec.Cmd, string) {
	p, err := ports.Free(3)
	if err != nil {
		b.Fatal(err)
	}
	at := func(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p[i])) }
	argv := append([]string{"--name", "hitratio", "--gossip-addr", at(0), "--data-addr", at(1), "--resp-addr", at(2),
		"--timing", "local", "--log-level", "warn"}, args...)
	return startServerProcess(b, exec.Command(bin, argv...), at(2)), at(2)
}

func startServerProcess(b *testing.B, cmd *exec.Cmd, addr string) *exec.Cmd {
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := rdb.Set(context.Background(), "ready", "1", 0).Err()
		if err == nil {
			rdb.Del(context.Background(), "ready")
			return cmd
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s not serving at %s: %v", cmd.Path, addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processMemory returns a process's resident memory and its peak, in bytes, from /proc.
func processMemory(pid int) (rss, peak int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}
