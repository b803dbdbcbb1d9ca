package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
)

// A read whose answer is larger than the client reads (4 MiB) fails
// saying so. A key with 30,000 shared holders answers GET /locks/{key}
// with 4.8 MB, and so does a listing page whose keys hold that many: the
// client read the first 4 MiB and failed "bad answer: unexpected end of
// JSON input" (baton status included), which said neither what was wrong
// nor that a listing with a smaller limit would do.
func TestReadLargerThanTheClientReadsSaysSo(t *testing.T) {
	holder := func(i int) string {
		return fmt.Sprintf(`{"token":%d,"lease":60,"expires_at":"2026-12-04T12:00:00Z","granted_at":"2026-12-04T11:59:00Z","mode":"shared","owner":null}`, 1_000_000+i)
	}
	var b strings.Builder
	b.WriteString(`{"key":"big","holder":` + holder(0) + `,"holders":[`)
	for i := range 40_000 { // about 5.3 MB
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(holder(i))
	}
	b.WriteString(`],"limit":1,"waiters":0}`)
	big := b.String()
	s := &testServer{ecfg: engine.Config{DataDir: t.TempDir()}, wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && (r.URL.Path == "/locks/big" || r.URL.Path == "/locks") {
				w.Header().Set("Content-Type", "application/json")
				body := big
				if r.URL.Path == "/locks" {
					body = `{"locks":[` + big + `],"total":1}`
				}
				_, _ = w.Write([]byte(body))
				return
			}
			h.ServeHTTP(w, r)
		})
	}}
	s.start(t, "127.0.51.1:0")
	s.Addr = s.ln.Addr().String()
	s.URL = "http://" + s.Addr
	t.Cleanup(s.Stop)
	c := newClient(t, nil, s.URL)
	ctx := ctxBound(t)
	start := time.Now()
	_, err := c.Status(ctx, "big")
	if err == nil || !strings.Contains(err.Error(), "larger than") || strings.Contains(err.Error(), "JSON") {
		t.Errorf("Status of a key whose answer is 5 MB: %v, want an error saying the answer is larger than the client reads", err)
	}
	_, err = c.List(ctx, "", 0)
	if err == nil || !strings.Contains(err.Error(), "larger than") || !strings.Contains(err.Error(), "limit") {
		t.Errorf("a listing whose answer is 5 MB: %v, want an error saying so and naming a smaller limit", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the two reads took %v: an answer too large is not a failure to retry", d)
	}
}
