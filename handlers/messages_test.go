package handlers_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A 400 says what it got, and in the words of what the caller sent: a
// bad Last-Event-ID is called the id of an event received, not a "Seq".
func TestBadReadParametersSayWhatTheyGot(t *testing.T) {
	log := handlers.NewEventLog(0)
	e := newEnv(t, engine.Config{OnEvent: log.Add}, handlers.Config{Events: log})
	t.Cleanup(log.Close)
	for _, c := range []struct {
		path, field, want string
		hdr               []string
	}{
		{"/locks?limit=0", "limit", `limit: must be an integer from 1 to 10000, got "0"`, nil},
		{"/locks?limit=x", "limit", `got "x"`, nil},
		{"/events?since=x", "since", `since: must be the seq of an event (an unsigned integer, no leading zero), got "x"`, nil},
		{"/events", "Last-Event-ID", `Last-Event-ID: must be the id of the last event received (its seq, an unsigned integer, no leading zero), got "abc"`, []string{"Last-Event-ID", "abc"}},
	} {
		r := e.do(http.MethodGet, c.path, "", c.hdr...)
		eb := r.errBody(t)
		if r.code != http.StatusBadRequest || eb.Field != c.field || !strings.Contains(eb.Message, c.want) || strings.Contains(eb.Message, "Seq") {
			t.Errorf("GET %s %v: %d %s; want 400 naming %s, saying %q", c.path, c.hdr, r.code, r.body, c.field, c.want)
		}
	}
	r := e.do(http.MethodGet, "/events", "", "Last-Event-ID", "1", "Last-Event-ID", "2")
	if eb := r.errBody(t); r.code != http.StatusBadRequest || strings.Contains(eb.Message, "Seq") || !strings.Contains(eb.Message, "more than once; send one (the id of the last event received)") {
		t.Errorf("two Last-Event-IDs: %d %s", r.code, r.body)
	}
}

// curl -d lease=5 sends a form (application/x-www-form-urlencoded), not
// JSON: the 400 says that the body is a form and where its parameters go
// (the query string, or a JSON object it spells out), and changes
// nothing. A body that is no form of the call's parameters keeps the
// plain message. Found replaying public reports of curl's -d sending a
// form to a JSON API (kre/Kinetic-Rules-Engine#1,
// worldcoin/world-id-docs#393): the answer said only "must be a JSON
// object", which does not tell a curl user what went wrong. The pairs
// are not joined by "&", which JSON would carry as \u0026.
func TestFormBodySaysItIsAForm(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	h := e.do(http.MethodPost, "/locks/h?lease=30", "").grant(t)
	tok := strconv.FormatUint(h.Token, 10)
	for _, c := range []struct {
		method, path, body, want string
	}{
		{http.MethodPost, "/locks/k", "lease=5&wait=0.5",
			`body: must be a JSON object, got a form (as curl -d sends one): put lease=5 and wait=0.5 in the query string, or send them as JSON: {"lease":5,"wait":0.5}`},
		{http.MethodPost, "/locks/k", "owner=ci%20job&mode=shared&limit=2",
			`put owner=ci%20job, mode=shared and limit=2 in the query string, or send them as JSON: {"owner":"ci job","mode":"shared","limit":2}`},
		{http.MethodDelete, "/locks/h", "token=" + tok,
			`put token=` + tok + ` in the query string, or send them as JSON: {"token":` + tok + `}`},
		{http.MethodDelete, "/locks/h", "force=true", `{"force":true}`},
		{http.MethodPatch, "/locks/h", "token=" + tok + "&lease=60", `{"token":` + tok + `,"lease":60}`},
		// a value that JSON cannot carry as the call wants: no JSON spelled out
		{http.MethodPost, "/locks/k", "lease=abc", `put lease=abc in the query string.`},
	} {
		r := e.do(c.method, c.path, c.body, "Content-Type", "application/x-www-form-urlencoded")
		eb := r.errBody(t)
		if r.code != http.StatusBadRequest || eb.Field != "body" || !strings.Contains(eb.Message, c.want) {
			t.Errorf("%s %s -d %q: %d %s; want 400 naming body, saying %q", c.method, c.path, c.body, r.code, r.body, c.want)
		}
		if bytes.Contains(r.body, []byte(`\u0026`)) { // encoding/json escapes "&"
			t.Errorf("%s -d %q: the message reads %s to a curl user", c.method, c.body, r.body)
		}
	}
	for _, body := range []string{"lease", "bogus=1", "x y", "lease=5&bogus=1", "<xml/>", "lease=5&lease=6", "lease=5\nwait=1", "owner=a\tb"} {
		r := e.do(http.MethodPost, "/locks/k", body)
		if eb := r.errBody(t); r.code != http.StatusBadRequest || eb.Field != "body" || eb.Message != "body: must be a JSON object" {
			t.Errorf("POST -d %q: %d %s; want the plain 400", body, r.code, r.body)
		}
	}
	if g := string(e.do(http.MethodGet, "/locks/h", "").body); !strings.Contains(g, tok) {
		t.Errorf("a refused form changed state: %s", g)
	}
	if g := string(e.do(http.MethodGet, "/locks/k", "").body); !strings.Contains(g, `"holder":null`) {
		t.Errorf("a refused form changed state: %s", g)
	}
}

// A gzip-compressed body (Content-Encoding: gzip, which some HTTP clients
// set up for every request) was read as JSON and answered "body: is not
// UTF-8". The 400 names Content-Encoding and changes nothing; identity is
// accepted.
func TestCompressedBodyNamesContentEncoding(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"lease":5}`))
	zw.Close()
	for _, ce := range [][]string{{"Content-Encoding", "gzip"}, {"Content-Encoding", "identity", "Content-Encoding", "gzip"}} {
		r := e.do(http.MethodPost, "/locks/ce", gz.String(), append([]string{"Content-Type", "application/json"}, ce...)...)
		if eb := r.errBody(t); r.code != http.StatusBadRequest || eb.Field != "Content-Encoding" || !strings.Contains(eb.Message, "uncompressed") {
			t.Fatalf("%v: %d %s; want 400 naming Content-Encoding", ce, r.code, r.body)
		}
	}
	if st := e.status("ce"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("a refused acquire changed the state: %+v", st)
	}
	if g := e.do(http.MethodPost, "/locks/ce", `{"lease":5}`, "Content-Encoding", "identity").grant(t); g.Lease != 5 {
		t.Fatalf("identity: lease %v", g.Lease)
	}
}

// A read takes its parameters in the query string; a JSON body on it, as
// an acquire's may be, was ignored: GET /locks with {"prefix":"x"}
// answered every lock as if filtered. It is a 400 naming body. (GET
// /locks/{key} takes no parameter at all: see
// TestNoParamsCallRefusesABodyWithoutPointingToTheQuery.)
func TestReadWithABodyIsRefused(t *testing.T) {
	log := handlers.NewEventLog(0)
	e := newEnv(t, engine.Config{OnEvent: log.Add}, handlers.Config{Events: log})
	t.Cleanup(log.Close)
	e.acquire("/locks/other")
	for _, c := range []struct{ path, body string }{
		{"/locks", `{"prefix":"x"}`},
		{"/events", `{"key":"x"}`},
	} {
		r := e.do(http.MethodGet, c.path, c.body, "Content-Type", "application/json")
		if eb := r.errBody(t); r.code != http.StatusBadRequest || eb.Field != "body" || !strings.Contains(eb.Message, "query string") {
			t.Errorf("GET %s with a body: %d %s; want 400 naming body", c.path, r.code, r.body)
		}
	}
	if r := e.do(http.MethodGet, "/locks?prefix=x", ""); r.code != http.StatusOK {
		t.Fatalf("GET /locks?prefix=x: %d %s", r.code, r.body)
	}
}

// A call that takes no parameter at all (GET /locks/{key}, /cluster,
// /healthz, /readyz, /metrics) refuses a body saying just that: before, it
// said to put the parameters in the query string, where the same call then
// refused each one ("takes no parameters").
func TestNoParamsCallRefusesABodyWithoutPointingToTheQuery(t *testing.T) {
	log := handlers.NewEventLog(0)
	e := newEnv(t, engine.Config{OnEvent: log.Add}, handlers.Config{Events: log})
	t.Cleanup(log.Close)
	for _, path := range []string{"/locks/k", "/cluster", "/healthz", "/readyz", "/metrics"} {
		r := e.do(http.MethodGet, path, `{"x":1}`, "Content-Type", "application/json")
		eb := r.errBody(t)
		if r.code != http.StatusBadRequest || eb.Field != "body" || strings.Contains(eb.Message, "query string") || !strings.Contains(eb.Message, "takes no parameters") {
			t.Errorf("GET %s with a body: %d %s; want 400 naming body, saying it takes no parameters", path, r.code, r.body)
		}
	}
}

// A JSON body whose number breaks JSON's syntax (a leading zero: 02) is a
// 400 naming body, whichever field it is in: it was judged as the field's
// value 0 in limit and token ("limit: must be an integer from 1 to 10000,
// got \"0\"", a value the client never sent) and as invalid JSON in lease
// (breaker J). Nothing changes.
func TestBadJSONNumberNamesTheBody(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	h := e.do(http.MethodPost, "/locks/h?lease=30", "").grant(t)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/locks/k?wait=0.01", `{"limit":02}`},
		{http.MethodPost, "/locks/k?wait=0.01", `{"lease":05}`},
		{http.MethodPost, "/locks/k?wait=0.01", `{"wait":-01}`},
		{http.MethodDelete, "/locks/h", `{"token":0123}`},
		{http.MethodPatch, "/locks/h", `{"token":01,"lease":5}`},
	} {
		r := e.do(c.method, c.path, c.body)
		eb := r.errBody(t)
		if r.code != http.StatusBadRequest || eb.Field != "body" || !strings.HasPrefix(eb.Message, "body: is not valid JSON: ") {
			t.Errorf("%s %s %s: %d %s; want 400 naming body, not valid JSON", c.method, c.path, c.body, r.code, r.body)
		}
	}
	if g := string(e.do(http.MethodGet, "/locks/h", "").body); !strings.Contains(g, strconv.FormatUint(h.Token, 10)) {
		t.Errorf("a refused body changed state: %s", g)
	}
	if g := string(e.do(http.MethodGet, "/locks/k", "").body); !strings.Contains(g, `"holder":null`) {
		t.Errorf("a refused body changed state: %s", g)
	}
}
