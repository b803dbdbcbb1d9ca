package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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

// A peer with another secret polls every heartbeat: its refusals are
// logged once a minute per host and reason, with the count left out, not
// once per request (a three-node cluster with one misconfigured node
// logged ten lines a second on each side).
func TestRequireSecretLogsRefusalsOnceAMinute(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	now := time.Unix(1000, 0)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := requireSecretAt("peer-secret", log, func() time.Time { return now })(ok)
	send := func(remote, secret string) {
		req := httptest.NewRequest(http.MethodGet, PathPrefix+"/status", nil)
		req.RemoteAddr = remote
		req.Header.Set(HeaderSecret, secret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("%s: %d, want 401", remote, rec.Code)
		}
	}
	lines := func() int { return strings.Count(logs.String(), "refused peer request") }
	for i := range 50 {
		send(fmt.Sprintf("10.0.0.1:%d", 40000+i), "wrong")
		now = now.Add(200 * time.Millisecond)
	}
	if n := lines(); n != 1 {
		t.Fatalf("50 refusals of one host within 10 s logged %d lines, want 1:\n%s", n, logs.String())
	}
	send("10.0.0.2:1", "wrong")
	if n := lines(); n != 2 {
		t.Fatalf("another host's refusal: %d lines, want 2", n)
	}
	now = now.Add(refusalEvery)
	send("10.0.0.1:1", "wrong")
	if n := lines(); n != 3 || !strings.Contains(logs.String(), "suppressed=49") {
		t.Fatalf("a minute later: %d lines, want 3 with suppressed=49:\n%s", n, logs.String())
	}
}
