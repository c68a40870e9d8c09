package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/ports"
)

func TestRecoverFlags(t *testing.T) {
	t.Setenv("ZARIS_PASSWORD", "from-env")
	for _, tc := range []struct {
		args []string
		want recoverOptions
		err  string
	}{
		{args: nil, want: recoverOptions{addr: "127.0.0.1:6379", user: "default", password: "from-env", timeout: 90 * time.Second}},
		{args: []string{"--addr", "10.0.0.5:7001", "--user", "ops", "--password", "pw", "--timeout", "5s"},
			want: recoverOptions{addr: "10.0.0.5:7001", user: "ops", password: "pw", timeout: 5 * time.Second}},
		{args: []string{"--tls", "--tls-ca", "ca.pem", "--tls-cert", "c.pem", "--tls-key", "c.key"},
			want: recoverOptions{addr: "127.0.0.1:6379", user: "default", password: "from-env", tls: true, tlsCA: "ca.pem", tlsCert: "c.pem", tlsKey: "c.key", timeout: 90 * time.Second}},
		{args: []string{"extra"}, err: "unexpected arguments"},
		{args: []string{"--addr", "nowhere"}, err: "--addr"},
		{args: []string{"--timeout", "0s"}, err: "--timeout"},
		{args: []string{"--tls", "--tls-cert", "c.pem"}, err: "go together"},
		{args: []string{"--tls-ca", "ca.pem"}, err: "need --tls"},
		{args: []string{"--bogus"}, err: "bogus"},
	} {
		o, err := parseRecover(tc.args)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err %v, want one saying %q", tc.args, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.err == "" && o != tc.want:
			t.Errorf("%q: %+v, want %+v", tc.args, o, tc.want)
		}
	}
	if code := runRecover([]string{"--addr"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Errorf("bad flags: exit %d, want 2", code)
	}
}

// TestRecoverServerProcess is a server the recover test starts, with the flags in ZARIS_RECOVER_SERVER.
func TestRecoverServerProcess(t *testing.T) {
	args := os.Getenv("ZARIS_RECOVER_SERVER")
	if args == "" {
		t.Skip("a server the recover test starts")
	}
	opts, err := parseOptions(strings.Fields(args))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := run(opts, newLogger("warn")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestRecoverCommandAgainstServers runs `zaris recover` against three server processes, memory only: it
// refuses while they all run; once two are killed, the third has no leader until the command rebuilds the
// control plane from it, after which a second run refuses again, as the node now follows a leader.
func TestRecoverCommandAgainstServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	p, err := ports.Free(9)
	if err != nil {
		t.Fatal(err)
	}
	var servers []*exec.Cmd
	resp := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", p[3*i]) }
	for i := range 3 {
		args := fmt.Sprintf("--name n%d --resp-addr %s --gossip-addr 127.0.0.1:%d --data-addr 127.0.0.1:%d --bootstrap-expect 3 --rf 2 --timing local --failover-timeout 1s --dead-server-timeout 2s",
			i, resp(i), p[3*i+1], p[3*i+2])
		if i > 0 {
			args += fmt.Sprintf(" --join 127.0.0.1:%d", p[1])
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestRecoverServerProcess$")
		cmd.Env = append(os.Environ(), "ZARIS_RECOVER_SERVER="+args)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		servers = append(servers, cmd)
	}
	recoverOnce := func() (int, string) {
		var out, errOut bytes.Buffer
		code := runRecover([]string{"--addr", resp(0), "--timeout", "30s"}, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	waitUntil(t, 30*time.Second, "the servers to form a cluster", func() bool {
		c, err := net.Dial("tcp", resp(0))
		if err != nil {
			return false
		}
		defer c.Close()
		reply, err := respCall(c, bufio.NewReader(c), "CLUSTER", "INFO")
		return err == nil && strings.Contains(reply, "cluster_state:ok")
	})
	if code, out := recoverOnce(); code != 1 || !strings.Contains(out, "QUORUM") {
		t.Fatalf("recover with every server up: exit %d, %q; want 1 and a QUORUM refusal", code, out)
	}
	for _, s := range servers[1:] {
		s.Process.Kill()
		s.Wait()
	}
	var out string
	waitUntil(t, 60*time.Second, "a recovery once the dead servers are failed to gossip", func() bool {
		var code int
		code, out = recoverOnce()
		return code == 0
	})
	t.Logf("zaris recover:\n%s", out)
	if !strings.Contains(out, "voters: n0") {
		t.Fatalf("report %q: want n0 the voter", out)
	}
	if code, out := recoverOnce(); code != 1 || !strings.Contains(out, "follows leader") {
		t.Fatalf("recover after recovery: exit %d, %q; want 1, following a leader", code, out)
	}
}

// waitUntil polls cond until it holds, failing t after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
