package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinel errors returned by the Client and Lock methods. Compare with
// errors.Is: an error from the server is a *StatusError, which Is the
// sentinel of its error code (see codeErrors), so callers never match on
// message strings.
var (
	// ErrTimeout: the acquire's wait ran out before a grant. The lock was
	// not granted, and never will be by that acquire.
	ErrTimeout = errors.New("baton: wait ran out, lock not granted")
	// ErrNotHolder: the lock is held under another token; it is not (or no
	// longer) ours.
	ErrNotHolder = errors.New("baton: lock held under another token")
	// ErrNotHeld: nobody holds the lock; it is not (or no longer) ours.
	ErrNotHeld = errors.New("baton: lock not held")
	// ErrGrantEnded: the grant that this acquire's Idempotency-Key got was
	// released or expired before the answer could be delivered.
	ErrGrantEnded = errors.New("baton: the grant of this acquire has ended")
	// ErrSuperseded: a repeat of the same acquire took over its place.
	ErrSuperseded = errors.New("baton: acquire superseded by its own repeat")
	// ErrInvalidArgument: the server refused a parameter (400, 413);
	// StatusError.Field names it.
	ErrInvalidArgument = errors.New("baton: invalid argument")
	// ErrLimit: a server limit (max_keys, max_waiters...) was reached (429).
	ErrLimit = errors.New("baton: server limit reached")
	// ErrUnauthorized: the server wants a (different) bearer token (401).
	ErrUnauthorized = errors.New("baton: unauthorized")
	// ErrForbidden: a forced release without one of the server's
	// admin_tokens (403 forbidden).
	ErrForbidden = errors.New("baton: forbidden")
	// ErrLimitMismatch: the key exists with another limit than the one
	// the acquire named (409 limit_mismatch).
	ErrLimitMismatch = errors.New("baton: the key has another limit")
	// ErrKeyReused: the acquire's Idempotency-Key was sent before with
	// another mode, limit, lease or owner (422 idempotency_key_reused;
	// StatusError.Field names it): nothing changed.
	ErrKeyReused = errors.New("baton: Idempotency-Key reused for another request")
	// ErrUnavailable: no node could be reached, or none is active (503).
	// The call may succeed later.
	ErrUnavailable = errors.New("baton: service unavailable")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("baton: client closed")
	// ErrLost: a Lock is no longer held by us (taken back after its lease
	// ran out, released from elsewhere, or not renewable in time). Lock.Err
	// wraps it together with the cause.
	ErrLost = errors.New("baton: lock lost")
	// ErrTokenUnsendable: NewClient refuses Config.Token because an
	// Authorization header cannot carry it (a byte that is not printable
	// ASCII, or a space: the server's auth_tokens are printable ASCII
	// without spaces). The error wrapping it names the offset, not the
	// token.
	ErrTokenUnsendable = errors.New("baton: Token must be printable ASCII without spaces (as the server's auth_tokens)")
)

// codeErrors is the one table mapping the server's error codes (Error.Code,
// the Code constants of wire.go) back to sentinels. The server holds the
// matching table from sentinels (engine errors) to codes and statuses.
var codeErrors = map[string]error{
	CodeTimeout:         ErrTimeout,
	CodeNotHolder:       ErrNotHolder,
	CodeNotHeld:         ErrNotHeld,
	CodeGrantEnded:      ErrGrantEnded,
	CodeSuperseded:      ErrSuperseded,
	CodeInvalidArgument: ErrInvalidArgument,
	CodeBodyTooLarge:    ErrInvalidArgument,
	CodeTooManyKeys:     ErrLimit,
	CodeTooManyWaiters:  ErrLimit,
	CodeUnauthorized:    ErrUnauthorized,
	CodeForbidden:       ErrForbidden,
	CodeLimitMismatch:   ErrLimitMismatch,
	CodeKeyReused:       ErrKeyReused,
	CodeUnavailable:     ErrUnavailable,
}

// StatusError is an error answer from a node: the HTTP status and the body
// {"error","message","field"}. It Is the sentinel of its Code (ErrTimeout
// for "timeout", ErrNotHolder for "not_holder", ...); an answer without a
// known code (a proxy's 502 page, say) Is ErrUnavailable when its status is
// 502, 503 or 504.
type StatusError struct {
	// StatusCode is the HTTP status, e.g. 409; 0 for an E answer of the
	// native protocol, which has none (Code says what it is).
	StatusCode int
	// Code is the server's error code (Error.Code), "" when the body had
	// none.
	Code string
	// Message is the server's human sentence, or the status text.
	Message string
	// Field names the offending parameter of a 400, the member that
	// differs of a 422, and "limit" for a 409 limit_mismatch.
	Field string
}

// Error implements error.
func (e *StatusError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	code := e.Code
	if code == "" {
		code = "http"
	}
	if e.StatusCode == 0 {
		if e.Field != "" {
			return fmt.Sprintf("baton: %s (%s): %s", code, e.Field, msg)
		}
		return fmt.Sprintf("baton: %s: %s", code, msg)
	}
	if e.Field != "" {
		return fmt.Sprintf("baton: %d %s (%s): %s", e.StatusCode, code, e.Field, msg)
	}
	return fmt.Sprintf("baton: %d %s: %s", e.StatusCode, code, msg)
}

// Is reports whether target is the sentinel of e's code.
func (e *StatusError) Is(target error) bool {
	if s, ok := codeErrors[e.Code]; ok {
		return s == target
	}
	if e.Code == "" {
		switch e.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return target == ErrUnavailable
		}
	}
	return false
}

// invalidArgument is the error of an argument the client refuses before
// sending it: a *StatusError as the server's 400 for it would be (Is
// ErrInvalidArgument, Field names it).
func invalidArgument(field, format string, args ...any) error {
	return &StatusError{StatusCode: http.StatusBadRequest, Code: CodeInvalidArgument, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}
