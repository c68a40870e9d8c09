package zaris

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"net/http"
)

//go:embed statuspage.html
var statusPage []byte

// HTTPHandler serves the node's status page and its probes, to mount on any path of an HTTP server (with
// http.StripPrefix when not at the root):
//
//   - / is the status page: one self-contained document (no external asset) that polls status.json;
//   - /status.json is the cluster as this node sees it: members, leader, every partition, moves,
//     recent failovers and operation counts;
//   - /healthz answers 200 while the node runs, 503 once it closed;
//   - /readyz answers 200 when Readiness is nil, otherwise 503 with the reason.
//
// Prometheus series come from Collector, registered where the embedding service serves its own.
func (n *Node) HTTPHandler() http.Handler {
	status := statusPageOf(n)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
		w.Write(statusPage)
	})
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(status.view())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		probe(w, n.life.ctx.Err())
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		probe(w, n.Readiness())
	})
	return mux
}

// statusPageOf gathers the sources of n's status page.
func statusPageOf(n *Node) statusSources {
	return statusSources{id: n.id, clock: n.cfg.Clock, ctl: n.ctl, own: n.own, stats: &n.stats, metrics: n.metrics, readiness: n.Readiness}
}

// probe answers a health probe: 200 "ok", or 503 with the reason.
func probe(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = ErrClosed
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(err.Error() + "\n"))
		return
	}
	w.Write([]byte("ok\n"))
}
