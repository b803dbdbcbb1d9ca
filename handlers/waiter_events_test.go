package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// TestWaiterEventsNameTheWaiter: the events of a waiter that ends without
// a grant (timeout, leave) carry its owner and mode, as its enqueue event
// does: the owner is shown wherever the waiter is (SPEC section 1). They
// carried neither, so /events and the status page showed "timeout k" with
// no sign of whose wait ran out.
func TestWaiterEventsNameTheWaiter(t *testing.T) {
	evs := handlers.NewEventLog(16)
	e := newEnv(t, engine.Config{OnEvent: evs.Add}, handlers.Config{Events: evs})
	e.acquire("/locks/k?lease=30")
	if r := e.do(http.MethodPost, "/locks/k?owner=late&mode=shared&wait=0.001", ""); r.code != http.StatusRequestTimeout {
		t.Fatalf("acquire with a short wait: %d %s; want 408", r.code, r.body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := e.async(ctx, e.client, http.MethodPost, "/locks/k?owner=gone", "")
	e.waitWaiters("k", 1)
	cancel()
	recv(t, gone, "cancelled waiter")
	e.waitWaiters("k", 0)

	var feed struct{ Events []api.Event }
	r := e.do(http.MethodGet, "/events?key=k", "")
	if err := json.Unmarshal(r.body, &feed); err != nil {
		t.Fatalf("GET /events: %d %s: %v", r.code, r.body, err)
	}
	want := map[string][2]string{api.EventTimeout: {"late", api.ModeShared}, api.EventLeave: {"gone", api.ModeExclusive}}
	for _, ev := range feed.Events {
		w, ok := want[ev.Kind]
		if !ok {
			continue
		}
		delete(want, ev.Kind)
		if ev.Owner != w[0] || ev.Mode != w[1] {
			t.Errorf("%s event: owner %q, mode %q; want %q, %q", ev.Kind, ev.Owner, ev.Mode, w[0], w[1])
		}
	}
	if len(want) != 0 {
		t.Errorf("no event of %v in %s", want, r.body)
	}
}
