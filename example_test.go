package zaris_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaris-go/zaris"
)

// exampleConfig is a one-node cluster on the loopback interface, with the timing of one machine: what a
// test or a local run of a service uses. A real service sets Name, its addresses and Join.
func exampleConfig(name string) zaris.Config {
	cfg := zaris.DefaultConfig()
	cfg.Name = name
	cfg.Timing = zaris.LocalTiming()
	cfg.ReplicationFactor = 1
	return cfg
}

// Join makes the process a member: the first node starts a new cluster, the others name any member in
// Join. Every node serves the whole key space, routing each key to its owner.
func ExampleJoin() {
	ctx := context.Background()
	first, err := zaris.Join(ctx, exampleConfig("node-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer first.Close()

	cfg := exampleConfig("node-2")
	cfg.Join = []string{first.GossipAddr()}
	second, err := zaris.Join(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer second.Close()
	if err := second.Ready(ctx); err != nil {
		log.Fatal(err)
	}

	if err := first.Put(ctx, "greeting", []byte("hello")); err != nil {
		log.Fatal(err)
	}
	v, err := second.Get(ctx, "greeting")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(v))

	// A graceful Leave hands this node's partitions over before it goes.
	if err := second.Leave(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: hello
}

// Put takes options: a time to live, conditions on what the key holds, and the write concern.
func ExampleNode_Put() {
	ctx := context.Background()
	n, err := zaris.Join(ctx, exampleConfig("put"))
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()

	if err := n.Put(ctx, "session:42", []byte("alice"), zaris.WithTTL(time.Hour)); err != nil {
		log.Fatal(err)
	}
	err = n.Put(ctx, "session:42", []byte("mallory"), zaris.IfAbsent())
	fmt.Println(errors.Is(err, zaris.ErrConditionNotMet))

	e, err := n.GetEntry(ctx, "session:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(e.Value), e.TTL > 59*time.Minute)

	_, err = n.Get(ctx, "session:43")
	fmt.Println(errors.Is(err, zaris.ErrNotFound))
	// Output:
	// true
	// alice true
	// true
}

// A key's version grows with every write; CompareAndSwap writes only over the version read, so two
// writers cannot both update from the same value.
func ExampleNode_CompareAndSwap() {
	ctx := context.Background()
	n, err := zaris.Join(ctx, exampleConfig("cas"))
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()

	if err := n.Put(ctx, "counter", []byte("1")); err != nil {
		log.Fatal(err)
	}
	e, err := n.GetEntry(ctx, "counter")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := n.CompareAndSwap(ctx, "counter", e.Version, []byte("2")); err != nil {
		log.Fatal(err)
	}
	// The same version again is stale now.
	_, err = n.CompareAndSwap(ctx, "counter", e.Version, []byte("3"))
	var mismatch *zaris.VersionMismatchError
	fmt.Println(errors.As(err, &mismatch))

	v, _ := n.Get(ctx, "counter")
	fmt.Println(string(v))
	// Output:
	// true
	// 2
}

// A batch costs one request per owner; each item succeeds or fails on its own.
func ExampleNode_ExecuteBatch() {
	ctx := context.Background()
	n, err := zaris.Join(ctx, exampleConfig("batch"))
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()

	if _, err := n.PutMany(ctx, []zaris.KeyValue{
		{Key: "a", Value: []byte("1")},
		{Key: "b", Value: []byte("2")},
	}); err != nil {
		log.Fatal(err)
	}
	results, err := n.ExecuteBatch(ctx, []zaris.BatchItem{
		{Index: 0, Op: zaris.BatchGet, Key: "a"},
		{Index: 1, Op: zaris.BatchDelete, Key: "b"},
		{Index: 2, Op: zaris.BatchGet, Key: "b"},
		{Index: 3, Op: zaris.BatchPut, Key: "c", Value: []byte("3")},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Printf("%d %q %v\n", r.Index, r.Value, r.Err)
	}
	// Output:
	// 0 "1" <nil>
	// 1 "" <nil>
	// 2 "" zaris: key not found
	// 3 "" <nil>
}

// Watch delivers a key's changes in version order, each once.
func ExampleNode_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := zaris.Join(ctx, exampleConfig("watch"))
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()
	if err := n.Ready(ctx); err != nil {
		log.Fatal(err)
	}

	events, err := n.Watch(ctx, "config")
	if err != nil {
		log.Fatal(err)
	}
	if err := n.Put(ctx, "config", []byte("v1")); err != nil {
		log.Fatal(err)
	}
	if _, err := n.Delete(ctx, "config"); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		ev := <-events
		fmt.Println(ev.Kind, string(ev.Value))
	}
	// Output:
	// put v1
	// delete
}

// Subscribe receives what any node publishes to a channel, PSubscribe what matches a pattern; each
// subscriber gets one node's messages in the order that node published them.
func ExampleNode_Subscribe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := zaris.Join(ctx, exampleConfig("pubsub"))
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()

	orders, err := n.Subscribe(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	all, err := n.PSubscribe(ctx, "ord*")
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"1001", "1002"} {
		if _, err := n.Publish(ctx, "orders", []byte(id)); err != nil {
			log.Fatal(err)
		}
	}
	for range 2 {
		m := <-orders
		fmt.Println(m.Channel, string(m.Payload))
	}
	m := <-all
	fmt.Println(m.Pattern, m.Channel, string(m.Payload))
	// Output:
	// orders 1001
	// orders 1002
	// ord* orders 1001
}

// BLPop makes a list a job queue: workers on any node wait for jobs, and each job goes to one worker.
func ExampleNode_BLPop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := zaris.Join(ctx, exampleConfig("jobs"))
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()

	done := make(chan string)
	go func() {
		for range 2 {
			_, job, err := n.BLPop(ctx, "jobs")
			if err != nil {
				log.Fatal(err)
			}
			done <- string(job)
		}
	}()
	if _, err := n.RPush(ctx, "jobs", []byte("resize 17"), []byte("resize 18")); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-done)
	fmt.Println(<-done)
	// Output:
	// resize 17
	// resize 18
}

// LMove takes a job from a queue onto a list of jobs in progress in one atomic step, so a worker that dies
// holding a job leaves it on the second list rather than losing it. The two keys share a hash tag.
func ExampleNode_LMove() {
	ctx := context.Background()
	n, err := zaris.Join(ctx, exampleConfig("queue"))
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()

	if _, err := n.RPush(ctx, "{jobs}pending", []byte("send 41"), []byte("send 42")); err != nil {
		log.Fatal(err)
	}
	job, err := n.LMove(ctx, "{jobs}pending", "{jobs}running", true, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("working on", string(job))
	// Once done, the worker removes the job from {jobs}running (here, the one item it holds).
	if _, err := n.RPop(ctx, "{jobs}running", 1); err != nil {
		log.Fatal(err)
	}
	left, _ := n.LLen(ctx, "{jobs}pending")
	fmt.Println("pending:", left)
	// Output:
	// working on send 41
	// pending: 1
}

// Scan walks every key of the cluster once, page by page, following moves as they happen.
func ExampleNode_Scan() {
	ctx := context.Background()
	n, err := zaris.Join(ctx, exampleConfig("scan"))
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()

	for _, k := range []string{"user:1", "user:2", "order:1"} {
		if err := n.Put(ctx, k, []byte("x")); err != nil {
			log.Fatal(err)
		}
	}
	var users []string
	for key, err := range n.Scan(ctx, zaris.ScanMatch("user:*")) {
		if err != nil {
			log.Fatal(err)
		}
		users = append(users, key)
	}
	slices.Sort(users)
	fmt.Println(users)
	// Output: [user:1 user:2]
}

// Txn commits its writes all or none, and only if no key it read changed meanwhile. Keys that share a
// hash tag commit in one round trip.
func ExampleNode_Txn() {
	ctx := context.Background()
	n, err := zaris.Join(ctx, exampleConfig("txn"))
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()

	if err := n.Put(ctx, "{acct}:alice", []byte("10")); err != nil {
		log.Fatal(err)
	}
	err = n.Txn(ctx, func(tx *zaris.Tx) error {
		if _, err := tx.Get(ctx, "{acct}:alice"); err != nil {
			return err
		}
		if err := tx.Put("{acct}:alice", []byte("7")); err != nil {
			return err
		}
		return tx.Put("{acct}:bob", []byte("3"))
	}, zaris.TxnRetries(3))
	if err != nil {
		log.Fatal(err)
	}
	alice, _ := n.Get(ctx, "{acct}:alice")
	bob, _ := n.Get(ctx, "{acct}:bob")
	fmt.Println(string(alice), string(bob))
	// Output: 7 3
}

// The near cache keeps the values of keys other nodes own, after a Get, until their owner reports a
// change; a node's own writes are never hidden by it.
func ExampleNearCacheConfig() {
	ctx := context.Background()
	owner, err := zaris.Join(ctx, exampleConfig("near-owner"))
	if err != nil {
		log.Fatal(err)
	}
	defer owner.Close()

	cfg := exampleConfig("near-reader")
	cfg.Lite = true // holds no partitions, so every key is another node's
	cfg.Join = []string{owner.GossipAddr()}
	cfg.NearCache = zaris.NearCacheConfig{MaxBytes: 64 << 20}
	reader, err := zaris.Join(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer reader.Close()

	if err := reader.Put(ctx, "price", []byte("100")); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		if _, err := reader.Get(ctx, "price"); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(reader.NearCacheStats().Hits >= 1)
	// Output: true
}

// With RESPAddr set, a node serves the Redis Cluster protocol, so unmodified Redis clients use it.
func ExampleNode_RESPAddr() {
	ctx := context.Background()
	cfg := exampleConfig("resp")
	cfg.RESPAddr = "127.0.0.1:0"
	n, err := zaris.Join(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()
	if err := n.Ready(ctx); err != nil {
		log.Fatal(err)
	}

	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{n.RESPAddr()}})
	defer rdb.Close()
	if err := rdb.Set(ctx, "visits", 41, 0).Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(rdb.Incr(ctx, "visits").Val())
	v, _ := n.Get(ctx, "visits")
	fmt.Println(string(v))
	// Output:
	// 42
	// 42
}

// A Loader turns the cluster into a read-through cache: a Get of a missing key loads it once, at its
// owner, which stores it for every later reader.
func ExampleLoader() {
	ctx := context.Background()
	cfg := exampleConfig("loader")
	var calls atomic.Int64
	cfg.Loader = func(ctx context.Context, key string) ([]byte, time.Duration, error) {
		calls.Add(1)
		if key == "user:0" {
			return nil, 0, zaris.ErrNotFound // no such user
		}
		return []byte("profile of " + key), 10 * time.Minute, nil
	}
	n, err := zaris.Join(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()

	for range 3 {
		v, err := n.Get(ctx, "user:7")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(v))
	}
	_, err = n.Get(ctx, "user:0")
	fmt.Println(errors.Is(err, zaris.ErrNotFound), calls.Load())
	// Output:
	// profile of user:7
	// profile of user:7
	// profile of user:7
	// true 2
}

// A node bounded to 16 MiB with noeviction refuses the write that would pass its bound, and serves reads
// and deletes; under allkeys-random it would evict keys of the partition instead.
func ExampleConfig_maxMemory() {
	ctx := context.Background()
	cfg := exampleConfig("bounded")
	cfg.MaxMemory, cfg.EvictionPolicy = 16<<20, zaris.EvictionNoEviction
	n, err := zaris.Join(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()

	value := make([]byte, 64<<10)
	var stored int
	for i := 0; ; i++ {
		err := n.Put(ctx, fmt.Sprintf("{tag}:%d", i), value) // one partition: its share fills first
		if errors.Is(err, zaris.ErrOutOfMemory) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		stored++
	}
	_, err = n.Delete(ctx, "{tag}:0")
	fmt.Println(stored > 0, err)
	fmt.Println(n.Put(ctx, "{tag}:again", value))
	// Output:
	// true <nil>
	// <nil>
}

// Backup copies the cluster's data into a directory, a consistent cut of it; Restore copies it into a
// cluster of the same layout, of any number of nodes, once it has checked every checksum.
func ExampleNode_Backup() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "zaris-backup-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	old, err := zaris.Join(ctx, exampleConfig("old-1"))
	if err != nil {
		log.Fatal(err)
	}
	if err := old.Ready(ctx); err != nil {
		log.Fatal(err)
	}
	if err := old.Put(ctx, "invoice:1", []byte("paid")); err != nil {
		log.Fatal(err)
	}
	backup, err := old.Backup(ctx, filepath.Join(dir, "nightly"))
	if err != nil {
		log.Fatal(err)
	}
	old.Close() // the cluster is gone

	fresh, err := zaris.Join(ctx, exampleConfig("new-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.Ready(ctx); err != nil {
		log.Fatal(err)
	}
	restored, err := fresh.Restore(ctx, backup.Dir)
	if err != nil {
		log.Fatal(err)
	}
	v, err := fresh.Get(ctx, "invoice:1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(restored.Keys, string(v))

	// A second restore would overwrite what the cluster holds: refused unless asked for.
	_, err = fresh.Restore(ctx, backup.Dir)
	fmt.Println(errors.Is(err, zaris.ErrNotEmpty))
	// Output:
	// 1 paid
	// true
}
