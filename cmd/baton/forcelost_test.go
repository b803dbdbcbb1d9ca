package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// baton release --force whose answer is lost after the node made it (its
// stream reset, as an HTTP/2 proxy does when the node behind it dies)
// is sent again under its own Idempotency-Key, as client.ForceRelease
// does over HTTP: the node answers the repeat as the first without
// forcing again, baton exits 0, and the waiter the force handed the lock
// to still holds it. Sent again without a key, the force released that
// waiter too.
func TestCLIForceAnswerLostIsRepeatedUnderItsKey(t *testing.T) {
	leakCheck(t)
	eng, err := engine.New(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := handlers.New(eng, handlers.Config{Node: url, Logger: log})
	var forces atomic.Int32
	srv := handlers.NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete && r.URL.Query().Get("force") == "true" && forces.Add(1) == 1 {
			// The node makes the force; its answer is lost.
			h.ServeHTTP(httptest.NewRecorder(), r)
			panic(http.ErrAbortHandler) // RST_STREAM, connection kept
		}
		h.ServeHTTP(w, r)
	}), context.Background(), log)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
		eng.Close()
	})

	c := apiClient(t, url)
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	if _, err := c.Acquire(ctx, "k", api.WithLease(time.Minute)); err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *api.Lock
		err error
	}
	waiter := make(chan result, 1)
	go func() {
		l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute))
		waiter <- result{l, err}
	}()
	for {
		st, err := c.Status(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := runCLI(t, url, false, "release", "--force", "k")
	w := <-waiter
	if w.err != nil {
		t.Fatalf("the waiter: %v, want the grant the force handed it", w.err)
	}
	if r.code != exitOK {
		t.Errorf("release --force whose first answer was lost: exit %d, stderr %q; want %d (its repeat answered)", r.code, r.stderr.String(), exitOK)
	}
	st, err := c.Status(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder == nil || st.Holder.Token != w.l.Token {
		t.Errorf("after the force: holder %+v, want the waiter's token %d (the force sent again released it)", st.Holder, w.l.Token)
	}
	if n := forces.Load(); n != 2 {
		t.Errorf("the node was asked to force %d times, want twice (the first, lost; its repeat)", n)
	}
}
