package resp

import (
	"strconv"
	"strings"
	"testing"

	"github.com/zaris-go/zaris/internal/kv"
)

// TestShardSubscriptionsEndWithTheSlot checks that a client subscribed to shard channels of a slot the
// node stops serving is told, with one sunsubscribe each as Redis sends, and is no longer counted, while
// its other subscriptions stay.
func TestShardSubscriptionsEndWithTheSlot(t *testing.T) {
	s := serveFake(t, newFakeNode(), fakeOptions())
	c := dial(t, s)
	tag := "t"
	for kv.KeySlot(tag) >= fakeHalf { // two channels of one slot this node serves
		tag += "x"
	}
	owned := []string{"{" + tag + "}a", "{" + tag + "}b"}
	if got := c.do("SSUBSCRIBE", owned[0], owned[1]); got != "*3" {
		t.Fatalf("SSUBSCRIBE: %s", got)
	}
	for range 2*6 - 1 {
		c.line()
	}
	if got := c.do("SUBSCRIBE", "plain"); got != "*3" {
		t.Fatalf("SUBSCRIBE: %s", got)
	}
	for range 5 {
		c.line()
	}
	s.DropShards(func(ch string) bool { return kv.KeySlot(ch) == kv.KeySlot(owned[0]) })
	var frames []string
	for range 2 * 6 {
		frames = append(frames, c.line())
	}
	want := []string{"*3", "$12", "sunsubscribe", "$" + strconv.Itoa(len(owned[0])), owned[0], ":1",
		"*3", "$12", "sunsubscribe", "$" + strconv.Itoa(len(owned[1])), owned[1], ":0"}
	if strings.Join(frames, " ") != strings.Join(want, " ") {
		t.Fatalf("pushed %q, want %q", frames, want)
	}
	if got := s.hub.Count(2, owned[0]) + s.hub.Count(2, owned[1]); got != 0 {
		t.Fatalf("%d shard subscriptions left", got)
	}
	if got := s.hub.Count(0, "plain"); got != 1 {
		t.Fatalf("the channel subscription was dropped too: %d left", got)
	}
}
