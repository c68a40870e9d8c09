package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/zaris-go/zaris"
)

// pki is what -secure runs the cluster with: a CA that signs a certificate per process, as PEM files in
// dir, and a gossip key. Every server and the lite member speak mutual TLS and encrypted gossip.
type pki struct {
	dir       string
	ca        *x509.Certificate
	caKey     *ecdsa.PrivateKey
	gossipKey []byte

	mu     sync.Mutex
	serial int64
}

// newPKI makes a CA in dir.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "zaris-chaos CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	gossip := make([]byte, 32)
	if _, err := rand.Read(gossip); err != nil {
		return nil, err
	}
	p := &pki{dir: dir, ca: ca, caKey: key, gossipKey: gossip, serial: 1}
	return p, writePEM(p.caFile(), "CERTIFICATE", der)
}

func (p *pki) caFile() string { return filepath.Join(p.dir, "ca.pem") }

// issue writes a certificate and key for process name, good for both ends of a peer connection, and
// returns their files.
func (p *pki) issue(name string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	p.mu.Lock()
	p.serial++
	serial := p.serial
	p.mu.Unlock()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(p.dir, name+".pem"), filepath.Join(p.dir, name+"-key.pem")
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	return certFile, keyFile, writePEM(keyFile, "EC PRIVATE KEY", keyDER)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

// serverArgs are the flags that make server name a secured peer.
func (p *pki) serverArgs(name string) ([]string, error) {
	cert, key, err := p.issue(name)
	if err != nil {
		return nil, fmt.Errorf("certificate for %s: %w", name, err)
	}
	return []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", p.caFile(),
		"--gossip-key", base64.StdEncoding.EncodeToString(p.gossipKey)}, nil
}

// secure makes the lite member's cfg a secured peer.
func (p *pki) secure(cfg *zaris.Config) error {
	cert, key, err := p.issue(cfg.Name)
	if err != nil {
		return err
	}
	var tlsCfg *tls.Config
	if tlsCfg, err = zaris.TLSFromFiles(cert, key, p.caFile()); err != nil {
		return err
	}
	cfg.TLS, cfg.GossipKey = tlsCfg, p.gossipKey
	return nil
}
