package zaris

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/zaris-go/zaris/internal/memnet"
)

// get fetches url and returns the status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestProbesFollowTheNode: /healthz and /readyz answer 200 while a ready node runs, 503 once it closed.
func TestProbesFollowTheNode(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	srv := httptest.NewServer(c.node(0).HTTPHandler())
	defer srv.Close()
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, srv.URL+path); code != http.StatusOK || body != "ok\n" {
			t.Errorf("%s of a ready node = %d %q", path, code, body)
		}
	}
	c.kill(0)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, srv.URL+path); code != http.StatusServiceUnavailable || !strings.Contains(body, "closed") {
			t.Errorf("%s of a closed node = %d %q", path, code, body)
		}
	}
}

// TestReadinessWaitsForAMap: a node that expects a second one to form the cluster has no map, so it is
// alive and not ready.
func TestReadinessWaitsForAMap(t *testing.T) {
	t.Parallel()
	cfg := testConfig("lonely")
	cfg.BootstrapExpect = 2
	cfg.hooks.network = memnet.New()
	n, err := Join(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	srv := httptest.NewServer(n.HTTPHandler())
	defer srv.Close()
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no partition map") {
		t.Errorf("readyz before the map = %d %q", code, body)
	}
	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz = %d", code)
	}
}

// TestReadinessIn: a node is ready once a map records it and nothing it holds is Recovering.
func TestReadinessIn(t *testing.T) {
	layout := Layout{Segments: 8, Partitions: 4}
	base := newClusterMap(layout, 2)
	base.Version = 1
	base.Assignment = Assignment{{"a", "b"}, {"b", "c"}, {"c", "a"}, {"b", "c"}}
	for p, nodes := range base.Assignment {
		base.Runtime[p] = PartitionState{Owner: nodes[0], Health: Healthy, Epoch: 1}
	}
	recovering := func(p int) *ClusterMap {
		m := base.clone()
		m.Runtime[p].Health = Recovering
		return m
	}
	for _, tc := range []struct {
		name     string
		m        *ClusterMap
		recorded bool
		want     string // "" for ready
	}{
		{"ready", base, true, ""},
		{"no map", newClusterMap(layout, 2), true, "no partition map"},
		{"not recorded", base, false, "does not record"},
		{"owns a Recovering partition", recovering(0), true, "partition 0"},
		{"replicates a Recovering partition", recovering(2), true, "partition 2"},
		{"a Recovering partition elsewhere", recovering(1), true, ""},
	} {
		err := readinessIn(tc.m, "a", tc.recorded)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
}

// TestStatusJSON: the view lists every member and partition as the node's map has them.
func TestStatusJSON(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.ReplicationFactor, cfg.MaxMemory, cfg.EvictionPolicy = 2, 64<<20, EvictionAllKeysLRU
	})
	c.waitHealthy(20 * time.Second)
	srv := httptest.NewServer(c.node(1).HTTPHandler())
	defer srv.Close()
	for i := range 100 {
		if err := c.node(0).Put(bg(t), "status:"+strconv.Itoa(i), []byte("held")); err != nil {
			t.Fatal(err)
		}
	}
	var v statusView
	// Gossip may suspect a member for a moment on a loaded machine: the view says so until it refutes.
	waitFor(t, 20*time.Second, "status.json listing every member alive", func() bool {
		code, body := get(t, srv.URL+"/status.json")
		if code != http.StatusOK {
			t.Fatalf("status.json = %d %q", code, body)
		}
		v = statusView{}
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		return len(v.Members) == 3 && !slices.ContainsFunc(v.Members, func(mb memberView) bool { return mb.Status != "alive" })
	})
	if v.MaxMemory != 64<<20 || v.Policy != EvictionAllKeysLRU || v.DataBytes <= 0 || v.DataBytes != c.node(1).own.store.bytes() {
		t.Errorf("memory: %d held of %d under %q; the store holds %d", v.DataBytes, v.MaxMemory, v.Policy, c.node(1).own.store.bytes())
	}
	m := c.node(1).ClusterMap()
	if v.Node != c.node(1).Name() || len(v.Members) != 3 || len(v.Partitions) != m.Partitions || v.Leader == "" || v.Ready != "" {
		t.Fatalf("view: node %q, %d members, %d partitions, leader %q, ready %q", v.Node, len(v.Members), len(v.Partitions), v.Leader, v.Ready)
	}
	if v.Release != Version || v.Protocol != ProtocolVersion || v.ClusterProtocol != ProtocolVersion {
		t.Errorf("versions: release %q, protocol %d, cluster %d", v.Release, v.Protocol, v.ClusterProtocol)
	}
	owned := 0
	for _, mb := range v.Members {
		owned += mb.Owned
		if mb.Protocol != ProtocolVersion {
			t.Errorf("member %s speaks protocol %d, want %d", mb.Name, mb.Protocol, ProtocolVersion)
		}
		if mb.Owned != m.OwnedBy(mb.Name) || mb.Status != "alive" {
			t.Errorf("member %s: owns %d (map: %d), %s", mb.Name, mb.Owned, m.OwnedBy(mb.Name), mb.Status)
		}
	}
	if owned != m.Partitions {
		t.Errorf("members own %d partitions; want %d", owned, m.Partitions)
	}
	for p, pv := range v.Partitions {
		if pv.Owner != m.Runtime[p].Owner || pv.Health != "Healthy" || len(pv.Replicas) != 1 {
			t.Fatalf("partition %d: %+v; map %+v", p, pv, m.Runtime[p])
		}
	}
	if code, page := get(t, srv.URL+"/"); code != http.StatusOK || !strings.Contains(page, "status.json") || strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Errorf("page: %d, refers to status.json: %v, external references: %v", code, strings.Contains(page, "status.json"), strings.Contains(page, "://"))
	}
}

// chromium returns the path of a Chromium or Chrome binary, or skips the test; with ZARIS_NEED_CHROMIUM set
// a missing browser fails it instead. A browser takes more CPU than the rest of a test run can spare, so it
// runs only with ZARIS_BROWSER set, in a step of its own.
func chromium(t *testing.T) string {
	if os.Getenv("ZARIS_BROWSER") == "" {
		t.Skip("the browser test runs with ZARIS_BROWSER=1")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("ZARIS_NEED_CHROMIUM") != "" {
		t.Fatal("no Chromium found, and ZARIS_NEED_CHROMIUM is set")
	}
	t.Skip("no Chromium found")
	return ""
}

// TestStatusPageInBrowser opens the status page of a 3-node cluster in headless Chromium and reads what it
// shows: three members alive and every partition Healthy; after a node is killed, two members alive,
// Degraded partitions and the failovers. It saves a screenshot (ZARIS_STATUS_SCREENSHOT names the file;
// by default it goes to the test's temporary folder) and checks that a phone-wide window needs no
// horizontal scrolling.
func TestStatusPageInBrowser(t *testing.T) {
	t.Parallel()
	path := chromium(t)
	c := startCluster(t, 3, func(cfg *Config) { cfg.ReplicationFactor = 2 })
	c.waitHealthy(20 * time.Second)
	srv := httptest.NewServer(c.node(0).HTTPHandler())
	defer srv.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()

	load, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	loaded := make(chan struct{})
	go func() { // a light load, for the throughput the page shows
		defer close(loaded)
		for i := 0; load.Err() == nil; i++ {
			c.node(0).Put(load, "page:"+strconv.Itoa(i%500), []byte("v"))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	defer func() { stopLoad(); <-loaded }()

	partitions := c.node(0).ClusterMap().Partitions
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	pageShows(t, ctx, "3 members alive and every partition Healthy", `document.getElementById("members-alive").textContent === "3" &&
		document.querySelectorAll('.part[data-health="Healthy"]').length === `+strconv.Itoa(partitions)+` &&
		Number(document.getElementById("rate-called").textContent) > 0 &&
		document.getElementById("memory").textContent.endsWith("MiB")`)

	victim := 1
	if c.leader() == victim {
		victim = 2
	}
	dead := string(c.node(victim).Name())
	c.kill(victim)
	pageShows(t, ctx, "2 members alive, Degraded partitions and the failovers from "+dead, `document.getElementById("members-alive").textContent === "2" &&
		document.querySelector('#members tr[data-status="failed"]') !== null &&
		document.querySelectorAll('.part[data-health="Degraded"]').length > 0 &&
		document.querySelectorAll('.part[data-owner="`+dead+`"]').length === 0 &&
		Array.from(document.querySelectorAll("#failovers tbody tr")).some((tr) => tr.cells[2] && tr.cells[2].textContent === "`+dead+`")`)

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("ZARIS_STATUS_SCREENSHOT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "status-page.png")
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if overflow {
		t.Error("the page scrolls sideways 390 pixels wide")
	}
}

// pageShows waits until the page's JavaScript expression cond is true.
func pageShows(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page does not show %s: %v", what, err)
	}
}
