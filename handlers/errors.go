package handlers

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/errcode"
)

// statusOf is THE mapping from the API's error codes to HTTP statuses for
// the errors of the engine; which engine error has which code is
// internal/errcode's table, shared with the native protocol. Every handler
// reports failures through writeError, which consults both; anything not
// listed is a logged 500 "internal".
var statusOf = map[string]int{
	api.CodeTimeout:         http.StatusRequestTimeout,
	api.CodePollTimeout:     http.StatusRequestTimeout,
	api.CodeNotHolder:       http.StatusConflict,
	api.CodeNotHeld:         http.StatusNotFound,
	api.CodeGrantEnded:      http.StatusGone,
	api.CodeSuperseded:      http.StatusConflict,
	api.CodeTooManyKeys:     http.StatusTooManyRequests,
	api.CodeTooManyWaiters:  http.StatusTooManyRequests,
	api.CodeUnavailable:     http.StatusServiceUnavailable,
	api.CodeInvalidArgument: http.StatusBadRequest,
}

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
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge, api.Error{Code: api.CodeBodyTooLarge, Message: "the request body is larger than max_body"}
	}
	if code, field, msg, known := errcode.Of(err); known {
		if status, ok := statusOf[code]; ok {
			return status, api.Error{Code: code, Field: field, Message: msg, Retry: code == api.CodePollTimeout}
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
