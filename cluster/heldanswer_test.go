package cluster

import "testing"

// TestStreamWhoseAnswerNeverComesEnds: a standby's stream request whose
// answer's header never comes (sent just before a cut that drops
// packets: after the heal only the active's backed-off TCP
// retransmission would bring it, up to the cut's length later) ends, as
// a stream whose body goes silent does (watchSilence), and a new one is
// asked for; the standby does not wait on it for as long as TCP keeps
// the connection while its polls answer. Here node 1's stream is held
// back (its polls go on): its first stream ends by watchSilence, and
// the next ones, whose answer is held from the start, must end too.
func TestStreamWhoseAnswerNeverComesEnds(t *testing.T) {
	c := newMemCluster(t, 2)
	c.start(0, 1)
	c.waitActive(0)
	n := c.nodes[1].node
	breaks := func() int {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.streamBreaks
	}
	c.links.holdStream(1, true)
	defer c.links.holdStream(1, false)
	c.waitFor("node 1's held stream to end (watchSilence)", func() bool { return breaks() >= 1 })
	c.waitFor("node 1's next stream, whose answer is held, to end too", func() bool { return breaks() >= 2 })
}
