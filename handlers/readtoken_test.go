package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A Lock-Token header on a read (GET or HEAD /locks, /locks/{key}) means
// nothing there: a 400 naming token, as on an acquire and as a token in
// the query of a read is, not ignored (a client that sends it expects a
// check the read does not make). Nothing changes.
func TestReadsRefuseLockTokenHeader(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	g := e.acquire("/locks/k?lease=30")
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		for _, path := range []string{"/locks", "/locks/k", "/locks/free", "/locks?prefix=k"} {
			for _, hdr := range [][]string{
				{"Lock-Token", tok(g.Token)},
				{"Lock-Token", ""},
				{"Lock-Token", "x"},
				{"Lock-Token", "1", "Lock-Token", "2"},
			} {
				r := e.do(method, path, "", hdr...)
				if r.code != http.StatusBadRequest {
					t.Errorf("%s %s %q: %d %s; want 400 naming token", method, path, hdr, r.code, r.body)
					continue
				}
				if method == http.MethodGet {
					if eb := r.errBody(t); eb.Field != "token" || !strings.Contains(eb.Message, "Lock-Token") {
						t.Errorf("%s %s %q: %s; want 400 naming token and the Lock-Token header", method, path, hdr, r.body)
					}
				}
			}
		}
	}
	if st := e.status("k"); st.Holder == nil || st.Holder.Token != g.Token {
		t.Errorf("after the refused reads: %+v, want k held under %d", st.Holder, g.Token)
	}
}
