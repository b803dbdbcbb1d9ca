package api_test

import (
	"net/http"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// A key with a dot segment ("a/../b") is a key like any other, but a path
// /locks/a/../b is one that proxies, caches and HTTP stacks normalize to
// /locks/b, another lock. The client sends such a key with its slashes
// escaped too (as baton.js does), so that its path has no dot segment:
// here a normalizing proxy in front of the node (path.Clean on the raw
// path) leaves it alone, and the lock taken is the key's, not b's.
func TestKeyWithDotSegmentsKeepsItsPath(t *testing.T) {
	normalize := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if raw := r.URL.EscapedPath(); strings.HasPrefix(raw, "/locks/") {
				if clean := path.Clean(raw); clean != raw {
					u := *r.URL
					u.RawPath = ""
					u.Path = clean
					r2 := r.Clone(r.Context())
					r2.URL = &u
					r = r2
				}
			}
			h.ServeHTTP(w, r)
		})
	}
	srv := startServer(t, engine.Config{}, normalize)
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	for _, key := range []string{"a/../b", "./c", "d/.", "e/..", ".."} {
		l, err := c.Acquire(ctx, key, api.WithLease(time.Minute))
		if err != nil {
			t.Fatalf("%q: %v", key, err)
		}
		if l.Key != key {
			t.Errorf("acquired %q: the node granted %q", key, l.Key)
		}
		st := status(t, c, key)
		if st.Holder == nil || st.Holder.Token != l.Token {
			t.Errorf("%q: status %+v, want held by %d", key, st, l.Token)
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("%q: release: %v", key, err)
		}
	}
}
