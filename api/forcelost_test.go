package api_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// A forced release over HTTP whose answer is lost after the node made it
// (its connection reset, or its stream alone reset as an HTTP/2 proxy
// does when the node behind it dies) is sent again under its own
// Idempotency-Key, which the node answers as the first without forcing
// again: the force succeeds, and the waiter the first one handed the lock
// to still holds it. (Sent again without a key, the repeat released that
// waiter too.)
func TestForceAnswerLostIsRepeatedUnderItsKey(t *testing.T) {
	for _, cut := range []string{"connection", "stream"} {
		t.Run(cut, func(t *testing.T) {
			var px atomic.Pointer[proxy]
			var made atomic.Int32
			var keys atomic.Value
			srv := startServer(t, engine.Config{}, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodDelete && r.URL.Query().Get("force") == "true" {
						keys.Store(r.Header.Get(api.HeaderIdempotencyKey))
					}
					if r.Method != http.MethodDelete || r.URL.Query().Get("force") != "true" || made.Add(1) > 1 {
						h.ServeHTTP(w, r) // a repeat is answered
						return
					}
					// The node makes the force; its answer is lost.
					h.ServeHTTP(httptest.NewRecorder(), r)
					if cut == "stream" {
						panic(http.ErrAbortHandler) // RST_STREAM, connection kept
					}
					for _, pc := range px.Load().live() {
						if pc.server.LocalAddr().String() == r.RemoteAddr {
							pc.close()
						}
					}
					<-r.Context().Done()
				})
			})
			p := startProxy(t, srv.Addr)
			px.Store(p)
			viaProxy := newClient(t, nil, p.URL()) // two connections
			direct := newClient(t, nil, srv.URL)
			eventually(t, "two proxied connections", func() bool { return len(p.live()) == 2 })
			ctx := ctxBound(t)
			if _, err := direct.Acquire(ctx, "k", api.WithLease(time.Minute)); err != nil {
				t.Fatal(err)
			}
			waiter := acquireAsync(ctx, direct, "k", api.WithLease(time.Minute))
			waitWaiters(t, direct, "k", 1)
			if err := viaProxy.ForceRelease(ctx, "k"); err != nil {
				t.Fatalf("force whose first answer was lost: %v, want nil (its repeat under the same key answered)", err)
			}
			l := get(t, waiter) // granted by the force the node made
			heldOnce(t, direct, "k", l.Token)
			if n := made.Load(); n != 2 {
				t.Fatalf("the node was asked to force %d times, want twice (the first, lost; its repeat)", n)
			}
			if k, _ := keys.Load().(string); k == "" {
				t.Fatalf("the force was sent without an Idempotency-Key")
			}
		})
	}
}

// The same over baton://: the node gets "R k force id=<id>" and makes
// it, its answer never reaches the client (the proxy holds it), and the
// connection breaks. The force is sent again on the other connection
// under the same id, which the node answers as the first without forcing
// again: ForceRelease succeeds and the waiter the first force handed the
// lock to still holds it. (Before the native force had an id, it was sent
// at most once and this was ErrUnavailable "may have been made".)
func TestNativeForceAnswerLostIsRepeatedUnderItsID(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	p := startProxy(t, srv.Native)
	viaProxy := newClient(t, nil, "baton://"+p.ln.Addr().String()) // two connections
	direct := newClient(t, nil, srv.URL)
	eventually(t, "two proxied connections", func() bool { return len(p.live()) == 2 })
	ctx := ctxBound(t)
	if _, err := direct.Acquire(ctx, "k", api.WithLease(time.Minute)); err != nil {
		t.Fatal(err)
	}
	waiter := acquireAsync(ctx, direct, "k", api.WithLease(time.Minute))
	waitWaiters(t, direct, "k", 1)
	p.HoldAfter("R k force id=")
	forced := make(chan error, 1)
	go func() { forced <- viaProxy.ForceRelease(ctx, "k") }()
	var pc *proxyConn
	select {
	case pc = <-p.held:
	case <-time.After(bound):
		t.Fatal("the force never reached the node under an id")
	}
	eventually(t, "the force made (the waiter holds k)", func() bool {
		st := status(t, direct, "k")
		return st.Holder != nil && st.Waiters == 0
	})
	pc.close()
	select {
	case err := <-forced:
		l := get(t, waiter) // granted by the force the node made
		if err != nil {
			t.Fatalf("force whose first answer was lost: %v, want nil (its repeat under the same id answered)", err)
		}
		heldOnce(t, direct, "k", l.Token)
	case <-time.After(bound):
		t.Fatal("ForceRelease never returned")
	}
}
