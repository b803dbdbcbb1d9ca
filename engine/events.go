package engine

import "time"

// EventKind names a state change.
type EventKind uint8

// The state changes an Engine reports through Config.OnEvent.
const (
	EventGrant   EventKind = iota + 1 // a lock was granted (Token is new)
	EventRelease                      // the holder released (or its grant was undeliverable)
	EventExpire                       // the lease ran out; the lock was taken back
	EventRenew                        // the holder renewed (ExpiresAt is new)
	EventEnqueue                      // a waiter joined the queue
	EventLeave                        // a waiter went away before a grant
	EventTimeout                      // a waiter's wait ran out
	EventClaim                        // a grant awaiting its claim was claimed by its waiter's repeat
)

var eventNames = [...]string{
	EventGrant:   "grant",
	EventRelease: "release",
	EventExpire:  "expire",
	EventRenew:   "renew",
	EventEnqueue: "enqueue",
	EventLeave:   "leave",
	EventTimeout: "timeout",
	EventClaim:   "claim",
}

// String returns the kind's name as event streams carry it ("grant",
// "release", ...), or "unknown" for a value that is no EventKind.
func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one state change of one key.
type Event struct {
	Kind EventKind // what changed
	Key  string    // the key that changed
	// Token is the holder's token (grant, release, expire, renew).
	Token uint64
	// Lease of the grant or renewal.
	Lease time.Duration
	// At is when the change happened, in Unix nanoseconds (wall clock;
	// every time in an Event is, since Events leave the process).
	At int64
	// ExpiresAt is when the holder's slot is taken back unless renewed
	// (grant, renew, claim), Unix nanoseconds: the lease's end, or, for a
	// grant made while its waiter was away, its claim deadline (ClaimBy)
	// when that comes first; a claim's is the lease's end it now runs to.
	ExpiresAt int64
	// Waited is how long the waiter queued (grant, timeout).
	Waited time.Duration
	// ClaimBy is the claim deadline of a grant to a waiter whose request
	// had gone away (grant), in Unix nanoseconds: unless the waiter's
	// repeat claims the grant before then, the lock is released. 0 = the
	// grant was delivered (no claim pending).
	ClaimBy int64
	// WaiterID is the waiter's ID, if it gave one (grant, enqueue).
	WaiterID string
	// Waiters is the queue length after the change.
	Waiters int
	// WaitUntil is an enqueued waiter's wait deadline, Unix nanoseconds;
	// 0 = no limit.
	WaitUntil int64
	// Owner is the holder's or waiter's label (grant, renew, release,
	// expire, enqueue, leave, timeout); "" = none.
	Owner string `json:",omitempty"`
	// Mode of the grant or the waiter (grant, renew, release, expire,
	// enqueue, leave, timeout).
	Mode Mode `json:",omitempty"`
	// Limit is the key's holder limit (1 for a plain lock), on every
	// event of a key's holders or waiters but claim.
	Limit int `json:",omitempty"`
	// Forced marks a release an operator forced (release).
	Forced bool `json:",omitempty"`
}
