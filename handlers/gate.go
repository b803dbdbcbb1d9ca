package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/errcode"
)

// Gate tells the HTTP layer whether this node serves /locks, and where the
// active is when it does not. The cluster implements it; a single node has
// none and always serves.
type Gate interface {
	// Serving reports whether this node is the active.
	Serving() bool
	// HoldsBack reports whether the grant of token must not reach its
	// client: this node has just run again after a pause (stopped or
	// starved for longer than the failover timeout) and does not yet know
	// whether it is still the active, or it made the grant then and has
	// since left the active role (see cluster.Node.HoldsBack). Token 0
	// asks the same of an acquire's 408 timeout, which may be false then.
	HoldsBack(token uint64) bool
	// ActiveURL returns the active's base URL ("http://host:port"), and
	// done, to call once the call has acted on it (see
	// cluster.Node.ActiveURL): an acquire served here once it has its
	// outcome or its place in the queue, any other call once answered.
	// While a failover or handoff is under way it may wait for one to
	// become known, and for the calls that waited before it to go on,
	// bounded by ctx and a short timeout; "" means none is known.
	ActiveURL(ctx context.Context) (url string, done func())
	// RefusedByPeers reports whether every other peer refuses this node's
	// peer requests (its cluster_secret differs): the reason it knows no
	// active, which its 503 then names.
	RefusedByPeers() bool
	// ReplicaLag reports whether this node is a standby that holds a whole
	// replica of the active's state, and how old it may be (see
	// cluster.Node.ReplicaLag). With ok, the read calls are answered here
	// with HeaderReplicaLag; without, they are redirected like the others.
	ReplicaLag() (lag time.Duration, ok bool)
}

// gated puts h behind the gate of every /locks route: on a standby each
// call is answered 307 to the same path and query on the active, or 503
// with Retry-After while no active is known (SPEC section 3). It wraps the
// handler instead of being a chi middleware: a middleware chain is three
// more frames on the stack of every parked request.
func (s *Server) gated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if g := s.cfg.Gate; g != nil && !g.Serving() {
			s.standbyCall(w, r, h)
			return
		}
		h(w, r)
	}
}

// turnKey is the request context key of the done of a call that waited
// for an active and is served here (standbyCall): its turn among those
// calls, which placed ends.
type turnKey struct{}

// standbyCall answers a call that found this node a standby: 307 to the
// active, or 503 while none is known; or, when this node became the
// active while the call waited for one, serves it with h in its turn
// (Gate.ActiveURL): an acquire ends its turn once it has its place in the
// queue (placed), any other call once h returns.
func (s *Server) standbyCall(w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	active, done := s.cfg.Gate.ActiveURL(r.Context())
	defer done()
	if s.redirectTo(w, r, active, "", false) {
		return
	}
	h(w, r.WithContext(context.WithValue(r.Context(), turnKey{}, done)))
}

// turn returns the done of r's turn (standbyCall), or nil when r did not
// wait for an active.
func turn(r *http.Request) func() {
	done, _ := r.Context().Value(turnKey{}).(func())
	return done
}

// placed ends the turn of r, an acquire that now has its outcome or its
// place in the key's queue: the calls that waited for an active after it
// go on (cluster.Node.ActiveURL).
func placed(r *http.Request) {
	if done := turn(r); done != nil {
		done()
	}
}

// gatedRead puts a read call (GET /locks, GET /locks/{key}) behind the
// gate: a standby with a replica answers it from its own engine, which holds
// the replicated state, and says how old that state may be in
// Baton-Replica-Lag (SPEC section 2, "Reads on standbys"); a standby without
// one redirects it like gated does.
func (s *Server) gatedRead(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if g := s.cfg.Gate; g != nil && !g.Serving() {
			if !s.setReplicaLag(w) && s.redirect(w, r, "", false) {
				return
			}
		}
		h(w, r)
	}
}

// setReplicaLag sets Baton-Replica-Lag on a standby that holds a replica
// and reports whether it did.
func (s *Server) setReplicaLag(w http.ResponseWriter) bool {
	g := s.cfg.Gate
	if g == nil || g.Serving() {
		return false
	}
	lag, ok := g.ReplicaLag()
	if ok {
		w.Header().Set(api.HeaderReplicaLag, strconv.FormatFloat(lag.Seconds(), 'f', 3, 64))
	}
	return ok
}

// redirect answers r with 307 to the same call on the active, or 503 with
// Retry-After while no active is known, and returns true. ticket, if set, is
// the waiter's server ticket: the active resumes its queue place by it (SPEC
// section 3, graceful handoff). moved tells a parked acquire that lost its
// engine (it is resumed by a repeat, even on this node) from a call that
// has not started: one of those that waited while this node was promoted
// is not redirected but served here, and redirect returns false.
func (s *Server) redirect(w http.ResponseWriter, r *http.Request, ticket string, moved bool) bool {
	var active string
	if g := s.cfg.Gate; g != nil {
		var done func()
		active, done = g.ActiveURL(r.Context())
		defer done()
	}
	return s.redirectTo(w, r, active, ticket, moved)
}

// redirectTo is redirect once the active is known to be active ("": none
// is known).
func (s *Server) redirectTo(w http.ResponseWriter, r *http.Request, active, ticket string, moved bool) bool {
	g := s.cfg.Gate
	if active == s.cfg.Node {
		if !g.Serving() {
			active = ""
		} else if !moved {
			return false
		}
	}
	if active == "" {
		// A 503 with Retry-After (writeError), saying why.
		s.writeError(w, r, errcode.NoActive(g != nil && g.RefusedByPeers()))
		return true
	}
	// The query goes on as the client wrote it (SPEC section 3: "the same
	// path and query"): rebuilt from its parsed form, a part that does not
	// parse would vanish, and the active would serve another call than the
	// one it answers 400. A ticket is added only to a parked acquire, whose
	// query parsed.
	query := r.URL.RawQuery
	if ticket != "" {
		q := r.URL.Query()
		q.Set("ticket", ticket)
		query = q.Encode()
	}
	loc := active + r.URL.EscapedPath()
	if query != "" {
		loc += "?" + query
	}
	w.Header().Set("Location", loc)
	writeErrorBody(w, r, http.StatusTemporaryRedirect, api.Error{Code: api.CodeNotActive, Message: "this node is a standby; the active is " + active})
	return true
}

// movedTicket reports whether err means "call the active instead", and the
// waiter ticket to carry along.
func movedTicket(err error) (string, bool) {
	var me *engine.MovedError
	if errors.As(err, &me) {
		return engine.Ticket(me.ID), true
	}
	return "", errors.Is(err, engine.ErrNotActive)
}

func (s *Server) countError(code string) {
	if s.onError != nil {
		s.onError(code)
	}
}
