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
	// next returns the next message's "id" or "gap" (an "id:" line
	// without data, a ?key= stream's position, is no message).
	next := func(sc *bufio.Scanner) string {
		id, data := "", false
		for sc.Scan() {
			line := sc.Text()
			if line == "event: gap" {
				return "gap"
			}
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id = v
			}
			if strings.HasPrefix(line, "data: ") {
				data = true
			}
			if line == "" && data {
				return id
			}
			if line == "" {
				id = ""
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

// TestEventsKeyStreamResumesWhereItWas: a ?key= stream carries its
// position past the other keys' events (an "id:" line without data, which
// moves an EventSource's Last-Event-ID without an event), so that a
// reconnect resumes there. It wrote ids only with its key's events: a
// reconnect resumed from the last of those and reported the other keys'
// events it had already passed, now out of the ring, as a gap.
func TestEventsKeyStreamResumesWhereItWas(t *testing.T) {
	lg := handlers.NewEventLog(64)
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
	add := func(key string) {
		lg.Add(engine.Event{Kind: engine.EventGrant, Key: key, Token: lg.Last() + 1, At: time.Now().UnixNano()})
	}
	// A ?key=mine stream read as an EventSource reads it: lastID follows
	// every "id:" line, with or without data; block reads up to the next
	// blank line and says whether it was a gap.
	lastID := "0"
	var sc *bufio.Scanner
	open := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events?key=mine", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", lastID)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		sc = bufio.NewScanner(res.Body)
	}
	block := func() (gap bool) {
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				return gap
			}
			if line == "event: gap" {
				gap = true
			}
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				lastID = id
			}
		}
		t.Fatalf("the stream ended with Last-Event-ID %s: %v", lastID, sc.Err())
		return false
	}
	add("mine") // 1
	open()
	for lastID != "1" {
		block()
	}
	// 2..101, none of them mine, in two turns the stream keeps up with:
	// more than the ring holds in all. The stream passes them; the
	// client's position must follow (without it, block fails when the 5 s
	// deadline ends the stream).
	for _, upto := range []string{"51", "101"} {
		for range 50 {
			add("other")
		}
		for lastID != upto {
			if block() {
				t.Fatal("a gap on a stream that has kept up")
			}
		}
	}
	add("mine") // 102
	open()
	if block() {
		t.Fatalf("a reconnect with Last-Event-ID %s after the stream had passed every event up to it got a gap", lastID)
	}
	for lastID == "101" {
		if block() {
			t.Fatal("a gap after the reconnect")
		}
	}
	if lastID != "102" {
		t.Fatalf("after the reconnect: id %s, want 102", lastID)
	}
}
