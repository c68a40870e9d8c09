package zaris

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/internal/resp"
)

// TestRESPGoRedisWatchCounter has go-redis ClusterClients increment one counter by optimistic locking, as
// go-redis documents it: WATCH, GET, then MULTI/SET/EXEC, retried when EXEC fails. Every client first reads
// the counter before any of them commits, so all but one of those first EXECs must fail. The final value is
// the number of EXECs that succeeded.
func TestRESPGoRedisWatchCounter(t *testing.T) {
	c := startRESPCluster(t, 3, nil)
	ctx := bg(t)
	const key, clients, increments = "{counter}n", 4, 20
	var committed, failed atomic.Int64
	var firstReads sync.WaitGroup
	firstReads.Add(clients)
	increment := func(client *redis.ClusterClient, first bool) error {
		return client.Watch(ctx, func(tx *redis.Tx) error {
			n, err := tx.Get(ctx, key).Int()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			if first {
				firstReads.Done()
				firstReads.Wait()
			}
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.Set(ctx, key, n+1, 0)
				return nil
			})
			return err
		}, key)
	}
	var wg sync.WaitGroup
	for i := range clients {
		client := newClusterClient(t, c, 2+i%2)
		wg.Go(func() {
			for attempt, done := 0, 0; done < increments; attempt++ {
				switch err := increment(client, attempt == 0); {
				case err == nil:
					committed.Add(1)
					done++
				case errors.Is(err, redis.TxFailedErr):
					failed.Add(1)
				default:
					t.Errorf("client %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	got, err := newClusterClient(t, c, 2).Get(ctx, key).Int64()
	if err != nil {
		t.Fatal(err)
	}
	if got != committed.Load() || got != clients*increments {
		t.Fatalf("counter = %d after %d committed EXECs; want %d", got, committed.Load(), clients*increments)
	}
	if failed.Load() < clients-1 {
		t.Fatalf("%d EXECs failed; want at least %d: the first reads all saw the same value", failed.Load(), clients-1)
	}
}

// TestRESPExecIsOneWrite checks that EXEC's writes are one write of their segment: three SETs move the
// owner's revision by exactly one, and every key takes that revision as its version.
func TestRESPExecIsOneWrite(t *testing.T) {
	c := startRESPCluster(t, 3, nil)
	const tag = "{one}"
	owner := c.owner(tag)
	seg := owner.layout.KeySegment(tag)
	conn := dialRaw(t, owner.RESPAddr())
	before := owner.own.store.revision(seg)
	conn.send(respCmd("MULTI") + respCmd("SET", tag+"a", "1") + respCmd("SET", tag+"b", "2") + respCmd("SET", tag+"c", "3") +
		respCmd("EXEC"))
	for _, want := range []string{"+OK", "+QUEUED", "+QUEUED", "+QUEUED", "*3", "+OK", "+OK", "+OK"} {
		if got := conn.line(); got != want {
			t.Fatalf("reply %q; want %q", got, want)
		}
	}
	after := owner.own.store.revision(seg)
	if after != before+1 {
		t.Fatalf("revision went from %d to %d; want one write", before, after)
	}
	for _, key := range []string{"a", "b", "c"} {
		if _, version, ok := owner.own.store.get(seg, tag+key); !ok || version != after {
			t.Fatalf("%s: version %d, present %v; want version %d", tag+key, version, ok, after)
		}
	}
}

// startStoreRESP serves RESP from a bare store (storeOwner) with a 64 KiB query buffer limit, and returns the
// owner and the server.
func startStoreRESP(t *testing.T) (*storeOwner, *resp.Server) {
	t.Helper()
	owner := newStoreOwner()
	return owner, startBareRESP(t, owner, func(cfg *Config) { cfg.RESPMaxQueryBuffer = 64 << 10 })
}

// ownedKeys returns n keys starting with prefix, in n different slots, that owner serves.
func ownedKeys(owner *storeOwner, prefix string, n int) []string {
	var keys []string
	slots := map[uint16]bool{}
	for i := 0; len(keys) < n; i++ {
		key := fmt.Sprintf("%s%d", prefix, i)
		if owner.owns(key) && !slots[KeySlot(key)] {
			slots[KeySlot(key)] = true
			keys = append(keys, key)
		}
	}
	return keys
}

// TestRESPTxnRefusals checks what Redis Cluster refuses in a transaction: a key of another node while
// queueing (the transaction is then aborted), keys of different slots in one command while queueing or
// across commands and watched keys at EXEC (the transaction is then discarded), and here also the commands
// that read across the store.
func TestRESPTxnRefusals(t *testing.T) {
	owner, s := startStoreRESP(t)
	keys := ownedKeys(owner, "k", 2)
	mine, other := keys[0], keys[1]
	theirs := "t"
	for owner.owns(theirs) {
		theirs += "!"
	}
	moved := fmt.Sprintf("-MOVED %d 127.0.0.1:7002", KeySlot(theirs))
	const crossSlot = "-CROSSSLOT Keys in request don't hash to the same slot"
	steps := []struct {
		cmd  []string
		want string
	}{
		{[]string{"MULTI"}, "+OK"}, {[]string{"SET", mine, "1"}, "+QUEUED"}, {[]string{"SET", theirs, "1"}, moved},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors."},

		{[]string{"MULTI"}, "+OK"}, {[]string{"MSET", mine, "1", other, "2"}, crossSlot}, {[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors."},

		{[]string{"MULTI"}, "+OK"}, {[]string{"SET", mine, "1"}, "+QUEUED"}, {[]string{"SET", other, "2"}, "+QUEUED"},
		{[]string{"EXEC"}, crossSlot}, {[]string{"EXEC"}, "-ERR EXEC without MULTI"},

		{[]string{"WATCH", mine, other}, crossSlot}, {[]string{"WATCH", theirs}, moved},
		{[]string{"WATCH", other}, "+OK"}, {[]string{"MULTI"}, "+OK"}, {[]string{"SET", mine, "1"}, "+QUEUED"},
		{[]string{"EXEC"}, crossSlot},

		{[]string{"MULTI"}, "+OK"}, {[]string{"SCAN", "0"}, "-ERR Command not allowed inside a transaction"},
		{[]string{"DBSIZE"}, "-ERR Command not allowed inside a transaction"}, {[]string{"PING"}, "+QUEUED"},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors."},

		{[]string{"EXISTS", mine, other}, crossSlot}, {[]string{"EXISTS", mine}, ":0"}, {[]string{"EXISTS", other}, ":0"},
	}
	conn := dialRaw(t, s.Addr())
	for _, step := range steps {
		conn.send(respCmd(step.cmd...))
		if got := conn.line(); got != step.want {
			t.Fatalf("%q: reply %q; want %q", step.cmd, got, step.want)
		}
	}
	if n := owner.store.len(); n != 0 {
		t.Fatalf("the store holds %d keys; want none: a refused transaction wrote", n)
	}
}

// TestRESPTxnHeldBytes checks that queued commands and watched keys count in the budget every connection
// shares, within one command's query buffer limit, and are given back when the transaction ends or the
// connection closes.
func TestRESPTxnHeldBytes(t *testing.T) {
	owner, s := startStoreRESP(t)
	key := ownedKeys(owner, "k", 1)[0]
	conn := dialRaw(t, s.Addr())
	conn.send(respCmd("ECHO", strings.Repeat("x", 60<<10))) // grows the read buffer to its largest
	conn.line()
	conn.line()
	idle := used(s)

	value := strings.Repeat("v", 25<<10)
	conn.send(respCmd("WATCH", key) + respCmd("MULTI") + respCmd("SET", key, value) + respCmd("SET", key, value))
	for _, want := range []string{"+OK", "+OK", "+QUEUED", "+QUEUED"} {
		if got := conn.line(); got != want {
			t.Fatalf("reply %q; want %q", got, want)
		}
	}
	if held := used(s) - idle; held < 50<<10 {
		t.Fatalf("the transaction holds %d bytes of the budget; want its two values at least", held)
	}
	conn.send(respCmd("SET", key, value) + respCmd("EXEC"))
	for _, want := range []string{"-ERR the transaction exceeds the query buffer limit",
		"-EXECABORT Transaction discarded because of previous errors."} {
		if got := conn.line(); got != want {
			t.Fatalf("reply %q; want %q", got, want)
		}
	}
	if held := used(s) - idle; held != 0 {
		t.Fatalf("%d bytes held after EXEC; want none", held)
	}

	conn.send(respCmd("WATCH", key) + respCmd("MULTI") + respCmd("SET", key, value) + respCmd("QUIT"))
	for _, want := range []string{"+OK", "+OK", "+QUEUED", "+OK"} {
		if got := conn.line(); got != want {
			t.Fatalf("reply %q; want %q", got, want)
		}
	}
	conn.expectClosed()
	waitFor(t, 5e9, "the closed connection's transaction to be given back", func() bool {
		return s.Clients() == 0 && used(s) == 0
	})
	if _, _, ok := owner.store.get(owner.layout.KeySegment(key), key); ok {
		t.Fatal("a transaction that never ran wrote its key")
	}
}

// lockedOwner is a storeOwner whose atomic groups are all refused: a transaction over several segments
// holds their keys.
type lockedOwner struct{ *storeOwner }

func (lockedOwner) ApplyAtomically(context.Context, int, []string, func(kv.Group)) Status {
	return StatusLocked
}

// TestRESPExecRefused checks that an atomic group refused at EXEC answers the refusal for the slot instead
// of the replies, and that nothing was written.
func TestRESPExecRefused(t *testing.T) {
	owner := newStoreOwner()
	s := startBareRESP(t, lockedOwner{owner}, nil)
	key := ownedKeys(owner, "k", 1)[0]
	conn := dialRaw(t, s.Addr())
	conn.send(respCmd("MULTI") + respCmd("SET", key, "1") + respCmd("EXEC") + respCmd("MULTI") + respCmd("PING") +
		respCmd("EXEC"))
	locked := fmt.Sprintf("-TRYAGAIN A key of hash slot %d is locked by a transaction being committed, try again", KeySlot(key))
	for _, want := range []string{"+OK", "+QUEUED", locked, "+OK", "+QUEUED", "*1", "+PONG"} {
		if got := conn.line(); got != want {
			t.Fatalf("reply %q; want %q", got, want)
		}
	}
	if owner.store.len() != 0 {
		t.Fatal("a refused EXEC wrote")
	}
}

// used is what the endpoint's connections hold of its buffer budget.
func used(s *resp.Server) int64 {
	all, _ := s.Buffers()
	return all.Used
}
