package zaris

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// PutOption adjusts one Put.
type PutOption func(*putOptions)

// WithTTL makes the value expire after d; zero or negative means no expiry.
func WithTTL(d time.Duration) PutOption {
	return func(o *putOptions) { o.ttl = d }
}

// Get returns the value stored under key, or an error matching ErrNotFound; a stored empty value reads as an
// empty slice, never nil. With Config.NearCache, a key another node owns may be served from this node's
// memory (nearcache.go).
func (n *Node) Get(ctx context.Context, key string) ([]byte, error) {
	if v, served, err := n.client.nearGet(ctx, key); served {
		return v, err
	}
	reply, err := n.client.execute(ctx, kv.OpGet, &kv.Request{Key: key})
	if err != nil {
		return nil, err
	}
	if err := replyErr(reply); err != nil {
		return nil, callerErr(ctx, err)
	}
	return reply.Value, nil
}

// callerErr is err, or the caller's context's error when that ended first: a caller that gave up waiting
// for an owner (for a load, say) learns why, wherever the owner was.
func callerErr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return err
}

// Put stores value under key on the key's owner. The caller may reuse value once Put returns.
func (n *Node) Put(ctx context.Context, key string, value []byte, opts ...PutOption) error {
	if len(value) > n.cfg.MaxValueSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(value), n.cfg.MaxValueSize)
	}
	o := putOptionsOf(opts)
	if o.ifVersion {
		_, err := n.client.putIfVersion(ctx, key, value, o)
		return err
	}
	if o.cond != 0 {
		reply, err := n.client.putIf(ctx, key, value, 0, o)
		if err != nil {
			return err
		}
		return putIfErr(reply)
	}
	reply, err := n.client.execute(ctx, kv.OpPut, &kv.Request{Key: key, Value: value, TTL: int64(o.ttl), Concern: o.concern})
	if err != nil {
		return err
	}
	return statusErr(reply.Status)
}

// Delete removes key and reports whether it held a live value.
func (n *Node) Delete(ctx context.Context, key string) (existed bool, err error) {
	reply, err := n.client.execute(ctx, kv.OpDelete, &kv.Request{Key: key})
	if err != nil {
		return false, err
	}
	if reply.Status == StatusNotFound {
		return false, nil
	}
	return reply.Status == StatusSuccess, statusErr(reply.Status)
}

// GetTyped reads key and decodes its msgpack value into a T.
func GetTyped[T any](ctx context.Context, n *Node, key string) (T, error) {
	raw, err := n.Get(ctx, key)
	if err != nil {
		var zero T
		return zero, err
	}
	return decodeValue[T](key, raw)
}

// decodeValue decodes key's msgpack value into a T; every typed read goes through it.
func decodeValue[T any](key string, raw []byte) (T, error) {
	var v T
	if err := msgpack.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("%w: key %q: %w", ErrDecode, key, err)
	}
	return v, nil
}

// PutTyped encodes v with msgpack and stores it under key.
func PutTyped[T any](ctx context.Context, n *Node, key string, v T, opts ...PutOption) error {
	raw, err := msgpack.Marshal(v)
	if err != nil {
		return fmt.Errorf("zaris: encode value for key %q: %w", key, err)
	}
	return n.Put(ctx, key, raw, opts...)
}

// Incr adds delta to the integer stored under key and returns the result, keeping the key's expiry. A
// missing key counts as 0. A value that is not a decimal integer, or a sum that overflows, fails with
// ErrNotInteger and leaves the value alone.
func (n *Node) Incr(ctx context.Context, key string, delta int64) (int64, error) {
	reply, err := n.client.execute(ctx, kv.OpIncr, &kv.Request{Key: key, Delta: delta})
	if err != nil {
		return 0, err
	}
	if reply.Status == StatusInvalidRequest {
		return 0, ErrNotInteger
	}
	return reply.Int, statusErr(reply.Status)
}

// IncrByFloat adds delta to the number stored under key and returns the result, keeping the key's expiry.
// It computes as Redis's INCRBYFLOAT does, in 80-bit extended precision, and stores the result as decimal
// text with at most 17 digits after the point. A missing key counts as 0. A value that is not a number, or
// a result that would not be finite, fails with ErrNotFloat, and a result whose text would be longer than
// Config.MaxValueSize fails with ErrValueTooLarge; either leaves the value alone. A result beyond
// float64's range is returned as an infinity, though stored exactly.
func (n *Node) IncrByFloat(ctx context.Context, key string, delta float64) (float64, error) {
	reply, err := n.client.execute(ctx, kv.OpIncrByFloat, &kv.Request{Key: key, Value: strconv.AppendFloat(nil, delta, 'g', -1, 64)})
	if err != nil {
		return 0, err
	}
	if reply.Status == StatusInvalidRequest && reply.Int == kv.RefusedTooLarge {
		return 0, fmt.Errorf("%w: the sum under key %q would exceed %d bytes", ErrValueTooLarge, key, n.cfg.MaxValueSize)
	}
	if reply.Status == StatusInvalidRequest {
		return 0, ErrNotFloat
	}
	if err := statusErr(reply.Status); err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(string(reply.Value), 64)
	if errors.Is(err, strconv.ErrRange) {
		err = nil
	}
	return f, err
}

// Append appends value to the value stored under key, creating the key when it is missing and keeping its
// expiry otherwise, and returns the new length. A result longer than Config.MaxValueSize fails with
// ErrValueTooLarge and leaves the value alone.
func (n *Node) Append(ctx context.Context, key string, value []byte) (int, error) {
	if len(value) > n.cfg.MaxValueSize {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(value), n.cfg.MaxValueSize)
	}
	reply, err := n.client.execute(ctx, kv.OpAppend, &kv.Request{Key: key, Value: value})
	if err != nil {
		return 0, err
	}
	if reply.Status == StatusInvalidRequest {
		return 0, fmt.Errorf("%w: key %q would exceed %d bytes", ErrValueTooLarge, key, n.cfg.MaxValueSize)
	}
	return int(reply.Int), statusErr(reply.Status)
}

// SetRange overwrites the value stored under key from offset with value, padding with zero bytes past its
// end, creating the key when it is missing and keeping its expiry otherwise, and returns the new length.
// An empty value writes nothing and returns the current length. A negative offset fails with
// ErrInvalidRequest, and a result longer than Config.MaxValueSize with ErrValueTooLarge.
func (n *Node) SetRange(ctx context.Context, key string, offset int, value []byte) (int, error) {
	switch {
	case offset < 0:
		return 0, fmt.Errorf("%w: negative offset %d", ErrInvalidRequest, offset)
	case len(value) == 0:
		v, err := n.Get(ctx, key)
		if errors.Is(err, ErrNotFound) {
			err = nil
		}
		return len(v), err
	case offset > n.cfg.MaxValueSize-len(value):
		return 0, fmt.Errorf("%w: %d bytes from offset %d, limit %d", ErrValueTooLarge, len(value), offset, n.cfg.MaxValueSize)
	}
	reply, err := n.client.execute(ctx, kv.OpSetRange, &kv.Request{Key: key, Delta: int64(offset), Value: value})
	if err != nil {
		return 0, err
	}
	if reply.Status == StatusInvalidRequest {
		return 0, fmt.Errorf("%w: key %q would exceed %d bytes", ErrValueTooLarge, key, n.cfg.MaxValueSize)
	}
	return int(reply.Int), statusErr(reply.Status)
}

// GetAndDelete removes key and returns the value it held, or an error matching ErrNotFound.
func (n *Node) GetAndDelete(ctx context.Context, key string) ([]byte, error) {
	return n.client.getAfter(ctx, kv.OpGetDel, &kv.Request{Key: key})
}

// GetAndExpire returns the value stored under key and sets the key to expire after ttl, as Expire does: a
// zero or negative ttl deletes the key. A missing key fails with ErrNotFound.
func (n *Node) GetAndExpire(ctx context.Context, key string, ttl time.Duration) ([]byte, error) {
	if ttl <= 0 {
		ttl = -1 // a zero TTL would remove the expiry
	}
	return n.client.getAfter(ctx, kv.OpGetEx, &kv.Request{Key: key, TTL: int64(ttl)})
}

// GetAndPersist returns the value stored under key and removes its expiry, as Persist does. A missing key
// fails with ErrNotFound.
func (n *Node) GetAndPersist(ctx context.Context, key string) ([]byte, error) {
	return n.client.getAfter(ctx, kv.OpGetEx, &kv.Request{Key: key})
}

// getAfter runs an operation that replies with the key's value.
func (c *client) getAfter(ctx context.Context, op transport.Op, req *kv.Request) ([]byte, error) {
	reply, err := c.execute(ctx, op, req)
	if err != nil {
		return nil, err
	}
	return reply.Value, statusErr(reply.Status)
}

// Expire sets key to expire after ttl and reports whether the key exists. A zero or negative ttl deletes
// the key at once.
func (n *Node) Expire(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return n.client.existsAfter(ctx, kv.OpExpire, &kv.Request{Key: key, TTL: int64(ttl)})
}

// Persist removes key's expiry and reports whether there was one to remove.
func (n *Node) Persist(ctx context.Context, key string) (bool, error) {
	reply, err := n.client.execute(ctx, kv.OpPersist, &kv.Request{Key: key})
	if err != nil || reply.Status == StatusNotFound {
		return false, err
	}
	return reply.Int == 1, statusErr(reply.Status)
}

// Exists reports whether key has a live value, without fetching it.
func (n *Node) Exists(ctx context.Context, key string) (bool, error) {
	return n.client.existsAfter(ctx, kv.OpExists, &kv.Request{Key: key})
}

// TTL returns the time key has left to live: NoExpiry when it never expires, and an error matching
// ErrNotFound when the key does not exist.
func (n *Node) TTL(ctx context.Context, key string) (time.Duration, error) {
	reply, err := n.client.execute(ctx, kv.OpTTL, &kv.Request{Key: key})
	if err != nil {
		return 0, err
	}
	return time.Duration(reply.Int), statusErr(reply.Status)
}

// Swap stores value under key, as Put does with the same options, and returns the value it replaced, with
// existed false when there was none. When an IfAbsent or IfExists condition fails, nothing is written, the
// current value is still returned and err matches ErrConditionNotMet. IfVersion is refused with
// ErrInvalidRequest: CompareAndSwap conditions a write on a version.
func (n *Node) Swap(ctx context.Context, key string, value []byte, opts ...PutOption) (previous []byte, existed bool, err error) {
	reply, err := n.client.putIf(ctx, key, value, kv.CondReturnPrev, putOptionsOf(opts))
	if err != nil {
		return nil, false, err
	}
	return reply.Value, reply.Existed, putIfErr(reply)
}

// ExecuteBatch runs a mix of gets, puts and deletes with one request per owner node, sent in parallel, and
// returns one result per item, sorted by Index (items with equal Index keep their order). Items of one key
// are applied on its owner in that order, so a get after a put of the same key sees the put. Each item
// succeeds or fails on its own: the batch is not a transaction, and partial success is normal. Items
// refused because this node's routing table was stale are re-planned against a refreshed table and resent,
// within Config.MaxRetries. The error is only for a call that could not start: a context already done, a
// closed node, or no cluster map before ctx ends.
func (n *Node) ExecuteBatch(ctx context.Context, items []BatchItem) ([]BatchResult, error) {
	select {
	case <-n.life.ctx.Done():
		return nil, ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return []BatchResult{}, nil
	}
	t, err := n.client.router.await(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	b := newBatchRun(&n.client.batch, items)
	b.run(ctx, t)
	n.client.callerOp(kv.OpBatch, StatusSuccess, ctx.Err(), start)
	if n.client.near != nil {
		for _, it := range items {
			if it.Op != BatchGet {
				n.client.near.forget(it.Key)
			}
		}
	}
	return b.results, nil
}

// GetMany reads keys in one batch; result i is for keys[i]. It is atomic per segment, not across
// segments: the keys of one segment (those sharing a hash tag are in one) are read at one revision of it,
// so they show a transaction, an EXEC or a command on several keys whole or not at all, and come back all
// read or all failed; keys of other segments are read at other instants, possibly in parallel. Only a
// segment's keys whose values together exceed a reply frame (Config.MaxFrameSize) may come back read at
// several revisions.
func (n *Node) GetMany(ctx context.Context, keys []string) ([]BatchResult, error) {
	return executePooled(ctx, n.ExecuteBatch, len(keys), func(i int) BatchItem {
		return BatchItem{Index: i, Op: BatchGet, Key: keys[i]}
	})
}

// PutMany stores entries in one batch; result i is for entries[i]. Of the options only WithTTL applies, to
// every entry. Conditions and write concerns are refused with ErrInvalidRequest.
func (n *Node) PutMany(ctx context.Context, entries []KeyValue, opts ...PutOption) ([]BatchResult, error) {
	o := putOptionsOf(opts)
	if o.cond != 0 || o.concern != 0 || o.ifVersion {
		return nil, fmt.Errorf("%w: PutMany takes no conditions or write concern", ErrInvalidRequest)
	}
	return executePooled(ctx, n.ExecuteBatch, len(entries), func(i int) BatchItem {
		return BatchItem{Index: i, Op: BatchPut, Key: entries[i].Key, Value: entries[i].Value, TTL: o.ttl}
	})
}

// DeleteMany removes keys in one batch; result i is for keys[i], with ErrNotFound if it held no value.
func (n *Node) DeleteMany(ctx context.Context, keys []string) ([]BatchResult, error) {
	return executePooled(ctx, n.ExecuteBatch, len(keys), func(i int) BatchItem {
		return BatchItem{Index: i, Op: BatchDelete, Key: keys[i]}
	})
}

// itemLists keeps the item lists that GetMany, PutMany and DeleteMany build: ExecuteBatch reads its items
// only until it returns.
var itemLists = sync.Pool{New: func() any { return new([]BatchItem) }}

// executePooled runs with execute the batch of count items that item builds, in a pooled list.
func executePooled(ctx context.Context, execute func(context.Context, []BatchItem) ([]BatchResult, error), count int, item func(i int) BatchItem) ([]BatchResult, error) {
	list := itemLists.Get().(*[]BatchItem)
	items := resize(*list, count)
	for i := range items {
		items[i] = item(i)
	}
	results, err := execute(ctx, items)
	clear(items)
	if cap(items) <= maxPooledItems {
		*list = items[:0]
		itemLists.Put(list)
	}
	return results, err
}

// GetManyTyped reads keys in one batch and decodes each msgpack value into a T, as GetTyped does; result i
// is for keys[i].
func GetManyTyped[T any](ctx context.Context, n *Node, keys []string) ([]TypedResult[T], error) {
	raw, err := n.GetMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]TypedResult[T], len(raw))
	for i, r := range raw {
		out[i] = TypedResult[T]{Index: r.Index, Key: r.Key, Status: r.Status, Version: r.Version, TTL: r.TTL, Err: r.Err}
		if r.Err == nil {
			out[i].Value, out[i].Err = decodeValue[T](r.Key, r.Value)
		}
	}
	return out, nil
}

// Name returns the node's name in the cluster.
func (n *Node) Name() NodeID { return n.id }

// DataAddr returns the address of the node's shared data and control port.
func (n *Node) DataAddr() string { return n.port.listener.Addr().String() }

// GossipAddr returns the address other nodes can pass in Config.Join to join through this node.
func (n *Node) GossipAddr() string { return n.members.gossipAddr() }

// ClusterMap returns a copy of the latest committed cluster map this node knows: the caller may keep or
// change it without touching the node.
func (n *Node) ClusterMap() *ClusterMap { return n.ctl.fsm.clusterMap().clone() }

// IsLeader reports whether this node currently leads the control plane.
func (n *Node) IsLeader() bool { return n.ctl.raft.State() == raft.Leader }

// Leader returns the node this node believes leads the control plane, "" when it knows of none. Every
// member follows the control plane, lite ones as non-voters, so any of them can tell.
func (n *Node) Leader() NodeID { return n.ctl.leaderID() }

// Ready waits until the cluster has assigned its first partition map, so operations can be routed.
func (n *Node) Ready(ctx context.Context) error {
	_, err := n.client.router.await(ctx)
	return err
}

// Stats returns a snapshot of the node's counters.
func (n *Node) Stats() Stats {
	s := Stats{
		RequestsSent:      map[NodeID]uint64{},
		LocalOps:          n.stats.localOps.Load(),
		RequestsServed:    n.stats.served.Load(),
		BatchItemsServed:  n.stats.batchItems.Load(),
		RedirectsSent:     n.stats.redirectsSent.Load(),
		RedirectsReceived: n.stats.redirects.Load(),
		Retries:           n.stats.retries.Load(),
	}
	s.Refreshes.Push = n.stats.refreshes[causePush].Load()
	s.Refreshes.Poll = n.stats.refreshes[causePoll].Load()
	s.Refreshes.React = n.stats.refreshes[causeReact].Load()
	s.Refreshes.Coalesced = n.stats.coalesced.Load()
	n.client.router.mu.Lock()
	for id, p := range n.client.router.peers {
		if !p.local {
			s.RequestsSent[id] += p.sent.Load()
		}
	}
	n.client.router.mu.Unlock()
	return s
}

// LoaderStats reports this node's read-through loads as an owner (Config.Loader); zero without a loader.
func (n *Node) LoaderStats() LoaderStats { return n.own.loads.stats() }

// ReplicationStats returns this node's replication counters.
func (n *Node) ReplicationStats() ReplicationStats { return n.own.repl.snapshotStats() }

// SegmentDigest summarises this node's copy of a segment, to compare replicas with their owner.
func (n *Node) SegmentDigest(segment int) Digest { return n.own.store.digest(segment) }

// CutoverStats returns this node's cut-over counters.
func (n *Node) CutoverStats() CutoverStats {
	n.own.cut.mu.Lock()
	defer n.own.cut.mu.Unlock()
	return CutoverStats{CutOvers: n.own.cut.done.Load(), Reclaimed: n.own.cut.reclaimed.Load(), Sealed: slices.Clone(n.own.cut.sealTimes)}
}

// Migrations lists the partitions being moved, as this node's map knows them; empty when the cluster is
// balanced.
func (n *Node) Migrations() []Migration { return migrationsIn(n.ctl.fsm.clusterMap()) }

// migrationsIn lists the partitions map m is moving.
func migrationsIn(m *ClusterMap) []Migration {
	var out []Migration
	for p, st := range m.Runtime {
		if st.Target == nil {
			continue
		}
		mg := Migration{Partition: p, From: m.Assignment[p], To: st.Target, Copying: st.From != nil}
		if mg.Copying {
			mg.From = st.From
		}
		for _, id := range st.Target {
			if slices.Contains(mg.From, id) {
				continue
			}
			mg.Incoming++
			if mg.Copying && (id == st.Owner || slices.Contains(st.InSync, id)) {
				mg.Synced++
			}
		}
		out = append(out, mg)
	}
	return out
}

// RESPAddr returns the address of the node's RESP endpoint as advertised to clients, or "" when it has none.
func (n *Node) RESPAddr() string { return n.redis.addr() }

// InstallGossipKey adds key to every member's keyring; they still encrypt with the key in use.
func (n *Node) InstallGossipKey(key []byte) error {
	return n.members.changeKey(&n.cfg, key, (*serf.KeyManager).InstallKey)
}

// UseGossipKey makes key, already installed, the one every member encrypts with.
func (n *Node) UseGossipKey(key []byte) error {
	return n.members.changeKey(&n.cfg, key, (*serf.KeyManager).UseKey)
}

// RemoveGossipKey removes key, no longer in use, from every member's keyring.
func (n *Node) RemoveGossipKey(key []byte) error {
	return n.members.changeKey(&n.cfg, key, (*serf.KeyManager).RemoveKey)
}

// Leave departs gracefully. It drains first: the node stops taking partitions, and rebalancing moves each
// partition it owns or replicates to other nodes, cut over without losing a write. Then it announces the
// departure, waits (bounded by ctx) until the control plane no longer counts its vote, and closes. It hands
// leadership over whenever it leads meanwhile, so it never stops as leader while another node could lead.
//
// If ctx ends before the drain does, Leave fails with ErrNotDrained. Where every partition the node still
// holds has a live in-sync copy elsewhere, it says goodbye anyway and the leader promotes those copies at
// once. Where it holds the only live copy of some partition, it never says goodbye: it closes as a failed
// node would, so the cluster fails over what it can and waits for the rest rather than record a clean
// departure of the only copy.
func (n *Node) Leave(ctx context.Context) error {
	if !n.life.left.CompareAndSwap(false, true) {
		return ErrClosed
	}
	drained := n.ctl.drain(ctx)
	if errors.Is(drained, ErrClosed) {
		return errors.Join(drained, n.Close()) // closed meanwhile: there is nothing left to leave with
	}
	n.ctl.handOverLeadership()
	if drained != nil {
		if only := onlyCopies(n.ctl.fsm.clusterMap(), n.id, n.members.members()); len(only) > 0 {
			n.log.Error("leave: partitions not drained, and this node holds the only live copy of some; "+
				"closing as a failed node, not leaving", "partitions", len(only), "first", only[:min(8, len(only))])
			return errors.Join(fmt.Errorf("%w (this node held the only live copy of %d partitions and closed as a failed node)",
				drained, len(only)), n.Close())
		}
		n.log.Warn("leave: partitions not drained; every one has a live in-sync copy elsewhere, promoted at once", "err", drained)
	}
	err := n.members.leave()
	if err == nil {
		err = n.ctl.awaitRemoval(ctx)
	}
	return errors.Join(drained, err, n.Close())
}

// GetEntry returns the value stored under key with its version and remaining TTL, in one request to the
// key's owner, or an error matching ErrNotFound.
func (n *Node) GetEntry(ctx context.Context, key string) (Entry, error) {
	reply, err := n.client.execute(ctx, kv.OpGetEntry, &kv.Request{Key: key})
	if err != nil {
		return Entry{}, err
	}
	if err := replyErr(reply); err != nil {
		return Entry{}, callerErr(ctx, err)
	}
	return Entry{Value: reply.Value, Version: reply.Version, TTL: time.Duration(reply.Int)}, nil
}

// CompareAndSwap stores value under key if the key's version is version (0: if the key has no live value),
// and returns the new version. Otherwise it writes nothing and fails with a *VersionMismatchError, which
// matches ErrVersionMismatch and carries the key's current version. opts are those of Put.
func (n *Node) CompareAndSwap(ctx context.Context, key string, version uint64, value []byte, opts ...PutOption) (newVersion uint64, err error) {
	o := putOptionsOf(opts)
	o.version, o.ifVersion = version, true
	return n.client.putIfVersion(ctx, key, value, o)
}

// DeleteIfVersion removes key if its version is version, and otherwise fails with a *VersionMismatchError
// carrying the current one. With version 0 it succeeds, deleting nothing, when the key has no live value.
func (n *Node) DeleteIfVersion(ctx context.Context, key string, version uint64) error {
	reply, err := n.client.execute(ctx, kv.OpDeleteIfVersion, &kv.Request{Key: key, Version: version})
	if err != nil {
		return err
	}
	if reply.Status == StatusNotFound {
		return nil
	}
	return versionErr(key, reply)
}
