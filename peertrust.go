package zaris

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"
)

// Who may be a peer. A certificate signed by the cluster's CA is not enough: the same CA may sign an
// application's RESP client certificate. A peer's certificate must also name it a node of this cluster,
// by the URI SAN zaris://<ClusterName>/node/<name> (or Config.PeerDNSName), and that name must not be
// on Config.DeniedPeers. Both ends of every peer connection check the other's, raft's included.

// DefaultClusterName is the cluster name a Config without one uses.
const DefaultClusterName = "zaris"

// nodeURIScheme is the scheme of the URI SAN that names a node in its certificate.
const nodeURIScheme = "zaris"

// NodeCertificateURI returns the URI SAN that a certificate must carry to serve node name of cluster
// cluster: zaris://<cluster>/node/<name>.
func NodeCertificateURI(cluster, name string) string {
	return (&url.URL{Scheme: nodeURIScheme, Host: cluster, Path: "/node/" + name}).String()
}

// validClusterName reports whether name can be the host of a node's URI SAN.
func validClusterName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// peerTrust is what one end of a peer connection checks the other's certificate against.
type peerTrust struct {
	roots      *x509.CertPool // the cluster's CA; read again from its file when TLSFromFiles made it
	cluster    string
	dnsName    string // a DNS SAN that also marks a node's certificate; "" for none
	serverName string // a host name the dialed peer's certificate must hold; "" for none
	deny       *DenyList
}

func newPeerTrust(cfg *Config) peerTrust {
	roots := cfg.TLS.RootCAs
	if roots == nil {
		roots = cfg.TLS.ClientCAs // the cluster's CA, never the system's trust store
	}
	cluster := cfg.ClusterName
	if cluster == "" {
		cluster = DefaultClusterName
	}
	return peerTrust{roots: roots, cluster: cluster, dnsName: cfg.PeerDNSName, serverName: cfg.TLS.ServerName, deny: cfg.DeniedPeers}
}

// verify checks a peer's certificate chain against the cluster's CA for usage, and that it names an
// allowed node of this cluster, whose name it returns. The dialing end also checks serverName, if set.
func (pt peerTrust) verify(cs tls.ConnectionState, usage x509.ExtKeyUsage) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", errors.New("zaris: peer presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	roots := currentCAs(pt.roots)
	if roots == nil {
		return "", errors.New("zaris: no CA to check a peer's certificate against")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}
	if usage == x509.ExtKeyUsageServerAuth {
		opts.DNSName = pt.serverName
	}
	if _, err := leaf.Verify(opts); err != nil {
		return "", err
	}
	name, ok := pt.nodeName(leaf)
	if !ok {
		return "", fmt.Errorf("zaris: certificate %q names no node of cluster %q (want the URI SAN %s)",
			leaf.Subject.CommonName, pt.cluster, NodeCertificateURI(pt.cluster, "<name>"))
	}
	if pt.deny.Denies(name) {
		return "", fmt.Errorf("zaris: node %q is on the deny list", name)
	}
	return name, nil
}

// nodeName returns the node a certificate names in this cluster: by its node URI SAN, or, with a DNS
// name configured, by its common name when it holds that DNS SAN.
func (pt peerTrust) nodeName(c *x509.Certificate) (string, bool) {
	for _, u := range c.URIs {
		name, ok := strings.CutPrefix(u.Path, "/node/")
		if u.Scheme == nodeURIScheme && strings.EqualFold(u.Host, pt.cluster) && ok && name != "" && u.RawQuery == "" && u.Fragment == "" {
			return name, true
		}
	}
	if pt.dnsName != "" && slices.ContainsFunc(c.DNSNames, func(d string) bool { return strings.EqualFold(d, pt.dnsName) }) && c.Subject.CommonName != "" {
		return c.Subject.CommonName, true
	}
	return "", false
}

// checkOwnCertificate fails when the node's own certificate would be refused by its peers: it must name
// the node in this cluster. A node started with another's certificate, or one without its name, learns
// it at once rather than from failed handshakes.
func checkOwnCertificate(cfg *Config) error {
	var cert *tls.Certificate
	switch c := cfg.TLS; {
	case len(c.Certificates) > 0:
		cert = &c.Certificates[0]
	case c.GetCertificate != nil:
		got, err := c.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			return fmt.Errorf("%w: TLS certificate: %v", ErrInvalidConfig, err)
		}
		cert = got
	default:
		return fmt.Errorf("%w: TLS has no certificate", ErrInvalidConfig)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if len(cert.Certificate) == 0 {
			return fmt.Errorf("%w: TLS has an empty certificate", ErrInvalidConfig)
		}
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return fmt.Errorf("%w: TLS certificate: %v", ErrInvalidConfig, err)
		}
	}
	pt := newPeerTrust(cfg)
	if name, ok := pt.nodeName(leaf); !ok || name != cfg.Name {
		return fmt.Errorf("%w: the TLS certificate does not name node %q of cluster %q: it needs the URI SAN %s", ErrInvalidConfig,
			cfg.Name, pt.cluster, NodeCertificateURI(pt.cluster, cfg.Name))
	}
	return nil
}

// DenyList names nodes whose certificates every peer port refuses though the cluster's CA signed them: a
// way to shut out a node whose key was lost, until the CA's own rotation. It may change at any time; Set
// also closes the connections open with a node it newly denies. One list may serve several nodes.
type DenyList struct {
	mu    sync.Mutex
	names map[string]bool
	open  map[net.Conn]string // peer connections past their handshake, by the node at the other end
}

// NewDenyList returns a deny list of names.
func NewDenyList(names ...string) *DenyList {
	d := &DenyList{open: map[net.Conn]string{}}
	d.Set(names...)
	return d
}

// Set makes names the whole list and closes the open connections with any node on it.
func (d *DenyList) Set(names ...string) {
	set := make(map[string]bool, len(names))
	for _, name := range names {
		set[name] = true
	}
	d.mu.Lock()
	d.names = set
	var cut []net.Conn
	for conn, name := range d.open {
		if set[name] {
			cut = append(cut, conn)
			delete(d.open, conn)
		}
	}
	d.mu.Unlock()
	for _, conn := range cut {
		conn.Close()
	}
}

// Denies reports whether name is on the list. A nil list denies no one.
func (d *DenyList) Denies(name string) bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.names[name]
}

// opened records an authenticated connection with node name, so that denying it later closes the
// connection. It reports false, recording nothing, if name is denied already.
func (d *DenyList) opened(conn net.Conn, name string) bool {
	if d == nil {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.names[name] {
		return false
	}
	d.open[conn] = name
	return true
}

// closed forgets conn.
func (d *DenyList) closed(conn net.Conn) {
	if d == nil {
		return
	}
	d.mu.Lock()
	delete(d.open, conn)
	d.mu.Unlock()
}

// Certificate authorities read from a file are read again when the file changes, so that a CA can be
// rotated without a restart: add the new CA to the file, renew every node's certificate, then remove the
// old CA. The pool TLSFromFiles puts in RootCAs and ClientCAs is a handle to its file: tls.Config.Clone
// keeps the pointer, and every place that checks a certificate asks currentCAs for the pool to check with.

// caFiles maps each pool TLSFromFiles made to the file it reads again, for as long as the pool lives.
var caFiles sync.Map // weak.Pointer[x509.CertPool] → *caFile

// caFile is a PEM file of CA certificates, read again when its modification time or size changes. A file
// caught half-written, or holding no certificate, keeps the last pool that loaded.
type caFile struct {
	path string

	mu    sync.Mutex
	pool  *x509.CertPool
	stamp fileStamp
}

// loadCAFile reads the CA file at path and returns a pool that currentCAs keeps current.
func loadCAFile(path string) (*x509.CertPool, error) {
	f := &caFile{path: path}
	pool, err := f.read()
	if err != nil {
		return nil, err
	}
	key := weak.Make(pool)
	caFiles.Store(key, f)
	runtime.AddCleanup(pool, func(key weak.Pointer[x509.CertPool]) { caFiles.Delete(key) }, key)
	return pool, nil
}

// read loads the file if it changed since the last load, and returns the current pool.
func (f *caFile) read() (*x509.CertPool, error) {
	stamp, err := stampOf(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil && f.pool != nil && stamp == f.stamp {
		return f.pool, nil
	}
	pool, err := parseCAs(f.path, err)
	if err != nil {
		if f.pool != nil {
			return f.pool, nil
		}
		return nil, err
	}
	f.pool, f.stamp = pool, stamp
	return pool, nil
}

func parseCAs(path string, statErr error) (*x509.CertPool, error) {
	if statErr != nil {
		return nil, fmt.Errorf("zaris: read CA file: %w", statErr)
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("zaris: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrInvalidConfig, path)
	}
	return pool, nil
}

// currentCAs returns the pool to check certificates against for pool: its file's current contents when
// TLSFromFiles made it, else pool itself.
func currentCAs(pool *x509.CertPool) *x509.CertPool {
	if pool == nil {
		return nil
	}
	f, ok := caFiles.Load(weak.Make(pool))
	if !ok {
		return pool
	}
	current, _ := f.(*caFile).read()
	return current
}

// currentClientCAs returns c, or, when its ClientCAs are read from a file, a config that asks for the
// file's current contents at each handshake.
func currentClientCAs(c *tls.Config) *tls.Config {
	if c == nil || c.ClientCAs == nil {
		return c
	}
	if _, ok := caFiles.Load(weak.Make(c.ClientCAs)); !ok || c.GetConfigForClient != nil {
		return c
	}
	base := c.Clone()
	out := c.Clone()
	out.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		per := base.Clone()
		per.ClientCAs = currentCAs(base.ClientCAs)
		return per, nil
	}
	return out
}
