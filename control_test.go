package zaris

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// TestRefusedProposal checks how a leader's refusal reads to the proposer: a leader that stepped down or
// is closing means no leader, to retry with the next one, and never that the proposer itself closed (a
// Leave that took it so ended its drain and left its node running).
func TestRefusedProposal(t *testing.T) {
	for _, tc := range []struct {
		message  string
		noLeader bool
	}{
		{ErrClosed.Error(), true},
		{raft.ErrNotLeader.Error(), true},
		{raft.ErrLeadershipLost.Error(), true},
		{raft.ErrRaftShutdown.Error(), true},
		{"command 9 may not be proposed", false},
		{"", false},
	} {
		err := refusedProposal("leader-1", tc.message)
		if got := errors.Is(err, errNoLeader); got != tc.noLeader {
			t.Errorf("%q: errNoLeader %v, want %v (%v)", tc.message, got, tc.noLeader, err)
		}
		if errors.Is(err, ErrClosed) {
			t.Errorf("%q: reads as this node closed: %v", tc.message, err)
		}
	}
}
