package handlers_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// TestEventsStreamBehindGetsWhatTheRingHolds: a stream that resumes more
// than one batch (256) behind writes every event the ring still holds, in
// turns, without a gap; a ?key= stream gets its key's events among them.
// It skipped to the newest 256 and reported the rest as missed, though
// the ring held them: a ?key= stream lost the key's events for good.
func TestEventsStreamBehindGetsWhatTheRingHolds(t *testing.T) {
	lg := handlers.NewEventLog(1024)
	cfg := engine.DefaultConfig()
	cfg.DataDir = t.TempDir()
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv := httptest.NewServer(handlers.New(eng, handlers.Config{Events: lg}))
	defer srv.Close()
	defer lg.Close()
	const n = 600
	for i := 1; i <= n; i++ {
		key := "other"
		if i == 5 || i == n {
			key = "mine"
		}
		lg.Add(engine.Event{Kind: engine.EventGrant, Key: key, Token: uint64(i), At: time.Now().UnixNano()})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func(path string) *bufio.Scanner {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", "0")
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return bufio.NewScanner(res.Body)
	}
	// next returns the next message's "id" or "gap".
	next := func(sc *bufio.Scanner) string {
		for sc.Scan() {
			line := sc.Text()
			if line == "event: gap" {
				return "gap"
			}
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				return id
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return ""
	}
	all := open("/events")
	for i := 1; i <= n; i++ {
		if got := next(all); got != strconv.Itoa(i) {
			t.Fatalf("message %d of a stream %d behind: %s, want id %d", i, n, got, i)
		}
	}
	mine := open("/events?key=mine")
	for _, want := range []int{5, n} {
		if got := next(mine); got != fmt.Sprint(want) {
			t.Fatalf("?key=mine stream: %s, want id %d", got, want)
		}
	}
}
