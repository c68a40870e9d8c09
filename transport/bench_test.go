package transport

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var empty = HandlerFunc(func(context.Context, Op, []byte) ([]byte, error) { return nil, nil })

// BenchmarkRoundTrip compares one empty call with a bare TCP ping-pong of the bytes such a call puts on the
// wire, over loopback.
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("transport-empty", func(b *testing.B) {
		_, addr := startServer(b, empty, Options{})
		c := newClient(b, addr, Options{})
		ctx := context.Background()
		if _, err := c.Call(ctx, 1, nil); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Call(ctx, 1, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-tcp", func(b *testing.B) {
		frame := appendFrame(nil, envelope{kind: kindRequest, id: 1, op: 1})
		conn := rawEchoPeer(b, len(frame))
		buf := make([]byte, len(frame))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := conn.Write(frame); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(conn, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// rawEchoPeer returns a loopback connection whose peer goroutine echoes every message of size bytes.
func rawEchoPeer(b *testing.B, size int) net.Conn {
	ln := listen(b)
	var wg sync.WaitGroup
	wg.Go(func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(conn, buf); err != nil {
				return
			}
			if _, err := conn.Write(buf); err != nil {
				return
			}
		}
	})
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		ln.Close()
		wg.Wait()
	})
	return conn
}

// BenchmarkConcurrentCalls runs b.N calls of 64 bytes spread over several goroutines sharing one Client.
func BenchmarkConcurrentCalls(b *testing.B) {
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers-%d", callers), func(b *testing.B) {
			_, addr := startServer(b, echo, Options{})
			c := newClient(b, addr, Options{})
			ctx := context.Background()
			payload := make([]byte, 64)
			if _, err := c.Call(ctx, 1, payload); err != nil {
				b.Fatal(err)
			}
			before := c.Stats()
			var issued atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range callers {
				wg.Go(func() {
					for issued.Add(1) <= int64(b.N) {
						if _, err := c.Call(ctx, 1, payload); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			after := c.Stats()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
			b.ReportMetric(float64(after.FramesWritten-before.FramesWritten)/float64(after.Flushes-before.Flushes),
				"frames/flush")
		})
	}
}
