package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// An acquire that fails after the node granted it must not leave the grant
// behind. Public report: hazelcast/hazelcast#17697 (FencedLock: a lock()
// that failed for a reason other than SessionExpired or WaitKeyCancelled
// threw without releasing what it had taken). Here the grant's answer (200,
// Lock-Token) arrives with a body the client cannot read (a proxy that
// rewrote it, a server of another version): Acquire fails "bad answer",
// and the grant, under an hour's lease, must be released at once, as
// baton.js does (its acquire settles on any failure after the request), not
// held for the lease with the caller told it failed.
func TestAcquireBadGrantBodyReleasesTheGrant(t *testing.T) {
	var mangled atomic.Bool
	srv := startServer(t, engine.Config{LeaseMax: 2 * time.Hour}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/locks/") || mangled.Load() {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
				return
			}
			mangled.Store(true)
			w.Header().Set(api.HeaderLockToken, rec.Header().Get(api.HeaderLockToken))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"key":"k","token":"not a number"}`))
		})
	})
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k", api.WithLease(time.Hour))
	if err == nil {
		t.Fatalf("acquire with an unreadable grant answered %+v, want an error", l)
	}
	if !mangled.Load() {
		t.Fatalf("the grant was not mangled: %v", err)
	}
	eventually(t, "released after the failed acquire", func() bool {
		st, err := c.Status(ctx, "k")
		return err == nil && st.Holder == nil
	})
}
