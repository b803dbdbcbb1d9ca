package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/handlers"
)

// A node numbers its feed from its start time in microseconds
// (cmd/baton: NewEventLogFrom), so until its first event the feed is
// empty with a last Seq far above 0. The class of report replayed: a
// watch that starts at the edge of the history the server keeps gets
// events that never happened or loses real ones (etcd-io/etcd#18089,
// "Watch dropping an event when compacting on delete"; etcd-io/etcd#19179).
// Before, on such a feed GET /events answered 1024 events of kind
// "unknown" with seq 0 and "missed":18446744073709550592 (0 - 1024 in
// uint64), and a stream sent that gap and those events in a loop, as
// fast as the client read, until the node's first event.
func TestEventsOfAFeedWithNoEventYet(t *testing.T) {
	const first = 1_796_000_000_000_000
	l := handlers.NewEventLogFrom(64, first)
	if evs, missed, upto, last := l.Since(0, 0); len(evs) != 0 || missed != 0 || last != first-1 || upto != first-1 {
		t.Errorf("Since(0) of an empty feed = %d events, missed %d, upto %d, last %d; want none, 0, %d, %d", len(evs), missed, upto, last, first-1, first-1)
	}
	if evs, missed, _, _ := l.Since(first-101, 16); len(evs) != 0 || missed != 0 {
		t.Errorf("Since(first-101, 16) of an empty feed = %d events, missed %d; want none, 0", len(evs), missed)
	}

	e := newWebEnv(t, handlers.Config{Events: l})
	for _, path := range []string{"/events", "/events?key=a"} {
		res := e.do(t, http.MethodGet, path, nil)
		var list api.EventList
		if err := json.NewDecoder(res.Body).Decode(&list); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %v", path, res.Status, err)
		}
		if len(list.Events) != 0 || list.Missed != 0 || list.Last != first-1 {
			t.Errorf("GET %s on a feed with no event yet: %d events, missed %d, last %d; want none, 0, %d", path, len(list.Events), list.Missed, list.Last, first-1)
		}
	}

	// A stream opened before the first event: its first message is that
	// event, with the feed's first Seq; nothing comes before it.
	for _, path := range []string{"/events", "/events?key=a"} {
		e := newWebEnv(t, handlers.Config{Events: handlers.NewEventLogFrom(64, first)})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+path, nil)
		req.Header.Set("Accept", "text/event-stream")
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rd := sseReader{bufio.NewScanner(res.Body)}
		tok := e.acquire(t, "a")
		id, kind, data, err := rd.next()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var ev api.Event
		_ = json.Unmarshal([]byte(data), &ev)
		if kind != "" || ev.Kind != api.EventGrant || ev.Token != tok {
			t.Errorf("%s: the first message is event %q %s; want the grant of token %d", path, kind, data, tok)
		}
		if want := strconv.FormatUint(ev.Seq, 10); id != want || ev.Seq < first {
			t.Errorf("%s: first message id %q, seq %d; want the feed's own (from %d)", path, id, ev.Seq, uint64(first))
		}
		res.Body.Close()
		cancel()
	}
}
