package zaris

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/pki"
	"github.com/zaris-go/zaris/transport"
)

// testCA is a certificate authority for tests that fails the test, or panics for the suite-wide one, when
// it cannot issue.
type testCA struct {
	*pki.CA
	t testing.TB
}

func newTestCA(t testing.TB) *testCA {
	ca := &testCA{t: t}
	var err error
	ca.CA, err = pki.New()
	ca.check(err)
	return ca
}

func (ca *testCA) check(err error) {
	switch {
	case err == nil:
	case ca.t != nil:
		ca.t.Fatal(err)
	default:
		panic(err)
	}
}

// issue returns a certificate for name, valid for both ends of a peer connection.
func (ca *testCA) issue(name string) pki.Cert {
	c, err := ca.Issue(name)
	ca.check(err)
	return c
}

// issueNode returns the certificate of node name in cluster.
func (ca *testCA) issueNode(cluster, name string) pki.Cert {
	c, err := ca.IssueNode(cluster, name)
	ca.check(err)
	return c
}

// issueClient returns a certificate that names no node, as an application's client certificate.
func (ca *testCA) issueClient(name string) pki.Cert {
	c, err := ca.IssueClient(name)
	ca.check(err)
	return c
}

// peerConfig returns a Config.TLS for a peer named name.
func (ca *testCA) peerConfig(name string) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{ca.issue(name).TLS}, RootCAs: ca.Pool()}
}

var testGossipKey = []byte("0123456789abcdef0123456789abcdef")

// suiteCA, with ZARIS_TEST_SECURE set, makes every test cluster's nodes TLS peers with a gossip key.
var suiteCA = sync.OnceValue(func() *testCA { return newTestCA(nil) })

func secureSuite() bool { return os.Getenv("ZARIS_TEST_SECURE") != "" }

// secured makes every node of a cluster a TLS peer of ca with the test gossip key.
func secured(ca *testCA, tweak func(*Config)) func(*Config) {
	return func(cfg *Config) {
		if tweak != nil {
			tweak(cfg)
		}
		cfg.TLS = ca.peerConfig(cfg.Name)
		cfg.GossipKey = testGossipKey
	}
}

// TestPeerTLSRefusesStrangers runs a cluster with peer TLS and a gossip key, and checks that it serves,
// while a client without a certificate, one with a certificate from another CA, and a raft peer without
// one can neither write nor disturb the control plane.
func TestPeerTLSRefusesStrangers(t *testing.T) {
	ca := newTestCA(t)
	c := startSocketCluster(t, 3, secured(ca, replicated(2)))
	ctx := bg(t)
	for i := range 50 {
		key := fmt.Sprintf("k%d", i)
		if err := c.node(i%3).Put(ctx, key, []byte("v")); err != nil {
			t.Fatalf("put %s over TLS: %v", key, err)
		}
	}
	target := c.node(0)
	key := c.keyOwnedBy("stranger", target)

	// A plain client: the handshake expects a ClientHello, so not one request is served.
	plain := transport.NewClient(target.DataAddr(), transport.Options{MuxByte: muxData, Greeting: new(greeting(&Config{}))})
	defer plain.Close()
	put := marshalRequest(&kv.Request{Key: key, Value: []byte("forged")})
	call, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := plain.Call(call, kv.OpPut, put); err == nil {
		t.Fatal("a peer without TLS was served")
	}
	// A client with a certificate from another CA.
	other := newTestCA(t)
	forged := transport.NewClient(target.DataAddr(), transport.Options{MuxByte: muxData, Greeting: new(greeting(&Config{})),
		Dialer: secureDialer(&Config{TLS: other.peerConfig("intruder")}, &net.Dialer{})})
	defer forged.Close()
	if _, err := forged.Call(call, kv.OpPut, put); err == nil {
		t.Fatal("a peer with a certificate from another CA was served")
	}
	// Certificates the cluster's CA signed that name no node of this cluster: an application's client
	// certificate, and a node's of another cluster. Neither reaches the data lane or the internal lane.
	app, elsewhere := ca.issueClient("app"), ca.issueNode("other", "intruder")
	for _, cert := range []pki.Cert{app, elsewhere} {
		cfg := &Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, RootCAs: ca.Pool()}}
		for _, lane := range []byte{muxData, muxInternal} {
			client := transport.NewClient(target.DataAddr(), transport.Options{MuxByte: lane, Greeting: new(greeting(&Config{})), Dialer: secureDialer(cfg, &net.Dialer{})})
			_, errPut := client.Call(call, kv.OpPut, put)
			_, errMap := client.Call(call, kv.OpGetMap, nil)
			client.Close()
			if errPut == nil || errMap == nil {
				t.Fatalf("lane %q served %v, a certificate naming no node of the cluster: %v, %v", lane, cert.TLS.Leaf.URIs, errPut, errMap)
			}
		}
		if err := forgeRaftHeartbeat(target.DataAddr(), secureDialer(cfg, &net.Dialer{})); err == nil {
			t.Fatalf("raft answered a heartbeat over a certificate naming %v", cert.TLS.Leaf.URIs)
		}
	}
	if _, err := target.Get(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get %s after the forged puts: %v, want not found", key, err)
	}
	// A node's certificate does reach the internal lane, so the checks above can fail.
	insider := transport.NewClient(target.DataAddr(), transport.Options{MuxByte: muxInternal, Greeting: new(greeting(&Config{})),
		Dialer: secureDialer(&Config{TLS: ca.peerConfig("insider")}, &net.Dialer{})})
	defer insider.Close()
	if _, err := insider.Call(call, kv.OpGetMap, nil); err != nil {
		t.Fatalf("a node's certificate on the internal lane: %v", err)
	}
	// A raft peer without a certificate claims a much higher term.
	term := target.ctl.raft.Stats()["term"]
	if err := forgeRaftHeartbeat(target.DataAddr(), &net.Dialer{}); err == nil {
		t.Fatal("a raft heartbeat without TLS was answered")
	}
	if now := target.ctl.raft.Stats()["term"]; now != term {
		t.Fatalf("term moved from %s to %s after a forged heartbeat", term, now)
	}
	// A trusted peer's heartbeat does get through, so the check above can fail.
	if err := forgeRaftHeartbeat(target.DataAddr(), secureDialer(&Config{TLS: ca.peerConfig("insider")}, &net.Dialer{})); err != nil {
		t.Fatalf("a heartbeat from a trusted certificate: %v", err)
	}
}

// forgeRaftHeartbeat sends one AppendEntries claiming term 1000 to the raft server at addr.
func forgeRaftHeartbeat(addr string, d transport.Dialer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	trans := raft.NewNetworkTransport(newRaftStream(ln, d, new(greeting(&Config{})), "intruder", 0), 1, time.Second, io.Discard)
	defer trans.Close()
	var resp raft.AppendEntriesResponse
	return trans.AppendEntries("x", raft.ServerAddress(addr), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("intruder"), Addr: []byte(ln.Addr().String())}, Term: 1000,
	}, &resp)
}

// TestGossipKeyKeepsStrangersOut checks that a process without the cluster's gossip key cannot join, and
// that a key rotated in by the members admits a process that has only the new key.
func TestGossipKeyKeepsStrangersOut(t *testing.T) {
	c := startSocketCluster(t, 2, func(cfg *Config) { cfg.GossipKey = testGossipKey })
	join := func(key []byte) error {
		cfg := testConfig("stranger")
		cfg.Join = []string{c.node(0).GossipAddr()}
		cfg.GossipKey = key
		cfg.Lite = true
		ctx, cancel := context.WithTimeout(bg(t), 3*time.Second)
		defer cancel()
		n, err := Join(ctx, cfg)
		if err == nil {
			n.Close()
		}
		return err
	}
	if err := join(nil); err == nil {
		t.Fatal("a process without the gossip key joined")
	}
	wrong := bytes.Repeat([]byte("k"), 32)
	if err := join(wrong); err == nil {
		t.Fatal("a process with another gossip key joined")
	}
	if got := len(c.node(0).members.members()); got != 2 {
		t.Fatalf("membership lists %d members after the strangers, want 2", got)
	}
	next := bytes.Repeat([]byte("n"), 16)
	for _, step := range []func([]byte) error{c.node(0).InstallGossipKey, c.node(0).UseGossipKey} {
		if err := step(next); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.node(1).RemoveGossipKey(testGossipKey); err != nil {
		t.Fatal(err)
	}
	if err := join(testGossipKey); err == nil {
		t.Fatal("a process with the removed gossip key joined")
	}
	if err := join(next); err != nil {
		t.Fatalf("a process with the rotated-in gossip key: %v", err)
	}
}

// TestTLSFromFilesReloads checks that a renewed certificate is picked up from its files.
func TestTLSFromFilesReloads(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	caFile, err := ca.WriteFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	write := func(c pki.Cert) (string, string) {
		certFile, keyFile, err := c.WriteFiles(dir, "node")
		if err != nil {
			t.Fatal(err)
		}
		return certFile, keyFile
	}
	certFile, keyFile := write(ca.issue("first"))
	cfg, err := TLSFromFiles(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	name := func() string {
		c, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(c.Certificate[0])
		return leaf.Subject.CommonName
	}
	if got := name(); got != "first" {
		t.Fatalf("certificate %q, want first", got)
	}
	write(ca.issue("renewed"))
	later := time.Now().Add(time.Minute) // a renewal within the file system's time resolution still counts
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := name(); got != "renewed" {
		t.Fatalf("certificate %q after renewal, want renewed", got)
	}
	if _, err := TLSFromFiles(certFile, keyFile, filepath.Join(dir, "none.pem")); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
}

// deadlineless ignores write deadlines, as a stalled network path does in effect.
type deadlineless struct{ net.Conn }

func (deadlineless) SetDeadline(time.Time) error      { return nil }
func (deadlineless) SetWriteDeadline(time.Time) error { return nil }

// TestPeerConnClosesWithoutItsPeer closes a peer TLS connection whose other end never reads again. Close
// returns though the close_notify alert can never be written: the connection ignores write deadlines, so
// tls.Conn's Close alone would block for good.
func TestPeerConnClosesWithoutItsPeer(t *testing.T) {
	ca := newTestCA(t)
	serverCfg, _ := peerTLS(&Config{TLS: ca.peerConfig("a")})
	_, clientCfg := peerTLS(&Config{TLS: ca.peerConfig("b")})
	a, b := net.Pipe()
	client := tls.Client(deadlineless{a}, clientCfg)
	server := tls.Server(b, serverCfg)
	handshook := make(chan error, 1)
	go func() { handshook <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-handshook; err != nil {
		t.Fatal(err)
	}
	defer server.NetConn().Close()

	closed := make(chan error, 1)
	go func() { closed <- (&peerConn{Conn: client}).Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits on a peer that never reads")
	}
}

// TestPeerTLSNeverTrustsTheSystemStore checks that a TLS config with the cluster's CA in ClientCAs only
// verifies the peers it dials against that CA, not against the system's trust store: a peer of the cluster
// is accepted, one of another CA refused.
func TestPeerTLSNeverTrustsTheSystemStore(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	_, client := peerTLS(&Config{TLS: &tls.Config{Certificates: []tls.Certificate{ca.issue("a").TLS}, ClientCAs: ca.Pool()}})
	state := func(c pki.Cert) tls.ConnectionState {
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{c.TLS.Leaf}}
	}
	if err := client.VerifyConnection(state(ca.issue("b"))); err != nil {
		t.Fatalf("a peer of the cluster's CA refused: %v", err)
	}
	if err := client.VerifyConnection(state(other.issue("stranger"))); err == nil {
		t.Fatal("a peer of another CA accepted")
	}
}

// handshake runs a peer TLS handshake over loopback between a node listening with server's config and
// one dialing with client's, and returns the dialing side's error, or the listening side's.
func handshake(t *testing.T, server, client *Config) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverTLS, _ := peerTLS(server)
	accepted := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			accepted <- err
			return
		}
		defer conn.Close()
		accepted <- tls.Server(conn, serverTLS).Handshake()
	}()
	conn, err := secureDialer(client, &net.Dialer{}).DialContext(bg(t), "tcp", ln.Addr().String())
	if err == nil {
		conn.Close()
	}
	return errors.Join(err, <-accepted)
}

// TestPeerCARotatesWithoutRestart rotates the cluster's CA in the file a node reads it from: a peer whose
// certificate the new CA signed is refused until the file holds both CAs, and accepted after, by the
// listening side and the dialing side alike, with no new config.
func TestPeerCARotatesWithoutRestart(t *testing.T) {
	t.Parallel()
	old, next := newTestCA(t), newTestCA(t)
	dir := t.TempDir()
	caFile, err := old.WriteFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := old.issue("a").WriteFiles(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	fromFiles, err := TLSFromFiles(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	a := &Config{TLS: fromFiles}
	both := next.Pool().Clone()
	both.AppendCertsFromPEM(mustRead(t, caFile))
	b := &Config{TLS: &tls.Config{Certificates: []tls.Certificate{next.issue("b").TLS}, RootCAs: both}}
	if err := handshake(t, a, b); err == nil {
		t.Fatal("a peer of the new CA was accepted before the CA file held it")
	}
	if err := handshake(t, b, a); err == nil {
		t.Fatal("a node dialed a peer of the new CA before the CA file held it")
	}
	nextDir := t.TempDir()
	nextFile, err := next.WriteFile(nextDir)
	if err != nil {
		t.Fatal(err)
	}
	rotated := append(mustRead(t, caFile), mustRead(t, nextFile)...)
	if err := os.WriteFile(caFile, rotated, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute) // a change within the file system's time resolution still counts
	if err := os.Chtimes(caFile, later, later); err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, a, b); err != nil {
		t.Fatalf("a peer of the new CA, once the CA file holds it: %v", err)
	}
	if err := handshake(t, b, a); err != nil {
		t.Fatalf("dialing a peer of the new CA, once the CA file holds it: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDenyListShutsOutANode checks that a node on the deny list is refused on the data port though the
// CA signed its certificate, that denying it closes the connection it has open, and that taking it off
// the list lets it back in.
func TestDenyListShutsOutANode(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	deny := NewDenyList()
	c := startSocketCluster(t, 2, secured(ca, func(cfg *Config) { cfg.DeniedPeers = deny }))
	target := c.node(0)
	ctx := bg(t)
	dial := func() *transport.Client {
		return transport.NewClient(target.DataAddr(), transport.Options{MuxByte: muxInternal, Greeting: new(greeting(&Config{})),
			Dialer: secureDialer(&Config{TLS: ca.peerConfig("insider")}, &net.Dialer{})})
	}
	call := func(client *transport.Client) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := client.Call(ctx, kv.OpGetMap, nil)
		return err
	}
	open := dial()
	defer open.Close()
	if err := call(open); err != nil {
		t.Fatalf("insider before it is denied: %v", err)
	}
	deny.Set("insider")
	if err := call(open); err == nil {
		t.Fatal("the open connection of a denied node still served it")
	}
	fresh := dial()
	defer fresh.Close()
	if err := call(fresh); err == nil {
		t.Fatal("a denied node connected anew")
	}
	deny.Set()
	again := dial()
	defer again.Close()
	if err := call(again); err != nil {
		t.Fatalf("insider after it is taken off the list: %v", err)
	}
	if err := c.node(1).Put(ctx, c.keyOwnedBy("k", target), []byte("v")); err != nil {
		t.Fatalf("the cluster's own nodes after the deny list changed: %v", err)
	}
}

// TestJoinChecksItsOwnCertificate checks that a node whose certificate would be refused by its peers
// does not start: one issued for another node, or for this node of another cluster.
func TestJoinChecksItsOwnCertificate(t *testing.T) {
	ca := newTestCA(t)
	for _, cert := range []pki.Cert{ca.issue("someone-else"), ca.issueNode("other", "self"), ca.issueClient("self")} {
		cfg := testConfig("self")
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}, RootCAs: ca.Pool()}
		cfg.GossipKey = testGossipKey
		n, err := Join(bg(t), cfg)
		if err == nil {
			n.Close()
			t.Fatalf("a node started with the certificate of %v", cert.TLS.Leaf.URIs)
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("Join with the certificate of %v: %v, want ErrInvalidConfig", cert.TLS.Leaf.URIs, err)
		}
	}
}

// TestStrangerWithTheGossipKeyNeverVotes lets a process that has the gossip key but no certificate of the
// cluster join membership, where seats are free for it: the leader never makes it a voter, since it can
// neither answer the leader's question about its progress nor take the log over raft.
func TestStrangerWithTheGossipKeyNeverVotes(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	c := startSocketCluster(t, 2, secured(ca, func(cfg *Config) { cfg.MaxVoters = 3 }))
	cfg := testConfig("stranger")
	cfg.Join = []string{c.node(0).GossipAddr()}
	cfg.TLS, cfg.GossipKey = newTestCA(t).peerConfig("stranger"), testGossipKey
	cfg.MaxVoters = 3
	ctx, cancel := context.WithTimeout(bg(t), 10*time.Second)
	defer cancel()
	stranger, err := Join(ctx, cfg)
	if err != nil {
		t.Fatalf("the stranger could not join gossip: %v", err)
	}
	defer stranger.Close()
	suffrage := func() (raft.ServerSuffrage, bool) {
		cf := c.leaderNode().ctl.raft.GetConfiguration()
		if cf.Error() != nil {
			return 0, false
		}
		for _, s := range cf.Configuration().Servers {
			if name, _ := splitRaftID(s.ID); name == "stranger" {
				return s.Suffrage, true
			}
		}
		return 0, false
	}
	waitFor(t, 10*time.Second, "the stranger added as a non-voter", func() bool { _, ok := suffrage(); return ok })
	leader := c.leaderNode()
	// Past ServerStabilization, the time after which a server that cannot tell its progress would count.
	start := leader.cfg.Clock.Now()
	rounds := leader.ctl.controlTicks.Load() + 20
	waitFor(t, 30*time.Second, "20 reconcile rounds past ServerStabilization", func() bool {
		return leader.ctl.controlTicks.Load() >= rounds && leader.cfg.Clock.Now().Sub(start) > leader.cfg.Timing.ServerStabilization
	})
	if s, ok := suffrage(); ok && s == raft.Voter {
		t.Fatal("a stranger with only the gossip key became a voter")
	}
}
