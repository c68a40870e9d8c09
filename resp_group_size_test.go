package zaris

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRESPAtomicWritesFitAFrame checks that an atomic group's writes stay within what one replication op
// can carry (half of MaxFrameSize): with a 1 MiB frame, EXEC's SETRANGEs and SET past 512 KiB are refused, each
// with an error and nothing written, while the ones before run; an MSET past it is refused whole and one
// under it succeeds. Every write that ran reaches the replica, which never leaves the in-sync set.
func TestRESPAtomicWritesFitAFrame(t *testing.T) {
	c := startRESPCluster(t, 2, replicated(2, func(cfg *Config) {
		cfg.MaxFrameSize = 1 << 20
		cfg.MaxValueSize = 250 << 10
	}))
	const tag, offset = "{group}", "250000"
	owner := c.owner(tag)
	seg := owner.layout.KeySegment(tag)
	p := owner.layout.SegmentPartition(seg)
	waitFor(t, 20*time.Second, "a replica in sync", func() bool { return len(owner.ClusterMap().Runtime[p].InSync) == 1 })
	replica := owner.ClusterMap().Runtime[p].InSync[0]
	conn := dialRaw(t, owner.RESPAddr())
	expect := func(want ...string) {
		t.Helper()
		for _, w := range want {
			if got := conn.line(); got != w {
				t.Fatalf("reply %q; want %q", got, w)
			}
		}
	}

	// Six ops of 250 KB: 1.5 MB, more than a frame. The first two fit in 512 KiB.
	cmds := respCmd("MULTI")
	for i := range 5 {
		cmds += respCmd("SETRANGE", fmt.Sprintf("%sr%d", tag, i), offset, "x")
	}
	value := strings.Repeat("v", 250000)
	conn.send(cmds + respCmd("SET", tag+"s", value) + respCmd("EXEC"))
	expect("+OK", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED", "*6", ":250001", ":250001")
	const groupTooLarge = "-ERR the transaction's writes exceed the size one replication message can carry"
	for range 4 {
		expect(groupTooLarge)
	}

	mset := func(keys ...string) string {
		args := []string{"MSET"}
		for _, k := range keys {
			args = append(args, tag+k, value)
		}
		return respCmd(args...)
	}
	conn.send(mset("m0", "m1", "m2", "m3", "m4"))
	expect(groupTooLarge)
	conn.send(mset("n0", "n1"))
	expect("+OK")

	for key, want := range map[string]bool{"r0": true, "r1": true, "r2": false, "r3": false, "r4": false, "s": false,
		"m0": false, "m1": false, "m2": false, "m3": false, "m4": false, "n0": true, "n1": true} {
		if _, _, ok := owner.own.store.get(seg, tag+key); ok != want {
			t.Errorf("%s present: %v; want %v", tag+key, ok, want)
		}
	}
	waitFor(t, 20*time.Second, "the replica holding the owner's segment", func() bool {
		return c.nodeByID(replica).SegmentDigest(seg) == owner.SegmentDigest(seg)
	})
	if !slices.Contains(owner.ClusterMap().Runtime[p].InSync, replica) || owner.ReplicationStats().InSyncDecisions != 0 {
		t.Fatalf("in sync %v after %d in-sync decisions; want replica %s kept", owner.ClusterMap().Runtime[p].InSync,
			owner.ReplicationStats().InSyncDecisions, replica)
	}
}

// TestRESPComposedWritesPastTheGroupWriteNothing has commands composed of several writes exceed what one
// atomic group carries (half of a 1 MiB frame) with values that a read may still answer: RENAME and COPY
// of a hash of 524,224 bytes, refused before they write, and SUNIONSTORE of a set of 524,212 bytes over a
// key holding a string, whose union is refused after the destination was deleted. Each answers an error
// and writes nothing: the source keeps its value and the destination what it held, also within a
// transaction, whose other commands run.
func TestRESPComposedWritesPastTheGroupWriteNothing(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 1, func(cfg *Config) {
		cfg.MaxFrameSize = 1 << 20
		cfg.MaxValueSize = 260 << 10
	})
	const tag = "{big}"
	conn := dialRaw(t, c.node(0).RESPAddr())
	do := func(want string, args ...string) {
		t.Helper()
		conn.send(respCmd(args...))
		if got := conn.line(); got != want {
			t.Fatalf("%q: reply %q; want %q", args, got, want)
		}
	}
	part := strings.Repeat("x", 262_100)
	for i := range 2 {
		do(":1", "HSET", tag+"h", fmt.Sprint("f", i), part)
		do(":1", "SADD", tag+"s", fmt.Sprint(i, part))
	}
	do("+OK", "SET", tag+"d", "kept")
	const groupTooLarge = "-ERR the transaction's writes exceed the size one replication message can carry"
	do(groupTooLarge, "RENAME", tag+"h", tag+"d")
	do(groupTooLarge, "RENAMENX", tag+"h", tag+"n")
	do(groupTooLarge, "COPY", tag+"h", tag+"d", "REPLACE")
	do("-ERR the arguments or the reply exceed the size limits", "SUNIONSTORE", tag+"d", tag+"s")
	// In a transaction, the refused command writes nothing while the commands around it run.
	conn.send(respCmd("MULTI") + respCmd("SET", tag+"before", "1") + respCmd("SUNIONSTORE", tag+"d", tag+"s") +
		respCmd("LPUSH", tag+"after", "1") + respCmd("EXEC"))
	for _, want := range []string{"+OK", "+QUEUED", "+QUEUED", "+QUEUED", "*3", "+OK", "-ERR the arguments or the reply exceed the size limits", ":1"} {
		if got := conn.line(); got != want {
			t.Fatalf("MULTI around a refused SUNIONSTORE: reply %q; want %q", got, want)
		}
	}
	do(":2", "EXISTS", tag+"before", tag+"after")
	do(":2", "HLEN", tag+"h")
	do(":2", "SCARD", tag+"s")
	do(":0", "EXISTS", tag+"n")
	do("$4", "GET", tag+"d")
	do("kept")
}
