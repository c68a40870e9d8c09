package resp

import (
	"fmt"
	"strings"
	"testing"
)

// TestTrackingTableBounds checks that the keys remembered for client-side caching stay within their
// bounds in number and in bytes, the oldest forgotten first and no more of them than the bounds ask, and
// that the bytes come back as keys are invalidated and connections stop tracking.
func TestTrackingTableBounds(t *testing.T) {
	big := strings.Repeat("k", 1000)
	tr := NewTracking(100, 10*(trackedKeyCost(big+"000")+trackedReaderCost))
	a, b := &respConn{}, &respConn{}
	tr.start(a)
	tr.start(b)
	for i := range 50 {
		tr.remember(a, fmt.Sprintf("%s%03d", big, i))
	}
	if len(tr.keys) != 10 || tr.bytes > tr.maxBytes {
		t.Fatalf("%d keys, %d bytes after 50 large keys; want the newest 10 within %d bytes", len(tr.keys), tr.bytes, tr.maxBytes)
	}
	if _, ok := tr.keys[fmt.Sprintf("%s%03d", big, 49)]; !ok {
		t.Fatal("the newest key was forgotten")
	}
	tr2 := NewTracking(100, 1<<30)
	tr2.start(a)
	for i := range 150 {
		tr2.remember(a, fmt.Sprint("small", i))
	}
	if len(tr2.keys) != 100 {
		t.Fatalf("%d keys after 150 with a bound of 100; want exactly 100", len(tr2.keys))
	}
	tr2.start(b)
	tr2.remember(b, "small149")
	tr2.Invalidate("small149")
	tr2.stop(a)
	tr2.stop(b)
	if len(tr2.keys) != 0 || tr2.bytes != 0 {
		t.Fatalf("%d keys, %d bytes after every connection stopped", len(tr2.keys), tr2.bytes)
	}
}
