package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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
	api.CodeLimitMismatch:   http.StatusConflict,
	api.CodeKeyReused:       http.StatusUnprocessableEntity,
	api.CodeForbidden:       http.StatusForbidden,
	api.CodeGrantEnded:      http.StatusGone,
	api.CodeSuperseded:      http.StatusConflict,
	api.CodeTooManyKeys:     http.StatusTooManyRequests,
	api.CodeTooManyWaiters:  http.StatusTooManyRequests,
	api.CodeUnavailable:     http.StatusServiceUnavailable,
	api.CodeInvalidArgument: http.StatusBadRequest,
	// Known errors no retry helps (errcode says which): 500 with the
	// reason; an unknown error is a 500 "internal error".
	api.CodeInternal: http.StatusInternalServerError,
}

// errForbidden: a forced release without an admin token.
var errForbidden = &httpError{status: http.StatusForbidden, body: api.Error{Code: api.CodeForbidden, Message: "a forced release needs one of the node's admin_tokens (header Authorization: Bearer TOKEN)"}}

// errForbiddenNoAdmin: a forced release on a node with auth_tokens and no
// admin_tokens, where nobody may force.
var errForbiddenNoAdmin = &httpError{status: http.StatusForbidden, body: api.Error{Code: api.CodeForbidden, Message: "a forced release needs one of the node's admin_tokens (header Authorization: Bearer TOKEN), and this node has none (it has auth_tokens only): set admin_tokens to allow it"}}

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
	field = fieldName(field)
	return &httpError{status: http.StatusBadRequest, body: api.Error{Code: api.CodeInvalidArgument, Field: field, Message: field + ": " + msg}}
}

// fieldName is field as the answer names it (its field, and the start of
// its message): as it is, unless it is a name the client made up that is
// not printable UTF-8 (a parameter "%0Afake:%20line", a body member
// "\u001b[2J", a byte 0xbd), which is quoted, so that the message stays one
// printable line (with Accept: text/plain, the whole answer) and the field
// is the same string as the message's start (JSON would carry a byte that
// is not UTF-8 as U+FFFD, which the message would not contain: found by
// FuzzKeyPath).
func fieldName(field string) string {
	if utf8.ValidString(field) && strings.IndexFunc(field, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) < 0 {
		return field
	}
	return quoteShort(field)
}

// classify turns any error into its status and body.
func classify(err error) (int, api.Error) {
	var he *httpError
	if errors.As(err, &he) {
		return he.status, he.body
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge, api.Error{Code: api.CodeBodyTooLarge, Field: "body",
			Message: fmt.Sprintf("body: larger than max_body (%d bytes)", mbe.Limit)}
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
	if body.Code == api.CodePollTimeout && r.Header.Get(api.HeaderIdempotencyKey) == "" {
		// Without an Idempotency-Key nothing can resume the place: the
		// engine dropped the waiter (see engine.Config.PollTimeout).
		body.Message = "the poll ended early; this request had no Idempotency-Key, so its place in the queue was not kept: repeat it (with an Idempotency-Key, a repeat resumes the place)"
	}
	switch status {
	case http.StatusInternalServerError:
		s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		// 503: no active known yet; 429: a limit reached (RFC 6585
		// section 4). The node cannot know when a key or a place frees; a
		// second is a pause that lets a release or an expiry come first.
		w.Header().Set("Retry-After", "1")
	case http.StatusRequestTimeout:
		if body.Retry {
			w.Header().Set("Retry-After", "0")
		}
	}
	if s.onError != nil {
		s.onError(body.Code)
	}
	writeErrorBody(w, r, status, body)
}

// writeErrorBody writes an error answer's body: JSON, or "<code>:
// <message>" and a newline when the client asked for text/plain (SPEC
// section 2).
func writeErrorBody(w http.ResponseWriter, r *http.Request, status int, body api.Error) {
	if bodyUnread(w, r) {
		// An error decided before the body was read (a 401, a 404, a
		// 400 for a parameter) whose body has not all come: answered
		// now, and the connection closed, rather than after net/http has
		// read the rest of the body, which a sender that stopped short
		// never sends (see ServeHTTP).
		w.Header().Set("Connection", "close")
	}
	if wantsText(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body.Code + ": " + body.Message + "\n"))
		return
	}
	writeJSON(w, status, body)
}

// wantsText reports whether the client prefers text/plain to JSON by its
// Accept header (RFC 9110 section 12.5.1): the media range that matches
// each type most specifically gives its weight (text/plain, then text/*,
// then */*; application/json, then application/*, then */*); text wins on
// a higher weight, or on an equal one when its range comes first. No Accept,
// or one that names no text range, is JSON.
func wantsText(r *http.Request) bool {
	acc := r.Header.Get("Accept")
	if !hasTextRange(acc) {
		return false // the common case, without parsing
	}
	textQ, jsonQ := acceptWeight{q: -1}, acceptWeight{q: -1}
	for i, part := range strings.Split(acc, ",") {
		mr, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		mr = strings.ToLower(strings.TrimSpace(mr))
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && f <= 1 {
					q = f
				}
			}
		}
		w := acceptWeight{q: q, pos: i}
		switch mr {
		case "text/plain":
			textQ.take(w, 3)
		case "text/*":
			textQ.take(w, 2)
		case "application/json":
			jsonQ.take(w, 3)
		case "application/*":
			jsonQ.take(w, 2)
		case "*/*":
			textQ.take(w, 1)
			jsonQ.take(w, 1)
		}
	}
	switch {
	case textQ.q <= 0:
		return false
	case jsonQ.q < 0:
		return true
	case textQ.q != jsonQ.q:
		return textQ.q > jsonQ.q
	}
	return textQ.pos < jsonQ.pos
}

// hasTextRange reports whether acc names a text/ media range, in any case
// (media types are case-insensitive), without allocating.
func hasTextRange(acc string) bool {
	for i := 0; i+5 <= len(acc); i++ {
		if strings.EqualFold(acc[i:i+5], "text/") {
			return true
		}
	}
	return false
}

// acceptWeight is the weight a media type gets from an Accept header: q of
// its most specific matching range, at position pos in the header.
type acceptWeight struct {
	q           float64
	pos, specif int
}

// take keeps w if its range (of specificity specif) is more specific than
// the one kept so far.
func (a *acceptWeight) take(w acceptWeight, specif int) {
	if specif > a.specif {
		*a = acceptWeight{q: w.q, pos: w.pos, specif: specif}
	}
}

// bodyUnread reports whether r, over HTTP/1.x, has body bytes that did
// not come: it reads what is left of the body (at most drainMax bytes, for
// at most drainWait), as net/http would before it answers, but under a
// deadline, and lifts the deadline again once the body has ended. None
// left, or none at all, is false; so is a body awaiting 100 Continue
// (net/http closes the connection of one not read itself). Over HTTP/2 the
// server resets the stream of an unread body itself.
func bodyUnread(w http.ResponseWriter, r *http.Request) bool {
	if r.ProtoMajor != 1 || r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody ||
		strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return false
	}
	rc := http.NewResponseController(w)
	// Not an expired deadline: the body's end starts net/http's
	// background read of the connection, which would fail on it and
	// drop the connection; it is lifted as soon as the body ends.
	_ = rc.SetReadDeadline(time.Now().Add(drainWait))
	_, err := io.CopyN(io.Discard, r.Body, drainMax)
	if err == io.EOF {
		_ = rc.SetReadDeadline(time.Time{})
		return false
	}
	return true
}

// drainWait and drainMax bound how long and how much of an unread body
// bodyUnread reads before an error answer: more, or slower, and the
// connection is closed after the answer (net/http's own bound on what it
// reads of an unread body is 256 KiB).
const (
	drainWait = 50 * time.Millisecond
	drainMax  = 256 << 10
)
