package zaris

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/rawio"
	"github.com/zaris-go/zaris/internal/throttle"
	"github.com/zaris-go/zaris/transport"
)

// respServer is a node's Redis Cluster endpoint. It serves every key through the node's own ownership
// check: keys this node actively owns are applied locally, all others are answered with a redirect, never
// forwarded.
type respServer struct {
	owner      keyOwner
	id         NodeID
	clusterMap func() *ClusterMap // the latest committed map
	clock      Clock
	log        *slog.Logger
	// contain handles a panic a command raised outside the key operations (panicGuard.containPanic); nil: it is
	// only logged.
	contain     func(site panicSite, seg int, v any, what string) bool
	ln          net.Listener
	addr        string // advertised host:port: what MOVED replies and CLUSTER SLOTS name for this node
	tls         bool
	limits      respLimits // of an authenticated client
	preAuth     respLimits // of a client that has not logged in yet
	budget      *respBudget
	gate        *preAuthGate // admits the clients not logged in yet
	timeouts    respTimeouts
	slack       time.Duration // how late a read deadline may be moved (respTimeouts.slack)
	maxClients  int
	acl         *respACL
	throttle    *throttle.Logins
	commands    map[string]*respCommand
	ctx         context.Context // cancelled on close, so work for a connection stops with the node
	cancel      context.CancelFunc
	tracking    *respTracking // the node's: writes of its keys invalidate what clients cache
	nextID      atomic.Int64
	members     atomic.Pointer[membership] // set once the node gossips; CLUSTER NODES leaves out departed members
	lastAlarm   atomic.Int64               // unix nanoseconds of the last HTTP-input warning logged
	turningAway atomic.Int32               // refused connections being told why
	info        respInfo                   // what INFO reports besides the connections' own counts
	// control reports the node's control-plane leader (controlPlane.controlHealth); nil for an endpoint without a
	// node, which reports a healthy one.
	control func() controlHealth
	// recover is the node's RecoverControlPlane, for the RECOVER command.
	recover func(context.Context) (RecoveryReport, error)
	// memory is the node's bound on what it stores, which INFO reports and CONFIG SET maxmemory changes;
	// nil for an endpoint without a node, which has no bound.
	memory *memoryBudget

	mu     sync.Mutex
	conns  map[*respConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// keyOwner serves key operations on the partitions this node actively owns: the RESP endpoint answers
// the keys it owns through it and MOVED for the others.
type keyOwner interface {
	// checkOwner returns key's segment if this node actively owns its partition, and otherwise the reply
	// that refuses the request.
	checkOwner(key string) (segment int, refusal kv.Reply, owned bool)
	// applyKV runs one key operation on an owned segment, waiting for the replicas as the concern asks.
	applyKV(ctx context.Context, op transport.Op, seg int, req *kv.Request) kv.Reply
	// applyAtomically runs fn on an atomic group of an owned segment, refused while a transaction holds
	// one of keys, and waits for the replicas as applyKV does (owner.applyAtomically).
	applyAtomically(ctx context.Context, seg int, keys []string, fn func(kv.Group)) Status
	// readAtomically runs fn on a read-only view of an owned segment, which sees one revision of it, and
	// waits for the replicas as a read does (owner.readAtomically).
	readAtomically(ctx context.Context, seg int, keys []string, fn func(kv.Group)) Status
	// keyCount counts the keys held on this node, owned or replicated, and expiringKeyCount those of them
	// with a TTL.
	keyCount() int
	expiringKeyCount() int
	// expiredKeys counts the keys this node expired as their owner.
	expiredKeys() uint64
	// serveOwnedScan serves a page of the keys of the partitions this node owns, skipping the others.
	serveOwnedScan(ctx context.Context, req *kv.ScanRequest) kv.ScanReply
	// ownedKeyCount counts the keys of the partitions this node owns.
	ownedKeyCount() int
	// infoReplication describes the replicas this node feeds for the partitions it owns (INFO replication).
	infoReplication() respReplication
	// infoMessages counts the messages of data this node sent to the others and received from them
	// (CLUSTER INFO).
	infoMessages() (sent, received uint64)
}

// controlPlane reports the control plane's leader as the node knows it.
func (s *respServer) controlPlane() controlHealth {
	if s.control == nil {
		return controlHealth{Leader: s.id}
	}
	return s.control()
}

// newRESPServer returns the endpoint of node id, serving keys through owner and describing the cluster from
// clusterMap, advertised as addr, with no listener yet.
func newRESPServer(cfg *Config, owner keyOwner, id NodeID, clusterMap func() *ClusterMap, log *slog.Logger, addr string) *respServer {
	ctx, cancel := context.WithCancel(context.Background())
	timeouts := respTimeouts{idle: cfg.RESPIdleTimeout, command: cfg.RESPCommandTimeout, auth: cfg.RESPAuthTimeout}
	budget := newRESPBudget(cfg.RESPMaxQueryBufferTotal)
	return &respServer{
		owner:      owner,
		id:         id,
		clusterMap: clusterMap,
		clock:      cfg.Clock,
		log:        log,
		addr:       addr,
		limits:     newRESPLimits(cfg.MaxValueSize, cfg.RESPMaxQueryBuffer),
		preAuth:    preAuthRESPLimits(),
		budget:     budget,
		gate:       newPreAuthGate(budget, cfg.RESPMaxClients, cfg.RESPMaxPreAuthPerAddr),
		timeouts:   timeouts,
		slack:      timeouts.slack(),
		maxClients: cfg.RESPMaxClients,
		acl:        newRESPACL(cfg.RESPPassword, cfg.RESPUsers),
		throttle:   newAuthThrottle(),
		commands:   respCommandTable,
		ctx:        ctx,
		cancel:     cancel,
		conns:      map[*respConn]struct{}{},
		info:       respInfo{started: time.Now()},
	}
}

// serve accepts connections on ln, in the background, until close.
func (s *respServer) serve(ln net.Listener) {
	s.ln = ln
	s.wg.Add(2)
	go s.accept()
	go s.sampleRates()
}

// advertisedAddr is the address clients are told to use: the bound one, or, when bound to every interface,
// the data address's host with the bound port.
func advertisedAddr(bound *net.TCPAddr, dataAddr string) string {
	if !bound.IP.IsUnspecified() {
		return bound.String()
	}
	host, _, _ := net.SplitHostPort(dataAddr)
	return net.JoinHostPort(host, strconv.Itoa(bound.Port))
}

// accept admits connections until the listener closes. Other accept errors (out of file descriptors, say)
// are waited out with a growing pause rather than ending the endpoint.
func (s *respServer) accept() {
	defer s.wg.Done()
	pause := 5 * time.Millisecond
	for {
		conn, err := s.ln.Accept()
		if err == nil {
			pause = 5 * time.Millisecond
			s.admit(conn)
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
		s.log.Warn("RESP accept", "err", err, "retry_in", pause)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// admit starts serving conn, unless the server is closing or full.
func (s *respServer) admit(conn net.Conn) {
	c, reason := s.open(conn)
	switch {
	case c != nil:
		go c.serve()
	case reason == "":
		conn.Close()
	default:
		s.info.rejected.Add(1)
		s.turnAway(conn, reason)
	}
}

// open registers a new connection, or says why it may not have one ("" when the server is closing). A
// connection needs a slot under RESPMaxClients and its first read buffer from the budget.
func (s *respServer) open(conn net.Conn) (*respConn, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ""
	case len(s.conns) >= s.maxClients:
		return nil, "ERR max number of clients reached"
	}
	user, budget, addr := s.acl.initialUser(), s.budget, netip.Addr{}
	if user == nil {
		addr, budget = rawio.RemoteIP(conn), s.gate.budget
		if reason := s.gate.enter(addr); reason != "" {
			return nil, reason
		}
	}
	if !budget.reserve(respInitialBuffer) {
		if user == nil {
			s.gate.leave(addr)
		}
		return nil, "ERR max number of clients reached (query buffers full)"
	}
	c := newRESPConn(s, conn, user, budget)
	c.gateAddr = addr
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return c, ""
}

// respMaxTurningAway bounds the refused connections being told why at once. Beyond it, they are just closed.
const respMaxTurningAway = 64

// turnAway tells a refused client why and closes it, in the background and within a second, so a client
// that does not read (or a TLS handshake that never ends) cannot hold up accepting others.
func (s *respServer) turnAway(conn net.Conn, reason string) {
	if s.turningAway.Add(1) > respMaxTurningAway {
		s.turningAway.Add(-1)
		conn.Close()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.turningAway.Add(-1)
		conn.SetDeadline(time.Now().Add(time.Second))
		conn.Write([]byte("-" + reason + "\r\n"))
		conn.Close()
	}()
}

// drop forgets a connection that stopped being served and gives its buffers back.
func (s *respServer) drop(c *respConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.retire(c)
	if c.user == nil {
		s.gate.leave(c.gateAddr)
	}
	s.mu.Unlock()
	s.tracking.stop(c)
	c.closePushes()
	c.conn.Close()
	c.rd.close()
	c.endTxn()
	s.wg.Done()
}

// clients counts open connections.
func (s *respServer) clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// close stops accepting, closes every connection and waits for every goroutine the server started.
func (s *respServer) close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.conn.Close()
	}
	s.mu.Unlock()
	s.cancel()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// respConn is one client connection. Its state is touched only by its own goroutine.
type respConn struct {
	srv    *respServer
	conn   net.Conn
	rd     *respReader
	wr     *respWriter
	req    kv.Request // the request of the command being run, for the commands that run one at a time (request)
	id     int64
	name   string
	user   *respUser // nil until the client logs in
	opened time.Time
	quit   bool
	hangUp bool // close at once, dropping the replies not sent yet

	// Client-side caching (CLIENT TRACKING): the keys this connection read that its node remembers, nil
	// with tracking off; OPTIN/OPTOUT; CLIENT CACHING's answer for the next command; and the pushes.
	tracked   map[string]struct{}
	trackMode trackMode
	caching   cachingChoice
	pushes    respPushes

	multi      *respMulti          // the open transaction, nil outside MULTI
	watched    []watchedKey        // the keys WATCH recorded
	watchedSet map[string]struct{} // the same keys, to find one at once
	txnHeld    int                 // bytes of the transaction and watched keys, counted in the server's budget
	exec       *execGroup          // set while EXEC runs the queued commands

	stats respConnStats // what INFO counts of the connection

	authFailures  int
	gateAddr      netip.Addr // the address preAuthGate counts the connection under until it logs in
	deadline      time.Time  // the read deadline last set
	partialSince  time.Time  // when the command now half-received began to wait
	completedSeen uint64     // rd.completed when partialSince was set
}

// newRESPConn returns the connection of conn for user (nil: not logged in), whose first read buffer is
// counted in budget.
func newRESPConn(s *respServer, conn net.Conn, user *respUser, budget *respBudget) *respConn {
	c := &respConn{srv: s, conn: conn, id: s.nextID.Add(1), user: user, opened: time.Now()}
	sock, _ := rawio.Of(conn)
	lim := s.limits
	if c.user == nil {
		lim = s.preAuth
	}
	c.rd = newRESPReader(countingReader{src: sock, n: &c.stats.counted.netIn}, lim, budget)
	out := &deadlineWriter{conn: conn, dst: sock, timeout: s.timeouts.idle}
	c.wr = newRESPWriter(countingWriter{dst: out, n: &c.stats.counted.netOut})
	c.pushes.out = out
	c.pushes.wake = sync.NewCond(&c.pushes.mu)
	c.rd.onBlock = c.beforeRead // replies of a pipeline go out together, once its input is drained
	return c
}

// logIn makes u the connection's user and gives an authenticated client the larger limits.
// A client that logs in leaves the pre-auth gate, and its buffers count in the whole budget from then on.
func (c *respConn) logIn(u *respUser) {
	if c.user == nil {
		c.srv.mu.Lock()
		c.srv.gate.leave(c.gateAddr)
		c.rd.budget = c.rd.budget.handOver(c.rd.held)
		c.user = u
		c.srv.mu.Unlock()
	}
	c.user = u
	c.rd.lim = c.srv.limits
}

// serve reads and runs commands until the client quits, the connection fails or times out, or the input
// breaks the protocol (answered with an error, then closed). A refused command is answered and skipped.
func (c *respConn) serve() {
	defer c.srv.drop(c)
	for !c.quit && c.wr.err == nil {
		args, err := c.rd.next()
		if err == nil {
			c.srv.dispatch(c, args)
			continue
		}
		var rejected *respRejection // out of the common path: errors.As makes it escape
		switch {
		case errors.As(err, &rejected):
			c.wr.error(rejected.msg)
			c.countErrorMessage(rejected.msg)
			continue
		case errors.Is(err, errRESPProtocol):
			c.wr.error("ERR " + err.Error())
			c.countErrorMessage("ERR")
		}
		break
	}
	if !c.hangUp {
		c.wr.flush()
	}
}

// respInternalError answers a RESP command that failed on a recovered panic.
const respInternalError = "ERR internal error, logged by the node serving the command"

// recoverCommand, deferred by the RESP endpoint's dispatch, answers a command that panicked outside its
// key operations (those recover on their own, and their connection goes on) with an internal error, and
// then closes the connection: its transaction, watched keys or tracking may be half updated. replyAt and
// sends are where the command's reply began and the writer's sends then: a reply partly sent cannot be
// withdrawn, so the connection is closed without one.
func (c *respConn) recoverCommand(replyAt, sends int) {
	v := recover()
	if v == nil {
		return
	}
	if c.srv.contain != nil {
		c.srv.contain(panicInRESP, -1, v, "a RESP command")
	} else {
		c.srv.log.Error("recovered a panic", "where", panicInRESP.String(), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	}
	c.quit = true
	if c.wr.sends != sends || len(c.wr.buf) < replyAt {
		c.hangUp = true
		return
	}
	c.wr.buf = c.wr.buf[:replyAt]
	c.wr.error(respInternalError)
	c.countErrorMessage(respInternalError)
}
