package handlers

import (
	"fmt"
	"net/http"
	"net/url"
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

// corsMiddleware answers preflights and adds the CORS headers for the
// allowed origins (plus "null", see above). With no origin it returns nil.
func corsMiddleware(origins []string) func(http.Handler) http.Handler {
	if len(origins) == 0 {
		return nil
	}
	allowed := make([]string, 0, len(origins)+1)
	for _, o := range origins {
		allowed = append(allowed, strings.TrimRight(o, "/"))
	}
	allowed = append(allowed, "null")
	c := cors.New(cors.Options{
		AllowedOrigins: allowed,
		AllowedMethods: corsMethods,
		AllowedHeaders: corsHeaders,
		ExposedHeaders: corsExposed,
		MaxAge:         corsMaxAge,
	})
	return c.Handler
}
