package handlers_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
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
		{"/events?since=x", "since", `since: must be the seq of an event (an unsigned integer), got "x"`, nil},
		{"/events", "Last-Event-ID", `Last-Event-ID: must be the id of the last event received (its seq, an unsigned integer), got "abc"`, []string{"Last-Event-ID", "abc"}},
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

// `curl -d lease=30`, the form body many APIs read, was answered "body:
// must be a JSON object", which leaves a newcomer guessing the shape. The
// 400 shows a JSON body and the query string instead, and changes nothing.
func TestFormBodySaysWhatIsRead(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, body := range []string{"lease=30", "lease=30&wait=1", "30"} {
		r := e.do(http.MethodPost, "/locks/form", body, "Content-Type", "application/x-www-form-urlencoded")
		if eb := r.errBody(t); r.code != http.StatusBadRequest || eb.Field != "body" || !strings.Contains(eb.Message, `{"lease":30}`) || !strings.Contains(eb.Message, "?lease=30") {
			t.Fatalf("%q: %d %s; want 400 naming body, showing a JSON body and the query string", body, r.code, r.body)
		}
	}
	if st := e.status("form"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("a refused acquire changed the state: %+v", st)
	}
}

// A read takes its parameters in the query string; a JSON body on it, as
// an acquire's may be, was ignored: GET /locks with {"prefix":"x"}
// answered every lock as if filtered. It is a 400 naming body.
func TestReadWithABodyIsRefused(t *testing.T) {
	log := handlers.NewEventLog(0)
	e := newEnv(t, engine.Config{OnEvent: log.Add}, handlers.Config{Events: log})
	t.Cleanup(log.Close)
	e.acquire("/locks/other")
	for _, c := range []struct{ path, body string }{
		{"/locks", `{"prefix":"x"}`},
		{"/locks/other", `{"lease":5}`},
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
