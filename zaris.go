package zaris

import (
	"context"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// PutOption adjusts one Put.
type PutOption func(*putOptions)

type putOptions struct {
	ttl     time.Duration
	concern WriteConcern
	cond    putCond // IfAbsent, IfExists, KeepTTL (commands.go)
}

// WithTTL makes the value expire after d; zero or negative means no expiry.
func WithTTL(d time.Duration) PutOption {
	return func(o *putOptions) { o.ttl = d }
}

// Get returns the value stored under key, or an error matching ErrNotFound.
func (n *Node) Get(ctx context.Context, key string) ([]byte, error) {
	reply, err := n.execute(ctx, opGet, &kvRequest{Key: key})
	if err != nil {
		return nil, err
	}
	return reply.Value, reply.Status.err()
}

// Put stores value under key on the key's owner. The caller may reuse value once Put returns.
func (n *Node) Put(ctx context.Context, key string, value []byte, opts ...PutOption) error {
	if len(value) > n.cfg.MaxValueSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(value), n.cfg.MaxValueSize)
	}
	var o putOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.cond != 0 {
		reply, err := n.putIf(ctx, key, value, 0, opts)
		if err != nil {
			return err
		}
		return putIfErr(reply)
	}
	reply, err := n.execute(ctx, opPut, &kvRequest{Key: key, Value: value, TTL: int64(o.ttl), Concern: o.concern})
	if err != nil {
		return err
	}
	return reply.Status.err()
}

// Delete removes key and reports whether it held a live value.
func (n *Node) Delete(ctx context.Context, key string) (existed bool, err error) {
	reply, err := n.execute(ctx, opDelete, &kvRequest{Key: key})
	if err != nil {
		return false, err
	}
	if reply.Status == StatusNotFound {
		return false, nil
	}
	return reply.Status == StatusSuccess, reply.Status.err()
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
