package cluster

import (
	"context"
	"slices"
	"sync"
	"time"
)

// arrivals orders the calls that wait for an active (ActiveURL): a node
// that knows no active (a failover under way) holds the calls that come
// meanwhile, and once one is known they go on in the order they came,
// each once the one before it is done (its acquire has its place in the
// key's queue, its 307 is written), so that the queue the promoted node
// builds from them is their order of arrival (SPEC section 1: nobody
// jumps the queue). Woken together, they raced to the engine and took
// their places in any order, often the reverse of it (a tester's 7 of 7
// kill -9 runs, 2026-12-06).
type arrivals struct {
	mu sync.Mutex
	q  []*arrival // in order of arrival; q[0] holds the turn
}

// arrival is one call in arrivals; turn is closed once it holds the turn.
type arrival struct{ turn chan struct{} }

// join adds a call at the end and returns its place.
func (as *arrivals) join() *arrival {
	a := &arrival{turn: make(chan struct{})}
	as.mu.Lock()
	as.q = append(as.q, a)
	if len(as.q) == 1 {
		close(a.turn)
	}
	as.mu.Unlock()
	return a
}

// empty reports whether no call waits.
func (as *arrivals) empty() bool {
	as.mu.Lock()
	defer as.mu.Unlock()
	return len(as.q) == 0
}

// leave takes a out (done, or given up), passing the turn on when it held
// it. A second call does nothing.
func (as *arrivals) leave(a *arrival) {
	as.mu.Lock()
	defer as.mu.Unlock()
	i := slices.Index(as.q, a)
	if i < 0 {
		return
	}
	as.q = slices.Delete(as.q, i, i+1)
	if i == 0 && len(as.q) > 0 {
		close(as.q[0].turn)
	}
}

// noTurn is the done of a call that held no turn.
func noTurn() {}

// ActiveURL returns the active's base URL for a redirect, and done, which
// the caller calls once it has acted on the answer: a call served here
// once its acquire has its outcome or its place in the queue (or it
// failed), a redirect once written. While no active is known (a failover
// or handoff under way), or calls that waited for one are still going on
// (arrivals), it waits, up to FailoverTimeout + 2 Heartbeats or until ctx
// ends, first for an active, then for its turn among those calls in their
// order of arrival; it returns "" if none became known (its done then
// does nothing). A call whose turn does not come within that time goes on
// without it. Calling done twice does nothing more.
func (n *Node) ActiveURL(ctx context.Context) (string, func()) {
	if a, _ := n.knownActive(); a != "" && n.arrivals.empty() {
		return a, noTurn
	}
	me := n.arrivals.join()
	done := func() { n.arrivals.leave(me) }
	deadline := time.NewTimer(n.cfg.FailoverTimeout + 2*n.cfg.Heartbeat)
	defer deadline.Stop()
	for {
		a, ch := n.knownActive()
		if a != "" {
			select {
			case <-me.turn:
			case <-deadline.C:
			case <-ctx.Done():
				done()
				return "", noTurn
			}
			return a, done
		}
		select {
		case <-ch:
		case <-deadline.C:
			done()
			return "", noTurn
		case <-ctx.Done():
			done()
			return "", noTurn
		}
	}
}

// knownActive is the active's base URL, or "" while none is known (this
// node counts once its engine serves), and the channel closed when that
// changes (n.changed), read together.
func (n *Node) knownActive() (string, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a := n.active
	if a == n.cfg.Self && !n.eng.Active() {
		a = ""
	}
	return a, n.changed
}

// AwaitActive waits as ActiveURL does while no active is known (a
// failover or handoff under way): until one is and its turn has come, for
// at most FailoverTimeout + 2 heartbeats, or until ctx ends. It is the
// native protocol's wait (native.ActiveAwaiter): a connection's acquires
// that find no active wait here, as an HTTP call's redirect does in
// ActiveURL, then ask ActiveNative again; done (ActiveURL's) is called
// once they have run.
func (n *Node) AwaitActive(ctx context.Context) (done func()) {
	_, done = n.ActiveURL(ctx)
	return done
}
