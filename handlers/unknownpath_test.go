package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A 404 for an unknown path and a 405 for a method a path does not take
// name the path as the client sent it, percent-encoded: decoded, "/a%2Fb"
// read as "/a/b" (another path), "/no%20where" as "/no where", and an
// encoded line feed broke the text/plain answer's one line.
func TestUnknownPathNamedAsSent(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, c := range []struct {
		method, path string
		status       int
		want         string
	}{
		{http.MethodGet, "/no%20where", http.StatusNotFound, "no such route: /no%20where"},
		{http.MethodGet, "/a%2Fb", http.StatusNotFound, "no such route: /a%2Fb"},
		{http.MethodGet, "/x%0Ay", http.StatusNotFound, "no such route: /x%0Ay"},
		{http.MethodPut, "/locks/k%20x", http.StatusMethodNotAllowed, "PUT is not allowed on /locks/k%20x"},
		{http.MethodPost, "/cluster%3F", http.StatusNotFound, "no such route: /cluster%3F"},
	} {
		r := e.do(c.method, c.path, "")
		if eb := r.errBody(t); r.code != c.status || eb.Message != c.want {
			t.Errorf("%s %s: %d %s; want %d saying %q", c.method, c.path, r.code, r.body, c.status, c.want)
		}
		r = e.do(c.method, c.path, "", "Accept", "text/plain")
		if body := string(r.body); r.code != c.status || strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, c.want+"\n") {
			t.Errorf("%s %s, Accept: text/plain: %d %q; want one line ending %q", c.method, c.path, r.code, body, c.want)
		}
	}
	if r := e.do(http.MethodPut, "/healthz", ""); r.code != http.StatusMethodNotAllowed || r.errBody(t).Code != api.CodeMethod {
		t.Errorf("PUT /healthz: %d %s; want 405", r.code, r.body)
	}
}
