package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/zaris-go/zaris/chaos"
)

// Under -nemesis rolling-restart, -rolling-pace says when the next server is stopped, as an orchestrator's
// rollout would decide it: once the cluster is Healthy again (healthy, the harness's own careful pace),
// once the restarted process answers /readyz (ready, a Kubernetes rollout gated by the readiness probe), or
// a fixed delay after the restarted process answers on its RESP port (serve:1s, a rollout that does not
// wait for readiness). Under the last two the harness does not wait for a victim to be safe either: an
// orchestrator does not know which process holds what.

const (
	paceHealthy = "healthy"
	paceReady   = "ready"
	paceServe   = "serve"

	leaderPoll   = 100 * time.Millisecond // how often the leader watch asks every server
	statusBudget = 500 * time.Millisecond // one /status.json or /readyz exchange
)

// rollingPace is a parsed -rolling-pace.
type rollingPace struct {
	kind  string        // paceHealthy, paceReady or paceServe
	delay time.Duration // under paceServe, the pause after the restarted process serves
}

// parsePace reads -rolling-pace: healthy, ready, or serve:<duration>.
func parsePace(s string) (rollingPace, error) {
	kind, delay, hasDelay := strings.Cut(s, ":")
	switch {
	case (kind == paceHealthy || kind == paceReady) && !hasDelay:
		return rollingPace{kind: kind}, nil
	case kind == paceServe && hasDelay:
		d, err := time.ParseDuration(delay)
		if err != nil || d < 0 {
			return rollingPace{}, fmt.Errorf("-rolling-pace %q: want serve:<a duration>, like serve:1s", s)
		}
		return rollingPace{kind: paceServe, delay: d}, nil
	}
	return rollingPace{}, fmt.Errorf("-rolling-pace %q: want healthy, ready or serve:<duration>", s)
}

// String renders the pace as the flag takes it.
func (p rollingPace) String() string {
	if p.kind == paceServe {
		return paceServe + ":" + p.delay.String()
	}
	return p.kind
}

// describe says in words when the next server is stopped.
func (p rollingPace) describe() string {
	switch p.kind {
	case paceReady:
		return "the next stop once the restarted process answers /readyz"
	case paceServe:
		return fmt.Sprintf("the next stop %v after the restarted process answers RESP", p.delay)
	}
	return "the next stop once every partition is Healthy"
}

// awaited says what the harness waited for after each restart.
func (p rollingPace) awaited() string {
	switch p.kind {
	case paceReady:
		return "restarted process ready"
	case paceServe:
		return "restarted process serving"
	}
	return "map caught up and every partition Healthy"
}

// awaitPaced waits until the restarted server s lets the rollout go on as pace says, within settleBound,
// and returns how long that took.
func (c *cluster) awaitPaced(ctx context.Context, s *server, pace rollingPace) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	ok := func() bool { return respAnswers(ctx, s.resp) }
	if pace.kind == paceReady {
		ok = func() bool { return httpOK(ctx, "http://"+s.http+"/readyz") }
	}
	for !ok() {
		if !c.running(s) {
			return time.Since(start), fmt.Errorf("%s exited: %v", s.name, c.exitErr(s))
		}
		if !chaos.Sleep(ctx, pollPause) {
			return time.Since(start), fmt.Errorf("%s not %s within %v", s.name, pace.kind, settleBound)
		}
	}
	took := time.Since(start)
	if pace.kind == paceServe {
		chaos.Sleep(ctx, pace.delay)
	}
	return took, nil
}

// respAnswers reports whether the RESP endpoint at addr answers CLUSTER INFO at all, whatever it says.
func respAnswers(ctx context.Context, addr string) bool {
	answered := false
	clusterInfo(ctx, addr, func(string) bool { answered = true; return true })
	return answered
}

// httpOK reports whether a GET of url answers 200 within statusBudget.
func httpOK(ctx context.Context, url string) bool {
	resp, err := get(ctx, url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode == http.StatusOK
}

func get(ctx context.Context, url string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, statusBudget)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// leaderWatch asks every running server's /status.json, every leaderPoll, whether it leads the control
// plane, and keeps the longest time during which none did.
type leaderWatch struct {
	c    *cluster
	done chan struct{}

	mu      sync.Mutex
	last    time.Time     // the last poll that found a leader
	longest time.Duration // the longest time between two polls that found one
	at      time.Time     // when the longest leaderless time began
}

// watchLeaders starts a leaderWatch over c until ctx ends; wait for it with stop.
func watchLeaders(ctx context.Context, c *cluster) *leaderWatch {
	w := &leaderWatch{c: c, done: make(chan struct{}), last: time.Now()}
	go func() {
		defer close(w.done)
		for chaos.Sleep(ctx, leaderPoll) {
			if w.anyLeads(ctx) {
				w.found(time.Now())
			}
		}
	}()
	return w
}

// found records a poll that found a leader at now.
func (w *leaderWatch) found(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gap := now.Sub(w.last); gap > w.longest {
		w.longest, w.at = gap, w.last
	}
	w.last = now
}

// result waits for the watch to end and returns the longest leaderless time, counting one still going on,
// and when it began.
func (w *leaderWatch) result() (time.Duration, time.Time) {
	<-w.done
	w.found(time.Now())
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest, w.at
}

// anyLeads reports whether some running server says, on its status page, that it leads the control plane.
func (w *leaderWatch) anyLeads(ctx context.Context) bool {
	for _, s := range w.c.list() {
		if s.http != "" && w.c.running(s) && leads(ctx, s.http) {
			return true
		}
	}
	return false
}

// leads reports whether the server whose HTTP endpoint is at addr names itself as the leader.
func leads(ctx context.Context, addr string) bool {
	resp, err := get(ctx, "http://"+addr+"/status.json")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var v struct {
		Node   string `json:"node"`
		Leader string `json:"leader"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&v) != nil {
		return false
	}
	return v.Leader != "" && v.Leader == v.Node
}
