package cluster

import (
	"testing"

	"github.com/baton-io/baton/api"
)

// The state token an active freezes when it sees another active is taken
// anew when an active it had not seen appears. A successor promoted by a
// handoff still saw its predecessor as active in its last poll of it, and
// froze its state token then (0: before any grant of its own); when a
// paused node came back as active a moment later, the successor went on
// reporting that 0 although it had granted since, lost the split-brain
// comparison to an older state and stepped down, discarding a grant it had
// answered 200 (CI, TestGrantMadeBeforeAStepDownIsNotAnsweredAfterIt:
// "the other's state token is higher ... state_token=0").
func TestSplitTokenTakenAnewForAnotherActive(t *testing.T) {
	n := &Node{role: api.RoleActive}
	active := func(url string) peerView {
		return peerView{Status: Status{URL: url, Role: api.RoleActive}, live: true, recent: true}
	}
	standby := func(url string) peerView {
		return peerView{Status: Status{URL: url, Role: api.RoleStandby}, live: true, recent: true}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// Just promoted by node 2's handoff: node 2's last answer said active.
	n.markSplitLocked([]peerView{standby("n0"), active("n2")}, 0)
	if !n.split || n.splitToken != 0 {
		t.Fatalf("beside n2: split %v token %d, want frozen at 0", n.split, n.splitToken)
	}
	// It grants (token 50); n2's poll still says active: the freeze holds.
	n.markSplitLocked([]peerView{standby("n0"), active("n2")}, 50)
	if n.splitToken != 0 {
		t.Fatalf("still beside n2 only: token %d, want 0 kept", n.splitToken)
	}
	// n0, paused until now, answers as an active: another split brain,
	// compared with the state this node holds now.
	n.markSplitLocked([]peerView{active("n0"), active("n2")}, 50)
	if !n.split || n.splitToken != 50 {
		t.Fatalf("n0 appears as active: split %v token %d, want 50", n.split, n.splitToken)
	}
	// n2 answers as a standby now; n0 still active: the freeze for n0 holds.
	n.markSplitLocked([]peerView{active("n0"), standby("n2")}, 70)
	if !n.split || n.splitToken != 50 {
		t.Fatalf("beside n0 only: split %v token %d, want 50 kept", n.split, n.splitToken)
	}
	// No other active: forgotten.
	n.markSplitLocked([]peerView{standby("n0"), standby("n2")}, 70)
	if n.split || n.splitToken != 0 || len(n.splitWith) != 0 {
		t.Fatalf("no other active: split %v token %d with %v, want none", n.split, n.splitToken, n.splitWith)
	}
}
