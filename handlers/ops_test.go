package handlers_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/openapi"
)

// opsServer is a real engine wired to Metrics, behind an httptest server.
type opsServer struct {
	eng     *engine.Engine
	metrics *handlers.Metrics
	url     string
	c       *http.Client
}

func newOpsServer(t *testing.T, ec engine.Config, hc handlers.Config) *opsServer {
	t.Helper()
	m := handlers.NewMetrics()
	ec.DataDir = t.TempDir()
	ec.OnEvent = m.OnEvent
	eng, err := engine.New(ec)
	if err != nil {
		t.Fatal(err)
	}
	hc.Metrics = m
	srv := httptest.NewServer(handlers.New(eng, hc))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = eng.Close() })
	return &opsServer{eng: eng, metrics: m, url: srv.URL, c: srv.Client()}
}

// call sends one request; hdr is name, value pairs.
func (o *opsServer) call(t *testing.T, method, path, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, o.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := o.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(b)
}

// scrape reads /metrics into families by name.
func (o *opsServer) scrape(t *testing.T, hdr ...string) map[string]*familyView {
	t.Helper()
	code, _, body := o.call(t, http.MethodGet, "/metrics", "", hdr...)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("decoding /metrics: %v", err)
	}
	out := map[string]*familyView{}
	for name, mf := range mfs {
		out[name] = &familyView{mf}
	}
	return out
}

type familyView struct{ *dto.MetricFamily }

// value returns the value of the first sample whose labels include labels
// (name, value pairs): a counter's, a gauge's or a histogram's count; -1
// when there is none.
func (f *familyView) value(labels ...string) float64 {
	for _, m := range f.GetMetric() {
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			return m.Untyped.GetValue()
		}
	}
	return -1
}

func metric(t *testing.T, fams map[string]*familyView, name string, labels ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("/metrics has no %s", name)
	}
	return f.value(labels...)
}

func TestMetrics(t *testing.T) {
	o := newOpsServer(t, engine.Config{}, handlers.Config{})
	// a: granted, then handed to a waiter on release.
	code, hdr, body := o.call(t, http.MethodPost, "/locks/a?lease=30", "")
	if code != 200 {
		t.Fatalf("acquire: %d %s", code, body)
	}
	tokA := hdr.Get(api.HeaderLockToken)
	waiter := make(chan string, 1)
	go func() {
		_, h, _ := o.call(t, http.MethodPost, "/locks/a?lease=30", "")
		waiter <- h.Get(api.HeaderLockToken)
	}()
	for {
		if _, w := o.eng.Counts(); w == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	fams := o.scrape(t)
	if got := metric(t, fams, "baton_waiters"); got != 1 {
		t.Errorf("baton_waiters %v, want 1", got)
	}
	if code, _, body := o.call(t, http.MethodDelete, "/locks/a?token="+tokA, ""); code != 200 {
		t.Fatalf("release: %d %s", code, body)
	}
	var tokB string
	select {
	case tokB = <-waiter:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not granted")
	}
	// renew b; a short lease on c that expires; a wait on a that times out.
	if code, _, body := o.call(t, http.MethodPatch, "/locks/a?token="+tokB, ""); code != 200 {
		t.Fatalf("renew: %d %s", code, body)
	}
	if code, _, body := o.call(t, http.MethodPost, "/locks/c?lease=0.05", ""); code != 200 {
		t.Fatalf("acquire c: %d %s", code, body)
	}
	if code, _, _ := o.call(t, http.MethodPost, "/locks/a?wait=0.05", ""); code != http.StatusRequestTimeout {
		t.Fatalf("wait: %d, want 408", code)
	}
	// error answers by code
	o.call(t, http.MethodPost, "/locks/a?lease=-1", "")
	o.call(t, http.MethodDelete, "/locks/a?token=1", "")
	for {
		if k, _ := o.eng.Counts(); k == 1 {
			break // c expired
		}
		time.Sleep(5 * time.Millisecond)
	}

	fams = o.scrape(t)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"baton_grants_total", nil, 3},
		{"baton_releases_total", nil, 1},
		{"baton_renewals_total", nil, 1},
		{"baton_lease_expiries_total", nil, 1},
		{"baton_wait_timeouts_total", nil, 1},
		{"baton_enqueues_total", nil, 2},
		{"baton_error_answers_total", []string{"code", api.CodeTimeout}, 1},
		{"baton_error_answers_total", []string{"code", api.CodeInvalidArgument}, 1},
		{"baton_error_answers_total", []string{"code", api.CodeNotHolder}, 1},
		{"baton_error_answers_total", []string{"code", api.CodeNotHeld}, 0},
		{"baton_locks_held", nil, 1},
		{"baton_waiters", nil, 0},
		{"baton_keys", nil, 1},
		{"baton_wait_seconds", nil, 3},
		{"baton_handoff_seconds", nil, 1}, // a → the waiter
		{"baton_role", []string{"role", "active"}, 1},
		{"baton_build_info", nil, 1},
	} {
		if got := metric(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if metric(t, fams, "baton_last_token") <= 0 {
		t.Error("baton_last_token is not set")
	}
	for _, name := range []string{"go_goroutines", "go_build_info", "process_resident_memory_bytes"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("/metrics has no %s", name)
		}
	}

	o.metrics.SetRole(handlers.RoleStandby)
	fams = o.scrape(t)
	if got := metric(t, fams, "baton_role", "role", "standby"); got != 1 {
		t.Errorf("standby role %v", got)
	}
	if got := metric(t, fams, "baton_role", "role", "active"); got != -1 {
		t.Errorf("the old role is still exported: %v", got)
	}
}

func TestAuth(t *testing.T) {
	o := newOpsServer(t, engine.Config{}, handlers.Config{AuthTokens: []string{"alpha", "beta-token"}})
	cases := []struct {
		method, path, auth string
		want               int
	}{
		{"POST", "/locks/k", "", 401},
		{"POST", "/locks/k", "Bearer wrong", 401},
		{"POST", "/locks/k", "Bearer alph", 401},
		{"POST", "/locks/k", "Bearer alphaa", 401},
		{"POST", "/locks/k", "Basic YWxwaGE6", 401},
		{"POST", "/locks/k", "Bearer ", 401},
		{"POST", "/locks/k", "alpha", 401},
		{"GET", "/locks", "", 401},
		{"GET", "/locks/k", "", 401},
		{"GET", "/metrics", "", 401},
		{"GET", "/nowhere", "", 401}, // no route discovery without a token
		{"POST", "/locks/k?lease=5", "Bearer alpha", 200},
		{"GET", "/locks/k", "bearer beta-token", 200},
		{"GET", "/metrics", "Bearer beta-token", 200},
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 200},
		{"GET", "/openapi.json", "", 200},
	}
	for _, c := range cases {
		var hdr []string
		if c.auth != "" {
			hdr = []string{"Authorization", c.auth}
		}
		code, h, body := o.call(t, c.method, c.path, "", hdr...)
		if code != c.want {
			t.Errorf("%s %s (%q): %d %s, want %d", c.method, c.path, c.auth, code, body, c.want)
			continue
		}
		if code == 401 {
			var e api.Error
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code != api.CodeUnauthorized {
				t.Errorf("401 body %q", body)
			}
			if !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: Bearer: %q", h.Get("WWW-Authenticate"))
			}
		}
	}
	// A refused call changed nothing: only the one authorized grant exists.
	if k, w := o.eng.Counts(); k != 1 || w != 0 {
		t.Errorf("counts %d keys %d waiters", k, w)
	}
	if got := metric(t, o.scrape(t, "Authorization", "Bearer alpha"), "baton_error_answers_total", "code", api.CodeUnauthorized); got < 10 {
		t.Errorf("unauthorized answers counted %v", got)
	}
}

func TestOpenAPIServed(t *testing.T) {
	o := newOpsServer(t, engine.Config{}, handlers.Config{})
	code, hdr, body := o.call(t, http.MethodGet, "/openapi.json", "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || body != string(openapi.JSON) {
		t.Fatalf("%d %s: the embedded document was not served", code, hdr.Get("Content-Type"))
	}
	var doc struct {
		Swagger string `json:"swagger"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.Swagger != "2.0" {
		t.Fatalf("not a Swagger 2.0 document: %v", err)
	}
}

// TestMetricsOnStandby: a standby's replayed changes move the gauges but
// not the counters, which count what this node did as the active.
func TestMetricsOnStandby(t *testing.T) {
	o := newOpsServer(t, engine.Config{Standby: true}, handlers.Config{})
	now := time.Now()
	grant := engine.Record{Kind: engine.RecGrant, Key: "r", Token: 42, Lease: time.Minute, At: now.UnixNano(), Expires: now.Add(time.Minute).UnixNano()}
	if err := o.eng.Replay(engine.AppendRecord(nil, &grant)); err != nil {
		t.Fatal(err)
	}
	fams := o.scrape(t)
	if got := metric(t, fams, "baton_locks_held"); got != 1 {
		t.Errorf("baton_locks_held %v after a replicated grant, want 1", got)
	}
	release := engine.Record{Kind: engine.RecRelease, Key: "r", Token: 42, At: now.UnixNano()}
	if err := o.eng.Replay(engine.AppendRecord(nil, &release)); err != nil {
		t.Fatal(err)
	}
	fams = o.scrape(t)
	for _, name := range []string{"baton_grants_total", "baton_releases_total", "baton_locks_held"} {
		if got := metric(t, fams, name); got != 0 {
			t.Errorf("%s = %v on a standby, want 0", name, got)
		}
	}
}

// Role changes as cluster.Config.OnChange reports them: each kind counts in
// its own counter, and only there.
func TestMetricsCountRoleChanges(t *testing.T) {
	o := newOpsServer(t, engine.Config{Standby: true}, handlers.Config{})
	for _, kind := range []string{"promote", "promote", "handoff", "step_down", "step_down", "step_down", "something else"} {
		o.metrics.OnClusterChange(kind)
	}
	fams := o.scrape(t)
	for name, want := range map[string]float64{"baton_promotions_total": 2, "baton_role_handoffs_total": 1, "baton_step_downs_total": 3} {
		if got := metric(t, fams, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// TestObserveNative: the native protocol's answers land in
// baton_native_request_duration_seconds by op and outcome, and its T and
// E answers in baton_error_answers_total by code, as HTTP's error answers
// do (T as timeout).
func TestObserveNative(t *testing.T) {
	m := handlers.NewMetrics()
	m.ObserveNative("A", "OK", time.Millisecond)
	m.ObserveNative("A", "T", 2*time.Second)
	m.ObserveNative("R", api.CodeNotHeld, 10*time.Microsecond)
	m.ObserveNative("R", api.CodeNotHeld, 10*time.Microsecond)
	m.ObserveNative("N", "M", 10*time.Microsecond)
	m.ObserveNative("GET", api.CodeInvalidArgument, time.Microsecond) // an unreadable line's op
	// A ping and a cancel under their own ops, not under "-" with the
	// unreadable lines (a tester's report: every ping counted there).
	m.ObserveNative("P", "OK", time.Microsecond)
	m.ObserveNative("P", "OK", time.Microsecond)
	m.ObserveNative("C", "OK", time.Microsecond)
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			labels := ""
			for _, l := range mt.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + ","
			}
			switch f.GetName() {
			case "baton_native_request_duration_seconds":
				got["native{"+labels+"}"] = float64(mt.GetHistogram().GetSampleCount())
			case "baton_error_answers_total":
				got["errors{"+labels+"}"] = mt.GetCounter().GetValue()
			}
		}
	}
	for k, want := range map[string]float64{
		"native{op=A,outcome=OK,}":               1,
		"native{op=A,outcome=T,}":                1,
		"native{op=R,outcome=not_held,}":         2,
		"native{op=N,outcome=M,}":                1,
		"native{op=-,outcome=invalid_argument,}": 1,
		"native{op=P,outcome=OK,}":               2,
		"native{op=C,outcome=OK,}":               1,
		"errors{code=timeout,}":                  1,
		"errors{code=not_held,}":                 2,
		"errors{code=invalid_argument,}":         1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if _, ok := got["native{op=GET,outcome=invalid_argument,}"]; ok {
		t.Error("a client's made-up op made a series")
	}
}

// histCount is the sample count of the histogram name{labels} ("" for a
// histogram without labels) in m's registry.
func histCount(t *testing.T, m *handlers.Metrics, name, labels string) uint64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			got := ""
			for _, l := range mt.GetLabel() {
				got += l.GetName() + "=" + l.GetValue() + ","
			}
			if got == labels {
				return mt.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// The OK answers of each op land in their own series however many there
// are (the series is kept after the first: Metrics.nativeOK), and a
// series appears with its first answer only.
func TestObserveNativeOKSeries(t *testing.T) {
	m := handlers.NewMetrics()
	if n := histCount(t, m, "baton_native_request_duration_seconds", "op=R,outcome=OK,"); n != 0 {
		t.Fatalf("R OK before any answer: %d", n)
	}
	for range 3 {
		m.ObserveNative("A", "OK", time.Millisecond)
	}
	m.ObserveNative("R", "OK", time.Millisecond)
	m.ObserveNative("AUTH", "OK", time.Millisecond)
	for labels, want := range map[string]uint64{"op=A,outcome=OK,": 3, "op=R,outcome=OK,": 1, "op=AUTH,outcome=OK,": 1, "op=N,outcome=OK,": 0} {
		if n := histCount(t, m, "baton_native_request_duration_seconds", labels); n != want {
			t.Errorf("%s: %d answers, want %d", labels, n, want)
		}
	}
}

// A handoff (a release with waiters, the grant to the next, its
// delivery) is observed once, by the delivery of that grant's token; a
// grant, release or delivery of a key without a handoff observes
// nothing, before it and after it.
func TestHandoffObservedOnce(t *testing.T) {
	m := handlers.NewMetrics()
	ev := func(kind engine.EventKind, token uint64, waiters int) {
		m.OnEvent(engine.Event{Kind: kind, Key: "k", Token: token, Waiters: waiters, At: time.Now().UnixNano()})
	}
	ev(engine.EventGrant, 1, 0)
	m.Delivered("k", 1)
	ev(engine.EventRelease, 1, 1)
	ev(engine.EventGrant, 2, 0)
	m.Delivered("k", 1) // not the handed grant
	if n := histCount(t, m, "baton_handoff_seconds", ""); n != 0 {
		t.Fatalf("%d handoffs observed before the grant's delivery", n)
	}
	m.Delivered("k", 2)
	m.Delivered("k", 2)
	ev(engine.EventRelease, 2, 0)
	ev(engine.EventGrant, 3, 0)
	m.Delivered("k", 3)
	if n := histCount(t, m, "baton_handoff_seconds", ""); n != 1 {
		t.Fatalf("%d handoffs observed, want 1", n)
	}
}

// TestHandoffPendingDroppedWhenTheRoleIsLeft: a handoff pending when the
// node stops being the active (a step-down, whose resync replaces the
// engine's state, or a handoff of the role) is dropped: the release that
// would end it may never be seen (a standby counts no events), and the
// entry stayed for good (the key's shard lost its fast path). A delivery
// of that token afterwards observes nothing.
func TestHandoffPendingDroppedWhenTheRoleIsLeft(t *testing.T) {
	for _, kind := range []string{"step_down", "handoff"} {
		m := handlers.NewMetrics()
		at := time.Now().UnixNano()
		ev := func(kind engine.EventKind, key string, token uint64, waiters int) {
			m.OnEvent(engine.Event{Kind: kind, Key: key, Token: token, Waiters: waiters, At: at})
		}
		ev(engine.EventGrant, "k", 1, 0)
		ev(engine.EventRelease, "k", 1, 1)
		ev(engine.EventGrant, "k", 2, 0)   // a handoff, pending its delivery
		ev(engine.EventRelease, "j", 7, 1) // a step open on another key
		m.OnClusterChange(kind)
		m.Delivered("k", 2)
		ev(engine.EventGrant, "j", 8, 0)
		m.Delivered("j", 8)
		if n := histCount(t, m, "baton_handoff_seconds", ""); n != 0 {
			t.Fatalf("after %s: %d handoffs observed from before it, want 0", kind, n)
		}
	}
}

// TestHandoffCountsEveryWaiterOfAStep: every waiter granted in one hand-on
// step (a writer's release, then the shared waiters it lets in, made with
// the step's one clock reading) counts its own handoff, from the release
// to its own delivery; a grant made later (another At) is no handoff, and
// a pending handoff is kept while another holder of the key releases. Only
// the first reader of a batch was counted.
func TestHandoffCountsEveryWaiterOfAStep(t *testing.T) {
	m := handlers.NewMetrics()
	at := time.Now().UnixNano()
	ev := func(kind engine.EventKind, token uint64, waiters int, at int64) {
		m.OnEvent(engine.Event{Kind: kind, Key: "k", Token: token, Waiters: waiters, At: at})
	}
	ev(engine.EventGrant, 1, 0, at) // the writer
	m.Delivered("k", 1)
	ev(engine.EventRelease, 1, 4, at+1)
	ev(engine.EventGrant, 2, 3, at+1) // three readers in the same step
	ev(engine.EventGrant, 3, 2, at+1)
	ev(engine.EventGrant, 4, 1, at+1) // a writer (1 waiter) stays queued
	ev(engine.EventGrant, 9, 1, at+2) // not of the step (cannot happen while one queues; a guard)
	m.Delivered("k", 2)
	ev(engine.EventRelease, 2, 1, at+3) // reader 2 done: the writer still waits for 3 and 4
	m.Delivered("k", 3)
	m.Delivered("k", 4)
	m.Delivered("k", 9)
	m.Delivered("k", 3) // once each
	if n := histCount(t, m, "baton_handoff_seconds", ""); n != 3 {
		t.Fatalf("%d handoffs observed for a step that granted three readers, want 3", n)
	}
}

// TestHandoffOfSharedWaitersThroughTheEngine: the same through the real
// engine and HTTP: a writer's release hands the lock to three queued
// readers at once, and each one's delivery is a handoff.
func TestHandoffOfSharedWaitersThroughTheEngine(t *testing.T) {
	o := newOpsServer(t, engine.Config{}, handlers.Config{})
	code, hdr, body := o.call(t, http.MethodPost, "/locks/rw?lease=30", "")
	if code != 200 {
		t.Fatalf("acquire: %d %s", code, body)
	}
	const readers = 3
	granted := make(chan int, readers)
	for range readers {
		go func() {
			code, _, _ := o.call(t, http.MethodPost, "/locks/rw?lease=30&mode=shared", "")
			granted <- code
		}()
	}
	for {
		if _, w := o.eng.Counts(); w == readers {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if code, _, body := o.call(t, http.MethodDelete, "/locks/rw?token="+hdr.Get(api.HeaderLockToken), ""); code != 200 {
		t.Fatalf("release: %d %s", code, body)
	}
	for range readers {
		select {
		case code := <-granted:
			if code != 200 {
				t.Fatalf("a reader: %d", code)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the readers were not granted")
		}
	}
	// A delivery is recorded just after its answer is flushed: wait for it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := metric(t, o.scrape(t), "baton_handoff_seconds")
		if got == readers {
			break
		}
		if got > readers || time.Now().After(deadline) {
			t.Fatalf("baton_handoff_seconds counts %v handoffs, want %d (one per reader)", got, readers)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
