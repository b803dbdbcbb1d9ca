package engine

import (
	"errors"
	"fmt"
)

// Errors returned by the Engine. Callers compare with errors.Is; the HTTP
// layer maps each to one status code in one table.
var (
	// ErrTimeout: the acquire's wait ran out before a grant. The caller was
	// not granted and never will be by this request.
	ErrTimeout = errors.New("engine: wait ran out")
	// ErrPollTimeout: the poll ended early (Config.PollTimeout); the waiter
	// keeps its place for Config.PollGrace and a repeat with the same
	// waiter ID resumes it.
	ErrPollTimeout = errors.New("engine: poll ended early, place kept")
	// ErrNotHolder: the lock is held under another token.
	ErrNotHolder = errors.New("engine: lock held under another token")
	// ErrNotHeld: nobody holds the lock.
	ErrNotHeld = errors.New("engine: lock not held")
	// ErrGrantEnded: the grant an earlier request with this waiter ID got
	// has since been released or taken back.
	ErrGrantEnded = errors.New("engine: the grant of this waiter ID has ended")
	// ErrSuperseded: a repeat with the same waiter ID took over this
	// request's place in the queue.
	ErrSuperseded = errors.New("engine: a repeat with the same waiter ID took over")
	// ErrTooManyKeys: Config.MaxKeys keys exist already.
	ErrTooManyKeys = errors.New("engine: key limit reached")
	// ErrTooManyWaiters: Config.MaxWaiters or Config.MaxWaitersPerKey reached.
	ErrTooManyWaiters = errors.New("engine: waiter limit reached")
	// ErrClosed: the engine is shutting down (or no longer serves: a
	// standby); the call may be retried elsewhere.
	ErrClosed = errors.New("engine: closed")
	// ErrTokenSpace: the next fencing token would reach 2^53.
	ErrTokenSpace = errors.New("engine: fencing tokens exhausted (2^53)")
	// ErrUnavailable: the log (Config.Log) could not take or write the
	// change (disk full, a write error). A change the log refused was not
	// made; a grant it took but could not write is not answered (and is
	// released again if the log takes the release). Retry later. A
	// release or renewal the log took but could not write is
	// ErrNotWritten, which wraps this one.
	ErrUnavailable = errors.New("engine: the log cannot write changes")
)

// ErrGrantEndedUnanswered, ErrRenewalEndedUnanswered: a grant was made,
// or a renewal, but its lease ran out before it could be answered: it
// waited for its record longer than the lease (with sync_standbys, up to
// sync_timeout for the standbys' acknowledgements; a slow disk), and the
// lock may be another's already.
// It is not answered as held. An acquire's wraps ErrGrantEnded (so a
// repeat's answer and this one agree, and clients acquire afresh), a
// renewal's ErrNotHeld (the lock is no longer held under the token).
var (
	ErrGrantEndedUnanswered   = fmt.Errorf("%w: its lease ran out before the grant could be answered", ErrGrantEnded)
	ErrRenewalEndedUnanswered = fmt.Errorf("%w: its lease ran out before the renewal could be answered", ErrNotHeld)
)

// ErrReplaced: a change was made (a grant, a renewal, a release or an
// operator's release, a timeout), but the node stepped down to an active
// with newer state (Engine.Diverged), or its engine's state was replaced
// (Reset), before it was answered, and the state the cluster serves may
// not have it (see Engine.Generation). It is not answered as made: a
// grant or a timeout is answered as made only by an active engine whose
// state holds it too (AcquireResult.Settle), a renewal or a release never
// (Renew, Release, ForceRelease, Engine.Replaced). The caller retries on
// the active, where a repeat of the acquire with the same waiter ID finds
// the grant or the timeout if it stands (else it waits again), a renewal
// is told whether the lock is still its own, and a repeated release
// answered ErrNotHeld or ErrNotHolder has taken effect.
var ErrReplaced = errors.New("engine: the node stepped down before the change was answered")

// ErrNotWritten: a release or renewal was made (a release handed the
// lock on) and its record handed to the log, but the log could not write
// it (Log.Wait failed). The record stays pending, as the Log keeps it: it
// is written if the log recovers and lost if the node stops (or hands
// off: the successor never got it) first, so
// the caller cannot know the outcome. Records are appended before their
// change is made, under the key's lock, in the order the changes are
// made, and a later change of the key may already build on this one: the
// change cannot be held back until it is written, nor taken back. A
// repeated release answers ErrRefusalNotWritten while the first is not
// written, and ErrNotHeld or ErrNotHolder once it is; until a renewal is
// answered, the lease as it was before is the one to count on. errors.Is(err, ErrUnavailable) holds.
var ErrNotWritten = fmt.Errorf("%w: the change was made but its record is not written", ErrUnavailable)

// ErrRefusalNotWritten: a release or renewal found nothing to change
// (ErrNotHeld, ErrNotHolder), but the state it was judged on holds changes
// the log has not written: a release caught by a failing log, say, which
// stands in memory only (ErrNotWritten). A stop loses such a change, and
// so does a handoff (the successor never got it: the active streams only
// what its log wrote), after which the refusal would be false: the lock
// still held under the token its holder was told was released. Nothing
// was changed; retry: the refusal stands once the log writes, and on the
// active that takes over the call meets that node's state.
// errors.Is(err, ErrUnavailable) holds; see SettleRefusal.
var ErrRefusalNotWritten = fmt.Errorf("%w: the refusal rests on changes not yet written", ErrUnavailable)

// ErrReadNotWritten: a read (Status, Page) of a key whose shard holds changes
// its log has not written, and cannot write now (a full disk): a grant
// caught by the failure, say, which is answered 503 and taken back, and
// must not be shown as the holder meanwhile. Nothing was changed; retry:
// the read is answered once the log writes (or the changes are taken
// back and written). errors.Is(err, ErrUnavailable) holds.
var ErrReadNotWritten = fmt.Errorf("%w: the key's state holds changes not yet written", ErrUnavailable)

// ErrTimeoutNotWritten: an acquire's wait ran out while the log refused
// records (a full disk), so its timeout could not be written yet. The
// request is answered so when its wait runs out, not when the log writes
// again: it was not granted, and its waiter is never granted (a waiter
// past its wait is timed out first); the timeout is written once the log
// takes it. errors.Is(err, ErrUnavailable) holds.
var ErrTimeoutNotWritten = fmt.Errorf("%w: the wait ran out, and its end is not written yet", ErrUnavailable)

// ErrTokenMarkUnwritable: a grant needed the fencing-token high-water mark
// (data_dir's token-hwm) raised, and the mark could not be written (disk
// full, a write error): no token is issued that a restart could issue
// again, so the grant was not made. It wraps ErrUnavailable (nothing
// changed; retry), though the log itself may still write.
var ErrTokenMarkUnwritable = fmt.Errorf("%w: the fencing-token high-water mark cannot be written", ErrUnavailable)

// ErrLimitMismatch: the acquire named a limit other than the key's
// (a *LimitMismatchError says which).
var ErrLimitMismatch = errors.New("engine: the key has another limit")

// LimitMismatchError is ErrLimitMismatch with the key's limit.
type LimitMismatchError struct {
	Limit int // the key's limit
}

// Error is "limit: the key exists with limit N".
func (e *LimitMismatchError) Error() string {
	return fmt.Sprintf("limit: the key exists with limit %d", e.Limit)
}

// Is makes errors.Is(err, ErrLimitMismatch) hold.
func (e *LimitMismatchError) Is(target error) bool { return target == ErrLimitMismatch }

// ArgError reports an invalid argument. Field names the parameter as the
// API spells it ("key", "lease", "wait", "token").
type ArgError struct {
	Field  string // the parameter, as the API spells it
	Reason string // what is wrong with it, for people
}

// Error is "<field>: <reason>".
func (e *ArgError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Reason) }

func argErr(field, format string, args ...any) error {
	return &ArgError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
