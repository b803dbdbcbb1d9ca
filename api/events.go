package api

import "time"

// Kinds of Event. The first group comes from the lock engine, the second
// from the cluster.
const (
	EventGrant   = "grant"   // a lock was granted, with a new Token
	EventRelease = "release" // the holder released (or its grant could not be delivered)
	EventExpire  = "expire"  // the lease ran out and the server took the lock back
	EventRenew   = "renew"   // the holder renewed; ExpiresAt is new
	EventEnqueue = "enqueue" // an acquire joined the queue
	EventLeave   = "leave"   // a waiter went away before a grant
	EventTimeout = "timeout" // a waiter's wait ran out (408, no grant)
	EventClaim   = "claim"   // a grant made while its waiter was away (a poll_timeout, a failover, a handoff) was claimed by its repeat

	EventPromote  = "promote"   // Node became the active
	EventHandoff  = "handoff"   // the active handed its state over to Node
	EventStepDown = "step_down" // Node stepped down to standby
	EventReset    = "reset"     // Node's state was replaced by the active's snapshot: the events before it are of a state it no longer has (after a step_down: one the cluster may never have had), the snapshot's holders and waiters follow it as grant and enqueue events; not on a standby's first sync
)

// Event is one entry of a node's recent-events feed, GET /events: a state
// change of one lock, or a change of the cluster's roles.
type Event struct {
	// Seq numbers the node's events without gaps, from the process's
	// start time in microseconds: every Seq of a run is above every Seq
	// of the node's earlier runs. A stream resumes after the Seq in
	// Last-Event-ID; a Seq this run did not number (an earlier run's,
	// another node's: each node numbers its own feed) resumes at this
	// run's first event still kept.
	Seq uint64 `json:"seq"`
	// Kind is one of the Event* constants.
	Kind string `json:"kind"`
	// At is when the change happened.
	At time.Time `json:"at"`
	// Key is the lock's key (lock events).
	Key string `json:"key,omitempty"`
	// Token is the holder's fencing token (grant, release, expire, renew).
	Token uint64 `json:"token,omitempty"`
	// Lease is the grant's or renewal's lease in seconds.
	Lease float64 `json:"lease,omitempty"`
	// ExpiresAt is when the holder's slot is taken back unless renewed
	// (grant, renew, claim): the lease's end, or, for a grant made while
	// its waiter was away, the claim deadline when that comes first (the
	// expires_at GET /locks/{key} gives it); a claim's is the lease's end
	// the grant now runs to.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Waited is how long the waiter queued, in seconds (grant, timeout).
	Waited float64 `json:"waited,omitempty"`
	// Waiters is the key's queue length after the change.
	Waiters int `json:"waiters"`
	// Owner is the holder's or waiter's label (grant, renew, release,
	// expire, enqueue, leave, timeout); absent without one.
	Owner string `json:"owner,omitempty"`
	// Mode is ModeExclusive or ModeShared (grant, renew, release, expire,
	// enqueue, leave, timeout).
	Mode string `json:"mode,omitempty"`
	// Limit is the key's holder limit (1 for a plain lock), on every
	// event of a key's holders or waiters but claim.
	Limit int `json:"limit,omitempty"`
	// Forced marks an operator's release (release).
	Forced bool `json:"forced,omitempty"`
	// Node is the node concerned (cluster events).
	Node string `json:"node,omitempty"`
	// Message is a human sentence (cluster events).
	Message string `json:"message,omitempty"`
}

// EventList is the answer to GET /events?since=N when the client does not
// ask for a stream (Accept: text/event-stream).
type EventList struct {
	// Events holds the events after since, oldest first.
	Events []Event `json:"events"`
	// Missed counts the events after since that are no longer kept, of
	// every key: with ?key= an upper bound for that key's.
	Missed uint64 `json:"missed"`
	// Last is the Seq of the newest event (with none yet, the one before
	// the first): the next since.
	Last uint64 `json:"last"`
}
