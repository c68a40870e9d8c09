package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zaris-go/zaris/chaos"
	"github.com/zaris-go/zaris/internal/ports"
)

const (
	stopGrace   = 20 * time.Second       // a SIGTERMed server's graceful leave, before it is killed
	servePoll   = 200 * time.Millisecond // pause between checks that a server serves
	probeBudget = 2 * time.Second        // one CLUSTER INFO exchange
)

// server is one zaris process of the cluster; its name, ports and data directory survive restarts.
type server struct {
	name               string
	gossip, data, resp string
	http               string // the operations endpoint: /readyz and /status.json; "" for none
	dataDir            string
	netns              string // the network namespace it runs in; "" for the root one
	earlier            bool   // its next process runs the cluster's earlier build (-upgrade)
	cmd                *exec.Cmd
	done               chan struct{} // closed once the current process has exited
	exitErr            error         // how the current process ended, set before done is closed
	expected           bool          // the harness ended the current process itself
	exits              []string      // the processes that exited without the harness ending them
}

// cluster runs the server processes and knows how to start them again.
type cluster struct {
	bin        string
	earlier    serverBuild // what servers marked earlier run (-upgrade)
	logDir     string      // server logs go to <logDir>/<name>.log; "" sends them to stderr
	dataRoot   string      // each server's data directory is <dataRoot>/<name>; "" keeps them in memory
	nodes      int
	rf         int
	failover   time.Duration
	timing     string        // the servers' --timing
	deadServer time.Duration // the servers' --dead-server-timeout; 0 leaves their default
	eviction   time.Duration // the servers' --eviction-timeout; 0 leaves their default
	logLevel   string        // the servers' --log-level; "" leaves their default
	pki        *credentials  // -secure: peer TLS and gossip key for every process; nil runs them open

	mu      sync.Mutex // guards servers, closed and the servers' process fields
	servers []*server  // oldest first; a server added later is appended
	closed  bool       // killAll ran: no process may start any more
}

// errClosed is start's answer once the harness has killed every server.
var errClosed = errors.New("the cluster is shut down")

// moduleRoot walks up from the working directory to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod in the working directory or above it")
		}
		dir = parent
	}
}

// buildServer compiles cmd/zaris into dir and returns the binary's path.
func buildServer(dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "zaris")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/zaris")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build cmd/zaris in %s: %w", root, err)
	}
	return bin, nil
}

// newServers names the nodes zaris-first..zaris-(first+n-1) and gives each free gossip, data, RESP and
// HTTP ports, below the ephemeral range so that a server restarts on them, and a data directory under dataRoot
// when it is set.
func newServers(first, n int, dataRoot string) ([]*server, error) {
	free, err := ports.Free(4 * n)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(free[i])) }
	servers := make([]*server, n)
	for i := range servers {
		s := &server{name: "zaris-" + strconv.Itoa(first+i), gossip: addr(4 * i), data: addr(4*i + 1), resp: addr(4*i + 2),
			http: addr(4*i + 3)}
		if dataRoot != "" {
			s.dataDir = filepath.Join(dataRoot, s.name)
		}
		servers[i] = s
	}
	return servers, nil
}

// labServers names the nodes zaris-first..zaris-(first+n-1), each in a network namespace of lab with the
// fixed ports on its own address, and a data directory under dataRoot when it is set.
func labServers(lab *netLab, first, n int, dataRoot string) ([]*server, error) {
	servers := make([]*server, n)
	for i := range servers {
		s := &server{name: "zaris-" + strconv.Itoa(first+i)}
		ns, addr, err := lab.addServer(s.name, first+i)
		if err != nil {
			return nil, err
		}
		at := func(port int) string { return netip.AddrPortFrom(addr, uint16(port)).String() }
		s.netns, s.gossip, s.data, s.resp = ns, at(labGossipPort), at(labDataPort), at(labRESPPort)
		if dataRoot != "" {
			s.dataDir = filepath.Join(dataRoot, s.name)
		}
		servers[i] = s
	}
	return servers, nil
}

// list returns the servers, oldest first, as they are now.
func (c *cluster) list() []*server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.servers)
}

// addServer makes a server with the next name, fresh ports and its own data directory under the data
// root, and appends it to the cluster; it does not start it.
func (c *cluster) addServer() (*server, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	made, err := newServers(len(c.servers)+1, 1, c.dataRoot)
	if err != nil {
		return nil, err
	}
	c.servers = append(c.servers, made[0])
	return made[0], nil
}

// args are the command-line flags of s's process, joining through join.
func (c *cluster) args(s *server, join []string) []string {
	args := []string{
		"--name", s.name, "--gossip-addr", s.gossip, "--data-addr", s.data, "--resp-addr", s.resp,
		"--join", strings.Join(join, ","), "--bootstrap-expect", strconv.Itoa(c.nodes),
		"--timing", c.timing, "--rf", strconv.Itoa(c.rf), "--failover-timeout", c.failover.String(),
	}
	if c.deadServer > 0 {
		args = append(args, "--dead-server-timeout", c.deadServer.String())
	}
	if c.eviction > 0 {
		args = append(args, "--eviction-timeout", c.eviction.String())
	}
	if s.dataDir != "" {
		args = append(args, "--data-dir", s.dataDir)
	}
	if s.http != "" {
		args = append(args, "--http-addr", s.http)
	}
	if c.logLevel != "" {
		args = append(args, "--log-level", c.logLevel)
	}
	if c.pki != nil {
		secure, err := c.pki.serverArgs(s.name)
		if err != nil {
			panic(err) // the harness's own files in its own directory
		}
		args = append(args, secure...)
	}
	return args
}

// childEnv is the environment without ZARIS_* variables, so the servers run with the flags given only.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ZARIS_") {
			env = append(env, kv)
		}
	}
	return env
}

// logOutput opens where s's process writes its logs: its log file, appended across restarts, or stderr.
func (c *cluster) logOutput(s *server) (*os.File, error) {
	if c.logDir == "" {
		return os.Stderr, nil
	}
	f, err := os.OpenFile(filepath.Join(c.logDir, s.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log file of %s: %w", s.name, err)
	}
	return f, nil
}

// start launches a process for s that joins through join. It runs in its own process group, so a Ctrl-C
// at the terminal reaches only the harness, and it is killed if the harness dies. Once killAll has run it
// starts nothing, so no process outlives the harness's shutdown.
func (c *cluster) start(s *server, join []string) error {
	out, err := c.logOutput(s)
	if err != nil {
		return err
	}
	cmd := c.command(s, join)
	cmd.Env, cmd.Stdout, cmd.Stderr = childEnv(), out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	done := make(chan struct{})
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.closeLog(out)
		return fmt.Errorf("start %s: %w", s.name, errClosed)
	}
	if err := cmd.Start(); err != nil {
		c.mu.Unlock()
		c.closeLog(out)
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	s.cmd, s.done, s.exitErr, s.expected = cmd, done, nil, false
	c.mu.Unlock()
	go c.reap(s, cmd, done, out)
	return nil
}

// command returns the process of s: the server binary, run in s's network namespace when it has one.
// ip netns exec replaces itself with the binary, so the process's pid is the server's and signals reach it.
func (c *cluster) command(s *server, join []string) *exec.Cmd {
	bin, args := c.bin, c.args(s, join)
	if s.earlier {
		bin, args = c.earlier.bin, append(args, c.earlier.args...)
	}
	if s.netns == "" {
		return exec.Command(bin, args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", s.netns, bin}, args...)...)
}

// reap waits for a process of s to exit and records how it ended.
func (c *cluster) reap(s *server, cmd *exec.Cmd, done chan struct{}, out *os.File) {
	err := cmd.Wait()
	c.closeLog(out)
	c.mu.Lock()
	s.exitErr = err
	if !s.expected {
		s.exits = append(s.exits, fmt.Sprintf("%s (pid %d) exited by itself: %v", s.name, cmd.Process.Pid, err))
	}
	c.mu.Unlock()
	close(done)
}

// closeLog closes a log file, never stderr.
func (c *cluster) closeLog(f *os.File) {
	if f != os.Stderr {
		f.Close()
	}
}

// running reports whether s has a live process.
func (c *cluster) running(s *server) bool {
	c.mu.Lock()
	done := s.done
	c.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// exitErr returns how s's last process ended.
func (c *cluster) exitErr(s *server) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.exitErr
}

// signal sends sig to s's process if it runs; expected marks an exit the signal causes as the harness's.
func (c *cluster) signal(s *server, sig syscall.Signal, expected bool) {
	if !c.running(s) {
		return
	}
	c.mu.Lock()
	s.expected = s.expected || expected
	proc := s.cmd.Process
	c.mu.Unlock()
	proc.Signal(sig)
}

// kill SIGKILLs the servers, all of them before waiting for any, and waits until their processes are gone.
func (c *cluster) kill(servers ...*server) {
	for _, s := range servers {
		c.signal(s, syscall.SIGKILL, true)
	}
	for _, s := range servers {
		c.wait(s)
	}
}

// wait blocks until s's current process has exited, if it has one.
func (c *cluster) wait(s *server) {
	c.mu.Lock()
	done := s.done
	c.mu.Unlock()
	if done != nil {
		<-done
	}
}

// joinAddrs returns the gossip addresses of every server but skip, plus extra ones.
func (c *cluster) joinAddrs(skip *server, extra ...string) []string {
	var addrs []string
	for _, s := range c.list() {
		if s != skip {
			addrs = append(addrs, s.gossip)
		}
	}
	return append(addrs, extra...)
}

// startAll launches every server: the first starts the cluster and, once its gossip port listens, the
// others join through it.
func (c *cluster) startAll(ctx context.Context) error {
	servers := c.list()
	first := servers[0]
	if err := c.start(first, nil); err != nil {
		return err
	}
	if err := awaitListening(ctx, first.gossip, settleBound); err != nil {
		return fmt.Errorf("%s: %w", first.name, err)
	}
	for _, s := range servers[1:] {
		if err := c.start(s, []string{first.gossip}); err != nil {
			return err
		}
	}
	return nil
}

// awaitListening waits until addr accepts TCP connections.
func awaitListening(ctx context.Context, addr string, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		if !chaos.Sleep(ctx, pollPause) {
			return fmt.Errorf("%s not listening within %v: %w", addr, bound, err)
		}
	}
}

// awaitServing waits until every server reports cluster_state:ok on its RESP port, or fails early when
// one has exited.
func (c *cluster) awaitServing(ctx context.Context, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for _, s := range c.list() {
		for !clusterOK(ctx, s.resp) {
			if !c.running(s) {
				return fmt.Errorf("%s exited before serving: %v", s.name, c.exitErr(s))
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s not serving within %v: %w", s.name, bound, ctx.Err())
			case <-time.After(servePoll):
			}
		}
	}
	return nil
}

// clusterOK asks the RESP endpoint at addr for CLUSTER INFO and reports whether it says cluster_state:ok.
func clusterOK(ctx context.Context, addr string) bool {
	ok := false
	clusterInfo(ctx, addr, func(line string) bool {
		if strings.HasPrefix(line, "cluster_state:") {
			ok = strings.TrimSpace(line) == "cluster_state:ok"
			return true
		}
		return false
	})
	return ok
}

// clusterInfo asks the RESP endpoint at addr for CLUSTER INFO and hands each line of the reply to line
// until it returns true, the reply ends or probeBudget passes.
func clusterInfo(ctx context.Context, addr string, line func(string) bool) {
	d := net.Dialer{Timeout: probeBudget}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(probeBudget))
	if _, err := io.WriteString(conn, "*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n"); err != nil {
		return
	}
	r := bufio.NewReader(conn)
	for {
		l, err := r.ReadString('\n')
		if l != "" && line(l) || err != nil {
			return
		}
	}
}

// stop thaws the servers and sends them SIGTERM (a graceful leave), then waits for them to exit, killing
// those still running after the grace period; it reports whether all exited by themselves in time.
func (c *cluster) stop(servers ...*server) bool {
	for _, s := range servers {
		c.signal(s, syscall.SIGCONT, false)
		c.signal(s, syscall.SIGTERM, true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	exited := true
	for _, s := range servers {
		exited = c.exitOrKill(ctx, s) && exited
	}
	return exited
}

// exitOrKill waits until s's process exits, killing it if ctx ends first; it reports whether it exited by
// itself.
func (c *cluster) exitOrKill(ctx context.Context, s *server) bool {
	c.mu.Lock()
	done := s.done
	c.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-ctx.Done():
		c.kill(s)
		return false
	}
}

// killAll SIGKILLs every server process still running and waits for them; it is safe to call any time,
// and no server starts after it.
func (c *cluster) killAll() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.kill(c.list()...)
}

// unexpectedExits lists the server processes that ended without the harness ending them.
func (c *cluster) unexpectedExits() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.servers {
		out = append(out, s.exits...)
	}
	return out
}
