package zaris

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/zaris-go/zaris/durability"
	"github.com/zaris-go/zaris/internal/killfs"
)

// killableCluster starts three nodes with replication factor rf, each with a data dir on a file system that
// sw freezes: killing it is, for the disks, the instant every process is SIGKILLed.
func killableCluster(t *testing.T, rf int, level DiskDurability, sw *killfs.Switch) *testCluster {
	base := t.TempDir()
	return startCluster(t, 3, replicated(rf, func(cfg *Config) {
		cfg.WriteConcern = Sync
		cfg.DataDir = filepath.Join(base, cfg.Name)
		cfg.DiskDurability = level
		cfg.hooks.diskFS = killfs.FS(vfs.Default, sw)
		cfg.FailoverTimeout = time.Second
	}))
}

// writeUntilKilled runs Sync writes of new keys through every node until at least minAcked were
// acknowledged, kills the disks at that instant, and returns the keys acknowledged before the kill. A
// write counts only if its acknowledgement arrived before the kill: afterwards, disks no longer record.
func writeUntilKilled(t *testing.T, c *testCluster, sw *killfs.Switch, minAcked int) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(bg(t))
	var (
		mu     sync.Mutex
		acked  []string
		wg     sync.WaitGroup
		enough = make(chan struct{})
		once   sync.Once
	)
	for w, n := range c.live() {
		for lane := 0; lane < 4; lane++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					key := fmt.Sprintf("w%d-%d-%d", w, lane, i)
					if err := n.Put(ctx, key, []byte("value of "+key)); err != nil || sw.Killed() {
						continue
					}
					mu.Lock()
					acked = append(acked, key)
					if len(acked) >= minAcked {
						once.Do(func() { close(enough) })
					}
					mu.Unlock()
				}
			}()
		}
	}
	select {
	case <-enough:
	case <-ctx.Done():
	}
	sw.Kill()
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < minAcked {
		t.Fatalf("only %d writes acknowledged before the test ran out of time", len(acked))
	}
	return acked
}

// keysOnDisk returns every key that a put op or a segment snapshot in the op-log store under dataDir holds.
func keysOnDisk(t *testing.T, dataDir string) map[string]bool {
	t.Helper()
	s, err := durability.OpenPebble(filepath.Join(dataDir, "oplog"), durability.PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	segs, err := s.Segments()
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, seg := range segs {
		snap, _, err := s.LoadSnapshot(seg)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range snap.Entries {
			keys[e.Key] = true
		}
		ops, err := s.Ops(seg, snap.Revision, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			keys[op.Key] = op.Kind == durability.OpPut
		}
	}
	return keys
}

// TestKilledDisksHoldAcknowledgedWrites kills every node's disk at one instant under a Sync write load and
// counts the writes acknowledged before the kill that no disk holds. Under DiskWritten and DiskSynced there
// must be none, with one copy or two; under DiskBehind, which writes the disk behind the acknowledgement,
// there must be some: the count is able to see a loss. (With one copy, the newest acknowledged writes are
// in the one process's buffers at the kill; with two, a loss needs both copies' buffers to hold it.)
func TestKilledDisksHoldAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level    DiskDurability
		rf       int
		wantLoss bool
		minAcked int
	}{{DiskWritten, 2, false, 600}, {DiskSynced, 2, false, 150}, {DiskWritten, 1, false, 600}, {DiskBehind, 1, true, 600}} {
		t.Run(fmt.Sprintf("%s/rf%d", tc.level, tc.rf), func(t *testing.T) {
			var sw killfs.Switch
			c := killableCluster(t, tc.rf, tc.level, &sw)
			acked := writeUntilKilled(t, c, &sw, tc.minAcked)
			dirs := make([]string, 0, 3)
			for i := 0; i < 3; i++ {
				dirs = append(dirs, c.cfgs[i].DataDir)
				c.kill(i)
			}
			onDisk := map[string]bool{}
			for _, dir := range dirs {
				for k := range keysOnDisk(t, dir) {
					onDisk[k] = true
				}
			}
			var lost []string
			for _, k := range acked {
				if !onDisk[k] {
					lost = append(lost, k)
				}
			}
			t.Logf("%s: %d writes acknowledged before the kill, %d on no disk", tc.level, len(acked), len(lost))
			if got := len(lost) > 0; got != tc.wantLoss {
				t.Fatalf("%s: %d of %d acknowledged writes on no disk (first: %.5q), want loss %v", tc.level, len(lost), len(acked), lost, tc.wantLoss)
			}
		})
	}
}

// TestFullRestart kills every node of a 3-node RF 2 cluster at one instant under a Sync write load, starts
// them all again from their data dirs, and checks that every slot takes writes again and that every write
// acknowledged before the kill reads back.
func TestFullRestart(t *testing.T) {
	t.Parallel()
	var sw killfs.Switch
	c := killableCluster(t, 2, DiskWritten, &sw)
	epochBefore := c.currentMap().Runtime[0].Epoch
	acked := writeUntilKilled(t, c, &sw, 600)
	for i := 0; i < 3; i++ {
		c.kill(i)
	}
	for i := 0; i < 3; i++ {
		c.cfgs[i].hooks.diskFS = nil // the disks as the kill left them
	}
	var lastStart time.Time
	for i := 0; i < 3; i++ {
		c.restart(i)
		lastStart = time.Now()
	}
	n := c.node(0)
	ctx := bg(t)
	layout := n.ClusterMap().Layout()
	writable := func(p int) bool {
		return n.Put(ctx, keyInPartition(layout, "after", p), []byte("x")) == nil
	}
	for p := 0; p < layout.Partitions; p++ {
		waitFor(t, 20*time.Second, fmt.Sprintf("partition %d writable after the full restart", p), func() bool { return writable(p) })
	}
	t.Logf("every partition writable %v after the last node started", time.Since(lastStart).Round(time.Millisecond))
	if m := c.currentMap(); m.Runtime[0].Epoch <= epochBefore {
		t.Fatalf("partition 0 at epoch %d after the restart, %d before: epochs went back", m.Runtime[0].Epoch, epochBefore)
	}
	var lost []string
	for _, k := range acked {
		// A partition decided again after the restart refuses requests for a moment, and a caller whose map
		// trails the decisions may run out of routing retries: neither is a loss.
		var v []byte
		var err error
		waitFor(t, 10*time.Second, "a read of "+k+" that is neither refused nor out of routing retries", func() bool {
			v, err = c.node(len(k)%3).Get(ctx, k)
			return !errors.Is(err, ErrOwnershipChanging) && !errors.Is(err, ErrRetriesExhausted)
		})
		if errors.Is(err, ErrNotFound) || err == nil && string(v) != "value of "+k {
			lost = append(lost, k)
		} else if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged writes lost in the full restart (first: %.5q)", len(lost), len(acked), lost)
	}
	t.Logf("%d acknowledged writes read back", len(acked))
}

// TestRollingRestart restarts every node of a 3-node RF 2 cluster in turn (killed, started again, the
// cluster waited Healthy) under a writer on every node, memory-only and with data dirs. No read may be
// stale and every acknowledged write must read back at the end; the slowest acknowledged write is the
// longest stall a writer saw.
func TestRollingRestart(t *testing.T) {
	longScenario(t)
	t.Parallel()
	for _, onDisk := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "disk"}[onDisk], func(t *testing.T) {
			base := t.TempDir()
			c := startCluster(t, 3, replicated(2, func(cfg *Config) {
				if onDisk {
					cfg.DataDir = filepath.Join(base, cfg.Name)
				}
				cfg.FailoverTimeout = 500 * time.Millisecond
			}))
			ws := &writerSet{t: t, keys: 40}
			byNode := map[int]*writer{}
			for i := range 3 {
				byNode[i] = ws.start(c.node(i))
			}
			for i := range 3 {
				ws.stop(byNode[i])
				c.kill(i)
				n := c.restart(i)
				byNode[i] = ws.start(n)
				c.waitRecorded(n, 30*time.Second)
				c.waitHealthy(30 * time.Second)
			}
			for i := range 3 {
				ws.stop(byNode[i])
			}
			var writes int
			var worst time.Duration
			for _, w := range ws.writers() {
				writes, worst = writes+w.writes, max(worst, w.worstWrite)
				w.assertReadBack(t, c.live())
			}
			if writes == 0 {
				t.Fatal("no write acknowledged during the rolling restart")
			}
			t.Logf("%d acknowledged writes over 3 restarts, the slowest acknowledged after %v", writes, worst)
		})
	}
}

// TestLeaderDecidesOnlyOnACaughtUpMap restarts every node of a cluster with data dirs while each holds
// its control plane's apply: a new leader's map is then what it reloaded, older than what the cluster
// committed. The leader must decide nothing on it: no decision is even attempted while the apply is held,
// though its control loop runs. Released, it decides every partition again (each owner restarted), so
// no partition keeps the epoch it had, and every partition takes writes.
func TestLeaderDecidesOnlyOnACaughtUpMap(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	var held atomic.Bool
	release := make(chan struct{})
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { held.Store(false); close(release) }) }
	var attempted atomic.Int64
	c := startCluster(t, 3, replicated(2, func(cfg *Config) {
		cfg.DataDir = filepath.Join(base, cfg.Name)
		cfg.hooks.beforeApply = func(*ClusterMap) {
			if held.Load() {
				<-release
			}
		}
		cfg.hooks.beforeCommitDecision = func(decision) {
			if held.Load() {
				attempted.Add(1)
			}
		}
	}))
	t.Cleanup(unhold) // before the cluster stops: a held apply would keep raft from shutting down
	before := c.currentMap()
	for i := range 3 {
		c.kill(i)
	}
	held.Store(true)
	for i := range 3 {
		c.restart(i)
	}
	leader := c.leaderNode()
	ticks := leader.ctl.controlTicks.Load()
	waitFor(t, 20*time.Second, "three control rounds of the new leader, or a decision", func() bool {
		leader.ctl.wakeControl()
		return leader.ctl.controlTicks.Load() >= ticks+3 || attempted.Load() > 0
	})
	if n := attempted.Load(); n > 0 || !leader.IsLeader() {
		t.Fatalf("leader %s attempted %d decisions on a map behind the committed one (still leader: %v)",
			leader.id, n, leader.IsLeader())
	}
	unhold()

	waitFor(t, 30*time.Second, "every partition decided again under a new epoch", func() bool {
		m := c.currentMap()
		for p, st := range m.Runtime {
			if st.Epoch <= before.Runtime[p].Epoch || st.Owner == "" {
				return false
			}
		}
		return true
	})
	ctx := bg(t)
	layout := before.Layout()
	for p := range layout.Partitions {
		key := keyInPartition(layout, "after", p)
		waitFor(t, 20*time.Second, "partition "+fmt.Sprint(p)+" writable", func() bool {
			return c.node(p%3).Put(ctx, key, []byte("x")) == nil
		})
	}
}
