package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zaris-go/zaris"
)

func fetch(t *testing.T, url, password string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if password != "" {
		req.SetBasicAuth("ops", password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestRedactedArgs checks that the command line /debug/pprof/cmdline shows hides the value of every secret
// flag, in each form the flag package accepts, and nothing else.
func TestRedactedArgs(t *testing.T) {
	args := []string{"zaris", "--password", "p1", "-http-password=p2", "--gossip-key=k1", "-gossip-key", "k2",
		"--name", "password", "--password-file", "/run/secret", "--rf=2", "--password"}
	want := []string{"zaris", "--password", "REDACTED", "-http-password=REDACTED", "--gossip-key=REDACTED", "-gossip-key", "REDACTED",
		"--name", "password", "--password-file", "/run/secret", "--rf=2", "--password"}
	if got := redactedArgs(args); !slices.Equal(got, want) {
		t.Fatalf("redactedArgs(%q)\n= %q\nwant %q", args, got, want)
	}
	if args[2] != "p1" {
		t.Fatal("redactedArgs changed its argument")
	}
}

// TestOpsServer: before the node joins, /healthz answers 200 and the rest 503; once it joined, /readyz,
// the page and /metrics answer; the password guards everything but the probes; pprof is served only when
// asked for.
func TestOpsServer(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, pprof := range []bool{false, true} {
		s, err := startOpsServer(httpOptions{addr: "127.0.0.1:0", password: "secret", pprof: pprof}, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + s.addr
		if code, _ := fetch(t, base+"/healthz", ""); code != http.StatusOK {
			t.Errorf("healthz while joining = %d", code)
		}
		if code, body := fetch(t, base+"/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "joining") {
			t.Errorf("readyz while joining = %d %q", code, body)
		}
		if code, _ := fetch(t, base+"/metrics", "secret"); code != http.StatusServiceUnavailable {
			t.Errorf("metrics while joining = %d", code)
		}

		cfg := zaris.DefaultConfig()
		cfg.Name = "ops"
		cfg.Timing = zaris.LocalTiming()
		cfg.ReplicationFactor = 1
		cfg.Logger = log
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		node, err := zaris.Join(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := node.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		s.joined(node)
		deadline := time.Now().Add(10 * time.Second)
		for code, _ := fetch(t, base+"/readyz", ""); code != http.StatusOK; code, _ = fetch(t, base+"/readyz", "") {
			if time.Now().After(deadline) {
				t.Fatalf("readyz = %d after the node joined", code)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, path := range []string{"/", "/metrics", "/status.json"} {
			if code, _ := fetch(t, base+path, ""); code != http.StatusUnauthorized {
				t.Errorf("%s without the password = %d; want 401", path, code)
			}
			if code, _ := fetch(t, base+path, "wrong"); code != http.StatusUnauthorized {
				t.Errorf("%s with a wrong password = %d; want 401", path, code)
			}
		}
		if code, body := fetch(t, base+"/metrics", "secret"); code != http.StatusOK || !strings.Contains(body, `zaris_partitions_owned{node="ops"}`) || !strings.Contains(body, "go_goroutines") {
			t.Errorf("metrics = %d, node series: %v, runtime series: %v", code, strings.Contains(body, "zaris_partitions_owned"), strings.Contains(body, "go_goroutines"))
		}
		if code, body := fetch(t, base+"/", "secret"); code != http.StatusOK || !strings.Contains(body, "<title>Zaris status</title>") {
			t.Errorf("status page = %d", code)
		}
		want := http.StatusNotFound
		if pprof {
			want = http.StatusOK
		}
		if code, _ := fetch(t, base+"/debug/pprof/", "secret"); code != want {
			t.Errorf("pprof %v: /debug/pprof/ = %d; want %d", pprof, code, want)
		}
		if code, body := fetch(t, base+"/debug/pprof/cmdline", "secret"); pprof && (code != http.StatusOK || body != strings.Join(redactedArgs(os.Args), "\x00")) {
			t.Errorf("/debug/pprof/cmdline = %d %q; want the redacted command line", code, body)
		}
		node.Close()
		s.shutdown(context.Background())
	}
}

// TestOpsServerOptions: the endpoint's options need --http-addr, and HTTPS needs a certificate.
func TestOpsServerOptions(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, args := range [][]string{{"--pprof"}, {"--http-password", "x"}, {"--http-tls"}, {"--http-addr", "127.0.0.1:0", "--http-tls"}} {
		o, err := parseOptions(args)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := o.startOpsServer(log); err == nil {
			if s != nil {
				s.shutdown(context.Background())
			}
			t.Errorf("%q: started", args)
		}
	}
}

// TestPasswordGuessesThrottled sends 100 wrong passwords at once from one address: past a burst they are
// slowed, those that would wait over a second are refused unchecked, and once the address has waited, the
// right password opens the page.
func TestPasswordGuessesThrottled(t *testing.T) {
	srv := httptest.NewServer(requirePassword("secret", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("in"))
	})))
	defer srv.Close()
	codes := make(chan int, 100)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			req.SetBasicAuth("ops", "guess")
			resp, err := srv.Client().Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for code := range codes {
		count[code]++
	}
	if count[http.StatusTooManyRequests] == 0 || count[http.StatusUnauthorized] < loginBurst || count[http.StatusOK] != 0 {
		t.Fatalf("100 wrong passwords at once answered %v; want some refused unchecked (429) and the rest 401", count)
	}
	for {
		code, body := fetch(t, srv.URL, "secret")
		if code == http.StatusOK && body == "in" {
			break
		}
		if code != http.StatusTooManyRequests {
			t.Fatalf("the right password = %d %q", code, body)
		}
		time.Sleep(loginInterval) // the address pays off its guesses one interval at a time
	}
}
