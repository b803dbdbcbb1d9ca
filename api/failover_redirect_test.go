package api_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// staleStandby is a standby during a failover: for its first stale
// answers to /locks calls it still names the old active, which is dead
// (connections to it are refused), as a standby does until it has seen
// the promotion; after that it redirects to the new active.
func staleStandby(t *testing.T, active string, stale int64) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	var hits atomic.Int64
	standby := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/locks") {
			return // /healthz: answered by every node itself
		}
		to := active
		if hits.Add(1) <= stale {
			to = dead
		}
		http.Redirect(w, r, to+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	standby.Config.Protocols = new(http.Protocols)
	standby.Config.Protocols.SetUnencryptedHTTP2(true)
	standby.Start()
	t.Cleanup(standby.Close)
	return standby, &hits
}

// A release during a failover, while a standby still redirects to the
// dead active for more than maxRedirects (10) answers, is retried until the
// standby names the new active (SPEC section 4: retried every 200 ms for
// 5 s until the server confirms), not given up with "more than 10
// redirects" while the lock stays held for its whole lease.
func TestReleaseRetriedThroughStaleRedirects(t *testing.T) {
	active := startServer(t, engine.Config{}, nil)
	standby, hits := staleStandby(t, active.URL, 15)
	direct := newClient(t, nil, active.URL)
	ctx := ctxBound(t)
	l, err := direct.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, func(c *api.Config) { c.ReleaseRetry = 10 * time.Millisecond }, standby.URL)
	if err := c.Release(ctx, "k", l.Token); err != nil {
		t.Fatalf("release through a standby naming a dead active %d times: %v", hits.Load(), err)
	}
	if st := status(t, direct, "k"); st.Holder != nil {
		t.Fatalf("still held after the release: %+v", st.Holder)
	}
}

// An acquire during a failover likewise keeps going through a standby
// that still names the dead active (as it does through 503s, for
// failoverPatience), instead of failing with "more than 10 redirects".
func TestAcquireThroughStaleRedirects(t *testing.T) {
	active := startServer(t, engine.Config{}, nil)
	standby, hits := staleStandby(t, active.URL, 15)
	c := newClient(t, nil, standby.URL)
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatalf("acquire through a standby naming a dead active %d times: %v", hits.Load(), err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// staleGate is a native standby's gate during a failover: its first stale
// M answers name the old active, which is dead; then the new active.
type staleGate struct {
	n            atomic.Int64
	stale        int64
	dead, active string
}

func (g *staleGate) Serving() bool         { return false }
func (g *staleGate) HoldsBack(uint64) bool { return false }
func (g *staleGate) RefusedByPeers() bool  { return false }
func (g *staleGate) ActiveNative() string {
	if g.n.Add(1) <= g.stale {
		return g.dead
	}
	return g.active
}

// startStaleNativeStandby serves the native protocol as a standby behind
// a staleGate that names a dead active for its first 15 M answers.
func startStaleNativeStandby(t *testing.T, active string) (base string, gate *staleGate) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	gate = &staleGate{stale: 15, dead: dead, active: active}
	seng, err := engine.New(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	standby := native.New(seng, native.Config{Gate: gate})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = standby.Serve(ln)
	}()
	t.Cleanup(func() { standby.Close(); <-done; seng.Close() })
	return "baton://" + ln.Addr().String(), gate
}

// The same over the native protocol: M answers that name a dead active
// more than 10 times in a row neither end an acquire nor a release.
func TestNativeThroughStaleMoves(t *testing.T) {
	active := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	activeNative := strings.TrimPrefix(active.Base("native"), "baton://")
	hc := newClient(t, nil, active.URL)
	ctx := ctxBound(t)

	base, gate := startStaleNativeStandby(t, activeNative)
	c := newClient(t, nil, base)
	l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatalf("acquire through a standby naming a dead active %d times: %v", gate.n.Load(), err)
	}
	heldOnce(t, hc, "k", l.Token)

	base, gate = startStaleNativeStandby(t, activeNative)
	c = newClient(t, func(c *api.Config) { c.ReleaseRetry = 10 * time.Millisecond }, base)
	if err := c.Release(ctx, "k", l.Token); err != nil {
		t.Fatalf("release through a standby naming a dead active %d times: %v", gate.n.Load(), err)
	}
	if st := status(t, hc, "k"); st.Holder != nil {
		t.Fatalf("still held after the release: %+v", st.Holder)
	}
}

// A release attempt that got no answer within its bound (a new active
// waiting for its standbys' acknowledgements right after a failover) makes
// the next attempts avoid that node; a standby's 307 naming it must lift
// that, or every later attempt goes to the standby and is redirected
// again until ReleaseTimeout (seen in a 3-node kill -9: 187 redirects in
// 4 s, then "not confirmed", the lock held for its lease).
func TestReleaseFollowsRedirectToAvoidedNode(t *testing.T) {
	var stalled atomic.Bool
	active := startServer(t, engine.Config{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete && !stalled.Swap(true) {
				<-r.Context().Done() // no answer: the attempt's bound ends it
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	standby, _ := staleStandby(t, active.URL, 0)
	c := newClient(t, func(c *api.Config) { c.ReleaseRetry = 10 * time.Millisecond }, standby.URL)
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute)) // followed to the active
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if !stalled.Load() {
		t.Fatal("the first release attempt did not reach the active")
	}
	if st := status(t, c, "k"); st.Holder != nil {
		t.Fatalf("still held after the release: %+v", st.Holder)
	}
}

// The same over the native protocol: after a release attempt the active
// did not answer within its bound, M answers naming that active reach it
// again.
func TestNativeReleaseFollowsMoveToAvoidedNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var releases atomic.Int64
	serve := func(nc net.Conn) {
		defer nc.Close()
		br := bufio.NewReader(nc)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if answerPing(nc, line) {
				continue
			}
			f := strings.Fields(line)
			switch {
			case len(f) > 1 && f[0] == "A":
				_, _ = nc.Write([]byte(grantLine(f[1], 7) + "\n"))
			case len(f) > 1 && f[0] == "R":
				if releases.Add(1) == 1 {
					// The first release is answered only after its
					// attempt's bound (1 s): in order, as a node does.
					time.Sleep(1500 * time.Millisecond)
				}
				_, _ = nc.Write([]byte("R " + f[1] + " OK\n"))
			}
		}
	}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(nc)
		}
	}()
	base, _ := startStaleNativeStandby(t, ln.Addr().String())
	c := newClient(t, func(c *api.Config) { c.ReleaseRetry = 10 * time.Millisecond }, base)
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k") // moved to the (fake) active
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v (%d release lines reached the active)", err, releases.Load())
	}
}

// An acquire's failover patience starts again once a node has served it:
// an acquire that met a 503, was then held by the active through two
// poll_timeouts, and meets a 503 again (a second failover, later than the
// patience after the first) waits for that one too, instead of failing
// with what is left of the first failover's patience.
func TestAcquirePatienceStartsAgainOnceServed(t *testing.T) {
	api.SetFailoverPatience(t, 2*time.Second)
	var n atomic.Int64
	active := startServer(t, engine.Config{}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/locks/") {
				next.ServeHTTP(w, r)
				return
			}
			switch n.Add(1) {
			case 1, 4: // a failover: no active known
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":"unavailable","message":"no active node is known"}` + "\n"))
			case 2, 3: // served: held to a poll_timeout, the place kept
				time.Sleep(1200 * time.Millisecond)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusRequestTimeout)
				_, _ = w.Write([]byte(`{"error":"poll_timeout","message":"the place is kept"}` + "\n"))
			default:
				next.ServeHTTP(w, r)
			}
		})
	})
	c := newClient(t, nil, active.URL)
	l, err := c.Acquire(ctxBound(t), "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatalf("acquire after a second failover %v after the first: %v", 2400*time.Millisecond, err)
	}
	if l.Token == 0 || n.Load() != 5 {
		t.Fatalf("token %d after %d attempts, want a token after 5", l.Token, n.Load())
	}
}

// A renewal whose connection to the active broke (a proxy in front of it
// reset every connection: TestHistoryChaos seed 2503, cut-link) is
// redirected by a standby to that same active, now being dialled again:
// the 307 must send the next attempt there. The attempt that failed made
// the call pass over that connection, and only a 307 naming another node
// lifted that over HTTP (baton:// lifted it on any M), so every attempt
// went back to the standby and the renewal failed with "more than 10
// redirects" while the active was up.
func TestRenewFollowsRedirectToTheActiveAfterItsConnectionBroke(t *testing.T) {
	type connKey struct{}
	var broke atomic.Bool
	var renewed atomic.Int64
	active := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPatch {
			return // /healthz
		}
		if !broke.Swap(true) {
			r.Context().Value(connKey{}).(net.Conn).Close() // the reset
			return
		}
		renewed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"key":"k","token":7,"lease":60,"expires_at":"2030-01-01T00:00:00Z"}`)
	}))
	active.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	active.Config.Protocols = new(http.Protocols)
	active.Config.Protocols.SetUnencryptedHTTP2(true)
	active.Start()
	t.Cleanup(active.Close)
	standby, hits := staleStandby(t, active.URL, 0)
	c := newClient(t, nil, standby.URL)
	if _, err := c.Renew(ctxBound(t), "k", 7, time.Minute); err != nil {
		t.Fatalf("renew after the active's connection broke (%d redirects by the standby): %v", hits.Load(), err)
	}
	if !broke.Load() || renewed.Load() != 1 {
		t.Fatalf("broken=%v renewed=%d, want the first attempt broken and one renewal", broke.Load(), renewed.Load())
	}
}
