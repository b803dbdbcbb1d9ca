package handlers_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// GET /events?key=K when the feed holds nothing of K answers an empty list,
// "events":[], as GET /events does on an empty feed and GET /locks with no
// locks: it answered "events":null, which a client reading .events.length
// fails on. With the feed empty, and with only other keys' events.
func TestEventsOfAKeyWithNoneIsAnEmptyList(t *testing.T) {
	for _, others := range []int{0, 3} {
		l := handlers.NewEventLog(64)
		for range others {
			l.Add(engine.Event{Kind: engine.EventGrant, Key: "other", Token: l.Last() + 1, At: time.Now().UnixNano()})
		}
		e := newWebEnv(t, handlers.Config{Events: l})
		res := e.do(t, http.MethodGet, "/events?key=quiet", nil)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"events":[]`) {
			t.Errorf("GET /events?key=quiet with %d events of another key: %s %s; want \"events\":[]", others, res.Status, body)
		}
	}
}
