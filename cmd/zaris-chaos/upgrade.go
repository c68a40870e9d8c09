package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zaris-go/zaris"
)

// serverBuild is a build of the server: its binary and the flags it needs beyond the cluster's.
type serverBuild struct {
	bin  string
	args []string
}

// earlierBuild is the build a rolling upgrade starts from: the binary at from, or this build's binary bin
// speaking the previous protocol.
func earlierBuild(bin, from string) serverBuild {
	if from != "" {
		return serverBuild{bin: from}
	}
	return serverBuild{bin: bin, args: []string{"--previous-protocol"}}
}

func (b serverBuild) describe() string {
	return strings.TrimSpace(b.bin + " " + strings.Join(b.args, " "))
}

// upgradeStep is one restart of a rolling upgrade: the server, and the build it starts again on.
type upgradeStep struct {
	s       *server
	earlier bool
}

// upgradePlan upgrades servers one at a time: the first is upgraded, rolled back to the earlier build and
// upgraded again before the others follow, so that the run crosses both directions while a rollback is
// still possible.
func upgradePlan(servers []*server) []upgradeStep {
	if len(servers) == 0 {
		return nil
	}
	plan := []upgradeStep{{servers[0], false}, {servers[0], true}, {servers[0], false}}
	for _, s := range servers[1:] {
		plan = append(plan, upgradeStep{s, false})
	}
	return plan
}

// upgradeWatch is what a rolling upgrade saw of the cluster's protocol: the protocol it began at, how many
// times it was seen held there before the last server was upgraded, and whether and when it rose after.
type upgradeWatch struct {
	from  uint16
	held  int
	early []string // the restarts before which the protocol had already risen
	// refused counts the backups, a request of the newer protocol, refused before the restarts as the
	// cluster had not risen to it; allowed says one went through once it had.
	refused int
	allowed bool
	rose    bool
	to      uint16
	riseAt  time.Duration // from the last server's stop
	riseErr error
}

// runUpgrade rolls every server from the earlier build to this one as upgradePlan says, each restart as
// -nemesis rolling-restart makes it. Before each it checks that the cluster's protocol has not risen; after
// the last it waits for the rise.
func (n *nemesis) runUpgrade(ctx, faults context.Context) {
	w := &upgradeWatch{from: n.lite.ClusterMap().Protocol}
	n.upgrade = w
	plan := upgradePlan(shuffled(n.rng, n.c.list()))
	var last time.Time
	for _, step := range plan {
		if faults.Err() != nil {
			return
		}
		if p := n.lite.ClusterMap().Protocol; p != w.from {
			w.early = append(w.early, fmt.Sprintf("%s (protocol %d)", step.s.name, p))
		} else {
			w.held++
		}
		if _, err := n.lite.Backup(ctx, filepath.Join(os.TempDir(), "zaris-chaos-never-written")); errors.Is(err, zaris.ErrIncompatibleVersion) {
			w.refused++
		} else {
			w.early = append(w.early, fmt.Sprintf("a backup before restarting %s: %v", step.s.name, err))
		}
		n.c.setEarlier(step.s, step.earlier)
		last = time.Now()
		n.step("%s %s", map[bool]string{false: "upgrade", true: "roll back"}[step.earlier], step.s.name)
		n.rollOver(ctx, faults, step.s)
	}
	wait, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	for n.lite.ClusterMap().Protocol == w.from {
		select {
		case <-wait.Done():
			w.riseErr = fmt.Errorf("the cluster's protocol stayed %d for %v after the last upgrade", w.from, settleBound)
			return
		case <-time.After(servePoll):
		}
	}
	w.rose, w.to, w.riseAt = true, n.lite.ClusterMap().Protocol, time.Since(last)
	n.step("the cluster's protocol rose from %d to %d", w.from, w.to)
	dir, err := os.MkdirTemp("", "zaris-chaos-backup-")
	if err == nil {
		defer os.RemoveAll(dir)
		err = backupSettled(wait, n.lite, dir)
	}
	if err != nil {
		w.riseErr = fmt.Errorf("a backup once the cluster's protocol rose to %d: %w", w.to, err)
		return
	}
	w.allowed = true
}

// noteUpgrade reports the rolling upgrade's protocol checks, and whether they passed.
func (h *harness) noteUpgrade() bool {
	w := h.nem.upgrade
	switch {
	case w == nil:
		h.failures = append(h.failures, "-upgrade: the upgrade did not run")
		return false
	case len(w.early) > 0:
		h.failures = append(h.failures, fmt.Sprintf("the cluster's protocol rose from %d before the last upgrade, seen before restarting %v", w.from, w.early))
		return false
	case w.riseErr != nil:
		h.failures = append(h.failures, w.riseErr.Error())
		return false
	case !w.rose:
		h.failures = append(h.failures, fmt.Sprintf("the upgrade did not finish within -duration (the cluster's protocol held at %d before %d restarts)", w.from, w.held))
		return false
	}
	h.notes = append(h.notes, fmt.Sprintf("upgrade: the cluster's protocol held at %d before each of %d restarts, "+
		"and rose to %d %v after the last server was stopped for its upgrade; backups, new in protocol %d, "+
		"refused before each of %d restarts and taken once it rose", w.from, w.held, w.to, w.riseAt.Round(time.Millisecond),
		w.to, w.refused))
	return true
}

// setEarlier makes the next process of s run the earlier build, or this one.
func (c *cluster) setEarlier(s *server, earlier bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.earlier = earlier
}

// backupSettled backs the cluster up into a directory under dir, again while a partition changes owner
// (the rebalancing after the last restart fails a backup), until ctx ends.
func backupSettled(ctx context.Context, lite *zaris.Node, dir string) error {
	for i := 0; ; i++ {
		_, err := lite.Backup(ctx, filepath.Join(dir, fmt.Sprint(i)))
		if !errors.Is(err, zaris.ErrOwnershipChanging) && !errors.Is(err, zaris.ErrPartitionUnavailable) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(servePoll):
		}
	}
}
