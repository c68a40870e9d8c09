package resp

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/resptest"
)

// TestRESPAuthBruteForce guesses passwords as fast as the endpoint lets it: one connection is closed after
// authFailuresPerConn failures, many connections from one address together get about one answer per
// authFailureInterval after a burst, and another address logs in at once meanwhile.
func TestRESPAuthBruteForce(t *testing.T) {
	opt := fakeOptions()
	opt.Password = "right"
	addr := serveFake(t, newFakeNode(), opt).ln.Addr().String()

	t.Run("one connection", func(t *testing.T) {
		r := resptest.Dial(t, addr)
		r.Send(strings.Repeat(encodeCommand("AUTH", "wrong"), 1000))
		for i := range authFailuresPerConn {
			if got := r.Line(); !strings.HasPrefix(got, "-WRONGPASS") {
				t.Fatalf("attempt %d: %q", i, got)
			}
		}
		r.ExpectClosed()
	})

	t.Run("many connections", func(t *testing.T) {
		const window = 600 * time.Millisecond
		var answered atomic.Int64
		end := time.Now().Add(window)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					guessUntilClosed(addr, end, &answered)
				}
			}()
		}
		other := loginTime(t, "127.0.0.2:0", addr, "right")
		wg.Wait()
		limit := int64(authFailureBurst) + int64(window/authFailureInterval) + 20
		if n := answered.Load(); n < authFailureBurst || n > limit {
			t.Fatalf("%d wrong passwords answered in %v from one address; want %d to %d", n, window, authFailureBurst, limit)
		}
		if other > 200*time.Millisecond {
			t.Fatalf("a login from another address took %v while 127.0.0.1 was throttled", other)
		}
		resptest.WaitFor(t, 5*time.Second, "the throttled address to log in again", func() bool {
			return loginTime(t, "127.0.0.1:0", addr, "right") >= 0
		})
	})
}

// guessUntilClosed sends wrong passwords on one connection until it is closed or end passes, counting the
// answers received before end.
func guessUntilClosed(addr string, end time.Time, answered *atomic.Int64) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer conn.Close()
	conn.SetDeadline(end.Add(2 * authMaxWait))
	rd := bufio.NewReader(conn)
	for time.Now().Before(end) {
		if _, err := conn.Write([]byte(encodeCommand("AUTH", "wrong"))); err != nil {
			return
		}
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		if strings.HasPrefix(line, "-WRONGPASS") && time.Now().Before(end) {
			answered.Add(1)
		}
	}
}

// loginTime logs in from local address from and returns how long it took, or -1 if it failed.
func loginTime(t *testing.T, from, addr, password string) time.Duration {
	t.Helper()
	local, err := net.ResolveTCPAddr("tcp", from)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := conn.Write([]byte(encodeCommand("AUTH", password))); err != nil {
		return -1
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || line != "+OK\r\n" {
		return -1
	}
	return time.Since(start)
}
