// Package handlers is baton's HTTP layer: chi routes for the API of SPEC
// section 2, parameter parsing and validation, and the one table that maps
// engine errors to status codes (errors.go). It translates HTTP to engine
// calls and holds no lock state of its own.
package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// Config sets up the HTTP layer.
type Config struct {
	// Node is this node's base URL, reported in grants.
	Node string
	// MaxBody is the largest request body accepted, in bytes (413 above).
	MaxBody int64
	// Logger receives internal errors; nil means slog.Default().
	Logger *slog.Logger
	// AuthTokens are the bearer tokens accepted from clients; empty means
	// no authentication. auth.go lists the paths that stay open.
	AuthTokens []string
	// AdminTokens are the bearer tokens that may also force a release
	// (admin_tokens): with AuthTokens or AdminTokens set, DELETE
	// /locks/{key}?force=true needs one of them (403 forbidden
	// otherwise). They are accepted wherever AuthTokens are.
	AdminTokens []string
	// Metrics counts error answers and serves GET /metrics; its OnEvent
	// must be the engine's Config.OnEvent for the event counters. nil
	// means a Metrics that sees only the engine's gauges and the errors.
	Metrics *Metrics
	// CORSOrigins are the origins whose pages may call from browsers
	// (cors_origins); empty means no CORS headers at all. See cors.go.
	CORSOrigins []string
	// Events, if set, is the recent-events feed served at GET /events; the
	// engine's Config.OnEvent must feed it (EventLog.Add).
	Events *EventLog
	// Cluster, if set, returns this node's view for GET /cluster; nil
	// means a single node: itself, active.
	Cluster func() api.ClusterView
	// LastIndex, if set, returns the index of the last record in a single
	// node's log, its last_index in GET /cluster (without Cluster).
	LastIndex func() uint64
	// Gate, if set, decides whether this node serves /locks (a cluster
	// member); nil means a single node, always active.
	Gate Gate
	// Pprof serves Go's profiles under /debug/pprof/ (behind auth_tokens,
	// like /metrics). Off by default.
	Pprof bool
}

// DefaultMaxBody is the default of max_body: 64 KiB.
const DefaultMaxBody = 64 << 10

// Server serves the HTTP API over an Engine. It is an http.Handler.
type Server struct {
	eng    *engine.Engine
	cfg    Config
	log    *slog.Logger
	router chi.Router
	// locks are the handlers of the /locks/{key} routes behind the
	// router's middlewares, by method: ServeHTTP calls them without chi
	// (see lockHandler).
	locks   lockRoutes
	onError func(code string)
	metrics *Metrics
	auth    *tokenSet
	admin   *tokenSet // nil: no admin_tokens
	// origins refuses the browsers' cross-origin writes that
	// cors_origins does not allow (cors.go).
	origins *originGuard
	// handedOn lists the grants of parked HTTP/1.x acquires that a
	// release's handler may answer (handon.go).
	handedOn handedOnList
	// releasing counts the HTTP releases between their engine call and
	// the end of their answerHandedOn (handon.go): while one is, an
	// exclusive grant listed starts no goroutine of its own; that
	// release's handler takes it, or starts the goroutine for what it
	// leaves (releaseDone).
	releasing atomic.Int32
}

// New returns the handler for eng. It starts nothing.
func New(eng *engine.Engine, cfg Config) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	s := &Server{eng: eng, cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	r := chi.NewRouter()
	s.useCORS(r)
	s.initOps(r)
	r.NotFound(s.noRoute)
	// The 405 names the path as the 404 does (noRoute).
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/locks/") {
			w.Header().Set("Allow", "GET, HEAD, POST, DELETE, PATCH")
		} else {
			w.Header().Set("Allow", "GET, HEAD")
		}
		s.writeError(w, r, &httpError{status: http.StatusMethodNotAllowed, body: api.Error{Code: api.CodeMethod, Message: r.Method + " is not allowed on " + r.URL.EscapedPath()}})
	})
	get(r, "/healthz", s.healthz)
	get(r, "/readyz", s.readyz)
	get(r, "/locks", s.gatedRead(s.list))
	acquire, release, renew, status := s.gated(s.acquire), s.gated(s.release), s.gated(s.renew), s.gatedRead(s.status)
	r.Post(lockPattern, acquire)
	r.Delete(lockPattern, release)
	r.Patch(lockPattern, renew)
	get(r, lockPattern, status)
	s.mountWeb(r)
	if cfg.Pprof {
		r.Mount("/debug", middleware.Profiler())
	}
	s.router = r
	behind := func(h http.HandlerFunc) http.Handler {
		if mws := r.Middlewares(); len(mws) > 0 {
			return mws.HandlerFunc(h)
		}
		return h // no chain to walk: one frame less under a parked call
	}
	s.locks = lockRoutes{post: behind(acquire), delete: behind(release), patch: behind(renew), get: behind(status)}
	return s
}

// noRoute answers a request for a path that names nothing: 404
// not_found, naming the path as the client sent it, escapes and all
// (r.URL.EscapedPath): decoded, /a%2Fb read as another path (/a/b), and
// an escaped line feed broke a text/plain answer's line.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, &httpError{status: http.StatusNotFound, body: api.Error{Code: api.CodeNotFound, Message: "no such route: " + r.URL.EscapedPath()}})
}

// lockPattern is the chi pattern of the /locks/{key} routes, the route
// label of their requests in baton_http_request_duration_seconds.
const lockPattern = "/locks/*"

// lockRoutes are the /locks/{key} routes' handlers, each wrapped in the
// router's middlewares (CORS, authentication) as chi would wrap it.
type lockRoutes struct {
	post, delete, patch, get http.Handler
}

// lockHandler returns the handler chi would route r to when that is one
// of the /locks/{key} routes (POST, DELETE, PATCH, GET, HEAD), else nil.
// It matches the path chi matches (the raw path when the URL has one), so
// that both agree on every request (TestLockRoutesAsChi). Serving these
// without chi saves what chi costs a request: a copy of it
// (Request.WithContext), a context value for its routing context and a
// path value (Request.SetPathValue, a map), about half the bytes
// allocated per acquire+release. The handlers read the key from
// r.URL.Path, never from chi's URL parameters or path values.
func (s *Server) lockHandler(r *http.Request) http.Handler {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	if !strings.HasPrefix(path, "/locks/") {
		return nil
	}
	switch r.Method {
	case http.MethodPost:
		return s.locks.post
	case http.MethodDelete:
		return s.locks.delete
	case http.MethodPatch:
		return s.locks.patch
	case http.MethodGet, http.MethodHead:
		return s.locks.get
	}
	return nil
}

// get routes GET and HEAD on pattern to h: net/http leaves the body out of
// an answer to HEAD (load balancers probe /healthz and /readyz with it). A
// route, not chi's GetHead middleware, so that the calls that park carry
// no extra frame (see exactDecimal).
func get(r chi.Router, pattern string, h http.HandlerFunc) {
	r.Get(pattern, h)
	r.Head(pattern, h)
}

// Router returns the chi router, for callers that mount more routes
// (outside /locks/: ServeHTTP serves the /locks/{key} calls before the
// router sees them).
func (s *Server) Router() chi.Router { return s.router }

// ServeHTTP routes r and observes its duration in
// baton_http_request_duration_seconds by method, route pattern and status.
// The /locks/{key} calls go straight to their handlers (lockHandler); for
// the others it puts chi's routing context in r itself (chi then uses it
// instead of its own) so that the matched pattern can be read once the
// call is answered.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := sinceEpoch()
	// Every answer is of the type it names: no browser guesses another
	// (a JSON error or a key echoed in one is never run as HTML).
	w.Header()["X-Content-Type-Options"] = nosniff
	sw := statusWriters.Get().(*statusWriter)
	sw.ResponseWriter, sw.status = w, 0
	if r.ProtoMajor == 1 && r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		// A body is read under a deadline wherever it is read (readBody
		// and hasBody: bodyTimeout; bodyUnread: drainWait), each lifting
		// it once the body has ended. One the handler does not read (an
		// answer decided first that is no error: an error's is bodyUnread's)
		// is read by net/http before it answers, to reuse the connection:
		// this bounds that read too, or a body that stopped short held
		// the connection, and the answer, for good.
		_ = http.NewResponseController(sw).SetReadDeadline(time.Now().Add(bodyTimeout))
	}
	switch h := s.lockHandler(r); {
	case s.refusedCrossOrigin(sw, r):
	case h != nil:
		h.ServeHTTP(sw, r)
		s.metrics.observeRequest(r.Method, lockPattern, answered(sw, r), sinceEpoch()-start)
	default:
		s.route(sw, r, start)
	}
	gone := sw.status == 0 && r.Context().Err() != nil
	sw.ResponseWriter = nil
	statusWriters.Put(sw)
	if gone {
		// The handler wrote nothing for a client gone (a waiter whose
		// connection closed or half-closed, a grant abandoned): net/http
		// would answer "200 OK" with an empty body, which a client still
		// reading would take for a success. The connection is closed
		// (HTTP/1.1) or the stream reset (HTTP/2) without an answer.
		panic(http.ErrAbortHandler)
	}
}

// statusClientGone is the status the request metrics record for a
// request answered nothing because its client was gone (nginx's 499,
// "client closed request"); no client ever receives it.
const statusClientGone = 499

// answered is the status of w's answer to r for the metrics: the one
// written, statusClientGone when nothing was written for a client gone,
// else 200 (net/http's answer when nothing was written).
func answered(w *statusWriter, r *http.Request) int {
	switch {
	case w.status != 0:
		return w.status
	case r.Context().Err() != nil:
		return statusClientGone
	}
	return http.StatusOK
}

// route serves r through chi and observes it; start is its sinceEpoch.
func (s *Server) route(w *statusWriter, r *http.Request, start time.Duration) {
	rctx := routeContexts.Get().(*chi.Context)
	rctx.Reset()
	rctx.Routes = s.router
	s.router.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx)))
	s.metrics.observeRequest(r.Method, rctx.RoutePattern(), answered(w, r), sinceEpoch()-start)
	routeContexts.Put(rctx)
}

// epoch is when the package was loaded.
var epoch = time.Now()

// sinceEpoch returns the time since epoch on the monotonic clock: a
// request's duration is the difference of two, one clock read each
// (time.Now reads the wall clock too).
func sinceEpoch() time.Duration { return time.Since(epoch) }

var (
	routeContexts = sync.Pool{New: func() any { return chi.NewRouteContext() }}
	statusWriters = sync.Pool{New: func() any { return new(statusWriter) }}
)

// statusWriter remembers the status of an answer. Unwrap lets
// http.ResponseController reach the connection's writer (Flush, deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// acquire is POST /locks/{key}: a long poll until grant, timeout or
// disconnect.
//
//	@Summary		Acquire a lock (long poll)
//	@Description	Returns when the lock is granted (200, with a new fencing token), when `wait` runs out (408 `timeout`, nothing held), or when the node ends the poll early (408 `poll_timeout`, `retry`: repeat with the same Idempotency-Key). Parameters come from the query string or a JSON body, not both. With `Accept: text/plain` the body is the token and a newline.
//	@Tags			locks
//	@Accept			json
//	@Produce		json
//	@Produce		plain
//	@Param			key				path		string				true	"lock key: 1-256 bytes of UTF-8, no control characters; may contain slashes"
//	@Param			lease			query		number				false	"lease in seconds (> 0, at least 1e-9: the node's resolution is 1 ns; at most lease_max; default lease_default)"
//	@Param			wait			query		number				false	"seconds to wait in the queue (>= 0, at most wait_max; 0 = no limit; else at least 1e-9: the node's resolution is 1 ns)"
//	@Param			owner			query		string				false	"a label for people (1-128 bytes of printable UTF-8), shown wherever the holder or waiter is; never an identity check"	minlength(1)	maxlength(128)
//	@Param			mode			query		string				false	"exclusive (default) or shared; the two never hold together. Limit 1 (default): one exclusive holder, or any number of shared ones (a read/write lock); limit above 1: up to the limit in either mode (a semaphore)"	Enums(exclusive, shared)
//	@Param			limit			query		integer				false	"holders the key admits at once (1-10000); the first acquire of a free key sets it; absent: the key's limit (1 for a free key)"	minimum(1)	maximum(10000)
//	@Param			ticket			query		string				false	"set by the server, never by a client: the Location of a 307 that moves a waiter without an Idempotency-Key to the new active during a handoff carries it, and the repeat resumes the waiter's place in the queue by it (hex); with an Idempotency-Key too, the key names the place and the ticket is ignored"
//	@Param			Idempotency-Key	header		string				false	"names this acquire: a repeat (the same mode, limit, lease and owner; wait may differ, and a shorter one ends a waiting place sooner) gets the outcome of the first (1 to 256 printable ASCII characters)"
//	@Param			body			body		api.AcquireRequest	false	"lease, wait, owner, mode and limit as JSON instead of the query"
//	@Success		200				{object}	api.Grant
//	@Header			200				{integer}	Lock-Token	"the fencing token of the grant"
//	@Failure		307				{object}	api.Error		"this node is a standby: Location names the same call on the active"
//	@Header		307				{string}	Location		"the same call on the active"
//	@Failure		400				{object}	api.Error	"bad input; field names the parameter"
//	@Failure		401				{object}	api.Error	"auth_tokens is set and no valid bearer token was sent"
//	@Header		401				{string}	WWW-Authenticate	"a Bearer challenge (realm baton)"
//	@Failure		403				{object}	api.Error	"forbidden (field Origin): a browser page of an origin cors_origins does not list"
//	@Failure		408				{object}	api.Error	"timeout: wait ran out, nothing held; or poll_timeout: place kept"
//	@Header		408				{integer}	Retry-After	"seconds to wait before retrying (poll_timeout: 0, repeat at once)"
//	@Failure		409				{object}	api.Error	"superseded: a repeat with the same Idempotency-Key took over; limit_mismatch: the key exists with another limit"
//	@Failure		410				{object}	api.Error	"grant_ended: the grant of this Idempotency-Key has ended"
//	@Failure		413				{object}	api.Error	"the body is larger than max_body"
//	@Failure		422				{object}	api.Error	"idempotency_key_reused: the Idempotency-Key came before with another mode, limit, lease or owner, or with a forced release of the key (field names it); nothing changed"
//	@Failure		429				{object}	api.Error	"too_many_keys or too_many_waiters; see Retry-After"
//	@Header		429				{integer}	Retry-After	"seconds to wait before retrying"
//	@Failure		503				{object}	api.Error	"shutting down or no active node known; see Retry-After"
//	@Header		503				{integer}	Retry-After	"seconds to wait before retrying"
//	@Security		BearerAuth
//	@Router			/locks/{key} [post]
func (s *Server) acquire(w http.ResponseWriter, r *http.Request) {
	req, err := s.acquireRequest(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A parked request keeps this frame on its stack while it waits:
	// parsing and answering happen in calls of their own so that it stays
	// small (see exactDecimal).
	if r.ProtoMajor != 1 {
		// Over HTTP/2 the stream's handler answers (handon.go).
		g, err := s.eng.AcquirePlaced(r.Context(), req, turn(r))
		s.answerAcquire(w, r, req.ID, g, err)
		return
	}
	p := newParkedAcquire(s, w, r, req.ID)
	p.shared = req.Mode == engine.Shared
	res, wt := s.eng.AcquireTo(req, p)
	placed(r)
	if wt == nil {
		p.free() // the engine kept nothing of it
		g, err := res.Settle()
		s.answerAcquire(w, r, req.ID, g, err)
		return
	}
	s.acquireParked(r.Context(), p, wt)
}

// acquireRequest parses an acquire into the engine's request.
func (s *Server) acquireRequest(w http.ResponseWriter, r *http.Request) (engine.AcquireRequest, error) {
	p, err := s.parseLockParams(w, r)
	if err != nil {
		return engine.AcquireRequest{}, err
	}
	return engine.AcquireRequest{Key: p.Key, Lease: seconds(p.Lease.V), Wait: seconds(p.Wait.V), ID: p.ID, Owner: p.Owner, Mode: p.Mode, Limit: p.Limit}, nil
}

// answerAcquire writes the outcome of an acquire. A grant that cannot be
// written (the client is gone) is abandoned: it passes to the next waiter.
func (s *Server) answerAcquire(w http.ResponseWriter, r *http.Request, id string, g engine.Grant, err error) {
	if gate := s.cfg.Gate; errors.Is(err, engine.ErrTimeout) && gate != nil && gate.HoldsBack(0) {
		// The wait ran out here, but this node has just resumed from a
		// pause (or has left the active role since): the active may hold
		// the waiter's place and grant it, so "nothing held" may be
		// false. The waiter repeats on the active.
		s.redirect(w, r, "", true)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if clientGone(r) {
		// Granted as the client went away: nobody would learn the token.
		s.eng.Abandon(g, id)
		return
	}
	if gate := s.cfg.Gate; gate != nil && gate.HoldsBack(g.Token) {
		// Granted by this node's timers (a lease that ran out) the moment
		// it resumed from a pause, while a standby may have been promoted
		// in its place: the waiter is told to retry (503), not that it
		// holds a lock this node may no longer own. With an
		// Idempotency-Key the grant stays: the retry gets it if this node
		// is still the active. Without one nobody can ever claim it, so
		// it is released at once rather than held for its lease.
		s.redirect(w, r, "", true)
		if id == "" {
			s.eng.Abandon(g, id)
		}
		return
	}
	setLockToken(w, g.Token)
	// The answer is flushed here, so that a client gone (its write fails)
	// is seen and the grant passed on. Over HTTP/1.1 the whole answer goes
	// in one write. Over HTTP/2 only its headers are flushed: the body then
	// leaves in one DATA frame that ends the stream when this handler
	// returns, where flushing it too would send the DATA frame now and an
	// empty one to end the stream after the handler, three waits for the
	// connection's writer instead of two, and the client's answer complete
	// only at the third (issue 14: a batch of granted readers shares one
	// connection's writer). A client gone before its headers are written
	// is seen as before; one that goes after its headers, in the moment
	// before the body, is not, as one that went after the DATA frame was
	// not. A grant is the client's once its answer is read to the end: a
	// stream reset before that end may be seen here (net/http reports the
	// stream closed also when the reset came just after the HEADERS frame
	// reached the client, one that closed the body unread) and passes the
	// grant on (README, "Disconnects").
	headersFirst := r.ProtoMajor >= 2
	var werr error
	if wantsText(r) {
		// With the Content-Length the answer sets, the flush below sends it
		// in one write, instead of a chunked body and its terminator.
		body := append(strconv.AppendUint(make([]byte, 0, 24), g.Token, 10), '\n')
		werr = writeBodyAfter(w, http.StatusOK, textContentType, body, headersFirst)
	} else {
		wg := s.wireGrant(g)
		werr = writeGrant(w, &wg, headersFirst)
	}
	if werr == nil && !headersFirst {
		werr = http.NewResponseController(w).Flush()
	}
	if werr != nil {
		s.eng.Abandon(g, id)
		return
	}
	// Over HTTP/2 this is the HEADERS frame written (with Lock-Token): the
	// DATA frame, which completes the answer, is timed by no one.
	s.metrics.delivered(g.Key, g.Token)
}

// release is DELETE /locks/{key}.
//
//	@Summary		Release a lock
//	@Description	The holder gives the lock up; its slot passes at once to the first waiter. The token comes from the query, a JSON body or the Lock-Token header (one of them). With `force=true` instead of a token, an operator's release: every holder of the key is released, the queue moves on, and the release events say forced; with auth_tokens or admin_tokens set it needs one of the admin_tokens. With `Accept: text/plain` the body is empty.
//	@Tags			locks
//	@Accept			json
//	@Produce		json
//	@Produce		plain
//	@Param			key			path		string				true	"lock key"
//	@Param			token		query		integer				false	"the fencing token of the grant"
//	@Param			force		query		boolean				false	"true: an operator's release of every holder (never with a token)"	Enums(true)
//	@Param			Lock-Token	header		integer				false	"the fencing token of the grant"
//	@Param			Idempotency-Key	header	string				false	"with force=true: names this forced release; a repeat under it (a retry after a lost answer) is answered as the first (200, or 404 not_held when the first found the lock free) and changes nothing, for the node's retention (1 to 256 printable ASCII characters, compared exactly, the blanks around it trimmed). Without force (a holder's release) it is checked all the same (a malformed or repeated one is a 400 naming it) and otherwise ignored"
//	@Param			body		body		api.TokenRequest	false	"the token (or force) as JSON"
//	@Success		200			{object}	api.Released
//	@Failure		307			{object}	api.Error		"this node is a standby: Location names the same call on the active"
//	@Header		307			{string}	Location		"the same call on the active"
//	@Failure		400			{object}	api.Error	"no or bad token, force other than true, force with a token, or a malformed Idempotency-Key; field names the parameter"
//	@Failure		401			{object}	api.Error	"auth_tokens is set and no valid bearer token was sent"
//	@Header		401			{string}	WWW-Authenticate	"a Bearer challenge (realm baton)"
//	@Failure		403			{object}	api.Error	"forbidden: a forced release without one of the admin_tokens; or (field Origin) a browser page of an origin cors_origins does not list"
//	@Failure		404			{object}	api.Error	"not_held: nobody holds the lock"
//	@Failure		409			{object}	api.Error	"not_holder: the lock is held under another token"
//	@Failure		422			{object}	api.Error	"idempotency_key_reused: with force=true, the Idempotency-Key is an acquire's of this key; nothing changed"
//	@Failure		413			{object}	api.Error	"the body is larger than max_body"
//	@Failure		503			{object}	api.Error	"shutting down or no active node known"
//	@Security		BearerAuth
//	@Router			/locks/{key} [delete]
func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	p, err := s.parseLockParams(w, r)
	// upTo bounds the listed grants it answers (handon.go): those written
	// with its step. A forced release (rare) leaves its grants, and a
	// refused one every grant, to the list's goroutine (without a log
	// every grant is at 0, written).
	var upTo engine.LogIndex
	released := true // releaseDone has nothing to do (no ReleaseLogged)
	switch {
	case err != nil:
	case p.Force:
		if err = s.mayForce(r); err == nil {
			// Under an Idempotency-Key, a repeat (a retry, a browser's
			// resend) changes nothing (engine.ForceReleaseID).
			id := ""
			if p.IDGiven {
				id = p.ID
			}
			err = s.eng.ForceReleaseID(p.Key, id)
		}
	default:
		s.releasing.Add(1)
		released = false
		defer s.releaseDone(&released) // should the engine panic
		upTo, err = s.eng.ReleaseLogged(p.Key, p.Token.V)
	}
	// The waiters it granted are answered first (handon.go).
	s.answerHandedOn(upTo)
	s.releaseDone(&released)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if wantsText(r) {
		writeText(w, http.StatusOK, nil)
		return
	}
	_ = writeReleased(w, &api.Released{Key: p.Key, Released: true})
}

// renew is PATCH /locks/{key}.
//
//	@Summary		Renew a lock
//	@Description	The holder restarts its lease from now (with `lease`, a new lease; default the grant's). The token comes from the query, a JSON body or the Lock-Token header (one of them). With `Accept: text/plain` the body is the token and a newline.
//	@Tags			locks
//	@Accept			json
//	@Produce		json
//	@Produce		plain
//	@Param			key			path		string				true	"lock key"
//	@Param			token		query		integer				false	"the fencing token of the grant"
//	@Param			lease		query		number				false	"new lease in seconds (> 0, at least 1e-9: the node's resolution is 1 ns; at most lease_max)"
//	@Param			Lock-Token	header		integer				false	"the fencing token of the grant"
//	@Param			body		body		api.TokenRequest	false	"token and lease as JSON"
//	@Success		200			{object}	api.Grant
//	@Header			200			{integer}	Lock-Token	"the fencing token (unchanged)"
//	@Failure		307			{object}	api.Error		"this node is a standby: Location names the same call on the active"
//	@Header		307			{string}	Location		"the same call on the active"
//	@Failure		400			{object}	api.Error	"no or bad token or lease; field names the parameter"
//	@Failure		401			{object}	api.Error	"auth_tokens is set and no valid bearer token was sent"
//	@Header		401			{string}	WWW-Authenticate	"a Bearer challenge (realm baton)"
//	@Failure		403			{object}	api.Error	"forbidden (field Origin): a browser page of an origin cors_origins does not list"
//	@Failure		404			{object}	api.Error	"not_held: nobody holds the lock"
//	@Failure		409			{object}	api.Error	"not_holder: the lock is held under another token"
//	@Failure		413			{object}	api.Error	"the body is larger than max_body"
//	@Failure		503			{object}	api.Error	"shutting down or no active node known"
//	@Security		BearerAuth
//	@Router			/locks/{key} [patch]
func (s *Server) renew(w http.ResponseWriter, r *http.Request) {
	p, err := s.parseLockParams(w, r)
	var g engine.Grant
	if err == nil {
		g, err = s.eng.Renew(p.Key, p.Token.V, seconds(p.Lease.V))
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if gate := s.cfg.Gate; gate != nil && gate.HoldsBack(g.Token) {
		// Written, but this node has just resumed from a pause (it
		// waited for the log, or for its sync standbys, across it) and
		// does not know yet whether it is still the active: a standby
		// promoted meanwhile may never have got the renewal and may have
		// given the lock away. The holder is told to retry, on the
		// active, which says whether the lock is still its own. (Once
		// the node has stepped down, engine.Renew refuses it.)
		s.redirect(w, r, "", true)
		return
	}
	setLockToken(w, g.Token)
	if wantsText(r) {
		_ = writeText(w, http.StatusOK, strconv.AppendUint(nil, g.Token, 10), '\n')
		return
	}
	wg := s.wireGrant(g)
	_ = writeGrant(w, &wg, false)
}

// status is GET /locks/{key}.
//
//	@Summary		Show one lock
//	@Description	A standby answers from its replica of the active's state, with `Baton-Replica-Lag`. With `Accept: text/plain` the body is the holder's token and a newline, or empty while nobody holds the lock.
//	@Tags			locks
//	@Produce		json
//	@Produce		plain
//	@Param			key	path		string	true	"lock key"
//	@Success		200	{object}	api.LockStatus	"holder is null while nobody holds the lock"
//	@Header			200	{number}	Baton-Replica-Lag	"on a standby: seconds since its replica was last known current"
//	@Failure		307	{object}	api.Error			"a standby that has no replica yet: Location names the same call on the active"
//	@Header		307	{string}	Location			"the same call on the active"
//	@Failure	400	{object}	api.Error		"bad key, or a parameter or a Lock-Token header (field token) was given"
//	@Failure	401	{object}	api.Error		"auth_tokens is set and no valid bearer token was sent"
//	@Header	401	{string}	WWW-Authenticate		"a Bearer challenge (realm baton)"
//	@Failure	503	{object}	api.Error		"a standby that has no replica yet and knows no active, or an active whose log cannot write changes of the key's state (disk full); see Retry-After"
//	@Header	503	{integer}	Retry-After		"seconds to wait before retrying"
//	@Security	BearerAuth
//	@Router		/locks/{key} [get]
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	const route = "GET /locks/{key}"
	if err := noParams(w, r, route); err != nil {
		s.writeError(w, r, err)
		return
	}
	li, err := s.eng.Status(strings.TrimPrefix(r.URL.Path, "/locks/"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if wantsText(r) {
		var body []byte
		if li.Holder != nil {
			body = append(strconv.AppendUint(nil, li.Holder.Token, 10), '\n')
		}
		writeText(w, http.StatusOK, body)
		return
	}
	writeJSON(w, http.StatusOK, wireStatus(li))
}

// Listing limits for GET /locks.
const (
	DefaultListLimit = 100
	MaxListLimit     = 10000
)

// list is GET /locks?prefix=&after=&limit=: keys in order, after the key
// after (the last key of the previous page), at most limit; total counts
// every key with the prefix.
//
//	@Summary		List locks
//	@Description	Sorted by key; page with `after`. A standby answers from its replica of the active's state, with `Baton-Replica-Lag`. With `Accept: text/plain`, one line per lock: key, the holder's token (`-` when free) and the number of waiters, separated by tabs.
//	@Tags			locks
//	@Produce		json
//	@Produce		plain
//	@Param			prefix	query		string	false	"only keys that start with this (UTF-8 without control characters, as a key)"
//	@Param			after	query		string	false	"only keys after this one, in byte order: the last key of the previous page (UTF-8 without control characters, as a key)"
//	@Param			limit	query		integer	false	"at most this many entries (1-10000, default 100)"
//	@Success		200		{object}	api.LockList
//	@Header			200		{number}	Baton-Replica-Lag	"on a standby: seconds since its replica was last known current"
//	@Failure		307		{object}	api.Error		"a standby that has no replica yet: Location names the same call on the active"
//	@Header		307		{string}	Location		"the same call on the active"
//	@Failure		400		{object}	api.Error	"bad parameter, or a Lock-Token header (field token); field names it"
//	@Failure		401		{object}	api.Error	"auth_tokens is set and no valid bearer token was sent"
//	@Header		401		{string}	WWW-Authenticate	"a Bearer challenge (realm baton)"
//	@Failure		503		{object}	api.Error	"a standby that has no replica yet and knows no active, or an active whose log cannot write changes the page would show (disk full); see Retry-After"
//	@Header		503		{integer}	Retry-After	"seconds to wait before retrying"
//	@Security		BearerAuth
//	@Router			/locks [get]
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q, err := strictQuery(w, r, "GET /locks", "prefix", "limit", "after")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit := DefaultListLimit
	if v := q.Get("limit"); v != "" {
		// Canonical decimal, as a token (and an acquire's limit): "01"
		// and "+1" are not 1.
		n, err := strconv.Atoi(v)
		if err != nil || !tokenSyntax(v) || n < 1 || n > MaxListLimit {
			s.writeError(w, r, badRequest("limit", "must be an integer from 1 to "+strconv.Itoa(MaxListLimit)+", got "+quoteShort(v)))
			return
		}
		limit = n
	}
	prefix, after := q.Get("prefix"), q.Get("after")
	for _, p := range [...]struct{ field, v string }{{"prefix", prefix}, {"after", after}} {
		// Keys are UTF-8 without control characters: a prefix or an
		// after that breaks the key rules is a mistake, not an empty list.
		if err := engine.CheckKeyText(p.field, p.v); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	page, total, err := s.eng.Page(prefix, after, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.LockList{Locks: make([]api.LockStatus, 0, len(page)), Total: total}
	if wantsText(r) {
		// One line per lock: key, the holder's token (- when free) and the
		// number of waiters, separated by tabs (keys hold no control
		// characters).
		var body []byte
		for _, li := range page {
			body = append(append(body, li.Key...), '\t')
			if li.Holder != nil {
				body = strconv.AppendUint(body, li.Holder.Token, 10)
			} else {
				body = append(body, '-')
			}
			body = append(strconv.AppendInt(append(body, '\t'), int64(li.Waiters), 10), '\n')
		}
		writeText(w, http.StatusOK, body)
		return
	}
	for _, li := range page {
		out.Locks = append(out.Locks, wireStatus(li))
	}
	writeJSON(w, http.StatusOK, out)
}

// healthz is GET /healthz: 200 while the process runs. Never behind auth.
//
//	@Summary	Liveness
//	@Tags		operations
//	@Produce	json
//	@Success	200	{object}	map[string]string
//	@Failure	400	{object}	api.Error	"a parameter or a body was given"
//	@Router		/healthz [get]
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if err := noParams(w, r, "GET /healthz"); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is GET /readyz: 200 on the active node that serves the lock
// calls (the gate, cluster.Node.Serving), 503 elsewhere. Open
// without a token, for load balancers.
//
//	@Summary	Readiness: 200 on the active node only
//	@Tags		operations
//	@Produce	json
//	@Success	200	{object}	map[string]string
//	@Failure	400	{object}	api.Error	"a parameter or a body was given"
//	@Failure	503	{object}	map[string]string	"not the active node (status standby), or an active that ran again after a pause and serves no lock call until it has polled every peer (status resuming)"
//	@Router		/readyz [get]
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := noParams(w, r, "GET /readyz"); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !s.eng.Active() {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "standby"})
		return
	}
	if g := s.cfg.Gate; g != nil && !g.Serving() {
		// The active role, but the lock calls are not served (gated: the
		// node ran again after a pause and has not yet polled every peer,
		// while the cluster may have promoted another): not ready either,
		// or a load balancer would send them here beside the new active.
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "resuming"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "active"})
}

// setLockToken sets the Lock-Token header of a grant's answer.
func setLockToken(w http.ResponseWriter, token uint64) {
	w.Header()[api.HeaderLockToken] = []string{strconv.FormatUint(token, 10)}
}

func (s *Server) wireGrant(g engine.Grant) api.Grant {
	return api.Grant{Key: g.Key, Token: g.Token, Lease: g.Lease.Seconds(), ExpiresAt: g.ExpiresAt.UTC(), Node: s.cfg.Node}
}

func wireStatus(li engine.LockInfo) api.LockStatus {
	st := api.LockStatus{Key: li.Key, Waiters: li.Waiters, Limit: li.Limit, Holders: make([]api.Holder, len(li.Holders))}
	for i, h := range li.Holders {
		st.Holders[i] = api.Holder{Token: h.Token, Lease: h.Lease.Seconds(), ExpiresAt: h.ExpiresAt.UTC(), GrantedAt: h.GrantedAt.UTC(), Owner: h.Owner, Mode: h.Mode.String()}
	}
	if len(st.Holders) > 0 {
		st.Holder = &st.Holders[0]
	}
	if st.Limit == 0 {
		st.Limit = 1
	}
	if !li.OldestSince.IsZero() {
		t := li.OldestSince.UTC()
		st.OldestWaitSince = &t
		st.OldestWaiterOwner, st.OldestWaiterMode = li.OldestOwner, li.OldestMode.String()
	}
	return st
}

// NewHTTPServer returns an http.Server for h that speaks HTTP/1.1 and
// cleartext HTTP/2 (h2c with prior knowledge, RFC 9113 section 3.3) on the
// same port, plus HTTP/2 by ALPN when served with TLS. Its timeouts stop
// slow-header attacks and idle connections but never cut a long poll: there
// is no ReadTimeout or WriteTimeout (a body is read under its own deadline).
// baseCtx, when cancelled, is seen by every request's context.
func NewHTTPServer(h http.Handler, baseCtx context.Context, log *slog.Logger) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           h,
		Protocols:         &p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		HTTP2: &http.HTTP2Config{
			// Go's HTTP/2 server does work per open stream for each frame it
			// writes: a cap keeps drains of many waiters fast; clients open
			// more connections beyond it (package api does, and keeps
			// streams free for renewals and releases). A stream past the
			// cap is the library's to refuse: REFUSED_STREAM, which
			// clients retry, while the client has not acknowledged these
			// SETTINGS (the only way a conforming client exceeds it); a
			// PROTOCOL_ERROR reset of that stream alone after
			// (TestStreamPastTheLimit).
			MaxConcurrentStreams: 1000,
			PingTimeout:          15 * time.Second,
			SendPingTimeout:      30 * time.Second,
		},
		BaseContext: func(net.Listener) context.Context { return baseCtx },
		ConnContext: withConn,
	}
	if log != nil {
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	}
	return srv
}
