package zaris

import (
	"errors"
	"testing"

	"github.com/zaris-go/zaris/internal/kv"
)

// TestSettleApplied checks that a write the owner applied is never answered with a status that sends the
// caller to retry it elsewhere: the new owner may hold it already, and a second try would apply it twice.
func TestSettleApplied(t *testing.T) {
	for s := StatusSuccess; s <= StatusUnconfirmed; s++ {
		got := settleApplied(s)
		want := s
		if s.RequiresRefresh() {
			want = StatusUnconfirmed
		}
		if got != want {
			t.Errorf("settleApplied(%s) = %s, want %s", s, got, want)
		}
		// awaitReplicas never answers NotReady, the one redirect outside requiresRefresh.
		if reply := (kv.Reply{Status: got}); redirects(&reply, 1) && got != StatusNotReady {
			t.Errorf("settleApplied(%s) = %s, which sends the caller to retry", s, got)
		}
	}
	if !errors.Is(statusErr(StatusUnconfirmed), ErrUnconfirmed) {
		t.Fatalf("StatusUnconfirmed.err() = %v, want ErrUnconfirmed", statusErr(StatusUnconfirmed))
	}
	if StatusUnconfirmed.String() != "Unconfirmed" {
		t.Fatalf("StatusUnconfirmed.String() = %q", StatusUnconfirmed.String())
	}
}
