package zaris

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// NoExpiry is what TTL reports for a key that exists and never expires.
const NoExpiry time.Duration = -1

// IfAbsent makes a Put write only when the key has no live value. Otherwise Put fails with
// ErrConditionNotMet.
func IfAbsent() PutOption { return func(o *putOptions) { o.cond |= kv.CondIfAbsent } }

// IfExists makes a Put write only when the key has a live value. Otherwise Put fails with
// ErrConditionNotMet.
func IfExists() PutOption { return func(o *putOptions) { o.cond |= kv.CondIfExists } }

// KeepTTL makes a Put keep the key's current expiry (none if the key is new) rather than set one.
func KeepTTL() PutOption { return func(o *putOptions) { o.cond |= kv.CondKeepTTL } }

// putIf sends a conditional put under the options o. Put uses it when an option asks for a condition or
// for KeepTTL, and Swap to get the previous value.
func (c *client) putIf(ctx context.Context, key string, value []byte, cond kv.Cond, o putOptions) (kv.Reply, error) {
	if len(value) > c.cfg.MaxValueSize {
		return kv.Reply{}, fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(value), c.cfg.MaxValueSize)
	}
	if o.ifVersion {
		return kv.Reply{}, fmt.Errorf("%w: IfVersion applies to Put and CompareAndSwap only", ErrInvalidRequest)
	}
	return c.execute(ctx, kv.OpPutIf, &kv.Request{Key: key, Value: value, TTL: int64(o.ttl), Cond: cond | o.cond, Concern: o.concern})
}

// putIfErr turns a conditional put's reply into the caller's error.
func putIfErr(reply kv.Reply) error {
	if reply.Status == StatusSuccess && reply.Int == 0 {
		return ErrConditionNotMet
	}
	return statusErr(reply.Status)
}

// existsAfter runs an operation whose reply says only whether the key exists.
func (c *client) existsAfter(ctx context.Context, op transport.Op, req *kv.Request) (bool, error) {
	reply, err := c.execute(ctx, op, req)
	if err != nil || reply.Status == StatusNotFound {
		return false, err
	}
	return reply.Status == StatusSuccess, statusErr(reply.Status)
}

// Why an increment was refused: the value is not an integer, or the sum would overflow. The reply to a
// refused increment is StatusInvalidRequest, with Int set to kv.RefusedIncrOverflow for the second, so that the
// RESP endpoint can answer as Redis does.
var (
	errIncrNotInteger = errors.New("not an integer")
	errIncrOverflow   = errors.New("overflow")
	errWrongType      = errors.New("wrong type")
)

// incr adds delta to key's integer value (a missing key counts as 0), keeping its expiry. It writes
// nothing, and says why, when the value is not a canonical decimal int64 or the sum overflows.
func (s *store) incr(segment int, key string, delta int64) (int64, error) {
	var result int64
	var err error
	s.update(segment, key, func(cur *entry, _ int64) (*entry, bool) {
		var base int64
		var expireAt int64
		if cur != nil && cur.coll() != nil {
			err = errWrongType
			return nil, false
		}
		if cur != nil {
			var ok bool
			if base, ok = kv.ParseCanonicalInt(cur.value()); !ok {
				err = errIncrNotInteger
				return nil, false
			}
			expireAt = cur.expiry()
		}
		if addOverflows(base, delta) {
			err = errIncrOverflow
			return nil, false
		}
		result = base + delta
		var text [20]byte // the longest int64
		return newStringEntry(key, strconv.AppendInt(text[:0], result, 10), 0, expireAt), true
	})
	return result, err
}

func addOverflows(a, b int64) bool {
	return (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b)
}

// addSaturating returns a+b, or the int64 bound the sum would pass.
func addSaturating(a, b int64) int64 {
	switch {
	case !addOverflows(a, b):
		return a + b
	case b > 0:
		return math.MaxInt64
	}
	return math.MinInt64
}

// expire gives key a new expiry ttl from now, or deletes it when ttl is not positive. It reports whether the
// key had a live value.
func (s *store) expire(segment int, key string, ttl time.Duration) bool {
	set, _ := s.expireIf(segment, key, forTTL(ttl), 0)
	return set
}

// expireIf gives key the expiry ask names, deleting it when that has passed, when cond's expiry
// conditions hold. It reports whether it did, and whether the key had a live value.
func (s *store) expireIf(segment int, key string, ask expiryAsk, cond kv.Cond) (set, existed bool) {
	existed = s.setExpiry(segment, key, func(cur *entry, now int64) (int64, bool, bool) {
		at, passed := ask.deadline(now)
		old := cur.expiry()
		atMs, oldMs := at/int64(time.Millisecond), old/int64(time.Millisecond) // Redis compares milliseconds
		switch {
		case cond&kv.CondExpiryNone != 0 && old != 0,
			cond&kv.CondExpiryExists != 0 && old == 0,
			cond&kv.CondExpiryGreater != 0 && (old == 0 || atMs <= oldMs),
			cond&kv.CondExpiryLess != 0 && old != 0 && atMs >= oldMs:
			return 0, false, false
		}
		set = true
		return at, passed, true
	})
	return set, existed
}

// persist removes key's expiry. It reports whether the key had a live value and whether it had an expiry
// that was removed.
func (s *store) persist(segment int, key string) (existed, dropped bool) {
	existed = s.setExpiry(segment, key, func(cur *entry, _ int64) (int64, bool, bool) {
		dropped = cur.expiry() != 0
		return 0, false, dropped
	})
	return existed, dropped
}

// ttl returns how long key has left, or NoExpiry when it never expires. It returns false when the key has
// no live value.
func (s *store) ttl(segment int, key string) (time.Duration, bool) {
	e, ttl, ok := s.getEntry(segment, key)
	if ok && e.expiry() == 0 {
		ttl = NoExpiry
	}
	return ttl, ok
}

// putIf stores value under key when cond allows it, replacing a value of any kind, except that it refuses
// to return a collection as the previous value. It returns the previous live entry (nil if none) and
// whether it wrote.
func (s *store) putIf(segment int, key string, value []byte, ask expiryAsk, cond kv.Cond) (prev *entry, written bool) {
	s.update(segment, key, func(cur *entry, now int64) (*entry, bool) {
		prev = cur
		if (cond&kv.CondIfAbsent != 0 && cur != nil) || (cond&kv.CondIfExists != 0 && cur == nil) ||
			cond&kv.CondReturnPrev != 0 && cur != nil && cur.coll() != nil {
			return nil, false
		}
		written = true
		expireAt := ask.expiry(now)
		if cond&kv.CondKeepTTL != 0 && cur != nil {
			expireAt = cur.expiry()
		}
		return newStringEntry(key, value, 0, expireAt), true
	})
	return prev, written
}

type putOptions struct {
	ttl       time.Duration
	concern   WriteConcern
	cond      kv.Cond // IfAbsent, IfExists, KeepTTL (commands.go)
	version   uint64  // with ifVersion, the version the key must have (versions.go)
	ifVersion bool
}

// putOptionsOf applies opts in order.
func putOptionsOf(opts []PutOption) putOptions {
	var o putOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
