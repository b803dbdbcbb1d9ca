package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/web"
)

// Client authentication (config auth_tokens).
//
// With tokens configured, every request must carry one of them as
// `Authorization: Bearer <token>`, or it is answered 401
// {"error":"unauthorized"} with `WWW-Authenticate: Bearer realm="baton"`;
// two Authorization lines are a 400 (errRepeatedAuthorization).
// These stay open, because they reveal no lock data and are probed by
// machines that hold no token:
//
//   - GET /healthz and GET /readyz (liveness and readiness probes);
//   - GET /openapi.json (the API description);
//   - GET / and the status page's static files under /static/ (the page
//     shell; its data calls /locks and /cluster, which need the token);
//   - GET /baton.js and /baton.d.ts (the JavaScript client: an import
//     statement cannot send a token);
//   - OPTIONS requests (CORS preflights never carry credentials);
//   - /_cluster/ (peer endpoints: cluster.Node.Handler checks the cluster
//     secret instead).
//
// Everything else — /locks, /cluster, /metrics — needs a token. The
// admin_tokens are accepted too, and only they may force a release
// (mayForce).

// tokenSet holds the SHA-256 digests of the accepted bearer tokens, so that
// every comparison is over equal lengths and takes the same time whatever
// the candidate.
type tokenSet struct {
	sums [][sha256.Size]byte
}

func newTokenSet(tokens []string) *tokenSet {
	var ts tokenSet
	for _, t := range tokens {
		if t != "" {
			ts.sums = append(ts.sums, sha256.Sum256([]byte(t)))
		}
	}
	if len(ts.sums) == 0 {
		return nil
	}
	return &ts
}

// valid reports whether candidate is one of the tokens. It compares against
// all of them, in constant time each.
func (ts *tokenSet) valid(candidate string) bool {
	sum := sha256.Sum256([]byte(candidate))
	ok := 0
	for i := range ts.sums {
		ok |= subtle.ConstantTimeCompare(sum[:], ts.sums[i][:])
	}
	return ok == 1
}

// errRepeatedAuthorization answers a request with more than one
// Authorization field line. The field is not a list (RFC 9110 section
// 11.6.2: one set of credentials), so a sender must not repeat it (section
// 5.3); which of the lines counts is ambiguous, and a proxy in front may
// check another one than baton, so the request is refused rather than
// judged by its first line.
var errRepeatedAuthorization = badRequest("Authorization", "given more than once; send one Authorization: Bearer TOKEN")

// repeatedAuthorization reports whether r has more than one Authorization
// field line.
func repeatedAuthorization(r *http.Request) bool {
	return len(r.Header["Authorization"]) > 1
}

// bearer returns the credentials of an `Authorization: Bearer x` header.
// Callers refuse a repeated header first (repeatedAuthorization).
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(h[len(prefix):]), true
}

// openPath reports whether a request is served without a bearer token.
func openPath(r *http.Request) bool {
	if r.Method == http.MethodOptions {
		return true
	}
	p := r.URL.Path
	switch {
	case p == "/healthz", p == "/readyz", p == "/openapi.json", p == "/", p == "/favicon.ico",
		p == web.ClientPath, p == web.ClientTypesPath, p == web.NodeClientPath, p == web.NodeClientTypesPath:
		return r.Method == http.MethodGet || r.Method == http.MethodHead
	case strings.HasPrefix(p, "/static/"):
		return r.Method == http.MethodGet || r.Method == http.MethodHead
	case strings.HasPrefix(p, "/_cluster/"):
		return true
	}
	return false
}

// authenticate is the chi middleware for auth_tokens; without tokens it
// passes everything through.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.auth == nil || openPath(r) {
			next.ServeHTTP(w, r)
			return
		}
		if repeatedAuthorization(r) {
			s.writeError(w, r, errRepeatedAuthorization)
			return
		}
		if tok, ok := bearer(r); ok && (s.auth.valid(tok) || (s.admin != nil && s.admin.valid(tok))) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
		s.writeError(w, r, &httpError{status: http.StatusUnauthorized, body: api.Error{
			Code: api.CodeUnauthorized, Message: "a valid bearer token is required (header Authorization: Bearer TOKEN)",
		}})
	})
}

// mayForce reports whether r may force a release: always when neither
// auth_tokens nor admin_tokens is set, else only with one of the
// admin_tokens as its bearer token (errForbidden; errForbiddenNoAdmin
// when only auth_tokens is set).
func (s *Server) mayForce(r *http.Request) error {
	if s.auth == nil && s.admin == nil {
		return nil
	}
	if repeatedAuthorization(r) {
		return errRepeatedAuthorization
	}
	if s.admin == nil {
		return errForbiddenNoAdmin
	}
	if tok, ok := bearer(r); ok && s.admin.valid(tok) {
		return nil
	}
	return errForbidden
}
