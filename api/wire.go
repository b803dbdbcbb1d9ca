package api

import (
	"time"

	"github.com/baton-io/baton/internal/jsonw"
	"github.com/baton-io/baton/internal/keyrule"
)

// This file holds the wire types of the HTTP API (SPEC section 2): the JSON
// bodies the server reads and writes. The server's handlers and this client
// use the same types, so both sides of the wire agree by construction.
//
// Durations on the wire are seconds as JSON numbers (decimals allowed: 0.5);
// instants are RFC 3339 timestamps; fencing tokens are JSON numbers below
// 2^53, so JavaScript reads them exactly.

// HeaderLockToken is the response header that carries a grant's fencing
// token, and the request header that may carry it to DELETE and PATCH.
const HeaderLockToken = "Lock-Token"

// HeaderIdempotencyKey names an acquire: a repeat of a POST with the same key
// gets the outcome of the first (SPEC section 2, "Waiter identity").
const HeaderIdempotencyKey = "Idempotency-Key"

// MaxToken is the bound every fencing token stays below: 2^53, the largest
// integer range a JavaScript number holds exactly.
const MaxToken = uint64(1) << 53

// MaxKeyBytes is the longest key accepted, in bytes of UTF-8.
const MaxKeyBytes = keyrule.MaxBytes

// AcquireRequest is the optional JSON body of POST /locks/{key}. Each field
// may come from the query string instead, but not from both.
type AcquireRequest struct {
	// Lease in seconds (> 0, at least 1e-9: the node's resolution is
	// 1 ns); absent means the server's lease_default.
	Lease *float64 `json:"lease,omitempty"`
	// Wait in seconds (>= 0; other than 0 at least 1e-9: the node's
	// resolution is 1 ns); 0 or absent means wait without limit (up to
	// the server's wait_max when one is set).
	Wait *float64 `json:"wait,omitempty"`
	// Owner labels the holder for people: 1 to MaxOwnerBytes bytes of
	// printable UTF-8. Never an identity check.
	Owner string `json:"owner,omitempty" minLength:"1" maxLength:"128"`
	// Mode is ModeExclusive (absent: the default) or ModeShared.
	Mode string `json:"mode,omitempty" enums:"exclusive,shared"`
	// Limit is the number of holders the key admits at once (1 to
	// MaxLimit); absent: the key's limit, 1 for a free key.
	Limit int `json:"limit,omitempty" minimum:"1" maximum:"10000"`
}

// The modes of an acquire (SPEC section 1, "Shared modes"): shared and
// exclusive holders never hold together. Under the default limit of 1 an
// exclusive holder holds alone and any number of shared holders hold
// together; with a limit above 1, up to the limit hold at once.
const (
	ModeExclusive = "exclusive"
	ModeShared    = "shared"
)

// MaxLimit is the largest holder limit of a key.
const MaxLimit = 10000

// MaxOwnerBytes is the longest owner label, in bytes.
const MaxOwnerBytes = 128

// TokenRequest is the optional JSON body of DELETE and PATCH /locks/{key}.
type TokenRequest struct {
	// Token is the fencing token of the grant being released or renewed.
	Token *uint64 `json:"token,omitempty"`
	// Lease in seconds for PATCH (renew; at least 1e-9, the node's
	// resolution); absent means the grant's lease.
	Lease *float64 `json:"lease,omitempty"`
	// Force (DELETE only, never with Token) is an operator's release of
	// every holder; with admin_tokens set it needs one of them.
	Force bool `json:"force,omitempty" enums:"true"`
}

// Grant is the answer to a granted acquire (200 on POST) and to a renew
// (200 on PATCH, with the new ExpiresAt).
type Grant struct {
	// Key is the lock's key, as the request named it.
	Key string `json:"key"`
	// Token is the fencing token: strictly greater than every token issued
	// before it anywhere in the cluster, and below MaxToken.
	Token uint64 `json:"token"`
	// Lease is the lease in seconds.
	Lease float64 `json:"lease"`
	// ExpiresAt is when the server takes the lock back unless it is renewed.
	ExpiresAt time.Time `json:"expires_at"`
	// Node is the base URL of the node that granted the lock.
	Node string `json:"node"`
}

// Released is the answer to a release (200 on DELETE).
type Released struct {
	// Key is the lock's key, as the request named it.
	Key string `json:"key"`
	// Released is always true: a release that did not happen is an error
	// (ErrNotHolder, ErrNotHeld), not a 200.
	Released bool `json:"released"`
}

// Holder describes a holder of a lock.
type Holder struct {
	// Token is the holder's fencing token.
	Token uint64 `json:"token"`
	// Lease is the holder's lease in seconds.
	Lease float64 `json:"lease"`
	// ExpiresAt is when the server takes the lock back unless it is
	// renewed; for a grant made while its waiter's request was away, which
	// awaits the repeat's claim, the claim deadline when that is earlier.
	ExpiresAt time.Time `json:"expires_at"`
	// GrantedAt is when the lock was granted to this holder.
	GrantedAt time.Time `json:"granted_at"`
	// Owner is the label the acquire carried; null when it carried none
	// ("" in Go).
	Owner string `json:"owner,omitempty" extensions:"x-nullable"`
	// Mode is ModeExclusive or ModeShared.
	Mode string `json:"mode"`
}

// MarshalJSON writes h with every field SPEC section 2 lists for a holder,
// "owner" as null when the acquire carried none (rather than leaving it
// out, so that a reader finds each field of the documented shape). Its
// error is jsonw.Marshal's, which a Holder never causes.
func (h Holder) MarshalJSON() ([]byte, error) {
	type fields Holder // without this method
	var owner *string
	if h.Owner != "" {
		owner = &h.Owner
	}
	return jsonw.Marshal(struct {
		fields
		Owner *string `json:"owner"`
	}{fields(h), owner})
}

// LockStatus is the answer to GET /locks/{key}, and one entry of LockList.
type LockStatus struct {
	// Key is the lock's key.
	Key string `json:"key"`
	// Holder is nil while nobody holds the lock; otherwise the first of
	// Holders.
	Holder *Holder `json:"holder" extensions:"x-nullable"`
	// Holders are every holder, oldest grant first (empty while free).
	Holders []Holder `json:"holders"`
	// Limit is the number of holders the key admits at once.
	Limit int `json:"limit"`
	// Waiters is the number of queued acquires.
	Waiters int `json:"waiters"`
	// OldestWaitSince is when the first waiter in the queue arrived; nil
	// without waiters.
	OldestWaitSince *time.Time `json:"oldest_wait_since,omitempty"`
	// OldestWaiterOwner and OldestWaiterMode are the first waiter's owner
	// and mode; absent without waiters.
	OldestWaiterOwner string `json:"oldest_waiter_owner,omitempty"`
	OldestWaiterMode  string `json:"oldest_waiter_mode,omitempty"`
}

// LockList is the answer to GET /locks?prefix=&limit=.
type LockList struct {
	// Locks holds up to limit entries, sorted by key.
	Locks []LockStatus `json:"locks"`
	// Total counts every key that matched the prefix.
	Total int `json:"total"`
}

// Error is the body of every error answer.
type Error struct {
	// Code is a stable machine-readable code: one of the Code constants.
	Code string `json:"error"`
	// Message is a human sentence.
	Message string `json:"message"`
	// Field names the offending parameter of a 400, the member that
	// differs of a 422, and "limit" for a 409 limit_mismatch.
	Field string `json:"field,omitempty"`
	// Retry is true when the same request may be sent again at once
	// (a poll_timeout: the place of a waiter that sent an
	// Idempotency-Key is kept for its repeat).
	Retry bool `json:"retry,omitempty"`
}

// Error codes carried in Error.Code.
const (
	CodeTimeout         = "timeout"          // 408: wait ran out, no grant
	CodePollTimeout     = "poll_timeout"     // 408: poll ended early, place kept; repeat with the same Idempotency-Key
	CodeNotHolder       = "not_holder"       // 409: held under another token
	CodeNotHeld         = "not_held"         // 404: nobody holds the lock
	CodeGrantEnded      = "grant_ended"      // 410: the grant made under this Idempotency-Key ended (released, expired, or unclaimed by its claim deadline)
	CodeSuperseded      = "superseded"       // 409: a repeat with the same Idempotency-Key took over this request's place
	CodeInvalidArgument = "invalid_argument" // 400: Field names the parameter
	CodeBodyTooLarge    = "body_too_large"   // 413
	CodeTooManyKeys     = "too_many_keys"    // 429: max_keys reached
	CodeTooManyWaiters  = "too_many_waiters" // 429: max_waiters or max_waiters_per_key reached
	CodeUnauthorized    = "unauthorized"     // 401
	CodeNotFound        = "not_found"        // 404: no such route
	CodeMethod          = "method_not_allowed"
	CodeUnavailable     = "unavailable"    // 503: shutting down, or no active node known
	CodeNotActive       = "not_active"     // 307: this node is a standby; Location names the active
	CodeInternal        = "internal"       // 500
	CodeLimitMismatch   = "limit_mismatch" // 409: the key exists with another limit
	CodeForbidden       = "forbidden"      // 403: a forced release without an admin token, or a browser's cross-origin write (field Origin)
	// 422: an Idempotency-Key (native: id=) sent before with another mode,
	// limit, lease or owner; Field names the one that differs.
	CodeKeyReused = "idempotency_key_reused"
)
