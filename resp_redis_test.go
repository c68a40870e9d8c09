package zaris

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/resptest"
)

// startRedisServer runs a real redis-server on a free loopback port with the given extra arguments and
// returns its address. Without redis-server on PATH the test is skipped, unless ZARIS_NEED_REDIS is set
// (CI sets it), which makes the absence a failure.
func startRedisServer(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("ZARIS_NEED_REDIS") != "" {
			t.Fatal("redis-server is not installed (apt-get install redis-server)")
		}
		t.Skip("redis-server is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	argv := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir()}, args...)
	cmd := exec.Command(bin, argv...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitFor(t, 10*time.Second, "redis-server to accept connections", func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return addr
}

// transcript sends input in one write and returns every top-level reply until the server closes the
// connection, each as its raw bytes; closed reports whether the connection ended without QUIT's reply
// being the last word (the server hung up).
func transcript(t *testing.T, addr, input string) []string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(input)); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	var replies []string
	for {
		reply, err := resptest.ReadReply(rd)
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return replies
		}
		if err != nil {
			t.Fatalf("reading replies to %q: %v (so far %q)", input, err, replies)
		}
		replies = append(replies, reply)
	}
}

// redisCase is input whose replies must be the same from Redis and from Zaris. Replies listed in shapeOnly
// differ by design (HELLO describes each server): only their first line is compared.
type redisCase struct {
	name      string
	input     string
	shapeOnly []int
}

// compareWithRedis runs each case against both servers on fresh connections.
func compareWithRedis(t *testing.T, redisAddr, zarisAddr string, cases []redisCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := transcript(t, redisAddr, tc.input)
			got := transcript(t, zarisAddr, tc.input)
			for _, i := range tc.shapeOnly {
				for _, r := range [][]string{want, got} {
					if i < len(r) {
						r[i] = r[i][:strings.IndexByte(r[i], '\n')+1]
					}
				}
			}
			if strings.Join(got, "") != strings.Join(want, "") {
				t.Fatalf("input %q\nredis: %q\nzaris: %q", tc.input, want, got)
			}
		})
	}
}

// TestRESPMatchesRedis compares replies with a real redis-server for inline quoting, counter overflow,
// logging in with and without a password, pre-authentication limits, ACL users and HTTP input.
func TestRESPMatchesRedis(t *testing.T) {
	t.Run("open", func(t *testing.T) {
		redisAddr := startRedisServer(t)
		zaris := startRESPCluster(t, 1, nil)
		compareWithRedis(t, redisAddr, zaris.node(0).RESPAddr(), openCases())
	})
	t.Run("password", func(t *testing.T) {
		redisAddr := startRedisServer(t, "--requirepass", "s3cret")
		zaris := startRESPCluster(t, 1, func(cfg *Config) { cfg.RESPPassword = "s3cret" })
		compareWithRedis(t, redisAddr, zaris.node(0).RESPAddr(), passwordCases())
	})
	t.Run("users", func(t *testing.T) {
		redisAddr := startRedisServer(t,
			"--user", "alice", "on", ">pw1", ">pw2", "~foo*", "+@all", "-@write", "-@admin",
			"--user", "bob", "off", ">pw", "~*", "+@all",
			"--user", "carol", "on", "nopass", "~*", "+@all")
		zaris := startRESPCluster(t, 1, func(cfg *Config) {
			cfg.RESPUsers = []RESPUser{
				{Name: "alice", Passwords: []string{"pw1", "pw2"}, ReadOnly: true, Keys: []string{"foo*"}},
				{Name: "bob", Passwords: []string{"pw"}, Disabled: true},
				{Name: "carol", NoPass: true},
			}
		})
		compareWithRedis(t, redisAddr, zaris.node(0).RESPAddr(), userCases())
	})
}

func openCases() []redisCase {
	return []redisCase{
		{name: "double quotes", input: "SET \"a b\" c\r\nGET \"a b\"\r\nGET a\r\nQUIT\r\n"},
		{name: "single quotes", input: "SET 'it\\'s' v\r\nGET \"it's\"\r\nGET 'a\\nb'\r\nSET '' empty\r\nGET \"\"\r\nQUIT\r\n"},
		{name: "escapes", input: "SET \"\\x41\\x4a\\n\\t\\q\\\\\" e\r\nGET \"AJ\\n\\tq\\\\\"\r\nECHO \"\\x4\"\r\nECHO \"\\xzz\\a\\b\\r\"\r\nQUIT\r\n"},
		{name: "quote inside a word", input: "SET x\"y z\" 1\r\nGET \"xy z\"\r\nECHO a'b c'\r\nQUIT\r\n"},
		{name: "blanks", input: "  ECHO \t a  \r\n\x0b\x0cECHO b\x0bc\r\nECHO x\ry\r\nQUIT\r\n"},
		{name: "unterminated double quote", input: "SET k v\r\nGET \"abc\r\nGET k\r\n"},
		{name: "unterminated single quote", input: "GET 'abc\r\nGET k\r\n"},
		{name: "closing quote inside a word", input: "GET \"a\"b\r\nGET k\r\n"},
		{name: "backslash at the end", input: "GET \"a\\\r\nGET k\r\n"},
		{name: "incr overflow", input: respCmd("SET", "n", "9223372036854775807") + respCmd("INCR", "n") + respCmd("INCRBY", "n", "1") +
			respCmd("DECRBY", "n", "-1") + respCmd("GET", "n") + respCmd("SET", "n", "-9223372036854775808") + respCmd("DECR", "n") +
			respCmd("INCRBY", "n", "-1") + respCmd("DECRBY", "n", "-9223372036854775808") + respCmd("INCRBY", "n", "9223372036854775807") + "QUIT\r\n"},
		{name: "incr of text", input: respCmd("SET", "t", "abc") + respCmd("INCR", "t") + respCmd("SET", "t", " 1") + respCmd("INCR", "t") + "QUIT\r\n"},
		{name: "auth without a password", input: respCmd("AUTH", "x") + respCmd("AUTH", "default", "x") + respCmd("AUTH", "nobody", "x") +
			respCmd("AUTH", "a", "b", "c") + "QUIT\r\n"},
		{name: "hello auth default without a password", input: respCmd("HELLO", "3", "AUTH", "default", "x") + respCmd("PING") + "QUIT\r\n", shapeOnly: []int{0}},
		{name: "config get requirepass unset", input: respCmd("CONFIG", "GET", "requirepass") + "QUIT\r\n"},
		{name: "http post", input: "PING\r\nPOST / HTTP/1.1\r\nHost: example\r\n\r\n" + respCmd("SET", "posted", "x")},
		{name: "http host header", input: "GET / HTTP/1.1\r\nHost: example\r\n\r\n" + respCmd("SET", "posted", "x")},
		{name: "nothing was posted", input: respCmd("GET", "posted") + "QUIT\r\n"},
	}
}

func passwordCases() []redisCase {
	return []redisCase{
		{name: "commands need auth", input: respCmd("GET", "k") + respCmd("PING") + "QUIT\r\n"},
		{name: "hello without auth", input: respCmd("HELLO", "3") + "QUIT\r\n"},
		{name: "wrong passwords", input: respCmd("AUTH", "wrong") + respCmd("AUTH", "default", "wrong") + respCmd("HELLO", "3", "AUTH", "default", "wrong") +
			respCmd("AUTH", "nobody", "s3cret") + "QUIT\r\n"},
		{name: "auth then commands", input: respCmd("AUTH", "s3cret") + respCmd("SET", "k", "v") + respCmd("GET", "k") + "QUIT\r\n"},
		{name: "auth as default", input: respCmd("AUTH", "default", "s3cret") + respCmd("GET", "k") + "QUIT\r\n"},
		{name: "hello auth", input: respCmd("HELLO", "2", "AUTH", "default", "s3cret") + respCmd("GET", "k") + "QUIT\r\n", shapeOnly: []int{0}},
		{name: "unauthenticated multibulk length", input: "*11\r\n"},
		{name: "unauthenticated bulk length", input: "*2\r\n$3\r\nGET\r\n$16385\r\n"},
		{name: "largest unauthenticated bulk", input: respCmd("GET", strings.Repeat("k", 16384)) + "QUIT\r\n"},
		{name: "ten arguments before auth", input: respCmd("ECHO", "1", "2", "3", "4", "5", "6", "7", "8", "9") + "QUIT\r\n"},
		{name: "larger after auth", input: respCmd("AUTH", "s3cret") + respCmd("GET", strings.Repeat("k", 16385)) + "QUIT\r\n"},
		{name: "http post before auth", input: "POST / HTTP/1.1\r\n" + respCmd("AUTH", "s3cret")},
	}
}

func userCases() []redisCase {
	return []redisCase{
		{name: "read-only user", input: respCmd("AUTH", "alice", "pw2") + respCmd("SET", "foo", "1") + respCmd("GET", "bar") +
			respCmd("GET", "foo1") + respCmd("EXISTS", "foo{a}", "foo{a}x") + respCmd("MGET", "{foo}1", "{foo}x") +
			respCmd("CONFIG", "GET", "timeout") + respCmd("DEL", "foo") + respCmd("PING") + "QUIT\r\n"},
		{name: "either password", input: respCmd("AUTH", "alice", "pw1") + respCmd("AUTH", "alice", "pw3") + "QUIT\r\n"},
		{name: "disabled user", input: respCmd("AUTH", "bob", "pw") + respCmd("HELLO", "3", "AUTH", "bob", "pw") + "QUIT\r\n"},
		{name: "nopass user", input: respCmd("AUTH", "carol", "anything") + respCmd("SET", "c", "1") + "QUIT\r\n"},
		{name: "default still open", input: respCmd("SET", "d", "1") + respCmd("AUTH", "x") + "QUIT\r\n"},
		{name: "failed auth keeps the user", input: respCmd("AUTH", "alice", "pw1") + respCmd("AUTH", "alice", "bad") + respCmd("SET", "foo", "1") + "QUIT\r\n"},
	}
}
