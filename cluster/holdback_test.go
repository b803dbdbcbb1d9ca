package cluster

import (
	"context"
	"fmt"
	"testing"

	"github.com/baton-io/baton/engine"
)

// A grant the active's own timers make the moment it runs again after a
// pause must not reach its client if a standby was promoted meanwhile
// (SPEC section 3): the waiter's goroutine may write the answer only after
// the role loop has settled the pause and stepped the node down, when the
// node no longer reads as Resuming (found by a newcomer's trial: a curl
// waiter got 200 from the old active right after SIGCONT, for a grant the
// new active never had). HoldsBack remembers the grants made while
// Resuming; a node not started has no role loop, so the test moves its
// clock of ticks by hand.
func TestHoldsBackAGrantMadeWhileResumingOnceSteppedDown(t *testing.T) {
	c := newMemCluster(t, 1)
	n, eng := c.nodes[0].node, c.nodes[0].eng
	eng.Promote(engine.Failover)
	ctx := context.Background()
	acquire := func(key string) uint64 {
		t.Helper()
		g, err := eng.Acquire(ctx, engine.AcquireRequest{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return g.Token
	}
	paused := func() { n.ticked.Store(n.since() - int64(2*n.cfg.FailoverTimeout)) }
	ran := func() { n.ticked.Store(n.since()) }

	before := acquire("before") // granted by the active before any pause
	paused()
	if !n.HoldsBack(before) {
		t.Fatal("a resuming node delivers grants")
	}
	during := acquire("during") // its timers, the moment it runs again
	ran()
	if n.HoldsBack(during) {
		t.Fatal("a grant made while resuming is held back although the node stayed the active")
	}
	after := acquire("after")
	eng.Demote() // stepped down (or handed off) before the answers were written
	if !n.HoldsBack(during) {
		t.Fatal("a grant made while resuming reaches its client after the node stepped down")
	}
	if n.HoldsBack(after) {
		t.Fatal("a grant made by the active after the pause was settled, before a handoff (replicated, handed over), is held back")
	}
	// A grant made before the pause whose answer was still unwritten when
	// the node stepped down is held back too (tokens rise, so the mark
	// covers it): it may not be in the new active's state either, and the
	// client's repeat (with its Idempotency-Key) finds out there.
	if !n.HoldsBack(before) {
		t.Fatal("a grant made before the pause reaches its client after the node stepped down")
	}
}

// An active that runs again after a pause does not serve until it knows it
// still is the active; over the native protocol it must then answer E
// unavailable (retried by the client, like HTTP's 503), not "M" with its
// own address: the client followed that back to the same node ten times
// within milliseconds and failed its acquire, renewal or release with
// "more than 10 redirects" (found by TestHistoryChaos, long-pause of the
// active with native clients).
func TestActiveNativeIsNotItselfWhileResuming(t *testing.T) {
	c := newMemCluster(t, 1)
	n, eng := c.nodes[0].node, c.nodes[0].eng
	eng.Promote(engine.Failover)
	n.mu.Lock()
	n.cfg.Native = "127.0.0.1:7071"
	n.setActive(n.cfg.Self)
	n.mu.Unlock()
	n.ticked.Store(n.since())
	if got := n.ActiveNative(); got != "127.0.0.1:7071" {
		t.Fatalf("the serving active's ActiveNative is %q, want its own native address", got)
	}
	n.ticked.Store(n.since() - int64(2*n.cfg.FailoverTimeout)) // paused
	if n.Serving() {
		t.Fatal("a paused active reads as Serving")
	}
	if got := n.ActiveNative(); got != "" {
		t.Fatalf("a resuming active's ActiveNative is %q (its own address: the client is sent back to it), want \"\" (E unavailable)", got)
	}
	n.ticked.Store(n.since())
	n.resumed.Store(n.since()) // ran again, peers not yet polled
	if got := n.ActiveNative(); got != "" {
		t.Fatalf("an active that ran again but has not polled its peers yet has ActiveNative %q, want \"\"", got)
	}
}

// Two actives of a partition never issue the same fencing token. An
// active cut off from a standby's polls still polls it, sees it promoted
// and raises its tokens above the last token that standby shows (its
// reservation); the new active counts up from that same reservation, and
// both issued the same token to two holders of one key (found by
// TestHistoryChaosTimeouts: "token granted twice" after a cut of the
// active, whose native clients still reached it). A resource that rejects
// lower tokens accepts an equal one, so fencing held no more. Each node
// issues tokens of its own class (priority modulo the number of nodes).
func TestTwoActivesNeverIssueOneToken(t *testing.T) {
	c := newMemCluster(t, 2)
	a, b := c.nodes[0].eng, c.nodes[1].eng
	a.Promote(engine.Failover)
	b.Promote(engine.Failover)
	base := max(a.LastToken(), b.LastToken()) + 1000
	ctx := context.Background()
	seen := map[uint64]string{}
	for i := range 3 {
		// Each saw the other's last token in a poll: the same base.
		a.ObserveToken(base)
		b.ObserveToken(base)
		for j, e := range []*engine.Engine{a, b} {
			g, err := e.Acquire(ctx, engine.AcquireRequest{Key: fmt.Sprintf("k%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			if g.Token <= base {
				t.Fatalf("node %d issued token %d, not above %d, the last token it saw", j, g.Token, base)
			}
			who := fmt.Sprintf("node %d, key k%d", j, i)
			if o, dup := seen[g.Token]; dup {
				t.Fatalf("token %d issued twice: %s and %s", g.Token, o, who)
			}
			seen[g.Token] = who
		}
		base += 1000
	}
}

// A grant of this node that was still unanswered when it stepped down is
// held back also once the node is the active again: stepping down
// discarded its state for the other active's, which may not hold the
// grant, and a handoff may bring the role back (its priority is higher)
// before the waiter's goroutine writes the answer (with sync_standbys it
// waits for acknowledgements, which the new term's records at the same
// indexes give). Found by a newcomer's trial: SIGSTOP of the active for
// 10 s with sync_standbys 1, SIGCONT; two clients held one lock. The
// grants the node makes once active again reach their clients.
func TestHoldsBackAGrantOfATermSteppedDownFrom(t *testing.T) {
	c := newMemCluster(t, 2)
	n, eng := c.nodes[0].node, c.nodes[0].eng
	eng.Promote(engine.Failover)
	ctx := context.Background()
	acquire := func(key string) uint64 {
		t.Helper()
		g, err := eng.Acquire(ctx, engine.AcquireRequest{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return g.Token
	}
	n.ticked.Store(n.since() - int64(2*n.cfg.FailoverTimeout)) // paused
	during := acquire("during")                                // its timers, the moment it runs again
	before := acquire("before")                                // not yet answered when it steps down
	n.ticked.Store(n.since())
	n.mu.Lock()
	n.ctx, n.stop = context.WithCancel(ctx) // not started: no role loop
	n.stepDownLocked(c.nodes[1].url)        // the other active's state is newer
	n.stopFollowingLocked()
	n.mu.Unlock()
	n.stop()
	n.wg.Wait()
	eng.Promote(engine.Handoff) // the role comes back by a handoff
	for _, tok := range []uint64{during, before} {
		if !n.HoldsBack(tok) {
			t.Fatalf("grant %d of the term the node stepped down from reaches its client once the node is the active again", tok)
		}
	}
	if after := acquire("after"); n.HoldsBack(after) {
		t.Fatalf("grant %d of the new term is held back", after)
	}
}
