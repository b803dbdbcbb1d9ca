package handlers_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/handlers"
)

// TestForcedReleaseRepeatedUnderItsIdempotencyKey: a forced release whose
// answer was lost is sent again by a client that retries or by a browser
// (Chromium repeats a request, DELETE included, when its reused
// keep-alive connection breaks before the answer): the repeat released
// the waiter the first force handed the lock to. With an Idempotency-Key
// the repeat is answered 200 as the first was and changes nothing, even
// once the key is free (and a force that found the key free, 404, is
// answered 404 again, releasing nobody); the key is the force's own (an acquire under it,
// a 422 naming Idempotency-Key) and a malformed one is a 400 naming it.
func TestForcedReleaseRepeatedUnderItsIdempotencyKey(t *testing.T) {
	e := newWebEnv(t, handlers.Config{})
	do := func(method, path, idem string) (int, api.Error) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, nil)
		if idem != "" {
			req.Header.Set(api.HeaderIdempotencyKey, idem)
		}
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var ae api.Error
		_ = json.Unmarshal(b, &ae)
		return res.StatusCode, ae
	}
	holder := func() uint64 {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+"/locks/k", nil)
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var st api.LockStatus
		if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		if st.Holder == nil {
			return 0
		}
		return st.Holder.Token
	}
	if code, _ := do(http.MethodPost, "/locks/k?lease=60", ""); code != http.StatusOK {
		t.Fatalf("first acquire: %d", code)
	}
	type answer struct {
		code int
		body []byte
	}
	waiter := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+"/locks/k?lease=60&wait=30", nil)
		res, err := e.srv.Client().Do(req)
		if err != nil {
			waiter <- answer{0, []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		waiter <- answer{res.StatusCode, b}
	}()
	queued := func() bool {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+"/locks/k", nil)
		res, err := e.srv.Client().Do(req)
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var st api.LockStatus
		return json.NewDecoder(res.Body).Decode(&st) == nil && st.Waiters == 1
	}
	for !queued() {
		time.Sleep(time.Millisecond)
	}
	if code, ae := do(http.MethodDelete, "/locks/k?force=true", "force-1"); code != http.StatusOK {
		t.Fatalf("force: %d %+v", code, ae)
	}
	a := <-waiter
	var g api.Grant
	if a.code != http.StatusOK || json.Unmarshal(a.body, &g) != nil || g.Token == 0 {
		t.Fatalf("the waiter: %d %s", a.code, a.body)
	}
	if code, ae := do(http.MethodDelete, "/locks/k?force=true", "force-1"); code != http.StatusOK {
		t.Fatalf("the force repeated under its Idempotency-Key: %d %+v, want 200 as the first", code, ae)
	}
	if tok := holder(); tok != g.Token {
		t.Fatalf("holder token %d after the repeated force; want the waiter's %d", tok, g.Token)
	}
	if code, ae := do(http.MethodPost, "/locks/k?lease=60&wait=0", "force-1"); code != http.StatusUnprocessableEntity || ae.Field != api.HeaderIdempotencyKey {
		t.Errorf("acquire under the force's Idempotency-Key: %d %+v, want 422 naming %s", code, ae, api.HeaderIdempotencyKey)
	}
	if code, ae := do(http.MethodDelete, "/locks/k?force=true", strings.Repeat("x", 1000)); code != http.StatusBadRequest || ae.Field != api.HeaderIdempotencyKey {
		t.Errorf("force with a malformed Idempotency-Key: %d %+v, want 400 naming it", code, ae)
	}
	if tok := holder(); tok != g.Token {
		t.Fatalf("holder token %d after refused calls; want %d", tok, g.Token)
	}
	if code, ae := do(http.MethodDelete, "/locks/k?force=true", "force-2"); code != http.StatusOK {
		t.Fatalf("a force under a new key: %d %+v", code, ae)
	}
	if code, ae := do(http.MethodDelete, "/locks/k?force=true", "force-1"); code != http.StatusOK {
		t.Errorf("repeat on a free key: %d %+v, want 200 as the first", code, ae)
	}
	if code, _ := do(http.MethodDelete, "/locks/k?force=true", "force-3"); code != http.StatusNotFound {
		t.Errorf("a new force on a free key: %d, want 404", code)
	}
	// That 404 is remembered under its key as the 200s are: its client
	// may not have read it, and repeat it after another client took the
	// key (breaker Q, 2026-12-06: the repeat answered 200 and released
	// that holder).
	if code, ae := do(http.MethodPost, "/locks/k?lease=60", ""); code != http.StatusOK {
		t.Fatalf("acquire of the free key: %d %+v", code, ae)
	}
	tok := holder()
	if code, ae := do(http.MethodDelete, "/locks/k?force=true", "force-3"); code != http.StatusNotFound || ae.Code != api.CodeNotHeld {
		t.Errorf("the 404 force repeated under its Idempotency-Key: %d %+v, want 404 %s as the first", code, ae, api.CodeNotHeld)
	}
	if got := holder(); got != tok {
		t.Errorf("holder token %d after the repeated 404 force; want %d, who took the key between", got, tok)
	}
}
