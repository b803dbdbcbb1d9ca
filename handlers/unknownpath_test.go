package handlers_test

import (
	"encoding/json"
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

// A path under /static/ that names none of the page's files is answered
// as every other unknown path is: baton's JSON 404 (not_found, naming the
// path), or its text/plain line; it was Go's plain "404 page not found".
// The files themselves are still served.
func TestMissingStaticFileIsBatonsNotFound(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, path := range []string{"/static/nope.js", "/static/", "/static/index.html", "/static/a/app.js", "/static/app.js%2F"} {
		r := e.do(http.MethodGet, path, "")
		var eb api.Error
		if err := json.Unmarshal(r.body, &eb); err != nil || r.code != http.StatusNotFound || !strings.HasPrefix(r.hdr.Get("Content-Type"), "application/json") ||
			eb.Code != api.CodeNotFound || eb.Message != "no such route: "+path {
			t.Errorf("GET %s: %d %s %s; want baton's JSON 404 naming the path", path, r.code, r.hdr.Get("Content-Type"), r.body)
		}
		r = e.do(http.MethodGet, path, "", "Accept", "text/plain")
		if want := "not_found: no such route: " + path + "\n"; r.code != http.StatusNotFound || string(r.body) != want {
			t.Errorf("GET %s, Accept: text/plain: %d %q; want %q", path, r.code, r.body, want)
		}
		r = e.do(http.MethodHead, path, "")
		if r.code != http.StatusNotFound || !strings.HasPrefix(r.hdr.Get("Content-Type"), "application/json") {
			t.Errorf("HEAD %s: %d %s; want baton's 404", path, r.code, r.hdr.Get("Content-Type"))
		}
	}
	for _, path := range []string{"/", "/static/app.js", "/static/app.css", "/static/favicon.svg"} {
		if r := e.do(http.MethodGet, path, ""); r.code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, r.code)
		}
	}
}
