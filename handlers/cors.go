package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rs/cors"

	"github.com/baton-io/baton/api"
)

// CORS: browsers on other origins may call baton when their origin is
// listed in cors_origins (Config.CORSOrigins). None is listed by default,
// and then no CORS header is ever sent.
//
// Origin: null. A browser that follows a redirect to another origin sends
// "Origin: null" on the redirected request (and on its preflight). That is
// what happens when a page's fetch reaches a standby and is sent on to the
// active with 307 (SPEC section 3), so as soon as any origin is configured
// "null" is accepted too: otherwise a configured deployment would work only
// while the page happens to talk to the active. The price: sandboxed
// iframes, file: and data: pages also send "null", so they can call too.
// No credentials are involved (no cookies; Access-Control-Allow-Credentials
// is never sent): a page must bring a bearer token of its own, exactly as
// any script outside a browser must, so on a network that is not trusted
// configure auth_tokens, not only cors_origins.

// CORS settings: what a cross-origin page may send and read. A page reads
// every header baton.js reads: a grant's Lock-Token, a 503's Retry-After,
// and the Baton-Replica-Lag of a standby's reads (its replicaLag).
var (
	corsMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete, http.MethodPatch}
	corsHeaders = []string{"Authorization", "Content-Type", api.HeaderIdempotencyKey, api.HeaderLockToken, "Last-Event-ID"}
	corsExposed = []string{api.HeaderLockToken, "Retry-After", api.HeaderReplicaLag}
)

// corsMaxAge is how long, in seconds, a browser may cache a preflight.
const corsMaxAge = 600

// ValidateCORSOrigins checks a cors_origins list: each entry is "*" (any
// origin), "null", or an origin "scheme://host[:port]" with no path; the
// host may hold one "*" wildcard (https://*.example.com). It returns an
// error quoting the first entry that is none of these (the caller names
// the setting), or nil.
func ValidateCORSOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" || o == "null" {
			continue
		}
		u, err := url.Parse(strings.Replace(o, "*", "wildcard", 1))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil ||
			strings.Count(o, "*") > 1 {
			return fmt.Errorf("%q is not an origin (scheme://host[:port], \"*\" or \"null\")", o)
		}
	}
	return nil
}

// newCORS returns the CORS handling of the allowed origins (plus "null",
// see above); nil with no origin.
func newCORS(origins []string) *cors.Cors {
	if len(origins) == 0 {
		return nil
	}
	allowed := make([]string, 0, len(origins)+1)
	for _, o := range origins {
		allowed = append(allowed, strings.TrimRight(o, "/"))
	}
	allowed = append(allowed, "null")
	return cors.New(cors.Options{
		AllowedOrigins: allowed,
		AllowedMethods: corsMethods,
		AllowedHeaders: corsHeaders,
		ExposedHeaders: corsExposed,
		MaxAge:         corsMaxAge,
	})
}

// originGuard refuses the requests that change state (POST, DELETE,
// PATCH) which a browser sends from a page of another origin not allowed
// by cors_origins. Such a request needs no preflight when it is a form or
// a no-cors fetch: CORS only hides the answer from the page, and the node
// took the lock all the same (a tester's report; the CSRF class of
// reports against etcd and Consul). Which requests are cross-origin is
// net/http's CrossOriginProtection's rule (Sec-Fetch-Site, else Origin
// against Host): requests without either header (curl, the Go client,
// Node's fetch, peers) and the status page's own (same-origin) pass.
type originGuard struct {
	csrf *http.CrossOriginProtection
	cors *cors.Cors // cors_origins ("*" allows every origin); nil when empty
}

func newOriginGuard(c *cors.Cors) *originGuard {
	return &originGuard{csrf: http.NewCrossOriginProtection(), cors: c}
}

// refuses reports whether r is a cross-origin request that changes state
// from an origin cors_origins does not allow.
func (g *originGuard) refuses(r *http.Request) bool {
	return g.csrf.Check(r) != nil && (g.cors == nil || !g.cors.OriginAllowed(r))
}

// refusedCrossOrigin answers r 403 forbidden, naming Origin, when
// originGuard refuses it, and reports whether it did.
func (s *Server) refusedCrossOrigin(w http.ResponseWriter, r *http.Request) bool {
	if !s.origins.refuses(r) {
		return false
	}
	s.writeError(w, r, &httpError{status: http.StatusForbidden, body: api.Error{Code: api.CodeForbidden, Field: "Origin",
		Message: "Origin: a page of " + strconv.Quote(r.Header.Get("Origin")) + " may not change locks here: list its origin in cors_origins"}})
	return true
}
