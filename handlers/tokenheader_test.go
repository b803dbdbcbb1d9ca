package handlers_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// TestReadsRefuseALockTokenHeader: the Lock-Token header is the token
// parameter's header form, so a read (which takes no token) refuses it
// with a 400 naming token, as it refuses ?token= and as POST refuses the
// header. The reads ignored it: GET /locks/{key} with the caller's token
// answered 200 with whoever held the key, which a script may take for
// "the token is still mine".
func TestReadsRefuseALockTokenHeader(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{Events: handlers.NewEventLog(16)})
	held := e.acquire("/locks/h?lease=600")
	ht := tok(held.Token)
	before := e.do(http.MethodGet, "/locks", "")
	for _, path := range []string{"/locks/h", "/locks/other", "/locks", "/locks?prefix=h", "/events", "/events?key=h", "/cluster", "/healthz", "/readyz", "/metrics"} {
		for _, v := range []string{ht, "5", ""} {
			r := e.do(http.MethodGet, path, "", api.HeaderLockToken, v)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.code != http.StatusBadRequest {
				t.Errorf("GET %s with Lock-Token %q: %d %.80s; want 400 naming token", path, v, r.code, r.body)
				continue
			}
			if eb := r.errBody(t); eb.Code != api.CodeInvalidArgument || eb.Field != "token" || !strings.Contains(eb.Message, "Lock-Token") {
				t.Errorf("GET %s with Lock-Token %q: %s; want invalid_argument naming token and the Lock-Token header", path, v, r.body)
			}
		}
		// Without the header the read answers as before.
		if r := e.do(http.MethodGet, path, ""); r.code != http.StatusOK {
			t.Errorf("GET %s: %d %.80s; want 200", path, r.code, r.body)
		}
	}
	if after := e.do(http.MethodGet, "/locks", ""); !bytes.Equal(after.body, before.body) {
		t.Errorf("state changed:\nbefore %s\nafter  %s", before.body, after.body)
	}
	e.release("h", held.Token)
}
