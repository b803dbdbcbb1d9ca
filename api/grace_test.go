package api_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// A grant made at the end of an acquire's wait may be answered only
// after the cluster's sync_timeout (it waits for sync_standbys first).
// Here the node answers the grant 5 s late (a sync_timeout of 5 s, above
// what the default AcquireGrace of 3 s allows for): with the default the
// attempt is taken for a silent node's and sent again (the node counts
// two acquire requests); with Config.AcquireGrace at 8 s (sync_timeout +
// 3 s) the first attempt's grant is taken. The grace was a fixed 3 s.
func TestAcquireGraceCoversALateGrant(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		posts int64 // acquire requests the node sees
	}{
		{"default", 0, 2},
		{"8s", 8 * time.Second, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var armed atomic.Bool
			var posts atomic.Int64
			slow := func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPost && r.Header.Get(api.HeaderIdempotencyKey) != "" {
						posts.Add(1)
						w = &slowGrant{ResponseWriter: w, armed: &armed, pause: 5 * time.Second}
					}
					h.ServeHTTP(w, r)
				})
			}
			srv := startServer(t, engine.Config{}, slow)
			c := newClient(t, func(c *api.Config) { c.AcquireGrace = tc.grace }, srv.URL)
			status(t, c, "warm")
			armed.Store(true)
			l, err := c.Acquire(ctxBound(t), "k", api.WithWait(500*time.Millisecond), api.WithLease(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if n := posts.Load(); n != tc.posts {
				t.Errorf("the node saw %d acquire requests; want %d", n, tc.posts)
			}
			if err := l.Release(ctxBound(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A negative AcquireGrace is refused, naming the field.
func TestAcquireGraceNegativeRefused(t *testing.T) {
	cfg := api.DefaultConfig()
	cfg.Addresses = []string{"http://127.0.0.1:1"}
	cfg.AcquireGrace = -time.Second
	c, err := api.NewClient(cfg)
	if err == nil {
		c.Close()
		t.Fatal("NewClient accepted AcquireGrace -1s")
	}
	if !strings.Contains(err.Error(), "AcquireGrace") {
		t.Fatalf("NewClient: %v; want an error naming AcquireGrace", err)
	}
}
