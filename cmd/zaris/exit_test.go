package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/ports"
)

// TestServerHelperProcess is a zaris server the exit tests start: the test binary run again with
// ZARIS_SERVER_HELPER=1 runs main with the arguments after "--".
func TestServerHelperProcess(t *testing.T) {
	if os.Getenv("ZARIS_SERVER_HELPER") == "" {
		t.Skip("a server the exit tests start")
	}
	for i, a := range os.Args {
		if a == "--" {
			os.Args = append([]string{"zaris"}, os.Args[i+1:]...)
			break
		}
	}
	main()
	os.Exit(0)
}

// testServer is a server process started by startServer.
type testServer struct {
	cmd    *exec.Cmd
	resp   string
	stderr *strings.Builder
	exited chan struct{}
}

// startServer starts a server named name on the ports given, with args added, its log kept in memory.
func startServer(t *testing.T, name string, p []int, args ...string) *testServer {
	t.Helper()
	addr := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	all := append([]string{"-test.run=^TestServerHelperProcess$", "--", "--name", name, "--gossip-addr", addr(p[0]),
		"--data-addr", addr(p[1]), "--resp-addr", addr(p[2]), "--timing", "local", "--log-level", "info"}, args...)
	cmd := exec.Command(os.Args[0], all...)
	cmd.Env = append(os.Environ(), "ZARIS_SERVER_HELPER=1")
	s := &testServer{cmd: cmd, resp: addr(p[2]), stderr: &strings.Builder{}, exited: make(chan struct{})}
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); <-s.exited })
	go func() {
		io.Copy(s.stderr, out)
		cmd.Wait()
		close(s.exited)
	}()
	return s
}

// awaitClusterOK waits until s answers CLUSTER INFO with cluster_state:ok.
func (s *testServer) awaitClusterOK(t *testing.T, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !clusterStateOK(s.resp) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not serving within %v", s.resp, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func clusterStateOK(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	io.WriteString(conn, "*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n")
	for r := bufio.NewReader(conn); ; {
		line, err := r.ReadString('\n')
		if strings.HasPrefix(line, "cluster_state:") {
			return strings.TrimSpace(line) == "cluster_state:ok"
		}
		if err != nil {
			return false
		}
	}
}

// TestUndrainedLeaveExitsNonZero runs two servers, replication factor 1, kills one, and SIGTERMs the
// other: with no quorum left no leader can move its partitions, of which it holds the only copy. It must
// exit 1 once --leave-timeout has passed, saying why.
func TestUndrainedLeaveExitsNonZero(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two server processes")
	}
	p, err := ports.Free(6)
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"--rf", "1", "--bootstrap-expect", "2", "--leave-timeout", "1s"}
	first := startServer(t, "exit-a", p[:3], common...)
	second := startServer(t, "exit-b", p[3:], append(common, "--join", net.JoinHostPort("127.0.0.1", strconv.Itoa(p[0])))...)
	first.awaitClusterOK(t, 30*time.Second)
	second.awaitClusterOK(t, 30*time.Second)
	second.cmd.Process.Kill()
	<-second.exited

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	first.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-first.exited:
	case <-ctx.Done():
		t.Fatalf("still running 20s after SIGTERM with --leave-timeout 1s")
	}
	code := first.cmd.ProcessState.ExitCode()
	log := first.stderr.String()
	if code != 1 {
		t.Fatalf("exit status %d after %v, want 1 for a leave that could not drain; log:\n%s", code, time.Since(start), log)
	}
	for _, want := range []string{"leave did not finish within --leave-timeout 1s", "only live copy"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the log does not say %q:\n%s", want, log)
		}
	}
}
