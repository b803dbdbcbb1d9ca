package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A 400 for a parameter or body member the call does not take names it in
// its message; a name with a newline ("?%0Afake:%20line=1") was written
// there raw, so that with Accept: text/plain the error, one line
// "<code>: <message>" by the README, became two, the second one the
// client's ("fake: line: is not a parameter…"), and a name that is not
// UTF-8 put bytes that are not UTF-8 into a text/plain; charset=utf-8
// body. The name is quoted in the message when it is not printable UTF-8,
// and nothing changes.
func TestAnUnknownNameIsEchoedOnOneLine(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/locks/k?%0Afake:%20line=1", ""},
		{http.MethodPost, "/locks/k?a%0Db=1", ""},
		{http.MethodGet, "/locks?%0Ax=1", ""},
		{http.MethodGet, "/locks/k?%1B%5B2J=1", ""},
		{http.MethodDelete, "/locks/k?%FF=1", ""},
		{http.MethodPost, "/locks/k", `{"\nfake: line":1}`},
		{http.MethodPatch, "/locks/k", `{"token":1,"a\u0085b":1}`},
	} {
		r := e.do(c.method, c.path, c.body, "Accept", "text/plain")
		text := string(r.body)
		line, rest, _ := strings.Cut(text, "\n")
		if r.code != http.StatusBadRequest || rest != "" || !strings.HasPrefix(line, "invalid_argument: ") || !utf8.ValidString(line) ||
			strings.IndexFunc(line, unicode.IsControl) >= 0 {
			t.Errorf("%s %s %q: %d %q; want a 400, one printable UTF-8 line", c.method, c.path, c.body, r.code, text)
		}
	}
	if r := e.do(http.MethodGet, "/locks", ""); r.code != http.StatusOK || !strings.Contains(string(r.body), `"total":0`) {
		t.Errorf("after: %d %s; want no lock", r.code, r.body)
	}
	// Printable names stay as they are.
	if r := e.do(http.MethodPost, "/locks/k?foo=1", ""); !strings.HasPrefix(r.errBody(t).Message, "foo: is not a parameter of POST /locks/{key}") {
		t.Errorf("foo: %s", r.body)
	}
}
