package api_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// bound is the generous upper bound on anything that should happen within
// a few round trips (or one 3 s reconnect): it only turns a hang into a
// failure, it measures nothing.
const bound = 20 * time.Second

func ctxBound(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 10 ms until it holds, failing after bound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after %v", what, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func status(t *testing.T, c *api.Client, key string) *api.LockStatus {
	t.Helper()
	st, err := c.Status(ctxBound(t), key)
	if err != nil {
		t.Fatalf("status %q: %v", key, err)
	}
	return st
}

// waiters waits until key has n waiters (as the node sees it).
func waitWaiters(t *testing.T, c *api.Client, key string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d waiters on %q", n, key), func() bool { return status(t, c, key).Waiters == n })
}

type result struct {
	l   *api.Lock
	err error
}

func acquireAsync(ctx context.Context, c *api.Client, key string, opts ...api.AcquireOption) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := c.Acquire(ctx, key, opts...)
		ch <- result{l, err}
	}()
	return ch
}

func get(t *testing.T, ch <-chan result) *api.Lock {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("acquire: %v", r.err)
		}
		return r.l
	case <-time.After(bound):
		t.Fatalf("acquire did not return within %v", bound)
	}
	return nil
}

// heldOnce checks that key is held under token with nobody queued.
func heldOnce(t *testing.T, c *api.Client, key string, token uint64) {
	t.Helper()
	st := status(t, c, key)
	if st.Holder == nil || st.Holder.Token != token || st.Waiters != 0 {
		t.Fatalf("status %q = holder %+v, %d waiters; want token %d and no waiters", key, st.Holder, st.Waiters, token)
	}
}

// heldAlone waits (eventually) until key is held under token with no
// waiter: a transient waiter, such as a client's settling repeat of an
// acquire it gave up, may come and go first.
func heldAlone(t *testing.T, c *api.Client, key string, token uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("held by token %d alone", token), func() bool {
		st := status(t, c, key)
		return st.Holder != nil && st.Holder.Token == token && st.Waiters == 0
	})
}

// Many goroutines acquiring through one client share its two connections
// to a single address.
func TestSharedConnections(t *testing.T) {
	srv := startServer(t, engine.Config{}, nil)
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var tokens []uint64
	errs := make(chan error, 100)
	for i := range 100 {
		key := "shared" // half of them queue on one key
		if i%2 == 1 {
			key = fmt.Sprintf("own/%d", i)
		}
		wg.Go(func() {
			l, err := c.Acquire(ctx, key, api.WithLease(time.Minute))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			tokens = append(tokens, l.Token)
			mu.Unlock()
			if err := l.Release(ctx); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[uint64]bool{}
	for _, tok := range tokens {
		if seen[tok] {
			t.Errorf("token %d granted twice", tok)
		}
		seen[tok] = true
	}
	if len(tokens) != 100 {
		t.Errorf("%d grants, want 100", len(tokens))
	}
	if n := srv.Accepted(); n != 2 {
		t.Errorf("the node accepted %d connections, want 2 (one address: two connections)", n)
	}
}

// With several addresses, one connection each.
func TestOneConnectionPerAddress(t *testing.T) {
	a := startServer(t, engine.Config{}, nil)
	b := startServer(t, engine.Config{}, nil)
	c := newClient(t, nil, a.URL, b.URL)
	for i := range 10 {
		status(t, c, fmt.Sprint("k", i))
	}
	// Each node accepts its connection in its own time (a loaded machine
	// ran the calls on a's before b's accept loop counted b's): wait for
	// both, then count.
	eventually(t, "a connection accepted by each node", func() bool { return a.Accepted() >= 1 && b.Accepted() >= 1 })
	if na, nb := a.Accepted(), b.Accepted(); na != 1 || nb != 1 {
		t.Errorf("accepted %d and %d connections, want 1 and 1", na, nb)
	}
}

// setupProxied starts a node, a proxy in front of it, a client through the
// proxy (one address: two connections) and a direct client.
func setupProxied(t *testing.T, ecfg engine.Config) (srv *testServer, p *proxy, viaProxy, direct *api.Client) {
	srv = startServer(t, ecfg, nil)
	p = startProxy(t, srv.Addr)
	viaProxy = newClient(t, nil, p.URL())
	direct = newClient(t, nil, srv.URL)
	// Both proxied connections up, and used once.
	eventually(t, "two proxied connections", func() bool { return len(p.live()) == 2 })
	status(t, viaProxy, "warm")
	status(t, viaProxy, "warm")
	return
}

// A connection cut while an acquire waits: the acquire continues on the
// other connection under the same Idempotency-Key and gets the lock once.
func TestAcquireMovesOnWhenConnectionDrops(t *testing.T) {
	_, p, viaProxy, direct := setupProxied(t, engine.Config{})
	ctx := ctxBound(t)
	holder, err := direct.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	before := map[*proxyConn]int64{}
	for _, pc := range p.live() {
		before[pc] = pc.up.Load()
	}
	res := acquireAsync(ctx, viaProxy, "k", api.WithLease(time.Minute))
	waitWaiters(t, direct, "k", 1)
	// The connection that carried the acquire is the one that sent bytes.
	var carrier *proxyConn
	for _, pc := range p.live() {
		if pc.up.Load() > before[pc] {
			if carrier != nil {
				t.Fatal("both connections sent bytes during the acquire")
			}
			carrier = pc
		}
	}
	if carrier == nil {
		t.Fatal("no connection carried the acquire")
	}
	carrier.close()
	// The repeat takes over the place (or re-queues once the node saw the
	// disconnect): one waiter either way, never two.
	waitWaiters(t, direct, "k", 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := get(t, res)
	heldOnce(t, direct, "k", l.Token)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st := status(t, direct, "k"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("after release: %+v", st)
	}
}

// The grant's answer is lost with its connection: the repeat on the other
// connection gets the same grant instead of queueing behind it.
func TestAcquireGrantAnswerLost(t *testing.T) {
	_, p, viaProxy, direct := setupProxied(t, engine.Config{})
	ctx := ctxBound(t)
	holder, err := direct.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	res := acquireAsync(ctx, viaProxy, "k", api.WithLease(time.Minute))
	waitWaiters(t, direct, "k", 1)
	p.DropOnReply()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.dropped:
	case <-time.After(bound):
		t.Fatal("the grant's answer never came")
	}
	l := get(t, res)
	heldOnce(t, direct, "k", l.Token)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A release whose first attempts fail (the proxy refuses connections for a
// second) is retried, lands within the 5 s, and the waiter gets the lock.
func TestReleaseRetriedUntilConfirmed(t *testing.T) {
	_, p, viaProxy, direct := setupProxied(t, engine.Config{})
	ctx := ctxBound(t)
	l, err := viaProxy.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	res := acquireAsync(ctx, direct, "k", api.WithLease(time.Minute))
	waitWaiters(t, direct, "k", 1)

	const refuse = time.Second
	p.Refuse(refuse)
	start := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	// Lower bound: no attempt could get through while the proxy refused.
	if el := time.Since(start); el < refuse/2 {
		t.Fatalf("released after %v, while the proxy refused connections", el)
	}
	next := get(t, res)
	heldOnce(t, direct, "k", next.Token)
	if next.Token <= l.Token {
		t.Fatalf("next token %d <= %d", next.Token, l.Token)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A release answered 503 may have been made (a node whose log took it
// but could not write it, engine.ErrNotWritten): when the repeat finds the
// lock not held, the release is done (nil), not ErrNotHeld.
func TestReleaseAnsweredUnavailableThenNotHeldIsDone(t *testing.T) {
	var answered503 atomic.Bool
	srv := startServer(t, engine.Config{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete && !answered503.Swap(true) {
				h.ServeHTTP(httptest.NewRecorder(), r) // made...
				w.Header().Set("Retry-After", "1")     // ...but answered as not written
				http.Error(w, `{"error":"unavailable","message":"the node made the change but cannot write it to its log"}`, http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	c := newClient(t, func(c *api.Config) { c.ReleaseRetry = 10 * time.Millisecond }, srv.URL)
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, "k", l.Token); err != nil {
		t.Fatalf("release answered 503, then not_held: %v; want nil", err)
	}
	if !answered503.Load() {
		t.Fatal("the release was not answered 503")
	}
	if err := c.Release(ctx, "k", l.Token); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("release of a lock nobody holds: %v; want ErrNotHeld", err)
	}
}

// A release that cannot reach any node gives up after ReleaseTimeout.
func TestReleaseGivesUp(t *testing.T) {
	srv := startServer(t, engine.Config{}, nil)
	c := newClient(t, func(c *api.Config) { c.ReleaseTimeout = 600 * time.Millisecond }, srv.URL)
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	err = l.Release(ctx)
	if !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("release with the node gone: %v, want ErrUnavailable", err)
	}
}

// dialLog records the dial attempts of a client.
type dialLog struct {
	mu     sync.Mutex
	events []dialEvent
	ch     chan dialEvent
}

type dialEvent struct {
	at  time.Time
	err error
}

func (d *dialLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	ev := dialEvent{time.Now(), err}
	d.mu.Lock()
	d.events = append(d.events, ev)
	d.mu.Unlock()
	select {
	case d.ch <- ev:
	default:
	}
	return c, err
}

// After the node goes away, each connection is redialled every 3 s in the
// background; once the node is back, the client reconnects with the next
// attempt and calls work again.
func TestReconnectEvery3s(t *testing.T) {
	if testing.Short() {
		t.Skip("waits through reconnect intervals")
	}
	srv := startServer(t, engine.Config{}, nil)
	dl := &dialLog{ch: make(chan dialEvent, 64)}
	c := newClient(t, func(c *api.Config) { c.DialContext = dl.dial; c.ConnsPerAddress = 1 }, srv.URL)
	status(t, c, "k")
	srv.Stop()
	// Two failed attempts, 3 s apart at least.
	var fails []dialEvent
	for len(fails) < 2 {
		select {
		case ev := <-dl.ch:
			if ev.err != nil {
				fails = append(fails, ev)
			}
		case <-time.After(bound):
			t.Fatal("no redial attempts")
		}
	}
	if gap := fails[1].at.Sub(fails[0].at); gap < api.DefaultReconnectInterval {
		t.Fatalf("redials %v apart, want >= %v", gap, api.DefaultReconnectInterval)
	}
	// While down, calls fail at once instead of hanging.
	if _, err := c.Status(ctxBound(t), "k"); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("status with the node down: %v, want ErrUnavailable", err)
	}
	srv.Restart(t)
	var ok dialEvent
	for ok.at.IsZero() {
		select {
		case ev := <-dl.ch:
			if ev.err == nil {
				ok = ev
			} else {
				fails = append(fails, ev)
			}
		case <-time.After(bound):
			t.Fatal("no reconnect")
		}
	}
	if gap := ok.at.Sub(fails[len(fails)-1].at); gap < api.DefaultReconnectInterval {
		t.Fatalf("reconnected %v after the last failed attempt, want >= %v", gap, api.DefaultReconnectInterval)
	}
	eventually(t, "a call through the new connection", func() bool {
		_, err := c.Status(ctxBound(t), "k")
		return err == nil
	})
	if n := srv.Accepted(); n != 1 {
		t.Fatalf("the restarted node accepted %d connections, want 1", n)
	}
}

// A poll_timeout (the node ends long polls early) is resumed under the
// same Idempotency-Key: the acquire keeps its place and gets the lock.
func TestPollTimeoutResumed(t *testing.T) {
	var polls atomic.Int64
	count := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &statusRecorder{ResponseWriter: w}
			h.ServeHTTP(rec, r)
			if rec.status == http.StatusRequestTimeout {
				polls.Add(1)
			}
		})
	}
	srv := startServer(t, engine.Config{PollTimeout: 100 * time.Millisecond}, count)
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	holder, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	res := acquireAsync(ctx, c, "k")
	eventually(t, "three poll timeouts", func() bool { return polls.Load() >= 3 })
	if st := status(t, c, "k"); st.Waiters != 1 {
		t.Fatalf("%d waiters after poll timeouts, want 1", st.Waiters)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := get(t, res)
	heldOnce(t, c, "k", l.Token)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// A standby answers 307 to the active: the client follows, and talks to
// the active directly from then on.
func TestRedirectFollowed(t *testing.T) {
	active := startServer(t, engine.Config{}, nil)
	var standbyHits atomic.Int64
	standby := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			// Answered by every node itself (the client's first round
			// trip on a new connection).
			return
		}
		standbyHits.Add(1)
		http.Redirect(w, r, active.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	standby.Config.Protocols = new(http.Protocols)
	standby.Config.Protocols.SetUnencryptedHTTP2(true)
	standby.Start()
	defer standby.Close()

	c := newClient(t, nil, standby.URL)
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k/with space", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if l.Key != "k/with space" {
		t.Fatalf("key %q", l.Key)
	}
	heldOnce(t, c, "k/with space", l.Token)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := standbyHits.Load(); n != 1 {
		t.Fatalf("the standby was asked %d times, want once", n)
	}
	if n := active.Accepted(); n != 2 {
		t.Fatalf("the active accepted %d connections, want 2", n)
	}
}

// A release retried through a failover may be redirected on each attempt
// (a standby sends it to the active it knows, which answers 503 while it
// is not yet serving): those redirects are no loop, and the release goes
// on until a node confirms it. It used to count every 307 of the whole
// 5 s window and fail with "more than 10 redirects" after the eleventh,
// leaving the lock held for the rest of its lease (found by the cluster's
// TestSyncHistoryChaos: kill of every node, then a restart). The same for
// an acquire told 503 between redirects.
func TestRedirectsCountedInARowOnly(t *testing.T) {
	var hits atomic.Int64
	var srv *httptest.Server
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		// Odd hits: a standby's 307; even hits: the 503 of a node not
		// yet serving; from the 30th hit on, a grant or a release.
		switch n := hits.Add(1); {
		case n%2 == 1 && n < 30:
			http.Redirect(w, r, srv.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		case n < 30:
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":"unavailable","message":"no active node is known at the moment; retry"}`)
		case r.Method == http.MethodPost:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(api.HeaderLockToken, "7")
			fmt.Fprint(w, `{"key":"k","token":7,"lease":60,"expires_at":"2030-01-01T00:00:00Z"}`)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()

	c := newClient(t, func(cfg *api.Config) { cfg.ReleaseRetry = time.Millisecond }, srv.URL)
	ctx := ctxBound(t)
	if err := c.Release(ctx, "k", 7); err != nil {
		t.Fatalf("release redirected once on each of its 15 attempts: %v", err)
	}
	hits.Store(0)
	l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatalf("acquire redirected once on each of its 15 attempts: %v", err)
	}
	if l.Token != 7 {
		t.Fatalf("token %d, want 7", l.Token)
	}
}

// List and Cluster-independent calls.
func TestList(t *testing.T) {
	srv := startServer(t, engine.Config{}, nil)
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	for _, k := range []string{"a/1", "a/2", "b/1"} {
		if _, err := c.Acquire(ctx, k, api.WithLease(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	ll, err := c.List(ctx, "a/", 1)
	if err != nil {
		t.Fatal(err)
	}
	if ll.Total != 2 || len(ll.Locks) != 1 || ll.Locks[0].Key != "a/1" {
		t.Fatalf("list: %+v", ll)
	}
}

func TestConfig(t *testing.T) {
	t.Setenv(api.EnvAddr, " http://a:1 ,b:2,")
	t.Setenv(api.EnvAuthToken, "secret")
	cfg := api.DefaultConfig()
	if fmt.Sprint(cfg.Addresses) != "[http://a:1 b:2]" || cfg.Token != "secret" {
		t.Fatalf("DefaultConfig: %+v", cfg)
	}
	for _, bad := range []string{"ftp://x:1", "http://x:1/path", "http://"} {
		cfg.Addresses = []string{bad}
		if c, err := api.NewClient(cfg); err == nil {
			c.Close()
			t.Errorf("NewClient accepted address %q", bad)
		}
	}
}

// A BATON_ADDR that names no address (only separators and blanks) is a
// mistake to report, as the CLI does, not no setting: NewClient with
// DefaultConfig, or with no Addresses, fails naming BATON_ADDR instead of
// dialling DefaultAddr, which may be another node than the one meant. An
// empty BATON_ADDR is unset (DefaultAddr).
func TestConfigBatonAddrOfSeparatorsIsRefused(t *testing.T) {
	for _, v := range []string{" , ", ",", "  "} {
		t.Setenv(api.EnvAddr, v)
		for name, cfg := range map[string]api.Config{"DefaultConfig": api.DefaultConfig(), "Config{}": {}} {
			c, err := api.NewClient(cfg)
			if err == nil {
				c.Close()
				t.Fatalf("BATON_ADDR=%q, NewClient(%s): nil error, want one naming BATON_ADDR", v, name)
			}
			if !strings.Contains(err.Error(), api.EnvAddr) {
				t.Errorf("BATON_ADDR=%q, NewClient(%s): %v; want it to name %s", v, name, err, api.EnvAddr)
			}
		}
	}
	t.Setenv(api.EnvAddr, "")
	cfg := api.DefaultConfig()
	if fmt.Sprint(cfg.Addresses) != "["+api.DefaultAddr+"]" {
		t.Fatalf("empty BATON_ADDR: Addresses %q, want [%s]", cfg.Addresses, api.DefaultAddr)
	}
	c, err := api.NewClient(api.Config{})
	if err != nil {
		t.Fatalf("empty BATON_ADDR: %v", err)
	}
	c.Close()
}

// https:// addresses: TLS with HTTP/2 by ALPN, the same single connection
// management.
func TestTLS(t *testing.T) {
	eng, err := engine.New(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var protos sync.Map
	h := handlers.New(eng, handlers.Config{})
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto, true)
		h.ServeHTTP(w, r)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	defer ts.Close()
	tlsCfg := ts.Client().Transport.(*http.Transport).TLSClientConfig
	c := newClient(t, func(c *api.Config) { c.TLSConfig = tlsCfg }, ts.URL)
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	protos.Range(func(k, _ any) bool {
		if k != "HTTP/2.0" {
			t.Errorf("a request came over %v", k)
		}
		return true
	})
}

// StatusError Is the sentinel of its code, through the one table.
func TestStatusErrorIs(t *testing.T) {
	cases := []struct {
		status int
		code   string
		want   error
	}{
		{408, api.CodeTimeout, api.ErrTimeout},
		{409, api.CodeNotHolder, api.ErrNotHolder},
		{404, api.CodeNotHeld, api.ErrNotHeld},
		{410, api.CodeGrantEnded, api.ErrGrantEnded},
		{409, api.CodeSuperseded, api.ErrSuperseded},
		{422, api.CodeKeyReused, api.ErrKeyReused},
		{400, api.CodeInvalidArgument, api.ErrInvalidArgument},
		{429, api.CodeTooManyWaiters, api.ErrLimit},
		{401, api.CodeUnauthorized, api.ErrUnauthorized},
		{503, api.CodeUnavailable, api.ErrUnavailable},
		{502, "", api.ErrUnavailable}, // a proxy's page
		{500, api.CodeInternal, nil},
	}
	all := []error{api.ErrTimeout, api.ErrNotHolder, api.ErrNotHeld, api.ErrGrantEnded, api.ErrSuperseded, api.ErrKeyReused, api.ErrInvalidArgument, api.ErrLimit, api.ErrUnauthorized, api.ErrUnavailable}
	for _, c := range cases {
		err := fmt.Errorf("wrapped: %w", &api.StatusError{StatusCode: c.status, Code: c.code})
		for _, s := range all {
			if got := errors.Is(err, s); got != (s == c.want) {
				t.Errorf("%d %q: errors.Is(%v) = %v", c.status, c.code, s, got)
			}
		}
	}
}

// An acquire answered 409 superseded (a repeat under its own
// Idempotency-Key took its place over: an attempt of its own that it cut
// off unanswered, which a paused node's socket still held) repeats under
// the same key, which takes the place back, up to maxAfresh times; then it
// fails with ErrSuperseded (breaker T, 2026-12-06, in the JavaScript
// client: a 20 s pause of a single node ended an acquire that had 110 s of
// its wait left).
func TestSupersededAcquireRepeatsUnderItsKey(t *testing.T) {
	for _, tc := range []struct {
		name       string
		superseded int64 // POSTs answered superseded before the node's own answers
		wantErr    bool
	}{
		{"twice", 2, false},
		{"every time", 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var posts atomic.Int64
			var mu sync.Mutex
			keys := map[string]bool{}
			fake := func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodPost {
						h.ServeHTTP(w, r)
						return
					}
					mu.Lock()
					keys[r.Header.Get(api.HeaderIdempotencyKey)] = true
					mu.Unlock()
					if posts.Add(1) > tc.superseded {
						h.ServeHTTP(w, r)
						return
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusConflict)
					fmt.Fprint(w, `{"error":"superseded","message":"a repeat of this request with the same Idempotency-Key took over its place"}`)
				})
			}
			srv := startServer(t, engine.Config{}, fake)
			c := newClient(t, nil, srv.URL)
			l, err := c.Acquire(ctxBound(t), "k", api.WithWait(30*time.Second))
			if len(keys) != 1 {
				t.Errorf("the attempts sent %d Idempotency-Keys, want one: %v", len(keys), keys)
			}
			if tc.wantErr {
				const want = 11 // the first and ten repeats
				if !errors.Is(err, api.ErrSuperseded) || posts.Load() != want {
					t.Fatalf("Acquire = %v after %d POSTs, want ErrSuperseded after %d", err, posts.Load(), want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Acquire = %v after %d POSTs, want the grant", err, posts.Load())
			}
			heldOnce(t, c, "k", l.Token)
		})
	}
}

// A release answered only after a failover and the default sync_timeout
// (the standby holds the call until it is promoted, about 1.4 s by
// default, then holds the change for sync_timeout, 1 s, before it degrades
// without its synchronous standbys and answers) is one attempt: the
// attempt's cut is above it. Cut at 1 s, the attempt released the lock
// unanswered and the retries, answered not_held by a node that had not
// granted it, ran to ReleaseTimeout (breaker T, 2026-12-06).
func TestReleaseAnsweredAfterTheSyncTimeoutIsOneAttempt(t *testing.T) {
	var deletes atomic.Int64
	slow := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete {
				deletes.Add(1)
				time.Sleep(2200 * time.Millisecond)
			}
			h.ServeHTTP(w, r)
		})
	}
	srv := startServer(t, engine.Config{}, slow)
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := deletes.Load(); n != 1 {
		t.Fatalf("%d DELETEs for one release answered after 2.2 s, want 1", n)
	}
}
