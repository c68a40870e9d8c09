package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Under -nemesis partition every server runs in a network namespace of its own, joined by a veth pair to a
// bridge in the root namespace that holds the lite member's address, so this process reaches every server
// and the servers reach each other only through the bridge. A blackhole route in a server's namespace drops
// that server's packets to one address: one route is a one-way cut, a route on each side a symmetric one.
// The lite member reaches every server whatever is cut, as a client on another network would; only its
// gossip follows the cuts (see rulesFor), so that it cannot relay probes between the sides.

const (
	// labPrefix starts the name of every namespace, bridge and veth a run makes, followed by the run's pid:
	// what a later run removes when that process is gone.
	labPrefix = "zch"
	// labNet is the first two bytes of the private /24 a run picks for its bridge and servers.
	labNet = "10.217"
	// The servers' fixed ports: each has an address of its own.
	labGossipPort = 7946
	labDataPort   = 7947
	labRESPPort   = 6379
	// firstHost is the last byte of zaris-1's address; the bridge has .1.
	firstHost = 10
	// cutPref is the priority of the rules that cut the lite member's gossip, ahead of localPref, where each
	// namespace moves the local table's rule from 0 so that a rule can also drop packets to the server.
	cutPref   = 100
	localPref = 1000
)

// netLab is one run's namespaces, veths and bridge, and the cuts installed in them.
type netLab struct {
	name   string       // labPrefix and the run's pid: the bridge's name
	bridge netip.Prefix // the bridge's address and the subnet: 10.217.k.1/24

	mu        sync.Mutex
	spaces    map[string]string     // server name -> its namespace
	veths     []string              // the host ends of the servers' veths
	destroyed bool                  // destroy has run: nothing is left to delete
	addrs     map[string]netip.Addr // server name -> its address
	lite      netip.AddrPort        // the lite member's gossip address, once it has joined
	installed map[rule]bool         // the cuts in place
	// ip runs iproute2's ip; tests replace it to check the bookkeeping without namespaces.
	ip func(args ...string) error
}

// rule is one cut a server's namespace holds: an `ip route` or `ip rule` object, added and deleted by the
// same spec.
type rule struct {
	server string // whose namespace holds it
	object string // "route" or "rule"
	spec   string // "blackhole 10.217.3.12/32", or "pref 100 to 10.217.3.1 dport 41000 blackhole"
}

// errNoNamespaces wraps every reason network namespaces cannot be made.
var errNoNamespaces = errors.New("-nemesis " + nemesisPartition + " runs each server in a network namespace " +
	"of its own, which needs root and iproute2 (ip netns, veth, bridge); the other schedules run on loopback " +
	"without them")

// newNetLab removes what crashed runs left, then makes this run's bridge on a free private /24.
func newNetLab() (*netLab, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: not running as root", errNoNamespaces)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: %v", errNoNamespaces, err)
	}
	for _, line := range removeStale(os.Getpid()) {
		fmt.Println(line)
	}
	bridge, err := freeSubnet(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoNamespaces, err)
	}
	l := &netLab{name: labPrefix + strconv.Itoa(os.Getpid()), bridge: bridge, spaces: map[string]string{},
		addrs: map[string]netip.Addr{}, installed: map[rule]bool{}, ip: ip}
	err = ipAll([][]string{
		{"link", "add", l.name, "type", "bridge"},
		{"addr", "add", bridge.String(), "dev", l.name},
		{"link", "set", l.name, "up"},
	})
	if err != nil {
		l.destroy()
		return nil, fmt.Errorf("%w: %v", errNoNamespaces, err)
	}
	fmt.Printf("network namespaces %s-*, bridge %s on %s\n", l.name, l.name, bridge.Masked())
	return l, nil
}

// freeSubnet returns the bridge address .1 of the first 10.217.k.0/24, from k = pid mod 256 on, that no
// interface of the root namespace has an address in.
func freeSubnet(pid int) (netip.Prefix, error) {
	taken, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("interface addresses: %w", err)
	}
	for i := range 256 {
		p := netip.MustParsePrefix(fmt.Sprintf("%s.%d.1/24", labNet, (pid+i)%256))
		if !slices.ContainsFunc(taken, func(a net.Addr) bool { return overlaps(a, p) }) {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("every %s.k.0/24 is in use", labNet)
}

// overlaps reports whether the interface address a lies in, or covers, p's subnet.
func overlaps(a net.Addr, p netip.Prefix) bool {
	ipnet, ok := a.(*net.IPNet)
	if !ok {
		return false
	}
	other, err := netip.ParsePrefix(ipnet.String())
	return err == nil && other.Overlaps(p)
}

// addServer makes the namespace of server name, the i-th, with its veth on the bridge and its address,
// and returns the namespace and the address.
func (l *netLab) addServer(name string, i int) (string, netip.Addr, error) {
	ns := l.name + "-" + strconv.Itoa(i)
	veth := l.name + "v" + strconv.Itoa(i)
	addr := l.bridge.Addr()
	for range firstHost - 1 + i {
		addr = addr.Next()
	}
	if !l.bridge.Contains(addr) || len(veth) > 15 {
		return "", netip.Addr{}, fmt.Errorf("server %d does not fit the lab's names and addresses", i)
	}
	l.mu.Lock()
	l.spaces[name] = ns
	l.veths = append(l.veths, veth)
	l.addrs[name] = addr
	l.mu.Unlock()
	err := ipAll([][]string{
		{"netns", "add", ns},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"link", "set", veth, "master", l.name, "up"},
		{"-n", ns, "addr", "add", netip.PrefixFrom(addr, l.bridge.Bits()).String(), "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "rule", "add", "pref", strconv.Itoa(localPref), "lookup", "local"},
		{"-n", ns, "rule", "del", "pref", "0", "lookup", "local"},
	})
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("%w: namespace of %s: %v", errNoNamespaces, name, err)
	}
	return ns, addr, nil
}

// active reports whether some cut is in place.
func (l *netLab) active() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.installed) > 0
}

// hostAddr is the lite member's address on the bridge, for its gossip and data ports.
func (l *netLab) hostAddr() netip.Addr { return l.bridge.Addr() }

// setLite records the lite member's gossip address, which rulesFor cuts.
func (l *netLab) setLite(gossip string) error {
	ap, err := netip.ParseAddrPort(gossip)
	if err != nil {
		return fmt.Errorf("lite member's gossip address: %w", err)
	}
	l.mu.Lock()
	l.lite = ap
	l.mu.Unlock()
	return nil
}

// set installs the cuts of f and removes every other: set(netFault{}) heals everything. A cut it could
// not remove stays recorded, so a later set tries again.
func (l *netLab) set(f netFault) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	add, del := diffRules(l.installed, rulesFor(f, l.addrs, l.lite))
	var errs []error
	for _, r := range del {
		if err := l.apply(r, "del"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(l.installed, r)
	}
	for _, r := range add {
		if err := l.apply(r, "add"); err != nil {
			errs = append(errs, err)
			continue
		}
		l.installed[r] = true
	}
	return errors.Join(errs...)
}

// apply adds or deletes r in its server's namespace.
func (l *netLab) apply(r rule, verb string) error {
	ns, ok := l.spaces[r.server]
	if !ok {
		return fmt.Errorf("%s has no namespace", r.server)
	}
	return l.ip(append([]string{"-n", ns, r.object, verb}, strings.Fields(r.spec)...)...)
}

// rulesFor returns the cuts that make f: a blackhole route in from's namespace for each dropped link, and
// for each server cut from the lite member's gossip, two rules in its namespace: one drops its packets to
// the lite member's gossip port, the other the lite member's packets to its own gossip port (UDP and TCP
// alike), so the lite member can neither probe it nor relay probes to it.
func rulesFor(f netFault, addrs map[string]netip.Addr, lite netip.AddrPort) []rule {
	var out []rule
	for _, d := range f.drops {
		out = append(out, rule{server: d.from, object: "route", spec: "blackhole " + addrs[d.to].String() + "/32"})
	}
	for _, s := range f.liteCut {
		out = append(out,
			rule{server: s, object: "rule", spec: fmt.Sprintf("pref %d to %s dport %d blackhole", cutPref, lite.Addr(), lite.Port())},
			rule{server: s, object: "rule", spec: fmt.Sprintf("pref %d from %s dport %d blackhole", cutPref, lite.Addr(), labGossipPort)})
	}
	return out
}

// diffRules returns the rules of want not in have, and those of have not in want, each sorted.
func diffRules(have map[rule]bool, want []rule) (add, del []rule) {
	wanted := map[rule]bool{}
	for _, r := range want {
		wanted[r] = true
		if !have[r] && !slices.Contains(add, r) {
			add = append(add, r)
		}
	}
	for r := range have {
		if !wanted[r] {
			del = append(del, r)
		}
	}
	slices.SortFunc(add, compareRules)
	slices.SortFunc(del, compareRules)
	return add, del
}

// compareRules orders rules by server, object and spec.
func compareRules(a, b rule) int {
	return strings.Compare(a.server+" "+a.object+" "+a.spec, b.server+" "+b.object+" "+b.spec)
}

// destroy deletes the veths (each pair at once: the kernel would delete them only some time after their
// namespace), the namespaces with the cuts they hold, and the bridge. It is safe to call more than once.
func (l *netLab) destroy() error {
	l.mu.Lock()
	if l.destroyed {
		l.mu.Unlock()
		return nil
	}
	links, spaces := append(l.veths, l.name), l.spaces
	l.destroyed = true
	l.mu.Unlock()
	var errs []error
	for _, link := range links {
		if _, err := net.InterfaceByName(link); err == nil {
			errs = append(errs, ip("link", "del", link))
		}
	}
	for _, ns := range spaces {
		errs = append(errs, ip("netns", "del", ns))
	}
	return errors.Join(errs...)
}

// labName matches the namespaces and links a run makes, the run's pid first: zch123-1, zch123, zch123v1.
var labName = regexp.MustCompile(`^` + labPrefix + `([0-9]+)(-[0-9]+|v[0-9]+)?$`)

// labOwner returns the pid of the run that made the namespace or link name, if a run made it.
func labOwner(name string) (int, bool) {
	m := labName.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	pid, err := strconv.Atoi(m[1])
	return pid, err == nil
}

// removeStale deletes the namespaces and links left by runs whose process is gone (a run killed before it
// could clean up), never those of self or of a live process, and says what it removed.
func removeStale(self int) []string {
	var out []string
	for _, link := range staleNames(self, linkNames()) {
		if _, err := net.InterfaceByName(link); err == nil { // deleting a veth deletes its peer
			out = append(out, removed("link", link, ip("link", "del", link)))
		}
	}
	for _, ns := range staleNames(self, netnsNames()) {
		out = append(out, removed("network namespace", ns, ip("netns", "del", ns)))
	}
	return out
}

// removed says that a stale object was removed, or why not.
func removed(kind, name string, err error) string {
	if err != nil {
		return fmt.Sprintf("stale %s %s of a previous run not removed: %v", kind, name, err)
	}
	return fmt.Sprintf("removed stale %s %s of a previous run", kind, name)
}

// staleNames returns the names of names a run made whose process is neither self nor alive.
func staleNames(self int, names []string) []string {
	var out []string
	for _, name := range names {
		if pid, ok := labOwner(name); ok && pid != self && !alive(pid) {
			out = append(out, name)
		}
	}
	return out
}

// alive reports whether a process with the given pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// netnsNames lists the named network namespaces, as ip netns keeps them.
func netnsNames() []string {
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// linkNames lists the root namespace's links.
func linkNames() []string {
	ifs, _ := net.Interfaces()
	var out []string
	for _, i := range ifs {
		out = append(out, i.Name)
	}
	return out
}

// ipAll runs each command of ip in order, stopping at the first that fails.
func ipAll(cmds [][]string) error {
	for _, args := range cmds {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// ip runs iproute2's ip with args and returns its output as the error when it fails.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
