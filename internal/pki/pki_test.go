package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func newCA(t *testing.T) *CA {
	t.Helper()
	ca, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func issue(t *testing.T, ca *CA, name string) Cert {
	t.Helper()
	c, err := ca.Issue(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIssuedVerifies checks that a certificate verifies against the pool for server and client use, for
// every loopback name it claims, and carries its common name.
func TestIssuedVerifies(t *testing.T) {
	ca := newCA(t)
	leaf, err := x509.ParseCertificate(issue(t, ca, "n1").TLS.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != "n1" {
		t.Fatalf("common name %q, want n1", leaf.Subject.CommonName)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		for _, host := range []string{"127.0.0.1", "::1", "localhost", "n1"} {
			opts := x509.VerifyOptions{Roots: ca.Pool(), DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}}
			if _, err := leaf.Verify(opts); err != nil {
				t.Errorf("usage %v for %s: %v", usage, host, err)
			}
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: newCA(t).Pool()}); err == nil {
		t.Error("the certificate verifies against another CA")
	}
}

// TestMutualTLS runs handshakes over a pipe between two issued certificates, then with a client whose
// certificate comes from another CA.
func TestMutualTLS(t *testing.T) {
	ca := newCA(t)
	server := issue(t, ca, "server")
	if err := handshake(ca, server, issue(t, ca, "client")); err != nil {
		t.Fatalf("mutual TLS between two certificates of one CA: %v", err)
	}
	if err := handshake(ca, server, issue(t, newCA(t), "stranger")); err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}
}

// handshake completes a TLS handshake over net.Pipe with the server requiring a client certificate, both
// sides trusting ca, and returns the server's error or else the client's.
func handshake(ca *CA, server, client Cert) error {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	srv := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{server.TLS},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()})
	cli := tls.Client(b, &tls.Config{Certificates: []tls.Certificate{client.TLS}, RootCAs: ca.Pool(), ServerName: "localhost"})
	clientErr := make(chan error, 1)
	go func() {
		err := cli.Handshake()
		if err == nil {
			_, err = cli.Read(make([]byte, 1)) // in TLS 1.3 the server judges the client certificate after the client is done
		}
		clientErr <- err
	}()
	if err := srv.Handshake(); err != nil {
		return err
	}
	if _, err := srv.Write([]byte{1}); err != nil {
		return err
	}
	return <-clientErr
}

// TestFiles checks that the written files load back as a key pair and a pool that verifies it.
func TestFiles(t *testing.T) {
	ca, dir := newCA(t), t.TempDir()
	caFile, err := ca.WriteFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := issue(t, ca, "n1").WriteFiles(dir, "node")
	if err != nil {
		t.Fatal(err)
	}
	if certFile != filepath.Join(dir, "node.pem") || keyFile != filepath.Join(dir, "node-key.pem") {
		t.Fatalf("files %s and %s", certFile, keyFile)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
		t.Fatal(err)
	}
}

// TestSerialsUnique issues certificates from two CAs at once and checks that no serial number repeats.
func TestSerialsUnique(t *testing.T) {
	cas := []*CA{newCA(t), newCA(t)}
	const perCA = 50
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for i := range 2 * perCA {
		wg.Go(func() {
			c, err := cas[i%2].Issue("n")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			seen[c.TLS.Leaf.SerialNumber.String()] = true
		})
	}
	wg.Wait()
	if len(seen) != 2*perCA {
		t.Fatalf("%d distinct serial numbers among %d certificates", len(seen), 2*perCA)
	}
}
