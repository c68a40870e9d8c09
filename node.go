package zaris

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// Node is one peer of a Zaris cluster: it owns the partitions the cluster map gives it and routes every
// other key to its owner. Create one with Join; it is safe for concurrent use.
type Node struct {
	cfg    Config
	id     NodeID
	layout Layout
	log    *slog.Logger

	stats   nodeStats
	metrics *opMetrics    // nil with Config.DisableMetrics
	panics  *panicGuard   // contains the panics of its entry points (panics.go)
	client  *client       // the caller side: routing, batches, the near cache
	own     *owner        // the serving side: the copies this node holds, and what it serves of them
	ctl     *controlPlane // this node's member of the control plane: raft, the map, the leader's decisions
	port    dataPort      // the one listening socket every peer reaches, and the dialer reaching theirs
	members *membership
	redis   *redisEdge
	pubsub  *broker // published messages, to this node's subscribers and the other nodes'
	life    lifetime
}

// Join starts a node with cfg and makes it a member of the cluster reached through cfg.Join (or of a new
// cluster when cfg.Join is empty). It returns once the node is a member; operations wait until the cluster
// has assigned its first partition map (see Ready).
func Join(ctx context.Context, cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		if err := checkOwnCertificate(&cfg); err != nil {
			return nil, err
		}
	}
	layout, _ := NewLayout(cfg.Segments, cfg.Partitions)
	n := &Node{
		cfg:    cfg,
		id:     NodeID(cfg.Name),
		layout: layout,
		log:    cfg.Logger.With("node", cfg.Name),
		port:   dataPort{dialer: cfg.Dialer},
	}
	n.life.ctx, n.life.end = context.WithCancel(context.Background())
	if n.port.dialer == nil {
		n.port.dialer = defaultDialer(&cfg)
	}
	n.port.dialer = secureDialer(&cfg, n.port.dialer)
	if cfg.TLS == nil {
		n.log.Warn("peer connections are neither encrypted nor authenticated: any process reaching the data port is a peer (set Config.TLS)")
	}
	if cfg.GossipKey == nil {
		n.log.Warn("gossip is neither encrypted nor authenticated: any process reaching the gossip port can join (set Config.GossipKey)")
	}
	if !cfg.DisableMetrics {
		n.metrics = newOpMetrics()
	}
	store := newStore(layout.Segments, cfg.Clock)
	store.budget = newMemoryBudget(&n.cfg, layout, store)
	// Not from the goroutine that gave up: Close waits for the requests in progress, that one among them.
	n.panics = &panicGuard{log: n.log, torn: store.tornSegments, stop: func() { go n.Close() }}
	fsm := newMapFSM(newClusterMap(layout, cfg.ReplicationFactor), n.beforeCommit, n.onCommit)
	fsm.beforeApply = cfg.hooks.beforeApply
	n.client = &client{cfg: &n.cfg, layout: layout, stats: &n.stats, metrics: n.metrics, life: n.life.ctx, wg: &n.life.wg, log: n.log}
	n.own = &owner{store: store, backups: newBackupHold(cfg.Clock), restores: &snapshotStage{staged: map[int]*segmentSnapshot{}},
		backupReads: &heldPulls{idle: maxBackupLease, clock: cfg.Clock, held: map[pullKey]*heldPull{}}, ownerConfig: ownerConfig{
			cfg: &n.cfg, id: n.id, layout: layout, log: n.log, view: fsm,
			holdsLease:   func() bool { return n.ctl.holdsLease() },
			leaseHeld:    func() bool { return n.ctl.lease.held.Load() },
			propose:      func(ctx context.Context, cmd *command) error { return n.ctl.propose(ctx, cmd) },
			client:       n.client,
			callReplica:  n.client.callReplica,
			stats:        &n.stats,
			metrics:      n.metrics,
			panics:       n.panics,
			goBackground: n.goBackground,
			life:         n.life.ctx,
			wg:           &n.life.wg,
		}}
	n.client.local = n.own
	n.client.router = newRouter(routerConfig{
		id:          n.id,
		clusterMap:  fsm.clusterMap,
		leader:      func() NodeID { return n.ctl.leaderID() },
		fetch:       n.client.fetchMap,
		dialOptions: n.transportOptions,
		pollTimeout: cfg.PollInterval,
		life:        n.life.ctx,
		log:         n.log,
		stats:       &n.stats.routingStats,
		installed: func(old, next *ClusterMap) {
			if n.client.near != nil {
				n.client.near.remapped(old, next)
			}
		},
	})
	n.client.batch = batchSender{cfg: &n.cfg, router: n.client.router, stats: &n.stats, serveOwned: n.own.serveBatchItems}
	n.own.repl = newReplication(replicationConfig{
		id:         n.id,
		layout:     layout,
		cfg:        &n.cfg,
		store:      n.own.store,
		clusterMap: fsm.clusterMap,
		call:       n.client.callReplica,
		propose:    func(ctx context.Context, cmd *command) error { return n.ctl.propose(ctx, cmd) },
		offer:      func(ctx context.Context, cmd *command) error { return n.ctl.offer(ctx, cmd) },
		life:       n.life.ctx,
		wg:         &n.life.wg,
		log:        n.log,
		guard:      n.panics.guarded,
	})
	n.client.incarnation = n.own.repl.incarnation
	n.ctl = newControlPlane(controlConfig{
		cfg: &n.cfg, id: n.id, layout: layout, log: n.log, incarnation: n.own.repl.incarnation, dialer: n.port.dialer,
		options: n.transportOptions, dataAddr: n.DataAddr, callPeer: n.client.callInternal,
		callReplica: n.client.callReplica, localCopy: func(seg int) (uint64, uint64) { return n.own.store.revision(seg), n.own.repl.lines[seg].Load() },
		nudgeReplicas: n.own.repl.nudgeReplicas, failovers: &n.stats.failovers, guard: n.panics.guarded, gate: &n.life.gate,
		life: n.life.ctx, wg: &n.life.wg,
	}, fsm)
	n.own.watches = newWatchFeed(n.own.repl.oplog, n.own.store, layout, cfg.Clock, watchLimits{
		maxWatchers: cfg.MaxWatchers, maxEvents: cfg.WatchBufferEvents, maxBytes: cfg.WatchBufferBytes,
		idle: 3 * cfg.WatchPoll,
	})
	n.own.cut = newCutovers(layout.Partitions)
	n.pubsub = newBroker(brokerConfig{
		self: n.id, incarnation: n.own.repl.incarnation, layout: layout, clusterMap: fsm.clusterMap,
		call: n.client.callInternal, background: n.goBackground, life: n.life.ctx, clock: cfg.Clock,
		maxBatch: cfg.MaxFrameSize / 2, maxQueued: publishQueueBytes, subscriber: cfg.subscriberLimit(),
		retry: cfg.RetryBackoff, log: n.log,
	})
	n.redis = newRedisEdge()
	if cfg.NearCache.MaxBytes > 0 {
		near, err := newNearCache(cfg, layout, n.log, n.client.startNearPoller)
		if err != nil {
			return nil, fmt.Errorf("%w: near cache: %w", ErrInvalidConfig, err)
		}
		n.client.near = near
	}
	if cfg.Loader != nil {
		storeLoaded := func(ctx context.Context, key string, fn func(kv.Group)) kv.Reply {
			seg, refusal, owned := n.own.checkOwner(key)
			if !owned {
				return refusal
			}
			return kv.Reply{Status: n.own.applyAtomically(ctx, seg, []string{key}, fn)}
		}
		n.own.loads = newReadThrough(&n.cfg, storeLoaded, n.goBackground, n.life.ctx, n.log)
	}
	n.client.pops = &blockingPops{
		popOne: func(ctx context.Context, op transport.Op, key string) ([][]byte, error) {
			reply, err := n.client.collectionCall(ctx, op, key, intArg(1))
			return reply.Values, err
		},
		watch:      func(ctx context.Context, key string) (<-chan WatchEvent, error) { return n.Watch(ctx, key) },
		background: n.goBackground, life: n.life.ctx, clock: cfg.Clock, backoff: cfg.RetryBackoff,
		keys: map[string]*keyWait{},
	}
	n.client.router.install(fsm.clusterMap(), causePush)

	if err := n.start(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	if err := n.recover(); err != nil {
		return err
	}
	n.own.store.onWrite = n.writeListeners().fanOut()
	n.own.store.maxGroupBytes = n.cfg.MaxFrameSize / 2 // an atomic group reaches replicas as one op, in one frame
	if err := n.listen(); err != nil {
		return err
	}
	if err := n.ctl.startRaft(n.raftListener()); err != nil {
		return err
	}
	n.port.serve(&n.life.wg)
	edge := &edgeNode{own: n.own, ctl: n.ctl, pubsub: n.pubsub, recover: n.RecoverControlPlane,
		backup: n.Backup, restore: n.Restore, backupDir: n.cfg.BackupDir,
		messages: func() (uint64, uint64) { return infoMessages(n.Stats(), n.ReplicationStats()) }}
	contain := func(v any, what string) { n.panics.containPanic(panicInRESP, -1, v, what) }
	if err := n.redis.start(&n.cfg, n.DataAddr(), edge, contain, n.log); err != nil { // before membership: the tags advertise its address
		return err
	}
	members, err := startMembership(&n.cfg, n.DataAddr(), n.processTags())
	if err != nil {
		return err
	}
	n.members = members
	n.ctl.members.Store(members)
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := n.members.join(n.cfg.Join); err != nil {
		return err
	}
	n.life.wg.Add(2)
	go n.ctl.forwardEvents()
	n.ctl.control.Go(n.ctl.runControl)
	go n.own.runCutovers()
	n.every(n.cfg.PollInterval, n.client.router.pollOnce)
	n.every(n.cfg.ReapInterval, n.own.expireOwned)
	n.every(n.cfg.TxnTimeout/4, n.own.resolveStaleIntents)
	n.every(n.cfg.FailoverTimeout/8, func() { n.ctl.holdsLease() }) // notices a lapse no request saw
	n.every(opLogTrimInterval, func() { n.own.repl.trimOpLog(n.own.watches.marks.oldest(n.cfg.Clock.Now())) })
	n.every(n.cfg.Timing.Reconcile, n.ctl.watchLeader)
	n.log.Info("joined", "data", n.DataAddr(), "gossip", n.GossipAddr())
	return nil
}

// writeListeners are the parts that hear every write the store commits, in order: replication records the
// op in the log first, then the polls waiting for the segment's next op are woken, the keys RESP clients
// cache are invalidated, and a load of the key under way is superseded.
func (n *Node) writeListeners() writeListeners {
	var ls writeListeners
	if inject := n.cfg.hooks.panicOnWrite; inject != nil {
		ls = append(ls, func(_ int, _, _ uint64, key string, _ *entry, _ writeChange) {
			if inject(key) {
				panic("zaris: panic injected into the write of a key")
			}
		})
	}
	ls = append(ls, n.own.repl.recordWrite, n.own.watches.written, n.redis.written)
	if n.own.loads != nil {
		ls = append(ls, n.own.loads.written)
	}
	return ls
}

// beforeCommit runs on the control plane's apply goroutine for every new map, before the node serves under
// it, so that the memory budget shares the data budget by it and replication drops the copies it must not
// keep. It skips maps that do not record this process
// (those a restarted node replays from its previous life): its copies came from the owners of today's map.
func (n *Node) beforeCommit(old, next *ClusterMap) {
	n.own.store.budget.mapChanged(next) // the partitions' shares, before any write is routed by next
	if n.own.recordedIn(old) {
		n.own.repl.onOwnershipChange(old, next)
	}
}

// onCommit runs on the control plane's apply goroutine for every new map, once replication has seen the
// ownership changes: it repoints the routing table and wakes what may act on the change.
func (n *Node) onCommit(old, next *ClusterMap) {
	n.stats.recentFailovers.note(old, next, n.cfg.Clock.Now())
	n.client.router.install(next, causePush)
	n.redis.ownershipChanged(func(key string) bool { return next.Runtime[n.layout.KeyPartition(key)].Owner == n.id },
		func(channel string) bool { return n.pubsub.servesSlot(next, channel) })
	n.own.repl.wakeWaiters()
	n.own.watches.remapped()
	n.own.cut.wake()
	if next.moving() || old.moving() {
		n.ctl.wakeControl() // the next step of a move may be ready: no need to wait for the tick
	}
}

// recover reloads the node's data from DataDir, if it has one, before the node joins: the partitions it
// held come back at the revisions it had, and owners send only what it missed.
func (n *Node) recover() error {
	if n.cfg.DataDir == "" {
		return nil
	}
	ident, err := loadIdentity(n.cfg.DataDir, n.id)
	if err != nil {
		return err
	}
	n.ctl.serverInc = ident.Server // raft's state is on disk: the server outlives the process
	intact, err := recordDurability(n.cfg.DataDir, n.cfg.DiskDurability)
	if err != nil {
		return err
	}
	disk, err := openDiskLog(diskLogConfig{cfg: &n.cfg, log: n.log, life: n.life.ctx, wg: &n.life.wg, failed: func(error) {
		n.goBackground(func() {
			keepDraining(n.life.ctx, n.cfg.Clock, n.cfg.Timing.RaftCommit, n.log, func(ctx context.Context) (bool, error) {
				m := n.ctl.fsm.clusterMap()
				return n.ctl.drainRecorded(m), n.ctl.recordDrain(ctx, m)
			})
		})
	}})
	if err != nil {
		return err
	}
	segments, ops, err := n.own.repl.replay(disk)
	if err != nil {
		disk.store.Close()
		return err
	}
	n.own.disk, n.own.intact = disk, intact
	n.own.repl.disk = disk
	n.own.repl.stats.recoveredOps.Add(uint64(ops))
	n.life.wg.Add(1)
	go disk.run()
	n.every(n.cfg.DiskTrimInterval, func() { disk.trim(n.own.repl.checkpointToDisk) })
	n.log.Info("recovered from data dir", "dir", n.cfg.DataDir, "segments", segments, "ops", ops)
	return nil
}

// listen opens the shared data port: the data plane and the control plane, told apart by their first byte.
func (n *Node) listen() error {
	ln, err := listenData(&n.cfg)
	if err != nil {
		return fmt.Errorf("zaris: listen on %s: %w", n.cfg.DataAddr, err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; ip.IsUnspecified() {
		ln.Close()
		return fmt.Errorf("%w: DataAddr %q must name an address other nodes can reach", ErrInvalidConfig, n.cfg.DataAddr)
	}
	n.port.open(ln, secureListener(&n.cfg, ln), greeting(&n.cfg),
		transport.NewServer((*dataHandler)(n), n.transportOptions(muxData)),
		transport.NewServer(transport.HandlerFunc(n.serveInternal), n.transportOptions(muxInternal)))
	n.life.wg.Go(func() { n.port.mux.Serve() })
	return nil
}

// transportOptions are the options of the data port's lane that lane names, for servers and clients.
func (n *Node) transportOptions(lane byte) transport.Options {
	return transport.Options{
		MaxFrameSize:     n.cfg.MaxFrameSize,
		Dialer:           n.port.dialer,
		MuxByte:          lane,
		Greeting:         new(greeting(&n.cfg)),
		Logger:           n.log,
		MaxConns:         n.cfg.DataMaxConns,
		MaxRequests:      n.cfg.DataMaxRequests,
		MaxConnRequests:  n.cfg.DataMaxConnRequests,
		MaxBufferedBytes: n.cfg.DataMaxBufferedBytes,
		IdleTimeout:      n.cfg.DataIdleTimeout,
		ReadTimeout:      n.cfg.DataReadTimeout,
		WriteTimeout:     n.cfg.DataWriteTimeout,
	}
}

// raftListener is the control plane's share of the data port, within bounds of its own. A stream that
// never speaks is closed here; one quiet past DataIdleTimeout later is closed by raftStream.
func (n *Node) raftListener() net.Listener {
	return transport.LimitListener(n.port.mux.Listener(muxRaft), transport.StreamLimits{
		MaxConns:         n.cfg.RaftMaxConns,
		FirstByteTimeout: n.cfg.DataIdleTimeout,
		WriteTimeout:     n.cfg.DataWriteTimeout,
	})
}

// serveRequest is the handler of the data lane: callers' key and batch requests.
func (n *Node) serveRequest(ctx context.Context, op transport.Op, payload []byte) (_ []byte, err error) {
	defer n.panics.recoverRequest(panicInPeer, op, &err)
	switch {
	case n.refuses(op):
	case lookupKeyOp(op) != nil:
		var req kv.Request
		if err := decodeRequest(&req, payload); err != nil { // req.Value aliases payload, which is ours alone
			return marshalReply(&kv.Reply{Status: StatusInvalidRequest}), nil
		}
		n.stats.served.Add(1)
		reply := n.own.serveKV(ctx, op, &req)
		return marshalReply(&reply), nil
	case op == kv.OpBatch:
		start := time.Now()
		reply, err := n.own.serveBatch(ctx, payload)
		n.own.ownerOp(op, statusOf(err), start)
		return reply, err
	case op == kv.OpWatch:
		return n.own.serveWatchRequest(ctx, payload)
	case op == kv.OpNearWatch:
		return n.own.serveNearWatchRequest(ctx, payload)
	case op == kv.OpScan:
		return n.own.serveScanRequest(ctx, payload)
	case op == kv.OpRestore:
		return n.own.serveRestore(ctx, payload), nil
	}
	return nil, fmt.Errorf("zaris: unknown operation %d", op)
}

// dataHandler serves the data lane (serveRequest) and takes back the memory of batch replies once the
// transport has copied them.
type dataHandler Node

func (h *dataHandler) ServeRequest(ctx context.Context, op transport.Op, payload []byte) ([]byte, error) {
	return (*Node)(h).serveRequest(ctx, op, payload)
}

func (h *dataHandler) ReleaseResponse(op transport.Op, resp []byte) {
	if op == kv.OpBatch {
		putWireBuffer(new([]byte), resp)
	}
}

// serveInternal is the handler of the internal lane: requests that never wait on another node.
func (n *Node) serveInternal(ctx context.Context, op transport.Op, payload []byte) (_ []byte, err error) {
	site := panicInPeer
	if op == kv.OpReplicate {
		site = panicInReplication
	}
	defer n.panics.recoverRequest(site, op, &err)
	switch {
	case n.refuses(op):
	case n.panics.gaveUp.Load():
		return nil, fmt.Errorf("%w: the node gave up serving", ErrInternal)
	case op == kv.OpGetMap:
		return encode(n.ctl.fsm.clusterMap())
	case op == kv.OpReplicate:
		var req replicateRequest
		if err := req.decodeMsg(payload); err != nil {
			return nil, err
		}
		reply := n.own.repl.serveReplicate(ctx, &req)
		return reply.marshal(), nil
	case op == kv.OpPropose:
		return n.ctl.serveProposal(payload)
	case op == kv.OpServerProgress:
		return n.ctl.serveProgress(payload)
	case op == kv.OpPublish:
		return n.pubsub.serve(payload)
	case op == kv.OpBackup:
		return n.own.serveBackup(payload)
	case op == kv.OpRecoverySurvey || op == kv.OpRecoveryInstall:
		return n.ctl.serveRecovery(op, payload)
	}
	return nil, fmt.Errorf("zaris: unknown operation %d", op)
}

// refuses reports whether this node answers op as a node of a version without it would: one that speaks
// an older protocol, or as a test has it.
func (n *Node) refuses(op transport.Op) bool {
	return n.cfg.hooks.refuseOp != nil && n.cfg.hooks.refuseOp(op) || greeting(&n.cfg).Version < opProtocol(op)
}

// every runs fn each interval in a goroutine of its own until the node stops; Close waits for it.
func (n *Node) every(interval time.Duration, fn func()) {
	n.life.wg.Add(1)
	go func() {
		defer n.life.wg.Done()
		tick := n.cfg.Clock.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-n.life.ctx.Done():
				return
			case <-tick.C():
				n.panics.guarded("background loop", fn)
			}
		}
	}()
}

// Close stops the node at once; to the cluster it looks like a crash. It waits for every goroutine the node
// started. Use Leave to depart gracefully.
func (n *Node) Close() error {
	n.life.closeOnce.Do(func() {
		n.life.end()
		n.life.gate.close()
		errs := n.ctl.stop()
		if n.members != nil {
			errs = append(errs, n.members.shutdown())
		}
		errs = append(errs, n.port.close()...)
		errs = append(errs, n.redis.close())
		n.client.router.close()
		n.life.wg.Wait()
		if n.client.near != nil {
			n.client.near.close()
		}
		n.life.closeErr = errors.Join(errs...)
	})
	return n.life.closeErr
}

// goBackground runs f in a goroutine that Close waits for, or not at all once Close has begun, so that no
// goroutine is added to n.life.wg while Close waits on it.
func (n *Node) goBackground(f func()) bool {
	if !n.life.gate.enter() {
		return false
	}
	defer n.life.gate.leave()
	n.life.wg.Go(func() { n.panics.guarded("background job", f) })
	return true
}

// processTags describes this node's process to the other members: with a partition map reloaded from
// its data dir, the cluster's protocol that map records.
func (n *Node) processTags() processTags {
	proc := processTags{incarnation: n.own.repl.incarnation, server: n.ctl.serverInc, intact: n.own.intact,
		durable: n.cfg.DataDir != "" && n.cfg.DiskDurability != DiskBehind, protocol: greeting(&n.cfg)}
	if m := n.ctl.fsm.clusterMap(); m.Version > 0 {
		proc.cluster = &m.Protocol
	}
	return proc
}
