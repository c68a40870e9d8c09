// Package zaris is an embedded, in-memory distributed map for Go services.
//
// Each process that calls Join becomes a peer of the cluster: it owns some partitions of the key space and
// sends every other key straight to that key's owner in one network hop. No node forwards a request: a node
// that receives a key it does not actively own answers Moved, and the sender refreshes its routing table
// and retries, a bounded number of times.
//
// # Placement
//
// A key's slot is Redis Cluster's (CRC16/XMODEM of the key, or of its {hash tag}, modulo 16384), so Zaris and
// Redis Cluster clients agree on where a key lives. Slots map proportionally onto S segments (the unit of the
// op log and of catch-up) and segments onto P partitions (the unit of ownership, replication and failover).
// S, P and the replication factor are fixed when the cluster is created; a node with other values is refused
// at Join with ErrClusterMismatch.
//
// # Control plane
//
// Membership and failure detection use gossip (serf). The cluster map (the partition map, and per partition
// the active owner, an epoch and a health state) is the replicated state of a raft group of up to MaxVoters
// voters; the other nodes follow as non-voters. Only the raft leader decides, so every change to the map is
// a committed, ordered command: two nodes never hand out the same epoch, and a minority side of a network
// partition decides nothing. Every node applies each committed change and repoints its routing table.
//
// With DataDir, raft's log, term, vote and snapshots are on disk, fsynced whatever DiskDurability says of
// the data (a voter that forgot its vote in a power loss could vote twice in one term; the fsync costs about
// 0.3 ms per control-plane decision), so epochs only grow across any restart, every node at once included,
// and a full restart comes back with the same map. The raft servers follow membership. A node with DataDir is one server for the life of its
// directory; a memory-only process has forgotten its raft term and vote when it restarts, so it joins as a
// new server and its predecessor is removed. Control-plane connections name the server they are for, so a
// restarted process at its predecessor's address never answers for it. A member that left, or stayed failed
// (or unknown to gossip) for DeadServerTimeout, leaves the servers; new servers join as non-voters and become voters once they have
// caught up with the leader's log (a process that cannot tell, once alive for Timing.ServerStabilization),
// keeping an odd number of voters up to MaxVoters; a voter that drains or has left does not count, and is
// demoted only once the other voters fill the seats the remaining members call for, so its successor takes
// a vote before it gives up its own. A rolling restart, and a cluster whose first voters are all replaced
// one at a time, keep deciding.
//
// # Replication and write concerns
//
// Each partition has ReplicationFactor assigned nodes: the active owner and its replicas. Every write the owner
// applies becomes an op with the next revision of its segment, tagged with the partition's epoch, and is
// streamed to the replicas, which apply ops strictly in revision order. A replica refuses ops carrying an
// epoch older than the newest it has seen for the partition (fencing), so a deposed owner cannot get a write
// acknowledged. A replica that falls behind is fed the ops it missed from the owner's op log in memory,
// which keeps each segment's ops until every replica has acknowledged them and no recent watch poll may
// still read them, up to OpLogRetain and OpLogRetainBytes, or, with DataDir, from its op log
// on disk (DiskRetainBytes, DiskRetainAge) for those memory no longer holds; it gets a snapshot of the
// segment only when neither reaches back that far, or when its copy may follow another history than the
// owner's. Replicas never serve clients; they answer Moved.
//
// Under the Sync write concern (the default), a write is acknowledged only once every replica in the
// partition's in-sync set has applied it. A replica that stops answering for ReplicaAckTimeout is removed from
// the in-sync set by a decision committed through the control plane before the write is acknowledged, never
// silently (while the control plane elects a leader, the write waits about 5 s more for one, then fails);
// it returns to the set once it has caught up: it holds every revision the owner has, and has applied every
// map the owner has, since a map it has yet to apply may drop it from the partition and discard its copy.
// Under Async, a write is acknowledged as soon as the owner applied it: if the owner dies before the op
// reaches a replica, that acknowledged write is lost. With ReplicationFactor 1 there is no replica at all and
// the data is not durable.
//
// # Rebalancing
//
// When a node joins, drains before a graceful Leave, or stays failed for EvictionTimeout, the raft leader
// plans the next partition map with Assign, which moves as few partitions as it can and keeps copies and
// primaries balanced. Each changed partition then moves on its own, at most MaxMigrations at a time: the
// incoming nodes are fed as lagging replicas are, from the op logs or by snapshots, while the owner keeps
// serving; once they are all in sync, an owner that hands over seals the partition (its requests get
// ErrOwnershipChanging, typically for a few milliseconds), waits until the new owner holds every revision it
// has, and the move is committed with the next epoch, after which the old owner answers Moved. If the
// hand-over cannot finish within CutoverTimeout, the old owner keeps the partition under a new epoch and
// tries again later: it never stops serving before another owner is committed. Migrations reports the moves
// under way. A node with Config.Lite holds no partitions; it only routes.
//
// # Batches
//
// ExecuteBatch takes a mix of gets, puts and deletes and costs one request per distinct owner, all sent in
// parallel, instead of one per key; GetMany, PutMany, DeleteMany and GetManyTyped are shorthands for it.
// Keys are placed exactly as single operations place them, the caller's own keys are served in-process,
// and results come back sorted by the items' Index. A batch is not a transaction: each item succeeds or
// fails on its own, and partial success is normal. Items of one key are applied in Index order, so a get
// after a put of the same key in one batch sees the put. The gets of one segment (keys sharing a hash tag
// are in one) that the batch does not also write are read at one revision of the segment and answered
// alike, refused, held back or retried together: they never show part of a transaction, an EXEC or a
// command on several keys. Gets of different segments are read apart, so a batch over several segments may
// see a transaction over them in part; and a segment's gets whose values together exceed a reply frame
// (MaxFrameSize) come back in parts, each at its own revision. Items refused because the caller's routing table
// was stale are re-planned against a refreshed table and resent (only those), within MaxRetries. An owner
// that cannot be reached fails only its own items (ErrNoReply, naming the node). A batch too large for one
// frame goes to its owner in several requests, one after another.
//
// # Transactions
//
// Txn runs a function that reads keys through its Tx, recording the version of each, and buffers writes;
// it then commits them all or none, provided no key it read has changed (ErrConflict otherwise; TxnRetries
// runs it again). Keys of one segment, which a shared hash tag guarantees, commit in one round trip to
// their owner: the version checks and the writes are one atomic write of the segment, replicated, logged
// and watched as one op. Keys of several segments commit in two phases coordinated by the calling node:
// each owner checks its versions and places an intent on each key, holding it against every other writer
// and against readers, in one atomic write per segment; the commit is recorded in the segment of the
// transaction's first key, where the first outcome recorded stands; then each owner applies or drops its
// intents. Intents and records are stored, replicated and moved like values, so an owner's failover or a
// migration keeps them, and an owner resolves intents its coordinator left for longer than TxnTimeout by
// recording an abort unless the commit was recorded first. A read or write of a held key waits, up to
// twice TxnTimeout (ErrLocked after that; a batch item goes again within MaxRetries, and a RESP command is
// answered TRYAGAIN); a prepare that meets another transaction's intent aborts at once, so transactions
// never wait for each other in a cycle. Keys starting with "\x00zaris:" are reserved.
//
// # Hashes, sets, lists and sorted sets
//
// Besides strings, a key may hold a hash (HSet, HGet, HGetAll...), a set (SAdd, SMembers...), a list
// (LPush, LPop, LRange...) or a sorted set (ZAdd, ZRange, ZRank...), with Redis's semantics: a write creates
// the collection, one that empties it deletes the key, and an operation on a key of another kind fails
// with ErrWrongType (WRONGTYPE over RESP). Put, Delete, Expire, Persist and TTL work on every kind; Type
// names it. A collection changes in place on its owner, and a write ships replicas and the disk log only
// the change it made (the fields set, the members removed, how many items popped), never the collection,
// which replicas apply with the same function in revision order. Snapshots carry a large collection in
// pieces of bounded size. The arguments of one operation are bounded by MaxValueSize, and a read whose
// reply would exceed half of MaxFrameSize fails with ErrValueTooLarge.
//
// Pops and conditional writes run at the key's owner in one step, so concurrent callers on any node never
// take the same item: SPop, ZPopMin, ZPopMax, HSetNX, and LMove, which moves an item between two lists of
// one hash tag in one atomic write (a job queue whose worker dies leaves its job on the second list).
// BLPop and BRPop wait for an item of one of their lists, which makes a list a job queue: the pop runs at
// the key's owner, so each item reaches one caller, and a caller waits through a failover of the owner.
// The callers of a node waiting on a key share one Watch of it. A pop whose reply is lost with its owner
// fails with ErrUnconfirmed or a connection error (transport.ErrConnectionLost): the item may have been taken.
//
// # Key watches
//
// Watch follows one key and WatchTag every key of a hash tag's slot: puts, deletes and expiries, in version
// order, each delivered once, on a channel. A change to a hash, set, list or sorted set comes as a
// WatchUpdate with the key's new version and no content. The key's owner serves them from its op log in memory by long
// polls (the transport is request and reply; a poll waits up to WatchPoll for an event), so it keeps nothing
// per watcher between polls: a slow watcher holds back at most what the op log's bounds allow, and one
// reply holds at most WatchBufferEvents events and WatchBufferBytes. The watcher's node re-attaches to whichever node the routing table names
// after a failover, a move or a lost connection, asking for the events after the last revision delivered;
// revisions never go back, so nothing is repeated or skipped. When the owner's log no longer reaches back
// that far (trimmed while the watcher lagged, or begun after a snapshot), the watch delivers a
// WatchCompacted marker and the watched keys' current state, then goes on. Under the Sync concern a poll
// reveals only revisions every in-sync replica holds, as a read does. WatchFrom resumes from a version. An
// owner serves at most MaxWatchers watchers (ErrTooManyWatchers).
//
// Expiry is part of the op stream: a partition's owner deletes its expired keys every ReapInterval by
// expiry ops, which replicas apply like any write and watchers see as WatchExpire. Replicas keep expired
// keys, invisible to reads, until that op arrives, so that an expiry is announced even if they take over.
//
// # Publish and subscribe
//
// Publish sends a message to the subscribers of a channel on every node (Subscribe, PSubscribe for glob
// patterns, or a RESP client's SUBSCRIBE); a RESP client's SPUBLISH reaches only the nodes of the
// channel's slot. Shard channels are for RESP clients alone, which choose the node they subscribe at: a
// process embedding a node subscribes where it runs, which only Publish reaches. Nothing is stored: the publishing node delivers to its own subscribers at once and
// queues the message for every other node, one ordered queue per node (pubsub.go), so each subscriber
// receives one node's messages in the order it published them, each once. Delivery between nodes is at
// most once: a node that does not take a batch for 10 s, or more than 8 MiB behind, misses messages. A
// subscriber more than SubscriberBuffer bytes behind is ended, as is one more than SubscriberSoftBuffer
// behind for longer than SubscriberSoftTime.
//
// # Near cache
//
// With Config.NearCache, a node keeps the values Get reads from other owners in a ristretto cache bounded
// in bytes and serves repeated reads from memory. Each owner reports the keys written in the segments a
// node caches: one long poll per owner (kv.OpNearWatch), read from its op log, drops those keys. A gap in the
// reports (the log trimmed past what the node has seen), a failed poll, or a change of the partition's owner
// or epoch drops every cached value of the segment at once. A fill starts from the segment's revision read
// just before the value, so no later write escapes the reports, and a fill during which its key was dropped
// keeps nothing. This node's own Put, Delete, CompareAndSwap, batch writes and transactions drop the key
// before they return, so a Get never returns a value older than the caller's own acknowledged write. With
// MaxStaleness set, a value the owner has not confirmed for that long is checked by version before it is
// served. NearCacheStats counts hits, misses, reports and drops.
//
// # Read-through loading
//
// With Config.Loader set alike on every node, a read of a missing key (Get, GetEntry, GetMany, Tx.Get,
// a RESP GET) calls the loader at the key's owner. The owner stores what it returns as a Put does
// (replicated under the write concern, with the TTL the loader gives, and only if the key was not
// written or deleted during the load: that write is newer, and stays) and answers every waiting read. As every read
// of a key routes to its owner, a key has one load under way at a time in the whole cluster, however
// many callers on however many nodes ask. A load that fails reaches each waiting caller as ErrLoadFailed,
// with the loader's error text, and stores nothing; the next read loads again. A loader's ErrNotFound is
// a plain miss, remembered for LoaderNegativeTTL when set. A panicking loader fails the load, never the
// node. If the owner dies or hands the key over during a load, the callers' reads go to the new owner,
// which loads once more unless the value reached it. GetMany loads its missing keys at each owner,
// LoaderConcurrency at a time; gets of a key the same batch writes, and reads within a RESP MULTI/EXEC or
// a command on several keys, do not load.
//
// # A memory bound
//
// Config.MaxMemory bounds what a node keeps of the cluster's data. What the in-memory op log and the near
// cache may hold is set aside first; the rest, the data budget, is shared by the partition copies the node
// holds, owned or replicated. Each partition's share is the budget divided by the copies kept by its most
// loaded holder, so every copy of it fits every node that holds one, and the owner, which decides every
// write of the partition, enforces it alone. A write that would grow the partition past its share first
// makes room by the eviction policy (Config.EvictionPolicy, Redis's names): allkeys-lru evicts the key of
// the partition read or written least recently, allkeys-lfu the one used least often, allkeys-random a
// random one; volatile-lru, volatile-lfu and volatile-random do the same among keys with a TTL, and
// volatile-ttl takes the key with a TTL expiring soonest. The ranked policies choose from a pool of the
// partition's 16 best candidates, which 5 keys sampled at each eviction join, and never take a key used or
// written since it was sampled. OBJECT FREQ and IDLETIME show a key's standing. Recency and
// frequency live in 16 bits of each entry's version word, so tracking them adds no memory per key: the
// second of the last access (an idle time wraps after about 18 hours), or a logarithmic counter that loses
// one a minute while the key is idle. Owners count the reads they serve; a near cache's hits do not
// count, and a replica promoted by a failover knows when each key was last written, not read. Under
// noeviction, the default, or when the policy finds nothing to evict,
// the write is refused with ErrOutOfMemory (RESP: -OOM), writing nothing; reads, deletes and expiries are
// always served. An eviction is a write of its own, at the next revision of the key's segment: replicas,
// the disk log and watchers (WatchEvict) receive it in order like a delete, so no failover or move brings
// an evicted key back once a read could have missed it. What an acknowledged write survives is unchanged,
// except that under an evicting policy the key may later be evicted: a read then finds it missing, or
// loads it with Config.Loader. The chaos certification checks this under failures: with every node's
// memory bounded and keys evicted steadily, a key found missing must be one whose eviction was reported.
//
// Writes admitted to one partition at the same instant may pass its share together by one write each.
// The trade-off of shares is that one partition cannot borrow another's room: a value larger than a share
// is refused on a node with room elsewhere, so MaxMemory should be many times the partitions a node holds
// times the largest value. Shares follow the map: a failed node's copies move to the others, whose shares
// shrink. MaxMemory counts the store's estimate of its entries, which follows the heap they take within a
// few percent for strings and every collection (keys, values and elements rounded as the allocator rounds
// them, and per-entry and per-element overheads), but not the rest of the process. Between collections the
// Go heap grows past what is live, so a service that embeds a bounded node should set the runtime's
// memory limit (GOMEMLIMIT, debug.SetMemoryLimit) to MaxMemory, 15% more, and what it needs of its own:
// cmd/zaris sets it to MaxMemory plus 15% plus 64 MiB, and a flood of ten times the bound leaves its peak
// resident memory within MaxMemory plus 15% plus 96 MiB. CONFIG SET maxmemory and maxmemory-policy change
// one node at run time.
//
// # Scans
//
// Scan iterates over the keys of the whole cluster. Every key has a position, its slot followed by a hash of
// the key, that is the same on every node; each segment keeps its keys ordered by position, so a page
// starts where the previous one stopped in logarithmic time. Scan walks the positions in order, asking each
// range's owner for a page and following moves and failovers as single operations do. A key present for
// the whole scan is returned, and no key twice. A page shows each segment at one revision, so never part of
// an atomic write: when the segment changes while the page reads it, the page ends early. Over RESP, SCAN, KEYS and DBSIZE answer for the keys a node
// owns, as a Redis Cluster primary does, with the position as SCAN's cursor.
//
// # Redis Cluster protocol
//
// With Config.RESPAddr set, a node also speaks RESP2 and RESP3, so unmodified Redis Cluster clients can
// use the cluster (cmd/zaris runs a node as a standalone server). Each node serves the keys it actively
// owns and answers any other key with MOVED and the owner's RESP address, exactly as a Redis Cluster node
// would; it never forwards. CLUSTER SLOTS, SHARDS and NODES describe the live runtime map. Multi-key
// commands need all their keys in one slot (use a hash tag), as in Redis Cluster. So do transactions:
// EXEC runs the commands MULTI queued as one atomic write, which replicas, the disk and watchers see whole
// or not at all, and runs nothing if a key WATCH named has changed since. As in Redis, where no command
// runs in the middle of another, a command on several keys (MGET, MSET, DEL, EXISTS) reads them all at one
// revision of their segment and writes them as one atomic write, WATCH reads its keys' versions at one
// revision, and a key's reads (GET, HGETALL...) see a whole EXEC or none of it; under the Sync concern, only
// once every in-sync replica holds it, which a replica that takes over applies whole too. As that write
// reaches replicas as one message, its writes together are bounded by half of MaxFrameSize: inside EXEC, a
// command whose write would pass the bound fails with an error and writes nothing, and an MSET or DEL past
// it is refused whole. Replies wait in memory until the write ends, within RESPMaxQueryBufferTotal with
// the query buffers: an EXEC or multi-key command whose replies would pass it is aborted with an error
// and none of its writes takes effect. CLIENT TRACKING (the default mode,
// with OPTIN or OPTOUT, pushes in RESP3) serves Redis client-side caching: a node remembers the keys each
// tracking connection read from it, bounded, and pushes an invalidation when one is written, through any
// node, or when it stops owning the key. The blocking pops (BLPOP, BLMOVE, BZPOPMIN...) wait at the key's owner, which
// serves its blocked clients in the order they blocked as writes arrive, and answers them with a redirect
// when it stops owning the key.
//
// # Security
//
// With Config.TLS, every peer connection (data plane, internal lane, raft) is mutual TLS, and each end
// accepts the other only if its certificate chains to the cluster's CA and names a node of this cluster:
// the URI SAN zaris://<ClusterName>/node/<name> (NodeCertificateURI). A certificate the same CA signed for
// anything else, a RESP client's say, reaches nothing; a node whose own certificate does not name it does
// not start. TLSFromFiles reads the certificate, key and CA again when their files change, so both can be
// rotated without a restart, and Config.DeniedPeers shuts out a named node, closing its open connections.
// Config.GossipKey encrypts and authenticates gossip; a node with TLS needs one unless Config.OpenGossip
// says otherwise, and a member becomes a control-plane voter only once it has shown, over the data port,
// that it holds the control plane's log. The RESP endpoint checks logins (RESPPassword, RESPUsers),
// slowing guesses per address, and clients not logged in hold at most a share of its connections and
// memory. With DataDir, the directory is its owner's alone (0700), as are the files of the op logs and of
// the control plane's log.
//
// # Operations
//
// Collector reports the node's Prometheus series (zaris_*, with a node label): operations by side, kind
// and status with latency histograms, counted with atomics so the hot path never touches a registry
// (Config.DisableMetrics turns that counting off), and the rest read from the node's state at scrape time.
// HTTPHandler serves a status page, its data, and the /healthz and /readyz probes; Readiness is what
// /readyz reports.
//
// # Versions and upgrades
//
// Version is the release (a semantic version; CHANGELOG.md lists each). ProtocolVersion numbers what nodes
// say to each other: data-port messages, gossip tags and control-plane commands. Every member announces
// the protocol it speaks in its gossip tags and in a greeting at the start of every data-port connection,
// and a node works with peers of its own protocol and of the one before or after it: a peer further apart
// is refused at the door, by gossip with ErrIncompatibleVersion and by the data port before any message,
// each naming both versions. So a cluster is upgraded one process at a time, and until the last one runs
// the new release it can be rolled back the same way.
//
// The cluster's protocol (ClusterMap.Protocol) is the oldest protocol its members speak: the members gossip
// knows, except those that left, and every node the map records holding a copy, so that a node that failed
// and may come back holds it back until its partitions have moved to others (EvictionTimeout). The leader
// raises it once every one of them speaks a newer protocol, and never lowers it. What a protocol version
// introduces is used only once the cluster's protocol has reached it, so a mixed cluster speaks the older
// protocol throughout. Once it has risen, a node of an older protocol refuses to join (each member's tags
// announce the cluster's protocol), and the leader records none that slipped in while it rose. A member
// that leaves gracefully counts no more: stopping the last old node with SIGTERM lets the protocol rise
// before it restarts. Config.PreviousProtocol (cmd/zaris --previous-protocol) makes a node of this release
// speak the previous protocol: set on upgraded nodes, it holds the cluster's protocol back for as long as a
// rollback should stay possible.
//
// A data dir records the format it was written in (DataDirFormat); a release refuses one of a newer format
// with ErrIncompatibleVersion rather than misread it.
//
// # Backups and restores
//
// Backup (RESP BACKUP SAVE, `zaris backup`) copies the cluster's data into a directory: each segment's
// snapshot at one revision, read a piece at a time from its owner, and a MANIFEST with the layout, the
// cluster's name, each segment's revision and SHA-256 checksum, written last. It is a consistent cut. Before
// it copies anything, every owner holds back the steps of transactions over several segments (prepares,
// decisions, resolutions), once those in progress have finished, until the backup ends: each such
// transaction is in the backup whole, decided with all its intents, or not at all. Such a transaction
// meanwhile waits as for a held key, and fails with ErrConflict if the backup outlasts its retries; reads,
// single-key writes and transactions of one segment go on. Every write acknowledged before Backup was called
// is in the backup, with its version and its expiry as an absolute time. A partition that changes owner, or
// an owner whose hold lapses, fails the backup (ErrOwnershipChanging, or an error saying so) and nothing is
// left in its directory. A backup takes CPU from the writes that go on; BackupRate paces it to bound that.
//
// Restore (BACKUP LOAD, `zaris restore`) reads the whole backup and checks every checksum before it sends
// anything: a damaged, partial or unknown backup is refused with ErrBadBackup naming the file. The cluster
// restored into must have the backup's layout and may have any number of nodes. Each segment goes to its
// owner, which installs it at the backup's revision, so keys keep their versions, and answers once its
// replicas hold it. The transactions the backup holds are settled then: the writes of one decided
// committed are applied, the intents of any other dropped. Into a cluster that holds keys Restore writes
// nothing and fails with ErrNotEmpty, unless RestoreReplacing says to replace them; a segment that has seen
// writes is replaced past its revision, every key restored at that new version, so no version it gave
// comes back with another value. Restore into a cluster without traffic: a write made during it to a
// segment not restored yet is replaced. A restore that fails halfway leaves some segments restored; run it
// again with RestoreReplacing. Backups need protocol 2: during a rolling upgrade from protocol 1 they fail
// with ErrIncompatibleVersion.
//
// # Recovering from a lost quorum
//
// The control plane decides only while a majority of its voters runs. When a majority is gone for good
// (memory-only voters killed, machines lost), the live members keep serving under the map they hold but
// nothing changes any more: no failover, no new member, no leave. RecoverControlPlane (RESP RECOVER, `zaris
// recover`), run on one live member, rebuilds the control plane from the live members, as raft's
// RecoverCluster does from a peers file: it surveys every live member, keeps the map of the newest
// control-plane log any of them holds (its commands applied, committed or not), and restarts every member's
// raft instance on that map, as a snapshot past every term and log index any of them reached, under a configuration of the members that answered (an odd number of them voting, up
// to MaxVoters). The new leader then fails over what the dead members owned, as for any failed node. It
// works the same with a data dir, whose control-plane log it replaces.
//
// It refuses with ErrQuorumReachable, changing nothing, while any live member hears a leader, while a
// majority of the voters of a configuration a live member knows answers, or while a voter that does not
// answer is alive to gossip. It is safe only once the missing voters will never run again: a voter cut off
// rather than dead could go on deciding with others out of reach, beside the recovered cluster. What it can
// lose: map changes that no live member's log holds (none, if a live member was a voter that had acknowledged
// every entry), and the keys of partitions whose every in-sync copy was on a dead node; those partitions
// come back empty after EvictionTimeout.
//
// # Panics
//
// A bug of one operation does not take down a node that serves other clients and other keys, nor a
// service that embeds it. Every write computes what it writes before it changes the store, and the
// store marks a segment torn from a write's first change until the write's op has been handed to
// replication; so a panic tells whether it left a change no replica, disk or watcher received. Each entry
// point recovers a panic, logs it at ERROR with its stack and counts it in zaris_panics_total by where:
//
//   - a key operation applied as owner (op), for the Go API on this node, a peer's request or a RESP
//     command, batch items and transactions included: the caller gets ErrInternal (RESP: an
//     "ERR internal error" reply on a connection that stays open).
//   - a RESP command outside the key operations (resp): it is answered "ERR internal error" and its
//     connection closed, as its transaction, watched keys or tracking may be half updated.
//   - a peer's data-plane or internal request outside the key operations (peer): the peer gets an error.
//   - a replica applying its owner's stream (replication): the owner gets an error and sends again.
//   - a background loop of the node (background): the control loop and the leader's decisions, an
//     owner's replica links and hand-overs, expiry, op-log trimming, map polls. The loop goes on with
//     its next round, and a decision or hand-over cut short is made again.
//
// When the panic left a segment torn, the node gives up serving: it refuses every request at once and
// closes, which the cluster sees as a crash. Its partitions fail over to their in-sync replicas, which hold
// every acknowledged write and none of the torn one; the embedding service's calls on it fail with
// ErrClosed. A panic in the control plane's state machine, which every member applies alike, still ends
// the process: a member that skipped an entry would hold a map the others do not.
//
// # Architecture
//
// A Node is a facade (node.go): it builds three components in Join, stops them in Close, and its exported
// methods (zaris.go, and one file per data type) are a few lines that call one of them. Besides its config
// and identity it holds only the components, the broker that carries published messages between nodes
// (pubsub.go), the data port that splits one socket into lanes (dataport.go) and the lifetime that Close
// ends and waits for (lifetime.go). No component holds the Node; each takes the
// few things it uses as a struct of functions or a small interface:
//
//   - the client (client.go), the caller's side: the routing table built from the committed map
//     (routing.go), one route-and-retry loop (client.routeSegment) that sends each key operation, scan page
//     (scan.go) and watch poll (watch.go) to its owner in one hop, batches by rounds of one request per
//     owner (batch.go), the near cache (nearcache.go) and the transaction coordinator (txn.go,
//     txn_commit.go). What routes to this node it hands to the owner in process (localOwner).
//   - the owner (owner.go), the serving side: the store (store.go, with the key operations' table in
//     operations.go and the data types' files), replication (oplog.go, replication.go, replicalink.go, the
//     disk log in persistence.go), cut-overs and the pulls of a partition's copy (cutover.go,
//     possession.go), the watch feed (watchfeed.go), expiry, and the resolution of abandoned transaction
//     intents (txn_resolver.go). It reads the map through mapView and asks the control plane for its lease
//     and its proposals through functions.
//   - the control plane (control.go): raft and its stores, the map's state machine, the control loop and
//     the leader's decisions (a pure function of a view, decide.go), the control-plane servers (voters.go),
//     failure probes and the owner's lease (failover.go), recovery (recover.go) and a leaving node's drain
//     (leave.go). It reaches the data plane only through controlConfig's functions.
//
// Gossip membership (membership.go), the panic guard (panics.go) and the transport (transport/) are shared
// by all three. The vocabulary the node and its edges share, operation numbers, requests and replies,
// statuses and hash slots, is internal/kv's; the root re-exports its public names by alias. The Redis edge
// is a package of its own (internal/resp) that reaches the node through one interface, resp.Node, which
// redis.go, the one core file importing it, implements over the owner and the control plane. A key
// operation has one path whichever edge it comes from: the owner's checkOwner, then applyKV, or
// applyAtomically with a kv.Group (keygroup.go) for a group, over the operations' table.
//
// A Get of a key another node owns: Node.Get (zaris.go) asks the near cache (nearcache.go), which misses;
// the client's execute (client.go) picks the owner from the routing table (routing.go) and sends the request
// (transport/). At the owner, the data lane's handler (node.go) decodes it and calls serveKV (owner.go),
// which checks that the node actively owns the partition under a live lease, then runs the operation's
// read on a segment of the store (store.go, with applyGet from operations.go); under the Sync concern it
// answers only once the in-sync replicas hold what the reply reveals (visibility.go, replication.go). A
// refusal for a stale map makes the client's loop refresh the table and go again.
//
// A Put follows the Get to the owner, whose applyStore (owner.go) enters the partition's cut-over gate
// (cutover.go) and applies the write to the store (store.go). The store's commit hands the op to the write
// listeners in order: the op log's recordWrite (oplog.go) appends it in memory and queues it for the disk
// (persistence.go) and marks it due on each replica's link (replicalink.go), which streams it to the
// replica; then the watch feed (watchfeed.go) wakes its polls and RESP tracking (redis.go) invalidates the
// key. The owner then waits in awaitReplicas (replication.go) until every in-sync replica acknowledged
// the revision, and only then is the Put acknowledged. The replica applies what its link sends in
// serveReplicate, behind the epoch fence (replication.go).
//
// architecture_test.go keeps it so: no type but Node holds a *Node; Node's fields and unexported methods
// stay within budgets that only go down, and its unexported methods are node.go's wiring only; no core
// file but redis.go imports the edge, and the edge imports only the standard library and internal
// packages; transport/, durability/ and internal/ never import the root; one loop resends refused requests; and the
// arrows between files that run up the floors of concern (from the vocabulary up to the edge) stay within
// a budget that only goes down. A new feature lands in a component, or is one: a file of its own, a struct
// of what it uses (functions, or a small interface with an in-memory twin for its tests), built in Join
// and stopped in Close.
//
// Tests run clusters on an in-memory network (internal/memnet) with the same fault injection as sockets,
// and drive failure timers with a manual clock (internal/clocktest): every timer reads Config.Clock.
//
// # Consistency guarantees, as of this version
//
//   - A key has exactly one active owner at a time in the committed map, and every read and write of the key
//     is served by the node that believes itself that owner. Operations on one key, through any node, are
//     applied in the order the owner receives them.
//   - A Sync write that was acknowledged is on the owner and on every replica in the in-sync set at the time
//     of the acknowledgement, and no replica enters the set without it: while a replica is being returned to
//     the set, writes wait for it too, and one it does not acknowledge drops it first, which voids its
//     return.
//   - What an acknowledged Sync write survives. Without DataDir (or with DiskBehind): any sequence of process
//     crashes and restarts in which each partition keeps at least one live member of its in-sync set (the
//     owner included) at every moment; a restarted process is not a copy until it is back in the set, and
//     every copy dying at once loses what they held. With DataDir and DiskWritten (the default), the write
//     was handed to the operating system by every in-sync copy before it was acknowledged: it survives any
//     number of processes killed at once, the whole cluster included, as long as the machines keep their
//     disks; a process that restarts from its data dir keeps its place in the in-sync sets. With
//     DiskSynced every in-sync copy fsynced it (one fsync for many writes): it also survives every machine
//     losing power. With ReplicationFactor 1 the owner's own disk is that copy. A node whose data dir refuses a
//     write (a full or failing disk) acknowledges no write after it, as owner or replica, and has the control
//     plane move its partitions to the others, as a drain does, until its process restarts. An Async write is
//     acknowledged before any of this and survives only what reached a replica or a disk before the crash.
//   - Under the Sync concern a read reveals only state that every in-sync replica holds: an owner that has
//     applied a write its replicas lack answers a read of that segment once they have it, as the write
//     itself waits, so no read returns a value a failover could then lose. Under Async reads never wait.
//   - Failover: when gossip reports an owner failed, the raft leader re-checks it directly and, if it stays
//     silent for FailoverTimeout, promotes each of its partitions to the live in-sync replica holding the
//     most of it, under a higher epoch; the partition map itself does not change. If another live copy of
//     the same history holds more than that replica (writes acknowledged Async, or not acknowledged), the
//     new owner is Recovering: it copies what it lacks from that copy before it serves (clients get
//     ErrOwnershipChanging meanwhile). A new owner by failover checks that each replica's copy is a prefix
//     of its own and resends it whole when it is not. With no live in-sync replica the partition becomes
//     Unavailable (ErrPartitionUnavailable, never a false ErrNotFound); the map keeps the nodes that held
//     it, and the first of them to come back as the same process (one that was cut off, not restarted) is
//     given it again, or, with an intact data dir, restarted. After EvictionTimeout it is recreated, empty,
//     on a live node: what it held is lost, and reads then find nothing. When a node that held it keeps its
//     copies on disk (a DataDir with DiskWritten or DiskSynced), the partition waits for that node instead,
//     which is not evicted meanwhile, for LostPartitionTimeout (a day by default), and recreating it empty
//     after that is logged as an error. A node that restarts without an intact data dir leaves every in-sync set
//     until it has caught up; an owner that restarts from one has each of its partitions decided again
//     under a new epoch, given to the most caught-up of it and its in-sync replicas.
//     Until the map records its new process, a restarted node acts as no partition's owner: it serves
//     nothing and sends its replicas no op, probe or snapshot, even while it replays maps in which its
//     previous process owned partitions; a replica changes its copy only on the word of the process its map
//     names as the partition's owner at that epoch, and a resend of a whole segment decided under one epoch
//     is dropped once the partition has left it. A deposed owner discards its copy and takes the new
//     owner's. If an in-sync replica cannot be reached, the leader waits rather than declare the partition
//     Unavailable.
//   - Health: a partition is Degraded as soon as a copy falls out of the in-sync set. Once every assigned
//     copy is back in sync and has stayed so for HealCooldown, the leader declares it Healthy under a new
//     epoch, so a node that keeps dropping out and coming back causes one transition, not one per flap.
//   - A graceful Leave first drains: every partition the node owns or replicates moves to other nodes as
//     described under Rebalancing, so no acknowledged write is lost, under Async either. The control plane
//     records the drain, and a partition map decided before it that still places the node is void, so the
//     drain ends only once the node holds nothing and no later map gives it a partition. If its context
//     ends first (no leader, or nowhere to move a partition), Leave fails with ErrNotDrained. Where every
//     partition the node still holds has a live in-sync copy elsewhere, it says goodbye and those copies are
//     promoted at once; where it holds the only live copy of one, it closes as a failed node, so the
//     cluster fails over what it can and never records a clean departure of the only copy. A partition
//     left with no owner is recreated empty only once no holder of it lives as the process the map records.
//     Close without Leave is a crash.
//   - An owner serves only while it holds a lease renewed by contact with the raft leader, lasting half of
//     FailoverTimeout; cut off from the control plane, it refuses its partitions (ErrOwnershipChanging)
//     before the leader may promote another node, even if clients still reach it, so no two owners serve
//     at once. A batch checks the lease once for its reads, then refuses them from the moment a lapse is
//     noticed, at the latest FailoverTimeout/8 after it: still well before a promotion. After its lease
//     lapsed, a node serves again only once it has applied a barrier it proposed through the leader, and
//     with it every decision made while it was away, such as its partitions' failover. This assumes the
//     nodes' clocks run at similar rates; it does not need them to agree.
//   - A call that fails with a connection error (transport.ErrConnectionLost) may or may not have been
//     applied; one that fails with transport.ErrUnreachable was never sent. A Sync write that fails after
//     the owner applied it (a replica refused it, the in-sync set could not be changed, or the partition
//     moved meanwhile: ErrUnconfirmed) is not acknowledged but may still take effect later. Such a write
//     is never sent again by the node, since the new owner may hold it already; only writes refused
//     before they were applied are retried.
//   - A key's version (GetEntry, CompareAndSwap) is the revision of its segment at the key's last write: it
//     grows with each write of the key, across a delete and re-create too. Versions travel with the ops and
//     snapshots, so a key keeps its version across failover, moves and restarts from a data dir, and as
//     long as acknowledged writes survive (above), a version a Sync read or write returned is never given
//     to another write. A partition recreated empty after it was lost starts its revisions again from
//     zero, so versions seen before the loss may come back naming other writes. A conditional write
//     (IfVersion, CompareAndSwap, DeleteIfVersion) that finds another version writes nothing and answers
//     with the current one, which reveals state as a read does.
//   - A transaction is serializable and atomic: it takes effect at one instant at which every version it
//     read still held, and every read, every copy and every watcher sees all of its writes or none, across
//     failovers, moves and the death of its coordinator at any step. A read here is a read of one key, or
//     of several keys of one segment (GetMany, MGET, a SCAN page), which are read at one revision; a read
//     over several segments is one read per segment, each at its own instant. Its writes survive what an acknowledged
//     Sync write survives: every step is written under the Sync concern. Txn returns nil only once the
//     commit is recorded; an ErrConflict means it did not take effect; an ErrUnconfirmed means its
//     outcome could not be learned. A record is kept for TxnRecordRetention when its coordinator could not
//     drop it: an owner that cannot resolve an intent for that long (every copy of the record's partition
//     gone meanwhile) would abort a transaction that committed elsewhere.
//   - Expiry times are absolute, set by the owner's clock; every copy expires a key at that instant by its
//     own clock, so copies agree only as far as the nodes' clocks do. Expired keys are never returned; the
//     owner reclaims them in the background by expiry ops, which replicas apply in revision order.
package zaris
