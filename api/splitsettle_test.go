package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// An acquire given up (its ctx ended) whose grant's answer was cut off is
// settled on the node that granted it, also when the client talks to
// another node meanwhile: here two actives at once (split brain), the
// other of which holds the key for someone else. Settled through the node
// the client preferred, the release (token known: the grant's headers
// had arrived) was refused not_holder there, or the repeat under the
// Idempotency-Key (nothing arrived) timed out there, and either way the
// grant stayed held on the node that made it for its whole lease.
func TestSettleGoesToTheNodeThatGranted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers bool // the grant's status and Lock-Token arrive, the body does not
	}{
		{"token known", true},
		{"answer lost", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var aURL, bURL atomic.Value
			granted := make(chan struct{})
			var cut atomic.Bool
			// redirect sends the key named "to-<node>" there, so that the
			// test chooses which node the client prefers.
			redirect := func(self *atomic.Value, h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					to := map[string]string{"/locks/to-a": aURL.Load().(string), "/locks/to-b": bURL.Load().(string)}[r.URL.Path]
					if to != "" && to != self.Load().(string) {
						http.Redirect(w, r, to+r.URL.RequestURI(), http.StatusTemporaryRedirect)
						return
					}
					h.ServeHTTP(w, r)
				})
			}
			a := startServer(t, engine.Config{}, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPost && r.URL.Path == "/locks/sb" && cut.CompareAndSwap(false, true) {
						// The grant is made; its answer never arrives in full.
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, r)
						if tc.headers {
							for k, v := range rec.Header() {
								w.Header()[k] = v
							}
							w.WriteHeader(rec.Code)
							_, _ = w.Write(rec.Body.Bytes()[:1])
							w.(http.Flusher).Flush()
						}
						close(granted)
						<-r.Context().Done()
						return
					}
					redirect(&aURL, h).ServeHTTP(w, r)
				})
			})
			b := startServer(t, engine.Config{}, func(h http.Handler) http.Handler {
				return redirect(&bURL, h)
			})
			aURL.Store(a.URL)
			bURL.Store(b.URL)
			ctx := ctxBound(t)
			// On b, the key is held by someone else.
			other := newClient(t, nil, b.URL)
			if _, err := other.Acquire(ctx, "sb", api.WithLease(time.Minute)); err != nil {
				t.Fatal(err)
			}
			onA := newClient(t, nil, a.URL)

			c, err := api.NewClient(api.Config{Addresses: []string{a.URL, b.URL}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The client prefers a, which grants sb.
			l, err := c.Acquire(ctx, "to-a")
			if err != nil || !strings.HasPrefix(l.Node, a.URL) {
				t.Fatalf("to-a: %+v, %v; want a grant by %s", l, err, a.URL)
			}
			actx, cancel := context.WithCancel(ctx)
			res := acquireAsync(actx, c, "sb", api.WithLease(time.Minute))
			select {
			case <-granted:
			case <-ctx.Done():
				t.Fatal("no grant on a")
			}
			// Meanwhile the client came to prefer b (it served a change).
			if l, err := c.Acquire(ctx, "to-b"); err != nil || !strings.HasPrefix(l.Node, b.URL) {
				t.Fatalf("to-b: %+v, %v; want a grant by %s", l, err, b.URL)
			}
			cancel()
			if r := <-res; !errors.Is(r.err, context.Canceled) {
				t.Fatalf("the cancelled acquire: %+v, %v", r.l, r.err)
			}
			c.Close() // waits for the settling
			if st := status(t, onA, "sb"); st.Holder != nil {
				t.Fatalf("sb still held on the node that granted it, token %d, after the acquire was given up and settled", st.Holder.Token)
			}
		})
	}
}

// Lock.Release goes to the node that granted the lock, also when the
// client talks to another node meanwhile (two actives at once, the other
// of which holds the key for someone else): sent to the preferred node,
// it was refused not_holder there, Release returned ErrNotHolder, and the
// lock stayed held on the node that granted it for its whole lease.
func TestLockReleaseGoesToTheNodeThatGranted(t *testing.T) {
	var aURL, bURL atomic.Value
	redirect := func(self *atomic.Value) func(http.Handler) http.Handler {
		return func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				to := map[string]string{"/locks/to-a": aURL.Load().(string), "/locks/to-b": bURL.Load().(string)}[r.URL.Path]
				if to != "" && to != self.Load().(string) {
					http.Redirect(w, r, to+r.URL.RequestURI(), http.StatusTemporaryRedirect)
					return
				}
				h.ServeHTTP(w, r)
			})
		}
	}
	a := startServer(t, engine.Config{}, redirect(&aURL))
	b := startServer(t, engine.Config{}, redirect(&bURL))
	aURL.Store(a.URL)
	bURL.Store(b.URL)
	ctx := ctxBound(t)
	other := newClient(t, nil, b.URL)
	if _, err := other.Acquire(ctx, "sb", api.WithLease(time.Minute)); err != nil {
		t.Fatal(err)
	}
	onA := newClient(t, nil, a.URL)
	c := newClient(t, nil, a.URL, b.URL)
	if l, err := c.Acquire(ctx, "to-a"); err != nil || !strings.HasPrefix(l.Node, a.URL) {
		t.Fatalf("to-a: %+v, %v; want a grant by %s", l, err, a.URL)
	}
	l, err := c.Acquire(ctx, "sb", api.WithLease(time.Minute))
	if err != nil || !strings.HasPrefix(l.Node, a.URL) {
		t.Fatalf("sb: %+v, %v; want a grant by %s", l, err, a.URL)
	}
	// The client comes to prefer b (it served a change).
	if l, err := c.Acquire(ctx, "to-b"); err != nil || !strings.HasPrefix(l.Node, b.URL) {
		t.Fatalf("to-b: %+v, %v; want a grant by %s", l, err, b.URL)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release of the grant of %s: %v", a.URL, err)
	}
	if st := status(t, onA, "sb"); st.Holder != nil {
		t.Fatalf("sb still held on the node that granted it, token %d, after its release", st.Holder.Token)
	}
}
