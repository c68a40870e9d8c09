package zaris

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/zaris-go/zaris/transport"
)

// Peer security. With Config.TLS set, every connection between nodes on the data port (the data plane and
// the control plane's raft traffic) is mutual TLS: each end presents a certificate, and checks that the
// other's chains to the cluster's CA and names a node of this cluster (peertrust.go), so a process without
// such a certificate cannot send a single request. Peers dial each other by address, so a certificate is
// checked against a host name only if the config names a ServerName. With Config.GossipKey set, gossip is
// encrypted and authenticated with that key (serf's keyring), so a process without it can neither join nor
// disturb membership.

// peerTLS returns the configs a node listens and dials with, derived from the config's TLS. Both leave
// the checks of a peer's certificate to peerTrust: the standard ones cannot follow a CA file that changes,
// nor check a node's name.
func peerTLS(cfg *Config) (server, client *tls.Config) {
	c, trust := cfg.TLS, newPeerTrust(cfg)
	server = c.Clone()
	server.ClientAuth = tls.RequireAnyClientCert
	server.GetConfigForClient = nil
	if server.MinVersion < tls.VersionTLS12 {
		server.MinVersion = tls.VersionTLS12
	}
	server.VerifyConnection = func(cs tls.ConnectionState) error {
		_, err := trust.verify(cs, x509.ExtKeyUsageClientAuth)
		return err
	}
	if trust.deny != nil {
		base := server.Clone()
		server.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			per := base.Clone()
			per.VerifyConnection = func(cs tls.ConnectionState) error {
				name, err := trust.verify(cs, x509.ExtKeyUsageClientAuth)
				if err == nil && !trust.deny.opened(hello.Conn, name) {
					err = fmt.Errorf("zaris: node %q is on the deny list", name)
				}
				return err
			}
			return per, nil
		}
	}
	client = c.Clone()
	client.InsecureSkipVerify = true // peerTrust checks the chain, the node's name and ServerName
	client.VerifyConnection = func(cs tls.ConnectionState) error {
		_, err := trust.verify(cs, x509.ExtKeyUsageServerAuth)
		return err
	}
	if client.MinVersion < tls.VersionTLS12 {
		client.MinVersion = tls.VersionTLS12
	}
	if client.GetClientCertificate == nil && c.GetCertificate != nil && len(c.Certificates) == 0 {
		get := c.GetCertificate
		client.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return get(&tls.ClientHelloInfo{})
		}
	}
	return server, client
}

// tlsDialer dials peers through the inner dialer and runs the TLS handshake within the dial's context.
type tlsDialer struct {
	inner  transport.Dialer
	config *tls.Config
	trust  peerTrust
}

func (d tlsDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	raw, err := d.inner.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	conn := tls.Client(raw, d.config)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("zaris: TLS handshake with %s: %w", addr, err)
	}
	if d.trust.deny != nil {
		name, _ := d.trust.nodeName(conn.ConnectionState().PeerCertificates[0])
		if !d.trust.deny.opened(raw, name) {
			raw.Close()
			return nil, fmt.Errorf("zaris: TLS handshake with %s: node %q is on the deny list", addr, name)
		}
	}
	return &peerConn{Conn: conn, deny: d.trust.deny}, nil
}

// peerConn is a TLS connection between peers whose Close does not wait on the other end. tls.Conn's Close
// first sends a close_notify alert, which can block for seconds on a peer that stopped reading, and a
// node closes its connections one after another as it stops. Frames carry their own length, so the alert
// guards against no truncation here.
type peerConn struct {
	*tls.Conn
	deny *DenyList // which closes the connection if the peer is denied later
}

func (c *peerConn) Close() error {
	c.deny.closed(c.NetConn())
	err := c.NetConn().Close()
	c.Conn.Close() // the alert's write fails at once on the closed connection
	return err
}

// secureListener wraps the data port's listener in TLS when the config asks for it.
func secureListener(cfg *Config, ln net.Listener) net.Listener {
	if cfg.TLS == nil {
		return ln
	}
	server, _ := peerTLS(cfg)
	return peerListener{Listener: tls.NewListener(ln, server), deny: cfg.DeniedPeers}
}

// peerListener hands out the TLS connections of its listener as peerConns.
type peerListener struct {
	net.Listener
	deny *DenyList
}

func (l peerListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &peerConn{Conn: conn.(*tls.Conn), deny: l.deny}, nil
}

// secureDialer wraps d in TLS when the config asks for it.
func secureDialer(cfg *Config, d transport.Dialer) transport.Dialer {
	if cfg.TLS == nil {
		return d
	}
	_, client := peerTLS(cfg)
	return tlsDialer{inner: d, config: client, trust: newPeerTrust(cfg)}
}

// validGossipKey reports whether key has a length serf accepts: 16, 24 or 32 bytes (AES-128, -192, -256).
func validGossipKey(key []byte) bool {
	switch len(key) {
	case 0, 16, 24, 32:
		return true
	}
	return false
}

// TLSFromFiles returns a TLS config that presents the certificate and key in PEM files certFile and
// keyFile, and trusts the CA certificates in PEM file caFile. Config.TLS needs a CA; a RESP endpoint whose
// clients bring no certificate may pass caFile "". Each file is read again when it changes, so that
// certificates can be renewed, and the CA rotated, without a restart.
func TLSFromFiles(certFile, keyFile, caFile string) (*tls.Config, error) {
	var pool *x509.CertPool
	if caFile != "" {
		var err error
		if pool, err = loadCAFile(caFile); err != nil {
			return nil, err
		}
	}
	kp := &keyPairFiles{cert: certFile, key: keyFile}
	if _, err := kp.current(); err != nil {
		return nil, err
	}
	return &tls.Config{
		RootCAs:        pool,
		ClientCAs:      pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.current() },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return kp.current()
		},
		MinVersion: tls.VersionTLS12,
	}, nil
}

// keyPairFiles is a certificate and key read from files, read again when either file's modification time
// or size changes.
type keyPairFiles struct {
	cert, key string

	mu     sync.Mutex
	loaded *tls.Certificate
	stamp  [2]fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// current returns the key pair, reading it again if the files changed. A renewal caught half-written
// keeps the previous pair until both files load together.
func (kp *keyPairFiles) current() (*tls.Certificate, error) {
	c, errC := stampOf(kp.cert)
	k, errK := stampOf(kp.key)
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if err := errors.Join(errC, errK); err != nil {
		if kp.loaded != nil {
			return kp.loaded, nil
		}
		return nil, fmt.Errorf("zaris: read certificate: %w", err)
	}
	if kp.loaded != nil && kp.stamp == [2]fileStamp{c, k} {
		return kp.loaded, nil
	}
	pair, err := tls.LoadX509KeyPair(kp.cert, kp.key)
	if err != nil {
		if kp.loaded != nil {
			return kp.loaded, nil
		}
		return nil, fmt.Errorf("zaris: load certificate: %w", err)
	}
	kp.loaded, kp.stamp = &pair, [2]fileStamp{c, k}
	return kp.loaded, nil
}

// Gossip key rotation, cluster-wide: install the new key on every member, make it the one they encrypt
// with, then remove the old one. Each call asks every member and fails unless all of them answered.
// Members that join later need the key in their GossipKey.

// changeKey runs op, one step of a rotation, with key on every member's keyring.
func (m *membership) changeKey(cfg *Config, key []byte, op func(*serf.KeyManager, string) (*serf.KeyResponse, error)) error {
	if cfg.GossipKey == nil {
		return fmt.Errorf("%w: gossip keys need a GossipKey to start with", ErrInvalidConfig)
	}
	if len(key) == 0 || !validGossipKey(key) {
		return fmt.Errorf("%w: gossip key of %d bytes; it must be 16, 24 or 32", ErrInvalidConfig, len(key))
	}
	resp, err := op(m.serf.KeyManager(), base64.StdEncoding.EncodeToString(key))
	if err != nil {
		return fmt.Errorf("zaris: gossip key change: %w", err)
	}
	if resp.NumErr > 0 || resp.NumResp < resp.NumNodes {
		return fmt.Errorf("zaris: gossip key change: %d of %d members answered, %d failed: %v", resp.NumResp, resp.NumNodes, resp.NumErr, resp.Messages)
	}
	return nil
}
