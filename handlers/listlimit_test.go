package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// GET /locks?limit= takes an integer as the other integer parameters do
// (an acquire's limit, a token): canonical decimal digits, no sign, no
// leading zero. "01" and "+1" were read as 1.
func TestListLimitIsCanonical(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	e.acquire("/locks/k?lease=30")
	for _, v := range []string{"01", "%2B1", "+1", "007", "0100", "-0", "00", "1e2", "%201"} {
		r := e.do(http.MethodGet, "/locks?limit="+v, "")
		if r.code != http.StatusBadRequest {
			t.Errorf("GET /locks?limit=%s: %d %s; want 400 naming limit", v, r.code, r.body)
			continue
		}
		if eb := r.errBody(t); eb.Field != "limit" || !strings.Contains(eb.Message, "must be an integer from 1 to 10000, got ") {
			t.Errorf("GET /locks?limit=%s: %s; want 400 naming limit", v, r.body)
		}
	}
	for _, v := range []string{"1", "10", "10000"} {
		if r := e.do(http.MethodGet, "/locks?limit="+v, ""); r.code != http.StatusOK {
			t.Errorf("GET /locks?limit=%s: %d %s; want 200", v, r.code, r.body)
		}
	}
}
