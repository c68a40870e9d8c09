package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"
)

// leavePoll is how often `zaris leave` checks whether the server has exited.
const leavePoll = 50 * time.Millisecond

// leaveOptions are the flags of `zaris leave`.
type leaveOptions struct {
	pid     int
	timeout time.Duration
}

// parseLeave reads the flags of `zaris leave`.
func parseLeave(args []string) (leaveOptions, error) {
	var o leaveOptions
	fs := flag.NewFlagSet("zaris leave", flag.ContinueOnError)
	fs.IntVar(&o.pid, "pid", 1, "process id of the server (1: the server is its container's first process)")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait for the server to leave the cluster and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.pid < 1 {
		return o, fmt.Errorf("--pid %d: want a process id", o.pid)
	}
	return o, nil
}

// runLeave is `zaris leave`, a container's pre-stop hook where there is no shell: it sends SIGTERM to the
// server, which then hands its partitions to the other nodes and exits, and waits for that exit. It
// returns the exit status: 0 once the server is gone, 1 when it outlives --timeout, 2 on bad flags.
func runLeave(args []string) int {
	o, err := parseLeave(args)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "zaris leave:", err)
		}
		return 2
	}
	if err := terminateAndWait(o.pid, o.timeout); err != nil {
		fmt.Fprintln(os.Stderr, "zaris leave:", err)
		return 1
	}
	return 0
}

// terminateAndWait sends SIGTERM to pid and polls it with signal 0 until it no longer exists or timeout
// passes. A process already gone counts as left.
func terminateAndWait(pid int, timeout time.Duration) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	defer p.Release()
	if err := p.Signal(syscall.SIGTERM); errors.Is(err, os.ErrProcessDone) {
		return nil
	} else if err != nil {
		return fmt.Errorf("SIGTERM to process %d: %w", pid, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		if err := p.Signal(syscall.Signal(0)); errors.Is(err, os.ErrProcessDone) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still runs %s after SIGTERM", pid, timeout)
		}
		time.Sleep(leavePoll)
	}
}
