package zaris

import (
	"testing"
	"time"
)

// TestCutoverCountedWhenItsProposalCommitsLate checks that a cut-over whose settling proposal failed
// counts once the map shows it committed, and not when the map shows the partition went elsewhere.
func TestCutoverCountedWhenItsProposalCommitsLate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		later PartitionState
		want  uint64
	}{
		{"settled to its target", PartitionState{Owner: "b", Epoch: 8}, 1},
		{"not settled yet", PartitionState{Owner: "a", Epoch: 7}, 0},
		{"moved elsewhere", PartitionState{Owner: "c", Epoch: 8}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCutovers(4)
			c.proposalFailed(2, unsettledCutover{epoch: 7, to: "b", sealed: time.Millisecond})
			c.observe(1, &PartitionState{Owner: "b", Epoch: 9}) // another partition
			c.observe(2, &tc.later)
			c.observe(2, &tc.later) // seen again: counted once
			if got := c.done.Load(); got != tc.want {
				t.Fatalf("%d cut-overs counted, want %d", got, tc.want)
			}
		})
	}
}
