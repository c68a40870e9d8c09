package resp

import (
	"strings"
	"testing"
	"time"

	"github.com/zaris-go/zaris/internal/resptest"
)

// TestResetLogsOut checks that RESET logs a client out when the default user needs a password, as Redis
// does: commands are refused until it logs in again, the pre-auth gate counts the connection again and
// lets it go at the next login, and once every connection has closed the gate and the pre-auth budget
// hold nothing.
func TestResetLogsOut(t *testing.T) {
	opt := fakeOptions()
	opt.Password = "right"
	s := serveFake(t, newFakeNode(), opt)
	c := dial(t, s)
	gated := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.gate.conns
	}
	steps := []struct{ cmd, want string }{
		{"GET k", "-NOAUTH"}, {"AUTH right", "+OK"}, {"SET k v", "+OK"}, {"RESET", "+RESET"},
		{"GET k", "-NOAUTH"}, {"RESET", "+RESET"}, {"AUTH right", "+OK"}, {"GET k", "$1"},
	}
	wantGated := []int{1, 0, 0, 1, 1, 1, 0, 0}
	for i, st := range steps {
		got := c.do(strings.Fields(st.cmd)...)
		if st.want == "$1" {
			c.line()
		}
		if !strings.HasPrefix(got, st.want) {
			t.Fatalf("%s = %q, want %s", st.cmd, got, st.want)
		}
		if n := gated(); n != wantGated[i] {
			t.Fatalf("after %s the pre-auth gate counts %d connections, want %d", st.cmd, n, wantGated[i])
		}
	}
	c.do("RESET")
	c.conn.Close()
	resptest.WaitFor(t, 5*time.Second, "the closed connection to leave the gate and give its buffers back", func() bool {
		_, pre := s.Buffers()
		return gated() == 0 && pre.Used == 0
	})
}
