package handlers_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/handlers"
)

// TestEventsBadSeqNamesItsSource: a Last-Event-ID that is not a Seq is a
// 400 naming Last-Event-ID (it named since, a parameter the request did
// not send); a bad ?since= still names since.
func TestEventsBadSeqNamesItsSource(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	for _, c := range []struct{ path, lastID, field string }{
		{"/events", "abc", "Last-Event-ID"},
		{"/events", "-1", "Last-Event-ID"},
		{"/events?since=x", "", "since"},
		{"/events?since=x", "5", "since"},
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

// TestEventsResumeAfterTheLaterOfSinceAndLastEventID: an EventSource
// opened on /events?since=N reconnects to the same URL with Last-Event-ID
// naming the last event it got; the stream resumes after that one, not
// after since again, which delivered every event since N a second time.
func TestEventsResumeAfterTheLaterOfSinceAndLastEventID(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	for i := range 6 {
		e.acquire(t, "k"+strconv.Itoa(i))
	}
	for _, c := range []struct {
		path, lastID string
		first        uint64
	}{
		{"/events?since=1", "4", 5},
		{"/events?since=4", "1", 5},
		{"/events?since=2", "", 3},
		{"/events", "3", 4},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+c.path, nil)
		if c.lastID != "" {
			req.Header.Set("Last-Event-ID", c.lastID)
		}
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var list api.EventList
		err = json.NewDecoder(res.Body).Decode(&list)
		res.Body.Close()
		if err != nil || len(list.Events) == 0 || list.Events[0].Seq != c.first {
			t.Errorf("GET %s, Last-Event-ID %q: %v %+v; want the events from %d", c.path, c.lastID, err, list.Events, c.first)
		}
	}
}
