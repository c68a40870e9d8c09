package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris"
)

func TestOptionsFromEnvironmentAndFlags(t *testing.T) {
	t.Setenv("ZARIS_NAME", "from-env")
	t.Setenv("ZARIS_RESP_ADDR", "127.0.0.1:7777")
	t.Setenv("ZARIS_BOOTSTRAP_EXPECT", "3")
	o, err := parseOptions([]string{"--resp-addr", "127.0.0.1:8888", "--join", "a:1, b:2", "--timing", "local"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(nil)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case cfg.Name != "from-env", cfg.BootstrapExpect != 3:
		t.Fatalf("environment not applied: %+v", o)
	case cfg.RESPAddr != "127.0.0.1:8888":
		t.Fatalf("the flag should win over the environment: %q", cfg.RESPAddr)
	case len(cfg.Join) != 2 || cfg.Join[1] != "b:2":
		t.Fatalf("join list %q", cfg.Join)
	case cfg.Timing != zaris.LocalTiming():
		t.Fatalf("timing %+v", cfg.Timing)
	case o.leaveTimeout != 10*time.Second:
		t.Fatalf("leave timeout %v", o.leaveTimeout)
	case cfg.DiskDurability != zaris.DiskWritten:
		t.Fatalf("disk durability %v, want written by default", cfg.DiskDurability)
	case cfg.EvictionTimeout != zaris.DefaultConfig().EvictionTimeout:
		t.Fatalf("eviction timeout %v, want the library's default", cfg.EvictionTimeout)
	}
	o, err = parseOptions([]string{"--eviction-timeout", "3s", "--dead-server-timeout", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = o.config(nil); err != nil || cfg.EvictionTimeout != 3*time.Second || cfg.DeadServerTimeout != 2*time.Second {
		t.Fatalf("--eviction-timeout 3s --dead-server-timeout 2s: eviction %v, dead server %v, %v", cfg.EvictionTimeout,
			cfg.DeadServerTimeout, err)
	}
	o, err = parseOptions([]string{"--data-max-conns", "64", "--data-max-requests", "100", "--data-idle-timeout", "5s",
		"--data-read-timeout", "2s", "--data-write-timeout", "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = o.config(nil); err != nil || cfg.DataMaxConns != 64 || cfg.DataMaxRequests != 100 ||
		cfg.DataMaxConnRequests != 100 || cfg.DataIdleTimeout != 5*time.Second || cfg.DataReadTimeout != 2*time.Second ||
		cfg.DataWriteTimeout != 3*time.Second {
		t.Fatalf("data port flags: %+v, %v", cfg, err)
	}
	if o, err = parseOptions([]string{"--disk-durability", "synced"}); err != nil || o.diskDurability != zaris.DiskSynced {
		t.Fatalf("--disk-durability synced: %v, %v", o.diskDurability, err)
	}
	if _, err := parseOptions([]string{"--disk-durability", "fsync"}); err == nil {
		t.Fatal("--disk-durability fsync accepted")
	}
	bad, err := parseOptions([]string{"--timing", "fast"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.config(nil); err == nil {
		t.Fatal("--timing fast accepted")
	}
	t.Setenv("ZARIS_RF", "two")
	if _, err := parseOptions(nil); err == nil {
		t.Fatal("ZARIS_RF=two accepted")
	}
}

// TestSecurityOptions checks that the gossip key comes from the environment and that the TLS files go
// together.
func TestSecurityOptions(t *testing.T) {
	t.Setenv("ZARIS_GOSSIP_KEY", "MDEyMzQ1Njc4OWFiY2RlZg==") // 16 bytes
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.GossipKey) != "0123456789abcdef" || cfg.TLS != nil {
		t.Fatalf("gossip key %q, TLS %v", cfg.GossipKey, cfg.TLS)
	}
	for _, args := range [][]string{{"--tls-cert", "c.pem"}, {"--gossip-key", "not base64!"}, {"--tls-cert", "c", "--tls-key", "k", "--tls-ca", "missing"}} {
		o, err := parseOptions(args)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.config(nil); err == nil {
			t.Fatalf("%q accepted", args)
		}
	}
}

// TestGCHeadroomOption checks that --gc-headroom starts the collector's tuning by default, and that 0 or a
// GOGC in the environment leaves the collector alone.
func TestGCHeadroomOption(t *testing.T) {
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	log := newLogger("error")
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	tuner := o.keepGCHeadroom(log)
	if tuner == nil {
		t.Fatal("no tuning by default")
	}
	tuner.Stop()
	if o, err = parseOptions([]string{"--gc-headroom", "0"}); err != nil || o.keepGCHeadroom(log) != nil {
		t.Fatalf("--gc-headroom 0 tunes the collector (%v)", err)
	}
	t.Setenv("GOGC", "50")
	if o, err = parseOptions(nil); err != nil || o.keepGCHeadroom(log) != nil {
		t.Fatalf("GOGC=50 in the environment, yet the collector is tuned (%v)", err)
	}
}

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct{ maxMemory, want int64 }{
		{0, 0},
		{100 << 20, 115<<20 + memoryLimitBase},
		{1 << 30, 1<<30 + (1<<30)*15/100 + memoryLimitBase},
	} {
		if got := memoryLimit(tc.maxMemory); got != tc.want {
			t.Errorf("memoryLimit(%d) = %d, want %d", tc.maxMemory, got, tc.want)
		}
	}
}

// TestVersionOptions checks --version and --previous-protocol: the first prints the release, protocol and
// data dir format; the second makes the node speak the previous protocol.
func TestVersionOptions(t *testing.T) {
	o, err := parseOptions([]string{"--version"})
	if err != nil || !o.version {
		t.Fatalf("--version: %+v, %v", o.version, err)
	}
	want := fmt.Sprintf("zaris %s (protocol %d, data dir format %d, go", zaris.Version, zaris.ProtocolVersion, zaris.DataDirFormat)
	if line := versionLine(); !strings.HasPrefix(line, want) {
		t.Errorf("version line %q, want it to begin %q", line, want)
	}
	o, err = parseOptions([]string{"--previous-protocol"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := o.config(slog.New(slog.DiscardHandler)); err != nil || !cfg.PreviousProtocol {
		t.Error("--previous-protocol left the config on this release's protocol")
	}
}
