package handlers_test

import (
	"net/http"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// TestCallsWithoutParametersRefuseThem: GET /cluster, /healthz, /readyz
// and /metrics take no parameters and refuse one with a 400 naming it, as
// GET /locks/{key} does and as the other calls refuse the parameters they
// do not take. They answered as if the parameter were not there.
func TestCallsWithoutParametersRefuseThem(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, path := range []string{"/cluster", "/healthz", "/readyz", "/metrics", "/locks/k"} {
		if r := e.do(http.MethodGet, path, ""); r.code != http.StatusOK {
			t.Errorf("GET %s: %d %s; want 200", path, r.code, r.body)
		}
		if r := e.do(http.MethodGet, path+"?", ""); r.code != http.StatusOK {
			t.Errorf("GET %s?: %d %s; want 200 (an empty query names nothing)", path, r.code, r.body)
		}
		for _, c := range []struct{ query, field string }{
			{"format=json", "format"},
			{"a%20b=1&format=json", "a b"},
			{"&verbose", "verbose"},
			{"=1", "(empty name)"},
			{"%zz=1", "query"},
		} {
			r := e.do(http.MethodGet, path+"?"+c.query, "")
			if r.code != http.StatusBadRequest || r.errBody(t).Field != c.field {
				t.Errorf("GET %s?%s: %d %s; want 400 naming %s", path, c.query, r.code, r.body, c.field)
			}
		}
		if r := e.do(http.MethodGet, path, `{"x":1}`); r.code != http.StatusBadRequest || r.errBody(t).Field != "body" {
			t.Errorf("GET %s with a body: %d %s; want 400 naming body", path, r.code, r.body)
		}
	}
}
