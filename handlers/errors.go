package handlers

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// errorTable is THE mapping from engine errors to HTTP answers. Every
// handler reports failures through writeError, which consults it; anything
// not listed is a logged 500 "internal".
var errorTable = []struct {
	err    error
	status int
	code   string
	msg    string
}{
	{engine.ErrTimeout, http.StatusRequestTimeout, api.CodeTimeout, "the wait ran out before the lock was granted; nothing is held"},
	{engine.ErrPollTimeout, http.StatusRequestTimeout, api.CodePollTimeout, "the poll ended early; the place in the queue is kept: repeat the request with the same Idempotency-Key"},
	{engine.ErrNotHolder, http.StatusConflict, api.CodeNotHolder, "the lock is held under another token"},
	{engine.ErrNotHeld, http.StatusNotFound, api.CodeNotHeld, "nobody holds the lock"},
	{engine.ErrLimitMismatch, http.StatusConflict, api.CodeLimitMismatch, "the key exists with another limit: name the key's limit, or none"},
	{errForbidden, http.StatusForbidden, api.CodeForbidden, "a forced release needs one of the node's admin_tokens (Authorization: Bearer <token>)"},
	{engine.ErrGrantEnded, http.StatusGone, api.CodeGrantEnded, "the grant this Idempotency-Key received has been released or has expired; use a new key to acquire again"},
	{engine.ErrSuperseded, http.StatusConflict, api.CodeSuperseded, "a repeat of this request with the same Idempotency-Key took over its place"},
	{engine.ErrTooManyKeys, http.StatusTooManyRequests, api.CodeTooManyKeys, "the node holds its maximum number of keys (max_keys)"},
	{engine.ErrTooManyWaiters, http.StatusTooManyRequests, api.CodeTooManyWaiters, "the queue is full (max_waiters_per_key or max_waiters)"},
	{engine.ErrClosed, http.StatusServiceUnavailable, api.CodeUnavailable, "the node is shutting down; retry"},
	{engine.ErrUnavailable, http.StatusServiceUnavailable, api.CodeUnavailable, "the node cannot write its log (disk full or a write error); nothing was changed: retry"},
}

// errForbidden: a forced release without an admin token.
var errForbidden = errors.New("handlers: a forced release needs an admin token")

// httpError is an error the handlers raise themselves (bad input, limits).
type httpError struct {
	status int
	body   api.Error
}

func (e *httpError) Error() string { return e.body.Message }

func badRequest(field, msg string) error {
	if field == "" {
		// A parameter or body field with an empty name ("?=1", {"":1}): a
		// 400 always names the field (found by FuzzQuery).
		field, msg = "(empty name)", "a parameter or body field has an empty name"
	}
	return &httpError{status: http.StatusBadRequest, body: api.Error{Code: api.CodeInvalidArgument, Field: field, Message: field + ": " + msg}}
}

// classify turns any error into its status and body.
func classify(err error) (int, api.Error) {
	var he *httpError
	if errors.As(err, &he) {
		return he.status, he.body
	}
	var ae *engine.ArgError
	if errors.As(err, &ae) {
		return http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Field: ae.Field, Message: ae.Error()}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge, api.Error{Code: api.CodeBodyTooLarge, Message: "the request body is larger than max_body"}
	}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			return row.status, api.Error{Code: row.code, Message: row.msg, Retry: row.code == api.CodePollTimeout}
		}
	}
	return http.StatusInternalServerError, api.Error{Code: api.CodeInternal, Message: "internal error"}
}

// writeError answers r with err, as JSON (or text/plain when the client
// asked for it).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client is gone: nobody reads the answer.
		return
	}
	if ticket, ok := movedTicket(err); ok {
		s.redirect(w, r, ticket, true)
		return
	}
	status, body := classify(err)
	switch status {
	case http.StatusInternalServerError:
		s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	case http.StatusRequestTimeout:
		if body.Retry {
			w.Header().Set("Retry-After", "0")
		}
	}
	if s.onError != nil {
		s.onError(body.Code)
	}
	if wantsText(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body.Code + ": " + body.Message + "\n"))
		return
	}
	writeJSON(w, status, body)
}

// wantsText reports whether the client prefers text/plain to JSON.
func wantsText(r *http.Request) bool {
	acc := r.Header.Get("Accept")
	if acc == "" {
		return false
	}
	t := strings.Index(acc, "text/plain")
	if t < 0 {
		return false
	}
	j := strings.Index(acc, "application/json")
	return j < 0 || t < j
}
