package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/baton-io/baton/web"
)

// Serves says of each path what Handler does with it: true where it
// serves a file, false where it answers 404 (which the handlers package
// then answers as baton's own 404).
func TestServesAgreesWithHandler(t *testing.T) {
	h := web.Handler()
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/", true},
		{"/static/app.js", true},
		{"/static/app.css", true},
		{"/static/favicon.svg", true},
		{"/static/index.html", false},
		{"/static/", false},
		{"/static/nope.js", false},
		{"/static/js/baton.js", false},
		{"/static", false},
		{"/index.html", false},
		{web.ClientPath, false}, // ClientHandler's
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, c.path, nil))
		if got := web.Serves(c.path); got != c.want || got != (w.Code == http.StatusOK) {
			t.Errorf("Serves(%q) = %v, want %v; Handler answers %d", c.path, got, c.want, w.Code)
		}
	}
}
