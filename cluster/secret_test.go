package cluster

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The peer endpoints require the cluster secret (SPEC section 3, "Peer
// traffic ... authenticated with a shared cluster secret").
func TestRequireSecret(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := requireSecret("peer-secret", log)(ok)
	for _, c := range []struct {
		secret string
		set    bool
		want   int
	}{
		{"", false, 401},
		{"", true, 401},
		{"peer-secre", true, 401},
		{"peer-secret ", true, 401},
		{"PEER-SECRET", true, 401},
		{"peer-secret", true, 204},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, PathPrefix+"/handoff", nil)
		if c.set {
			req.Header.Set(HeaderSecret, c.secret)
		}
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("secret %q: %d, want %d", c.secret, rec.Code, c.want)
		}
		if rec.Code == 401 && !strings.Contains(rec.Body.String(), `"error":"unauthorized"`) {
			t.Errorf("401 body %q", rec.Body.String())
		}
	}
	if got := logs.String(); !strings.Contains(got, "reason=\"no cluster secret\"") || !strings.Contains(got, "reason=\"wrong cluster secret\"") {
		t.Errorf("refusals not logged with their reason:\n%s", got)
	}
	if strings.Contains(logs.String(), "peer-secre") {
		t.Errorf("a refusal logged the secret sent:\n%s", logs.String())
	}
	// No secret configured: peers are not authenticated.
	rec := httptest.NewRecorder()
	requireSecret("", log)(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathPrefix+"/status", nil))
	if rec.Code != 204 {
		t.Errorf("empty secret: %d", rec.Code)
	}
}
