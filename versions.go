package zaris

import (
	"context"
	"fmt"
	"time"

	"github.com/zaris-go/zaris/internal/kv"
)

// Entry is a key's value with its version and the time it has left to live.
type Entry struct {
	Value []byte
	// Version is the revision of the key's segment at the key's last write: it grows with every write of
	// the key, across a delete and re-create too.
	Version uint64
	// TTL is the time the value has left to live, zero when it never expires.
	TTL time.Duration
}

// IfVersion makes a Put write only when the key's version is v, where v 0 means the key has no live value.
// Otherwise Put fails with a *VersionMismatchError. It cannot be combined with IfAbsent or IfExists.
func IfVersion(v uint64) PutOption {
	return func(o *putOptions) { o.version, o.ifVersion = v, true }
}

// putIfVersion sends a put conditioned on o.version. Put and CompareAndSwap use it.
func (c *client) putIfVersion(ctx context.Context, key string, value []byte, o putOptions) (uint64, error) {
	if len(value) > c.cfg.MaxValueSize {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(value), c.cfg.MaxValueSize)
	}
	req := &kv.Request{Key: key, Value: value, TTL: int64(o.ttl), Cond: o.cond, Concern: o.concern, Version: o.version}
	reply, err := c.execute(ctx, kv.OpPutIfVersion, req)
	if err != nil {
		return 0, err
	}
	if err := versionErr(key, reply); err != nil {
		return 0, err
	}
	return reply.Version, nil
}

// versionErr turns a conditional write's reply into the caller's error.
func versionErr(key string, reply kv.Reply) error {
	if reply.Status == StatusVersionMismatch {
		return &VersionMismatchError{Key: key, Current: reply.Version}
	}
	return statusErr(reply.Status)
}

// putIfVersion stores value under key when the key's live version is version, 0 standing for no live
// value, keeping the current expiry with keepTTL. It returns the new version when it wrote, and the current
// one when it did not.
func (s *store) putIfVersion(segment int, key string, value []byte, ttl time.Duration, keepTTL bool, version uint64) (uint64, bool) {
	var current uint64
	next := s.update(segment, key, func(cur *entry, now int64) (*entry, bool) {
		current = versionOf(cur)
		if current != version {
			return nil, false
		}
		expireAt := expiryFrom(now, ttl)
		if keepTTL && cur != nil {
			expireAt = cur.expiry()
		}
		return newStringEntry(key, value, 0, expireAt), true
	})
	if current != version {
		return current, false
	}
	return next.version(), true
}

// removeIfVersion deletes key when its live version is version. It returns the version the key had, 0 for
// no live value, and whether it deleted.
func (s *store) removeIfVersion(segment int, key string, version uint64) (current uint64, removed bool) {
	s.update(segment, key, func(cur *entry, _ int64) (*entry, bool) {
		current = versionOf(cur)
		removed = cur != nil && current == version
		return nil, removed
	})
	return current, removed
}

// versionOf is e's version, 0 for no entry.
func versionOf(e *entry) uint64 {
	if e == nil {
		return 0
	}
	return e.version()
}
