package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// maxRecoverReply bounds the reply `zaris recover` reads: a report of a few lines per member.
const maxRecoverReply = 1 << 20

// recoverOptions are the flags of `zaris recover`.
type recoverOptions struct {
	addr     string
	user     string
	password string
	tls      bool
	tlsCA    string
	tlsCert  string
	tlsKey   string
	timeout  time.Duration
}

// parseRecover reads the flags of `zaris recover`.
func parseRecover(args []string) (recoverOptions, error) {
	var o recoverOptions
	fs := flag.NewFlagSet("zaris recover", flag.ContinueOnError)
	o.register(fs, 90*time.Second)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, o.check(fs)
}

// register adds the flags of a command that talks to one live node over RESP to fs. The password may
// come from ZARIS_PASSWORD instead, as the server's does, so that it stays off the command line.
func (o *recoverOptions) register(fs *flag.FlagSet, timeout time.Duration) {
	fs.StringVar(&o.addr, "addr", "127.0.0.1:6379", "RESP address of one live node")
	fs.StringVar(&o.user, "user", "default", "RESP user, one allowed @admin commands")
	fs.StringVar(&o.password, "password", os.Getenv("ZARIS_PASSWORD"), "the user's password (default $ZARIS_PASSWORD); empty: no AUTH")
	fs.BoolVar(&o.tls, "tls", false, "connect over TLS (a node with --resp-tls)")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "with --tls, PEM file of the CA that signed the node's certificate (default: the system's)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "with --tls, PEM file of a client certificate (a node with --resp-tls-client-auth)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM file of the private key of --tls-cert")
	fs.DurationVar(&o.timeout, "timeout", timeout, "how long to wait for the node's answer")
}

// check checks the flags register added, once fs is parsed.
func (o *recoverOptions) check(fs *flag.FlagSet) error {
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.addr == "":
		return errors.New("--addr: want host:port")
	case o.timeout <= 0:
		return fmt.Errorf("--timeout %v: want a positive duration", o.timeout)
	case (o.tlsCert == "") != (o.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case !o.tls && (o.tlsCA != "" || o.tlsCert != ""):
		return errors.New("--tls-ca and --tls-cert need --tls")
	}
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		return fmt.Errorf("--addr %q: %w", o.addr, err)
	}
	return nil
}

// runRecover is `zaris recover`: it has one live node rebuild the control plane from the live members after
// a majority of its voters died for good (RECOVER over RESP), and prints what it did. It returns the exit
// status: 0 once recovered, 1 when refused or failed, 2 on bad flags.
func runRecover(args []string, stdout, stderr io.Writer) int {
	o, err := parseRecover(args)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "zaris recover:", err)
		}
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	report, err := recoverVia(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "zaris recover:", err)
		return 1
	}
	fmt.Fprint(stdout, report)
	return 0
}

// recoverVia logs in to the node at o.addr and sends RECOVER, returning the node's report.
func recoverVia(ctx context.Context, o recoverOptions) (string, error) {
	return adminCall(ctx, o, "RECOVER")
}

// adminCall logs in to the node at o.addr and sends one command, returning its reply.
func adminCall(ctx context.Context, o recoverOptions, args ...string) (string, error) {
	conn, err := dialRESP(ctx, o)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	r := bufio.NewReader(conn)
	if o.password != "" {
		if _, err := respCall(conn, r, "AUTH", o.user, o.password); err != nil {
			return "", fmt.Errorf("log in as %s: %w", o.user, err)
		}
	}
	return respCall(conn, r, args...)
}

// dialRESP connects to o.addr, over TLS if o asks.
func dialRESP(ctx context.Context, o recoverOptions) (net.Conn, error) {
	if !o.tls {
		return (&net.Dialer{}).DialContext(ctx, "tcp", o.addr)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.tlsCA != "" {
		pem, err := os.ReadFile(o.tlsCA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no certificate", o.tlsCA)
		}
	}
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", o.addr)
}

// respCall sends one command and reads its reply: a status or bulk string, or the error the node gave.
func respCall(w io.Writer, r *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 || n > maxRecoverReply {
			return "", fmt.Errorf("unexpected reply %q", line)
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return "", err
		}
		return string(body[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
