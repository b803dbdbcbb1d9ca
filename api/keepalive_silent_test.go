package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// A keep-alive whose renewal goes unanswered by the active (paused, or
// cut off without a reset: its connections stay open until a PING fails,
// up to 20 s) tries the other nodes with its next attempts. Every attempt
// went to the active the client had been redirected to, so a 3-node
// cluster with sync_standbys 1 whose active was stopped (SIGSTOP) for 7 s
// lost a 4 s lease at its end while the promoted standby, which held the
// grant, would have renewed it (seen with baton serve and kill -STOP).
func TestKeepAlivePassesOverASilentActive(t *testing.T) {
	var silent, promoted atomic.Bool
	var served atomic.Pointer[http.Handler]
	active := startServer(t, engine.Config{}, func(h http.Handler) http.Handler {
		served.Store(&h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if silent.Load() && r.Method == http.MethodPatch {
				<-r.Context().Done() // a paused node: never answered
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	// The standby: it redirects to the active until it is promoted, then
	// serves the same state (the grant replicated to it).
	standby := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/locks") {
			return
		}
		if promoted.Load() {
			(*served.Load()).ServeHTTP(w, r)
			return
		}
		http.Redirect(w, r, active.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	standby.Config.Protocols = new(http.Protocols)
	standby.Config.Protocols.SetUnencryptedHTTP2(true)
	standby.Start()
	t.Cleanup(standby.Close)

	c := newClient(t, nil, standby.URL)
	ctx := ctxBound(t)
	const lease = 2 * time.Second
	l, err := c.Acquire(ctx, "k", api.WithLease(lease)) // followed to the active
	if err != nil {
		t.Fatal(err)
	}
	first := l.Expiry()
	silent.Store(true)
	promoted.Store(true)
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.KeepAlive(kctx)
	select {
	case <-l.Lost():
		t.Fatalf("lost while another node would renew: %v", l.Err())
	case <-time.After(lease + lease/2):
	}
	if !l.Expiry().After(first) {
		t.Fatalf("never renewed: expiry %v, first %v", l.Expiry(), first)
	}
}

// A 307 naming the node a keep-alive's attempt found silent does not send
// the next attempt back to it: a standby still names the paused active
// until it has seen the promotion (about failover_timeout), and each
// attempt that followed its 307 to the silent active waited there a
// quarter lease. Here the standby is promoted after its third redirect:
// while a 307 lifted the avoided connection, at most two of them came
// before the lease ran out (one per attempt), and the lock was lost.
func TestKeepAliveKeepsAvoidingASilentActiveARedirectNames(t *testing.T) {
	var silent atomic.Bool
	var redirects atomic.Int32
	var served atomic.Pointer[http.Handler]
	srv := startServer(t, engine.Config{}, func(h http.Handler) http.Handler {
		served.Store(&h)
		return h
	})
	// A paused node: once silent, nothing comes from it (no answer, no
	// HTTP/2 PING's either), and its connections stay open.
	active := "http://" + silentProxy(t, srv.Addr, &silent)
	// The standby: it redirects to the active (three times once the
	// active is silent), then serves the same state.
	standby := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/locks") {
			return
		}
		if silent.Load() && redirects.Add(1) > 3 {
			(*served.Load()).ServeHTTP(w, r)
			return
		}
		http.Redirect(w, r, active+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	standby.Config.Protocols = new(http.Protocols)
	standby.Config.Protocols.SetUnencryptedHTTP2(true)
	standby.Start()
	t.Cleanup(standby.Close)

	c := newClient(t, nil, standby.URL)
	ctx := ctxBound(t)
	const lease = 2 * time.Second
	l, err := c.Acquire(ctx, "k", api.WithLease(lease)) // followed to the active
	if err != nil {
		t.Fatal(err)
	}
	first := l.Expiry()
	silent.Store(true)
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.KeepAlive(kctx)
	select {
	case <-l.Lost():
		t.Fatalf("lost while another node would renew (%d redirects): %v", redirects.Load(), l.Err())
	case <-time.After(lease + lease/2):
	}
	if !l.Expiry().After(first) {
		t.Fatalf("never renewed: expiry %v, first %v", l.Expiry(), first)
	}
}
