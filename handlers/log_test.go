package handlers_test

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// fullLog is an engine.Log that refuses every record while full is set,
// as a log on a full disk does.
type fullLog struct {
	mu   sync.Mutex
	n    uint64
	full atomic.Bool
}

func (l *fullLog) Append([]byte) (uint64, error) {
	if l.full.Load() {
		return 0, errors.New("no space left on device")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return l.n, nil
}

func (l *fullLog) Wait(uint64) error { return nil }

// While the log refuses changes, every change is a 503 with Retry-After and
// code "unavailable", nothing changes, and reads go on; once the log takes
// records again, so does the node.
func TestLogRefusalIs503(t *testing.T) {
	log := &fullLog{}
	e := newEnv(t, engine.Config{Log: log}, handlers.Config{})
	a := e.acquire("/locks/k?lease=30")
	log.full.Store(true)
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "/locks/free"},
		{http.MethodPost, "/locks/k?wait=5"},
		{http.MethodPatch, "/locks/k?token=" + tok(a.Token) + "&lease=60"},
		{http.MethodDelete, "/locks/k?token=" + tok(a.Token)},
	} {
		r := e.do(c.method, c.path, "")
		if r.code != http.StatusServiceUnavailable || r.hdr.Get("Retry-After") == "" || r.errBody(t).Code != api.CodeUnavailable {
			t.Fatalf("%s %s with the log full: %d %s (Retry-After %q); want 503 unavailable with Retry-After", c.method, c.path, r.code, r.body, r.hdr.Get("Retry-After"))
		}
	}
	st := e.status("k")
	if st.Holder == nil || st.Holder.Token != a.Token || !st.Holder.ExpiresAt.Equal(a.ExpiresAt) || st.Waiters != 0 {
		t.Fatalf("k after refused changes: %+v; want held by %d until %v, nobody waiting", st, a.Token, a.ExpiresAt)
	}
	if l := e.list(); l.Total != 1 {
		t.Fatalf("keys after refused changes: %+v", l)
	}
	log.full.Store(false)
	e.release("k", a.Token)
	e.release("k", e.acquire("/locks/k").Token)
}
