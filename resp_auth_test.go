package zaris

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRESPUsers drives ACL users with go-redis over both protocols, and checks that a disabled "default"
// makes every client log in as a named user.
func TestRESPUsers(t *testing.T) {
	c := startRESPCluster(t, 3, func(cfg *Config) {
		cfg.RESPUsers = []RESPUser{
			{Name: "default", Disabled: true},
			{Name: "writer", Passwords: []string{"w"}},
			{Name: "reader", Passwords: []string{"r"}, ReadOnly: true, Keys: []string{"app:*"}},
		}
	})
	addr := c.node(0).RESPAddr()
	for _, proto := range []int{2, 3} {
		ctx := bg(t)
		writer := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, Protocol: proto, Username: "writer", Password: "w"})
		defer writer.Close()
		reader := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, Protocol: proto, Username: "reader", Password: "r"})
		defer reader.Close()
		for i := range 50 {
			key := "app:" + string(rune('a'+i%26)) + strings.Repeat("x", i)
			if err := writer.Set(ctx, key, "v", 0).Err(); err != nil {
				t.Fatalf("RESP%d writer SET %s: %v", proto, key, err)
			}
			if got, err := reader.Get(ctx, key).Result(); err != nil || got != "v" {
				t.Fatalf("RESP%d reader GET %s = %q, %v", proto, key, got, err)
			}
		}
		if err := reader.Set(ctx, "app:x", "v", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Fatalf("RESP%d read-only SET: %v", proto, err)
		}
		if err := reader.Get(ctx, "other").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Fatalf("RESP%d GET outside the key patterns: %v", proto, err)
		}
		// A command whose keys follow a count is checked key by key too.
		if err := reader.SInterCard(ctx, 0, "{app}other").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Fatalf("RESP%d SINTERCARD outside the key patterns: %v", proto, err)
		}
		if n, err := reader.SInterCard(ctx, 0, "app:{s}").Result(); err != nil || n != 0 {
			t.Fatalf("RESP%d SINTERCARD within the key patterns = %d, %v", proto, n, err)
		}
		wrong := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto, Username: "writer", Password: "bad"})
		if err := wrong.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("RESP%d wrong password: %v", proto, err)
		}
		wrong.Close()
	}
	r := dialRaw(t, addr)
	for _, s := range []struct{ input, want string }{
		{respCmd("GET", "k"), "-NOAUTH Authentication required."},
		{respCmd("AUTH", "anything"), "-WRONGPASS invalid username-password pair or user is disabled."},
		{respCmd("AUTH", "writer", "w"), "+OK"},
		{respCmd("CONFIG", "GET", "requirepass"), "*2"},
	} {
		r.send(s.input)
		if got := r.line(); got != s.want {
			t.Fatalf("%q: %q, want %q", s.input, got, s.want)
		}
	}
}

// TestRESPUsersConfig checks that Join refuses users it could not serve as configured.
func TestRESPUsersConfig(t *testing.T) {
	for name, tweak := range map[string]func(*Config){
		"default twice":       func(cfg *Config) { cfg.RESPPassword = "pw"; cfg.RESPUsers = []RESPUser{{Name: "default"}} },
		"duplicate":           func(cfg *Config) { cfg.RESPUsers = []RESPUser{{Name: "a"}, {Name: "a"}} },
		"space in a name":     func(cfg *Config) { cfg.RESPUsers = []RESPUser{{Name: "a b"}} },
		"nopass and password": func(cfg *Config) { cfg.RESPUsers = []RESPUser{{Name: "a", NoPass: true, Passwords: []string{"x"}}} },
		"empty key pattern":   func(cfg *Config) { cfg.RESPUsers = []RESPUser{{Name: "a", Keys: []string{""}}} },
		"no clients":          func(cfg *Config) { cfg.RESPMaxClients = 0 },
		"small query buffer":  func(cfg *Config) { cfg.RESPMaxQueryBuffer = cfg.MaxValueSize },
		"total under one":     func(cfg *Config) { cfg.RESPMaxQueryBuffer = 64 << 20; cfg.RESPMaxQueryBufferTotal = 32 << 20 },
		"negative timeout":    func(cfg *Config) { cfg.RESPIdleTimeout = -time.Second },
	} {
		cfg := testConfig("bad-" + strings.ReplaceAll(name, " ", "-"))
		tweak(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: validate = %v, want ErrInvalidConfig", name, err)
		}
	}
}

// TestRESPRefusesHTTP posts, as a web page could make a browser do, a body of RESP commands to the RESP
// port: the connection is closed at the request line and nothing is stored.
func TestRESPRefusesHTTP(t *testing.T) {
	c := startRESPCluster(t, 1, nil)
	node := c.node(0)
	client := &http.Client{Timeout: 5 * time.Second}
	bodies := map[string]string{
		"multibulk": respCmd("SET", "posted", "x") + respCmd("SET", "posted2", "x"),
		"inline":    "SET posted x\r\nSET posted2 x\r\n",
	}
	for name, body := range bodies {
		resp, err := client.Post("http://"+node.RESPAddr()+"/", "text/plain", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: the POST got an HTTP response %q", name, resp.Status)
		}
	}
	r := dialRaw(t, node.RESPAddr())
	r.send("GET / HTTP/1.1\r\n")
	if got := r.line(); got != "-ERR wrong number of arguments for 'get' command" {
		t.Fatalf("HTTP GET request line: %q", got)
	}
	r.send("Host: example.com\r\n\r\n" + respCmd("SET", "posted", "x"))
	r.expectClosed()
	for _, key := range []string{"posted", "posted2"} {
		if _, err := node.Get(bg(t), key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("key %s after the HTTP requests: %v", key, err)
		}
	}
}

// TestRESPLeastPrivilege checks that a user limited to some keys lists and counts only those (SCAN, KEYS,
// DBSIZE), and that CONFIG GET requirepass reveals no password to any user.
func TestRESPLeastPrivilege(t *testing.T) {
	t.Parallel()
	c := startRESPCluster(t, 1, func(cfg *Config) {
		cfg.RESPPassword = "s3cret"
		cfg.RESPUsers = []RESPUser{{Name: "app", Passwords: []string{"a"}, Keys: []string{"app:*"}}}
	})
	ctx := bg(t)
	addr := c.node(0).RESPAddr()
	admin := redis.NewClient(&redis.Options{Addr: addr, Password: "s3cret"})
	defer admin.Close()
	for _, k := range []string{"app:1", "app:2", "other:1", "secret"} {
		if err := admin.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	app := redis.NewClient(&redis.Options{Addr: addr, Username: "app", Password: "a"})
	defer app.Close()
	var scanned []string
	var cursor uint64
	for {
		keys, next, err := app.Scan(ctx, cursor, "*", 2).Result()
		if err != nil {
			t.Fatal(err)
		}
		scanned, cursor = append(scanned, keys...), next
		if cursor == 0 {
			break
		}
	}
	keys, err := app.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	size, err := app.DBSize(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(scanned)
	slices.Sort(keys)
	want := []string{"app:1", "app:2"}
	if !slices.Equal(scanned, want) || !slices.Equal(keys, want) || size != 2 {
		t.Fatalf("the app user sees SCAN %v, KEYS %v, DBSIZE %d; want %v and 2", scanned, keys, size, want)
	}
	if all, err := admin.DBSize(ctx).Result(); err != nil || all != 4 {
		t.Fatalf("default user's DBSIZE %d, %v; want 4", all, err)
	}
	for name, client := range map[string]*redis.Client{"default": admin, "app": app} {
		got, err := client.ConfigGet(ctx, "requirepass").Result()
		if err != nil || got["requirepass"] != "" {
			t.Fatalf("CONFIG GET requirepass as %s: %v, %v; want it empty", name, got, err)
		}
	}
}
