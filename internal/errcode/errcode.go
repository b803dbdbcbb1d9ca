// Package errcode is the one place that maps the engine's errors to the
// error codes of the API (SPEC section 2: "timeout", "not_holder", ...) and
// their human sentences. Both wire adapters use it: handlers adds the HTTP
// status of each code, native writes the code on an E line. It imports the
// engine and api's code constants, nothing of HTTP.
package errcode

import (
	"errors"
	"fmt"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// ErrNoActive: this node is a standby and knows no active at the moment
// (a failover or a handoff under way), so it can neither serve a call nor
// send it to the active. Both adapters answer it where they would
// redirect (HTTP 503, native E unavailable).
var ErrNoActive = errors.New("no active node is known")

// ErrRefusedByPeers is ErrNoActive (which it wraps) on a node that every
// other peer refuses (its cluster_secret differs from theirs): it learns
// of no active until the secrets agree, however long its clients retry.
var ErrRefusedByPeers = fmt.Errorf("%w: every other peer refuses this node (cluster_secret differs)", ErrNoActive)

// NoActive is the error of a standby that knows no active:
// ErrRefusedByPeers when every other peer refuses it (refused), else
// ErrNoActive.
func NoActive(refused bool) error {
	if refused {
		return ErrRefusedByPeers
	}
	return ErrNoActive
}

// row is one engine error, its code and the message that goes with it.
type row struct {
	err  error
	code string
	msg  string
}

// table is THE mapping from engine errors (and the two above) to codes. Anything not listed is
// "internal".
var table = []row{
	{engine.ErrTimeout, api.CodeTimeout, "the wait ran out before the lock was granted; nothing is held"},
	{engine.ErrPollTimeout, api.CodePollTimeout, "the poll ended early; the place in the queue is kept: repeat the request with the same Idempotency-Key"},
	// Before ErrNotHeld and ErrGrantEnded, which they wrap.
	{engine.ErrRenewalEndedUnanswered, api.CodeNotHeld, "the renewal has ended before it could be answered: its lease ran out while it waited for its record (the log's write, and with sync_standbys their acknowledgements): the lock is no longer held under this token; use a lease longer than that wait (with sync_standbys, longer than sync_timeout)"},
	{engine.ErrGrantEndedUnanswered, api.CodeGrantEnded, "the grant has ended before it could be answered: its lease ran out while it waited for its record (the log's write, and with sync_standbys their acknowledgements): nothing is held; acquire again, with a lease longer than that wait (with sync_standbys, longer than sync_timeout)"},
	{engine.ErrNotHolder, api.CodeNotHolder, "the lock is held under another token"},
	{engine.ErrNotHeld, api.CodeNotHeld, "nobody holds the lock"},
	{engine.ErrLimitMismatch, api.CodeLimitMismatch, "the key exists with another limit: name the key's limit, or none"},
	{engine.ErrGrantEnded, api.CodeGrantEnded, "the grant made under this Idempotency-Key (or ticket) has ended: released, expired, or not claimed by a repeat within its claim deadline; use a new key to acquire again"},
	{engine.ErrSuperseded, api.CodeSuperseded, "a repeat of this request with the same Idempotency-Key took over its place"},
	{engine.ErrTooManyKeys, api.CodeTooManyKeys, "the node holds its maximum number of keys (max_keys)"},
	{engine.ErrTooManyWaiters, api.CodeTooManyWaiters, "the queue is full (max_waiters_per_key or max_waiters)"},
	// Known, but no retry helps: a 500 that says why, not "internal error".
	{engine.ErrTokenSpace, api.CodeInternal, "fencing tokens are exhausted: the next one would reach 2^53, the largest a JSON number holds exactly, so no lock can be granted; a token this high comes from data_dir's token-hwm file or a peer's log, not from the clock (the wall clock in microseconds reaches it in the year 2255)"},
	{engine.ErrClosed, api.CodeUnavailable, "the node is shutting down; retry"},
	// Before ErrNoActive, which it wraps.
	{ErrRefusedByPeers, api.CodeUnavailable, "this node knows no active: every other node refuses its peer requests (its cluster_secret differs from theirs): ask another node, and give every node the same cluster_secret"},
	{ErrNoActive, api.CodeUnavailable, "no active node is known at the moment; retry"},
	{engine.ErrReplaced, api.CodeUnavailable, "this node stepped down before it could answer, and the state it serves now may not hold the change: retry on the active (a repeat with the same Idempotency-Key gets the grant or the timeout if it stands; a repeated release answered not_held or not_holder has taken effect)"},
	// Before ErrUnavailable, which it wraps: the change may stand.
	// ErrNotWritten and ErrUnavailable are the disk's alone: a change
	// whose node steps down while it waits is ErrReplaced (its row comes
	// first), as cluster.ErrSteppedDown wraps it.
	{engine.ErrTimeoutNotWritten, api.CodeUnavailable, "the wait ran out, and the node cannot write that to its log yet (disk full or a write error): the lock was not granted to this request; retry"},
	{engine.ErrReadNotWritten, api.CodeUnavailable, "the key's state holds changes this node cannot write to its log yet (disk full or a write error), which may yet be taken back: it is shown once they are written; retry"},
	{engine.ErrRefusalNotWritten, api.CodeUnavailable, "nobody, or another token, holds the lock by a change this node cannot write to its log yet (disk full or a write error), which a stop or a handoff would lose: nothing was changed; retry"},
	{engine.ErrNotWritten, api.CodeUnavailable, "the node made the change but cannot write it to its log (disk full or a write error): it is written if the log recovers, and lost if the node stops or hands off first; retry (a repeated release answered not_held or not_holder has taken effect; until a renewal is answered, count on the lease as it was)"},
	{engine.ErrTokenMarkUnwritable, api.CodeUnavailable, "the node cannot write its fencing-token high-water mark (data_dir's token-hwm: disk full or a write error), which every new token must stay below: the lock was not granted; nothing was changed; retry"},
	{engine.ErrUnavailable, api.CodeUnavailable, "the node cannot write its log (disk full or a write error): nothing was changed; retry"},
}

// Of returns the code of err, the field it names (for an *engine.ArgError,
// the parameter as the API spells it: "key", "lease", "wait", "token"; for
// an *engine.KeyReusedError, the one that differs; for an
// *engine.LimitMismatchError, "limit", with the key's limit in the
// message; "" otherwise) and a
// human sentence; the field, when there is one, starts the sentence. An error the table does not know is api.CodeInternal with
// known=false, so that the caller logs it.
func Of(err error) (code, field, msg string, known bool) {
	var ae *engine.ArgError
	if errors.As(err, &ae) {
		return api.CodeInvalidArgument, ae.Field, ae.Error(), true
	}
	var kr *engine.KeyReusedError
	if errors.As(err, &kr) {
		return api.CodeKeyReused, kr.Field, kr.Error(), true
	}
	var lm *engine.LimitMismatchError
	if errors.As(err, &lm) {
		// The key's limit, which the caller needs to join it: without it,
		// "name the key's limit" left it to guess (or to read GET first).
		return api.CodeLimitMismatch, "limit", fmt.Sprintf("limit: the key exists with limit %d: name that limit, or none", lm.Limit), true
	}
	for i := range table {
		if errors.Is(err, table[i].err) {
			return table[i].code, "", table[i].msg, true
		}
	}
	return api.CodeInternal, "", "internal error", false
}
