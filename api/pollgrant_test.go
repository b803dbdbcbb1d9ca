package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// A waiter's place kept across a poll_timeout may be granted before the
// client resumes (the 408 on its way over a slow link, a client paused):
// the resume under the same Idempotency-Key gets that grant, whose lease
// runs on the node from the grant. The client's lease clock (Lost, the
// keep-alive's deadline) must not start later: it counts from the
// acquire's first attempt, and renews at once. It counted from the
// resume, so the node expired the lease and granted the next waiter
// while the client still took the lock for held (found in the JavaScript
// client by a tester, 0.3-2.5 s of two holders; the Go client reset its
// count at each poll_timeout the same way).
func TestPollTimeoutGrantBeforeTheResume(t *testing.T) {
	const lease = 4 * time.Second
	var done atomic.Bool
	var holder atomic.Pointer[api.Lock]
	// The waiter's first poll_timeout reaches it a second after the
	// holder released (the node granted the kept place meanwhile).
	slow := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || done.Load() || holder.Load() == nil {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code == http.StatusRequestTimeout && done.CompareAndSwap(false, true) {
				if err := holder.Load().Release(context.Background()); err != nil {
					t.Error(err)
				}
				time.Sleep(time.Second)
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		})
	}
	srv := startServer(t, engine.Config{PollTimeout: 500 * time.Millisecond}, slow)
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	h, err := c.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	holder.Store(h)
	waiting := acquireAsync(ctx, c, "k", api.WithLease(lease))
	eventually(t, "the waiter queued", func() bool { return status(t, c, "k").Waiters == 1 })
	next := acquireAsync(ctx, newClient(t, nil, srv.URL), "k", api.WithLease(lease))
	l := get(t, waiting)
	if !done.Load() {
		t.Fatal("granted without the delayed poll_timeout")
	}
	deadline := api.LockDeadline(l)
	l2 := get(t, next)
	granted := status(t, c, "k").Holder.GrantedAt
	if granted.Before(deadline) {
		t.Fatalf("the next waiter was granted at %v, %v before the client's lease deadline of the first (%v)", granted, deadline.Sub(granted), deadline)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
