// Package pki is an in-memory certificate authority for tests and test clusters. Every certificate it
// issues serves both ends of a peer connection on the loopback interface.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// validity is how long certificates last: long enough for a chaos run of days. They are also backdated by
// an hour, so that a clock a little behind still accepts them.
const validity = 7 * 24 * time.Hour

// CA is an ECDSA P-256 certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	pem  []byte
}

// Cert is a certificate issued by a CA, with its private key, ready for TLS and as PEM.
type Cert struct {
	TLS     tls.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// New makes a CA with a fresh key.
func New() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := template("zaris test CA")
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{cert: cert, key: key, pool: pool, pem: encode("CERTIFICATE", der)}, nil
}

// template is a certificate for name, valid from an hour ago. Its serial number is left for
// x509.CreateCertificate to draw at random, so that no two certificates share one.
func template(name string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{Subject: pkix.Name{CommonName: name}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity)}
}

// Pool holds the CA certificate, for RootCAs and ClientCAs.
func (ca *CA) Pool() *x509.CertPool { return ca.pool }

// WriteFile writes the CA certificate to ca.pem in dir and returns its path.
func (ca *CA) WriteFile(dir string) (string, error) {
	path := filepath.Join(dir, "ca.pem")
	return path, os.WriteFile(path, ca.pem, 0o600)
}

// Issue returns the certificate of node name in the cluster named "zaris" (IssueNode).
func (ca *CA) Issue(name string) (Cert, error) { return ca.IssueNode("zaris", name) }

// IssueNode returns a certificate with common name name, good for server and client authentication, for
// 127.0.0.1, ::1, localhost and name, naming node name of cluster by the URI SAN zaris://cluster/node/name.
func (ca *CA) IssueNode(cluster, name string) (Cert, error) {
	return ca.issue(name, &url.URL{Scheme: "zaris", Host: cluster, Path: "/node/" + name})
}

// IssueClient returns a certificate like a node's that names no node: an application's client certificate.
func (ca *CA) IssueClient(name string) (Cert, error) { return ca.issue(name, nil) }

func (ca *CA) issue(name string, node *url.URL) (Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Cert{}, err
	}
	tmpl := template(name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	tmpl.DNSNames = []string{"localhost"}
	if node != nil {
		tmpl.URIs = []*url.URL{node}
	}
	if name != "" && name != "localhost" {
		tmpl.DNSNames = append(tmpl.DNSNames, name)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Cert{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Cert{}, err
	}
	c := Cert{CertPEM: encode("CERTIFICATE", der), KeyPEM: encode("EC PRIVATE KEY", keyDER)}
	c.TLS, err = tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	return c, err
}

// WriteFiles writes the certificate and its key to name.pem and name-key.pem in dir and returns their paths.
func (c Cert) WriteFiles(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, c.CertPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func encode(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
