package handlers_test

import (
	"encoding/json"
	"net/http"
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
