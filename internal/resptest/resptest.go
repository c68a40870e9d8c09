// Package resptest holds what the tests of the Redis endpoint and of the node both use to read its replies.
package resptest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Conn is a plain TCP connection speaking RESP by hand.
type Conn struct {
	t   testing.TB
	Net net.Conn
	R   *bufio.Reader // reads from Net
}

// Dial connects to addr; the connection closes when the test ends, and fails a read or write after 20 s.
func Dial(t testing.TB, addr string) *Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return newConn(t, conn)
}

// DialFrom connects to addr from the loopback address from.
func DialFrom(t testing.TB, from, addr string) (*Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return newConn(t, conn), nil
}

func newConn(t testing.TB, conn net.Conn) *Conn {
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { conn.Close() })
	return &Conn{t: t, Net: conn, R: bufio.NewReader(conn)}
}

// Send writes s as it is.
func (r *Conn) Send(s string) {
	r.t.Helper()
	if _, err := r.Net.Write([]byte(s)); err != nil {
		r.t.Fatal(err)
	}
}

// Line reads one reply line without its CRLF.
func (r *Conn) Line() string {
	r.t.Helper()
	s, err := r.R.ReadString('\n')
	if err != nil {
		r.t.Fatalf("read reply: %v (got %q)", err, s)
	}
	return strings.TrimSuffix(s, "\r\n")
}

// RoundTrip sends cmds and returns the raw text of the n replies they get.
func (r *Conn) RoundTrip(cmds string, n int) string {
	r.t.Helper()
	r.Send(cmds)
	var out strings.Builder
	for range n {
		reply, err := ReadReply(r.R)
		if err != nil {
			r.t.Fatalf("read reply: %v", err)
		}
		out.WriteString(reply)
	}
	return out.String()
}

// ExpectClosed checks that the server closes the connection without sending anything more. A reset counts:
// the server closed with input still unread.
func (r *Conn) ExpectClosed() {
	r.t.Helper()
	rest, err := io.ReadAll(r.R)
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil
	}
	if err != nil || len(rest) > 0 {
		r.t.Fatalf("want the connection closed, got %q, %v", rest, err)
	}
}

// Cmd encodes a command as clients send it: an array of bulk strings.
func Cmd(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// WaitFor polls cond until it holds, failing the test after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ReadReply reads one whole RESP2 or RESP3 reply and returns its bytes.
func ReadReply(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(line)
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	switch line[0] {
	case '$', '=', '!':
		if n >= 0 {
			payload := make([]byte, n+2)
			if _, err := io.ReadFull(rd, payload); err != nil {
				return "", err
			}
			b.Write(payload)
		}
	case '*', '~', '>', '%', '|':
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range max(n, 0) {
			elem, err := ReadReply(rd)
			if err != nil {
				return "", err
			}
			b.WriteString(elem)
		}
	}
	return b.String(), nil
}
