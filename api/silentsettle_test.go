package api_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// An HTTP acquire that ends without a grant settles the attempts a silent
// node left unanswered past their limit, as a baton:// acquire does
// (TestNativeLateGrantOfAGivenUpAcquireReleased): node A does not answer
// the first attempt (stopped, its socket open; it granted when it
// resumed), node B answers the next one 408, and A, asked again under the
// same Idempotency-Key, says it granted: the grant is released (B asked
// first redirects to A).
// TestHistoryChaosTimeouts CHAOS_NODES=5 CHAOS_SEED=2732: after a kill-all
// under load, two HTTP clients' acquires ended at their context's end
// while a starved node had granted them late, and the grants, which no
// client received, held rw and m 8.9 and 7.6 s (past the claim deadline,
// to their 12 s lease).
func TestAcquireSettlesASilentNodesLateGrant(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	released := make(chan string, 1)
	a := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			mu.Lock()
			keys = append(keys, r.Header.Get(api.HeaderIdempotencyKey))
			first := len(keys) == 1
			mu.Unlock()
			if first {
				<-r.Context().Done() // silent until the client gives up
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(api.HeaderLockToken, "7")
			fmt.Fprint(w, `{"key":"k","token":7,"lease":60,"expires_at":"2030-01-01T00:00:00Z"}`)
		case http.MethodDelete:
			select {
			case released <- r.URL.Query().Get("token"):
			default:
			}
			fmt.Fprint(w, `{}`)
		}
	}))
	b := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked := len(keys) > 0
		mu.Unlock()
		if !asked {
			// Asked first (round robin): A is the active.
			w.Header().Set("Location", a.URL+r.URL.RequestURI())
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestTimeout)
		fmt.Fprint(w, `{"error":"timeout","message":"the wait ran out before the lock was granted; nothing is held"}`)
	}))
	for _, srv := range []*httptest.Server{a, b} {
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
		defer srv.Close()
	}
	c := newClient(t, func(cfg *api.Config) { cfg.AcquireGrace = 100 * time.Millisecond }, a.URL, b.URL)
	_, err := c.Acquire(ctxBound(t), "k", api.WithWait(100*time.Millisecond))
	if !errors.Is(err, api.ErrTimeout) {
		t.Fatalf("acquire: %v, want ErrTimeout", err)
	}
	select {
	case tok := <-released:
		if tok != "7" {
			t.Fatalf("released token %q, want 7", tok)
		}
	case <-time.After(15 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the silent node's grant was never released (its acquires: %d, under %q)", len(keys), keys)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) < 2 || keys[1] != keys[0] {
		t.Fatalf("Idempotency-Keys asked of the silent node %q: want the acquire's again", keys)
	}
}
