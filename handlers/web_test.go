package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// webEnv is a real engine whose events feed an EventLog, behind an httptest
// server with the given handler config.
type webEnv struct {
	eng    *engine.Engine
	events *handlers.EventLog
	srv    *httptest.Server
}

func newWebEnv(t *testing.T, hcfg handlers.Config) *webEnv {
	t.Helper()
	ev := hcfg.Events
	if ev == nil {
		ev = handlers.NewEventLog(64)
	}
	cfg := engine.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.OnEvent = ev.Add
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	if hcfg.Node == "" {
		hcfg.Node = "http://node-under-test"
	}
	hcfg.Events = ev
	srv := httptest.NewServer(handlers.New(eng, hcfg))
	t.Cleanup(srv.Close)
	t.Cleanup(ev.Close)
	t.Cleanup(func() { _ = eng.Close() })
	return &webEnv{eng: eng, events: ev, srv: srv}
}

func (e *webEnv) do(t *testing.T, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// acquire takes key for 30 s and returns the token.
func (e *webEnv) acquire(t *testing.T, key string) uint64 {
	t.Helper()
	res := e.do(t, http.MethodPost, "/locks/"+key+"?lease=30", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /locks/%s: %s", key, res.Status)
	}
	tok, err := strconv.ParseUint(res.Header.Get(api.HeaderLockToken), 10, 64)
	if err != nil {
		t.Fatalf("Lock-Token %q: %v", res.Header.Get(api.HeaderLockToken), err)
	}
	return tok
}

func TestCORSPreflight(t *testing.T) {
	const origin = "https://app.example"
	e := newWebEnv(t, handlers.Config{CORSOrigins: []string{origin}})
	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodPatch} {
		for _, o := range []string{origin, "null"} {
			res := e.do(t, http.MethodOptions, "/locks/orders/42", map[string]string{
				"Origin":                         o,
				"Access-Control-Request-Method":  m,
				"Access-Control-Request-Headers": "authorization,content-type,idempotency-key,lock-token",
			})
			if res.StatusCode/100 != 2 {
				t.Errorf("preflight %s from %s: %s", m, o, res.Status)
			}
			h := res.Header
			if got := h.Get("Access-Control-Allow-Origin"); got != o {
				t.Errorf("preflight %s from %s: Access-Control-Allow-Origin %q", m, o, got)
			}
			if got := h.Get("Access-Control-Allow-Methods"); !strings.Contains(got, m) {
				t.Errorf("preflight %s: Access-Control-Allow-Methods %q", m, got)
			}
			if got := strings.ToLower(h.Get("Access-Control-Allow-Headers")); !strings.Contains(got, "authorization") ||
				!strings.Contains(got, "idempotency-key") || !strings.Contains(got, "lock-token") || !strings.Contains(got, "content-type") {
				t.Errorf("preflight %s: Access-Control-Allow-Headers %q", m, got)
			}
			if h.Get("Access-Control-Allow-Credentials") != "" {
				t.Errorf("preflight %s: credentials allowed", m)
			}
		}
	}
}

func TestCORSActualRequest(t *testing.T) {
	const origin = "http://127.0.0.1:8080"
	e := newWebEnv(t, handlers.Config{CORSOrigins: []string{origin + "/"}})
	for _, o := range []string{origin, "null"} {
		res := e.do(t, http.MethodPost, "/locks/cors-"+strconv.Itoa(len(o)), map[string]string{"Origin": o})
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST from %s: %s", o, res.Status)
		}
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != o {
			t.Errorf("POST from %s: Access-Control-Allow-Origin %q", o, got)
		}
		if got := res.Header.Get("Access-Control-Expose-Headers"); !strings.Contains(got, api.HeaderLockToken) || !strings.Contains(got, api.HeaderReplicaLag) {
			t.Errorf("POST from %s: Access-Control-Expose-Headers %q lacks Lock-Token or Baton-Replica-Lag", o, got)
		}
		if !strings.Contains(res.Header.Get("Vary"), "Origin") {
			t.Errorf("POST from %s: no Vary: Origin", o)
		}
	}
	res := e.do(t, http.MethodGet, "/locks", map[string]string{"Origin": "https://elsewhere.example"})
	if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("GET from an origin not configured: Access-Control-Allow-Origin %q", got)
	}
}

func TestCORSOffByDefault(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	for _, o := range []string{"https://app.example", "null"} {
		res := e.do(t, http.MethodOptions, "/locks/k", map[string]string{"Origin": o, "Access-Control-Request-Method": "DELETE"})
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("preflight from %s with no cors_origins: Access-Control-Allow-Origin %q", o, got)
		}
		res = e.do(t, http.MethodGet, "/locks", map[string]string{"Origin": o})
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("GET from %s with no cors_origins: Access-Control-Allow-Origin %q", o, got)
		}
	}
}

// With auth on, a preflight needs no token, and a 401 carries the CORS
// headers so that the page can read it and ask for a token.
func TestCORSWithAuth(t *testing.T) {
	const origin = "https://app.example"
	e := newWebEnv(t, handlers.Config{CORSOrigins: []string{origin}, AuthTokens: []string{"s3cret"}})
	res := e.do(t, http.MethodOptions, "/locks/k", map[string]string{
		"Origin": origin, "Access-Control-Request-Method": "DELETE", "Access-Control-Request-Headers": "authorization",
	})
	if res.StatusCode/100 != 2 || res.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("preflight with auth on: %s, Access-Control-Allow-Origin %q", res.Status, res.Header.Get("Access-Control-Allow-Origin"))
	}
	res = e.do(t, http.MethodGet, "/locks", map[string]string{"Origin": origin})
	if res.StatusCode != http.StatusUnauthorized || res.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("GET without token: %s, Access-Control-Allow-Origin %q", res.Status, res.Header.Get("Access-Control-Allow-Origin"))
	}
	res = e.do(t, http.MethodGet, "/locks", map[string]string{"Origin": origin, "Authorization": "Bearer s3cret"})
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET with token: %s", res.Status)
	}
}

func TestValidateCORSOrigins(t *testing.T) {
	for _, tc := range []struct {
		origins []string
		ok      bool
	}{
		{nil, true},
		{[]string{"*"}, true},
		{[]string{"null"}, true},
		{[]string{"https://app.example", "http://127.0.0.1:8080", "http://localhost:3000/"}, true},
		{[]string{"https://*.example.com"}, true},
		{[]string{"app.example"}, false},
		{[]string{"ftp://app.example"}, false},
		{[]string{"https://app.example/path"}, false},
		{[]string{"https://app.example?x=1"}, false},
		{[]string{"https://*.*.example"}, false},
		{[]string{""}, false},
	} {
		err := handlers.ValidateCORSOrigins(tc.origins)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateCORSOrigins(%q) = %v, want ok=%v", tc.origins, err, tc.ok)
		}
	}
}

func TestEventLogRing(t *testing.T) {
	l := handlers.NewEventLog(4)
	if evs, missed, _, last := l.Since(0, 0); evs != nil || missed != 0 || last != 0 {
		t.Fatalf("empty log: %v %d %d", evs, missed, last)
	}
	for i := 1; i <= 10; i++ {
		l.Add(engine.Event{Kind: engine.EventGrant, Key: "k", Token: uint64(i), At: int64(i) * 1e9})
	}
	l.AddEvent(api.Event{Kind: api.EventPromote, Node: "http://b"})
	evs, missed, _, last := l.Since(0, 0)
	if last != 11 || missed != 7 || len(evs) != 4 {
		t.Fatalf("Since(0) = %d events, missed %d, last %d; want 4, 7, 11", len(evs), missed, last)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(8+i) {
			t.Errorf("event %d: seq %d, want %d", i, ev.Seq, 8+i)
		}
	}
	if evs[0].Kind != api.EventGrant || evs[0].Token != 8 || !evs[0].At.Equal(time.Unix(8, 0)) {
		t.Errorf("event 0 = %+v", evs[0])
	}
	if evs[3].Kind != api.EventPromote || evs[3].Node != "http://b" || evs[3].At.IsZero() {
		t.Errorf("cluster event = %+v", evs[3])
	}
	evs, missed, _, _ = l.Since(9, 0)
	if len(evs) != 2 || missed != 0 || evs[0].Seq != 10 {
		t.Errorf("Since(9) = %+v, missed %d", evs, missed)
	}
	// At most max, the oldest first: the rest is read in turns, not
	// missed; missed counts only what the ring no longer holds.
	evs, missed, upto, _ := l.Since(7, 1)
	if len(evs) != 1 || missed != 0 || evs[0].Seq != 8 || upto != 8 {
		t.Errorf("Since(7, max 1) = %+v, missed %d, upto %d; want seq 8, 0, 8", evs, missed, upto)
	}
	evs, missed, upto, _ = l.Since(2, 2)
	if len(evs) != 2 || missed != 5 || evs[0].Seq != 8 || upto != 9 {
		t.Errorf("Since(2, max 2) = %+v, missed %d, upto %d; want seqs 8-9, 5, 9", evs, missed, upto)
	}
	// Entries are overwritten in place: a lock event where the cluster
	// event was, and a cluster event where a lock event was, keep
	// nothing of what they replace.
	for i := 12; i <= 15; i++ {
		l.Add(engine.Event{Kind: engine.EventRelease, Key: "j", Token: uint64(i)})
	}
	l.AddEvent(api.Event{Kind: api.EventPromote, Node: "http://c"})
	evs, _, _, _ = l.Since(14, 0)
	if len(evs) != 2 || evs[0].Kind != api.EventRelease || evs[0].Node != "" || evs[0].Token != 15 || evs[1].Kind != api.EventPromote || evs[1].Key != "" || evs[1].Token != 0 {
		t.Errorf("after the ring turned: %+v", evs)
	}
}

func TestEventsJSON(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	tok := e.acquire(t, "jobs/1")
	if res := e.do(t, http.MethodDelete, "/locks/jobs/1?token="+strconv.FormatUint(tok, 10), nil); res.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %s", res.Status)
	}
	res := e.do(t, http.MethodGet, "/events", nil)
	var list api.EventList
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %s %v", res.Status, err)
	}
	var kinds []string
	for _, ev := range list.Events {
		kinds = append(kinds, ev.Kind)
		if ev.Key != "jobs/1" || ev.Token != tok {
			t.Errorf("event %+v: want key jobs/1, token %d", ev, tok)
		}
	}
	if strings.Join(kinds, ",") != "grant,release" || list.Last != 2 {
		t.Errorf("events %v, last %d; want grant,release and 2", kinds, list.Last)
	}
	res = e.do(t, http.MethodGet, "/events?since=1", nil)
	list = api.EventList{}
	_ = json.NewDecoder(res.Body).Decode(&list)
	if len(list.Events) != 1 || list.Events[0].Kind != api.EventRelease {
		t.Errorf("since=1: %+v", list.Events)
	}
	if res := e.do(t, http.MethodGet, "/events?since=x", nil); res.StatusCode != http.StatusBadRequest {
		t.Errorf("since=x: %s", res.Status)
	}
}

// sseReader reads server-sent events: (id, event, data) per message.
type sseReader struct{ sc *bufio.Scanner }

func (r sseReader) next() (id, event, data string, err error) {
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			if data != "" || event != "" {
				return id, event, data, nil
			}
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		}
	}
	if err = r.sc.Err(); err == nil {
		err = io.EOF
	}
	return
}

func TestEventsStream(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func(lastID string) (*http.Response, sseReader) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("GET /events stream: %s, %s", res.Status, ct)
		}
		return res, sseReader{bufio.NewScanner(res.Body)}
	}
	res, rd := open("")
	defer res.Body.Close()
	tok := e.acquire(t, "stream/a")
	id, kind, data, err := rd.next()
	if err != nil {
		t.Fatal(err)
	}
	var ev api.Event
	if err := json.Unmarshal([]byte(data), &ev); err != nil || kind != "" || id != "1" || ev.Kind != api.EventGrant || ev.Token != tok || ev.Key != "stream/a" {
		t.Fatalf("first message: id %q event %q data %s (%v)", id, kind, data, err)
	}

	// A reconnect resumes after Last-Event-ID.
	if r := e.do(t, http.MethodDelete, "/locks/stream/a?token="+strconv.FormatUint(tok, 10), nil); r.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %s", r.Status)
	}
	res2, rd2 := open("1")
	defer res2.Body.Close()
	id, _, data, err = rd2.next()
	if err != nil || id != "2" || !strings.Contains(data, `"kind":"release"`) {
		t.Fatalf("resumed stream: id %q data %s (%v)", id, data, err)
	}

	// Close ends every stream.
	e.events.Close()
	for _, r := range []sseReader{rd, rd2} {
		for {
			if _, _, _, err := r.next(); err != nil {
				if err != io.EOF {
					t.Errorf("after Close: %v, want EOF", err)
				}
				break
			}
		}
	}
}

func TestEventsWithoutLog(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.DataDir = t.TempDir()
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv := httptest.NewServer(handlers.New(eng, handlers.Config{}))
	defer srv.Close()
	res, err := http.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /events with no log: %s, want 404", res.Status)
	}
}

func TestClusterSingleNode(t *testing.T) {
	e := newWebEnv(t, handlers.Config{Node: "http://127.0.0.1:7070"})
	tok := e.acquire(t, "c")
	res := e.do(t, http.MethodGet, "/cluster", nil)
	var v api.ClusterView
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if v.Self != "http://127.0.0.1:7070" || v.Role != api.RoleActive || v.Active != v.Self || v.LastToken != tok {
		t.Errorf("cluster view %+v (token %d)", v, tok)
	}
	if len(v.Peers) != 1 || v.Peers[0].URL != v.Self || !v.Peers[0].Live || v.Peers[0].Role != api.RoleActive ||
		v.Peers[0].Priority != 0 || v.Peers[0].LastContact == nil || time.Since(*v.Peers[0].LastContact) > time.Minute {
		t.Errorf("peers %+v", v.Peers)
	}
}

func TestClusterFromConfig(t *testing.T) {
	want := api.ClusterView{Self: "http://b", Role: api.RoleStandby, Active: "http://a", LastToken: 7,
		Peers: []api.PeerView{{URL: "http://a", Priority: 0, Role: api.RoleActive, Live: true}, {URL: "http://b", Priority: 1, Role: api.RoleStandby, Live: true}}}
	e := newWebEnv(t, handlers.Config{Cluster: func() api.ClusterView { return want }})
	var got api.ClusterView
	if err := json.NewDecoder(e.do(t, http.MethodGet, "/cluster", nil).Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Role != want.Role || got.Active != want.Active || len(got.Peers) != 2 || got.Peers[1].Priority != 1 {
		t.Errorf("GET /cluster = %+v, want %+v", got, want)
	}
}

func TestStatusPageServed(t *testing.T) {
	e := newWebEnv(t, handlers.Config{AuthTokens: []string{"s3cret"}})
	res := e.do(t, http.MethodGet, "/", nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "/static/app.js") {
		t.Fatalf("GET / with auth on: %s %s", res.Status, res.Header.Get("Content-Type"))
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	etag := res.Header.Get("ETag")
	if res := e.do(t, http.MethodGet, "/", map[string]string{"If-None-Match": etag}); etag == "" || res.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match %q: %s", etag, res.Status)
	}
	for path, ctype := range map[string]string{"/static/app.js": "text/javascript", "/static/app.css": "text/css", "/static/favicon.svg": "image/svg+xml"} {
		res := e.do(t, http.MethodGet, path, nil)
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), ctype) {
			t.Errorf("GET %s: %s %s", path, res.Status, res.Header.Get("Content-Type"))
		}
	}
	if res := e.do(t, http.MethodGet, "/static/nope.js", nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /static/nope.js: %s", res.Status)
	}
	// The page's data needs the token.
	for _, p := range []string{"/cluster", "/events", "/locks"} {
		if res := e.do(t, http.MethodGet, p, nil); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without token: %s", p, res.Status)
		}
	}
}

// TestCrossOriginWritesNeedCORSOrigins: a page on another origin cannot
// take, renew or release a lock unless cors_origins lists its origin: a
// form or a no-cors fetch needs no preflight, and the node took the lock
// (for up to lease_max) while only the answer was hidden from the page (a
// tester's report, the CSRF class users filed against etcd and Consul).
// The check is net/http's CrossOriginProtection (Sec-Fetch-Site, else
// Origin against Host); clients that send neither (curl, the Go client,
// Node's fetch) and the status page itself (same-origin) are not touched.
func TestCrossOriginWritesNeedCORSOrigins(t *testing.T) {
	const listed = "https://app.example"
	for _, tc := range []struct {
		name string
		cors []string
		hdr  map[string]string
		ok   bool
	}{
		{"no headers", nil, nil, true},
		{"same-origin", nil, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://node-page"}, true},
		{"cross-site", nil, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, false},
		{"origin only", nil, map[string]string{"Origin": "https://evil.example"}, false},
		{"same-site", nil, map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://other.localhost"}, false},
		{"listed", []string{listed}, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": listed}, true},
		{"null after a redirect, configured", []string{listed}, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "null"}, true},
		{"not listed, configured", []string{listed}, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, false},
		{"any origin", []string{"*"}, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newWebEnv(t, handlers.Config{CORSOrigins: tc.cors})
			res := e.do(t, http.MethodPost, "/locks/csrf?lease=30", tc.hdr)
			if tc.ok {
				if res.StatusCode != http.StatusOK {
					t.Fatalf("POST: %s, want 200", res.Status)
				}
				return
			}
			var body api.Error
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusForbidden || body.Code != api.CodeForbidden || body.Field != "Origin" {
				t.Fatalf("POST: %s %+v (%v), want 403 forbidden naming Origin", res.Status, body, err)
			}
			if li, _ := e.eng.Status("csrf"); li.Holder != nil {
				t.Fatal("the refused request took the lock")
			}
			// Reads stay open (safe methods; the answer is the browser's to hide).
			if res := e.do(t, http.MethodGet, "/locks/csrf", tc.hdr); res.StatusCode != http.StatusOK {
				t.Fatalf("GET: %s, want 200", res.Status)
			}
		})
	}
}
