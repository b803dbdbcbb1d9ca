package handlers_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// TestRepeatedAuthorizationRefused: Authorization is not a list (RFC 9110
// sections 5.3 and 11.6.2), so two of its field lines are an ambiguous
// request: a 400 naming Authorization, whichever line holds a valid token.
// The first line counted before, so "good, bad" was served and "bad,
// good" refused 401 — and a proxy that checks the last line would let the
// first one through unchecked.
func TestRepeatedAuthorizationRefused(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{AuthTokens: []string{"user"}, AdminTokens: []string{"ops"}})
	for _, c := range []struct {
		method, path string
		auth         []string
	}{
		{http.MethodPost, "/locks/k?lease=5", []string{"Bearer user", "Bearer wrong"}},
		{http.MethodPost, "/locks/k?lease=5", []string{"Bearer wrong", "Bearer user"}},
		{http.MethodPost, "/locks/k?lease=5", []string{"Bearer user", "Bearer user"}},
		{http.MethodGet, "/locks", []string{"Bearer ops", "Basic b3Bz"}},
		{http.MethodDelete, "/locks/k?force=true", []string{"Bearer ops", "Bearer user"}},
	} {
		var hdr []string
		for _, a := range c.auth {
			hdr = append(hdr, "Authorization", a)
		}
		r := e.do(c.method, c.path, "", hdr...)
		if r.code != http.StatusBadRequest || r.errBody(t).Code != api.CodeInvalidArgument || r.errBody(t).Field != "Authorization" {
			t.Errorf("%s %s with Authorization %q: %d %s; want 400 naming Authorization", c.method, c.path, c.auth, r.code, r.body)
		}
	}
	var st api.LockStatus
	r := e.do(http.MethodGet, "/locks/k", "", "Authorization", "Bearer user")
	if err := json.Unmarshal(r.body, &st); err != nil || r.code != http.StatusOK || len(st.Holders) != 0 {
		t.Errorf("after the refused requests: GET /locks/k %d %s; want no holder", r.code, r.body)
	}
	// An open path ignores the header, repeated or not.
	if r := e.do(http.MethodGet, "/healthz", "", "Authorization", "Bearer a", "Authorization", "Bearer b"); r.code != http.StatusOK {
		t.Errorf("GET /healthz with two Authorization lines: %d %s", r.code, r.body)
	}
}

// TestRepeatedAuthorizationRefusedForForce: with admin_tokens only (no
// auth_tokens, so every other request is open), a forced release with two
// Authorization lines is a 400 too, not judged by its first line.
func TestRepeatedAuthorizationRefusedForForce(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{AdminTokens: []string{"ops"}})
	e.acquire("/locks/k")
	r := e.do(http.MethodDelete, "/locks/k?force=true", "", "Authorization", "Bearer ops", "Authorization", "Bearer other")
	if r.code != http.StatusBadRequest || r.errBody(t).Field != "Authorization" {
		t.Errorf("forced release with two Authorization lines: %d %s; want 400 naming Authorization", r.code, r.body)
	}
	var st api.LockStatus
	r = e.do(http.MethodGet, "/locks/k", "")
	if err := json.Unmarshal(r.body, &st); err != nil || len(st.Holders) != 1 {
		t.Errorf("the lock after the refused force: %d %s; want still held", r.code, r.body)
	}
}

// TestAuthMessagesReadInJSON: the 401, 403 and 400 of authentication
// name the header in words that JSON carries as they are. They said
// "Bearer <token>", which encoding/json (escaping HTML) sends as
// "Bearer \u003ctoken\u003e": what a curl user saw.
func TestAuthMessagesReadInJSON(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{AuthTokens: []string{"user"}})
	e.acquire("/locks/k", "Authorization", "Bearer user")
	for _, c := range []struct {
		method, path string
		hdr          []string
		code         int
	}{
		{http.MethodPost, "/locks/k?wait=0.001", nil, http.StatusUnauthorized},
		{http.MethodDelete, "/locks/k?force=true", []string{"Authorization", "Bearer user"}, http.StatusForbidden},
		{http.MethodGet, "/locks", []string{"Authorization", "Bearer user", "Authorization", "Bearer user"}, http.StatusBadRequest},
	} {
		r := e.do(c.method, c.path, "", c.hdr...)
		if r.code != c.code || bytes.Contains(r.body, []byte(`\u00`)) || !bytes.Contains(r.body, []byte("Authorization: Bearer")) {
			t.Errorf("%s %s: %d %s; want %d naming Authorization: Bearer without \\u escapes", c.method, c.path, r.code, r.body, c.code)
		}
	}
}
