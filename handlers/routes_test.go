package handlers_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// TestLockRoutesAsChi checks that the /locks/{key} calls the Server serves
// without chi (and every call it passes on) are answered exactly as chi's
// router answers them: the same status, headers and body, with the
// router's middlewares (CORS, authentication) in front (and the refusal of
// cross-origin writes, which ServeHTTP applies to every route), for routed paths,
// raw paths chi does not route, methods without a route and bad input.
// Each request goes to the Server and then to its Router on the same
// engine; a grant's token and expiry are masked, as they differ.
func TestLockRoutesAsChi(t *testing.T) {
	type call struct {
		method, target, body string
		hdr                  []string
	}
	calls := []call{
		{method: "GET", target: "/locks/free"},
		{method: "HEAD", target: "/locks/free"},
		{method: "GET", target: "/locks/free?x=1"},
		{method: "GET", target: "/locks/a%2Fb"},
		{method: "GET", target: "/lock%73/free"},
		{method: "GET", target: "/locks"},
		{method: "GET", target: "/locks/"},
		{method: "POST", target: "/locks/"},
		{method: "POST", target: "/locks/k?lease=-1"},
		{method: "POST", target: "/locks/k?lease=1&lease=2"},
		{method: "POST", target: "/locks/k?bogus=1"},
		{method: "POST", target: "/locks/k", body: `{"lease": "x"}`},
		{method: "POST", target: "/locks/k?wait=0.5", hdr: []string{"Idempotency-Key", "\x01"}},
		{method: "POST", target: "/lock%73/k"},
		{method: "POST", target: "/locks/new%20key?lease=30", hdr: []string{"Accept", "text/plain"}},
		{method: "POST", target: "/locks/grant?lease=30"},
		{method: "POST", target: "/locks/grant/2?lease=30", body: `{"owner": "<a&b>"}`},
		{method: "DELETE", target: "/locks/k?token=5"},
		{method: "DELETE", target: "/locks/k"},
		{method: "DELETE", target: "/locks/k?token=0"},
		{method: "DELETE", target: "/locks/k?force=yes"},
		{method: "PATCH", target: "/locks/k?token=5&lease=3"},
		{method: "PATCH", target: "/locks/k", hdr: []string{"Lock-Token", "x"}},
		{method: "PUT", target: "/locks/k"},
		{method: "OPTIONS", target: "/locks/k"},
		{method: "OPTIONS", target: "/locks/k", hdr: []string{"Origin", "https://app.example", "Access-Control-Request-Method", "POST"}},
		{method: "POST", target: "/locks/cors?lease=30", hdr: []string{"Origin", "https://app.example"}},
		{method: "GET", target: "/locks/free", hdr: []string{"Origin", "https://evil.example"}},
		{method: "GET", target: "/healthz"},
		{method: "GET", target: "/nowhere"},
	}
	configs := map[string]handlers.Config{
		"plain": {},
		"auth":  {AuthTokens: []string{"secret"}, AdminTokens: []string{"admin"}},
		"cors":  {CORSOrigins: []string{"https://app.example"}},
	}
	// A grant's token and expiry (in the body and the Lock-Token header)
	// are new on every grant.
	masks := []*regexp.Regexp{
		regexp.MustCompile(`"token":\d+`),
		regexp.MustCompile(`"expires_at":"[^"]*"`),
		regexp.MustCompile(`^\d+\n$`),
	}
	mask := func(s string) string {
		for _, m := range masks {
			s = m.ReplaceAllString(s, "#")
		}
		return s
	}
	for name, hcfg := range configs {
		t.Run(name, func(t *testing.T) {
			eng, err := engine.New(engine.Config{DataDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			hcfg.Node = "http://node"
			s := handlers.New(eng, hcfg)
			for _, bearer := range []string{"", "secret", "admin"} {
				for _, c := range calls {
					serve := func(h http.Handler) *httptest.ResponseRecorder {
						r := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
						if c.body == "" {
							r.Body, r.ContentLength = http.NoBody, 0
						}
						for i := 0; i+1 < len(c.hdr); i += 2 {
							r.Header.Set(c.hdr[i], c.hdr[i+1])
						}
						if bearer != "" {
							r.Header.Set("Authorization", "Bearer "+bearer)
						}
						w := httptest.NewRecorder()
						h.ServeHTTP(w, r)
						// Release what was granted, so that the same
						// call grants again through the other path.
						if tok := w.Header().Get("Lock-Token"); tok != "" && c.method == "POST" {
							path, _, _ := strings.Cut(c.target, "?")
							d := httptest.NewRequest("DELETE", path+"?token="+tok, nil)
							d.Header.Set("Authorization", "Bearer secret")
							s.Router().ServeHTTP(httptest.NewRecorder(), d)
						}
						return w
					}
					fast, viaChi := serve(s), serve(s.BehindOriginGuard(s.Router()))
					what := c.method + " " + c.target + " " + strings.Join(c.hdr, " ") + " bearer " + bearer
					if fast.Code != viaChi.Code {
						t.Errorf("%s: status %d, chi %d", what, fast.Code, viaChi.Code)
					}
					fh, ch := fast.Header().Clone(), viaChi.Header().Clone()
					// ServeHTTP sets it before either path
					// (TestEveryAnswerSaysNosniff).
					fh.Del("X-Content-Type-Options")
					for _, h := range []http.Header{fh, ch} {
						if v := h.Get("Lock-Token"); v != "" {
							h.Set("Lock-Token", "#")
						}
						if v := h.Get("Content-Length"); v != "" && strings.Contains(fast.Body.String(), `"token":`) {
							h.Set("Content-Length", "#") // a token's digits may differ in number
						}
					}
					if got, want := headerString(fh), headerString(ch); got != want {
						t.Errorf("%s: headers\n%s\nchi:\n%s", what, got, want)
					}
					if got, want := mask(fast.Body.String()), mask(viaChi.Body.String()); got != want {
						t.Errorf("%s: body %q, chi %q", what, got, want)
					}
				}
			}
		})
	}
}

func headerString(h http.Header) string {
	var b strings.Builder
	_ = h.Write(&b)
	return b.String()
}
