package main

import (
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The deployment files, from this package's directory.
const (
	dockerfilePath = "../../Dockerfile"
	manifestPath   = "../../deploy/kubernetes/zaris.yaml"
	// memoryManifestPath is the memory-only example: a Deployment.
	memoryManifestPath = "../../deploy/kubernetes/zaris-memory.yaml"
	goModPath          = "../../go.mod"
)

// httpFlags are the flags of the HTTP endpoint: --http-addr serves /metrics, /healthz, /readyz and the
// status page, --pprof adds /debug/pprof to it. The deployment files may use them even where the flag set
// checked against lacks them.
var httpFlags = map[string]bool{"http-addr": true, "pprof": true}

// parseQuiet runs parseOptions with its usage and errors caught rather than printed, and returns them.
func parseQuiet(args []string) (options, string, error) {
	f, err := os.CreateTemp("", "zaris-usage")
	if err != nil {
		return options{}, "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	stderr := os.Stderr
	os.Stderr = f
	o, err := parseOptions(args)
	os.Stderr = stderr
	out, _ := os.ReadFile(f.Name())
	return o, string(out), err
}

// serverFlags returns the names of cmd/zaris's flags, read from the usage it prints for --help.
func serverFlags(t *testing.T) map[string]bool {
	t.Helper()
	_, usage, err := parseQuiet([]string{"--help"})
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(usage, -1) {
		names[m[1]] = true
	}
	if !names["gossip-addr"] || !names["leave-timeout"] {
		t.Fatalf("no flag names read from the usage:\n%s", usage)
	}
	return names
}

// goMinor returns the Go version go.mod asks for, as major.minor: the build image's tag.
func goMinor(t *testing.T) string {
	t.Helper()
	mod, err := os.ReadFile(goModPath)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod names no Go version")
	}
	return string(m[1])
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// problems collects what a check finds wrong.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// serverOptions parses what a deployment gives the server, ZARIS_* variables and arguments, as cmd/zaris
// would (arguments win), and reports names that are no flag of it and values it refuses.
func serverOptions(env map[string]string, args []string, flags map[string]bool, p *problems) options {
	var argv []string
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "ZARIS_"), "_", "-"))
		switch {
		case !strings.HasPrefix(k, "ZARIS_"):
		case flags[name] && envName(name) == k:
			argv = append(argv, "--"+name+"="+env[k])
		case !httpFlags[name]:
			p.add("%s is the variable of no flag of cmd/zaris", k)
		}
	}
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-") || flags[name]:
			argv = append(argv, a)
		case !httpFlags[name]:
			p.add("%s is no flag of cmd/zaris", a)
		}
	}
	o, _, err := parseQuiet(argv)
	if err != nil {
		p.add("cmd/zaris refuses %q: %v", argv, err)
		return o
	}
	checkAddresses(o, p)
	return o
}

// checkAddresses reports addresses the server would refuse or the peers could not reach: the data host
// must be a reachable address, and gossip binds and advertises an IP address only.
func checkAddresses(o options, p *problems) {
	cfg, err := o.config(nil)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		p.add("cmd/zaris refuses the configuration: %v", err)
	}
	if host, _, err := net.SplitHostPort(o.gossipAddr); err != nil || net.ParseIP(host) == nil {
		p.add("--gossip-addr %q: the host must be an IP address (it is bound and advertised as given)", o.gossipAddr)
	}
}

// setting returns the value a deployment gives flag name: its last argument, else its variable.
func setting(env map[string]string, args []string, name string) string {
	v := env[envName(name)]
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			v = args[i+1]
		} else if after, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			v = after
		}
	}
	return v
}

// addrPort returns the port of host:port, or 0.
func addrPort(addr string) int {
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return n
}

// listener is one port the server listens on.
type listener struct {
	what  string
	port  int
	proto string
}

// listeners are the ports o and the HTTP address open: RESP, gossip (TCP and UDP), data, HTTP.
func listeners(o options, httpAddr string) []listener {
	return []listener{
		{"--resp-addr", addrPort(o.respAddr), "tcp"},
		{"--gossip-addr", addrPort(o.gossipAddr), "tcp"},
		{"--gossip-addr", addrPort(o.gossipAddr), "udp"},
		{"--data-addr", addrPort(o.dataAddr), "tcp"},
		{"--http-addr", addrPort(httpAddr), "tcp"},
	}
}

// dockerStage is one FROM of a Dockerfile and the instructions under it.
type dockerStage struct {
	image, name string
	instrs      []dockerInstr
}

// dockerInstr is one instruction: its keyword in upper case and its arguments, continued lines joined.
type dockerInstr struct{ cmd, args string }

// parseDockerfile splits a Dockerfile into its stages; only ARG may come before the first FROM.
func parseDockerfile(src string) ([]dockerStage, error) {
	var stages []dockerStage
	logical := ""
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if before, ok := strings.CutSuffix(t, `\`); ok {
			logical += before + " "
			continue
		}
		cmd, args, _ := strings.Cut(logical+t, " ")
		logical, cmd, args = "", strings.ToUpper(cmd), strings.TrimSpace(args)
		switch {
		case cmd == "FROM":
			stages = append(stages, parseFrom(args))
		case len(stages) > 0:
			stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, dockerInstr{cmd, args})
		case cmd != "ARG":
			return nil, fmt.Errorf("%s before the first FROM", cmd)
		}
	}
	if logical != "" {
		return nil, errors.New("the last instruction is continued past the end")
	}
	return stages, nil
}

// parseFrom reads FROM [--platform=...] image [AS name].
func parseFrom(args string) dockerStage {
	var f []string
	for _, w := range strings.Fields(args) {
		if !strings.HasPrefix(w, "--") {
			f = append(f, w)
		}
	}
	var s dockerStage
	if len(f) > 0 {
		s.image = f[0]
	}
	if len(f) == 3 && strings.EqualFold(f[1], "AS") {
		s.name = f[2]
	}
	return s
}

// words splits an instruction's arguments: a JSON array (exec form) or words (shell form), unquoted.
func words(args string) []string {
	var list []string
	if strings.HasPrefix(args, "[") && json.Unmarshal([]byte(args), &list) == nil {
		return list
	}
	for _, w := range strings.Fields(args) {
		if u, err := strconv.Unquote(w); err == nil {
			w = u
		}
		list = append(list, w)
	}
	return list
}

// dockerEnv reads the variables an ENV instruction sets: k=v pairs, or the older "ENV k v".
func dockerEnv(args string, into map[string]string) {
	w := words(args)
	if len(w) > 0 && !strings.Contains(w[0], "=") {
		k, v, _ := strings.Cut(args, " ")
		into[k] = strings.TrimSpace(v)
		return
	}
	for _, kv := range w {
		k, v, _ := strings.Cut(kv, "=")
		into[k] = v
	}
}

// dockerFacts are what the rest of the checks need from the Dockerfile.
type dockerFacts struct {
	binary string // the server's path in the image
}

// lintDockerfile checks the Dockerfile: a golang build stage of go.mod's version builds the binary with
// scripts/build-static.sh; the final stage, on a base without libc, copies it, runs it in exec form as a
// numeric non-root user, and sets only variables of cmd/zaris's flags, with values it takes, exposing
// every port the server then listens on.
func lintDockerfile(src, goMinor string, flags map[string]bool) (dockerFacts, problems) {
	var p problems
	var facts dockerFacts
	stages, err := parseDockerfile(src)
	if err != nil {
		p.add("%v", err)
		return facts, p
	}
	if len(stages) < 2 {
		p.add("%d stages: want a build stage and a final one", len(stages))
		return facts, p
	}
	build, built := buildStage(stages, &p)
	final := stages[len(stages)-1]
	if build >= 0 {
		if img := stages[build].image; !regexp.MustCompile(`^golang:` + regexp.QuoteMeta(goMinor) + `([.-]|$)`).MatchString(img) {
			p.add("build stage FROM %s: want golang:%s, the Go of go.mod", img, goMinor)
		}
		if build == len(stages)-1 {
			p.add("the build stage is the final stage")
		}
	}
	if final.image != "scratch" && !strings.HasPrefix(final.image, "gcr.io/distroless/static") {
		p.add("final stage FROM %s: want scratch or gcr.io/distroless/static*, for a static binary", final.image)
	}
	facts.binary = copiedBinary(final, stages, build, built, &p)
	checkUser(final, &p)
	checkEntrypoint(final, facts.binary, &p)
	env := map[string]string{}
	var exposed []string
	for _, in := range final.instrs {
		switch in.cmd {
		case "ENV":
			dockerEnv(in.args, env)
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		}
	}
	o := serverOptions(env, nil, flags, &p)
	for _, l := range listeners(o, setting(env, nil, "http-addr")) {
		if l.port == 0 {
			p.add("%s sets no port", l.what)
		} else if want := fmt.Sprintf("%d/%s", l.port, l.proto); !slices.Contains(exposed, want) &&
			!(l.proto == "tcp" && slices.Contains(exposed, strconv.Itoa(l.port))) {
			p.add("EXPOSE lacks %s (%s)", want, l.what)
		}
	}
	return facts, p
}

// buildStage finds the stage whose RUN builds with scripts/build-static.sh, and the absolute path it
// builds to; -1 when none does.
func buildStage(stages []dockerStage, p *problems) (int, string) {
	for i, s := range stages {
		for _, in := range s.instrs {
			w := words(in.args)
			at := slices.IndexFunc(w, func(s string) bool { return strings.HasSuffix(s, "scripts/build-static.sh") })
			if in.cmd != "RUN" || at < 0 {
				continue
			}
			if at+1 == len(w) || !path.IsAbs(w[at+1]) {
				p.add("RUN %s: give scripts/build-static.sh an absolute output path", in.args)
				return i, ""
			}
			return i, w[at+1]
		}
	}
	p.add("no RUN builds with scripts/build-static.sh, as CI does")
	return -1, ""
}

// copiedBinary returns where the final stage's COPY --from of the build stage puts the built binary.
func copiedBinary(final dockerStage, stages []dockerStage, build int, built string, p *problems) string {
	if build < 0 || built == "" {
		return ""
	}
	for _, in := range final.instrs {
		w := words(in.args)
		from := slices.IndexFunc(w, func(s string) bool { return strings.HasPrefix(s, "--from=") })
		if in.cmd != "COPY" || from < 0 {
			continue
		}
		src := strings.TrimPrefix(w[from], "--from=")
		if src != stages[build].name && src != strconv.Itoa(build) {
			continue
		}
		var paths []string
		for _, s := range w {
			if !strings.HasPrefix(s, "--") {
				paths = append(paths, s)
			}
		}
		if len(paths) < 2 || !slices.Contains(paths[:len(paths)-1], built) {
			continue
		}
		dest := paths[len(paths)-1]
		if strings.HasSuffix(dest, "/") {
			dest += path.Base(built)
		}
		return dest
	}
	p.add("the final stage copies no %s from the build stage", built)
	return ""
}

// checkUser wants the final stage's last USER numeric, group included, and not root.
func checkUser(final dockerStage, p *problems) {
	user := ""
	for _, in := range final.instrs {
		if in.cmd == "USER" {
			user = in.args
		}
	}
	if user == "" {
		p.add("the final stage sets no USER: it would run as root")
		return
	}
	for _, id := range strings.Split(user, ":") {
		if n, err := strconv.Atoi(id); err != nil || n <= 0 {
			p.add("USER %s: want numeric, non-zero ids (runAsNonRoot can check only those)", user)
			return
		}
	}
}

// checkEntrypoint wants the final stage's ENTRYPOINT in exec form, running the copied binary.
func checkEntrypoint(final dockerStage, binary string, p *problems) {
	var entry []string
	found := false
	for _, in := range final.instrs {
		if in.cmd == "ENTRYPOINT" {
			found = true
			entry = nil
			if json.Unmarshal([]byte(in.args), &entry) != nil {
				p.add("ENTRYPOINT %s: want the exec form, a JSON array (no shell in the image; signals reach the server)", in.args)
				return
			}
		}
	}
	switch {
	case !found:
		p.add("the final stage has no ENTRYPOINT")
	case len(entry) == 0 || binary != "" && entry[0] != binary:
		p.add("ENTRYPOINT %q: want %s first", entry, binary)
	}
}

func TestDockerfile(t *testing.T) {
	_, p := lintDockerfile(readFile(t, dockerfilePath), goMinor(t), serverFlags(t))
	for _, problem := range p {
		t.Error(problem)
	}
}

// TestDockerfileChecksBite breaks the Dockerfile one way at a time and wants each break reported.
func TestDockerfileChecksBite(t *testing.T) {
	src, minor, flags := readFile(t, dockerfilePath), goMinor(t), serverFlags(t)
	for _, tc := range []struct{ old, new, want string }{
		{"FROM gcr.io/distroless/static-debian12:nonroot", "", "want a build stage and a final one"},
		{"FROM golang:" + minor, "FROM golang:1.1", "want golang:" + minor},
		{"RUN bash scripts/build-static.sh /out/zaris", "RUN go build -o /out/zaris ./cmd/zaris", "no RUN builds with scripts/build-static.sh"},
		{"scripts/build-static.sh /out/zaris", "scripts/build-static.sh", "absolute output path"},
		{"gcr.io/distroless/static-debian12:nonroot", "debian:12", "want scratch or gcr.io/distroless/static"},
		{"COPY --from=build /out/zaris /zaris", "COPY --from=build /out/other /zaris", "copies no /out/zaris"},
		{"USER 65532:65532", "USER nonroot", "want numeric, non-zero ids"},
		{"USER 65532:65532", "USER 0", "want numeric, non-zero ids"},
		{"USER 65532:65532", "", "sets no USER"},
		{`ENTRYPOINT ["/zaris"]`, "ENTRYPOINT /zaris", "want the exec form"},
		{`ENTRYPOINT ["/zaris"]`, `ENTRYPOINT ["/bin/zaris"]`, "want /zaris first"},
		{"ZARIS_RESP_ADDR=", "ZARIS_RESP_ADDRESS=", "ZARIS_RESP_ADDRESS is the variable of no flag"},
		{"ZARIS_RESP_ADDR=0.0.0.0:6379", "ZARIS_RESP_ADDR=0.0.0.0:6379 ZARIS_DATA_ADDR=0.0.0.0:7947", "must be an address other members can reach"},
		{"ZARIS_GOSSIP_ADDR=0.0.0.0:7946", "ZARIS_GOSSIP_ADDR=zaris:7946", "must be an IP address"},
		{"7946/udp ", "", "EXPOSE lacks 7946/udp"},
		{"8080/tcp", "", "EXPOSE lacks 8080/tcp"},
	} {
		broken := strings.Replace(src, tc.old, tc.new, 1)
		if broken == src {
			t.Fatalf("the Dockerfile has no %q to break", tc.old)
		}
		if _, p := lintDockerfile(broken, minor, flags); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, tc.want) }) {
			t.Errorf("%q -> %q: want a problem with %q, got %q", tc.old, tc.new, tc.want, p)
		}
	}
}

// checkStatic reports why the ELF file at name would need a dynamic loader or shared libraries; nil when
// it runs on an image without libc.
func checkStatic(name string) error {
	f, err := elf.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s asks for a program interpreter (a dynamic loader)", name)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries %q", name, libs)
	}
	if syms, _ := f.ImportedSymbols(); len(syms) > 0 {
		return fmt.Errorf("%s imports %d dynamic symbols, %s first", name, len(syms), syms[0].Name)
	}
	return nil
}

// TestStaticBinary checks the binary at $ZARIS_STATIC_BINARY, built by scripts/build-static.sh (CI sets it).
func TestStaticBinary(t *testing.T) {
	name := os.Getenv("ZARIS_STATIC_BINARY")
	if name == "" {
		t.Skip("ZARIS_STATIC_BINARY names no binary")
	}
	if err := checkStatic(name); err != nil {
		t.Fatal(err)
	}
}

func TestStaticCheckBites(t *testing.T) {
	for _, name := range []string{"/bin/sh", "/usr/bin/env", "/bin/ls", os.Args[0]} {
		f, err := elf.Open(name)
		if err != nil {
			continue
		}
		dynamic := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
		f.Close()
		if dynamic {
			if checkStatic(name) == nil {
				t.Fatalf("%s is dynamically linked, yet passes", name)
			}
			return
		}
	}
	t.Skip("no dynamically linked ELF binary found to check against")
}
