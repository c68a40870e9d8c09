package zaris

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/throttle"
)

// scriptedConn is a client connection that sends a fixed byte stream, then end of file, and keeps what
// the server answers (up to a bound).
type scriptedConn struct {
	in  *bytes.Reader
	out bytes.Buffer
	cut bool // the answers passed the bound and were dropped from there on
}

const scriptedOutputLimit = 4 << 20

func (s *scriptedConn) Read(p []byte) (int, error) { return s.in.Read(p) }

func (s *scriptedConn) Write(p []byte) (int, error) {
	if s.out.Len()+len(p) > scriptedOutputLimit {
		s.cut = true
	}
	if !s.cut {
		s.out.Write(p)
	}
	return len(p), nil
}

func (s *scriptedConn) Close() error { return nil }
func (s *scriptedConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379}
}
func (s *scriptedConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (s *scriptedConn) SetDeadline(time.Time) error      { return nil }
func (s *scriptedConn) SetReadDeadline(time.Time) error  { return nil }
func (s *scriptedConn) SetWriteDeadline(time.Time) error { return nil }

// sessionSeeds are sessions through the login states: before AUTH, failed logins, each kind of user,
// HELLO, and the inputs that are refused or close the connection.
var sessionSeeds = []string{
	respCmd("GET", "k") + respCmd("AUTH", "pw") + respCmd("SET", "k", "v") + respCmd("GET", "k") + respCmd("QUIT"),
	"AUTH wrong\r\nAUTH default wrong\r\nAUTH pw\r\nINCR n\r\nINCRBY n 9223372036854775807\r\n",
	respCmd("HELLO", "3", "AUTH", "ro", "ro") + respCmd("GET", "a1") + respCmd("SET", "a1", "x") + respCmd("GET", "b") +
		respCmd("CONFIG", "GET", "*") + respCmd("HELLO", "2"),
	respCmd("AUTH", "off", "x") + respCmd("AUTH", "any", "whatever") + respCmd("MSET", "{t}a", "1", "{t}b", "2") + respCmd("MGET", "{t}a", "{t}b"),
	"*11\r\n",
	"*2\r\n$3\r\nGET\r\n$16385\r\n",
	respCmd("AUTH", "pw") + "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5000\r\n" + strings.Repeat("x", 5000) + "\r\n" + respCmd("PING"),
	respCmd("AUTH", "pw") + "SET \"a b\" 'c\\'d'\r\nGET \"a b\"\r\nECHO \"\\x41\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\n\r\n" + respCmd("AUTH", "pw") + respCmd("SET", "posted", "x"),
	respCmd("AUTH", "pw") + respCmd("CLUSTER", "NODES") + respCmd("CLUSTER", "SLOTS") + respCmd("CLIENT", "SETNAME", "x") + respCmd("COMMAND", "INFO", "get"),
	respCmd("AUTH", "pw") + "*1000\r\n" + strings.Repeat("$0\r\n\r\n", 999),
	respCmd("AUTH", "pw") + respCmd("INCRBYFLOAT", "f", "1e4000") + respCmd("APPEND", "f", "x") + respCmd("SETRANGE", "f", "3", "yz") +
		respCmd("GETRANGE", "f", "-3", "9223372036854775807") + respCmd("GETEX", "f", "PXAT", "1") + respCmd("GETDEL", "f") + respCmd("TYPE", "f"),
	respCmd("HELLO", "3", "AUTH", "any", "x") + respCmd("HSET", "h", "f", "v", "g", "1") + respCmd("HINCRBY", "h", "g", "2") +
		respCmd("HGETALL", "h") + respCmd("SADD", "s", "m") + respCmd("SMEMBERS", "s") + respCmd("RPUSH", "l", "a", "b") +
		respCmd("LPOP", "l", "3") + respCmd("ZADD", "z", "1.5", "m", "inf", "n") + respCmd("ZRANGE", "z", "0", "-1", "WITHSCORES") +
		respCmd("GET", "h") + respCmd("TYPE", "z"),
	respCmd("HELLO", "3", "AUTH", "any", "x") + respCmd("CLIENT", "TRACKING", "ON") + respCmd("SET", "t", "1") + respCmd("GET", "t") +
		respCmd("SET", "t", "2") + respCmd("CLIENT", "TRACKING", "ON", "OPTIN") + respCmd("CLIENT", "TRACKING", "OFF") +
		respCmd("CLIENT", "TRACKING", "ON", "OPTIN") + respCmd("CLIENT", "CACHING", "YES") + respCmd("MULTI") + respCmd("GET", "t") +
		respCmd("EXEC") + respCmd("DEL", "t") + respCmd("CLIENT", "TRACKINGINFO"),
	respCmd("INFO") + respCmd("AUTH", "pw") + respCmd("INFO") + respCmd("INFO", "everything") + respCmd("SET", "k", "v") +
		respCmd("GET", "k") + respCmd("GET", "nokey") + respCmd("NOSUCH") + respCmd("INFO", "KeySpace", "server", "nosuch") +
		respCmd("INFO", "stats", "ERRORSTATS", "stats") + respCmd("HELLO", "3") + respCmd("INFO", "cluster") + respCmd("INFO", "") +
		respCmd("CLUSTER", "INFO") + respCmd("MULTI") + respCmd("GET", "k") + respCmd("INFO") + respCmd("EXEC"),
}

// FuzzRESPSession runs whole client sessions against a live node's connection handler: any byte stream,
// logins included, must end (at its end of file, or when the server closes) without a panic or a hang,
// every answer must be well-formed RESP, and the query buffers must stay within their bounds and all be
// given back.
func FuzzRESPSession(f *testing.F) {
	for _, s := range sessionSeeds {
		f.Add([]byte(s))
	}
	c := startRESPCluster(f, 1, func(cfg *Config) {
		cfg.RESPPassword = "pw"
		cfg.RESPUsers = []RESPUser{
			{Name: "ro", Passwords: []string{"ro"}, ReadOnly: true, Keys: []string{"a*"}},
			{Name: "off", Passwords: []string{"x"}, Disabled: true},
			{Name: "any", NoPass: true},
		}
		cfg.MaxValueSize = 4096
		cfg.RESPMaxQueryBuffer = 4096 + respPreAuthMaxQuery
	})
	srv := c.node(0).redis.srv
	srv.throttle = throttle.New(0, 0, 0, 0) // logins are not slowed: the fuzzer explores instead of waiting
	bound := int64(respInitialBuffer + 3*(srv.limits.maxQuery+respMaxHeaderLine))
	f.Fuzz(func(t *testing.T, session []byte) {
		base := srv.budget.used.Load()
		srv.budget.peak.Store(base)
		conn := &scriptedConn{in: bytes.NewReader(session)}
		rc, reason := srv.open(conn)
		if rc == nil {
			t.Fatalf("session refused: %s", reason)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			rc.serve()
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the session did not end within 10 s of its input")
		}
		if held := srv.budget.peak.Load() - base; held > bound {
			t.Fatalf("the session held %d bytes of buffers, over %d", held, bound)
		}
		if used := srv.budget.used.Load(); used != base {
			t.Fatalf("%d bytes of buffers not given back", used-base)
		}
		if !conn.cut {
			checkWellFormed(t, conn.out.Bytes())
		}
	})
}

// checkWellFormed parses every reply of out.
func checkWellFormed(t *testing.T, out []byte) {
	t.Helper()
	rd := bufio.NewReader(bytes.NewReader(out))
	for {
		reply, err := readRawReply(rd)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil || !strings.HasSuffix(reply, "\r\n") || !strings.ContainsRune("+-:$*%_,#!=(|~>", rune(reply[0])) {
			t.Fatalf("malformed answer %q (%v) in %q", reply, err, out)
		}
	}
}
