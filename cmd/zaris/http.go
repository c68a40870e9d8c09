package main

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zaris-go/zaris"
	"github.com/zaris-go/zaris/internal/throttle"
)

// httpOptions configure the operations endpoint: metrics, status page, probes and, optionally, pprof.
type httpOptions struct {
	addr     string
	password string // asked with HTTP basic auth everywhere but the probes; empty: none
	tls      bool   // serve HTTPS with --tls-cert and --tls-key
	pprof    bool
}

// opsServer is the operations endpoint. It serves the probes from the start, so an orchestrator sees the
// process alive while it joins, and the rest once the node has joined.
type opsServer struct {
	srv  *http.Server
	addr string // the address it listens on
	done chan struct{}
	// status and metrics are the node's handlers, nil until it has joined.
	status, metrics atomic.Pointer[http.Handler]
}

// startOpsServer listens on o.addr and serves in the background until shutdown.
func startOpsServer(o httpOptions, tlsCfg *tls.Config, log *slog.Logger) (*opsServer, error) {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	s := &opsServer{addr: ln.Addr().String(), done: make(chan struct{})}
	s.srv = &http.Server{
		Handler:           s.routes(o),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      time.Minute, // a CPU profile takes 30 s by default
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("operations endpoint stopped", "addr", o.addr, "err", err)
		}
	}()
	return s, nil
}

// routes are the endpoint's paths: the probes answer without a password, the rest with one when set.
func (s *opsServer) routes(o httpOptions) http.Handler {
	guarded := http.NewServeMux()
	guarded.Handle("/metrics", s.once(&s.metrics))
	if o.pprof {
		guarded.HandleFunc("/debug/pprof/", pprof.Index)
		guarded.HandleFunc("/debug/pprof/cmdline", cmdline)
		guarded.HandleFunc("/debug/pprof/profile", pprof.Profile)
		guarded.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		guarded.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	guarded.Handle("/", s.once(&s.status))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.probe)
	mux.HandleFunc("GET /readyz", s.probe)
	mux.Handle("/", requirePassword(o.password, guarded))
	return mux
}

// secretFlags are the flags whose values /debug/pprof/cmdline never shows.
var secretFlags = []string{"password", "http-password", "gossip-key"}

// cmdline answers /debug/pprof/cmdline as pprof does, NUL-separated, with the values of secretFlags
// redacted.
func cmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte(strings.Join(redactedArgs(os.Args), "\x00")))
}

// redactedArgs returns args with the value of every secret flag replaced, in each form the flag package
// takes: -name value, --name value, -name=value and --name=value.
func redactedArgs(args []string) []string {
	out := slices.Clone(args)
	for i := 1; i < len(out); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
		if !strings.HasPrefix(out[i], "-") || !slices.Contains(secretFlags, name) {
			continue
		}
		if hasValue {
			out[i] = out[i][:strings.Index(out[i], "=")+1] + "REDACTED"
		} else if i+1 < len(out) {
			i++
			out[i] = "REDACTED"
		}
	}
	return out
}

// probe answers /healthz and /readyz: the node's own answer once it joined; before, the process is alive
// and not ready.
func (s *opsServer) probe(w http.ResponseWriter, r *http.Request) {
	if h := s.status.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/healthz" {
		w.Write([]byte("ok\n"))
		return
	}
	http.Error(w, "zaris: joining the cluster", http.StatusServiceUnavailable)
}

// once serves with the handler h points to, and 503 while the node has not joined.
func (s *opsServer) once(h *atomic.Pointer[http.Handler]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if handler := h.Load(); handler != nil {
			(*handler).ServeHTTP(w, r)
			return
		}
		http.Error(w, "zaris: joining the cluster", http.StatusServiceUnavailable)
	})
}

// joined makes the endpoint serve n: its status page and probes, and its series with the Go runtime's and
// the process's, on a registry of their own.
func (s *opsServer) joined(n *zaris.Node) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var metrics http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Timeout: 10 * time.Second, MaxRequestsInFlight: 4})
	status := n.HTTPHandler()
	s.metrics.Store(&metrics)
	s.status.Store(&status)
}

// shutdown stops the endpoint, letting requests in progress finish within ctx, and waits for it.
func (s *opsServer) shutdown(ctx context.Context) {
	s.srv.Shutdown(ctx)
	<-s.done
}

// requirePassword asks for password with HTTP basic auth, whatever the user name; an empty one asks
// nothing. Guesses are slowed per source address as RESP logins are: an address past its burst waits,
// and one that would wait over a second is told to come back later, its password unchecked.
func requirePassword(password string, next http.Handler) http.Handler {
	if password == "" {
		return next
	}
	logins := throttle.New(loginBurst, loginInterval, loginMaxWait, loginTrackedAddrs)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, given, ok := r.BasicAuth()
		if ok {
			addr, _, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil {
				addr = r.RemoteAddr
			}
			wait, allowed := logins.Book(addr, time.Now())
			if !allowed {
				http.Error(w, "zaris: too many password attempts; try again later", http.StatusTooManyRequests)
				return
			}
			select {
			case <-time.After(wait):
			case <-r.Context().Done():
				return
			}
			if ok = subtle.ConstantTimeCompare([]byte(given), []byte(password)) == 1; ok {
				logins.Refund(addr)
			}
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="zaris", charset="UTF-8"`)
			http.Error(w, "zaris: password required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// The operations endpoint's password guesses: 10 at once per address, then one every 20 ms.
const (
	loginBurst        = 10
	loginInterval     = 20 * time.Millisecond
	loginMaxWait      = time.Second
	loginTrackedAddrs = 1 << 16
)
