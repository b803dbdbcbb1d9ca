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
)

var eventNames = [...]string{
	EventGrant:   "grant",
	EventRelease: "release",
	EventExpire:  "expire",
	EventRenew:   "renew",
	EventEnqueue: "enqueue",
	EventLeave:   "leave",
	EventTimeout: "timeout",
}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one state change of one key.
type Event struct {
	Kind EventKind
	Key  string
	// Token is the holder's token (grant, release, expire, renew).
	Token uint64
	// Lease of the grant or renewal.
	Lease time.Duration
	// At is when the change happened, in Unix nanoseconds.
	At int64
	// ExpiresAt is the new lease deadline (grant, renew), Unix nanoseconds.
	ExpiresAt int64
	// Waited is how long the waiter queued (grant, timeout).
	Waited time.Duration
	// WaiterID is the waiter's ID, if it gave one (grant, enqueue).
	WaiterID string
	// Waiters is the queue length after the change.
	Waiters int
}
