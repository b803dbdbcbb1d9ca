package handlers_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/baton-io/baton/handlers"
)

// TestEventsHeadEndsAtOnce: HEAD /events asking for text/event-stream is
// answered with the stream's headers and ends, as every HEAD does; it ran
// the stream (its pings, for ever) with no body to send, holding the
// handler and its connection until the client went away: the next request
// on that connection was never read.
func TestEventsHeadEndsAtOnce(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	// A hang guard, not a timing claim: the stream never ended before.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodHead, e.srv.URL+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("HEAD /events: %s %q; want 200 text/event-stream", res.Status, res.Header.Get("Content-Type"))
	}
	// The same connection (one per host) serves the next request only
	// once the HEAD's handler has ended.
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/healthz", nil)
	res, err = hc.Do(req)
	if err != nil {
		t.Fatalf("GET /healthz after HEAD /events on the same connection: %v (the HEAD's stream did not end)", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: %s", res.Status)
	}
}
