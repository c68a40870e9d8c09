// Command zaris-chaos certifies a cluster of real zaris server processes on loopback. It joins the cluster
// as a lite member that all its clients call, kills, freezes and restarts servers on a seeded schedule
// (-nemesis mixed), kills one every 1 to 2 s and restarts it at once (-nemesis crash-restart), kills the
// oldest server for good every few seconds and starts a new one in its place (-nemesis replace), kills
// every server at once every 8 to 12 s and restarts them all from their data directories (-nemesis
// full-restart, which needs -data-dir), restarts the servers one at a time, each once the cluster is
// Healthy again or, as an orchestrator's rollout would, once the restarted process is ready or a delay
// after it serves (-nemesis rolling-restart, -rolling-pace, -rounds), or cuts the network between servers while it kills and
// restarts them (-nemesis partition). It then checks what the clients saw: no acknowledged write lost, no
// get denying one, no phantom value, every key linearizable. Beside the lite member's clients, the bank
// workload's clients run as processes of their own (bank-client, bankclients.go), each a lite member
// coordinating its transfers, and one of them is SIGKILLed every 1 to 3 s and restarted: the servers must
// resolve the transactions a dead coordinator left, all or nothing. It prints the report, with the restart
// schedules' recovery times and write stalls and the longest time no server led the control plane, and
// exits 1 if the cluster failed, never recovered, or went past -max-stall or -max-leaderless.
// With -secure, every process, the lite member included, speaks mutual TLS under a CA the run makes, and
// gossip is encrypted with a key the run draws.
//
// Under -nemesis partition each server runs in a network namespace of its own (named zch<pid>-<n>, on a
// bridge zch<pid> in a private 10.217.k.0/24), which needs root and iproute2; without them the command
// refuses to run that schedule. It makes one network fault at a time, 0.5 to 2 s after the last, held 2
// to 6 s: a symmetric split, a one-way cut (one link, or all of a server's outgoing or incoming traffic),
// the control-plane leader isolated, a partition's owner cut from its replicas, or a bridge (two sides
// only one server reaches). In two faults of three it SIGKILLs a server during the fault, one whose death
// leaves every partition it holds a live in-sync copy that the fault does not cut off (the failure model:
// a copy cut off is soon dropped or deposed), and restarts it 0.5 to 4 s later, before or after the heal.
// The lite member reaches every server throughout, as a client on another network would; its gossip
// follows the cuts, so it relays no failure probe across them. Every cut is healed before verification,
// and the namespaces are removed on exit, on interrupt too; a run killed before it could remove them has
// them removed by the next. A seed replays the same draws; which servers they pick depends on the
// cluster's map and leader at the time, as for the other schedules.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/chaos"
)

// The workload and the bounds of the certification, as in the in-process one.
const (
	bankAccounts = 8 // the bank workload's accounts
	bankClients  = 3 // and its clients, besides the others
	clients      = 10
	registers    = 200
	ledgerShare  = 0.3
	callTimeout  = 2 * time.Second
	maxRetries   = 6                // the lite member's routing retries
	settleBound  = 60 * time.Second // each wait for the cluster: serving, writable, healthy
	checkTimeout = 60 * time.Second // the linearizability check
	verifyBound  = 5 * time.Minute  // reading the whole ledger back
	gapOver      = 100 * time.Millisecond
	pollPause    = 50 * time.Millisecond
	liteLeave    = 2 * time.Second
	roundsBound  = 30 * time.Minute // -duration under -rounds unless set: a bound, not a pace
	cutShort     = 10 * time.Second // verification bound after an interrupt
	maxValueSize = 1 << 20          // -value-size bound: the workload holds every value in memory
	crashValue   = 1024             // ledger value size under -nemesis crash-restart unless -value-size says

	// The servers' timeouts under -nemesis replace unless the flags say: a dead voter leaves the control
	// plane, and a dead node's partitions move to the live ones, within seconds of its death.
	replaceDeadServer = 2 * time.Second
	replaceEviction   = 3 * time.Second
)

// splitBrainNote says which check of the in-process certification this command cannot make.
const splitBrainNote = "split-brain check (two owners acknowledging under one epoch) and replica digests need " +
	"the in-process hooks; not checked across processes"

// options are the command's flags.
type options struct {
	duration        time.Duration
	nodes           int
	seed            uint64
	rf              int
	bin             string
	dataDir         string
	failoverTimeout time.Duration
	deadServer      time.Duration // 0: the servers' default
	eviction        time.Duration // 0: the servers' default
	replaceEvery    time.Duration // mean pause between replacements under -nemesis replace
	rollingStop     string        // how -nemesis rolling-restart stops a server: a key of rollingStops
	rollingPace     string        // when -nemesis rolling-restart stops the next server (see parsePace)
	pace            rollingPace   // rollingPace, parsed
	timing          string        // the servers' --timing: local or lan
	rounds          int           // full rounds of -nemesis rolling-restart; 0: as many as -duration allows
	maxStall        time.Duration // the longest write stall a run may have; 0: not checked
	maxLeaderless   time.Duration // the longest time without a control-plane leader a run may have; 0: not checked
	nemesis         string
	valueSize       int
	verbose         bool
	secure          bool
	serverLogLevel  string
	historyOut      string // where to save the history as JSON; "" for nowhere
	upgrade         bool   // the first round of rolling restarts is a rolling upgrade (runUpgrade)
	upgradeFrom     string // the earlier build's binary; "" for this build speaking the previous protocol
	preload         int    // keys written before the faults begin, checked after -nemesis backup's restore
	restoreNodes    int    // the servers -nemesis backup restores into
	rate            int64  // backupRate, parsed
	backupRate      string // how fast -nemesis backup copies, in bytes a second; "" for unpaced
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == bankClientCommand {
		os.Exit(runBankClient(os.Args[2:]))
	}
	o, err := parseOptions(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "zaris-chaos:", err)
		os.Exit(2)
	}
	os.Exit(run(o))
}

// parseOptions reads the flags; without -seed it draws a seed, which run prints so the run can be replayed.
func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("zaris-chaos", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", time.Minute, "how long faults are injected")
	fs.IntVar(&o.nodes, "nodes", 5, "server processes to run")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the fault schedule and the workload (default: random)")
	fs.IntVar(&o.rf, "rf", 2, "replication factor of the cluster")
	fs.StringVar(&o.bin, "bin", "", "prebuilt zaris server binary (default: build ./cmd/zaris)")
	fs.StringVar(&o.dataDir, "data-dir", "", "root of the servers' data directories, one per node (default: memory only)")
	fs.DurationVar(&o.failoverTimeout, "failover-timeout", 500*time.Millisecond, "the servers' --failover-timeout")
	fs.DurationVar(&o.deadServer, "dead-server-timeout", 0, "the servers' --dead-server-timeout (default: theirs; "+
		replaceDeadServer.String()+" with -nemesis "+nemesisReplace+")")
	fs.DurationVar(&o.eviction, "eviction-timeout", 0, "the servers' --eviction-timeout (default: theirs; "+
		replaceEviction.String()+" with -nemesis "+nemesisReplace+")")
	fs.DurationVar(&o.replaceEvery, "replace-every", 10*time.Second, "mean pause between replacements under -nemesis "+
		nemesisReplace+", each drawn within ±20%")
	fs.StringVar(&o.rollingStop, "rolling-stop", "kill", "how -nemesis "+nemesisRollingRestart+
		" stops each server: kill (SIGKILL) or term (SIGTERM, a graceful leave)")
	fs.StringVar(&o.rollingPace, "rolling-pace", paceHealthy, "when -nemesis "+nemesisRollingRestart+
		" stops the next server: healthy (once every partition is Healthy), ready (once the restarted process "+
		"answers /readyz) or serve:<delay> (that long after the restarted process answers RESP)")
	fs.StringVar(&o.timing, "timing", "local", "the servers' --timing: local (fast timeouts for one machine) or lan "+
		"(the servers' default: elections in seconds, a new server votes after 10 s); the harness's own lite "+
		"members keep local")
	fs.IntVar(&o.rounds, "rounds", 0, "full rounds of -nemesis "+nemesisRollingRestart+", each server stopped once "+
		"per round; -duration then only bounds the run (default: rounds until -duration ends)")
	fs.DurationVar(&o.maxStall, "max-stall", 0, "fail the run if a put waits longer: from its start to its "+
		"own end or, if later, to the end of the first acknowledged put of its partition that ends after its start "+
		"(default: not checked)")
	fs.DurationVar(&o.maxLeaderless, "max-leaderless", 0, "fail the run if no server leads the control plane for "+
		"longer (default: not checked)")
	fs.StringVar(&o.nemesis, "nemesis", nemesisMixed, "fault schedule: "+nemesisMixed+" (kills, freezes, restarts), "+
		nemesisCrashRestart+" (a SIGKILL every 1-2 s, the victim restarted within 0.5 s), "+nemesisReplace+
		" (the oldest server killed for good and a new one started, every -replace-every), "+nemesisFullRestart+
		" (every 8-12 s all servers SIGKILLed at once and restarted within 0.5 s; needs -data-dir), "+
		nemesisRollingRestart+" (each server in turn stopped as -rolling-stop says and restarted at once, the next "+
		"once every partition is Healthy), "+nemesisBackup+" (a backup under the workload, every server then SIGKILLed "+
		"and the backup restored into -restore-nodes new servers, where the checks run as of its cut), or "+nemesisPartition+" (network faults between servers, each in its own "+
		"network namespace: "+describeFaults()+"; servers killed during them; needs root)")
	fs.IntVar(&o.valueSize, "value-size", 0, "bytes of each ledger value, the key padded (default: the key itself; "+
		strconv.Itoa(crashValue)+" with -nemesis "+nemesisCrashRestart+")")
	fs.BoolVar(&o.secure, "secure", false, "peers speak mutual TLS under a CA the run makes, and gossip is encrypted")
	fs.BoolVar(&o.verbose, "v", false, "server logs to stderr (default: to files in a temporary directory)")
	fs.StringVar(&o.historyOut, "history-out", "", "save every op of the history to this file as JSON, to check it again offline")
	fs.BoolVar(&o.upgrade, "upgrade", false, "with -nemesis "+nemesisRollingRestart+", start the servers on the earlier "+
		"build (-upgrade-from) and make the first round a rolling upgrade to this one, with a rollback of the first "+
		"server upgraded; the cluster's protocol must rise only after the last server runs this build")
	fs.StringVar(&o.upgradeFrom, "upgrade-from", "", "with -upgrade, the earlier build's server binary, of a release that "+
		"carries protocol versions and speaks the protocol before this build's (default: this build with --previous-protocol)")
	fs.IntVar(&o.preload, "preload", 0, "keys of "+strconv.Itoa(preloadValue)+" bytes written before the faults begin; "+
		"with -nemesis "+nemesisBackup+" each must read back after the restore")
	fs.StringVar(&o.backupRate, "backup-rate", "", "with -nemesis "+nemesisBackup+", the backup's pace in bytes a second, like 8mb (default: unpaced)")
	fs.IntVar(&o.restoreNodes, "restore-nodes", 3, "with -nemesis "+nemesisBackup+", the new servers the backup is restored into")
	fs.StringVar(&o.serverLogLevel, "server-log-level", "info", "the servers' --log-level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !isSet(fs, "seed") {
		o.seed = rand.Uint64() % 1_000_000
	}
	if !isSet(fs, "value-size") && o.nemesis == nemesisCrashRestart {
		o.valueSize = crashValue
	}
	if !isSet(fs, "dead-server-timeout") && o.nemesis == nemesisReplace {
		o.deadServer = replaceDeadServer
	}
	if !isSet(fs, "eviction-timeout") && o.nemesis == nemesisReplace {
		o.eviction = replaceEviction
	}
	if o.backupRate != "" {
		o.rate, _ = zaris.ParseMemorySize(o.backupRate)
	}
	if o.rounds > 0 && !isSet(fs, "duration") {
		o.duration = roundsBound
	}
	return o, o.validate()
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// validate rejects settings the certification cannot run with and makes -data-dir absolute.
func (o *options) validate() error {
	switch {
	case o.nodes < 2:
		return fmt.Errorf("-nodes %d: need at least 2", o.nodes)
	case o.rf < 1 || o.rf > o.nodes:
		return fmt.Errorf("-rf %d: need 1 to -nodes (%d)", o.rf, o.nodes)
	case o.duration <= 0 || o.failoverTimeout <= 0 || o.replaceEvery <= 0:
		return errors.New("-duration, -failover-timeout and -replace-every must be positive")
	case o.deadServer < 0 || o.eviction < 0:
		return errors.New("-dead-server-timeout and -eviction-timeout must not be negative")
	case o.eviction > 0 && o.eviction < o.failoverTimeout:
		return fmt.Errorf("-eviction-timeout %v: need at least -failover-timeout %v", o.eviction, o.failoverTimeout)
	case !slices.Contains(nemeses, o.nemesis):
		return fmt.Errorf("-nemesis %q: want one of %v", o.nemesis, nemeses)
	case o.valueSize < 0 || o.valueSize > maxValueSize:
		return fmt.Errorf("-value-size %d: need 0 to %d", o.valueSize, maxValueSize)
	case rollingStops[o.rollingStop] == 0:
		return fmt.Errorf("-rolling-stop %q: want kill or term", o.rollingStop)
	case o.timing != "local" && o.timing != "lan":
		return fmt.Errorf("-timing %q: want local or lan", o.timing)
	case o.rounds < 0 || o.maxStall < 0 || o.maxLeaderless < 0:
		return errors.New("-rounds, -max-stall and -max-leaderless must not be negative")
	case (o.upgrade || o.upgradeFrom != "") && (o.nemesis != nemesisRollingRestart || !o.upgrade):
		return errors.New("-upgrade and -upgrade-from need -nemesis " + nemesisRollingRestart + " and -upgrade")
	case o.backupRate != "" && o.rate <= 0:
		return fmt.Errorf("-backup-rate %q: want bytes a second, like 8mb", o.backupRate)
	case o.preload < 0 || o.restoreNodes < o.rf:
		return fmt.Errorf("-preload %d, -restore-nodes %d: need a count, and -rf (%d) servers or more", o.preload, o.restoreNodes, o.rf)
	case o.rounds > 0 && o.nemesis != nemesisRollingRestart:
		return errors.New("-rounds counts the rounds of -nemesis " + nemesisRollingRestart)
	case o.nemesis == nemesisPartition && o.maxLeaderless > 0:
		return errors.New("-max-leaderless needs the servers' status pages, which -nemesis " + nemesisPartition +
			" does not reach")
	case o.nemesis == nemesisFullRestart && o.dataDir == "":
		return errors.New("-nemesis " + nemesisFullRestart + " needs -data-dir: servers that keep everything in " +
			"memory lose every write when all of them die at once")
	}
	pace, err := parsePace(o.rollingPace)
	if err != nil {
		return err
	}
	o.pace = pace
	if o.dataDir != "" {
		abs, err := filepath.Abs(o.dataDir)
		if err != nil {
			return fmt.Errorf("-data-dir %q: %w", o.dataDir, err)
		}
		o.dataDir = abs
	}
	return nil
}

// harness is one certification run: the servers, the lite member and what the clients saw.
type harness struct {
	o       options
	dir     string // temporary directory: the built binary and the logs
	c       *cluster
	lab     *netLab      // the servers' network namespaces under -nemesis partition; nil otherwise
	log     *slog.Logger // the lite member's log
	logFile *os.File     // nil with -v
	lite    *zaris.Node
	nem     *nemesis
	history *chaos.History
	ledger  *chaos.Ledger
	bank    *chaos.Bank
	notes   []string
	// failures are the run's failures beyond the report's own checks: bounds the flags set, exceeded.
	failures []string
	// stallLog prints the servers' log of a stall over -max-stall, last, where a truncated output keeps it.
	stallLog func()
}

// run sets the cluster up, certifies it and tears it down, returning the exit code.
func run(o options) int {
	fmt.Printf("zaris-chaos: seed %d, %d nodes, rf %d, nemesis %s, faults for %v, %s, %s, %s\n",
		o.seed, o.nodes, o.rf, o.nemesis, o.duration, serverTimeouts(o), ledgerValues(o.valueSize), storage(o.dataDir))
	h, err := newHarness(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zaris-chaos:", err)
		return 1
	}
	defer h.tearDown()
	ctx := h.interrupts()
	if err := h.setUp(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "zaris-chaos:", err)
		return 1
	}
	r, settled := h.certify(ctx)
	r.Notes = append(r.Notes, h.failures...)
	r.Print(os.Stdout)
	for _, f := range h.failures {
		fmt.Println("FAIL:", f)
	}
	if h.stallLog != nil {
		h.stallLog()
	}
	if ctx.Err() == nil {
		h.shutDown() // after an interrupt the deferred tearDown kills the servers instead
	}
	if !r.Passed() || !settled || len(h.failures) > 0 {
		return 1
	}
	return 0
}

// serverTimeouts describes the timeouts the servers run with, and the pace and manner of the replace and
// restart schedules.
func serverTimeouts(o options) string {
	out := fmt.Sprintf("%s timing, failover timeout %v", o.timing, o.failoverTimeout)
	if o.deadServer > 0 {
		out += fmt.Sprintf(", dead-server timeout %v", o.deadServer)
	}
	if o.eviction > 0 {
		out += fmt.Sprintf(", eviction timeout %v", o.eviction)
	}
	switch o.nemesis {
	case nemesisReplace:
		out += fmt.Sprintf(", a replacement every %v ±20%%", o.replaceEvery)
	case nemesisFullRestart:
		out += fmt.Sprintf(", full restarts %v ±20%% after each recovery", fullRestartEvery)
	case nemesisRollingRestart:
		out += ", rolling restarts stopping each server with " + signalName(o.rollingStop) + ", " + o.pace.describe()
		if o.rounds > 0 {
			out += fmt.Sprintf(", %d rounds", o.rounds)
		}
		if o.upgrade {
			out += ", the first a rolling upgrade from " + earlierBuild("this build", o.upgradeFrom).describe()
		}
	case nemesisPartition:
		out += ", each server in a network namespace of its own"
	}
	return out
}

// ledgerValues describes the ledger writes' values.
func ledgerValues(size int) string {
	if size == 0 {
		return "ledger values are their keys"
	}
	return fmt.Sprintf("ledger values of %d bytes", size)
}

// storage describes where the servers keep their data.
func storage(dataDir string) string {
	if dataDir == "" {
		return "memory only"
	}
	return "data in " + dataDir
}

// newHarness makes the temporary directory, builds or finds the server binary and picks the ports.
func newHarness(o options) (*harness, error) {
	dir, err := os.MkdirTemp("", "zaris-chaos-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	h := &harness{o: o, dir: dir, history: &chaos.History{}, ledger: &chaos.Ledger{}}
	bin, err := h.serverBinary()
	if err != nil {
		return nil, err
	}
	servers, err := h.newServers()
	if err != nil {
		return nil, err
	}
	h.c = &cluster{bin: bin, dataRoot: o.dataDir, nodes: o.nodes, rf: o.rf, failover: o.failoverTimeout, timing: o.timing,
		deadServer: o.deadServer, eviction: o.eviction, logLevel: o.serverLogLevel, servers: servers}
	if o.upgrade {
		h.c.earlier = earlierBuild(bin, o.upgradeFrom)
		for _, s := range servers {
			s.earlier = true
		}
	}
	if o.secure {
		if h.c.pki, err = newCredentials(filepath.Join(dir, "pki")); err != nil {
			h.destroyLab()
			return nil, fmt.Errorf("-secure: %w", err)
		}
	}
	if err := h.openLogs(); err != nil {
		h.destroyLab()
		return nil, err
	}
	return h, nil
}

// newServers makes the servers: on loopback with free ports, or under -nemesis partition each in a
// network namespace of its own.
func (h *harness) newServers() ([]*server, error) {
	if h.o.nemesis != nemesisPartition {
		return newServers(1, h.o.nodes, h.o.dataDir)
	}
	lab, err := newNetLab()
	if err != nil {
		return nil, err
	}
	h.lab = lab
	servers, err := labServers(lab, 1, h.o.nodes, h.o.dataDir)
	if err != nil {
		h.destroyLab()
		return nil, err
	}
	return servers, nil
}

// destroyLab removes the servers' namespaces and bridge, if there are any, and says when it cannot.
func (h *harness) destroyLab() {
	if h.lab == nil {
		return
	}
	if err := h.lab.destroy(); err != nil {
		fmt.Fprintln(os.Stderr, "zaris-chaos: removing the network namespaces:", err)
	}
}

// serverBinary returns -bin, checked, or builds cmd/zaris into the temporary directory.
func (h *harness) serverBinary() (string, error) {
	if h.o.bin == "" {
		return buildServer(h.dir)
	}
	if _, err := os.Stat(h.o.bin); err != nil {
		return "", fmt.Errorf("-bin: %w", err)
	}
	return h.o.bin, nil
}

// openLogs sends the servers' and the lite member's logs to stderr with -v, else to files in h.dir.
func (h *harness) openLogs() error {
	if h.o.verbose {
		h.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
		return nil
	}
	f, err := os.Create(filepath.Join(h.dir, "lite.log"))
	if err != nil {
		return fmt.Errorf("lite member log: %w", err)
	}
	h.c.logDir, h.logFile, h.log = h.dir, f, slog.New(slog.NewTextHandler(f, nil))
	fmt.Printf("logs in %s\n", h.dir)
	return nil
}

// interrupts returns a context that ends at the first SIGINT or SIGTERM, after which the run stops and
// reports what it has; a second signal kills the servers and exits at once.
func (h *harness) interrupts() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "zaris-chaos: interrupted; reporting what there is (again to stop at once)")
		cancel()
		<-sigs
		h.c.killAll()
		h.destroyLab()
		os.Exit(130)
	}()
	return ctx
}

// setUp starts the servers, joins the lite member once they serve, and waits until every partition is
// Healthy and writable, so no fault hits a cluster that is still forming.
func (h *harness) setUp(ctx context.Context) error {
	if err := h.bringUp(ctx); err != nil {
		return err
	}
	if _, err := h.awaitWritable(ctx); err != nil {
		return err
	}
	if err := h.openBank(ctx); err != nil {
		return err
	}
	if err := h.preload(ctx); err != nil {
		return err
	}
	fmt.Printf("%d servers serving, lite member %s joined\n", h.o.nodes, h.lite.Name())
	return nil
}

// bringUp starts the cluster's servers, joins the lite member once they serve, and waits until every
// partition is Healthy.
func (h *harness) bringUp(ctx context.Context) error {
	if err := h.c.startAll(ctx); err != nil {
		return err
	}
	if err := h.c.awaitServing(ctx, settleBound); err != nil {
		return err
	}
	lite, err := h.joinLite(ctx)
	if err != nil {
		return err
	}
	h.lite = lite
	_, err = h.awaitHealthy(ctx)
	return err
}

// joinLite joins this process as a lite member with the servers' cluster parameters and timings.
func (h *harness) joinLite(ctx context.Context) (*zaris.Node, error) {
	cfg := liteConfig("chaos-lite", h.o.rf, h.c.nodes, h.o.failoverTimeout, h.c.joinAddrs(nil))
	cfg.Logger = h.log
	if h.c.pki != nil {
		if err := h.c.pki.secure(&cfg); err != nil {
			return nil, fmt.Errorf("-secure: %w", err)
		}
	}
	if h.lab != nil {
		host := h.lab.hostAddr().String()
		cfg.GossipAddr, cfg.DataAddr = net.JoinHostPort(host, "0"), net.JoinHostPort(host, "0")
	}
	node, err := joinClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if h.lab != nil {
		if err := h.lab.setLite(node.GossipAddr()); err != nil {
			node.Close()
			return nil, err
		}
	}
	return node, nil
}

// awaitHealthy waits until every partition is Healthy in the lite member's map and returns how long it took.
func (h *harness) awaitHealthy(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	for {
		unhealthy := unhealthyPartitions(h.lite.ClusterMap())
		if unhealthy == 0 {
			return time.Since(start), nil
		}
		if !chaos.Sleep(ctx, pollPause) {
			return time.Since(start), fmt.Errorf("%d partitions not Healthy within %v (%s): %w", unhealthy, settleBound,
				describeUnhealthy(h.lite.ClusterMap(), maxDescribed), ctx.Err())
		}
	}
}

// maxDescribed bounds how many partitions a report describes.
const maxDescribed = 5

// describeUnhealthy describes up to limit partitions of m that are not Healthy: health, owner, epoch, in-sync
// replicas and assigned nodes, where to start looking in the servers' logs.
func describeUnhealthy(m *zaris.ClusterMap, limit int) string {
	var out []string
	for p, st := range m.Runtime {
		if st.Owner != "" && st.Health == zaris.Healthy {
			continue
		}
		if len(out) == limit {
			return strings.Join(out, "; ") + "; ..."
		}
		var assigned []zaris.NodeID
		if p < len(m.Assignment) {
			assigned = m.Assignment[p]
		}
		out = append(out, fmt.Sprintf("partition %d %v, owner %q, epoch %d, in sync %v, assigned %v", p, st.Health,
			st.Owner, st.Epoch, st.InSync, assigned))
	}
	return strings.Join(out, "; ")
}

// unhealthyPartitions counts the partitions of m that have no owner or are not Healthy; all of them
// before the first partition map.
func unhealthyPartitions(m *zaris.ClusterMap) int {
	if m.Version == 0 {
		return m.Partitions
	}
	n := 0
	for _, st := range m.Runtime {
		if st.Owner == "" || st.Health != zaris.Healthy {
			n++
		}
	}
	return n
}

// awaitWritable writes one key in every partition through the lite member until each is acknowledged,
// and returns how long that took.
func (h *harness) awaitWritable(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	layout := h.lite.ClusterMap().Layout()
	for p := range layout.Partitions {
		if err := h.writeUntilAcked(ctx, keyInPartition(layout, "writable", p)); err != nil {
			return time.Since(start), fmt.Errorf("partition %d not writable within %v: %w", p, settleBound, err)
		}
	}
	return time.Since(start), nil
}

// writeUntilAcked puts key until a put is acknowledged or ctx ends.
func (h *harness) writeUntilAcked(ctx context.Context, key string) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := h.lite.Put(cctx, key, []byte("x"))
		cancel()
		if err == nil {
			return nil
		}
		if !chaos.Sleep(ctx, 10*time.Millisecond) {
			return fmt.Errorf("%w (last put: %v)", ctx.Err(), err)
		}
	}
}

// keyInPartition returns a key with the given prefix that falls in partition p.
func keyInPartition(layout zaris.Layout, prefix string, p int) string {
	for i := 0; ; i++ {
		if key := prefix + "-" + strconv.Itoa(i); layout.KeyPartition(key) == p {
			return key
		}
	}
}

// certify runs the workload under the nemesis for the duration, heals, waits for the cluster to recover
// and builds the report. settled is false when the cluster did not recover in time or the run was cut short.
func (h *harness) certify(ctx context.Context) (r *chaos.Report, settled bool) {
	w := h.workload()
	workCtx, stopWork := context.WithCancel(ctx)
	var work sync.WaitGroup
	h.nem = newNemesis(h.c, h.lite, h.o.seed, os.Stdout)
	h.nem.replaceEvery, h.nem.rollingStop = h.o.replaceEvery, rollingStops[h.o.rollingStop]
	h.nem.pace, h.nem.rounds, h.nem.upgrading = h.o.pace, h.o.rounds, h.o.upgrade
	h.nem.net = h.lab
	h.nem.awaitHealthy, h.nem.awaitWritable = h.awaitHealthy, h.awaitWritable
	h.nem.start = time.Now()
	if h.o.nemesis == nemesisBackup {
		h.nem.backup = &backupRun{dir: filepath.Join(h.dir, "backup"), rate: h.o.rate}
	}
	var leaders *leaderWatch
	if h.lab == nil {
		leaders = watchLeaders(workCtx, h.c)
	}
	work.Go(func() { w.Run(workCtx) })
	var bankNote string
	work.Go(func() { bankNote = h.runBank(workCtx) })
	fmt.Printf("faults for %v:\n", h.o.duration)
	h.nem.run(ctx, h.o.nemesis, h.o.duration)
	h.nem.healAll()
	healed := time.Now()
	settled = h.settle(ctx, h.awaitWritable, "every partition writable %v after the final heal")
	stopWork()
	work.Wait()
	h.notes = append(h.notes, bankNote)
	if leaders != nil {
		settled = h.noteLeaderless(leaders) && settled
	}
	settled = h.settleHealthy(ctx) && settled
	if h.o.nemesis == nemesisReplace {
		settled = h.checkReplaced(ctx) && settled
	}
	if restartSchedule(h.o.nemesis) {
		settled = h.noteRestarts() && settled
	}
	if h.o.upgrade {
		settled = h.noteUpgrade() && settled
	}
	if h.o.nemesis == nemesisPartition {
		settled = h.noteNetwork() && settled
	}
	if h.o.nemesis == nemesisBackup {
		settled = h.restoreElsewhere(ctx) && settled
	}
	if ctx.Err() != nil {
		h.notes = append(h.notes, "interrupted: the run was cut short")
		settled = false
	}
	return h.report(ctx, healed), settled
}

// noteLeaderless notes the longest time no server led the control plane, and reports whether it stayed
// within -max-leaderless.
func (h *harness) noteLeaderless(w *leaderWatch) bool {
	longest, at := w.result()
	h.notes = append(h.notes, fmt.Sprintf("control plane: longest time with no server leading it %v (polled every %v), "+
		"from %v into the run", longest.Round(time.Millisecond), leaderPoll, at.Sub(h.nem.start).Round(time.Millisecond)))
	if h.o.maxLeaderless > 0 && longest > h.o.maxLeaderless {
		h.failures = append(h.failures, fmt.Sprintf("no leader for %v: over -max-leaderless %v",
			longest.Round(time.Millisecond), h.o.maxLeaderless))
		return false
	}
	return true
}

// settleHealthy waits until every partition is Healthy after the workload stopped. After restarts the map
// must first have caught up with them (see settling): until then its health says nothing.
func (h *harness) settleHealthy(ctx context.Context) bool {
	if restartSchedule(h.o.nemesis) || h.o.nemesis == nemesisPartition {
		return h.settle(ctx, h.nem.awaitRecovered, "every server's current process in the map with copies assigned, "+
			"no partition moving and every partition Healthy %v after the workload stopped")
	}
	return h.settle(ctx, h.awaitHealthy, "every partition Healthy %v after the workload stopped")
}

// settle runs one wait for the cluster's recovery and notes its outcome; it reports whether it succeeded.
func (h *harness) settle(ctx context.Context, wait func(context.Context) (time.Duration, error), format string) bool {
	if ctx.Err() != nil {
		return false
	}
	took, err := wait(ctx)
	if err != nil {
		h.notes = append(h.notes, err.Error())
		return false
	}
	h.notes = append(h.notes, fmt.Sprintf(format, took.Round(time.Millisecond)))
	return true
}

// liteTarget sends every client call to the lite member, which routes it to the key's owner in one hop.
type liteTarget struct{ n *zaris.Node }

// Put writes through the lite member.
func (t liteTarget) Put(ctx context.Context, key string, value []byte) error {
	return t.n.Put(ctx, key, value)
}

// Get reads through the lite member.
func (t liteTarget) Get(ctx context.Context, key string) ([]byte, error) { return t.n.Get(ctx, key) }

// ReadVersion reads a value and its version through the lite member.
func (t liteTarget) ReadVersion(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := t.n.GetEntry(ctx, key)
	return e.Value, e.Version, err
}

// CompareAndSwap swaps a version for a value through the lite member.
func (t liteTarget) CompareAndSwap(ctx context.Context, key string, version uint64, value []byte) error {
	_, err := t.n.CompareAndSwap(ctx, key, version, value)
	return err
}

// workload is the certification's client load, every call through the lite member.
func (h *harness) workload() *chaos.Workload {
	target := liteTarget{h.lite}
	return &chaos.Workload{
		Clients: clients, Registers: registers, LedgerShare: ledgerShare, ValueSize: h.o.valueSize,
		CallTimeout: callTimeout, Seed: h.o.seed, History: h.history, Ledger: h.ledger,
		Classify: chaos.Classifier{
			IsNotFound:       func(err error) bool { return errors.Is(err, zaris.ErrNotFound) },
			DefinitelyFailed: func(error) bool { return false }, // any failed put may have been applied
			IsMismatch:       func(err error) bool { return errors.Is(err, zaris.ErrVersionMismatch) },
		},
		Target: func(int) chaos.Target { return target },
	}
}

// openBank opens the accounts of the bank workload, spread over every server.
func (h *harness) openBank(ctx context.Context) error {
	h.bank = newBank(h.o.seed, nil)
	return h.bank.Open(ctx, func(ctx context.Context, key string, value []byte) error {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return h.lite.Put(ctx, key, value)
	})
}

// runBank runs the bank's clients until ctx ends and returns a note on how they ran: in processes of their
// own that the harness kills and restarts (bankProcs), or under -nemesis partition, whose network
// namespaces only the lite member follows, as goroutines of the lite member.
func (h *harness) runBank(ctx context.Context) string {
	if h.o.nemesis == nemesisPartition {
		target := txnBankOn(h.lite)
		h.bank.Target = func(int) chaos.BankTarget { return target }
		h.bank.Run(ctx)
		return "bank: clients run in the lite member, which the nemesis never kills, under -nemesis partition"
	}
	self, err := os.Executable()
	if err != nil {
		return "bank: no client ran: " + err.Error()
	}
	clients := &bankProcs{self: self, args: h.bankClientArgs, logDir: h.c.logDir, bank: h.bank, start: h.nem.start, out: os.Stdout}
	if err := clients.run(ctx, h.o.seed); err != nil {
		return "bank: " + err.Error()
	}
	return clients.note()
}

// report checks the history and fills the report as the in-process certification does.
func (h *harness) report(ctx context.Context, healed time.Time) *chaos.Report {
	ops := h.history.Ops()
	m := h.lite.ClusterMap()
	acked := ackedPuts(ops, m.Layout())
	verify, check, duration := h.checkBounds(ctx, healed)
	fmt.Printf("checking %d ops\n", len(ops))
	r := &chaos.Report{
		Seed:           h.o.seed,
		Duration:       duration,
		Outcomes:       outcomes(ops),
		Phantoms:       len(chaos.Phantoms(ops)),
		Linear:         chaos.CheckLinearizable(ops, check),
		Failovers:      int(m.Promotions),
		FailoverTimes:  h.nem.failoverTimes(acked),
		Unavailability: gaps(acked, h.nem.start, healed, gapOver),
		Faults:         h.nem.faults(),
	}
	printHistories(ops, r.Linear.ViolatingKeys, "not linearizable")
	printHistories(ops, r.Linear.UndecidedKeys, "its check ran out of time")
	if h.o.historyOut != "" {
		if err := saveHistory(h.o.historyOut, ops); err != nil {
			h.notes = append(h.notes, "history not saved: "+err.Error())
		}
	}
	verifyCtx, cancel := context.WithTimeout(context.Background(), verify)
	defer cancel()
	r.Ledger = h.ledger.Verify(verifyCtx, h.read)
	bank := h.bank.Verify(verifyCtx, txnBankOn(h.lite))
	r.Bank = &bank
	if restartSchedule(h.o.nemesis) || h.o.nemesis == nemesisPartition {
		st := writeStalls(acked, h.nem.start, healed)
		w := longestPutWait(attemptedPuts(ops, m.Layout()), acked, h.nem.start, healed)
		h.notes = append(h.notes, st.String(), w.String())
		if h.o.maxStall > 0 && w.longest > h.o.maxStall {
			h.failures = append(h.failures, fmt.Sprintf("a put waited %v: over -max-stall %v",
				w.longest.Round(time.Millisecond), h.o.maxStall))
			began := h.nem.start.Add(w.from)
			h.stallLog = func() { h.printStallLog(w.partition, began, began.Add(w.longest)) }
		}
	}
	r.Notes = append(append(h.notes, splitBrainNote), h.c.unexpectedExits()...)
	if len(r.Ledger.LostKeys) > 0 {
		r.Notes = append(r.Notes, "the lost keys named above are in partitions "+lostPartitions(r.Ledger.LostKeys, m.Layout()))
	}
	return r
}

// printHistories prints the histories of the first three keys, saying why.
func printHistories(ops []chaos.Op, keys []string, why string) {
	for _, k := range keys[:min(3, len(keys))] {
		fmt.Printf("history of %s, %s:\n", k, why)
		chaos.WriteKeyHistory(os.Stdout, ops, k)
	}
}

// lostPartitions lists the partitions of keys, each once, in order: where to look in the servers' logs.
func lostPartitions(keys []string, layout zaris.Layout) string {
	var ps []int
	for _, k := range keys {
		ps = append(ps, layout.KeyPartition(k))
	}
	slices.Sort(ps)
	return fmt.Sprint(slices.Compact(ps))
}

// checkBounds returns how long the ledger read-back and the linearizability check may take, and the
// duration to report: the full ones, or short ones after an interrupt so the report comes quickly.
func (h *harness) checkBounds(ctx context.Context, healed time.Time) (verify, check, duration time.Duration) {
	if ctx.Err() != nil {
		return cutShort, cutShort, healed.Sub(h.nem.start)
	}
	if h.o.rounds > 0 {
		return verifyBound, checkTimeout, healed.Sub(h.nem.start) // -duration only bounded the rounds
	}
	return verifyBound, checkTimeout, h.o.duration
}

// outcomes counts ops by kind and outcome, like "put OK".
func outcomes(ops []chaos.Op) map[string]int {
	counts := map[string]int{}
	for _, op := range ops {
		counts[op.Kind.String()+" "+op.Outcome.String()]++
	}
	return counts
}

// read reads key back through the lite member for the ledger check.
func (h *harness) read(ctx context.Context, key string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	v, err := h.lite.Get(ctx, key)
	if errors.Is(err, zaris.ErrNotFound) {
		return "", false, nil
	}
	return string(v), err == nil, err
}

// shutDown stops the servers with SIGTERM (a graceful leave), then the lite member leaves.
func (h *harness) shutDown() {
	fmt.Println("stopping the servers")
	h.c.stop(h.c.list()...)
	ctx, cancel := context.WithTimeout(context.Background(), liteLeave)
	defer cancel()
	// With every server gone none is left to confirm the lite member's removal, so that wait times out.
	if err := h.lite.Leave(ctx); err != nil && !errors.Is(err, zaris.ErrClosed) && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(os.Stderr, "zaris-chaos: lite member leave:", err)
	}
}

// tearDown kills whatever is still running, removes the servers' namespaces, closes the lite member and
// removes the built binary; the logs stay.
func (h *harness) tearDown() {
	h.c.killAll()
	h.destroyLab()
	if h.lite != nil {
		h.lite.Close()
	}
	if h.logFile != nil {
		h.logFile.Close()
	}
	if h.o.bin == "" {
		os.Remove(h.c.bin)
	}
	if h.o.verbose {
		os.Remove(h.dir)
	}
}

// saveHistory writes ops to path as JSON.
func saveHistory(path string, ops []chaos.Op) error {
	b, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
