package api_test

import (
	"context"
	"errors"
	"fmt"
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

// splitNodes is two fake native nodes, a and b, both active (a split
// brain), each with the client's one connection, whose request lines the
// test reads in order (next) and answers.
type splitNodes struct {
	fakes []*fakeNode
	conns []*fakeConn
	lines <-chan nodeLine
	next  func() nodeLine
}

func newSplitNodes(t *testing.T) (*splitNodes, *api.Client) {
	t.Helper()
	fakes := []*fakeNode{newFakeNode(t), newFakeNode(t)}
	c := newClient(t, func(c *api.Config) { c.ConnsPerAddress = 1 }, fakes[0].Base(), fakes[1].Base())
	conns := []*fakeConn{fakes[0].accept(t), fakes[1].accept(t)}
	lines, next := requestLines(t, conns)
	return &splitNodes{fakes, conns, lines, next}, c
}

// prefer makes node n the client's preferred one: a probe release that
// reaches the other node is answered M n there, and OK by n.
func (s *splitNodes) prefer(t *testing.T, c *api.Client, n int) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Release(t.Context(), "probe", 1) }()
	for {
		l := s.next()
		if l.line != "R probe 1" {
			t.Fatalf("probe: node %d got %q", l.node, l.line)
		}
		if l.node == n {
			s.conns[n].send(t, "R probe OK")
			break
		}
		s.conns[l.node].send(t, "R probe M "+s.fakes[n].ln.Addr().String())
	}
	if err := <-done; err != nil {
		t.Fatalf("probe: %v", err)
	}
}

// released waits until node n gets the release of key under token and
// confirms it; the other node, which knows nothing of the grant, answers
// it not_holder.
func (s *splitNodes) released(t *testing.T, n int, key string, token uint64) {
	t.Helper()
	want := fmt.Sprintf("R %s %d", key, token)
	refused := 0
	for {
		var l nodeLine
		select {
		case l = <-s.lines:
		case <-time.After(bound):
			t.Fatalf("node %d never got the release %q of its grant (the other node got it %d times, answered not_holder)", n, want, refused)
		}
		switch {
		case l.line == want && l.node == n:
			s.conns[n].send(t, "R "+key+" OK")
			return
		case l.line == want:
			refused++
			s.conns[l.node].send(t, "R "+key+" E not_holder the lock is held under another token")
		default:
			t.Fatalf("node %d got %q, want the release %q on node %d", l.node, l.line, want, n)
		}
	}
}

// The native client settles a given-up acquire on the node that granted it
// (as TestSettleGoesToTheNodeThatGranted over HTTP): a late grant is
// released there, and a late E unavailable (a node resuming from a
// pause, which keeps the grant for the repeat) is repeated there, also
// when the client came to prefer another active meanwhile, which knows
// nothing of the grant and answers the release not_holder.
func TestNativeSettleGoesToTheNodeThatGranted(t *testing.T) {
	for _, tc := range []struct {
		name string
		late string // node a's late answer to the acquire given up
	}{
		{"late grant", grantLine("sb", 77)},
		{"late unavailable", "A sb E unavailable resuming from a pause"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := newSplitNodes(t)
			s.prefer(t, c, 0)
			actx, cancel := context.WithCancel(t.Context())
			res := acquireAsync(actx, c, "sb", api.WithLease(time.Minute))
			acq := s.next()
			if acq.node != 0 || !strings.HasPrefix(acq.line, "A sb ") {
				t.Fatalf("acquire: node %d got %q, want node 0 to get it", acq.node, acq.line)
			}
			s.prefer(t, c, 1)
			cancel()
			if r := <-res; !errors.Is(r.err, context.Canceled) {
				t.Fatalf("the cancelled acquire: %+v, %v", r.l, r.err)
			}
			s.conns[0].send(t, tc.late)
			if strings.Contains(tc.late, " E ") {
				// The repeat (wait 1 ms) under the acquire's id.
				for timedOut := 0; ; {
					var l nodeLine
					select {
					case l = <-s.lines:
					case <-time.After(bound):
						t.Fatalf("node 0 never got the settling repeat (the other node got it %d times, answered T)", timedOut)
					}
					if !strings.HasPrefix(l.line, "A sb ") {
						t.Fatalf("node %d got %q, want the settling repeat", l.node, l.line)
					}
					if l.node == 0 {
						s.conns[0].send(t, grantLine("sb", 77))
						break
					}
					timedOut++
					s.conns[1].send(t, "A sb T")
				}
			}
			s.released(t, 0, "sb", 77)
			c.Close() // waits for the settling
		})
	}
}

// Lock.Release over baton:// goes to the node that granted the lock (as
// TestLockReleaseGoesToTheNodeThatGranted over HTTP).
func TestNativeLockReleaseGoesToTheNodeThatGranted(t *testing.T) {
	s, c := newSplitNodes(t)
	s.prefer(t, c, 0)
	res := acquireAsync(t.Context(), c, "sb", api.WithLease(time.Minute))
	if acq := s.next(); acq.node != 0 || !strings.HasPrefix(acq.line, "A sb ") {
		t.Fatalf("acquire: node %d got %q, want node 0 to get it", acq.node, acq.line)
	}
	s.conns[0].send(t, grantLine("sb", 77))
	l := get(t, res)
	s.prefer(t, c, 1)
	rel := make(chan error, 1)
	go func() { rel <- l.Release(t.Context()) }()
	s.released(t, 0, "sb", 77)
	if err := <-rel; err != nil {
		t.Fatalf("release of node 0's grant: %v", err)
	}
}
