package zaris

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/resptest"
)

// TestRESPBlockedClientsAcrossAFailover blocks 100 clients in BLPOP on one list at its owner, has them
// take a first half of the elements, then takes the owner away while they are all blocked: killed (its
// clients' connections break) or leaving (its clients are answered with a redirect). Each client goes on
// at the new owner; the second half is pushed there. Counted: every element received exactly once, and
// every blocked client answered, redirected or disconnected within its timeout.
func TestRESPBlockedClientsAcrossAFailover(t *testing.T) {
	longScenario(t)
	for _, how := range []string{"killed", "leaving"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			blockedAcrossFailover(t, how == "killed")
		})
	}
}

func blockedAcrossFailover(t *testing.T, kill bool) {
	const list, clients, half = "{queue}jobs", 100, 500
	c := startRESPCluster(t, 3, replicated(2, func(cfg *Config) { cfg.FailoverTimeout = time.Second }))
	c.waitStable(20 * time.Second)
	owner := c.owner(list)
	received := make(chan string, 2*half+clients)
	var redirects, retries, breaks, timeouts atomic.Int64
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			q := &queueClient{t: t, c: c, addr: owner.RESPAddr()}
			defer q.close()
			for {
				reply, err := q.do("BLPOP", list, "20")
				switch {
				case err != nil:
					breaks.Add(1)
					q.backOff()
				case strings.HasPrefix(reply, "-MOVED "):
					redirects.Add(1)
					q.redirect(reply)
				case strings.HasPrefix(reply, "-TRYAGAIN") || strings.HasPrefix(reply, "-CLUSTERDOWN"):
					retries.Add(1)
					q.reconnect()
				case reply == "*-1\r\n":
					timeouts.Add(1)
					t.Errorf("client %d: BLPOP timed out", i)
					return
				case strings.HasPrefix(reply, "*2\r\n"):
					element := reply[strings.LastIndex(reply[:len(reply)-2], "\n")+1 : len(reply)-2]
					received <- element
					if element == "stop" {
						return
					}
				default:
					t.Errorf("client %d: BLPOP answered %q", i, reply)
					return
				}
			}
		})
	}
	pusher := &queueClient{t: t, c: c, addr: owner.RESPAddr()}
	defer pusher.close()
	for i := range half {
		pusher.push(list, strconv.Itoa(i))
	}
	seen := map[string]int{}
	for range half {
		seen[<-received]++
	}
	waitFor(t, 20*time.Second, "every client blocked again", func() bool {
		return strings.Contains(infoAt(t, owner.RESPAddr()), fmt.Sprintf("blocked_clients:%d\r\n", clients))
	})
	if kill {
		c.kill(c.indexOf(owner.id))
	} else {
		if err := owner.Leave(bg(t)); err != nil {
			t.Fatal(err)
		}
		c.forget(c.indexOf(owner.id), owner)
	}
	for i := half; i < 2*half; i++ {
		pusher.push(list, strconv.Itoa(i))
	}
	for range clients {
		pusher.push(list, "stop")
	}
	wg.Wait()
	close(received)
	for e := range received {
		seen[e]++
	}
	for i := range 2 * half {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			t.Errorf("element %d received %d times", i, n)
		}
	}
	if seen["stop"] != clients {
		t.Errorf("%d stops received, want %d", seen["stop"], clients)
	}
	t.Logf("owner %s: BLPOP answered MOVED %d times, TRYAGAIN or CLUSTERDOWN %d times, broken connections %d, timeouts %d",
		map[bool]string{true: "killed", false: "left"}[kill], redirects.Load(), retries.Load(), breaks.Load(), timeouts.Load())
	if answered := redirects.Load() + retries.Load() + breaks.Load(); answered < clients {
		t.Errorf("%d redirects, refusals and broken connections for %d clients blocked at the owner", answered, clients)
	}
}

// infoAt returns INFO's text from the RESP endpoint at addr.
func infoAt(t *testing.T, addr string) string {
	r := dialRESP(t, addr)
	r.send(t, "INFO")
	return readBulk(t, r)
}

// queueClient is a RESP client of a list that follows the list's owner as a cluster-aware client does:
// to the node a MOVED names, or to a live node after its connection broke.
type queueClient struct {
	t    *testing.T
	c    *testCluster
	addr string
	conn net.Conn
	rd   *bufio.Reader
}

func (q *queueClient) do(args ...string) (string, error) {
	if q.conn == nil {
		conn, err := net.DialTimeout("tcp", q.addr, 5*time.Second)
		if err != nil {
			return "", err
		}
		q.conn, q.rd = conn, bufio.NewReader(conn)
	}
	q.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := q.conn.Write([]byte(resptest.Cmd(args...))); err != nil {
		return "", err
	}
	return resptest.ReadReply(q.rd)
}

func (q *queueClient) close() {
	if q.conn != nil {
		q.conn.Close()
		q.conn = nil
	}
}

func (q *queueClient) redirect(moved string) {
	fields := strings.Fields(moved)
	q.close()
	q.addr = fields[len(fields)-1]
}

// reconnect goes to a live node, which redirects to the owner.
func (q *queueClient) reconnect() {
	q.close()
	for _, n := range q.c.live() {
		q.addr = n.RESPAddr()
		return
	}
}

// backOff goes to a live node after a pause, as clients back off while a partition changes hands: a
// redirect to a node just killed fails until the failover.
func (q *queueClient) backOff() {
	time.Sleep(10 * time.Millisecond)
	q.reconnect()
}

// push appends element to list, following redirects until a node acknowledges it.
func (q *queueClient) push(list, element string) {
	q.t.Helper()
	for attempt := 0; ; attempt++ {
		reply, err := q.do("RPUSH", list, element)
		switch {
		case err == nil && strings.HasPrefix(reply, ":"):
			return
		case attempt > 1000:
			q.t.Fatalf("RPUSH %s: %q, %v", element, reply, err)
		case strings.HasPrefix(reply, "-MOVED "):
			q.redirect(reply)
		default: // a broken connection, or TRYAGAIN or CLUSTERDOWN while the partition changes hands
			q.backOff()
		}
	}
}

// TestRESPBlockedClientAsRedisKeepsIt checks what a blocked client sees besides its own reply, against what
// Redis does: replies to the commands it pipelined before the blocking one arrive at once, pub/sub pushes
// arrive while it waits, a write of its key with another type leaves it blocked, and one that sends far
// more than a command's worth and hangs up is forgotten without taking an element.
func TestRESPBlockedClientAsRedisKeepsIt(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 1, func(cfg *Config) { cfg.MaxValueSize, cfg.RESPMaxQueryBuffer = 4<<10, 260<<10 })
	addr := c.node(0).RESPAddr()
	blocked := func(n int) {
		waitFor(t, 10*time.Second, fmt.Sprintf("%d clients blocked", n), func() bool {
			return strings.Contains(infoAt(t, addr), fmt.Sprintf("blocked_clients:%d\r\n", n))
		})
	}
	other := dialRESP(t, addr)

	// Pipelined replies go out before the wait, and pushes flow during it.
	r := dialRESP(t, addr)
	r.send(t, "HELLO", "3")
	if hello, err := resptest.ReadReply(r.rd); err != nil || !strings.HasPrefix(hello, "%") {
		t.Fatalf("HELLO 3: %q, %v", hello, err)
	}
	r.conn.Write([]byte(resptest.Cmd("SUBSCRIBE", "news") + resptest.Cmd("PING", "first") + resptest.Cmd("BLPOP", "{b}list", "0")))
	if got, err := resptest.ReadReply(r.rd); err != nil || got != ">3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n" {
		t.Fatalf("SUBSCRIBE answered %q, %v", got, err)
	}
	if got, err := resptest.ReadReply(r.rd); err != nil || got != "$5\r\nfirst\r\n" {
		t.Fatalf("PING before a blocking command answered %q, %v while it waits", got, err)
	}
	blocked(1)
	if got := other.do(t, "PUBLISH", "news", "during"); got != ":1" {
		t.Fatalf("PUBLISH: %s", got)
	}
	if got := readFrame(t, r); !slices.Equal(got, []string{"message", "news", "during"}) {
		t.Fatalf("a blocked subscriber received %q", got)
	}
	// A write of another type leaves it blocked; a push once the key is a list again serves it.
	other.do(t, "SET", "{b}list", "x")
	other.do(t, "PING")
	blocked(1)
	other.do(t, "DEL", "{b}list")
	other.do(t, "LPUSH", "{b}list", "y")
	if got := readFrame(t, r); !slices.Equal(got, []string{"{b}list", "y"}) {
		t.Fatalf("BLPOP after the key was a string and a list again: %q", got)
	}
	blocked(0)

	// A client that floods while blocked, then hangs up, takes nothing.
	flood := dialRESP(t, addr)
	flood.send(t, "BLPOP", "{b}kept", "0")
	blocked(1)
	flood.conn.Write([]byte(strings.Repeat(resptest.Cmd("PING"), 24<<10))) // 336 KiB, past the query buffer
	flood.conn.Close()
	blocked(0)
	other.do(t, "RPUSH", "{b}kept", "e")
	if got := other.do(t, "LLEN", "{b}kept"); got != ":1" {
		t.Fatalf("LLEN after a gone client was blocked on it: %s", got)
	}
}
