package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// parkShared parks a shared acquire of key over HTTP/1.1 on s, as its
// handler would, without running the handler: whatever answers it here
// is the release's side.
func parkShared(t *testing.T, s *Server, key string, ctx context.Context) (*parkedAcquire, *httptest.ResponseRecorder) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/locks/"+key+"?mode=shared", nil).WithContext(ctx)
	rec := httptest.NewRecorder()
	p := newParkedAcquire(s, rec, r, "")
	if _, wt := s.eng.AcquireTo(engine.AcquireRequest{Key: key, Mode: engine.Shared}, p); wt == nil {
		t.Fatalf("shared acquire of %s behind a writer was not queued", key)
	}
	return p, rec
}

func newHandOnServer(t *testing.T) *Server {
	t.Helper()
	eng, err := engine.New(engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return New(eng, Config{})
}

// A release that grants a run of shared waiters answers each of them
// itself, in grant order, once its record is written (answerHandedOn):
// no waiter's handler has run here, and each answer is a whole grant,
// written once.
func TestReleaseAnswersTheReadersItGrants(t *testing.T) {
	s := newHandOnServer(t)
	w, err := s.eng.Acquire(context.Background(), engine.AcquireRequest{Key: "cfg"})
	if err != nil {
		t.Fatal(err)
	}
	var ps []*parkedAcquire
	var recs []*httptest.ResponseRecorder
	for range 3 {
		p, rec := parkShared(t, s, "cfg", context.Background())
		ps, recs = append(ps, p), append(recs, rec)
	}
	if err := s.eng.Release("cfg", w.Token); err != nil {
		t.Fatal(err)
	}
	// The first waiter's handler woke first and claimed its own grant.
	if !ps[0].claim.CompareAndSwap(false, true) {
		t.Fatal("the first grant was claimed before anyone answered it")
	}
	ps[0].answer()
	s.answerHandedOn()
	last := w.Token
	for i, rec := range recs {
		if rec.Code != http.StatusOK {
			t.Fatalf("reader %d: status %d, body %q; want 200", i, rec.Code, rec.Body)
		}
		var g api.Grant
		dec := json.NewDecoder(rec.Body)
		if err := dec.Decode(&g); err != nil {
			t.Fatalf("reader %d: body %q: %v", i, rec.Body, err)
		}
		if dec.More() {
			t.Fatalf("reader %d: more than one answer written", i)
		}
		if g.Key != "cfg" || g.Token <= last || rec.Header().Get(api.HeaderLockToken) != strconv.FormatUint(g.Token, 10) {
			t.Fatalf("reader %d: grant %+v, Lock-Token %q; want cfg above token %d", i, g, rec.Header().Get(api.HeaderLockToken), last)
		}
		last = g.Token
		// The handler's wake-up, and a second one from the release's
		// side when it answered (not for the first, answered by its own).
		want := 2
		if i == 0 {
			want = 1
		}
		if got := len(ps[i].woke); got != want {
			t.Fatalf("reader %d: %d wake-ups queued, want %d", i, got, want)
		}
	}
	if st, err := s.eng.Status("cfg"); err != nil || len(st.Holders) != 3 {
		t.Fatalf("status %+v, %v: want the 3 readers holding", st, err)
	}
	if n := s.handedOn.n.Load(); n != 0 {
		t.Fatalf("%d grants still listed after the release answered them", n)
	}
}

// A grant the release's side finds with its request gone (the client
// went away as it was granted) is abandoned, never answered: the lock
// passes on, as it does when the handler finds it so.
func TestReleaseAbandonsTheGrantOfAGoneReader(t *testing.T) {
	s := newHandOnServer(t)
	w, err := s.eng.Acquire(context.Background(), engine.AcquireRequest{Key: "cfg"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, rec := parkShared(t, s, "cfg", ctx)
	_, kept := parkShared(t, s, "cfg", context.Background())
	cancel()
	if err := s.eng.Release("cfg", w.Token); err != nil {
		t.Fatal(err)
	}
	s.answerHandedOn()
	if rec.Body.Len() != 0 {
		t.Fatalf("the gone reader was answered %q", rec.Body)
	}
	if kept.Code != http.StatusOK {
		t.Fatalf("the other reader: %d %q; want 200", kept.Code, kept.Body)
	}
	if st, err := s.eng.Status("cfg"); err != nil || len(st.Holders) != 1 {
		t.Fatalf("status %+v, %v: want the one reader still there holding alone", st, err)
	}
}

// Grants answered by their own handlers (a lease's end, a withdrawn
// waiter: no release takes them off the list) do not pile up.
func TestHandedOnListDropsWhatHandlersAnswered(t *testing.T) {
	var l handedOnList
	for range 10_000 {
		p := &parkedAcquire{}
		p.claim.Store(true)
		l.add(p)
	}
	if n := len(l.q); n > 64 {
		t.Fatalf("%d entries listed, all answered; want at most 64", n)
	}
}
