package handlers_test

import (
	"bufio"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/baton-io/baton/handlers"
)

// TestJSONKeepsHTMLCharacters: a key and an owner with &, < and > come
// back as they are in every JSON answer that carries them (the grant, a
// lock's status, the listing, the events as JSON and as a stream), not as
// encoding/json's HTML escapes \u0026, \u003c, \u003e, which a curl user
// reads literally.
func TestJSONKeepsHTMLCharacters(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	const key, owner = "a&b<c>", "x&y<z>"
	path := "/locks/" + url.PathEscape(key)
	read := func(method, path string, hdr map[string]string) string {
		res := e.do(t, method, path, hdr)
		b, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s %s (%v)", method, path, res.Status, b, err)
		}
		return string(b)
	}
	check := func(what, body string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(body, `"`+w+`"`) {
				t.Errorf("%s: %s; want %q written as it is", what, body, w)
			}
		}
		if strings.Contains(body, `\u00`) {
			t.Errorf("%s: %s; has an HTML escape", what, body)
		}
	}
	check("POST "+path, read(http.MethodPost, path+"?owner="+url.QueryEscape(owner), nil), key)
	check("GET "+path, read(http.MethodGet, path, nil), key, owner)
	check("GET /locks", read(http.MethodGet, "/locks", nil), key, owner)
	check("GET /events", read(http.MethodGet, "/events?since=0", map[string]string{"Accept": "application/json"}), key, owner)
	res := e.do(t, http.MethodGet, "/events?since=0", map[string]string{"Accept": "text/event-stream"})
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"grant"`) {
			check("GET /events (stream)", data, key, owner)
			break
		}
	}
	if sc.Err() != nil {
		t.Fatal(sc.Err())
	}
}
