package resp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zaris-go/zaris/internal/kv"
)

// fakeKeys returns a key node "a" owns and one node "b" owns.
func fakeKeys(t *testing.T) (mine, theirs string) {
	for i := 0; mine == "" || theirs == ""; i++ {
		key := fmt.Sprintf("k%d", i)
		if kv.KeySlot(key) < fakeHalf {
			mine = key
		} else {
			theirs = key
		}
	}
	return mine, theirs
}

// TestServerOverAFakeNode serves RESP from the fake node: owned keys through Node.ApplyKV, the others
// answered MOVED to the owner the topology names, and INFO, CLUSTER SLOTS, CONFIG SET maxmemory and
// RECOVER through the rest of the interface.
func TestServerOverAFakeNode(t *testing.T) {
	node := newFakeNode()
	s := serveFake(t, node, fakeOptions())
	c := dial(t, s)
	mine, theirs := fakeKeys(t)
	moved := fmt.Sprintf("-MOVED %d 127.0.0.1:7002", kv.KeySlot(theirs))
	for _, step := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"SET", mine, "v1"}, "+OK"},
		{[]string{"GET", mine}, "$2"},
		{[]string{"INCR", mine}, "-ERR value is not an integer or out of range"},
		{[]string{"GET", theirs}, moved},
		{[]string{"SET", theirs, "v"}, moved},
		{[]string{"CONFIG", "SET", "maxmemory", "10mb"}, "+OK"},
		{[]string{"CONFIG", "SET", "maxmemory-policy", "nosuch"}, "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: noeviction, allkeys-lru"},
		{[]string{"RECOVER"}, "-QUORUM " + ErrQuorumReachable.Error()},
		{[]string{"CLUSTER", "SLOTS"}, "*2"},
	} {
		if got := c.do(step.cmd...); got != step.want {
			t.Fatalf("%v: %q, want %q", step.cmd, got, step.want)
		}
		if step.want == "$2" {
			if got := c.line(); got != "v1" {
				t.Fatalf("GET %s = %q, want v1", mine, got)
			}
		}
	}
	if got := node.Memory().Limit(); got != 10<<20 {
		t.Fatalf("CONFIG SET maxmemory set the node's bound to %d, want %d", got, 10<<20)
	}
	if got := node.KeyCount(); got != 1 {
		t.Fatalf("the node holds %d keys, want 1: a refused write reached it", got)
	}
	var slots []string
	for range 2 * 6 { // two ranges: first, last, and a node of host, port and id
		slots = append(slots, c.line())
	}
	if want := []string{"*3", ":0", fmt.Sprintf(":%d", fakeHalf-1), "*3", "$9", "127.0.0.1"}; fmt.Sprint(slots[:6]) != fmt.Sprint(want) {
		t.Fatalf("CLUSTER SLOTS begins %q, want %q", slots[:6], want)
	}
	info := c.do("INFO", "keyspace")
	for !strings.Contains(info, "db0:") {
		info = c.line()
	}
	if info != "db0:keys=1,expires=0,avg_ttl=0" {
		t.Fatalf("INFO keyspace = %q, want the node's one key", info)
	}
}

// TestServerReadsReplicaCopiesAfterREADONLY: a client that sent READONLY reads the slots the node
// replicates from its copy, as a Redis Cluster replica serves them, while its writes, its reads inside
// MULTI, and every command once it sent READWRITE or RESET are redirected to the owner.
func TestServerReadsReplicaCopiesAfterREADONLY(t *testing.T) {
	node := newFakeNode()
	s := serveFake(t, node, fakeOptions())
	c := dial(t, s)
	var replicated, far string
	for i := 0; replicated == "" || far == ""; i++ {
		key := fmt.Sprintf("k%d", i)
		switch slot := kv.KeySlot(key); {
		case slot >= fakeHalf && slot < fakeReplicated:
			replicated = key
		case slot >= fakeReplicated:
			far = key
		}
	}
	node.mu.Lock()
	node.put(replicated, []byte("v1"))
	node.mu.Unlock()
	moved := func(key string) string { return fmt.Sprintf("-MOVED %d 127.0.0.1:7002", kv.KeySlot(key)) }
	for _, step := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"GET", replicated}, moved(replicated)},
		{[]string{"READONLY"}, "+OK"},
		{[]string{"GET", replicated}, "$2"},
		{[]string{"EXISTS", replicated}, ":1"},
		{[]string{"TYPE", replicated}, "+string"},
		{[]string{"SET", replicated, "v2"}, moved(replicated)},
		{[]string{"INCR", replicated}, moved(replicated)},
		{[]string{"GET", far}, moved(far)},
		{[]string{"MULTI"}, "+OK"},
		{[]string{"GET", replicated}, moved(replicated)},
		{[]string{"DISCARD"}, "+OK"},
		{[]string{"READWRITE"}, "+OK"},
		{[]string{"GET", replicated}, moved(replicated)},
		{[]string{"READONLY"}, "+OK"},
		{[]string{"RESET"}, "+RESET"},
		{[]string{"GET", replicated}, moved(replicated)},
	} {
		if got := c.do(step.cmd...); got != step.want {
			t.Fatalf("%v: %q, want %q", step.cmd, got, step.want)
		}
		if step.want == "$2" {
			if got := c.line(); got != "v1" {
				t.Fatalf("GET %s = %q, want v1", replicated, got)
			}
		}
	}
}
