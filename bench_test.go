package zaris

import (
	"context"
	"net"
	"testing"

	"github.com/zaris-go/zaris/internal/kv"
	"github.com/zaris-go/zaris/transport"
)

// BenchmarkRemoteOps compares, in one run, a remote Get and Put through the whole stack (placement, routing
// table, encoding, ownership check, store) with a raw transport round trip carrying the same bytes.
func BenchmarkRemoteOps(b *testing.B) {
	// The plain dialer: fault injection is for tests, not for measuring.
	c := startSocketCluster(b, 2, func(cfg *Config) { cfg.Dialer = nil })
	ctx := context.Background()
	caller, owner := c.node(0), c.node(1)
	key := c.keyOwnedBy("bench-key", owner)
	value := make([]byte, 64)
	if err := caller.Put(ctx, key, value); err != nil {
		b.Fatal(err)
	}
	req, _ := encode(&kv.Request{Key: key})
	reply, _ := encode(&kv.Reply{Status: StatusSuccess, Value: value, Version: 1})

	raw := rawEchoClient(b, reply)
	b.Run("raw-transport", func(b *testing.B) {
		for b.Loop() {
			if _, err := raw.Call(ctx, kv.OpGet, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			if _, err := caller.Get(ctx, key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("put", func(b *testing.B) {
		for b.Loop() {
			if err := caller.Put(ctx, key, value); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// rawEchoClient returns a client of a loopback transport server that answers every call with reply.
func rawEchoClient(b *testing.B, reply []byte) *transport.Client {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := transport.NewServer(transport.HandlerFunc(func(context.Context, transport.Op, []byte) ([]byte, error) {
		return reply, nil
	}), transport.Options{})
	go srv.Serve(ln)
	client := transport.NewClient(ln.Addr().String(), transport.Options{})
	b.Cleanup(func() {
		client.Close()
		srv.Close()
	})
	return client
}
