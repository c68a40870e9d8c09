package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/internal/pki"
)

// credentials are what -secure runs the cluster with: a CA that signs a certificate per process, as PEM
// files in dir, and a gossip key. Every server and the lite member speak mutual TLS and encrypted gossip.
type credentials struct {
	dir       string
	ca        *pki.CA
	caFile    string
	gossipKey []byte
}

// newCredentials makes a CA, writing its certificate in dir, and a gossip key.
func newCredentials(dir string) (*credentials, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := pki.New()
	if err != nil {
		return nil, err
	}
	caFile, err := ca.WriteFile(dir)
	if err != nil {
		return nil, err
	}
	gossip := make([]byte, 32)
	if _, err := rand.Read(gossip); err != nil {
		return nil, err
	}
	return &credentials{dir: dir, ca: ca, caFile: caFile, gossipKey: gossip}, nil
}

// issue writes a certificate and key for process name, good for both ends of a peer connection, and
// returns their files.
func (c *credentials) issue(name string) (certFile, keyFile string, err error) {
	cert, err := c.ca.Issue(name)
	if err != nil {
		return "", "", err
	}
	return cert.WriteFiles(c.dir, name)
}

// serverArgs are the flags that make server name a secured peer.
func (c *credentials) serverArgs(name string) ([]string, error) {
	cert, key, err := c.issue(name)
	if err != nil {
		return nil, fmt.Errorf("certificate for %s: %w", name, err)
	}
	return []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", c.caFile,
		"--gossip-key", base64.StdEncoding.EncodeToString(c.gossipKey)}, nil
}

// secure makes the lite member's cfg a secured peer.
func (c *credentials) secure(cfg *zaris.Config) error {
	cert, key, err := c.issue(cfg.Name)
	if err != nil {
		return err
	}
	tlsCfg, err := zaris.TLSFromFiles(cert, key, c.caFile)
	if err != nil {
		return err
	}
	cfg.TLS, cfg.GossipKey = tlsCfg, c.gossipKey
	return nil
}
