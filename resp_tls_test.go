package zaris

import (
	"crypto/tls"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/zaris-go/zaris/internal/pki"
)

// testPKI is a certificate authority made for one test, with a server certificate for 127.0.0.1 and
// localhost and a client certificate, both signed by it.
type testPKI struct {
	*testCA
	server, client pki.Cert
}

func newTestPKI(t testing.TB) *testPKI {
	ca := newTestCA(t)
	return &testPKI{testCA: ca, server: ca.issue("localhost"), client: ca.issue("client")}
}

// serverConfig is the RESP endpoint's TLS configuration, asking for client certificates when clientAuth.
func (p *testPKI) serverConfig(clientAuth bool) *tls.Config {
	cfg := &tls.Config{Certificates: []tls.Certificate{p.server.TLS}, MinVersion: tls.VersionTLS12}
	if clientAuth {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = p.Pool()
	}
	return cfg
}

// clientConfig trusts the test CA and, with cert, presents the client certificate.
func (p *testPKI) clientConfig(cert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: p.Pool(), MinVersion: tls.VersionTLS12}
	if cert {
		cfg.Certificates = []tls.Certificate{p.client.TLS}
	}
	return cfg
}

// TestRESPTLS runs a three-node cluster whose RESP endpoints speak only TLS: the go-redis ClusterClient
// reads the slot map, follows MOVED and runs every kind of command over TLS, a plain-text client gets
// nothing, and with client authentication a client without a certificate from the CA cannot connect.
func TestRESPTLS(t *testing.T) {
	certs := newTestPKI(t)
	c := startRESPCluster(t, 3, func(cfg *Config) {
		cfg.RESPTLS = certs.serverConfig(false)
		cfg.RESPPassword = "pw"
	})
	ctx := bg(t)
	for _, proto := range []int{2, 3} {
		client := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: []string{c.node(0).RESPAddr()}, Protocol: proto, Password: "pw",
			TLSConfig: certs.clientConfig(false), MaxRedirects: 8,
		})
		defer client.Close()
		prefix := "tls" + strconv.Itoa(proto) + ":"
		checkSetGet(t, ctx, client, prefix)
		checkPipeline(t, ctx, client, prefix)
		checkHashTag(t, ctx, client, prefix)
		checkIntrospection(t, ctx, client, c)
	}
	_, other := ownerOf(c, "tls-moved")
	direct := redis.NewClient(&redis.Options{Addr: other.RESPAddr(), Password: "pw", TLSConfig: certs.clientConfig(false)})
	defer direct.Close()
	if err := direct.Get(ctx, "tls-moved").Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Fatalf("GET on a node that does not own the key, over TLS: %v", err)
	}

	plain := dialRaw(t, c.node(0).RESPAddr())
	plain.send(respCmd("PING"))
	plain.expectClosed()

	t.Run("client auth", func(t *testing.T) {
		mutual := startRESPCluster(t, 1, func(cfg *Config) { cfg.RESPTLS = certs.serverConfig(true) })
		addr := mutual.node(0).RESPAddr()
		with := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: certs.clientConfig(true), MaxRetries: -1})
		defer with.Close()
		if err := with.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatalf("client with a certificate: %v", err)
		}
		without := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: certs.clientConfig(false), MaxRetries: -1})
		defer without.Close()
		if err := without.Ping(ctx).Err(); err == nil {
			t.Fatal("a client without a certificate was served")
		}
		stranger := newTestPKI(t)
		foreign := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: &tls.Config{RootCAs: certs.Pool(),
			Certificates: []tls.Certificate{stranger.client.TLS}}, MaxRetries: -1})
		defer foreign.Close()
		if err := foreign.Ping(ctx).Err(); err == nil {
			t.Fatal("a client with a certificate from another CA was served")
		}
	})
}

// TestRESPTLSRedisCLI drives a TLS endpoint with redis-cli --tls, in cluster mode so that it follows
// MOVED over TLS too. Without redis-cli the test is skipped, unless ZARIS_NEED_REDIS is set.
func TestRESPTLSRedisCLI(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("ZARIS_NEED_REDIS") != "" {
			t.Fatal("redis-cli is not installed (apt-get install redis-tools)")
		}
		t.Skip("redis-cli is not installed")
	}
	certs := newTestPKI(t)
	dir := t.TempDir()
	caFile, err := certs.WriteFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := certs.client.WriteFiles(dir, "client")
	if err != nil {
		t.Fatal(err)
	}
	c := startRESPCluster(t, 3, func(cfg *Config) { cfg.RESPTLS = certs.serverConfig(true) })
	run := func(node *Node, args ...string) string {
		t.Helper()
		host, port, _ := net.SplitHostPort(node.RESPAddr())
		argv := append([]string{"--tls", "--cacert", caFile, "--cert", certFile, "--key", keyFile, "-h", host, "-p", port, "-c"}, args...)
		out, err := exec.Command(cli, argv...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %q: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for i := range 20 {
		key := "cli-" + strconv.Itoa(i)
		if got := run(c.node(i%3), "set", key, "v"+strconv.Itoa(i)); got != "OK" {
			t.Fatalf("redis-cli --tls set %s: %q", key, got)
		}
		if got := run(c.node((i+1)%3), "get", key); got != "v"+strconv.Itoa(i) {
			t.Fatalf("redis-cli --tls get %s: %q", key, got)
		}
	}
	if got := run(c.node(0), "cluster", "info"); !strings.Contains(got, "cluster_state:ok") {
		t.Fatalf("redis-cli --tls cluster info: %q", got)
	}
	if got := run(c.node(1), "cluster", "nodes"); strings.Count(got, "master") != 3 {
		t.Fatalf("redis-cli --tls cluster nodes: %q", got)
	}
}
