package main

import (
	"bufio"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperDrain is how long the "drain" stand-in takes to exit after SIGTERM, as a server leaving would.
const helperDrain = 200 * time.Millisecond

// TestLeaveHelperProcess is the server stand-in the leave tests start: the test binary run again with
// ZARIS_LEAVE_HELPER=drain (exits helperDrain after SIGTERM) or ignore (ignores SIGTERM).
func TestLeaveHelperProcess(t *testing.T) {
	switch os.Getenv("ZARIS_LEAVE_HELPER") {
	case "":
		t.Skip("a stand-in the leave tests start")
	case "ignore":
		signal.Ignore(syscall.SIGTERM)
	case "drain":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() {
			<-term
			time.Sleep(helperDrain)
			os.Exit(0)
		}()
	}
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
	os.Exit(3)
}

// startHelper starts a stand-in in mode and returns it once its signal handling is set, with a channel
// closed when it has exited and been reaped.
func startHelper(t *testing.T, mode string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaveHelperProcess$")
	cmd.Env = append(os.Environ(), "ZARIS_LEAVE_HELPER="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	for r := bufio.NewReader(out); ; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stand-in %s: %v before it was ready", mode, err)
		}
		if strings.TrimSpace(line) == "ready" {
			break
		}
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	return cmd, exited
}

func TestLeaveWaitsForTheServerToExit(t *testing.T) {
	cmd, exited := startHelper(t, "drain")
	start := time.Now()
	if code := runLeave([]string{"--pid", strconv.Itoa(cmd.Process.Pid), "--timeout", "10s"}); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
	if took := time.Since(start); took < helperDrain {
		t.Fatalf("returned after %v, before the process could have exited (%v after SIGTERM)", took, helperDrain)
	}
	select {
	case <-exited:
	case <-time.After(time.Second):
		t.Fatal("returned 0 while the process still runs")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the process exited with %d, want 0 from its SIGTERM handler", code)
	}
}

func TestLeaveReportsTimeout(t *testing.T) {
	cmd, exited := startHelper(t, "ignore")
	start := time.Now()
	if code := runLeave([]string{"--pid", strconv.Itoa(cmd.Process.Pid), "--timeout", "300ms"}); code != 1 {
		t.Fatalf("exit status %d, want 1 for a process that outlives --timeout", code)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before --timeout 300ms", took)
	}
	select {
	case <-exited:
		t.Fatal("the process exited; it should have ignored SIGTERM")
	default:
	}
}

func TestLeaveOfAnExitedProcessSucceeds(t *testing.T) {
	cmd, exited := startHelper(t, "ignore")
	cmd.Process.Kill()
	<-exited
	if code := runLeave([]string{"--pid", strconv.Itoa(cmd.Process.Pid), "--timeout", "1s"}); code != 0 {
		t.Fatalf("exit status %d, want 0: the process is gone", code)
	}
}

func TestLeaveFlags(t *testing.T) {
	o, err := parseLeave(nil)
	if err != nil || o.pid != 1 || o.timeout != time.Minute {
		t.Fatalf("defaults: %+v, %v; want pid 1, timeout 1m", o, err)
	}
	for _, args := range [][]string{{"--pid", "0"}, {"--pid", "-1"}, {"--timeout", "soon"}, {"--pidfile", "x"}, {"extra"}} {
		if _, err := parseLeave(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	if code := runLeave([]string{"--timeout", "soon"}); code != 2 {
		t.Fatalf("bad flag: exit status %d, want 2", code)
	}
}
