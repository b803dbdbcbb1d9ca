package handlers_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/handlers"
)

// TestEventsBadSeqNamesItsSource: a Last-Event-ID that is not a Seq is a
// 400 naming Last-Event-ID (it named since, a parameter the request did
// not send); a bad ?since= still names since. A Seq is written as the feed
// writes it, a canonical decimal (0, or digits without a leading zero, as
// a token and GET /locks' limit): "01" and "+1" named Seq 1 before.
func TestEventsBadSeqNamesItsSource(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	for _, c := range []struct{ path, lastID, field string }{
		{"/events", "abc", "Last-Event-ID"},
		{"/events", "-1", "Last-Event-ID"},
		{"/events?since=x", "", "since"},
		{"/events?since=x", "5", "since"},
		{"/events?since=01", "", "since"},
		{"/events?since=00", "", "since"},
		{"/events?since=%2B1", "", "since"},
		{"/events?since=%201", "", "since"},
		{"/events", "01", "Last-Event-ID"},
		{"/events", "+1", "Last-Event-ID"},
	} {
		for _, accept := range []string{"application/json", "text/event-stream"} {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+c.path, nil)
			req.Header.Set("Accept", accept)
			if c.lastID != "" {
				req.Header.Set("Last-Event-ID", c.lastID)
			}
			res, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body api.Error
			err = json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			if res.StatusCode != http.StatusBadRequest || err != nil || body.Field != c.field {
				t.Errorf("GET %s (Accept %s, Last-Event-ID %q): %s %+v (%v); want 400 naming %s", c.path, accept, c.lastID, res.Status, body, err, c.field)
			}
		}
	}
}

// TestEventsRepeatedLastEventIDIsRefused: two Last-Event-ID lines are a 400
// naming Last-Event-ID, as other repeated headers are; the first line was
// taken and the second ignored.
func TestEventsRepeatedLastEventIDIsRefused(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	for _, path := range []string{"/events", "/events?since=0"} {
		for _, accept := range []string{"application/json", "text/event-stream"} {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+path, nil)
			req.Header.Set("Accept", accept)
			req.Header.Add("Last-Event-ID", "0")
			req.Header.Add("Last-Event-ID", "0")
			res, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body api.Error
			err = json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			if res.StatusCode != http.StatusBadRequest || err != nil || body.Field != "Last-Event-ID" {
				t.Errorf("GET %s (Accept %s) with two Last-Event-ID lines: %s %+v (%v); want 400 naming Last-Event-ID", path, accept, res.Status, body, err)
			}
		}
	}
}

// TestEventsLastEventIDWinsOverSince: an EventSource reconnecting to a URL
// with ?since= sends Last-Event-ID too, and resumes there: the header
// wins, and a bad one is a 400 even beside a good since. (since won: the
// stream began at the URL's Seq again on every reconnect.)
func TestEventsLastEventIDWinsOverSince(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	for range 10 {
		e.events.AddEvent(api.Event{Kind: api.EventPromote, Node: "http://n"})
	}
	last := e.events.Last()
	do := func(accept, lastID string) (*http.Response, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+"/events?since="+strconv.FormatUint(last-8, 10), nil)
		req.Header.Set("Accept", accept)
		req.Header.Set("Last-Event-ID", lastID)
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if accept == "text/event-stream" {
			sc := bufio.NewScanner(res.Body)
			defer res.Body.Close()
			for sc.Scan() {
				if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
					return res, id
				}
			}
			t.Fatalf("the stream ended: %v", sc.Err())
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}
	want := strconv.FormatUint(last-2, 10)
	if _, id := do("text/event-stream", strconv.FormatUint(last-3, 10)); id != want {
		t.Errorf("stream with ?since=%d and Last-Event-ID %d began at id %s, want %s", last-8, last-3, id, want)
	}
	res, body := do("application/json", strconv.FormatUint(last-3, 10))
	var l api.EventList
	if err := json.Unmarshal([]byte(body), &l); err != nil || res.StatusCode != http.StatusOK || len(l.Events) != 3 || l.Events[0].Seq != last-2 {
		t.Errorf("JSON with ?since=%d and Last-Event-ID %d: %s %s; want the last 3 events", last-8, last-3, res.Status, body)
	}
	res, body = do("application/json", "abc")
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"field":"Last-Event-ID"`) {
		t.Errorf("a bad Last-Event-ID beside a good since: %s %s; want 400 naming Last-Event-ID", res.Status, body)
	}
}

// TestEventsResumeWithASeqOfAnEarlierRun: a node numbers its feed from its
// start time, so a client that resumes with a Seq of the node's earlier
// run (an EventSource reconnecting after a restart, with Last-Event-ID or
// its URL's ?since=) names a Seq below this run's first. It gets every
// event of this run, none counted as missed. (The feed ignored that the
// Seq was not its own: it sent the ring's slots below its first event as
// events and counted them missed; numbered from 1 in every run, it skipped
// this run's events up to the Seq, the "watch missed" class of
// NVIDIA/OpenShell#3209's review and grafana/grafana#130332.)
func TestEventsResumeWithASeqOfAnEarlierRun(t *testing.T) {
	const first = 1000
	e := newWebEnv(t, handlers.Config{Events: handlers.NewEventLogFrom(64, first)})
	for range 10 {
		e.events.AddEvent(api.Event{Kind: api.EventPromote, Node: "http://n"})
	}
	check := func(how string, evs []api.Event, missed uint64) {
		t.Helper()
		if len(evs) != 10 || evs[0].Seq != first || evs[9].Seq != first+9 || missed != 0 {
			seqs := make([]uint64, len(evs))
			for i, ev := range evs {
				seqs[i] = ev.Seq
			}
			t.Errorf("%s after Seq 5 of an earlier run: seqs %v, missed %d; want %d to %d, none missed", how, seqs, missed, first, first+9)
		}
	}
	evs, missed, _, _ := e.events.Since(5, 0)
	check("Since", evs, missed)

	res := e.do(t, http.MethodGet, "/events?since=5", nil)
	var l api.EventList
	err := json.NewDecoder(res.Body).Decode(&l)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	check("GET /events?since=5", l.Events, l.Missed)

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "5")
	res, err = e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	evs, missed = nil, 0
	for len(evs) < 10 && sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev api.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Seq == 0 {
				missed++ // a gap
				continue
			}
			evs = append(evs, ev)
		}
	}
	check("a stream with Last-Event-ID 5", evs, missed)
}

// TestEventsResumeWithASeqNotOfThisFeed: a Seq above every Seq of the feed
// (another node's, whose run began later, or an earlier run's of a node
// whose clock stepped back) resumes at the feed's first event too: the
// client can know none of them. It started at the last 100 events, and
// silently skipped the ones before.
func TestEventsResumeWithASeqNotOfThisFeed(t *testing.T) {
	const first, n = 1000, 150
	e := newWebEnv(t, handlers.Config{Events: handlers.NewEventLogFrom(1024, first)})
	for range n {
		e.events.AddEvent(api.Event{Kind: api.EventPromote, Node: "http://n"})
	}
	res := e.do(t, http.MethodGet, "/events?since=5000000", nil)
	var l api.EventList
	err := json.NewDecoder(res.Body).Decode(&l)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Events) != n || l.Events[0].Seq != first || l.Missed != 0 {
		t.Errorf("GET /events?since=5000000 (not a Seq of this feed, %d to %d): %d events from %d, missed %d; want all %d", first, first+n-1, len(l.Events), l.Events[0].Seq, l.Missed, n)
	}
}

// TestEventsStreamRefusedByQZero: an Accept that gives text/event-stream
// q=0 ("not acceptable", RFC 9110 section 12.4.2) gets the JSON list, not
// a stream; before, any Accept that contained the type started an endless
// stream (curl -H 'Accept: text/event-stream;q=0' never returned). A
// weight above 0 still streams.
func TestEventsStreamRefusedByQZero(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	e.events.AddEvent(api.Event{Kind: api.EventPromote, Node: "http://n"})
	for _, c := range []struct {
		accept string
		stream bool
	}{
		{"text/event-stream;q=0", false},
		{"text/event-stream; q=0.0, application/json", false},
		{"application/json, text/event-stream;Q=0", false},
		{"text/event-stream", true},
		{"text/event-stream;q=0.5", true},
		{"application/json;q=0.9, text/event-stream", true},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+"/events", nil)
		req.Header.Set("Accept", c.accept)
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		ct := res.Header.Get("Content-Type")
		res.Body.Close() // a stream ends with its connection
		if got := strings.HasPrefix(ct, "text/event-stream"); res.StatusCode != http.StatusOK || got != c.stream {
			t.Errorf("GET /events, Accept %q: %s, Content-Type %q; want a stream: %v", c.accept, res.Status, ct, c.stream)
		}
	}
}
