package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// tlsFiles are the PEM files of the node's certificate, its private key and the CA that signs the
// cluster's certificates (--tls-cert, --tls-key, --tls-ca), shared by every endpoint that speaks TLS.
type tlsFiles struct {
	cert, key, ca string
}

// certReloadEvery is how often the files are checked for a change.
const certReloadEvery = time.Second

// certStore holds what was loaded from the files and loads it again when one of them changes, so a
// renewed certificate is used from the next handshake on, without a restart. A change that does not load
// (a file half-written, a key that does not match) keeps the previous certificate until the files are
// whole again.
type certStore struct {
	files       tlsFiles
	reloadEvery time.Duration

	mu      sync.Mutex
	checked time.Time
	stamps  [3]time.Time // modification times of cert, key and ca when last loaded
	cert    *tls.Certificate
	pool    *x509.CertPool // nil without a CA file
}

// newCertStore loads the files: the certificate and key are required, the CA file is optional.
func newCertStore(files tlsFiles) (*certStore, error) {
	if files.cert == "" || files.key == "" {
		return nil, errors.New("--tls-cert and --tls-key are both required for TLS")
	}
	s := &certStore{files: files, reloadEvery: certReloadEvery}
	stamps, err := files.stamps()
	if err != nil {
		return nil, err
	}
	if err := s.load(stamps); err != nil {
		return nil, err
	}
	s.checked = time.Now()
	return s, nil
}

// stamps returns the modification time of each file.
func (f tlsFiles) stamps() ([3]time.Time, error) {
	var out [3]time.Time
	for i, name := range []string{f.cert, f.key, f.ca} {
		if name == "" {
			continue
		}
		info, err := os.Stat(name)
		if err != nil {
			return out, fmt.Errorf("TLS file: %w", err)
		}
		out[i] = info.ModTime()
	}
	return out, nil
}

// load reads the key pair and the CA pool and installs them.
func (s *certStore) load(stamps [3]time.Time) error {
	cert, err := tls.LoadX509KeyPair(s.files.cert, s.files.key)
	if err != nil {
		return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", s.files.cert, s.files.key, err)
	}
	var pool *x509.CertPool
	if s.files.ca != "" {
		pem, err := os.ReadFile(s.files.ca)
		if err != nil {
			return fmt.Errorf("--tls-ca: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-ca %s holds no PEM certificate", s.files.ca)
		}
	}
	s.cert, s.pool, s.stamps = &cert, pool, stamps
	return nil
}

// current returns the certificate and CA pool, reloaded first if a file changed since they were loaded.
func (s *certStore) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); now.Sub(s.checked) >= s.reloadEvery {
		s.checked = now
		if stamps, err := s.files.stamps(); err == nil && stamps != s.stamps {
			s.load(stamps) // on failure the previous files stay in use
		}
	}
	return s.cert, s.pool
}

// serverConfig is the TLS configuration of an endpoint that presents the node's certificate and, with
// clientAuth, accepts only clients with a certificate signed by the CA.
func (s *certStore) serverConfig(clientAuth bool) (*tls.Config, error) {
	if clientAuth && s.files.ca == "" {
		return nil, errors.New("client certificates are checked against --tls-ca, which is not set")
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}}
			if clientAuth {
				cfg.ClientAuth = tls.RequireAndVerifyClientCert
				cfg.ClientCAs = pool
			}
			return cfg, nil
		},
	}, nil
}
