package cluster

import (
	"testing"
	"time"
)

// After a pause, a node serves again only once every peer was polled
// since: by a poll sent after the pause. One sent before it, whose
// timeout ran across the pause and ended just after it, failed, and
// counted: the node served as the active without knowing that a standby
// had been promoted meanwhile, and confirmed a grant that its step-down a
// moment later lost (TestNativeGrantLostInAStepDownIsNotAnswered failed
// so, about 1 run in 10).
func TestResumedNodeCountsOnlyPollsSentAfterThePause(t *testing.T) {
	resumed := time.Now()
	before, after := resumed.Add(-900*time.Millisecond), resumed.Add(10*time.Millisecond)
	n := &Node{peers: []*peer{{url: "a", polled: after}, {url: "b", polled: before}}}
	if !n.staleSinceLocked(resumed) {
		t.Error("not stale with peer b's last poll sent before the pause")
	}
	n.peers[1].polled = after
	if n.staleSinceLocked(resumed) {
		t.Error("stale once every peer was polled after the pause")
	}
}
