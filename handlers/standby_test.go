package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// standbyGate is a node that is not the active and holds no replica; the
// active is at active ("" = none known); refused: every other peer
// refuses this node.
type standbyGate struct {
	active  string
	refused bool
}

func (g standbyGate) Serving() bool                              { return false }
func (g standbyGate) RefusedByPeers() bool                       { return g.refused }
func (g standbyGate) HoldsBack(uint64) bool                      { return false }
func (g standbyGate) ActiveURL(context.Context) (string, func()) { return g.active, func() {} }
func (g standbyGate) ReplicaLag() (lag time.Duration, ok bool)   { return 0, false }

// noFollow sends one request and returns its answer without following a
// redirect.
func noFollow(t *testing.T, method, url string, hdr ...string) resp {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(c.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return send(ctx, c, method, url, "", hdr...)
}

// SPEC section 3: "a standby answers every /locks call with 307 and
// Location: the same path and query on the active". The query goes on as
// the client wrote it: rebuilt from its parsed form, a part that does not
// parse ("wait=%zz", "lease=5;wait=1") vanished, and the active, which
// answers such a query 400, granted a different call instead (SPEC section
// 2: "Bad input never changes state").
func TestStandbyRedirectKeepsTheQuery(t *testing.T) {
	const active = "http://active.test:7070"
	e := newEnv(t, engine.Config{}, handlers.Config{Gate: standbyGate{active: active}})
	for _, pq := range []string{
		"/locks/k?lease=5&wait=%zz",
		"/locks/k?lease=5;wait=1",
		"/locks/k?wait=1&lease=5&owner=x%20y",
		"/locks/a%2Fb/c?lease=5&lease=5",
		"/locks/k",
		"/locks/k?token=1796152491888949",
	} {
		for _, method := range []string{"POST", "DELETE", "PATCH"} {
			r := noFollow(t, method, e.srv.URL+pq)
			if r.code != http.StatusTemporaryRedirect || r.hdr.Get("Location") != active+pq {
				t.Errorf("%s %s on a standby: %d, Location %q; want 307 to %q", method, pq, r.code, r.hdr.Get("Location"), active+pq)
			}
		}
	}
}

// A standby that knows no active answers 503 with Retry-After, and says
// why: every other peer refusing it (its cluster_secret differs) is not
// a failover under way, and retrying will not end it. Both said "no
// active node is known at the moment; retry".
func TestStandbyNamesWhyNoActiveIsKnown(t *testing.T) {
	for _, c := range []struct {
		refused bool
		want    string
	}{
		{false, "no active node is known at the moment; retry"},
		{true, "this node knows no active: every other node refuses its peer requests (its cluster_secret differs from theirs)"},
	} {
		e := newEnv(t, engine.Config{}, handlers.Config{Gate: standbyGate{refused: c.refused}})
		for _, method := range []string{"POST", "DELETE", "PATCH"} {
			r := noFollow(t, method, e.srv.URL+"/locks/k?token=1")
			if eb := r.errBody(t); r.code != http.StatusServiceUnavailable || eb.Code != "unavailable" ||
				!strings.HasPrefix(eb.Message, c.want) || r.hdr.Get("Retry-After") != "1" {
				t.Errorf("%s on a standby (refused by its peers: %v): %d %s, Retry-After %q; want 503 unavailable saying %q, Retry-After 1",
					method, c.refused, r.code, r.body, r.hdr.Get("Retry-After"), c.want)
			}
		}
	}
}

// SPEC section 2: "Answers honour Accept: text/plain on every /locks call
// (… an error's is `<code>: <message>`)": the standby's 307 and its 503
// while no active is known too.
func TestStandbyAnswersInText(t *testing.T) {
	for _, c := range []struct {
		active string
		status int
		code   string
	}{
		{"http://active.test:7070", http.StatusTemporaryRedirect, "not_active: "},
		{"", http.StatusServiceUnavailable, "unavailable: "},
	} {
		e := newEnv(t, engine.Config{}, handlers.Config{Gate: standbyGate{active: c.active}})
		r := noFollow(t, "POST", e.srv.URL+"/locks/k?lease=5", "Accept", "text/plain")
		body := string(r.body)
		if r.code != c.status || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/plain") ||
			!strings.HasPrefix(body, c.code) || !strings.HasSuffix(body, "\n") || strings.Count(body, "\n") != 1 {
			t.Errorf("POST on a standby (active %q) with Accept: text/plain: %d %q %q", c.active, r.code, r.hdr.Get("Content-Type"), body)
		}
		r = noFollow(t, "POST", e.srv.URL+"/locks/k?lease=5")
		if r.code != c.status || !strings.HasPrefix(r.hdr.Get("Content-Type"), "application/json") {
			t.Errorf("POST on a standby (active %q) in JSON: %d %q %q", c.active, r.code, r.hdr.Get("Content-Type"), r.body)
		}
	}
}

// GET /readyz answers 200 only on a node that serves the lock calls: an
// active whose gate does not serve them (it ran again after a pause and
// has not yet polled every peer: the cluster may have promoted another
// node meanwhile) answers 503, as those calls do. Before, it answered
// 200 {"status":"active"} beside the promoted node, and a load balancer
// routing on /readyz sent calls to a node that answered them all 503 (a
// tester: two nodes ready for 0.2-1.3 s after every SIGCONT).
func TestReadyzOnlyWhereTheLockCallsAreServed(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{Gate: standbyGate{}})
	if !e.eng.Active() {
		t.Fatal("the premise: an active engine")
	}
	r := noFollow(t, "GET", e.srv.URL+"/readyz")
	if r.code != http.StatusServiceUnavailable || !strings.Contains(string(r.body), `"resuming"`) || r.hdr.Get("Retry-After") == "" {
		t.Fatalf("GET /readyz on an active that does not serve: %d %s (Retry-After %q), want 503 resuming with Retry-After", r.code, r.body, r.hdr.Get("Retry-After"))
	}
	e = newEnv(t, engine.Config{}, handlers.Config{})
	if r := noFollow(t, "GET", e.srv.URL+"/readyz"); r.code != http.StatusOK || !strings.Contains(string(r.body), `"active"`) {
		t.Fatalf("GET /readyz on a single node: %d %s, want 200 active", r.code, r.body)
	}
}
