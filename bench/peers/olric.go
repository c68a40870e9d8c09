package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/olric-data/olric"
	"github.com/olric-data/olric/config"
)

// olricDMap is the name of the distributed map every Olric phase uses.
const olricDMap = "bench"

// olricCluster is an embedded Olric cluster started in this process.
type olricCluster struct {
	copies  int
	dbs     []*olric.Olric
	addrs   []string // each member's RESP address, also its name in the cluster
	dmaps   []olric.DMap
	batches []*olric.ClusterClient // one per member, for pipelined multi-gets
	started sync.WaitGroup         // the goroutines running each member's Start
	startMu sync.Mutex
	failed  []error // what Start returned other than on shutdown
}

// olricConfig returns the configuration of one member on loopback: copies copies of every key, written
// synchronously, a write acknowledged once WriteQuorum = copies members (the primary and every backup)
// have stored it, and a read answered from one copy (ReadQuorum 1).
func olricConfig(copies int, port, gossipPort int, peers []string, sink *logSink) *config.Config {
	c := config.New("local")
	c.BindAddr = "127.0.0.1"
	c.BindPort = port
	c.MemberlistConfig.BindAddr = "127.0.0.1"
	c.MemberlistConfig.BindPort = gossipPort
	c.MemberlistConfig.AdvertiseAddr = "127.0.0.1"
	c.MemberlistConfig.AdvertisePort = gossipPort
	c.Peers = peers
	c.ReplicaCount = copies
	c.ReplicationMode = config.SyncReplicationMode
	c.WriteQuorum = copies
	c.ReadQuorum = 1
	c.ReadRepair = false
	c.LogLevel = config.LogLevelWarn
	c.LogOutput = lineWriter{sink: sink, system: "olric"}
	c.Logger = log.New(c.LogOutput, "", 0)
	return c
}

// startOlric starts members Olric members on loopback with ports chosen free now, and waits until every
// member sees the others and the routing table gives every partition its copies.
func startOlric(ctx context.Context, copies int, sink *logSink) (cluster, error) {
	c := &olricCluster{copies: copies}
	var peers []string
	for range members {
		gossip, err := startOlricMember(c, copies, peers, sink)
		if err != nil {
			return nil, errors.Join(err, c.close())
		}
		peers = append(peers, gossip)
	}
	if err := c.awaitRoutes(ctx, copies); err != nil {
		return nil, errors.Join(err, c.close())
	}
	if err := c.openMaps(sink); err != nil {
		return nil, errors.Join(err, c.close())
	}
	return c, nil
}

// startOlricMember starts one member joining peers and returns its gossip address.
func startOlricMember(c *olricCluster, copies int, peers []string, sink *logSink) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	cfg := olricConfig(copies, ports[0], ports[1], peers, sink)
	ready := make(chan struct{})
	cfg.Started = func() { close(ready) }
	db, err := olric.New(cfg)
	if err != nil {
		return "", fmt.Errorf("olric member: %w", err)
	}
	c.dbs = append(c.dbs, db)
	c.addrs = append(c.addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])))
	stopped := make(chan struct{})
	c.started.Add(1)
	go c.run(db, stopped)
	select {
	case <-ready:
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])), nil
	case <-stopped:
		return "", fmt.Errorf("olric member on port %d stopped while starting: %w", ports[0], errors.Join(c.failures()...))
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("olric member on port %d not started in 30s", ports[0])
	}
}

// run runs db's servers until Shutdown and keeps what Start returned.
func (c *olricCluster) run(db *olric.Olric, stopped chan<- struct{}) {
	defer c.started.Done()
	defer close(stopped)
	if err := db.Start(); err != nil {
		c.startMu.Lock()
		c.failed = append(c.failed, err)
		c.startMu.Unlock()
	}
}

func (c *olricCluster) failures() []error {
	c.startMu.Lock()
	defer c.startMu.Unlock()
	return append([]error(nil), c.failed...)
}

// awaitRoutes waits until every member knows all the others and its routing table has one primary owner
// and copies-1 backups for every partition, primaries spread over every member.
func (c *olricCluster) awaitRoutes(ctx context.Context, copies int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		settled, why := c.settled(ctx, copies)
		if settled {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("olric cluster not settled: %s", why)
		case <-tick.C:
		}
	}
}

// settled reports whether every member's view is complete, and if not, why.
func (c *olricCluster) settled(ctx context.Context, copies int) (bool, string) {
	for i, db := range c.dbs {
		e := db.NewEmbeddedClient()
		ms, err := e.Members(ctx)
		if err != nil || len(ms) != len(c.dbs) {
			return false, fmt.Sprintf("member %d sees %d members (%v)", i+1, len(ms), err)
		}
		rt, err := e.RoutingTable(ctx)
		if err != nil {
			return false, fmt.Sprintf("member %d routing table: %v", i+1, err)
		}
		if why := routesIncomplete(rt, copies, len(c.dbs)); why != "" {
			return false, fmt.Sprintf("member %d: %s", i+1, why)
		}
	}
	return true, ""
}

// routesIncomplete returns why rt does not yet place copies copies of every partition over size members,
// or "" when it does.
func routesIncomplete(rt olric.RoutingTable, copies, size int) string {
	primaries := map[string]bool{}
	for id, r := range rt {
		if len(r.PrimaryOwners) != 1 || len(r.ReplicaOwners) != copies-1 {
			return fmt.Sprintf("partition %d has %d primary and %d backup owners", id, len(r.PrimaryOwners), len(r.ReplicaOwners))
		}
		primaries[r.PrimaryOwners[0]] = true
	}
	if len(rt) == 0 || len(primaries) != size {
		return fmt.Sprintf("%d partitions, primaries on %d members", len(rt), len(primaries))
	}
	return ""
}

// olricNotes describes the routing table of the first member now: partitions whose owners are not one
// primary and copies-1 backups, as when Olric keeps a backup that still holds data beside a new one.
func olricNotes(cl cluster) []string {
	c := cl.(*olricCluster)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rt, err := c.dbs[0].NewEmbeddedClient().RoutingTable(ctx)
	if err != nil {
		return []string{fmt.Sprintf("olric routing table: %v", err)}
	}
	primaries, backups := map[int]int{}, map[int]int{}
	for _, r := range rt {
		primaries[len(r.PrimaryOwners)]++
		backups[len(r.ReplicaOwners)]++
	}
	return []string{fmt.Sprintf("olric routing table after the phases, %d partitions: by count of primary owners %v, of backup owners %v (want %d backups)",
		len(rt), primaries, backups, c.copies-1)}
}

// openMaps opens the map on every member: through the embedded client for single-key operations, and
// through a cluster client on the member's own address for pipelines, as EmbeddedDMap.Pipeline does
// (opened here so that it can be closed).
func (c *olricCluster) openMaps(sink *logSink) error {
	for i, db := range c.dbs {
		dm, err := db.NewEmbeddedClient().NewDMap(olricDMap)
		if err != nil {
			return fmt.Errorf("olric member %d: %w", i+1, err)
		}
		c.dmaps = append(c.dmaps, dm)
		cc, err := olric.NewClusterClient([]string{c.addrs[i]},
			olric.WithLogger(log.New(lineWriter{sink: sink, system: "olric-client"}, "", 0)))
		if err != nil {
			return fmt.Errorf("olric cluster client on member %d: %w", i+1, err)
		}
		c.batches = append(c.batches, cc)
	}
	return nil
}

func (c *olricCluster) client(m int) (client, error) {
	remote, err := c.batches[m].NewDMap(olricDMap)
	if err != nil {
		return nil, err
	}
	pipe, err := remote.Pipeline()
	if err != nil {
		return nil, err
	}
	return &olricClient{dm: c.dmaps[m], pipe: pipe}, nil
}

// close closes the cluster clients, shuts every member down and waits for their Start to return.
func (c *olricCluster) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, cc := range c.batches {
		errs = append(errs, cc.Close(ctx))
	}
	for i := len(c.dbs) - 1; i >= 0; i-- {
		errs = append(errs, c.dbs[i].Shutdown(ctx))
	}
	c.started.Wait()
	return errors.Join(append(errs, c.failures()...)...)
}

// olricClient serves one load goroutine: single-key operations on the embedded map, multi-gets on its own
// pipeline, reused batch after batch.
type olricClient struct {
	dm      olric.DMap
	pipe    *olric.DMapPipeline
	futures []*olric.FutureGet
}

func (o *olricClient) put(ctx context.Context, key string, value []byte) error {
	return o.dm.Put(ctx, key, value)
}

func (o *olricClient) get(ctx context.Context, key string) ([]byte, error) {
	r, err := o.dm.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return r.Byte()
}

// getMany queues a Get per key on the pipeline and sends them with Exec, one round trip per partition.
func (o *olricClient) getMany(ctx context.Context, keys []string) (int, error) {
	defer o.pipe.Discard()
	o.futures = o.futures[:0]
	for _, k := range keys {
		o.futures = append(o.futures, o.pipe.Get(ctx, k))
	}
	if err := o.pipe.Exec(ctx); err != nil {
		return len(keys), err
	}
	failed := 0
	for _, f := range o.futures {
		r, err := f.Result()
		if err == nil {
			_, err = r.Byte()
		}
		if err != nil {
			failed++
		}
	}
	return failed, nil
}

func (o *olricClient) close() { o.pipe.Close() }

// freePorts returns n distinct loopback ports that were free for TCP and UDP when asked.
func freePorts(n int) ([]int, error) {
	var ports []int
	var held []func() error
	defer func() {
		for _, release := range held {
			release()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l.Close)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		held = append(held, u.Close)
		ports = append(ports, port)
	}
	return ports, nil
}
