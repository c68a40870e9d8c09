package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// newTestLab makes a network lab, or skips the test where namespaces cannot be made (not root, no
// iproute2, no permission); the test's cleanup removes the lab and checks that nothing of it is left.
func newTestLab(t *testing.T) *netLab {
	t.Helper()
	lab, err := newNetLab()
	if errors.Is(err, errNoNamespaces) {
		t.Skipf("no network namespaces here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.destroy(); err != nil {
			t.Errorf("destroy: %v", err)
		}
		left := slices.DeleteFunc(append(netnsNames(), linkNames()...), func(name string) bool {
			return !strings.HasPrefix(name, lab.name)
		})
		if len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	return lab
}

// skipWithoutNamespaces skips the test where a network lab cannot be made, after removing the one it made.
func skipWithoutNamespaces(t *testing.T) {
	t.Helper()
	lab, err := newNetLab()
	if errors.Is(err, errNoNamespaces) {
		t.Skipf("no network namespaces here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.destroy(); err != nil {
		t.Fatal(err)
	}
}

// TestNetLabCutsPackets checks the cuts on real namespaces with UDP packets: a one-way cut drops one
// direction only, a split both, the lite member's gossip cut drops its gossip port both ways and nothing
// else, and a heal restores every path.
func TestNetLabCutsPackets(t *testing.T) {
	lab := newTestLab(t)
	var gossip, data [3]*net.UDPConn
	for i := range 3 {
		name := fmt.Sprintf("zaris-%d", i+1)
		ns, addr, err := lab.addServer(name, i+1)
		if errors.Is(err, errNoNamespaces) {
			t.Skipf("no network namespaces here: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		gossip[i] = listenUDPIn(t, ns, netip.AddrPortFrom(addr, labGossipPort))
		data[i] = listenUDPIn(t, ns, netip.AddrPortFrom(addr, labDataPort))
	}
	lite := listenUDP(t, netip.AddrPortFrom(lab.hostAddr(), 0))
	if err := lab.setLite(lite.LocalAddr().String()); err != nil {
		t.Fatal(err)
	}
	s1, s2, s3 := gossip[0], gossip[1], gossip[2]
	expect := func(step string, from, to *net.UDPConn, want bool) {
		t.Helper()
		if got := delivered(from, to, want); got != want {
			t.Errorf("%s: %s -> %s delivered %v, want %v", step, from.LocalAddr(), to.LocalAddr(), got, want)
		}
	}
	expect("no cut", s1, s2, true)
	expect("no cut", s1, lite, true)
	expect("no cut", lite, s1, true)

	setFault(t, lab, netFault{drops: []link{{"zaris-1", "zaris-2"}}})
	expect("one-way cut", s1, s2, false)
	expect("one-way cut", s2, s1, true)
	expect("one-way cut", s1, s3, true)

	setFault(t, lab, split([]string{"zaris-1", "zaris-2", "zaris-3"}, 1))
	expect("split", s1, s2, false)
	expect("split", s2, s1, false)
	expect("split", s2, s3, true)
	expect("split: gossip to the lite member", s1, lite, false)
	expect("split: the lite member's gossip", lite, s1, false)
	expect("split: the lite member's data", lite, data[0], true)
	expect("split: the other side's gossip", s2, lite, true)

	setFault(t, lab, netFault{})
	expect("healed", s1, s2, true)
	expect("healed", s2, s1, true)
	expect("healed", s1, lite, true)
	expect("healed", lite, s1, true)
}

// setFault installs f in lab.
func setFault(t *testing.T, lab *netLab, f netFault) {
	t.Helper()
	if err := lab.set(f); err != nil {
		t.Fatal(err)
	}
}

// delivered sends a packet from -> to and reports whether it arrived: within 2 s when it should, within
// 300 ms when it should not (a packet on a veth arrives in microseconds).
func delivered(from, to *net.UDPConn, want bool) bool {
	payload := fmt.Sprintf("%s->%s@%d", from.LocalAddr(), to.LocalAddr(), time.Now().UnixNano())
	if _, err := from.WriteTo([]byte(payload), to.LocalAddr()); err != nil {
		return false // a blackhole route refuses the send outright
	}
	wait := 300 * time.Millisecond
	if want {
		wait = 2 * time.Second
	}
	to.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 256)
	for {
		n, err := to.Read(buf)
		if err != nil {
			return false
		}
		if string(buf[:n]) == payload {
			return true
		}
	}
}

// listenUDP opens a UDP socket at addr, closed with the test.
func listenUDP(t *testing.T, addr netip.AddrPort) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// listenUDPIn opens a UDP socket at addr in network namespace ns: the socket stays in ns once the thread
// that made it has switched back.
func listenUDPIn(t *testing.T, ns string, addr netip.AddrPort) *net.UDPConn {
	t.Helper()
	runtime.LockOSThread()
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer home.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer target.Close()
	if err := setns(target); err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("enter %s: %v", ns, err)
	}
	c, listenErr := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err := setns(home); err != nil {
		t.Fatalf("leave %s: %v", ns, err) // the thread stays locked and ends with the test's goroutine
	}
	runtime.UnlockOSThread()
	if listenErr != nil {
		t.Fatal(listenErr)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// setns moves the calling thread into the network namespace f refers to.
func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }

// TestRemoveStale checks that a run removes the namespaces and bridge a gone run left, and nothing of a
// live one.
func TestRemoveStale(t *testing.T) {
	lab := newTestLab(t) // live: this process's
	gone := "zch" + fmt.Sprint(exitedPid(t))
	for _, args := range [][]string{{"netns", "add", gone + "-1"}, {"link", "add", gone, "type", "bridge"}} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	removeStale(os.Getpid())
	names := append(netnsNames(), linkNames()...)
	if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, gone) }) {
		t.Errorf("a gone run's namespace or bridge is left: %v", names)
	}
	if !slices.Contains(names, lab.name) {
		t.Errorf("this run's bridge %s was removed", lab.name)
	}
}

// exitedPid returns the pid of a process that has exited.
func exitedPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestPartitionScenario runs -nemesis partition for 20 s against real server processes in namespaces,
// with ZARIS_CHAOS=1 and where namespaces can be made.
func TestPartitionScenario(t *testing.T) {
	if os.Getenv("ZARIS_CHAOS") == "" {
		t.Skip("set ZARIS_CHAOS=1 to run a 20 s partition scenario against real processes")
	}
	skipWithoutNamespaces(t)
	o, err := parseOptions([]string{"-nemesis", nemesisPartition, "-duration", "20s", "-seed", "2502"})
	if err != nil {
		t.Fatal(err)
	}
	if code := run(o); code != 0 {
		t.Fatalf("zaris-chaos exited %d; its report is above", code)
	}
}
