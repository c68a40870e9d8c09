// Package ports picks loopback ports for servers that tests and harnesses restart on the same address.
//
// A port from the kernel (port 0) comes from its ephemeral range, the same range outgoing connections take
// their local ports from: while a server is down, any connection may take its port, and the server cannot
// start again there. Ports picked here lie below that range, where only servers that ask for a port by
// number bind.
package ports

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the lowest port Free picks: below it lie the well-known ports and common services.
const lowest = 10000

// defaultEphemeralStart is where Linux's ephemeral range starts by default, used when the kernel's
// setting cannot be read.
const defaultEphemeralStart = 32768

var (
	mu     sync.Mutex
	picked = map[int]bool{} // ports handed out by this process, never handed out again
)

// Free returns n distinct loopback ports, each free for both TCP and UDP when picked (gossip needs both),
// below the kernel's ephemeral range and never returned before by this process.
func Free(n int) ([]int, error) {
	return pick(n, lowest, ephemeralStart())
}

// pick returns n ports from [lo, hi) as Free does.
func pick(n, lo, hi int) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n+1000 {
			return nil, fmt.Errorf("ports: %d free loopback ports not found in [%d, %d)", n, lo, hi)
		}
		port := lo + rand.IntN(hi-lo)
		if picked[port] || !bindable(port) {
			continue
		}
		picked[port] = true
		out = append(out, port)
	}
	return out, nil
}

// bindable reports whether TCP and UDP can both bind port on the loopback address now.
func bindable(port int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	return u.Close() == nil
}

// ephemeralStart is the first port of the kernel's ephemeral range.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeralStart
	}
	start, err := parseRangeStart(string(b))
	if err != nil || start <= lowest+1000 {
		return defaultEphemeralStart
	}
	return start
}

// parseRangeStart reads the first of the two numbers of ip_local_port_range.
func parseRangeStart(s string) (int, error) {
	fields := strings.Fields(s)
	if len(fields) != 2 {
		return 0, errors.New("ports: want two numbers")
	}
	return strconv.Atoi(fields[0])
}
