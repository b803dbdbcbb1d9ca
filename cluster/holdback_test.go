package cluster

import (
	"context"
	"fmt"
	"slices"
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
// issues tokens of its own class (its position modulo MaxPeers).
func TestTwoActivesNeverIssueOneToken(t *testing.T) {
	twoActivesIssue(t, newMemCluster(t, 2), 3, 1000)
}

// twoActivesIssue promotes nodes 0 and 1 of c both, then rounds times
// raises both to one base (each saw the other's last token in a poll)
// and has each grant a key: every token must be above the base, of the
// node's class (its position modulo MaxPeers), and issued once. The base
// moves by step a round.
func twoActivesIssue(t *testing.T, c *memCluster, rounds int, step uint64) {
	t.Helper()
	a, b := c.nodes[0].eng, c.nodes[1].eng
	a.Promote(engine.Failover)
	b.Promote(engine.Failover)
	base := max(a.LastToken(), b.LastToken()) + 1000
	ctx := context.Background()
	seen := map[uint64]string{}
	for i := range rounds {
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
			if g.Token%MaxPeers != uint64(j) {
				t.Fatalf("node %d issued token %d, of class %d modulo %d, want its position %d", j, g.Token, g.Token%MaxPeers, MaxPeers, j)
			}
			who := fmt.Sprintf("node %d, key k%d", j, i)
			if o, dup := seen[g.Token]; dup {
				t.Fatalf("token %d issued twice: %s and %s", g.Token, o, who)
			}
			seen[g.Token] = who
		}
		base += step
	}
}

// A grant of a term this node stepped down from that its state holds
// again once it is the active again (the other active had it replicated,
// and the role came back by a handoff) reaches its waiter's repeat, and
// its holder's renewals are confirmed: only a grant the state lacks is
// refused, by the engine (ErrReplaced, TestAnswerAcrossADivergenceIsRefused).
// Holding back every token up to the step-down kept such a grant from
// its client for good: in TestHistoryChaosTimeouts (seed 35) a waiter's
// repeats got 503 until it gave up, and its key stayed held 7.7 s, past
// the claim deadline.
func TestGrantOfATermSteppedDownFromThatTheStateHoldsIsDelivered(t *testing.T) {
	c := newMemCluster(t, 2)
	n, eng := c.nodes[0].node, c.nodes[0].eng
	eng.Promote(engine.Failover)
	ctx := context.Background()
	g, err := eng.Acquire(ctx, engine.AcquireRequest{Key: "k", ID: "waiter"})
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.ctx, n.stop = context.WithCancel(ctx) // not started: no role loop
	n.stepDownLocked(c.nodes[1].url)        // the other active's state is newer
	n.stopFollowingLocked()
	n.mu.Unlock()
	n.stop()
	n.wg.Wait()
	eng.Promote(engine.Handoff) // the role comes back by a handoff, k with it
	if n.HoldsBack(g.Token) {
		t.Fatalf("grant %d, held in the state of the node that is the active again, is held back from its client", g.Token)
	}
	again, err := eng.Acquire(ctx, engine.AcquireRequest{Key: "k", ID: "waiter"})
	if err != nil || again.Token != g.Token {
		t.Fatalf("repeat of the waiter: %+v, %v; want grant %d", again, err, g.Token)
	}
	r, err := eng.Renew("k", g.Token, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n.HoldsBack(r.Token) {
		t.Fatalf("renewal of grant %d is held back on the active that holds it", g.Token)
	}
}

// Two actives of a split brain whose peers lists differ by a node added at
// the end (the README's rolling change of the list: node 0 restarted with
// three nodes, node 1 still listing two) never issue the same token. With
// the number of nodes as the classes' stride, node 0 issued tokens 0
// modulo 3 and node 1 tokens 1 modulo 2, which share every token 3 modulo
// 6 (breaker K: duplicate tokens of two actives, one node listing the
// peers reversed or one node more). The stride is MaxPeers whatever the
// list's length; each node's class is its position in its own list.
func TestTwoActivesWithListsOfOtherLengthsNeverIssueOneToken(t *testing.T) {
	third := "http://127.0.0.1:1" // listed, never started
	c := newMemCluster(t, 2, func(cfg *Config) {
		if cfg.Self == cfg.Peers[0] {
			cfg.Peers = append(slices.Clip(cfg.Peers), third)
		}
	})
	twoActivesIssue(t, c, 2*MaxPeers, 1) // every residue of the base in turn
}
