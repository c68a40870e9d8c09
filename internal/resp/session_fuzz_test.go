package resp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/resptest"
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
	encodeCommand("GET", "k") + encodeCommand("AUTH", "pw") + encodeCommand("SET", "k", "v") + encodeCommand("GET", "k") + encodeCommand("QUIT"),
	"AUTH wrong\r\nAUTH default wrong\r\nAUTH pw\r\nINCR n\r\nINCRBY n 9223372036854775807\r\n",
	encodeCommand("HELLO", "3", "AUTH", "ro", "ro") + encodeCommand("GET", "a1") + encodeCommand("SET", "a1", "x") + encodeCommand("GET", "b") +
		encodeCommand("CONFIG", "GET", "*") + encodeCommand("HELLO", "2"),
	encodeCommand("AUTH", "off", "x") + encodeCommand("AUTH", "any", "whatever") + encodeCommand("MSET", "{t}a", "1", "{t}b", "2") + encodeCommand("MGET", "{t}a", "{t}b"),
	"*11\r\n",
	"*2\r\n$3\r\nGET\r\n$16385\r\n",
	encodeCommand("AUTH", "pw") + "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5000\r\n" + strings.Repeat("x", 5000) + "\r\n" + encodeCommand("PING"),
	encodeCommand("AUTH", "pw") + "SET \"a b\" 'c\\'d'\r\nGET \"a b\"\r\nECHO \"\\x41\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\n\r\n" + encodeCommand("AUTH", "pw") + encodeCommand("SET", "posted", "x"),
	encodeCommand("AUTH", "pw") + encodeCommand("CLUSTER", "NODES") + encodeCommand("CLUSTER", "SLOTS") + encodeCommand("CLIENT", "SETNAME", "x") + encodeCommand("COMMAND", "INFO", "get"),
	encodeCommand("AUTH", "pw") + "*1000\r\n" + strings.Repeat("$0\r\n\r\n", 999),
	encodeCommand("AUTH", "pw") + encodeCommand("INCRBYFLOAT", "f", "1e4000") + encodeCommand("APPEND", "f", "x") + encodeCommand("SETRANGE", "f", "3", "yz") +
		encodeCommand("GETRANGE", "f", "-3", "9223372036854775807") + encodeCommand("GETEX", "f", "PXAT", "1") + encodeCommand("GETDEL", "f") + encodeCommand("TYPE", "f"),
	encodeCommand("HELLO", "3", "AUTH", "any", "x") + encodeCommand("HSET", "h", "f", "v", "g", "1") + encodeCommand("HINCRBY", "h", "g", "2") +
		encodeCommand("HGETALL", "h") + encodeCommand("SADD", "s", "m") + encodeCommand("SMEMBERS", "s") + encodeCommand("RPUSH", "l", "a", "b") +
		encodeCommand("LPOP", "l", "3") + encodeCommand("ZADD", "z", "1.5", "m", "inf", "n") + encodeCommand("ZRANGE", "z", "0", "-1", "WITHSCORES") +
		encodeCommand("GET", "h") + encodeCommand("TYPE", "z"),
	encodeCommand("HELLO", "3", "AUTH", "any", "x") + encodeCommand("CLIENT", "TRACKING", "ON") + encodeCommand("SET", "t", "1") + encodeCommand("GET", "t") +
		encodeCommand("SET", "t", "2") + encodeCommand("CLIENT", "TRACKING", "ON", "OPTIN") + encodeCommand("CLIENT", "TRACKING", "OFF") +
		encodeCommand("CLIENT", "TRACKING", "ON", "OPTIN") + encodeCommand("CLIENT", "CACHING", "YES") + encodeCommand("MULTI") + encodeCommand("GET", "t") +
		encodeCommand("EXEC") + encodeCommand("DEL", "t") + encodeCommand("CLIENT", "TRACKINGINFO"),
	encodeCommand("INFO") + encodeCommand("AUTH", "pw") + encodeCommand("INFO") + encodeCommand("INFO", "everything") + encodeCommand("SET", "k", "v") +
		encodeCommand("GET", "k") + encodeCommand("GET", "nokey") + encodeCommand("NOSUCH") + encodeCommand("INFO", "KeySpace", "server", "nosuch") +
		encodeCommand("INFO", "stats", "ERRORSTATS", "stats") + encodeCommand("HELLO", "3") + encodeCommand("INFO", "cluster") + encodeCommand("INFO", "") +
		encodeCommand("CLUSTER", "INFO") + encodeCommand("MULTI") + encodeCommand("GET", "k") + encodeCommand("INFO") + encodeCommand("EXEC"),
}

// FuzzRESPSession runs whole client sessions against a live node's connection handler: any byte stream,
// logins included, must end (at its end of file, or when the server closes) without a panic or a hang,
// every answer must be well-formed RESP, and the query buffers must stay within their bounds and all be
// given back.
func FuzzRESPSession(f *testing.F) {
	for _, s := range sessionSeeds {
		f.Add([]byte(s))
	}
	opt := fakeOptions()
	opt.Password = "pw"
	opt.Users = []User{
		{Name: "ro", Passwords: []string{"ro"}, ReadOnly: true, Keys: []string{"a*"}},
		{Name: "off", Passwords: []string{"x"}, Disabled: true},
		{Name: "any", NoPass: true},
	}
	opt.MaxValueSize = 4096
	opt.MaxQueryBuffer = 4096 + PreAuthMaxQuery
	srv := serveFake(f, newFakeNode(), opt)
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
		reply, err := resptest.ReadReply(rd)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil || !strings.HasSuffix(reply, "\r\n") || !strings.ContainsRune("+-:$*%_,#!=(|~>", rune(reply[0])) {
			t.Fatalf("malformed answer %q (%v) in %q", reply, err, out)
		}
	}
}
