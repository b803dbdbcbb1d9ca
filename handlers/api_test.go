package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is one real engine behind a real HTTP server.
type env struct {
	t      *testing.T
	eng    *engine.Engine
	srv    *httptest.Server
	client *http.Client
	dir    string
}

// newEnv starts an engine on a fresh data dir (unless cfg names one) and an
// httptest server for it. Cleanup closes the engine first (parked acquires
// are answered), then the server.
func newEnv(t *testing.T, cfg engine.Config, hcfg handlers.Config) *env {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	if hcfg.Node == "" {
		hcfg.Node = "http://node-under-test"
	}
	srv := startServer(eng, hcfg)
	e := &env{t: t, eng: eng, srv: srv, client: srv.Client(), dir: cfg.DataDir}
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = eng.Close() })
	return e
}

// startServer serves eng through the production http.Server settings
// (handlers.NewHTTPServer: HTTP/1.1 and h2c on one port).
func startServer(eng *engine.Engine, hcfg handlers.Config) *httptest.Server {
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = handlers.NewHTTPServer(handlers.New(eng, hcfg), context.Background(), nil)
	srv.Start()
	return srv
}

// resp is an answer as a test sees it.
type resp struct {
	code int
	hdr  http.Header
	body []byte
	err  error
}

func (r resp) errBody(t *testing.T) api.Error {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", r.body, err)
	}
	return e
}

func (r resp) grant(t *testing.T) api.Grant {
	t.Helper()
	if r.err != nil || r.code != http.StatusOK {
		t.Fatalf("want a 200 grant, got %d %s (err %v)", r.code, r.body, r.err)
	}
	var g api.Grant
	if err := json.Unmarshal(r.body, &g); err != nil {
		t.Fatalf("grant body %q: %v", r.body, err)
	}
	if g.Token == 0 || g.Token >= api.MaxToken {
		t.Fatalf("token %d out of range (0, 2^53)", g.Token)
	}
	if h := r.hdr.Get(api.HeaderLockToken); h != strconv.FormatUint(g.Token, 10) {
		t.Fatalf("Lock-Token header %q, body token %d", h, g.Token)
	}
	return g
}

// send issues one request. body "" means none; hdr is name, value pairs.
func send(ctx context.Context, c *http.Client, method, url, body string, hdr ...string) resp {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return resp{err: err}
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		return resp{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return resp{code: res.StatusCode, hdr: res.Header, body: b, err: err}
}

func (e *env) do(method, path, body string, hdr ...string) resp {
	return send(context.Background(), e.client, method, e.srv.URL+path, body, hdr...)
}

// async starts a request and returns the channel its answer arrives on.
func (e *env) async(ctx context.Context, c *http.Client, method, path, body string, hdr ...string) <-chan resp {
	ch := make(chan resp, 1)
	go func() { ch <- send(ctx, c, method, e.srv.URL+path, body, hdr...) }()
	return ch
}

func (e *env) acquire(path string, hdr ...string) api.Grant {
	e.t.Helper()
	return e.do(http.MethodPost, path, "", hdr...).grant(e.t)
}

func (e *env) release(key string, token uint64) {
	e.t.Helper()
	r := e.do(http.MethodDelete, "/locks/"+key+"?token="+strconv.FormatUint(token, 10), "")
	if r.code != http.StatusOK {
		e.t.Fatalf("release %s/%d: %d %s (err %v)", key, token, r.code, r.body, r.err)
	}
	var rel api.Released
	if err := json.Unmarshal(r.body, &rel); err != nil || !rel.Released || rel.Key != key {
		e.t.Fatalf("release body %s: %v", r.body, err)
	}
}

func (e *env) status(key string) api.LockStatus {
	e.t.Helper()
	r := e.do(http.MethodGet, "/locks/"+key, "")
	if r.code != http.StatusOK {
		e.t.Fatalf("GET /locks/%s: %d %s (err %v)", key, r.code, r.body, r.err)
	}
	var st api.LockStatus
	if err := json.Unmarshal(r.body, &st); err != nil {
		e.t.Fatalf("status body %q: %v", r.body, err)
	}
	return st
}

func (e *env) list() api.LockList {
	e.t.Helper()
	r := e.do(http.MethodGet, "/locks", "")
	if r.code != http.StatusOK {
		e.t.Fatalf("GET /locks: %d %s (err %v)", r.code, r.body, r.err)
	}
	var l api.LockList
	if err := json.Unmarshal(r.body, &l); err != nil {
		e.t.Fatalf("list body %q: %v", r.body, err)
	}
	return l
}

// waitWaiters polls GET /locks/{key} until it shows n waiters. The bound only
// turns a hang into a failure; nothing is asserted about timing.
func (e *env) waitWaiters(key string, n int) {
	e.t.Helper()
	var st api.LockStatus
	for range 20000 {
		if st = e.status(key); st.Waiters == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	e.t.Fatalf("%s: waiters stayed %d, want %d", key, st.Waiters, n)
}

// recv takes one answer; the bound only turns a hang into a failure.
func recv(t *testing.T, ch <-chan resp, what string) resp {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no answer", what)
		return resp{}
	}
}

// pending reports whether ch has no answer yet (without waiting).
func pending(ch <-chan resp) bool {
	select {
	case <-ch: // callers use pending only where an answer is a failure
		return false
	default:
		return true
	}
}

func tok(n uint64) string { return strconv.FormatUint(n, 10) }

// ---------------------------------------------------------------------------

func TestFIFOTwentyWaiters(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	first := e.acquire("/locks/q?lease=30")

	type arrival struct {
		i int
		r resp
	}
	got := make(chan arrival, 20)
	for i := range 20 {
		go func() {
			got <- arrival{i, send(context.Background(), e.client, http.MethodPost, e.srv.URL+"/locks/q?lease=30", "")}
		}()
		e.waitWaiters("q", i+1)
	}

	prev := first.Token
	e.release("q", first.Token)
	for want := range 20 {
		a := <-got
		if a.i != want {
			t.Fatalf("grant %d went to waiter %d (arrival order broken)", want, a.i)
		}
		g := a.r.grant(t)
		if g.Token <= prev {
			t.Fatalf("waiter %d: token %d not above the previous %d", a.i, g.Token, prev)
		}
		if g.Key != "q" || g.Lease != 30 {
			t.Fatalf("grant %+v", g)
		}
		st := e.status("q")
		if st.Holder == nil || st.Holder.Token != g.Token || st.Waiters != 19-want {
			t.Fatalf("after grant %d: status %+v", want, st)
		}
		prev = g.Token
		e.release("q", g.Token)
	}
	if st := e.status("q"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("key not free at the end: %+v", st)
	}
}

func TestHandoffOnRelease(t *testing.T) {
	ways := []struct {
		name string
		req  func(key string, token uint64) (path, body string, hdr []string)
	}{
		{"query", func(k string, n uint64) (string, string, []string) {
			return "/locks/" + k + "?token=" + tok(n), "", nil
		}},
		{"body", func(k string, n uint64) (string, string, []string) {
			return "/locks/" + k, `{"token":` + tok(n) + `}`, []string{"Content-Type", "application/json"}
		}},
		{"header", func(k string, n uint64) (string, string, []string) {
			return "/locks/" + k, "", []string{api.HeaderLockToken, tok(n)}
		}},
	}
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) {
			e := newEnv(t, engine.Config{}, handlers.Config{})
			a := e.acquire("/locks/h/" + way.name + "?lease=30")
			key := "h/" + way.name
			b := e.async(context.Background(), e.client, http.MethodPost, "/locks/"+key, "")
			e.waitWaiters(key, 1)

			// Someone else's token and a release without a holder change nothing.
			if r := e.do(http.MethodDelete, "/locks/"+key+"?token="+tok(a.Token+1000), ""); r.code != http.StatusConflict || r.errBody(t).Code != api.CodeNotHolder {
				t.Fatalf("wrong token: %d %s", r.code, r.body)
			}
			if r := e.do(http.MethodDelete, "/locks/nobody?token=1", ""); r.code != http.StatusNotFound || r.errBody(t).Code != api.CodeNotHeld {
				t.Fatalf("not held: %d %s", r.code, r.body)
			}
			if !pending(b) {
				t.Fatal("the waiter was answered before any release")
			}

			path, body, hdr := way.req(key, a.Token)
			r := e.do(http.MethodDelete, path, body, hdr...)
			if r.code != http.StatusOK {
				t.Fatalf("release by %s: %d %s", way.name, r.code, r.body)
			}
			var rel api.Released
			if err := json.Unmarshal(r.body, &rel); err != nil || rel != (api.Released{Key: key, Released: true}) {
				t.Fatalf("release body %s", r.body)
			}
			g := recv(t, b, "waiter").grant(t)
			if g.Token <= a.Token || g.Key != key {
				t.Fatalf("handed over %+v after token %d", g, a.Token)
			}
			st := e.status(key)
			if st.Holder == nil || st.Holder.Token != g.Token || st.Waiters != 0 {
				t.Fatalf("status after handoff %+v", st)
			}
			// The old token no longer releases.
			if r := e.do(http.MethodDelete, path, body, hdr...); r.code != http.StatusConflict {
				t.Fatalf("second release with the old token: %d %s", r.code, r.body)
			}
			e.release(key, g.Token)
		})
	}
}

func TestHandoffOnLeaseExpiry(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	a := e.acquire("/locks/exp?lease=0.3")
	if a.Lease != 0.3 {
		t.Fatalf("lease %v, want 0.3", a.Lease)
	}
	b := e.async(context.Background(), e.client, http.MethodPost, "/locks/exp?lease=30", "")
	g := recv(t, b, "waiter after lease expiry").grant(t)
	if g.Token <= a.Token {
		t.Fatalf("token %d not above %d", g.Token, a.Token)
	}
	if st := e.status("exp"); st.Holder == nil || st.Holder.Token != g.Token {
		t.Fatalf("status %+v, want holder %d", st, g.Token)
	}
	// The expired holder lost it: its token neither releases nor renews.
	if r := e.do(http.MethodDelete, "/locks/exp?token="+tok(a.Token), ""); r.code != http.StatusConflict || r.errBody(t).Code != api.CodeNotHolder {
		t.Fatalf("release by the expired holder: %d %s", r.code, r.body)
	}
	if r := e.do(http.MethodPatch, "/locks/exp?token="+tok(a.Token), ""); r.code != http.StatusConflict {
		t.Fatalf("renew by the expired holder: %d %s", r.code, r.body)
	}
	e.release("exp", g.Token)
}

func TestWaitRunsOut(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	a := e.acquire("/locks/w?lease=30")
	r := e.do(http.MethodPost, "/locks/w?wait=0.2", "")
	if r.code != http.StatusRequestTimeout {
		t.Fatalf("want 408, got %d %s", r.code, r.body)
	}
	if eb := r.errBody(t); eb.Code != api.CodeTimeout || eb.Message == "" {
		t.Fatalf("408 body %+v", eb)
	}
	if r.hdr.Get(api.HeaderLockToken) != "" {
		t.Fatal("408 carries a Lock-Token")
	}
	if st := e.status("w"); st.Holder == nil || st.Holder.Token != a.Token || st.Waiters != 0 {
		t.Fatalf("after the 408: %+v", st)
	}
	e.release("w", a.Token)
	// Had the timed-out caller been queued still, it would hold the key now.
	if st := e.status("w"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("after release: %+v", st)
	}
	if l := e.list(); l.Total != 0 {
		t.Fatalf("keys left: %+v", l)
	}
}

// TestTimeoutsRacingReleases: many waits run out at the very moment of
// releases. No grant may be lost and none may go to a caller told 408.
func TestTimeoutsRacingReleases(t *testing.T) {
	var mu sync.Mutex
	granted := map[string]uint64{} // waiter ID -> token, from the engine's events
	grants := 0
	e := newEnv(t, engine.Config{OnEvent: func(ev engine.Event) {
		if ev.Kind == engine.EventGrant {
			mu.Lock()
			grants++
			if ev.WaiterID != "" {
				granted[ev.WaiterID] = ev.Token
			}
			mu.Unlock()
		}
	}}, handlers.Config{})

	const workers, rounds = 12, 25
	var (
		ok, timedOut atomic.Int64
		rmu          sync.Mutex
		answered     = map[string]uint64{} // ID -> token of a 200
		told408      = map[string]bool{}
		wg           sync.WaitGroup
		failures     = make(chan string, workers*rounds)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				id := fmt.Sprintf("w%d-%d", w, i)
				// Waits of 1..4 ms against holds of ~1 ms: expiries and
				// handoffs land on top of each other.
				wait := fmt.Sprintf("0.00%d", 1+(w+i)%4)
				r := send(context.Background(), e.client, http.MethodPost, e.srv.URL+"/locks/race?lease=10&wait="+wait, "", api.HeaderIdempotencyKey, id)
				switch r.code {
				case http.StatusOK:
					var g api.Grant
					if err := json.Unmarshal(r.body, &g); err != nil {
						failures <- err.Error()
						return
					}
					ok.Add(1)
					rmu.Lock()
					answered[id] = g.Token
					rmu.Unlock()
					time.Sleep(time.Duration(w%3) * time.Millisecond)
					d := send(context.Background(), e.client, http.MethodDelete, e.srv.URL+"/locks/race?token="+tok(g.Token), "")
					if d.code != http.StatusOK {
						failures <- fmt.Sprintf("%s: release of token %d: %d %s", id, g.Token, d.code, d.body)
					}
				case http.StatusRequestTimeout:
					timedOut.Add(1)
					rmu.Lock()
					told408[id] = true
					rmu.Unlock()
				default:
					failures <- fmt.Sprintf("%s: %d %s (err %v)", id, r.code, r.body, r.err)
				}
			}
		}()
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	t.Logf("%d grants, %d timeouts", ok.Load(), timedOut.Load())

	mu.Lock()
	defer mu.Unlock()
	if int64(grants) != ok.Load() {
		t.Errorf("engine granted %d times, callers received %d grants", grants, ok.Load())
	}
	for id, token := range granted {
		if told408[id] {
			t.Errorf("%s was told 408 but granted token %d", id, token)
		}
		if answered[id] != token {
			t.Errorf("%s: engine granted %d, caller received %d", id, token, answered[id])
		}
	}
	if ok.Load()+timedOut.Load() != workers*rounds {
		t.Errorf("%d answers for %d requests", ok.Load()+timedOut.Load(), workers*rounds)
	}
	if st := e.status("race"); st.Holder != nil || st.Waiters != 0 {
		t.Errorf("key not free at the end: %+v", st)
	}
	if keys, waiters := e.eng.Counts(); keys != 0 || waiters != 0 {
		t.Errorf("counts %d keys, %d waiters; want 0, 0", keys, waiters)
	}
}

func TestDisconnectedWaiterLeaves(t *testing.T) {
	t.Run("context cancelled", func(t *testing.T) {
		e := newEnv(t, engine.Config{}, handlers.Config{})
		a := e.acquire("/locks/d?lease=30")
		ctx, cancel := context.WithCancel(context.Background())
		gone := e.async(ctx, e.client, http.MethodPost, "/locks/d", "")
		e.waitWaiters("d", 1)
		live := e.async(context.Background(), e.client, http.MethodPost, "/locks/d", "")
		e.waitWaiters("d", 2)
		cancel()
		if r := recv(t, gone, "cancelled waiter"); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled request: %d %v", r.code, r.err)
		}
		e.waitWaiters("d", 1)
		e.release("d", a.Token)
		g := recv(t, live, "live waiter").grant(t)
		if st := e.status("d"); st.Holder == nil || st.Holder.Token != g.Token || st.Waiters != 0 {
			t.Fatalf("status %+v, want the live waiter %d", st, g.Token)
		}
		e.release("d", g.Token)
	})
	t.Run("connection closed", func(t *testing.T) {
		e := newEnv(t, engine.Config{}, handlers.Config{})
		a := e.acquire("/locks/d?lease=30")
		var conns []net.Conn
		var cmu sync.Mutex
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				cmu.Lock()
				conns = append(conns, c)
				cmu.Unlock()
			}
			return c, err
		}}
		t.Cleanup(tr.CloseIdleConnections)
		gone := e.async(context.Background(), &http.Client{Transport: tr}, http.MethodPost, "/locks/d", "")
		e.waitWaiters("d", 1)
		live := e.async(context.Background(), e.client, http.MethodPost, "/locks/d", "")
		e.waitWaiters("d", 2)
		cmu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		cmu.Unlock()
		if r := recv(t, gone, "waiter whose connection closed"); r.err == nil {
			t.Fatalf("closed connection still got an answer: %d %s", r.code, r.body)
		}
		e.waitWaiters("d", 1)
		e.release("d", a.Token)
		g := recv(t, live, "live waiter").grant(t)
		if st := e.status("d"); st.Holder == nil || st.Holder.Token != g.Token || st.Waiters != 0 {
			t.Fatalf("status %+v, want the live waiter %d", st, g.Token)
		}
		e.release("d", g.Token)
	})
}

func TestTokensRiseAcrossKeysAndRestart(t *testing.T) {
	dir := t.TempDir()
	var prev uint64
	for run := range 3 {
		eng, err := engine.New(engine.Config{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		srv := startServer(eng, handlers.Config{})
		e := &env{t: t, eng: eng, srv: srv, client: srv.Client(), dir: dir}
		for i := range 10 {
			// Keys repeat and differ; the last four stay held over the restart.
			key := fmt.Sprintf("run%d/k%d", run, i%4)
			g := e.acquire("/locks/" + key)
			if g.Token <= prev {
				t.Fatalf("run %d, %s: token %d not above %d", run, key, g.Token, prev)
			}
			if g.Token >= 1<<53 {
				t.Fatalf("token %d not below 2^53", g.Token)
			}
			prev = g.Token
			if i < 6 {
				e.release(key, g.Token)
			}
		}
		// A restart with locks still held must not repeat their tokens either.
		if err := eng.Close(); err != nil {
			t.Fatal(err)
		}
		srv.Close()
	}
}

func TestIdempotencyKey(t *testing.T) {
	idem := func(id string) []string { return []string{api.HeaderIdempotencyKey, id} }

	t.Run("repeat of a grant returns the same token", func(t *testing.T) {
		e := newEnv(t, engine.Config{}, handlers.Config{})
		g1 := e.acquire("/locks/i?lease=30", idem("A")...)
		g2 := e.acquire("/locks/i?lease=30", idem("A")...)
		if g1.Token != g2.Token {
			t.Fatalf("repeat got token %d, first %d", g2.Token, g1.Token)
		}
		if st := e.status("i"); st.Holder == nil || st.Holder.Token != g1.Token || st.Waiters != 0 {
			t.Fatalf("status %+v", st)
		}
		// Another key with the same Idempotency-Key is another acquire.
		g3 := e.acquire("/locks/j", idem("A")...)
		if g3.Token <= g1.Token {
			t.Fatalf("other key: token %d not above %d", g3.Token, g1.Token)
		}
		e.release("i", g1.Token)
		e.release("j", g3.Token)
	})

	t.Run("repeat while waiting keeps the place", func(t *testing.T) {
		e := newEnv(t, engine.Config{}, handlers.Config{})
		h := e.acquire("/locks/i?lease=30")
		first := e.async(context.Background(), e.client, http.MethodPost, "/locks/i?lease=30", "", idem("B")...)
		e.waitWaiters("i", 1)
		later := e.async(context.Background(), e.client, http.MethodPost, "/locks/i?lease=30", "")
		e.waitWaiters("i", 2)
		repeat := e.async(context.Background(), e.client, http.MethodPost, "/locks/i?lease=30", "", idem("B")...)
		r := recv(t, first, "first request")
		if r.code != http.StatusConflict || r.errBody(t).Code != api.CodeSuperseded {
			t.Fatalf("first request: %d %s, want 409 superseded", r.code, r.body)
		}
		if st := e.status("i"); st.Waiters != 2 {
			t.Fatalf("the repeat queued anew or lost the place: %+v", st)
		}
		e.release("i", h.Token)
		g := recv(t, repeat, "repeat").grant(t)
		if st := e.status("i"); st.Holder == nil || st.Holder.Token != g.Token || st.Waiters != 1 {
			t.Fatalf("after release: %+v (repeat token %d)", st, g.Token)
		}
		if !pending(later) {
			t.Fatal("the later waiter was answered before the repeat released")
		}
		e.release("i", g.Token)
		g2 := recv(t, later, "later waiter").grant(t)
		if g2.Token <= g.Token {
			t.Fatalf("later token %d not above %d", g2.Token, g.Token)
		}
		e.release("i", g2.Token)
	})

	t.Run("repeat with a shorter wait ends the place at its own deadline", func(t *testing.T) {
		// A client that cancelled its acquire asks under its key with
		// wait=0.001 whether it was granted (the official clients do):
		// the ask takes the place over, is answered 408 a millisecond
		// later, and the place is gone, not kept to the first's 30 s.
		e := newEnv(t, engine.Config{}, handlers.Config{})
		h := e.acquire("/locks/i?lease=30")
		first := e.async(context.Background(), e.client, http.MethodPost, "/locks/i?lease=30&wait=30", "", idem("S")...)
		e.waitWaiters("i", 1)
		r := e.do(http.MethodPost, "/locks/i?lease=30&wait=0.001", "", idem("S")...)
		if r.code != http.StatusRequestTimeout || r.errBody(t).Code != api.CodeTimeout {
			t.Fatalf("ask: %d %s, want 408 timeout", r.code, r.body)
		}
		if f := recv(t, first, "first request"); f.code != http.StatusConflict || f.errBody(t).Code != api.CodeSuperseded {
			t.Fatalf("first request: %d %s, want 409 superseded", f.code, f.body)
		}
		if st := e.status("i"); st.Waiters != 0 {
			t.Fatalf("the place outlived the ask's 408: %+v", st)
		}
		e.release("i", h.Token)
		if st := e.status("i"); st.Holder != nil {
			t.Fatalf("granted to a waiter told 408: %+v", st)
		}
	})

	t.Run("repeat after 408 gets 408 and never a grant", func(t *testing.T) {
		e := newEnv(t, engine.Config{}, handlers.Config{})
		h := e.acquire("/locks/i?lease=30")
		r := e.do(http.MethodPost, "/locks/i?wait=0.1", "", idem("C")...)
		if r.code != http.StatusRequestTimeout || r.errBody(t).Code != api.CodeTimeout {
			t.Fatalf("first: %d %s", r.code, r.body)
		}
		// The repeat names no wait: queued, it would block until the holder
		// releases. The deadline is a safety net against a hang only.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r = send(ctx, e.client, http.MethodPost, e.srv.URL+"/locks/i", "", idem("C")...)
		if r.err != nil || r.code != http.StatusRequestTimeout || r.errBody(t).Code != api.CodeTimeout {
			t.Fatalf("repeat after 408: %d %s (err %v), want 408 timeout", r.code, r.body, r.err)
		}
		if st := e.status("i"); st.Waiters != 0 || st.Holder == nil || st.Holder.Token != h.Token {
			t.Fatalf("status after repeat %+v", st)
		}
		e.release("i", h.Token)
		if st := e.status("i"); st.Holder != nil {
			t.Fatalf("the 408 caller was granted: %+v", st)
		}
	})

	t.Run("repeat after the grant ended gets 410", func(t *testing.T) {
		e := newEnv(t, engine.Config{}, handlers.Config{})
		g := e.acquire("/locks/i", idem("D")...)
		e.release("i", g.Token)
		r := e.do(http.MethodPost, "/locks/i", "", idem("D")...)
		if r.code != http.StatusGone || r.errBody(t).Code != api.CodeGrantEnded {
			t.Fatalf("repeat after release: %d %s, want 410 grant_ended", r.code, r.body)
		}
		if st := e.status("i"); st.Holder != nil || st.Waiters != 0 {
			t.Fatalf("status %+v", st)
		}
	})

	// Sent again with another mode, limit, lease or owner, the key is
	// not a repeat (SPEC section 2; the IETF Idempotency-Key draft,
	// section 2.7): 422 naming the field, nothing changed. Before, each
	// got the first grant's token, in the first request's mode.
	reused := []struct{ query, field string }{
		{"lease=5&mode=shared", "mode"},
		{"lease=5&limit=3", "limit"},
		{"lease=6", "lease"},
		{"", "lease"}, // lease_default
		{"lease=5&owner=job-2", "owner"},
	}
	wantReused := func(t *testing.T, e *env, path, key string) {
		t.Helper()
		for _, c := range reused {
			r := e.do(http.MethodPost, path+"?"+c.query, "", idem(key)...)
			if b := r.errBody(t); r.code != http.StatusUnprocessableEntity || b.Code != api.CodeKeyReused || b.Field != c.field || !strings.HasPrefix(b.Message, c.field+": ") {
				t.Fatalf("%s under the key: %d %s, want 422 idempotency_key_reused naming %s", c.query, r.code, r.body, c.field)
			}
		}
		// The JSON body is the same request.
		r := e.do(http.MethodPost, path, `{"lease":5,"mode":"shared"}`, append(idem(key), "Content-Type", "application/json")...)
		if b := r.errBody(t); r.code != http.StatusUnprocessableEntity || b.Field != "mode" {
			t.Fatalf("JSON body in another mode: %d %s", r.code, r.body)
		}
	}

	t.Run("the key with other parameters is 422, nothing changed", func(t *testing.T) {
		e := newEnv(t, engine.Config{}, handlers.Config{})
		g := e.acquire("/locks/ik?lease=5", idem("k1")...)
		wantReused(t, e, "/locks/ik", "k1")
		st := e.status("ik")
		if st.Holder == nil || st.Holder.Token != g.Token || st.Holder.Mode != "exclusive" || len(st.Holders) != 1 || st.Waiters != 0 || st.Limit != 1 {
			t.Fatalf("status after the refusals %+v; want the first grant alone", st)
		}
		// A repeat may change its wait only.
		if g2 := e.acquire("/locks/ik?lease=5&wait=0.5", idem("k1")...); g2.Token != g.Token {
			t.Fatalf("repeat with another wait: token %d, want %d", g2.Token, g.Token)
		}
		e.release("ik", g.Token)
	})

	t.Run("the key of a waiter with other parameters is 422, its place kept", func(t *testing.T) {
		e := newEnv(t, engine.Config{}, handlers.Config{})
		h := e.acquire("/locks/ik?lease=30")
		first := e.async(context.Background(), e.client, http.MethodPost, "/locks/ik?lease=5", "", idem("k2")...)
		e.waitWaiters("ik", 1)
		wantReused(t, e, "/locks/ik", "k2")
		if !pending(first) {
			t.Fatal("a refused request answered the first one")
		}
		if st := e.status("ik"); st.Waiters != 1 || st.Holder == nil || st.Holder.Token != h.Token {
			t.Fatalf("status after the refusals %+v", st)
		}
		e.release("ik", h.Token)
		g := recv(t, first, "the first request").grant(t)
		e.release("ik", g.Token)
	})
}

func TestBadInput(t *testing.T) {
	const maxBody = 1024
	e := newEnv(t, engine.Config{WaitMax: time.Minute, LeaseMax: time.Hour}, handlers.Config{MaxBody: maxBody, Events: handlers.NewEventLog(16)})
	held := e.acquire("/locks/h?lease=600")
	ht := tok(held.Token)
	long := strings.Repeat("a", 257)
	big := `{"lease":1` + strings.Repeat(" ", maxBody) + `}`

	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		field                    string
	}{
		{"control char 01", "POST", "/locks/a%01b", "", nil, 400, "key"},
		{"control char 7F", "POST", "/locks/a%7Fb", "", nil, 400, "key"},
		{"control char C1", "POST", "/locks/a%C2%85b", "", nil, 400, "key"},
		{"newline", "POST", "/locks/a%0Ab", "", nil, 400, "key"},
		{"257 bytes", "POST", "/locks/" + long, "", nil, 400, "key"},
		{"invalid UTF-8", "POST", "/locks/%FF", "", nil, 400, "key"},
		{"empty key", "POST", "/locks/", "", nil, 400, "key"},
		{"bad key on DELETE", "DELETE", "/locks/a%01?token=" + ht, "", nil, 400, "key"},
		{"lease 0", "POST", "/locks/k?lease=0", "", nil, 400, "lease"},
		{"lease -1", "POST", "/locks/k?lease=-1", "", nil, 400, "lease"},
		{"lease above lease_max", "POST", "/locks/k?lease=3601", "", nil, 400, "lease"},
		{"lease NaN", "POST", "/locks/k?lease=NaN", "", nil, 400, "lease"},
		{"lease Inf", "POST", "/locks/k?lease=Inf", "", nil, 400, "lease"},
		{"lease +Inf", "POST", "/locks/k?lease=%2BInf", "", nil, 400, "lease"},
		{"lease abc", "POST", "/locks/k?lease=abc", "", nil, 400, "lease"},
		{"lease empty", "POST", "/locks/k?lease=", "", nil, 400, "lease"},
		{"list limit empty", "GET", "/locks?limit=", "", nil, 400, "limit"},
		{"events since empty", "GET", "/events?since=", "", nil, 400, "since"},
		{"lease 1e308", "POST", "/locks/k?lease=1e308", "", nil, 400, "lease"},
		{"lease 0 in body", "POST", "/locks/k", `{"lease":0}`, nil, 400, "lease"},
		{"lease string in body", "POST", "/locks/k", `{"lease":"abc"}`, nil, 400, "lease"},
		{"lease null in body", "POST", "/locks/k", `{"lease":null}`, nil, 400, "lease"},
		{"lease number as a string in body", "POST", "/locks/k", `{"lease":"5"}`, nil, 400, "lease"},
		{"lease twice in body", "POST", "/locks/k", `{"lease":1,"lease":2}`, nil, 400, "lease"},
		{"lease with underscores", "POST", "/locks/k?lease=1_0", "", nil, 400, "lease"},
		{"lease in hex", "POST", "/locks/k?lease=0x10", "", nil, 400, "lease"},
		{"body null", "POST", "/locks/k", `null`, nil, 400, "body"},
		{"body an array", "POST", "/locks/k", `[1]`, nil, 400, "body"},
		{"two Idempotency-Keys", "POST", "/locks/k", "", []string{"Idempotency-Key", "a", "Idempotency-Key", "b"}, 400, "Idempotency-Key"},
		{"token with a space", "DELETE", "/locks/h?token=%20" + ht, "", nil, 400, "token"},
		{"token with a leading zero", "DELETE", "/locks/h?token=0" + ht, "", nil, 400, "token"},
		{"wait -1", "POST", "/locks/k?wait=-1", "", nil, 400, "wait"},
		{"wait abc", "POST", "/locks/k?wait=abc", "", nil, 400, "wait"},
		{"wait above wait_max", "POST", "/locks/k?wait=61", "", nil, 400, "wait"},
		{"wait -1 in body", "POST", "/locks/k", `{"wait":-1}`, nil, 400, "wait"},
		{"token abc", "DELETE", "/locks/h?token=abc", "", nil, 400, "token"},
		{"token 0", "DELETE", "/locks/h?token=0", "", nil, 400, "token"},
		{"token -1", "DELETE", "/locks/h?token=-1", "", nil, 400, "token"},
		{"token 1.5", "DELETE", "/locks/h?token=1.5", "", nil, 400, "token"},
		{"token 2^53", "DELETE", "/locks/h?token=9007199254740992", "", nil, 400, "token"},
		{"token 2^64", "DELETE", "/locks/h?token=18446744073709551616", "", nil, 400, "token"},
		{"token missing", "DELETE", "/locks/h", "", nil, 400, "token"},
		{"token string in body", "DELETE", "/locks/h", `{"token":"` + ht + `x"}`, nil, 400, "token"},
		{"token 1.5 in body", "DELETE", "/locks/h", `{"token":1.5}`, nil, 400, "token"},
		{"token header abc", "DELETE", "/locks/h", "", []string{api.HeaderLockToken, "abc"}, 400, "token"},
		{"token missing on PATCH", "PATCH", "/locks/h", "", nil, 400, "token"},
		{"lease 0 on PATCH", "PATCH", "/locks/h?token=" + ht + "&lease=0", "", nil, 400, "lease"},
		{"lease above max on PATCH", "PATCH", "/locks/h?token=" + ht + "&lease=3601", "", nil, 400, "lease"},
		{"unknown JSON field", "POST", "/locks/k", `{"lease":1,"bogus":1}`, nil, 400, "bogus"},
		{"token in a POST body", "POST", "/locks/k", `{"token":1}`, nil, 400, "token"},
		{"unknown query parameter", "POST", "/locks/k?bogus=1", "", nil, 400, "bogus"},
		{"wait on DELETE", "DELETE", "/locks/h?token=" + ht + "&wait=1", "", nil, 400, "wait"},
		{"lease in query and body", "POST", "/locks/k?lease=1", `{"lease":1}`, nil, 400, "lease"},
		{"token in query and body", "DELETE", "/locks/h?token=" + ht, `{"token":` + ht + `}`, nil, 400, "token"},
		{"token in query and header", "DELETE", "/locks/h?token=" + ht, "", []string{api.HeaderLockToken, ht}, 400, "token"},
		{"token in body and header", "DELETE", "/locks/h", `{"token":` + ht + `}`, []string{api.HeaderLockToken, ht}, 400, "token"},
		{"malformed JSON", "POST", "/locks/k", `{"lease":`, nil, 400, "body"},
		{"not JSON", "POST", "/locks/k", `lease=1`, nil, 400, "body"},
		{"JSON array", "POST", "/locks/k", `[1]`, nil, 400, "body"},
		{"trailing data", "POST", "/locks/k", `{"lease":1} x`, nil, 400, "body"},
		{"second object", "DELETE", "/locks/h", `{"token":` + ht + `}{}`, nil, 400, "body"},
		{"repeated query parameter", "POST", "/locks/k?lease=1&lease=2", "", nil, 400, "lease"},
		{"repeated token", "DELETE", "/locks/h?token=" + ht + "&token=" + ht, "", nil, 400, "token"},
		{"Idempotency-Key too long", "POST", "/locks/k", "", []string{api.HeaderIdempotencyKey, strings.Repeat("x", 300)}, 400, api.HeaderIdempotencyKey},
		{"Idempotency-Key empty", "POST", "/locks/k", "", []string{api.HeaderIdempotencyKey, ""}, 400, api.HeaderIdempotencyKey},
		{"Idempotency-Key of blanks", "POST", "/locks/k", "", []string{api.HeaderIdempotencyKey, "  "}, 400, api.HeaderIdempotencyKey},
		{"status with a parameter", "GET", "/locks/h?lease=1", "", nil, 400, "lease"},
		// The token's header form on a call that takes no token is a 400
		// naming token, as token in its query or body is: before, a POST
		// with a Lock-Token was granted (or queued) as if it had none.
		{"Lock-Token on POST", "POST", "/locks/k", "", []string{api.HeaderLockToken, "5"}, 400, "token"},
		{"Lock-Token of the holder on POST", "POST", "/locks/h?wait=0.001", "", []string{api.HeaderLockToken, ht}, 400, "token"},
		{"empty Lock-Token on POST", "POST", "/locks/k", "", []string{api.HeaderLockToken, ""}, 400, "token"},
		{"two Lock-Token headers", "DELETE", "/locks/h", "", []string{api.HeaderLockToken, ht, api.HeaderLockToken, "1"}, 400, "token"},
		{"two Lock-Token headers, the holder's second", "DELETE", "/locks/h", "", []string{api.HeaderLockToken, "1", api.HeaderLockToken, ht}, 400, "token"},
		{"list with a bad escape", "GET", "/locks?prefix=%zz", "", nil, 400, "prefix"},
		{"list with a bad escape after a good parameter", "GET", "/locks?limit=1&after=a%2", "", nil, 400, "after"},
		{"list with a bad escape in a name", "GET", "/locks?pre%zzfix=a", "", nil, 400, "query"},
		{"lease with a bad escape", "POST", "/locks/k?lease=1%", "", nil, 400, "lease"},
		{"token with a bad escape", "DELETE", "/locks/h?token=%zz", "", nil, 400, "token"},
		{"unknown parameter with a bad escape", "POST", "/locks/k?bogus=%zz", "", nil, 400, "bogus"},
		{"lock call with a semicolon", "POST", "/locks/k?lease=1;wait=1", "", nil, 400, "query"},
		{"list with a semicolon", "GET", "/locks?prefix=h;limit=1", "", nil, 400, "query"},
		{"list with limit twice", "GET", "/locks?limit=1&limit=2", "", nil, 400, "limit"},
		{"list with a prefix of invalid UTF-8", "GET", "/locks?prefix=%ff", "", nil, 400, "prefix"},
		{"list with a prefix holding a control character", "GET", "/locks?prefix=a%0A", "", nil, 400, "prefix"},
		{"list with a prefix longer than any key", "GET", "/locks?prefix=" + strings.Repeat("x", engine.MaxKeyBytes+1), "", nil, 400, "prefix"},
		{"list after invalid UTF-8", "GET", "/locks?after=%c3", "", nil, 400, "after"},
		{"events for a key of invalid UTF-8", "GET", "/events?key=%ff", "", nil, 400, "key"},
		{"events with a bad escape", "GET", "/events?since=%zz", "", nil, 400, "since"},
		{"events with since twice", "GET", "/events?since=1&since=2", "", nil, 400, "since"},
		{"body over max_body", "POST", "/locks/k", big, nil, 413, ""},
		{"body over max_body on DELETE", "DELETE", "/locks/h", `{"token":` + ht + strings.Repeat(" ", maxBody) + `}`, nil, 413, ""},
	}
	before := e.do(http.MethodGet, "/locks", "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(c.method, c.path, c.body, c.hdr...)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.code != c.status {
				t.Fatalf("%s %s %s: %d %s, want %d", c.method, c.path, c.body, r.code, r.body, c.status)
			}
			if ct := r.hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			eb := r.errBody(t)
			switch c.status {
			case 400:
				if eb.Code != api.CodeInvalidArgument || eb.Field != c.field || !strings.Contains(eb.Message, c.field) {
					t.Errorf("body %s: want code %s, field %q named in the message", r.body, api.CodeInvalidArgument, c.field)
				}
			case 413:
				// The field is the body, and the message says its limit.
				if eb.Code != api.CodeBodyTooLarge || eb.Field != "body" || !strings.Contains(eb.Message, "max_body") || !strings.Contains(eb.Message, " bytes") {
					t.Errorf("body %s: want code %s, field \"body\", the limit (max_body, in bytes) in the message", r.body, api.CodeBodyTooLarge)
				}
			}
			if r.hdr.Get(api.HeaderLockToken) != "" {
				t.Error("an error answer carries a Lock-Token")
			}
			after := e.do(http.MethodGet, "/locks", "")
			if !bytes.Equal(after.body, before.body) {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before.body, after.body)
			}
			if keys, waiters := e.eng.Counts(); keys != 1 || waiters != 0 {
				t.Errorf("counts %d keys, %d waiters; want 1, 0", keys, waiters)
			}
		})
	}
	// The held lock is still held with its token and the valid forms work.
	if st := e.status("h"); st.Holder == nil || st.Holder.Token != held.Token {
		t.Fatalf("held lock: %+v", st)
	}
	ok256 := strings.Repeat("é", 128)
	g := e.acquire("/locks/" + ok256 + "?lease=3600&wait=60")
	if g.Key != ok256 {
		t.Fatalf("256-byte key came back as %q", g.Key)
	}
	e.release(ok256, g.Token)
	e.release("h", held.Token)
}

func TestLimits(t *testing.T) {
	check := func(t *testing.T, r resp, code string) {
		t.Helper()
		if r.code != http.StatusTooManyRequests || r.errBody(t).Code != code {
			t.Fatalf("want 429 %s, got %d %s", code, r.code, r.body)
		}
		// RFC 6585 section 4: a 429 may say how long to wait before a repeat.
		if ra := r.hdr.Get("Retry-After"); ra != "1" {
			t.Errorf("Retry-After %q, want \"1\"", ra)
		}
	}
	t.Run("max_keys", func(t *testing.T) {
		e := newEnv(t, engine.Config{MaxKeys: 2}, handlers.Config{})
		a := e.acquire("/locks/a")
		e.acquire("/locks/b")
		check(t, e.do(http.MethodPost, "/locks/c", ""), api.CodeTooManyKeys)
		if l := e.list(); l.Total != 2 {
			t.Fatalf("keys %+v", l)
		}
		e.release("a", a.Token)
		e.acquire("/locks/c") // room again once a key is freed
	})
	t.Run("max_waiters_per_key", func(t *testing.T) {
		e := newEnv(t, engine.Config{MaxWaitersPerKey: 1}, handlers.Config{})
		a := e.acquire("/locks/a")
		w := e.async(context.Background(), e.client, http.MethodPost, "/locks/a", "")
		e.waitWaiters("a", 1)
		check(t, e.do(http.MethodPost, "/locks/a", ""), api.CodeTooManyWaiters)
		if st := e.status("a"); st.Waiters != 1 {
			t.Fatalf("status %+v", st)
		}
		e.acquire("/locks/b") // other keys are not affected
		e.release("a", a.Token)
		e.release("a", recv(t, w, "waiter").grant(t).Token)
	})
	t.Run("max_waiters", func(t *testing.T) {
		e := newEnv(t, engine.Config{MaxWaiters: 1}, handlers.Config{})
		a := e.acquire("/locks/a")
		e.acquire("/locks/b")
		w := e.async(context.Background(), e.client, http.MethodPost, "/locks/a", "")
		e.waitWaiters("a", 1)
		check(t, e.do(http.MethodPost, "/locks/b", ""), api.CodeTooManyWaiters)
		if st := e.status("b"); st.Waiters != 0 {
			t.Fatalf("status %+v", st)
		}
		e.release("a", a.Token)
		e.release("a", recv(t, w, "waiter").grant(t).Token)
	})
}

func TestTextPlainAndLockTokenHeader(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{Node: "http://n1:7070"})
	r := e.do(http.MethodPost, "/locks/t", "", "Accept", "text/plain")
	if r.code != http.StatusOK {
		t.Fatalf("%d %s", r.code, r.body)
	}
	if ct := r.hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q", ct)
	}
	s := string(r.body)
	if !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		t.Fatalf("body %q is not one line", s)
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(s, "\n"), 10, 64)
	if err != nil || n == 0 || n >= api.MaxToken {
		t.Fatalf("body %q is not a token", s)
	}
	if h := r.hdr.Get(api.HeaderLockToken); h != tok(n) {
		t.Fatalf("Lock-Token %q, body %d", h, n)
	}
	// The shell idiom: release with the token as header.
	if r := e.do(http.MethodDelete, "/locks/t", "", api.HeaderLockToken, tok(n)); r.code != http.StatusOK {
		t.Fatalf("release: %d %s", r.code, r.body)
	}

	// JSON by default, with the header and every field.
	r = e.do(http.MethodPost, "/locks/t?lease=2.5", "")
	g := r.grant(t)
	if ct := r.hdr.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	if g.Key != "t" || g.Lease != 2.5 || g.Node != "http://n1:7070" || g.ExpiresAt.IsZero() || g.Token <= n {
		t.Fatalf("grant %+v", g)
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(r.body, &raw)
	for _, f := range []string{"key", "token", "lease", "expires_at", "node"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("grant body %s lacks %q", r.body, f)
		}
	}
	// A JSON body and a decimal lease in it are accepted too.
	r = e.do(http.MethodPatch, "/locks/t", `{"token":`+tok(g.Token)+`,"lease":0.5}`)
	if rg := r.grant(t); rg.Token != g.Token || rg.Lease != 0.5 {
		t.Fatalf("renew %+v", rg)
	}
	e.release("t", g.Token)
}

func h2cClient(t *testing.T, dials *atomic.Int64) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		Protocols: &p,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestH2C(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	var dials atomic.Int64
	c := h2cClient(t, &dials)

	res, err := c.Post(e.srv.URL+"/locks/h2?lease=30", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.ProtoMajor != 2 {
		t.Fatalf("spoke %s, want HTTP/2", res.Proto)
	}
	first := resp{code: res.StatusCode, hdr: res.Header, body: b}.grant(t)

	const n = 50
	answers := make(chan resp, n)
	for range n {
		go func() { answers <- send(context.Background(), c, http.MethodPost, e.srv.URL+"/locks/h2?lease=30", "") }()
	}
	e.waitWaiters("h2", n)
	r := send(context.Background(), c, http.MethodDelete, e.srv.URL+"/locks/h2?token="+tok(first.Token), "")
	if r.code != http.StatusOK {
		t.Fatalf("release over h2c: %d %s", r.code, r.body)
	}
	prev := first.Token
	for range n {
		g := recv(t, answers, "h2c waiter").grant(t)
		if g.Token <= prev {
			t.Fatalf("token %d not above %d", g.Token, prev)
		}
		prev = g.Token
		if r := send(context.Background(), c, http.MethodDelete, e.srv.URL+"/locks/h2?token="+tok(g.Token), ""); r.code != http.StatusOK {
			t.Fatalf("release over h2c: %d %s", r.code, r.body)
		}
	}
	if d := dials.Load(); d != 1 {
		t.Fatalf("%d connections for %d multiplexed long polls, want 1", d, n)
	}
	if st := e.status("h2"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("status %+v", st)
	}
}

func TestShutdownAnswersWaiters(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	e.acquire("/locks/s?lease=30")
	var ws []<-chan resp
	for i := range 3 {
		ws = append(ws, e.async(context.Background(), e.client, http.MethodPost, "/locks/s", ""))
		e.waitWaiters("s", i+1)
	}
	if err := e.eng.Close(); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		r := recv(t, w, "parked acquire")
		if r.code != http.StatusServiceUnavailable || r.errBody(t).Code != api.CodeUnavailable {
			t.Fatalf("waiter %d: %d %s", i, r.code, r.body)
		}
		if ra := r.hdr.Get("Retry-After"); ra == "" {
			t.Fatalf("waiter %d: no Retry-After", i)
		} else if _, err := strconv.Atoi(ra); err != nil {
			t.Fatalf("Retry-After %q is not seconds", ra)
		}
	}
	r := e.do(http.MethodPost, "/locks/new", "")
	if r.code != http.StatusServiceUnavailable || r.hdr.Get("Retry-After") == "" {
		t.Fatalf("acquire after close: %d %s", r.code, r.body)
	}
}

func TestHeadIsGetWithoutBody(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	e.acquire("/locks/h?lease=600")
	for _, path := range []string{"/healthz", "/readyz", "/locks/h", "/locks", "/openapi.json"} {
		r := e.do(http.MethodHead, path, "")
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.code != http.StatusOK || len(r.body) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes of body, want 200 and none", path, r.code, len(r.body))
		}
	}
}

// A poll ended early by poll_timeout: with an Idempotency-Key the answer
// says the place is kept (and a repeat resumes it); without one it says
// the place was not kept, which is what the engine did.
func TestPollTimeoutSaysWhetherThePlaceIsKept(t *testing.T) {
	e := newEnv(t, engine.Config{PollTimeout: 50 * time.Millisecond}, handlers.Config{})
	held := e.acquire("/locks/pt?lease=30")
	anon := e.do("POST", "/locks/pt?wait=5", "")
	if anon.code != http.StatusRequestTimeout || anon.errBody(t).Code != api.CodePollTimeout || !strings.Contains(anon.errBody(t).Message, "not kept") {
		t.Fatalf("without an Idempotency-Key: %d %s", anon.code, anon.body)
	}
	if n := e.status("pt").Waiters; n != 0 {
		t.Errorf("the anonymous waiter is still queued (%d waiters)", n)
	}
	named := e.do("POST", "/locks/pt?wait=5", "", api.HeaderIdempotencyKey, "pt-1")
	if named.code != http.StatusRequestTimeout || !strings.Contains(named.errBody(t).Message, "is kept") {
		t.Fatalf("with an Idempotency-Key: %d %s", named.code, named.body)
	}
	if n := e.status("pt").Waiters; n != 1 {
		t.Errorf("the waiter with an Idempotency-Key is not kept (%d waiters)", n)
	}
	e.release("pt", held.Token)
}

// TestEmptyLockTokenHeader: an empty Lock-Token header is a 400 that says
// the header is empty, not that no token was given.
func TestEmptyLockTokenHeader(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	g := e.acquire("/locks/h")
	for _, method := range []string{http.MethodDelete, http.MethodPatch} {
		r := e.do(method, "/locks/h", "", api.HeaderLockToken, "")
		eb := r.errBody(t)
		if r.code != http.StatusBadRequest || eb.Field != "token" || !strings.Contains(eb.Message, "empty") {
			t.Errorf("%s with an empty Lock-Token: %d %s, want 400 saying token is empty", method, r.code, r.body)
		}
	}
	e.release("h", g.Token)
}

// TestStalledBodyIsAnswered sends a POST whose body stops short of its
// Content-Length and never comes: past the body's read deadline the node
// answers 400 naming body and closes the connection, and nothing is
// queued or held. (net/http reads what is left of an unread body before
// it writes an answer; with the deadline lifted it waited for the missing
// bytes forever, and the sender heard nothing.)
func TestStalledBodyIsAnswered(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const req = "POST /locks/stalled HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"lease\""
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	// The limit turns a hang into a failure; the node's deadline is 10 s.
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("no answer and no close: read %q, %v", got, err)
	}
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 400 ")) || !bytes.Contains(got, []byte(`"field":"body"`)) {
		t.Fatalf("answer %q, want a 400 naming body", got)
	}
	// It says what happened, not the socket's error (addresses, escaped).
	if !bytes.Contains(got, []byte("did not arrive in full within 10s")) || bytes.Contains(got, []byte("tcp")) {
		t.Fatalf("answer %q, want it to say the body did not arrive within 10s", got)
	}
	if st := e.status("stalled"); len(st.Holders) != 0 || st.Waiters != 0 {
		t.Fatalf("state after the refusal: %+v", st)
	}
}

// TestHalfClosedWaiterIsNotAnswered200 queues an HTTP/1.1 acquire whose
// client then half-closes its connection, which net/http takes for a
// client gone: the waiter leaves the queue, and the connection is closed
// without an answer. (The handler wrote nothing for a client gone, and
// net/http then answered "200 OK" with an empty body, which a client
// still reading took for a success without a token.)
func TestHalfClosedWaiterIsNotAnswered200(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	g := e.acquire("/locks/hc?lease=600")
	c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /locks/hc HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	e.waitWaiters("hc", 1)
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	e.waitWaiters("hc", 0)
	// The limit turns a hang into a failure.
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read %q, %v; want the connection closed", got, err)
	}
	if len(got) != 0 {
		t.Fatalf("a waiter gone was answered %q; want no answer", got)
	}
	e.release("hc", g.Token)
}

// A token above the range is named in the 400's message as every other
// refused token is (`got "9007199254740992"`); it said only what a token
// must be.
func TestTokenOutOfRangeSaysWhatItGot(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, tc := range []struct{ path, body, got string }{
		{"/locks/t?token=9007199254740992", "", "9007199254740992"},
		{"/locks/t", `{"token":9007199254740992}`, "9007199254740992"},
		{"/locks/t?token=x", "", "x"},
	} {
		r := e.do(http.MethodDelete, tc.path, tc.body)
		want := `token: must be a fencing token: an integer from 1 to 2^53-1, got "` + tc.got + `"`
		if eb := r.errBody(t); r.code != http.StatusBadRequest || eb.Field != "token" || eb.Message != want {
			t.Errorf("DELETE %s %s: %d %s, want 400 %s", tc.path, tc.body, r.code, r.body, want)
		}
	}
}
