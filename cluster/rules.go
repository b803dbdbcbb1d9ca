package cluster

import "sync/atomic"

// keepsState is the split-brain rule of SPEC section 3, a pure function of
// two active nodes' statuses: it reports whether a keeps its state (and
// the active role) against b, which then steps down, discards what it
// granted on its own and resyncs from a.
//
//   - The newer state wins: the higher StateToken, the newest grant a
//     node's state holds (made there, or replicated from an active it
//     followed).
//   - Equal state tokens (in practice: neither has granted anything since
//     they last shared a state, so the loser discards nothing): the
//     higher priority, the lower Priority, keeps the role.
//
// For two different nodes exactly one of keepsState(a, b) and
// keepsState(b, a) is true. Nothing in it depends on when a heartbeat
// arrived: each node compares its own current state token with the
// other's last answer, and state tokens only grow while a node is active,
// so two actives never both step down, and the one whose state is older
// steps down whichever polled first (a node that stepped down answers
// as a standby at once).
func keepsState(a, b Status) bool {
	if a.StateToken != b.StateToken {
		return a.StateToken > b.StateToken
	}
	return a.Priority < b.Priority
}

// raise lifts v to at least x (it never lowers it).
func raise(v *atomic.Uint64, x uint64) {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}
