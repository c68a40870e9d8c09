package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/internal/pki"
)

// pkiFiles writes, in dir, a CA (ca.pem) and certificates signed by it: name.pem and name-key.pem for
// each name. It returns the CA's pool.
func pkiFiles(t *testing.T, dir string, names ...string) *x509.CertPool {
	t.Helper()
	ca, err := pki.New()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.WriteFile(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		cert, err := ca.Issue(name)
		if err == nil {
			_, _, err = cert.WriteFiles(dir, name)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return ca.Pool()
}

func TestResourceLimitOptions(t *testing.T) {
	o, err := parseOptions([]string{"--max-clients", "50", "--idle-timeout", "30s", "--command-timeout", "5s",
		"--auth-timeout", "2s", "--max-value-size", "100000000", "--max-query-buffer", "300000000"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(nil)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case cfg.RESPMaxClients != 50, cfg.RESPIdleTimeout != 30*time.Second, cfg.RESPCommandTimeout != 5*time.Second,
		cfg.RESPAuthTimeout != 2*time.Second, cfg.RESPMaxQueryBuffer != 300000000:
		t.Fatalf("limits not applied: %+v", o)
	case cfg.MaxValueSize != 100000000 || cfg.MaxFrameSize < cfg.MaxValueSize+512:
		t.Fatalf("--max-value-size 100000000: MaxValueSize %d, MaxFrameSize %d", cfg.MaxValueSize, cfg.MaxFrameSize)
	}
	def := zaris.DefaultConfig()
	o, _ = parseOptions(nil)
	if cfg, _ := o.config(nil); cfg.RESPMaxClients != def.RESPMaxClients || cfg.RESPIdleTimeout != def.RESPIdleTimeout ||
		cfg.MaxValueSize != def.MaxValueSize || cfg.MaxFrameSize != def.MaxFrameSize {
		t.Fatalf("defaults differ from the library's: %+v", cfg)
	}
}

func TestTLSAndACLOptionErrors(t *testing.T) {
	dir := t.TempDir()
	pkiFiles(t, dir, "node")
	cert, key := "--tls-cert="+filepath.Join(dir, "node.pem"), "--tls-key="+filepath.Join(dir, "node-key.pem")
	bad := map[string][]string{
		"client auth without TLS":   {"--resp-tls-client-auth"},
		"TLS without a certificate": {"--resp-tls"},
		"client auth without a CA":  {"--resp-tls", "--resp-tls-client-auth", cert, key},
		"missing key file":          {"--resp-tls", cert, "--tls-key=" + filepath.Join(dir, "none.key")},
		"key of another cert":       {"--resp-tls", cert, "--tls-key=" + filepath.Join(dir, "ca.pem")},
		"missing ACL file":          {"--acl-file=" + filepath.Join(dir, "none.acl")},
	}
	for name, args := range bad {
		o, err := parseOptions(args)
		if err == nil {
			_, err = o.config(nil)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, line := range []string{
		"alice on >pw ~* +@all",        // no "user"
		"user alice on >pw ~*",         // no command rule
		"user alice on >pw ~* +@write", // not supported
		"user alice on >pw ~* -@all",
		"user",
	} {
		if _, err := parseACLUser(strings.Fields(line)); err == nil {
			t.Errorf("ACL line %q accepted", line)
		}
	}
}

func TestACLFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.acl")
	content := "# users\n\nuser default off\nuser app on >one >two <one ~app:* ~jobs:* &events:* +@all\n" +
		"user reader on nopass allkeys allchannels +@read\nuser dormant >x resetpass allcommands resetkeys &x resetchannels\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := loadACLFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []zaris.RESPUser{
		{Name: "default", Disabled: true, Keys: []string{}, Channels: []string{}},
		{Name: "app", Passwords: []string{"two"}, Keys: []string{"app:*", "jobs:*"}, Channels: []string{"events:*"}},
		{Name: "reader", NoPass: true, ReadOnly: true, Keys: []string{"*"}, Channels: []string{"*"}},
		{Name: "dormant", Disabled: true, Keys: []string{}, Channels: []string{}},
	}
	if len(users) != len(want) {
		t.Fatalf("%d users, want %d: %+v", len(users), len(want), users)
	}
	for i, u := range users {
		w := want[i]
		if u.Name != w.Name || u.Disabled != w.Disabled || u.NoPass != w.NoPass || u.ReadOnly != w.ReadOnly ||
			!slices.Equal(u.Passwords, w.Passwords) || !slices.Equal(u.Keys, w.Keys) || (u.Keys == nil) != (w.Keys == nil) ||
			!slices.Equal(u.Channels, w.Channels) || (u.Channels == nil) != (w.Channels == nil) {
			t.Errorf("user %d = %+v, want %+v", i, u, w)
		}
	}
}

// joinWithOptions starts a one-node cluster named "node" on loopback from command-line options args, with
// a gossip key, and closes it when the test ends.
func joinWithOptions(t *testing.T, args ...string) *zaris.Node {
	t.Helper()
	o, err := parseOptions(append([]string{"--resp-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--data-addr", "127.0.0.1:0",
		"--name", "node", "--gossip-key", "MDEyMzQ1Njc4OWFiY2RlZg==", "--timing", "local"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := zaris.Join(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	return node
}

// TestSecuredServer starts a node from command-line options with TLS, client certificates and an ACL
// file, and logs in to it with go-redis over TLS.
func TestSecuredServer(t *testing.T) {
	dir := t.TempDir()
	pool := pkiFiles(t, dir, "node", "client")
	acl := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(acl, []byte("user app on >app-pw ~* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	node := joinWithOptions(t, "--password", "admin-pw", "--acl-file", acl, "--resp-tls", "--resp-tls-client-auth",
		"--tls-cert", filepath.Join(dir, "node.pem"), "--tls-key", filepath.Join(dir, "node-key.pem"), "--tls-ca", filepath.Join(dir, "ca.pem"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clientCert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}
	for _, login := range [][2]string{{"app", "app-pw"}, {"", "admin-pw"}} {
		client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{node.RESPAddr()}, Username: login[0],
			Password: login[1], TLSConfig: tlsCfg})
		deadline := time.Now().Add(20 * time.Second)
		for {
			err = client.Set(ctx, "k", login[1], 0).Err()
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond) // the first slot map may not be committed yet
		}
		client.Close()
		if err != nil {
			t.Fatalf("SET as %q over TLS: %v", login[0], err)
		}
	}
	noCert := redis.NewClient(&redis.Options{Addr: node.RESPAddr(), Password: "admin-pw", TLSConfig: &tls.Config{RootCAs: pool}, MaxRetries: -1})
	defer noCert.Close()
	if err := noCert.Ping(ctx).Err(); err == nil {
		t.Fatal("a client without a certificate was served")
	}
}

// TestACLFileWithoutDefault checks that an ACL file that does not define "default" disables it unless
// --password opens it: a server given users admits nobody anonymously unless told to.
func TestACLFileWithoutDefault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte("user app on >pw ~app:* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		password string
		want     zaris.RESPUser
	}{
		{"", zaris.RESPUser{Name: "default", Disabled: true}},
		{"admin-pw", zaris.RESPUser{}},
	} {
		o := options{aclFile: path}
		cfg := zaris.DefaultConfig()
		cfg.RESPPassword = tc.password
		if err := o.respSecurity(&cfg); err != nil {
			t.Fatal(err)
		}
		var def zaris.RESPUser
		for _, u := range cfg.RESPUsers {
			if u.Name == "default" {
				def = u
			}
		}
		if def.Name != tc.want.Name || def.Disabled != tc.want.Disabled {
			t.Errorf("with --password %q the default user is %+v, want %+v", tc.password, def, tc.want)
		}
	}
}

// TestPasswordFile checks that --password-file gives the password from a file's first line, and that it
// and --password are exclusive.
func TestPasswordFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(path, []byte("s3cret\r\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseOptions([]string{"--password-file", path})
	if err != nil || o.password != "s3cret" {
		t.Fatalf("--password-file: %q, %v", o.password, err)
	}
	if _, err := parseOptions([]string{"--password-file", path, "--password", "x"}); err == nil {
		t.Fatal("--password beside --password-file accepted")
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseOptions([]string{"--password-file", empty}); err == nil {
		t.Fatal("an empty password file accepted")
	}
}

// TestRESPClientCA checks --resp-tls-ca: RESP clients' certificates are checked against their own CA, so
// a certificate the cluster's CA signed, a node's included, does not log in over RESP.
func TestRESPClientCA(t *testing.T) {
	peers, apps := t.TempDir(), t.TempDir()
	peerPool := pkiFiles(t, peers, "node")
	pkiFiles(t, apps, "client")
	node := joinWithOptions(t, "--resp-tls", "--resp-tls-client-auth", "--resp-tls-ca", filepath.Join(apps, "ca.pem"),
		"--tls-cert", filepath.Join(peers, "node.pem"), "--tls-key", filepath.Join(peers, "node-key.pem"), "--tls-ca", filepath.Join(peers, "ca.pem"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ping := func(dir, name string) error {
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		client := redis.NewClient(&redis.Options{Addr: node.RESPAddr(), MaxRetries: -1,
			TLSConfig: &tls.Config{RootCAs: peerPool, Certificates: []tls.Certificate{cert}}})
		defer client.Close()
		return client.Ping(ctx).Err()
	}
	if err := ping(apps, "client"); err != nil {
		t.Fatalf("a client of --resp-tls-ca: %v", err)
	}
	if err := ping(peers, "node"); err == nil {
		t.Fatal("a certificate of --tls-ca logged in over RESP beside --resp-tls-ca")
	}
}

// TestDenyFile checks the deny file's format: one node name a line, comments and blank lines skipped.
func TestDenyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deny")
	if err := os.WriteFile(path, []byte("# lost laptop\nzaris-3\n\n  zaris-7  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	names, err := readDenyFile(path)
	if err != nil || strings.Join(names, ",") != "zaris-3,zaris-7" {
		t.Fatalf("deny file read as %q, %v", names, err)
	}
	o, err := parseOptions([]string{"--tls-deny-file", path})
	if err == nil {
		if _, err = o.config(nil); err == nil {
			t.Fatal("--tls-deny-file without --tls-ca accepted")
		}
	}
}
