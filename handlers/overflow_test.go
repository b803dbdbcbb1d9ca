package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A number of seconds too large for a float64 (1e400) is still a number:
// judged as 1e300 is (a lease over lease_max; a wait without end, which a
// free key does not need), as the native protocol reads it ("A k 1e400 -"
// is "lease: must be at most … (lease_max)"). It was refused as "must be a
// number of seconds" over HTTP only.
func TestSecondsThatOverflowAreNumbers(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, l := range []string{"1e400", "1" + strings.Repeat("0", 400)} {
		r := e.do(http.MethodPost, "/locks/o?lease="+l, "")
		if r.code != http.StatusBadRequest || r.errBody(t).Field != "lease" || !strings.Contains(r.errBody(t).Message, "at most") {
			t.Errorf("lease=%.12s…: %d %s; want 400 lease: must be at most … (lease_max), as for 1e300", l, r.code, r.body)
		}
		r = e.do(http.MethodPost, "/locks/o", `{"lease":`+l+`}`)
		if r.code != http.StatusBadRequest || r.errBody(t).Field != "lease" || !strings.Contains(r.errBody(t).Message, "at most") {
			t.Errorf("lease %.12s… in the body: %d %s; want 400 lease: must be at most …", l, r.code, r.body)
		}
	}
	g := e.acquire("/locks/o?wait=1e400")
	e.release("o", g.Token)
	if r := e.do(http.MethodPost, "/locks/o", `{"wait":1e400}`); r.code != http.StatusOK {
		t.Errorf(`{"wait":1e400} on a free key: %d %s; want a grant`, r.code, r.body)
	}
	if r := e.do(http.MethodPost, "/locks/p?wait=-1e400", ""); r.code != http.StatusBadRequest || r.errBody(t).Field != "wait" {
		t.Errorf("wait=-1e400: %d %s; want 400 naming wait", r.code, r.body)
	}
}
