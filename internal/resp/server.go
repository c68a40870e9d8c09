package resp

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

	"github.com/zaris-go/zaris/internal/clock"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/pubsub"
	"github.com/zaris-go/zaris/internal/rawio"
	"github.com/zaris-go/zaris/internal/throttle"
)

// Options are the endpoint's settings: the node's Config.RESP* and what it advertises.
type Options struct {
	ID                  kv.NodeID
	Addr                string // advertised host:port: what MOVED replies and CLUSTER SLOTS name for this node
	TLS                 bool   // the listener speaks TLS
	MaxValueSize        int
	MaxClients          int
	MaxPreAuthPerAddr   int
	IdleTimeout         time.Duration
	CommandTimeout      time.Duration
	AuthTimeout         time.Duration
	MaxQueryBuffer      int
	MaxQueryBufferTotal int64
	Password            string
	Users               []User
	// SyncWrites says that the node acknowledges a write once every in-sync replica holds it, which WAIT
	// counts on.
	SyncWrites bool
	Clock      clock.Clock
	Log        *slog.Logger
	// Tracking is the node's tracking of the keys clients cache, which its writes invalidate; nil: the
	// endpoint keeps one of its own.
	Tracking *Tracking
	// Blocking is the node's record of blocked clients, which its writes wake; nil: the endpoint keeps
	// one of its own.
	Blocking *Blocking
	// PubSub is the node's registry of subscribers, which its Publish delivers to; nil: the endpoint keeps
	// one of its own.
	PubSub *pubsub.Hub
	// SubscriberLimit bounds the bytes of messages waiting for one subscribing client; a Hard of 0 is
	// DefaultSubscriberBuffer.
	SubscriberLimit pubsub.Limit
	// NotifyKeyspaceEvents is the classes of keyspace notifications published at start, as Redis's
	// notify-keyspace-events ("" for none); CONFIG SET changes them. An invalid value publishes none.
	NotifyKeyspaceEvents string
	// Contain handles a panic a command raised outside the key operations; nil: it is only logged.
	Contain func(v any, what string)
}

// Server is a node's Redis Cluster endpoint. It serves every key through the node's own ownership check:
// keys this node actively owns are applied locally, all others are answered with a redirect, never
// forwarded.
type Server struct {
	node            Node
	id              kv.NodeID
	clock           clock.Clock
	log             *slog.Logger
	contain         func(v any, what string)
	ln              net.Listener
	addr            string
	tls             bool
	syncWrites      bool       // Options.SyncWrites
	limits          respLimits // of an authenticated client
	preAuth         respLimits // of a client that has not logged in yet
	budget          *respBudget
	gate            *preAuthGate // admits the clients not logged in yet
	timeouts        respTimeouts
	slack           time.Duration // how late a read deadline may be moved (respTimeouts.slack)
	maxClients      int
	acl             *respACL
	throttle        *throttle.Logins
	commands        map[string]*respCommand
	ctx             context.Context // cancelled on close, so work for a connection stops with the node
	cancel          context.CancelFunc
	tracking        *Tracking // writes of the node's keys invalidate what clients cache
	hub             *pubsub.Hub
	blocking        *Blocking
	subscriberLimit pubsub.Limit
	notify          atomic.Uint32 // the notifyClasses published (notify.go)
	nextID          atomic.Int64
	lastAlarm       atomic.Int64 // unix nanoseconds of the last HTTP-input warning logged
	turningAway     atomic.Int32 // refused connections being told why
	info            respInfo     // what INFO reports besides the connections' own counts

	mu     sync.Mutex
	conns  map[*respConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer returns the endpoint serving node under opt, with no listener yet.
func NewServer(node Node, opt Options) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	timeouts := respTimeouts{idle: opt.IdleTimeout, command: opt.CommandTimeout, auth: opt.AuthTimeout}
	budget := newRESPBudget(opt.MaxQueryBufferTotal)
	tracking := opt.Tracking
	if tracking == nil {
		tracking = NewTracking(TrackedKeys, TrackedBytes)
	}
	hub := opt.PubSub
	if hub == nil {
		hub = pubsub.New()
	}
	if opt.SubscriberLimit.Hard <= 0 {
		opt.SubscriberLimit.Hard = DefaultSubscriberBuffer
	}
	blocking := opt.Blocking
	if blocking == nil {
		blocking = NewBlocking()
	}
	srv := &Server{
		blocking:        blocking,
		hub:             hub,
		subscriberLimit: opt.SubscriberLimit,
		node:            node,
		id:              opt.ID,
		clock:           opt.Clock,
		log:             opt.Log,
		contain:         opt.Contain,
		addr:            opt.Addr,
		tls:             opt.TLS,
		syncWrites:      opt.SyncWrites,
		limits:          newRESPLimits(opt.MaxValueSize, opt.MaxQueryBuffer),
		preAuth:         preAuthRESPLimits(),
		budget:          budget,
		gate:            newPreAuthGate(budget, opt.MaxClients, opt.MaxPreAuthPerAddr),
		timeouts:        timeouts,
		slack:           timeouts.slack(),
		maxClients:      opt.MaxClients,
		acl:             newRESPACL(opt.Password, opt.Users),
		throttle:        newAuthThrottle(),
		commands:        respCommandTable,
		ctx:             ctx,
		cancel:          cancel,
		tracking:        tracking,
		conns:           map[*respConn]struct{}{},
		info:            respInfo{started: time.Now()},
	}
	classes, _ := parseNotifyClasses(opt.NotifyKeyspaceEvents)
	srv.notify.Store(uint32(classes))
	return srv
}

// Serve accepts connections on ln, in the background, until Close.
func (s *Server) Serve(ln net.Listener) {
	s.ln = ln
	s.wg.Add(2)
	go s.accept()
	go s.sampleRates()
}

// Addr is the advertised address.
func (s *Server) Addr() string { return s.addr }

// AuthRequired reports whether a client must log in before it runs commands.
func (s *Server) AuthRequired() bool { return s.acl.required() }

// AdvertisedAddr is the address clients are told to use: the bound one, or, when bound to every interface,
// the data address's host with the bound port.
func AdvertisedAddr(bound *net.TCPAddr, dataAddr string) string {
	if !bound.IP.IsUnspecified() {
		return bound.String()
	}
	host, _, _ := net.SplitHostPort(dataAddr)
	return net.JoinHostPort(host, strconv.Itoa(bound.Port))
}

// accept admits connections until the listener closes. Other accept errors (out of file descriptors, say)
// are waited out with a growing pause rather than ending the endpoint.
func (s *Server) accept() {
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
func (s *Server) admit(conn net.Conn) {
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
func (s *Server) open(conn net.Conn) (*respConn, string) {
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
func (s *Server) turnAway(conn net.Conn, reason string) {
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
func (s *Server) drop(c *respConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.retire(c)
	if c.user == nil {
		s.gate.leave(c.gateAddr)
	}
	s.mu.Unlock()
	s.tracking.stop(c)
	c.unsubscribeAll()
	c.closePushes()
	c.conn.Close()
	c.rd.close()
	c.endTxn()
	s.wg.Done()
}

// Clients counts open connections.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops accepting, closes every connection and waits for every goroutine the server started.
func (s *Server) Close() error {
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
	srv    *Server
	conn   net.Conn
	rd     *respReader
	wr     *respWriter
	req    kv.Request // the request of the command being run, for the commands that run one at a time (request)
	id     int64
	name   string
	user   *respUser // nil until the client logs in
	opened time.Time // when it opened, or was last logged out: the login timeout counts from it
	quit   bool
	hangUp bool // close at once, dropping the replies not sent yet

	// Client-side caching (CLIENT TRACKING): the keys this connection read that its node remembers, nil
	// with tracking off; OPTIN/OPTOUT; CLIENT CACHING's answer for the next command; and the pushes.
	tracked   map[string]struct{}
	trackMode trackMode
	caching   cachingChoice
	pushes    respPushes
	subs      respSubs // the channels, patterns and shard channels it subscribes to (pubsub.go)

	multi      *respMulti          // the open transaction, nil outside MULTI
	watched    []watchedKey        // the keys WATCH recorded
	watchedSet map[string]struct{} // the same keys, to find one at once
	txnHeld    int                 // bytes of the transaction and watched keys, counted in the server's budget
	exec       *execGroup          // set while EXEC runs the queued commands

	stats respConnStats // what INFO counts of the connection
	wrote []uint64      // the partitions, by index in the topology, it has written to: a bit each (WAIT)

	authFailures  int
	gateAddr      netip.Addr // the address preAuthGate counts the connection under until it logs in
	deadline      time.Time  // the read deadline last set
	partialSince  time.Time  // when the command now half-received began to wait
	completedSeen uint64     // rd.completed when partialSince was set

	events      []keyEvent // the keyspace notifications of the running command, published once it is done
	eventsMuted bool       // the running command names its own events, not its key operations'
	reading     bool       // the running command only reads: its reads of missing keys publish keymiss
	// replicaReads: the client sent READONLY, so its reads of slots this node replicates are served here
	// rather than redirected; onReplica: the running command reads such a copy.
	replicaReads, onReplica bool
}

// newRESPConn returns the connection of conn for user (nil: not logged in), whose first read buffer is
// counted in budget.
func newRESPConn(s *Server, conn net.Conn, user *respUser, budget *respBudget) *respConn {
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
	c.pushes.backlog.Limit = s.subscriberLimit
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
		c.srv.contain(v, "a RESP command")
	} else {
		c.srv.log.Error("recovered a panic", "where", "resp", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
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
