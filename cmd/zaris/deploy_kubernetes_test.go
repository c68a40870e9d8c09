package main

import (
	"errors"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// k8sObject holds the fields of a manifest's object that the checks read; unlisted fields are ignored.
// One spec serves every kind, each filling its own fields.
type k8sObject struct {
	Kind     string
	Metadata struct{ Name string }
	Spec     struct {
		ClusterIP                string      `yaml:"clusterIP"`                // Service
		PublishNotReadyAddresses bool        `yaml:"publishNotReadyAddresses"` // Service
		MaxUnavailable           string      `yaml:"maxUnavailable"`           // PodDisruptionBudget: a number or a percentage
		ServiceName              string      `yaml:"serviceName"`              // StatefulSet
		Replicas                 int         // StatefulSet, Deployment
		Template                 podTemplate // StatefulSet, Deployment
		VolumeClaimTemplates     []k8sObject `yaml:"volumeClaimTemplates"` // StatefulSet
		Strategy                 struct {    // Deployment
			Type          string
			RollingUpdate struct {
				MaxUnavailable string `yaml:"maxUnavailable"`
				MaxSurge       string `yaml:"maxSurge"`
			} `yaml:"rollingUpdate"`
		}
	}
}

// podTemplate is a StatefulSet's or a Deployment's pod template.
type podTemplate struct {
	Metadata struct{ Annotations map[string]string }
	Spec     struct {
		TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"` // nil: Kubernetes's default
		SecurityContext               struct {
			RunAsNonRoot bool `yaml:"runAsNonRoot"`
		} `yaml:"securityContext"`
		Containers []container
	}
}

type container struct {
	Args []string
	Env  []struct {
		Name, Value string
		ValueFrom   struct {
			FieldRef struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	}
	Ports          []declaredPort
	ReadinessProbe probe `yaml:"readinessProbe"`
	LivenessProbe  probe `yaml:"livenessProbe"`
	Lifecycle      struct {
		PreStop struct{ Exec struct{ Command []string } } `yaml:"preStop"`
	}
	SecurityContext struct {
		RunAsNonRoot           bool `yaml:"runAsNonRoot"`
		ReadOnlyRootFilesystem bool `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
	VolumeMounts []volumeMount `yaml:"volumeMounts"`
}

type declaredPort struct {
	Name          string
	ContainerPort int `yaml:"containerPort"`
	Protocol      string
}

type volumeMount struct {
	Name      string
	MountPath string `yaml:"mountPath"`
}

// probe is an HTTP probe; its port is a number or the name of a container port.
type probe struct {
	HTTPGet struct{ Path, Port string } `yaml:"httpGet"`
}

// parseManifest decodes every document of a multi-document manifest.
func parseManifest(src string) ([]k8sObject, error) {
	var objs []k8sObject
	dec := yaml.NewDecoder(strings.NewReader(src))
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
}

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
func containerEnv(c container, p *problems) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		if field := e.ValueFrom.FieldRef.FieldPath; field != "" {
			env[e.Name] = fieldSamples[field]
			continue
		}
		env[e.Name] = expand(e.Value, env, e.Name, p)
	}
	return env
}

// lintManifest checks the Kubernetes example: the StatefulSet's container gives cmd/zaris only its flags
// and variables, with values it takes and addresses the peers reach; the pods join each other through the
// headless service, published before they are ready; the probes reach the HTTP endpoint; the pre-stop
// hook runs `zaris leave` of binary and ends within the grace period, after the server's own leave.
func lintManifest(src string, flags map[string]bool, binary string) problems {
	var p problems
	byKind, ok := manifestKinds(src, "StatefulSet", &p)
	if !ok {
		return p
	}
	sts := byKind["StatefulSet"][0]
	c, o, ok := lintPods(sts.Spec.Template, flags, binary, &p)
	if !ok {
		return p
	}
	checkPeers(byKind["Service"], sts, o, &p)
	checkDisruptions(byKind["PodDisruptionBudget"], o, &p)
	checkStorage(sts, c, o, &p)
	return p
}

// lintMemoryManifest checks the memory-only example: a Deployment whose pods, checked as the
// StatefulSet's are, keep no data dir, find each other through a headless service published before they
// are ready, and are replaced one at a time, the next only once the previous one's replacement is ready
// (maxUnavailable 1, maxSurge 0, a readiness probe on /readyz).
func lintMemoryManifest(src string, flags map[string]bool, binary string) problems {
	var p problems
	byKind, ok := manifestKinds(src, "Deployment", &p)
	if !ok {
		return p
	}
	if n := len(byKind["StatefulSet"]); n != 0 {
		p.add("%d StatefulSets in the memory-only example", n)
	}
	d := byKind["Deployment"][0]
	_, o, ok := lintPods(d.Spec.Template, flags, binary, &p)
	if !ok {
		return p
	}
	if o.dataDir != "" {
		p.add("--data-dir %s in the memory-only example", o.dataDir)
	}
	if o.bootstrapExpect > d.Spec.Replicas {
		p.add("--bootstrap-expect %d with %d replicas", o.bootstrapExpect, d.Spec.Replicas)
	}
	checkRollout(d, &p)
	checkServicePeers(byKind["Service"], o, &p)
	checkDisruptions(byKind["PodDisruptionBudget"], o, &p)
	return p
}

// manifestKinds parses src and sorts its objects by kind; it wants exactly one workload of kind.
func manifestKinds(src, workload string, p *problems) (map[string][]k8sObject, bool) {
	objs, err := parseManifest(src)
	if err != nil {
		p.add("%v", err)
		return nil, false
	}
	byKind := map[string][]k8sObject{}
	for _, o := range objs {
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	if n := len(byKind[workload]); n != 1 {
		p.add("%d %ss, want 1", n, workload)
		return nil, false
	}
	return byKind, true
}

// lintPods checks a workload's pod template: its container's flags and variables, ports, probes, pre-stop
// hook and security settings. It returns the container and the server's options.
func lintPods(pod podTemplate, flags map[string]bool, binary string, p *problems) (container, options, bool) {
	if len(pod.Spec.Containers) == 0 {
		p.add("the workload's pods have no container")
		return container{}, options{}, false
	}
	c := pod.Spec.Containers[0]
	env := containerEnv(c, p)
	var args []string
	for _, a := range c.Args {
		args = append(args, expand(a, env, "args", p))
	}
	o := serverOptions(env, args, flags, p)
	httpAddr := setting(env, args, "http-addr")
	checkPorts(c, listeners(o, httpAddr), p)
	checkProbes(pod, c, addrPort(httpAddr), p)
	checkStop(pod, c, binary, o, p)
	if !pod.Spec.SecurityContext.RunAsNonRoot && !c.SecurityContext.RunAsNonRoot {
		p.add("runAsNonRoot is not set")
	}
	if !c.SecurityContext.ReadOnlyRootFilesystem {
		p.add("readOnlyRootFilesystem is not set")
	}
	return c, o, true
}

// checkRollout wants a Deployment replaced one pod at a time, with no surge: a rollout then stops a pod
// only once the one before it has a ready replacement (checkProbes wants readiness on /readyz).
func checkRollout(d k8sObject, p *problems) {
	st := d.Spec.Strategy
	if st.Type != "" && st.Type != "RollingUpdate" {
		p.add("strategy %s: want RollingUpdate, which waits for each new pod to be ready", st.Type)
	}
	if got := st.RollingUpdate.MaxUnavailable; got != "1" {
		p.add("rollingUpdate maxUnavailable %q: want 1, one pod away at a time", got)
	}
	if got := st.RollingUpdate.MaxSurge; got != "0" {
		p.add("rollingUpdate maxSurge %q: want 0, each pod stopped before its replacement starts", got)
	}
}

// checkServicePeers wants --join to name, at the gossip port, a headless service published before
// readiness, whose DNS name resolves to every pod.
func checkServicePeers(services []k8sObject, o options, p *problems) {
	if strings.TrimSpace(o.join) == "" {
		p.add("no --join: each pod would start a cluster of its own")
		return
	}
	for _, addr := range strings.Split(o.join, ",") {
		host, port, _ := net.SplitHostPort(strings.TrimSpace(addr))
		name, _, _ := strings.Cut(host, ".")
		i := slices.IndexFunc(services, func(s k8sObject) bool { return s.Metadata.Name == name })
		switch {
		case i < 0:
			p.add("--join %s: names no Service of the manifest", addr)
		case services[i].Spec.ClusterIP != "None":
			p.add("Service %s is not headless (clusterIP: None)", name)
		case !services[i].Spec.PublishNotReadyAddresses:
			p.add("Service %s: publishNotReadyAddresses is not true; pods could not find each other before they are ready", name)
		}
		if port != strconv.Itoa(addrPort(o.gossipAddr)) {
			p.add("--join %s: want the gossip port %d", addr, addrPort(o.gossipAddr))
		}
	}
}

// checkPeers wants the StatefulSet's service headless and published before readiness, and --join to name
// pods of the StatefulSet through it, at their gossip port.
func checkPeers(services []k8sObject, sts k8sObject, o options, p *problems) {
	name, svcName, replicas := sts.Metadata.Name, sts.Spec.ServiceName, sts.Spec.Replicas
	i := slices.IndexFunc(services, func(s k8sObject) bool { return s.Metadata.Name == svcName })
	if i < 0 {
		p.add("no Service %q, the StatefulSet's serviceName", svcName)
		return
	}
	if services[i].Spec.ClusterIP != "None" {
		p.add("Service %s is not headless (clusterIP: None)", svcName)
	}
	if !services[i].Spec.PublishNotReadyAddresses {
		p.add("Service %s: publishNotReadyAddresses is not true; pods could not find each other before they are ready", svcName)
	}
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
func checkDisruptions(budgets []k8sObject, o options, p *problems) {
	if len(budgets) != 1 {
		p.add("%d PodDisruptionBudgets, want 1", len(budgets))
		return
	}
	maxUnavailable := budgets[0].Spec.MaxUnavailable
	if n, err := strconv.Atoi(maxUnavailable); err != nil || n < 1 || n >= o.rf {
		p.add("PodDisruptionBudget maxUnavailable %q: want 1 to --rf - 1 (%d)", maxUnavailable, o.rf-1)
	}
}

// containerPort resolves a port by number or by the name of one of c's ports; 0 when unknown.
func containerPort(c container, port string) int {
	if n, err := strconv.Atoi(port); err == nil {
		return n
	}
	for _, cp := range c.Ports {
		if cp.Name == port {
			return cp.ContainerPort
		}
	}
	return 0
}

// checkPorts wants every port the server listens on declared by the container, with its protocol.
func checkPorts(c container, ls []listener, p *problems) {
	for _, l := range ls {
		found := slices.ContainsFunc(c.Ports, func(cp declaredPort) bool {
			proto := strings.ToLower(cp.Protocol)
			return cp.ContainerPort == l.port && (proto == l.proto || proto == "" && l.proto == "tcp")
		})
		if !found {
			p.add("the container declares no port %d/%s (%s)", l.port, l.proto, l.what)
		}
	}
}

// checkProbes wants readiness on /readyz and liveness on /healthz, and the metrics annotations, at the
// HTTP endpoint's port.
func checkProbes(pod podTemplate, c container, httpPort int, p *problems) {
	if httpPort == 0 {
		p.add("no --http-addr: the probes and metrics have nothing to reach")
		return
	}
	for _, pr := range []struct {
		name, want string
		probe
	}{{"readinessProbe", "/readyz", c.ReadinessProbe}, {"livenessProbe", "/healthz", c.LivenessProbe}} {
		if got := pr.HTTPGet.Path; got != pr.want {
			p.add("%s path %q, want %s", pr.name, got, pr.want)
		}
		if port := pr.HTTPGet.Port; containerPort(c, port) != httpPort {
			p.add("%s port %q is not --http-addr's port %d", pr.name, port, httpPort)
		}
	}
	ann := pod.Metadata.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(httpPort) {
		p.add("prometheus.io annotations: want scrape \"true\" on port %d", httpPort)
	}
}

// checkStop wants the pre-stop hook to run `binary leave` with a --timeout longer than the server's
// --leave-timeout and shorter than the grace period, which would cut the leave short.
func checkStop(pod podTemplate, c container, binary string, o options, p *problems) {
	cmd := c.Lifecycle.PreStop.Exec.Command
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
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		grace = time.Duration(*s) * time.Second
	}
	if lo.timeout >= grace {
		p.add("preStop --timeout %v is not below terminationGracePeriodSeconds (%v)", lo.timeout, grace)
	}
	if o.leaveTimeout >= lo.timeout {
		p.add("--leave-timeout %v is not below the preStop --timeout %v", o.leaveTimeout, lo.timeout)
	}
}

// checkStorage wants --data-dir on a volume of the pod's own claim: the root file system is read-only.
func checkStorage(sts k8sObject, c container, o options, p *problems) {
	if o.dataDir == "" {
		return
	}
	i := slices.IndexFunc(c.VolumeMounts, func(m volumeMount) bool { return m.MountPath == o.dataDir })
	if i < 0 {
		p.add("--data-dir %s is on no volume mount", o.dataDir)
		return
	}
	name := c.VolumeMounts[i].Name
	if !slices.ContainsFunc(sts.Spec.VolumeClaimTemplates, func(v k8sObject) bool { return v.Metadata.Name == name }) {
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

func TestKubernetesMemoryExample(t *testing.T) {
	for _, problem := range lintMemoryManifest(readFile(t, memoryManifestPath), serverFlags(t), dockerBinary(t)) {
		t.Error(problem)
	}
}

// TestKubernetesMemoryExampleChecksBite breaks the memory-only example one way at a time and wants each
// break reported.
func TestKubernetesMemoryExampleChecksBite(t *testing.T) {
	src, flags, binary := readFile(t, memoryManifestPath), serverFlags(t), dockerBinary(t)
	for _, tc := range []struct{ old, new, want string }{
		{"maxUnavailable: 1\n      maxSurge", "maxUnavailable: 2\n      maxSurge", "maxUnavailable \"2\""},
		{"maxUnavailable: 1\n      maxSurge", "maxUnavailable: 25%\n      maxSurge", "maxUnavailable \"25%\""},
		{"maxSurge: 0", "maxSurge: 1", "maxSurge \"1\""},
		{"      maxSurge: 0\n", "", "maxSurge \"\""},
		{"type: RollingUpdate", "type: Recreate", "strategy Recreate"},
		{"path: /readyz", "path: /healthz", "readinessProbe path \"/healthz\""},
		{"          readinessProbe:\n            httpGet:\n              path: /readyz\n              port: http\n", "          readinessProbe:\n            httpGet:\n", "readinessProbe path \"\""},
		{"            - --rf=2\n", "            - --rf=2\n            - --data-dir=/data\n", "--data-dir /data in the memory-only example"},
		{"publishNotReadyAddresses: true", "publishNotReadyAddresses: false", "publishNotReadyAddresses is not true"},
		{"clusterIP: None", "clusterIP: \"\"", "is not headless"},
		{"--join=zaris-memory-peers.", "--join=zaris-peers.", "names no Service"},
		{"svc.cluster.local:7946", "svc.cluster.local:7947", "want the gossip port 7946"},
		{"- --bootstrap-expect=3", "- --bootstrap-expect=4", "--bootstrap-expect 4 with 3 replicas"},
		{"maxUnavailable: 1\n  selector", "maxUnavailable: 2\n  selector", "PodDisruptionBudget maxUnavailable \"2\""},
		{"value: 45s", "value: 55s", "--leave-timeout 55s is not below the preStop --timeout 50s"},
		{"readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem is not set"},
		{"kind: Deployment", "kind: StatefulSet", "0 Deployments"},
	} {
		broken := strings.Replace(src, tc.old, tc.new, 1)
		if broken == src {
			t.Fatalf("the manifest has no %q to break", tc.old)
		}
		if p := lintMemoryManifest(broken, flags, binary); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, tc.want) }) {
			t.Errorf("%q -> %q: want a problem with %q, got %q", tc.old, tc.new, tc.want, p)
		}
	}
}
