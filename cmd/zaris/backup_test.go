package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/ports"
)

func TestBackupFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		restore bool
		err     string
		rate    string
	}{
		{args: []string{"--to", "b1"}},
		{args: []string{"--to", "b1", "--rate", "20mb"}, rate: "20971520"},
		{args: []string{"--from", "b1", "--replace"}, restore: true},
		{args: nil, err: "--to"},
		{args: nil, restore: true, err: "--from"},
		{args: []string{"--to", "b1", "--rate", "fast"}, err: "--rate"},
		{args: []string{"--from", "b1", "--rate", "1mb"}, restore: true, err: "rate"},
		{args: []string{"--to", "b1", "--addr", "nowhere"}, err: "--addr"},
	} {
		o, err := parseBackup(tc.args, tc.restore)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err %v, want one saying %q", tc.args, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.err == "" && o.rate != tc.rate:
			t.Errorf("%q: rate %q, want %q", tc.args, o.rate, tc.rate)
		}
	}
}

// TestBackupCommandsAgainstServers backs up a 2-process cluster with `zaris backup`, kills it, and restores
// the backup with `zaris restore` into one new process, through the RESP endpoint: the keys come back, a
// directory outside --backup-dir is refused, and a second restore is refused as the cluster holds data.
func TestBackupCommandsAgainstServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	root := t.TempDir()
	p, err := ports.Free(9)
	if err != nil {
		t.Fatal(err)
	}
	resp := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", p[3*i]) }
	start := func(i, expect int, join string) *exec.Cmd {
		args := fmt.Sprintf("--name n%d --resp-addr %s --gossip-addr 127.0.0.1:%d --data-addr 127.0.0.1:%d --bootstrap-expect %d --rf 2 --timing local --backup-dir %s",
			i, resp(i), p[3*i+1], p[3*i+2], expect, root)
		if join != "" {
			args += " --join " + join
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestRecoverServerProcess$")
		cmd.Env = append(os.Environ(), "ZARIS_RECOVER_SERVER="+args)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	call := func(i int, args ...string) (string, error) {
		c, err := net.Dial("tcp", resp(i))
		if err != nil {
			return "", err
		}
		defer c.Close()
		return respCall(c, bufio.NewReader(c), args...)
	}
	serving := func(i int) func() bool {
		return func() bool {
			reply, err := call(i, "CLUSTER", "INFO")
			return err == nil && strings.Contains(reply, "cluster_state:ok")
		}
	}
	run := func(restore bool, args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := runBackup(args, restore, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	old := []*exec.Cmd{start(0, 2, ""), start(1, 2, fmt.Sprintf("127.0.0.1:%d", p[1]))}
	waitUntil(t, 30*time.Second, "the old cluster to serve", serving(0))
	waitUntil(t, 30*time.Second, "the old cluster to serve", serving(1))
	keys := map[string]string{}
	for i := range 40 {
		key := fmt.Sprintf("{k%d}", i)
		keys[key] = fmt.Sprint("v", i)
		waitUntil(t, 10*time.Second, "a SET of "+key+" at its owner", func() bool {
			for i := range 2 {
				if reply, err := call(i, "SET", key, keys[key]); err == nil && reply == "OK" {
					return true
				}
			}
			return false
		})
	}
	if code, out := run(false, "--addr", resp(0), "--to", "../outside"); code != 1 || !strings.Contains(out, "not a directory under") {
		t.Fatalf("a backup outside --backup-dir: exit %d, %q", code, out)
	}
	code, out := run(false, "--addr", resp(0), "--to", "nightly", "--rate", "10mb")
	if code != 0 || !strings.Contains(out, "40 entries") {
		t.Fatalf("zaris backup: exit %d, %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(root, "nightly", "MANIFEST")); err != nil {
		t.Fatal(err)
	}
	for _, s := range old {
		s.Process.Kill()
		s.Wait()
	}
	start(2, 1, "")
	waitUntil(t, 30*time.Second, "the new node to serve", serving(2))
	if code, out := run(true, "--addr", resp(2), "--from", "nightly"); code != 0 || !strings.Contains(out, "40 keys") {
		t.Fatalf("zaris restore: exit %d, %q", code, out)
	}
	for key, want := range keys {
		if got, err := call(2, "GET", key); err != nil || got != want {
			t.Fatalf("%s = %q, %v after the restore; want %q", key, got, err, want)
		}
	}
	if code, out := run(true, "--addr", resp(2), "--from", "nightly"); code != 1 || !strings.Contains(out, "holds data") {
		t.Fatalf("a second restore: exit %d, %q", code, out)
	}
}
