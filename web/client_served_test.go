package web_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientServed: every node serves the JavaScript client at /baton.js
// and its types at /baton.d.ts, its Node entry at /baton-node.js and
// /baton-node.d.ts, byte for byte the files under web/js,
// without a token even with auth_tokens set, cacheable (ETag, 304,
// Cache-Control), and with CORS headers for a configured origin only.
func TestClientServed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the baton binary: -short skips it")
	}
	const origin = "http://pages.example.test"
	n := startBaton(t, "BATON_AUTH_TOKENS=s3cret", "BATON_CORS_ORIGINS="+origin)
	for _, f := range []struct{ path, file, ctype string }{
		{"/baton.js", "baton.js", "text/javascript; charset=utf-8"},
		{"/baton.d.ts", "baton.d.ts", "application/typescript; charset=utf-8"},
		{"/baton-node.js", "baton-node.js", "text/javascript; charset=utf-8"},
		{"/baton-node.d.ts", "baton-node.d.ts", "application/typescript; charset=utf-8"},
	} {
		want, err := os.ReadFile(filepath.Join("js", f.file))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, n.url+f.path, nil)
		req.Header.Set("Origin", origin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || string(body) != string(want) {
			t.Fatalf("GET %s without a token: %s, %d bytes; want 200 and the %d bytes of js/%s", f.path, res.Status, len(body), len(want), f.file)
		}
		h := res.Header
		if h.Get("Content-Type") != f.ctype || !strings.Contains(h.Get("Cache-Control"), "max-age=") || h.Get("ETag") == "" {
			t.Errorf("GET %s: Content-Type %q, Cache-Control %q, ETag %q", f.path, h.Get("Content-Type"), h.Get("Cache-Control"), h.Get("ETag"))
		}
		if got := h.Get("Access-Control-Allow-Origin"); got != origin {
			t.Errorf("GET %s from %s: Access-Control-Allow-Origin %q", f.path, origin, got)
		}

		req, _ = http.NewRequest(http.MethodGet, n.url+f.path, nil)
		req.Header.Set("If-None-Match", h.Get("ETag"))
		req.Header.Set("Origin", "http://elsewhere.example.test")
		res, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %s, want 304", f.path, res.Status)
		}
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("GET %s from an origin not configured: Access-Control-Allow-Origin %q", f.path, got)
		}
	}
	// The rest still needs the token.
	res, err := http.Get(n.url + "/locks")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /locks without a token: %s", res.Status)
	}
}
