package ports

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAvoidsTheEphemeralRange checks that the ports are distinct across calls, below the kernel's
// ephemeral range, and bindable for TCP and UDP.
func TestFreeAvoidsTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 5 {
		ports, err := Free(6)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
			if p < lowest || p >= ephemeralStart() {
				t.Fatalf("port %d outside [%d, %d)", p, lowest, ephemeralStart())
			}
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("port %d: %v", p, err)
			}
			l.Close()
		}
	}
}

// TestPickSkipsTakenPorts offers a range of two ports, one held by a listener: pick returns the other, and
// fails once it is used up.
func TestPickSkipsTakenPorts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	lo := taken - 1
	if !bindable(lo) {
		t.Skipf("port %d, below the held one, is in use", lo)
	}
	got, err := pick(1, lo, taken+1)
	if err != nil || len(got) != 1 || got[0] != lo {
		t.Fatalf("pick from [%d, %d] with %d held: %v, %v; want [%d]", lo, taken, taken, got, err, lo)
	}
	if got, err := pick(1, lo, taken+1); err == nil {
		t.Fatalf("pick from a used-up range returned %v", got)
	}
}

func TestParseRangeStart(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"32768\t60999\n", 32768, true},
		{"1024 65535", 1024, true},
		{"", 0, false},
		{"x 2", 0, false},
	} {
		got, err := parseRangeStart(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseRangeStart(%q) = %d, %v", tc.in, got, err)
		}
	}
}
