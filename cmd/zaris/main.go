// Command zaris runs one Zaris node as a standalone server that speaks the Redis Cluster protocol, so
// unmodified Redis Cluster clients (redis-cli -c, go-redis ClusterClient, ...) can use the cluster.
//
// Every flag can also be set through an environment variable: --gossip-addr is ZARIS_GOSSIP_ADDR, and so
// on. A flag on the command line wins over the variable. SIGTERM or SIGINT makes the node leave the
// cluster gracefully; it exits 1 when the leave cannot finish within --leave-timeout (no leader, or nowhere
// to move its partitions), and then it has closed as a failed node would, never saying goodbye while it held
// the only live copy of a partition.
//
// `zaris leave` makes a running server leave (a container's pre-stop hook); `zaris recover` has a live node
// rebuild the control plane from the live nodes after a majority of its voters died for good.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/internal/gcheadroom"
)

// tlsFiles are the PEM files of the node's certificate, its private key and the CA that signs the
// cluster's certificates (--tls-cert, --tls-key, --tls-ca), shared by the peers' TLS and the RESP port's.
type tlsFiles struct {
	cert, key, ca string
	respCA        string // --resp-tls-ca: the CA of RESP clients' certificates, when not --tls-ca
	deny          string // --tls-deny-file
	cluster       string // --cluster-name
	peerDNSName   string // --tls-peer-dns-name
}

// options are the server's settings, from flags and environment.
type options struct {
	version          bool
	previousProtocol bool
	name             string
	gossipAddr       string
	dataAddr         string
	respAddr         string
	join             string
	bootstrapExpect  int
	dataDir          string
	backupDir        string
	diskDurability   zaris.DiskDurability
	minInSync        int
	lostPartition    time.Duration
	rf               int
	password         string
	passwordFile     string
	aclFile          string
	tls              tlsFiles
	respTLS          bool
	respClientAuth   bool
	maxClients       int
	maxPreAuth       int
	idleTimeout      time.Duration
	commandTimeout   time.Duration
	authTimeout      time.Duration
	maxValueSize     int
	maxMemory        int64
	evictionPolicy   string
	notifyEvents     string
	maxQueryBuffer   int
	gossipKey        string
	openGossip       bool
	timing           string
	logLevel         string
	leaveTimeout     time.Duration
	http             httpOptions
	joinTimeout      time.Duration
	failoverTimeout  time.Duration
	txnTimeout       time.Duration
	deadServer       time.Duration
	eviction         time.Duration
	dataPort         dataPortOptions
	gcHeadroom       int
}

// dataPortOptions bound what the data port's peers may hold on this node.
type dataPortOptions struct {
	maxConns, maxRequests int
	idle, read, write     time.Duration
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "leave" {
		os.Exit(runLeave(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "recover" {
		os.Exit(runRecover(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && (os.Args[1] == "backup" || os.Args[1] == "restore") {
		os.Exit(runBackup(os.Args[2:], os.Args[1] == "restore", os.Stdout, os.Stderr))
	}
	opts, err := parseOptions(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "zaris:", err)
		os.Exit(2)
	}
	if opts.version {
		fmt.Println(versionLine())
		return
	}
	log := newLogger(opts.logLevel)
	if err := run(opts, log); err != nil {
		log.Error("zaris stopped", "err", err)
		os.Exit(1)
	}
}

// versionLine describes this build: its release, the protocol it speaks, the data dir format it writes and
// the Go release it was built with.
func versionLine() string {
	return fmt.Sprintf("zaris %s (protocol %d, data dir format %d, %s)", zaris.Version, zaris.ProtocolVersion, zaris.DataDirFormat, runtime.Version())
}

// envName is the environment variable that backs a flag: --gossip-addr is ZARIS_GOSSIP_ADDR.
func envName(flagName string) string {
	return "ZARIS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func parseOptions(args []string) (options, error) {
	def := zaris.DefaultConfig()
	var o options
	fs := flag.NewFlagSet("zaris", flag.ContinueOnError)
	fs.BoolVar(&o.version, "version", false, "print the release, its protocol and its data dir format, and exit")
	fs.BoolVar(&o.previousProtocol, "previous-protocol", false, "speak the previous release's protocol, so that the cluster's stays there: "+
		"during a rolling upgrade, keeps a rollback to the previous release possible")
	fs.StringVar(&o.name, "name", def.Name, "node name, unique in the cluster")
	fs.StringVar(&o.gossipAddr, "gossip-addr", "127.0.0.1:7946", "host:port for membership gossip (UDP and TCP)")
	fs.StringVar(&o.dataAddr, "data-addr", "127.0.0.1:7947", "host:port of the data and control port; the host must be reachable by the other nodes")
	fs.StringVar(&o.respAddr, "resp-addr", "127.0.0.1:6379", "host:port of the Redis Cluster endpoint")
	fs.StringVar(&o.join, "join", "", "comma-separated gossip addresses of existing members; empty starts a new cluster")
	fs.IntVar(&o.bootstrapExpect, "bootstrap-expect", 1, "nodes that must be present before the first partition map is assigned")
	fs.StringVar(&o.backupDir, "backup-dir", "", "directory under which `zaris backup` and `zaris restore` (BACKUP over RESP) write and read backups; empty refuses them")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory for the op logs and snapshots; empty keeps everything in memory")
	fs.TextVar(&o.diskDurability, "disk-durability", zaris.DiskWritten, "with --data-dir, how far a write must reach on every copy's disk before it is acknowledged: "+
		"written (handed to the OS: survives every process killed), synced (fsync: survives power loss) or behind (not waited for)")
	fs.IntVar(&o.rf, "rf", def.ReplicationFactor, "replication factor; every member must agree")
	fs.IntVar(&o.minInSync, "min-insync", def.MinInSync, "fewest in-sync copies, the owner included, a write must reach; fewer refuses it")
	fs.StringVar(&o.password, "password", "", "password RESP clients must give with AUTH or HELLO (the user \"default\"); empty: none (prefer ZARIS_PASSWORD or --password-file: a command line is visible to every local user)")
	fs.StringVar(&o.passwordFile, "password-file", "", "file holding --password, its first line")
	fs.StringVar(&o.aclFile, "acl-file", "", "file of RESP users, one a line as in Redis's ACL files: user <name> on|off >password ~pattern +@all|+@read")
	fs.StringVar(&o.tls.cert, "tls-cert", "", "PEM file of this node's certificate: with --tls-ca, its peers and it speak mutual TLS; with --resp-tls, RESP clients too (read again when the file changes)")
	fs.StringVar(&o.tls.key, "tls-key", "", "PEM file of the private key of --tls-cert")
	fs.StringVar(&o.tls.ca, "tls-ca", "", "PEM file of the CA that signs every node's certificate (and, with --resp-tls-client-auth, the RESP clients')")
	fs.StringVar(&o.tls.cluster, "cluster-name", zaris.DefaultClusterName, "the cluster's name in its nodes' certificates: a peer's must carry the URI SAN zaris://<cluster-name>/node/<its --name>")
	fs.StringVar(&o.tls.peerDNSName, "tls-peer-dns-name", "", "also take a certificate holding this DNS SAN as a node's, known by its common name (for a CA that issues no URI SANs)")
	fs.StringVar(&o.tls.deny, "tls-deny-file", "", "file of node names, one a line, whose certificates every peer port refuses though --tls-ca signed them; read again every 2 s, and a newly denied node's connections are closed")
	fs.StringVar(&o.tls.respCA, "resp-tls-ca", "", "PEM file of the CA that signs RESP clients' certificates under --resp-tls-client-auth (default: --tls-ca); read again when it changes")
	fs.BoolVar(&o.respTLS, "resp-tls", false, "serve RESP over TLS with --tls-cert and --tls-key (clients: redis-cli --tls)")
	fs.BoolVar(&o.respClientAuth, "resp-tls-client-auth", false, "with --resp-tls, accept only RESP clients with a certificate signed by --resp-tls-ca, or else --tls-ca")
	fs.IntVar(&o.maxClients, "max-clients", def.RESPMaxClients, "RESP connections open at once; one more is refused (those not logged in take at most three quarters)")
	fs.IntVar(&o.maxPreAuth, "max-preauth-per-addr", def.RESPMaxPreAuthPerAddr, "RESP connections from one IP address not logged in yet, when a password is needed; one more is refused")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", def.RESPIdleTimeout, "close a RESP connection idle this long (0: never)")
	fs.DurationVar(&o.commandTimeout, "command-timeout", def.RESPCommandTimeout, "close a RESP connection whose command is still incomplete this long after it began (0: never)")
	fs.DurationVar(&o.authTimeout, "auth-timeout", def.RESPAuthTimeout, "close a RESP connection not logged in this long after it opened, when a password is needed (0: never)")
	fs.IntVar(&o.maxValueSize, "max-value-size", def.MaxValueSize, "largest value, in bytes; larger ones are refused with an error")
	fs.IntVar(&o.maxQueryBuffer, "max-query-buffer", 0, "bytes one RESP command may take in memory (0: twice --max-value-size plus 1 MiB)")
	fs.StringVar(&o.gossipKey, "gossip-key", "", "base64 key of 16, 24 or 32 bytes that encrypts and authenticates gossip; every member needs it (prefer ZARIS_GOSSIP_KEY)")
	fs.BoolVar(&o.openGossip, "open-gossip", false, "with --tls-ca, run gossip without --gossip-key: any process that reaches --gossip-addr can join membership")
	fs.StringVar(&o.timing, "timing", "lan", "failure-detection and consensus timings: lan or local (one machine)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&o.leaveTimeout, "leave-timeout", 10*time.Second, "how long a graceful leave may take on SIGTERM")
	fs.DurationVar(&o.joinTimeout, "join-timeout", time.Minute, "how long to keep retrying when no --join address answers yet")
	fs.DurationVar(&o.failoverTimeout, "failover-timeout", def.FailoverTimeout, "how long a failed owner must stay silent before its partitions fail over")
	fs.DurationVar(&o.txnTimeout, "txn-timeout", def.TxnTimeout, "how long a transaction over several segments may hold its keys before their owners resolve them")
	fs.DurationVar(&o.deadServer, "dead-server-timeout", def.DeadServerTimeout, "how long a failed member stays a control-plane server before a live one replaces it")
	fs.DurationVar(&o.lostPartition, "lost-partition-timeout", def.LostPartitionTimeout, "how long a partition whose last copies are on a failed node's disk waits for that node before it is recreated empty")
	fs.DurationVar(&o.eviction, "eviction-timeout", def.EvictionTimeout, "how long a failed member keeps its partitions before they are rebalanced to the others; at least --failover-timeout")
	fs.StringVar(&o.http.addr, "http-addr", "", "host:port of the operations endpoint: Prometheus /metrics, the status page at /, /healthz and /readyz; empty: off")
	fs.StringVar(&o.http.password, "http-password", "", "password the operations endpoint asks with HTTP basic auth, except on /healthz and /readyz; empty: none (prefer ZARIS_HTTP_PASSWORD)")
	fs.BoolVar(&o.http.tls, "http-tls", false, "serve the operations endpoint over HTTPS with --tls-cert and --tls-key")
	fs.BoolVar(&o.http.pprof, "pprof", false, "also serve net/http/pprof under /debug/pprof/ on --http-addr")
	fs.IntVar(&o.gcHeadroom, "gc-headroom", 20, "how far the heap may grow between collections, in percent of the live data (at least 16 MiB, at most "+
		"Go's GOGC=100); 0, or GOGC set in the environment, leaves the collector to GOGC")
	fs.Func("maxmemory", "bound on the data this node keeps, in Redis's units (100mb, 2gb); writes past it evict or are refused, per --maxmemory-policy, and the runtime's memory limit is set to it plus 15% plus 64 MiB (unless GOMEMLIMIT is set); 0: none", func(v string) error {
		n, err := zaris.ParseMemorySize(v)
		o.maxMemory = n
		return err
	})
	fs.StringVar(&o.evictionPolicy, "maxmemory-policy", zaris.EvictionNoEviction, "what a write past --maxmemory does: noeviction refuses it; allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru, volatile-lfu, volatile-random and volatile-ttl evict keys first")
	fs.StringVar(&o.notifyEvents, "notify-keyspace-events", "", "keyspace notifications published to this node's RESP subscribers for the keys it owns, as Redis's notify-keyspace-events (KEA: all)")
	o.dataPort.register(fs, def)
	if err := applyEnv(fs); err != nil {
		return o, err
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.passwordFile != "" {
		if o.password != "" {
			return o, errors.New("--password and --password-file are exclusive")
		}
		b, err := os.ReadFile(o.passwordFile)
		if err != nil {
			return o, fmt.Errorf("--password-file: %w", err)
		}
		o.password, _, _ = strings.Cut(string(b), "\n")
		o.password = strings.TrimSuffix(o.password, "\r")
		if o.password == "" {
			return o, fmt.Errorf("--password-file %s: the first line is empty", o.passwordFile)
		}
	}
	return o, nil
}

// register declares the data port's flags, with the library's defaults.
func (d *dataPortOptions) register(fs *flag.FlagSet, def zaris.Config) {
	fs.IntVar(&d.maxConns, "data-max-conns", def.DataMaxConns, "data-plane connections the data port serves at once; more are refused (each peer needs one)")
	fs.IntVar(&d.maxRequests, "data-max-requests", def.DataMaxRequests, "data-plane requests served at once; beyond, peers wait")
	fs.DurationVar(&d.idle, "data-idle-timeout", def.DataIdleTimeout, "closes a data-port connection idle for this long; peers redial when they need it")
	fs.DurationVar(&d.read, "data-read-timeout", def.DataReadTimeout, "how long the rest of a data-port frame may take once its first byte has arrived")
	fs.DurationVar(&d.write, "data-write-timeout", def.DataWriteTimeout, "cuts a data-port peer that does not take a write within this long")
}

// apply sets the data port's bounds in cfg; a per-peer cap above the node's is lowered to it.
func (d dataPortOptions) apply(cfg *zaris.Config) {
	cfg.DataMaxConns = d.maxConns
	cfg.DataMaxRequests = d.maxRequests
	cfg.DataMaxConnRequests = min(cfg.DataMaxConnRequests, d.maxRequests)
	cfg.DataIdleTimeout = d.idle
	cfg.DataReadTimeout = d.read
	cfg.DataWriteTimeout = d.write
}

// applyEnv sets every flag whose environment variable is present; command-line flags parsed afterwards win.
func applyEnv(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv(envName(f.Name)); ok && err == nil {
			if setErr := f.Value.Set(v); setErr != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, setErr)
			}
		}
	})
	return err
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// config turns the options into the library's Config.
func (o options) config(log *slog.Logger) (zaris.Config, error) {
	cfg := zaris.DefaultConfig()
	cfg.Name = o.name
	cfg.GossipAddr = o.gossipAddr
	cfg.DataAddr = o.dataAddr
	cfg.RESPAddr = o.respAddr
	cfg.RESPPassword = o.password
	cfg.RESPMaxClients = o.maxClients
	cfg.RESPIdleTimeout = o.idleTimeout
	cfg.RESPCommandTimeout = o.commandTimeout
	cfg.RESPAuthTimeout = o.authTimeout
	cfg.RESPMaxPreAuthPerAddr = o.maxPreAuth
	cfg.RESPMaxQueryBuffer = o.maxQueryBuffer
	cfg.MaxValueSize = o.maxValueSize
	cfg.MaxMemory, cfg.EvictionPolicy = o.maxMemory, o.evictionPolicy
	cfg.PreviousProtocol = o.previousProtocol
	cfg.NotifyKeyspaceEvents = o.notifyEvents
	cfg.MaxFrameSize = max(cfg.MaxFrameSize, o.maxValueSize+64<<10) // a value must fit in a data-plane frame
	cfg.BootstrapExpect = o.bootstrapExpect
	cfg.ReplicationFactor = o.rf
	cfg.MinInSync = o.minInSync
	cfg.DataDir = o.dataDir
	cfg.BackupDir = o.backupDir
	cfg.DiskDurability = o.diskDurability
	cfg.FailoverTimeout = o.failoverTimeout
	cfg.TxnTimeout = o.txnTimeout
	cfg.DeadServerTimeout = o.deadServer
	cfg.EvictionTimeout = o.eviction
	cfg.LostPartitionTimeout = o.lostPartition
	o.dataPort.apply(&cfg)
	cfg.Logger = log
	if err := o.security(&cfg); err != nil {
		return cfg, err
	}
	for _, addr := range strings.Split(o.join, ",") {
		if addr = strings.TrimSpace(addr); addr != "" {
			cfg.Join = append(cfg.Join, addr)
		}
	}
	if err := o.respSecurity(&cfg); err != nil {
		return cfg, err
	}
	switch o.timing {
	case "lan":
		cfg.Timing = zaris.LANTiming()
	case "local":
		cfg.Timing = zaris.LocalTiming()
	default:
		return cfg, fmt.Errorf("--timing %q: want lan or local", o.timing)
	}
	return cfg, nil
}

// security sets peer TLS and the gossip key from the options: peers speak mutual TLS when the node has a
// certificate and the cluster's CA.
func (o options) security(cfg *zaris.Config) error {
	cfg.ClusterName, cfg.PeerDNSName, cfg.OpenGossip = o.tls.cluster, o.tls.peerDNSName, o.openGossip
	switch f := o.tls; {
	case f.deny != "" && f.ca == "":
		return errors.New("--tls-deny-file needs --tls-ca")
	case f.cert != "" && f.key != "" && f.ca != "":
		tlsCfg, err := zaris.TLSFromFiles(f.cert, f.key, f.ca)
		if err != nil {
			return err
		}
		cfg.TLS = tlsCfg
		if f.deny != "" {
			names, err := readDenyFile(f.deny)
			if err != nil {
				return err
			}
			cfg.DeniedPeers = zaris.NewDenyList(names...)
		}
	case (f.cert != "") != (f.key != ""):
		return errors.New("--tls-cert and --tls-key go together")
	case f.ca != "" && f.cert == "":
		return errors.New("--tls-ca needs --tls-cert and --tls-key")
	case f.cert != "" && !o.respTLS && !o.http.tls:
		return errors.New("--tls-cert without --tls-ca secures nothing: peers need the CA, RESP needs --resp-tls, the operations endpoint --http-tls")
	}
	if o.gossipKey != "" {
		key, err := base64.StdEncoding.DecodeString(o.gossipKey)
		if err != nil {
			return fmt.Errorf("--gossip-key: %w", err)
		}
		cfg.GossipKey = key
	}
	return nil
}

// respSecurity sets the RESP endpoint's users and TLS from the options.
func (o options) respSecurity(cfg *zaris.Config) error {
	if o.aclFile != "" {
		users, err := loadACLFile(o.aclFile)
		if err != nil {
			return err
		}
		cfg.RESPUsers = withDefaultUser(users, cfg.RESPPassword)
	}
	if o.respClientAuth && !o.respTLS {
		return errors.New("--resp-tls-client-auth needs --resp-tls")
	}
	if !o.respTLS {
		return nil
	}
	if o.tls.cert == "" || o.tls.key == "" {
		return errors.New("--resp-tls needs --tls-cert and --tls-key")
	}
	clientCA := cmp.Or(o.tls.respCA, o.tls.ca)
	if o.respClientAuth && clientCA == "" {
		return errors.New("--resp-tls-client-auth needs --resp-tls-ca or --tls-ca")
	}
	if o.tls.respCA != "" && !o.respClientAuth {
		return errors.New("--resp-tls-ca needs --resp-tls-client-auth")
	}
	base := cfg.TLS
	if base == nil || clientCA != o.tls.ca {
		var err error
		if base, err = zaris.TLSFromFiles(o.tls.cert, o.tls.key, clientCA); err != nil {
			return err
		}
	}
	cfg.RESPTLS = base.Clone()
	cfg.RESPTLS.ClientAuth = tls.NoClientCert
	if o.respClientAuth {
		cfg.RESPTLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return nil
}

// run joins the cluster, serves until SIGTERM or SIGINT, then leaves gracefully.
func run(o options, log *slog.Logger) error {
	cfg, err := o.config(log)
	if err != nil {
		return err
	}
	if tuner := o.keepGCHeadroom(log); tuner != nil {
		defer tuner.Stop()
	}
	o.limitMemory(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if cfg.DeniedPeers != nil {
		followed := followDenyFile(ctx, o.tls.deny, cfg.DeniedPeers, log)
		defer func() { stop(); <-followed }()
	}
	ops, err := o.startOpsServer(log)
	if err != nil {
		return err
	}
	if ops != nil {
		defer ops.shutdown(context.Background())
	}
	node, err := joinWithRetry(ctx, cfg, o.joinTimeout, log)
	if err != nil {
		return err
	}
	if ops != nil {
		ops.joined(node)
	}
	log.Info("zaris node started", "name", node.Name(), "resp", node.RESPAddr(), "data", node.DataAddr(),
		"gossip", node.GossipAddr(), "pid", strconv.Itoa(os.Getpid()))
	<-ctx.Done()
	stop()
	log.Info("leaving the cluster", "timeout", o.leaveTimeout)
	leaveCtx, cancel := context.WithTimeout(context.Background(), o.leaveTimeout)
	defer cancel()
	err = node.Leave(leaveCtx)
	switch {
	case errors.Is(err, zaris.ErrNotDrained):
		return fmt.Errorf("leave did not finish within --leave-timeout %v; the cluster fails over what this node "+
			"held: %w", o.leaveTimeout, err)
	case err != nil && !errors.Is(err, zaris.ErrClosed):
		return fmt.Errorf("leave: %w", err)
	}
	log.Info("left the cluster")
	return nil
}

// gcHeadroomFloor is the least room --gc-headroom leaves the heap: below four times this much live data,
// the collector runs as often as Go's default makes it.
const gcHeadroomFloor = 16 << 20

// keepGCHeadroom starts tuning the collector per --gc-headroom, unless it is 0 or GOGC is set; nil then.
func (o options) keepGCHeadroom(log *slog.Logger) *gcheadroom.Tuner {
	if o.gcHeadroom <= 0 {
		return nil
	}
	if v, set := os.LookupEnv("GOGC"); set {
		log.Info("GOGC is set: --gc-headroom ignored", "GOGC", v)
		return nil
	}
	return gcheadroom.Keep(o.gcHeadroom, gcHeadroomFloor)
}

// memoryLimitBase is what a node takes beyond its data, op log and near cache: the runtime, the control
// plane, connections and their buffers.
const memoryLimitBase = 64 << 20

// memoryLimit is the Go runtime's soft memory limit under --maxmemory: what MaxMemory bounds, 15% more for
// the room the collector needs, and memoryLimitBase. Zero without --maxmemory.
func memoryLimit(maxMemory int64) int64 {
	if maxMemory <= 0 {
		return 0
	}
	return maxMemory + maxMemory*15/100 + memoryLimitBase
}

// limitMemory sets the runtime's memory limit (memoryLimit) under --maxmemory, unless GOMEMLIMIT is set,
// so the collector runs as often as it must to keep the process near the bound.
func (o options) limitMemory(log *slog.Logger) {
	limit := memoryLimit(o.maxMemory)
	if limit == 0 {
		return
	}
	if v, set := os.LookupEnv("GOMEMLIMIT"); set {
		log.Info("GOMEMLIMIT is set: the memory limit --maxmemory implies is not", "GOMEMLIMIT", v)
		return
	}
	debug.SetMemoryLimit(limit)
	log.Info("memory limit", "bytes", limit)
}

// startOpsServer starts the operations endpoint when --http-addr is set; nil otherwise.
func (o options) startOpsServer(log *slog.Logger) (*opsServer, error) {
	if o.http.addr == "" {
		if o.http.pprof || o.http.tls || o.http.password != "" {
			return nil, errors.New("--pprof, --http-tls and --http-password need --http-addr")
		}
		return nil, nil
	}
	var tlsCfg *tls.Config
	if o.http.tls {
		if o.tls.cert == "" || o.tls.key == "" {
			return nil, errors.New("--http-tls needs --tls-cert and --tls-key")
		}
		files, err := zaris.TLSFromFiles(o.tls.cert, o.tls.key, "") // read again when the files change
		if err != nil {
			return nil, fmt.Errorf("--http-tls: %w", err)
		}
		tlsCfg = &tls.Config{GetCertificate: files.GetCertificate, MinVersion: tls.VersionTLS12}
	}
	return startOpsServer(o.http, tlsCfg, log)
}
