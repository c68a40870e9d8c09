package main

import (
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fieldSamples stand for the values the downward API gives a pod, so that addresses built from them can
// be checked.
var fieldSamples = map[string]string{
	"metadata.name":      "zaris-0",
	"metadata.namespace": "default",
	"status.podIP":       "10.1.2.3",
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(NAME) references as Kubernetes does, from vars; it reports the names vars lacks, which
// Kubernetes would leave as they are.
func expand(s string, vars map[string]string, where string, p *problems) string {
	return envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v, ok := vars[name]
		if !ok {
			p.add("%s: $(%s) names no variable defined before it", where, name)
		}
		return v
	})
}

// containerEnv returns a container's variables with references expanded and downward-API fields as
// samples.
func containerEnv(c any, p *problems) map[string]string {
	env := map[string]string{}
	for _, e := range digList(c, "env") {
		name := digString(e, "name")
		if field := digString(e, "valueFrom", "fieldRef", "fieldPath"); field != "" {
			env[name] = fieldSamples[field]
			continue
		}
		env[name] = expand(digString(e, "value"), env, name, p)
	}
	return env
}

// lintManifest checks the Kubernetes example: the StatefulSet's container gives cmd/zaris only its flags
// and variables, with values it takes and addresses the peers reach; the pods join each other through the
// headless service, published before they are ready; the probes reach the HTTP endpoint; the pre-stop
// hook runs `zaris leave` of binary and ends within the grace period, after the server's own leave.
func lintManifest(src string, flags map[string]bool, binary string) problems {
	var p problems
	docs, err := parseYAML(src)
	if err != nil {
		p.add("%v", err)
		return p
	}
	byKind := map[string][]any{}
	for _, d := range docs {
		byKind[digString(d, "kind")] = append(byKind[digString(d, "kind")], d)
	}
	if len(byKind["StatefulSet"]) != 1 {
		p.add("%d StatefulSets, want 1", len(byKind["StatefulSet"]))
		return p
	}
	sts := byKind["StatefulSet"][0]
	pod := dig(sts, "spec", "template")
	c := dig(pod, "spec", "containers", 0)
	env := containerEnv(c, &p)
	var args []string
	for _, a := range digList(c, "args") {
		s, _ := a.(string)
		args = append(args, expand(s, env, "args", &p))
	}
	o := serverOptions(env, args, flags, &p)
	httpAddr := setting(env, args, "http-addr")
	checkPeers(byKind["Service"], sts, o, &p)
	checkDisruptions(byKind["PodDisruptionBudget"], o, &p)
	checkPorts(c, listeners(o, httpAddr), &p)
	checkProbes(pod, c, addrPort(httpAddr), &p)
	checkStop(pod, c, binary, o, &p)
	checkStorage(sts, c, o, &p)
	if digString(pod, "spec", "securityContext", "runAsNonRoot") != "true" && digString(c, "securityContext", "runAsNonRoot") != "true" {
		p.add("runAsNonRoot is not set")
	}
	if digString(c, "securityContext", "readOnlyRootFilesystem") != "true" {
		p.add("readOnlyRootFilesystem is not set")
	}
	return p
}

// checkPeers wants the StatefulSet's service headless and published before readiness, and --join to name
// pods of the StatefulSet through it, at their gossip port.
func checkPeers(services []any, sts any, o options, p *problems) {
	name, svcName := digString(sts, "metadata", "name"), digString(sts, "spec", "serviceName")
	i := slices.IndexFunc(services, func(s any) bool { return digString(s, "metadata", "name") == svcName })
	if i < 0 {
		p.add("no Service %q, the StatefulSet's serviceName", svcName)
		return
	}
	if digString(services[i], "spec", "clusterIP") != "None" {
		p.add("Service %s is not headless (clusterIP: None)", svcName)
	}
	if digString(services[i], "spec", "publishNotReadyAddresses") != "true" {
		p.add("Service %s: publishNotReadyAddresses is not true; pods could not find each other before they are ready", svcName)
	}
	replicas, _ := strconv.Atoi(digString(sts, "spec", "replicas"))
	if o.bootstrapExpect > replicas {
		p.add("--bootstrap-expect %d with %d replicas", o.bootstrapExpect, replicas)
	}
	pods := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `-(\d+)\.` + regexp.QuoteMeta(svcName) + `\.`)
	if strings.TrimSpace(o.join) == "" {
		p.add("no --join: each pod would start a cluster of its own")
	}
	for _, addr := range strings.Split(o.join, ",") {
		host, port, _ := net.SplitHostPort(strings.TrimSpace(addr))
		ours := false
		if m := pods.FindStringSubmatch(host); m != nil {
			n, _ := strconv.Atoi(m[1])
			ours = n < replicas
		}
		if !ours || port != strconv.Itoa(addrPort(o.gossipAddr)) {
			p.add("--join %s: want %s-N.%s... at the gossip port %d, N below %d", addr, name, svcName, addrPort(o.gossipAddr), replicas)
		}
	}
}

// checkDisruptions wants a disruption budget that stops fewer nodes at once than there are copies.
func checkDisruptions(budgets []any, o options, p *problems) {
	if len(budgets) != 1 {
		p.add("%d PodDisruptionBudgets, want 1", len(budgets))
		return
	}
	if n, err := strconv.Atoi(digString(budgets[0], "spec", "maxUnavailable")); err != nil || n < 1 || n >= o.rf {
		p.add("PodDisruptionBudget maxUnavailable %q: want 1 to --rf - 1 (%d)", digString(budgets[0], "spec", "maxUnavailable"), o.rf-1)
	}
}

// containerPort resolves a port by number or by the name of one of c's ports; 0 when unknown.
func containerPort(c any, port string) int {
	if n, err := strconv.Atoi(port); err == nil {
		return n
	}
	for _, cp := range digList(c, "ports") {
		if digString(cp, "name") == port {
			n, _ := strconv.Atoi(digString(cp, "containerPort"))
			return n
		}
	}
	return 0
}

// checkPorts wants every port the server listens on declared by the container, with its protocol.
func checkPorts(c any, ls []listener, p *problems) {
	for _, l := range ls {
		found := slices.ContainsFunc(digList(c, "ports"), func(cp any) bool {
			proto := strings.ToLower(digString(cp, "protocol"))
			return digString(cp, "containerPort") == strconv.Itoa(l.port) && (proto == l.proto || proto == "" && l.proto == "tcp")
		})
		if !found {
			p.add("the container declares no port %d/%s (%s)", l.port, l.proto, l.what)
		}
	}
}

// checkProbes wants readiness on /readyz and liveness on /healthz, and the metrics annotations, at the
// HTTP endpoint's port.
func checkProbes(pod, c any, httpPort int, p *problems) {
	if httpPort == 0 {
		p.add("no --http-addr: the probes and metrics have nothing to reach")
		return
	}
	for probe, want := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		get := dig(c, probe, "httpGet")
		if got := digString(get, "path"); got != want {
			p.add("%s path %q, want %s", probe, got, want)
		}
		if port := digString(get, "port"); containerPort(c, port) != httpPort {
			p.add("%s port %q is not --http-addr's port %d", probe, port, httpPort)
		}
	}
	ann := dig(pod, "metadata", "annotations")
	if digString(ann, "prometheus.io/scrape") != "true" || digString(ann, "prometheus.io/port") != strconv.Itoa(httpPort) {
		p.add("prometheus.io annotations: want scrape \"true\" on port %d", httpPort)
	}
}

// checkStop wants the pre-stop hook to run `binary leave` with a --timeout longer than the server's
// --leave-timeout and shorter than the grace period, which would cut the leave short.
func checkStop(pod, c any, binary string, o options, p *problems) {
	var cmd []string
	for _, w := range digList(c, "lifecycle", "preStop", "exec", "command") {
		s, _ := w.(string)
		cmd = append(cmd, s)
	}
	if len(cmd) < 2 || cmd[0] != binary || cmd[1] != "leave" {
		p.add("preStop command %q: want [%s leave ...]", cmd, binary)
		return
	}
	lo, err := parseLeave(cmd[2:])
	if err != nil {
		p.add("preStop %q: %v", cmd, err)
		return
	}
	grace := 30 * time.Second // Kubernetes's default
	if s := digString(pod, "spec", "terminationGracePeriodSeconds"); s != "" {
		n, _ := strconv.Atoi(s)
		grace = time.Duration(n) * time.Second
	}
	if lo.timeout >= grace {
		p.add("preStop --timeout %v is not below terminationGracePeriodSeconds (%v)", lo.timeout, grace)
	}
	if o.leaveTimeout >= lo.timeout {
		p.add("--leave-timeout %v is not below the preStop --timeout %v", o.leaveTimeout, lo.timeout)
	}
}

// checkStorage wants --data-dir on a volume of the pod's own claim: the root file system is read-only.
func checkStorage(sts, c any, o options, p *problems) {
	if o.dataDir == "" {
		return
	}
	i := slices.IndexFunc(digList(c, "volumeMounts"), func(m any) bool { return digString(m, "mountPath") == o.dataDir })
	if i < 0 {
		p.add("--data-dir %s is on no volume mount", o.dataDir)
		return
	}
	name := digString(c, "volumeMounts", i, "name")
	if !slices.ContainsFunc(digList(sts, "spec", "volumeClaimTemplates"), func(v any) bool { return digString(v, "metadata", "name") == name }) {
		p.add("--data-dir %s: volume %q is no volumeClaimTemplate, so it does not outlive the pod", o.dataDir, name)
	}
}

// dockerBinary returns where the Dockerfile puts the server, for the manifest's pre-stop hook.
func dockerBinary(t *testing.T) string {
	t.Helper()
	facts, p := lintDockerfile(readFile(t, dockerfilePath), goMinor(t), serverFlags(t))
	if facts.binary == "" {
		t.Fatalf("the Dockerfile puts the server nowhere: %q", p)
	}
	return facts.binary
}

func TestKubernetesExample(t *testing.T) {
	for _, problem := range lintManifest(readFile(t, manifestPath), serverFlags(t), dockerBinary(t)) {
		t.Error(problem)
	}
}

// TestKubernetesExampleChecksBite breaks the example one way at a time and wants each break reported.
func TestKubernetesExampleChecksBite(t *testing.T) {
	src, flags, binary := readFile(t, manifestPath), serverFlags(t), dockerBinary(t)
	for _, tc := range []struct{ old, new, want string }{
		{"- --rf=2", "- --replication=2", "--replication=2 is no flag"},
		{"- --rf=2", "- --rf=two", "cmd/zaris refuses"},
		{"name: ZARIS_LEAVE_TIMEOUT", "name: ZARIS_LEAVE_TIME", "ZARIS_LEAVE_TIME is the variable of no flag"},
		{"value: $(POD_IP):7947", "value: 0.0.0.0:7947", "must be an address other members can reach"},
		{"value: $(POD_IP):7946", "value: $(POD_NAME).zaris-headless:7946", "must be an IP address"},
		{"value: $(POD_IP):7947", "value: $(MY_IP):7947", "$(MY_IP) names no variable"},
		{"path: /readyz", "path: /ready", "readinessProbe path \"/ready\""},
		{"path: /healthz", "path: /", "livenessProbe path \"/\""},
		{"port: http\n            periodSeconds: 5", "port: resp\n            periodSeconds: 5", "readinessProbe port \"resp\""},
		{"value: 0.0.0.0:8080", "value: 0.0.0.0:9090", "port \"http\" is not --http-addr's port 9090"},
		{"            - name: ZARIS_HTTP_ADDR\n              value: 0.0.0.0:8080\n", "", "no --http-addr"},
		{"prometheus.io/port: \"8080\"", "prometheus.io/port: \"9100\"", "prometheus.io annotations"},
		{"terminationGracePeriodSeconds: 60", "terminationGracePeriodSeconds: 50", "not below terminationGracePeriodSeconds"},
		{"      terminationGracePeriodSeconds: 60\n", "", "not below terminationGracePeriodSeconds (30s)"},
		{"value: 45s", "value: 55s", "--leave-timeout 55s is not below the preStop --timeout 50s"},
		{`["/zaris", "leave", "--timeout", "50s"]`, `["/zaris", "leave", "--wait", "50s"]`, "flag provided but not defined: -wait"},
		{`["/zaris", "leave",`, `["/zaris", "stop",`, "want [/zaris leave ...]"},
		{"publishNotReadyAddresses: true", "publishNotReadyAddresses: false", "publishNotReadyAddresses is not true"},
		{"clusterIP: None", "clusterIP: \"\"", "is not headless"},
		{"serviceName: zaris-headless", "serviceName: zaris-peers", "no Service \"zaris-peers\""},
		{"zaris-2.zaris-headless", "zaris-3.zaris-headless", "--join zaris-3.zaris-headless"},
		{"svc.cluster.local:7946,zaris-1", "svc.cluster.local:7947,zaris-1", "at the gossip port 7946"},
		{"- --bootstrap-expect=3", "- --bootstrap-expect=4", "--bootstrap-expect 4 with 3 replicas"},
		{"maxUnavailable: 1", "maxUnavailable: 2", "maxUnavailable \"2\""},
		{"mountPath: /data", "mountPath: /var/data", "--data-dir /data is on no volume mount"},
		{"    - metadata:\n        name: data", "    - metadata:\n        name: scratch", "is no volumeClaimTemplate"},
		{"protocol: UDP\n            - name: data", "protocol: TCP\n            - name: data", "no port 7946/udp"},
		{"runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot is not set"},
		{"readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem is not set"},
		{"kind: StatefulSet", "kind: Deployment", "0 StatefulSets"},
	} {
		broken := strings.Replace(src, tc.old, tc.new, 1)
		if broken == src {
			t.Fatalf("the manifest has no %q to break", tc.old)
		}
		if p := lintManifest(broken, flags, binary); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, tc.want) }) {
			t.Errorf("%q -> %q: want a problem with %q, got %q", tc.old, tc.new, tc.want, p)
		}
	}
}
