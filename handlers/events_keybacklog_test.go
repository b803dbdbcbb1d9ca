package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// GET /events?key=K with no since starts at K's last 100 events that the
// feed still holds, not at the last 100 events of every key: on a busy
// node those held none of K's, and a caller asking for K's history got
// an empty list (or a stream that began with nothing of K's) although
// the node had K's events. The class of report: a watch on one key that
// misses its history because of other keys' traffic.
func TestEventsOfAKeyStartAtItsOwnLast100(t *testing.T) {
	l := handlers.NewEventLog(4096)
	add := func(key string, n int) {
		for range n {
			l.Add(engine.Event{Kind: engine.EventGrant, Key: key, Token: l.Last() + 1, At: time.Now().UnixNano()})
		}
	}
	add("quiet", 150) // more than 100 of its own: the last 100 come back
	add("busy", 300)  // every key's last 100 are all busy's
	e := newWebEnv(t, handlers.Config{Events: l})

	res := e.do(t, http.MethodGet, "/events?key=quiet", nil)
	var list api.EventList
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /events?key=quiet: %s %v", res.Status, err)
	}
	if len(list.Events) != 100 || list.Missed != 0 {
		t.Fatalf("GET /events?key=quiet: %d events, missed %d; want quiet's last 100, none missed", len(list.Events), list.Missed)
	}
	if first, want := list.Events[0].Seq, uint64(51); first != want {
		t.Errorf("GET /events?key=quiet starts at seq %d, want %d (quiet's 51st event of 150)", first, want)
	}

	// Without key: the last 100 of every key, as before.
	res = e.do(t, http.MethodGet, "/events", nil)
	list = api.EventList{}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Events) != 100 || list.Events[0].Seq != 351 {
		t.Errorf("GET /events: %d events from seq %d; want 100 from 351", len(list.Events), list.Events[0].Seq)
	}

	// A stream of one key starts at the same place.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/events?key=quiet", nil)
	req.Header.Set("Accept", "text/event-stream")
	sres, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sres.Body.Close()
	sc := bufio.NewScanner(sres.Body)
	for sc.Scan() {
		if line := sc.Text(); len(line) > 5 && line[:5] == "data:" {
			var ev api.Event
			if err := json.Unmarshal([]byte(line[5:]), &ev); err != nil {
				t.Fatalf("stream data %q: %v", line, err)
			}
			if ev.Key != "quiet" || ev.Seq != 51 {
				t.Errorf("the stream of key quiet begins with %s seq %d, want quiet seq 51", ev.Key, ev.Seq)
			}
			return
		}
	}
	t.Fatalf("the stream ended before its first event: %v", sc.Err())
}
