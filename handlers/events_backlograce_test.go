package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// TestEventsOfAKeyWithoutSinceMissNothing: GET /events?key=K names no
// since, so no event can be missed: it starts at K's last 100 events the
// node holds, and when K has fewer, at the oldest event held. On a busy
// node, where other keys' events push the oldest out all the time, one
// pushed out between finding that start (EventLog.Backlog) and reading
// from it was reported as missed (the JSON list's missed, a stream's
// first "gap" event), for a key with no event at all.
func TestEventsOfAKeyWithoutSinceMissNothing(t *testing.T) {
	l := handlers.NewEventLog(64)
	add := func() {
		l.Add(engine.Event{Kind: engine.EventGrant, Key: "busy", Token: l.Last() + 1, At: time.Now().UnixNano()})
	}
	for range 64 {
		add()
	}
	e := newWebEnv(t, handlers.Config{Events: l})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				add()
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	for i := range 300 {
		res := e.do(t, http.MethodGet, "/events?key=quiet", nil)
		var list api.EventList
		err := json.NewDecoder(res.Body).Decode(&list)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET /events?key=quiet: %s %v", res.Status, err)
		}
		if list.Missed != 0 {
			t.Fatalf("GET /events?key=quiet (request %d): missed %d, want 0: no since was named", i, list.Missed)
		}
	}
	for i := range 50 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/events?key=quiet", nil)
		req.Header.Set("Accept", "text/event-stream")
		res, err := e.srv.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			line := sc.Text()
			if line == "event: gap" {
				res.Body.Close()
				cancel()
				t.Fatalf("the stream of key quiet (request %d) began with a gap: no since was named", i)
			}
			if strings.HasPrefix(line, "id:") {
				break
			}
		}
		res.Body.Close()
		cancel()
	}
}
