package zaris

import (
	"errors"
	"testing"
)

// TestSettleApplied checks that a write the owner applied is never answered with a status that sends the
// caller to retry it elsewhere: the new owner may hold it already, and a second try would apply it twice.
func TestSettleApplied(t *testing.T) {
	for s := StatusSuccess; s <= StatusUnconfirmed; s++ {
		got := settleApplied(s)
		want := s
		if s.requiresRefresh() {
			want = StatusUnconfirmed
		}
		if got != want {
			t.Errorf("settleApplied(%s) = %s, want %s", s, got, want)
		}
		// awaitReplicas never answers NotReady, the one redirect outside requiresRefresh.
		if reply := (kvReply{Status: got}); reply.redirects(1) && got != StatusNotReady {
			t.Errorf("settleApplied(%s) = %s, which sends the caller to retry", s, got)
		}
	}
	if !errors.Is(StatusUnconfirmed.err(), ErrUnconfirmed) {
		t.Fatalf("StatusUnconfirmed.err() = %v, want ErrUnconfirmed", StatusUnconfirmed.err())
	}
	if StatusUnconfirmed.String() != "Unconfirmed" {
		t.Fatalf("StatusUnconfirmed.String() = %q", StatusUnconfirmed.String())
	}
}
