package transport

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// acceptAll accepts connections on ln until it closes, sending each on the returned channel.
func acceptAll(t *testing.T, ln net.Listener) <-chan net.Conn {
	accepted := make(chan net.Conn, 16)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- conn
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		close(accepted)
		for conn := range accepted {
			conn.Close()
		}
	})
	return accepted
}

func TestLimitListenerCapsConnections(t *testing.T) {
	ln := LimitListener(listen(t), StreamLimits{MaxConns: 2})
	accepted := acceptAll(t, ln)
	addr := ln.Addr().String()
	dialRaw(t, addr)
	dialRaw(t, addr)
	first := receive(t, accepted, "first connection")
	receive(t, accepted, "second connection")

	extra := dialRaw(t, addr)
	if n, err := extra.Read(make([]byte, 1)); n != 0 || isTimeout(err) {
		t.Fatalf("a connection beyond the cap was kept: %d bytes, %v", n, err)
	}
	if ln.Refused() != 1 || ln.Open() != 2 {
		t.Fatalf("refused %d, open %d: want 1 and 2", ln.Refused(), ln.Open())
	}
	first.Close()
	dialRaw(t, addr)
	receive(t, accepted, "a connection once another closed")
}

func TestLimitListenerFirstByteTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	ln := LimitListener(listen(t), StreamLimits{FirstByteTimeout: timeout})
	accepted := acceptAll(t, ln)
	addr := ln.Addr().String()

	dialRaw(t, addr) // says nothing
	silent := receive(t, accepted, "silent connection")
	if n, err := silent.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("a silent connection read %d bytes, %v: want io.EOF after the first-byte timeout", n, err)
	}

	talker := dialRaw(t, addr)
	served := receive(t, accepted, "talking connection")
	buf := make([]byte, 1)
	for _, b := range []byte("ab") {
		if _, err := talker.Write([]byte{b}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(served, buf); err != nil || buf[0] != b {
			t.Fatalf("read %q, %v: want %q", buf, err, b)
		}
		quiet := time.Now() // once it has spoken, a connection may stay quiet past the timeout
		waitUntil(t, "a quiet spell", func() bool { return time.Since(quiet) > 3*timeout })
	}
}

func TestLimitListenerWriteTimeout(t *testing.T) {
	ln := LimitListener(listen(t), StreamLimits{WriteTimeout: 50 * time.Millisecond})
	accepted := acceptAll(t, ln)
	dialRaw(t, ln.Addr().String()) // never reads
	served := receive(t, accepted, "connection")
	chunk := make([]byte, 1<<20)
	for {
		if _, err := served.Write(chunk); err != nil {
			if !isTimeout(err) {
				t.Fatalf("write failed with %v, want a timeout", err)
			}
			return
		}
	}
}
