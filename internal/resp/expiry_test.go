package resp

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/clocktest"
	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// laggingOwner is the fake node as an owner that applies each request lag after the edge sent it, by the
// clock they share, and keeps each key's expiry in Unix nanoseconds: a TTL from the edge lands lag late, a
// deadline lands where the client put it.
type laggingOwner struct {
	*fakeNode
	clock    *clocktest.Manual
	lag      time.Duration
	expiries map[string]int64 // guarded by fakeNode.mu
}

func (o *laggingOwner) ApplyKV(_ context.Context, op transport.Op, _ int, req *kv.Request) kv.Reply {
	o.clock.Advance(o.lag)
	now := o.clock.Now().UnixNano()
	at := req.ExpireAt
	if at == 0 && req.TTL > 0 {
		at = now + req.TTL
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	value, found := o.values[req.Key]
	expiry, expires := o.expiries[req.Key]
	switch {
	case op == kv.OpPut || op == kv.OpPutIf:
		o.expiries[req.Key] = at
	case !found && (op == kv.OpExpire || op == kv.OpExpiryTime || op == kv.OpGetEx):
		return kv.Reply{Status: kv.StatusNotFound}
	case op == kv.OpExpire || op == kv.OpGetEx:
		o.expiries[req.Key] = at
		return kv.Reply{Status: kv.StatusSuccess, Value: value, Int: 1}
	case op == kv.OpExpiryTime && (!expires || expiry == 0):
		return kv.Reply{Status: kv.StatusSuccess, Int: -1}
	case op == kv.OpExpiryTime:
		return kv.Reply{Status: kv.StatusSuccess, Int: expiry}
	}
	return o.apply(op, req)
}

// TestDeadlinesReachTheOwnerUnmoved checks that an expiry given as a Unix time (SET PXAT and EXAT,
// EXPIREAT, PEXPIREAT, GETEX PXAT) is the one PEXPIRETIME reads back to the millisecond, however late the
// owner applies the write: the deadline travels as a time, not as a TTL that the delay would stretch.
func TestDeadlinesReachTheOwnerUnmoved(t *testing.T) {
	opt := fakeOptions()
	clock := opt.Clock.(*clocktest.Manual)
	owner := &laggingOwner{fakeNode: newFakeNode(), clock: clock, lag: 3*time.Millisecond + 700*time.Microsecond,
		expiries: map[string]int64{}}
	c := dial(t, serveFake(t, owner, opt))
	deadline := clock.Now().Add(time.Hour).UnixMilli()/1000*1000 + 499 // its seconds round down, by a hair
	ms := func(d int64) string { return strconv.FormatInt(d, 10) }
	steps := []struct {
		cmd  []string
		want string
	}{
		{[]string{"SET", "k", "v", "PXAT", ms(deadline)}, "+OK"},
		{[]string{"PEXPIRETIME", "k"}, ":" + ms(deadline)},
		{[]string{"EXPIRETIME", "k"}, ":" + ms(deadline/1000)},
		{[]string{"PEXPIREAT", "k", ms(deadline + 1)}, ":1"},
		{[]string{"PEXPIRETIME", "k"}, ":" + ms(deadline+1)},
		{[]string{"EXPIREAT", "k", ms(deadline / 1000)}, ":1"},
		{[]string{"PEXPIRETIME", "k"}, ":" + ms(deadline/1000*1000)},
		{[]string{"GETEX", "k", "PXAT", ms(deadline + 2)}, "$1"},
		{[]string{"PEXPIRETIME", "k"}, ":" + ms(deadline+2)},
		{[]string{"SET", "k", "v", "EXAT", ms(deadline / 1000)}, "+OK"},
		{[]string{"PEXPIRETIME", "k"}, ":" + ms(deadline/1000*1000)},
		{[]string{"SET", "k", "v"}, "+OK"},
		{[]string{"PEXPIRETIME", "k"}, ":-1"},
		{[]string{"PEXPIRETIME", "missing"}, ":-2"},
	}
	for _, s := range steps {
		got := c.do(s.cmd...)
		if s.want == "$1" {
			c.line() // GETEX's value
		}
		if got != s.want {
			t.Fatalf("%q = %q, want %q", s.cmd, got, s.want)
		}
	}
}
