package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// GET /locks?after= pages past the 10,000 entries one answer can hold.
func TestListPagesWithAfter(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	const n = handlers.MaxListLimit + 50
	for i := range n {
		if _, err := e.eng.Acquire(context.Background(), engine.AcquireRequest{Key: fmt.Sprintf("k/%05d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.eng.Acquire(context.Background(), engine.AcquireRequest{Key: "other"}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("paging does not end")
		}
		r := e.do(http.MethodGet, "/locks?prefix=k/&limit=10000&after="+after, "")
		var l api.LockList
		if err := json.Unmarshal(r.body, &l); err != nil || r.code != http.StatusOK {
			t.Fatalf("%d %s", r.code, r.body[:min(len(r.body), 200)])
		}
		if l.Total != n {
			t.Fatalf("total %d, want %d on every page", l.Total, n)
		}
		for _, st := range l.Locks {
			keys = append(keys, st.Key)
		}
		if len(l.Locks) < 10000 {
			break
		}
		after = l.Locks[len(l.Locks)-1].Key
	}
	if len(keys) != n {
		t.Fatalf("%d keys over the pages, want %d", len(keys), n)
	}
	for i, k := range keys {
		if k != fmt.Sprintf("k/%05d", i) {
			t.Fatalf("key %d is %q: a key repeated or skipped", i, k)
		}
	}
	// after is a key in byte order, not one that must exist.
	r := e.do(http.MethodGet, "/locks?after=k/99999", "")
	var l api.LockList
	if err := json.Unmarshal(r.body, &l); err != nil || len(l.Locks) != 1 || l.Locks[0].Key != "other" {
		t.Fatalf("after a key that does not exist: %s", r.body)
	}
	if r := e.do(http.MethodGet, "/locks?after=a&after=b", ""); r.code != http.StatusBadRequest || r.errBody(t).Field != "after" {
		t.Fatalf("after given twice: %d %s", r.code, r.body)
	}
}

// GET /events?key= keeps one lock's events.
func TestEventsOfOneKey(t *testing.T) {
	log := handlers.NewEventLog(0)
	e := newEnv(t, engine.Config{OnEvent: log.Add}, handlers.Config{Events: log})
	t.Cleanup(log.Close)
	ga := e.acquire("/locks/a")
	gb := e.acquire("/locks/b")
	e.release("a", ga.Token)
	e.release("b", gb.Token)
	log.AddEvent(api.Event{Kind: api.EventPromote, Node: "n"})
	r := e.do(http.MethodGet, "/events?key=a", "")
	var l api.EventList
	if err := json.Unmarshal(r.body, &l); err != nil || r.code != http.StatusOK {
		t.Fatalf("%d %s", r.code, r.body)
	}
	if len(l.Events) != 2 || l.Events[0].Kind != api.EventGrant || l.Events[1].Kind != api.EventRelease || l.Events[0].Key != "a" || l.Events[1].Key != "a" {
		t.Fatalf("events of a: %s", r.body)
	}
	if r := e.do(http.MethodGet, "/events", ""); !strings.Contains(string(r.body), `"b"`) || !strings.Contains(string(r.body), api.EventPromote) {
		t.Fatalf("all events: %s", r.body)
	}
	if r := e.do(http.MethodGet, "/events?key=", ""); r.code != http.StatusBadRequest || r.errBody(t).Field != "key" {
		t.Fatalf("empty key: %d %s", r.code, r.body)
	}
}

// Accept: text/plain on every /locks answer: a grant (acquire, renew) is
// the token and a newline, a release is empty, a status the holder's token
// (empty when free), a list one tab-separated line per lock, an error
// "<code>: <message>".
func TestTextPlainOnEveryLocksCall(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	text := func(method, path string, wantCode int, want string) {
		t.Helper()
		r := e.do(method, path, "", "Accept", "text/plain")
		if r.code != wantCode || string(r.body) != want || (len(r.body) > 0 && !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/plain")) {
			t.Fatalf("%s %s: %d %q (%s), want %d %q", method, path, r.code, r.body, r.hdr.Get("Content-Type"), wantCode, want)
		}
	}
	g := e.acquire("/locks/t")
	tk := tok(g.Token)
	text(http.MethodGet, "/locks/t", http.StatusOK, tk+"\n")
	text(http.MethodGet, "/locks/free", http.StatusOK, "")
	e.acquire("/locks/u")
	r := e.do(http.MethodPost, "/locks/u?wait=0.01", "", "Accept", "text/plain") // a waiter that times out
	if r.code != http.StatusRequestTimeout || string(r.body) != "timeout: the wait ran out before the lock was granted; nothing is held\n" {
		t.Fatalf("timeout: %d %q", r.code, r.body)
	}
	st := e.status("u")
	text(http.MethodGet, "/locks", http.StatusOK, "t\t"+tk+"\t0\nu\t"+tok(st.Holder.Token)+"\t0\n")
	text(http.MethodPatch, "/locks/t?token="+tk+"&lease=5", http.StatusOK, tk+"\n")
	text(http.MethodPatch, "/locks/t?token=1", http.StatusConflict, "not_holder: the lock is held under another token\n")
	text(http.MethodDelete, "/locks/t?token="+tk, http.StatusOK, "")
	text(http.MethodDelete, "/locks/t?token="+tk, http.StatusNotFound, "not_held: nobody holds the lock\n")
	text(http.MethodDelete, "/locks/t", http.StatusBadRequest, "invalid_argument: token: is required (query, JSON body or Lock-Token header)\n")
}

// baton_http_request_duration_seconds counts answers by method, route
// pattern (not the raw path) and status; a made-up method is "other".
func TestRequestDurationByRoute(t *testing.T) {
	o := newOpsServer(t, engine.Config{}, handlers.Config{})
	for _, p := range []string{"/locks/a", "/locks/b/c"} {
		if code, _, body := o.call(t, http.MethodPost, p, ""); code != http.StatusOK {
			t.Fatalf("%s: %d %s", p, code, body)
		}
	}
	o.call(t, http.MethodGet, "/locks/a", "")
	o.call(t, http.MethodPatch, "/locks/a?token=1", "")
	o.call(t, "BREW", "/locks/a", "")
	fams := o.scrape(t)
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"method", "POST", "route", "/locks/*", "code", "200"}, 2},
		{[]string{"method", "GET", "route", "/locks/*", "code", "200"}, 1},
		{[]string{"method", "PATCH", "route", "/locks/*", "code", "409"}, 1},
		{[]string{"method", "other", "route", "", "code", "405"}, 1},
	} {
		if got := metric(t, fams, "baton_http_request_duration_seconds", c.labels...); got != c.want {
			t.Errorf("%v: %v answers, want %v", c.labels, got, c.want)
		}
	}
}

// The event stream honours ?key= too.
func TestEventStreamOfOneKey(t *testing.T) {
	log := handlers.NewEventLog(0)
	e := newEnv(t, engine.Config{OnEvent: log.Add}, handlers.Config{Events: log})
	t.Cleanup(log.Close)
	gb := e.acquire("/locks/b")
	ga := e.acquire("/locks/a")
	e.release("b", gb.Token)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/events?key=a", nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	e.release("a", ga.Token) // after the backlog: a live event
	sc := bufio.NewScanner(res.Body)
	var kinds []string
	for len(kinds) < 2 && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev api.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		if ev.Key != "a" {
			t.Fatalf("the stream of a carries %+v", ev)
		}
		kinds = append(kinds, ev.Kind)
	}
	if strings.Join(kinds, ",") != "grant,release" {
		t.Fatalf("the stream of a: %v (%v)", kinds, sc.Err())
	}
}
