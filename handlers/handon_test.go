package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

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

// waitAnswered waits until p's grant is answered (its handler's wake-up).
func waitAnswered(t *testing.T, p *parkedAcquire, what string) {
	t.Helper()
	select {
	case <-p.woke:
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: not answered within 15 s", what)
	}
}

// A release that grants a run of shared waiters over HTTP/1.1 has them
// answered without their handlers: none has run here, and each answer is
// a whole grant, written once, in token order.
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
	upTo, err := s.eng.ReleaseLogged("cfg", w.Token)
	if err != nil {
		t.Fatal(err)
	}
	s.answerHandedOn(upTo) // as the release's handler does
	last := w.Token
	for i, rec := range recs {
		waitAnswered(t, ps[i], fmt.Sprintf("reader %d", i))
		if !ps[i].claim.Load() {
			t.Fatalf("reader %d: answered unclaimed", i)
		}
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
	}
	if st, err := s.eng.Status("cfg"); err != nil || len(st.Holders) != 3 {
		t.Fatalf("status %+v, %v: want the 3 readers holding", st, err)
	}
}

// A grant made by no release's handler (an operator's release made on
// the engine here, as a lease's end or a release over the native
// protocol would) is answered too: the list's own goroutine writes it,
// and the waiter's handler is woken only then.
func TestGrantMadeByNoHTTPReleaseIsAnswered(t *testing.T) {
	s := newHandOnServer(t)
	if _, err := s.eng.Acquire(context.Background(), engine.AcquireRequest{Key: "cfg"}); err != nil {
		t.Fatal(err)
	}
	p, rec := parkShared(t, s, "cfg", context.Background())
	if err := s.eng.ForceRelease("cfg"); err != nil {
		t.Fatal(err)
	}
	waitAnswered(t, p, "the reader")
	if rec.Code != http.StatusOK || rec.Header().Get(api.HeaderLockToken) == "" {
		t.Fatalf("reader: %d %q, Lock-Token %q; want a grant", rec.Code, rec.Body, rec.Header().Get(api.HeaderLockToken))
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
	gone, rec := parkShared(t, s, "cfg", ctx)
	keep, kept := parkShared(t, s, "cfg", context.Background())
	cancel()
	upTo, err := s.eng.ReleaseLogged("cfg", w.Token)
	if err != nil {
		t.Fatal(err)
	}
	s.answerHandedOn(upTo)
	waitAnswered(t, gone, "the gone reader")
	waitAnswered(t, keep, "the other reader")
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

// The list hands out its grants oldest first, once each, and says when
// it fills (the caller then starts the goroutine that empties it).
func TestHandedOnListOrder(t *testing.T) {
	var l handedOnList
	ps := []*parkedAcquire{{}, {}, {}}
	for i, p := range ps {
		if first := l.add(p); first != (i == 0) {
			t.Fatalf("add %d: first %v", i, first)
		}
	}
	for i, want := range ps {
		if got := l.next(math.MaxUint64); got != want {
			t.Fatalf("next %d: %p, want %p", i, got, want)
		}
	}
	if p := l.next(math.MaxUint64); p != nil || l.n.Load() != 0 {
		t.Fatalf("empty list: next %p, n %d", p, l.n.Load())
	}
	if !l.add(ps[0]) {
		t.Fatal("add to the emptied list: not first")
	}
}

// stalledWriter is the ResponseWriter of a client that reads nothing:
// its Write returns only once a write deadline set on it has passed.
type stalledWriter struct {
	h         http.Header
	mu        sync.Mutex
	deadline  time.Time
	deadlines []time.Time
}

func (w *stalledWriter) Header() http.Header { return w.h }
func (w *stalledWriter) WriteHeader(int)     {}
func (w *stalledWriter) Write([]byte) (int, error) {
	for {
		w.mu.Lock()
		d := w.deadline
		w.mu.Unlock()
		if !d.IsZero() && time.Now().After(d) {
			return 0, os.ErrDeadlineExceeded
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *stalledWriter) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadline = t
	w.deadlines = append(w.deadlines, t)
	return nil
}

// The answer written for a reader whose client takes nothing is cut off
// by a write deadline (handOnWriteLimit), the deadline is cleared again,
// and its grant is abandoned (it passes on); the other reader of the
// same release is answered. Without the deadline the write never ends.
func TestHandOnWriteToAStalledClientIsCutOff(t *testing.T) {
	s := newHandOnServer(t)
	w, err := s.eng.Acquire(context.Background(), engine.AcquireRequest{Key: "cfg"})
	if err != nil {
		t.Fatal(err)
	}
	sw := &stalledWriter{h: http.Header{}}
	r := httptest.NewRequest(http.MethodPost, "/locks/cfg?mode=shared", nil)
	stalled := newParkedAcquire(s, sw, r, "")
	if _, wt := s.eng.AcquireTo(engine.AcquireRequest{Key: "cfg", Mode: engine.Shared}, stalled); wt == nil {
		t.Fatal("shared acquire behind a writer was not queued")
	}
	other, rec := parkShared(t, s, "cfg", context.Background())
	upTo, err := s.eng.ReleaseLogged("cfg", w.Token)
	if err != nil {
		t.Fatal(err)
	}
	s.answerHandedOn(upTo)
	waitAnswered(t, other, "the reading reader")
	waitAnswered(t, stalled, "the stalled reader")
	if rec.Code != http.StatusOK {
		t.Fatalf("the reading reader: %d %q; want 200", rec.Code, rec.Body)
	}
	sw.mu.Lock()
	ds := sw.deadlines
	sw.mu.Unlock()
	if len(ds) != 2 || ds[0].IsZero() || !ds[1].IsZero() {
		t.Fatalf("write deadlines set %v; want one, then cleared", ds)
	}
	if st, err := s.eng.Status("cfg"); err != nil || len(st.Holders) != 1 || st.Holders[0].Token != grantToken(t, rec) {
		t.Fatalf("status %+v, %v: want the reading reader alone holding", st, err)
	}
}

func grantToken(t *testing.T, rec *httptest.ResponseRecorder) uint64 {
	t.Helper()
	tok, err := strconv.ParseUint(rec.Header().Get(api.HeaderLockToken), 10, 64)
	if err != nil {
		t.Fatalf("Lock-Token %q: %v", rec.Header().Get(api.HeaderLockToken), err)
	}
	return tok
}

// gatedLog is an engine.Log whose Wait blocks while its gate is shut: a
// log write (an fsync, a sync standby's acknowledgement) that takes long.
type gatedLog struct {
	mu   sync.Mutex
	idx  uint64
	open chan struct{} // closed: the gate is open
}

func (l *gatedLog) Append([]byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idx++
	return l.idx, nil
}

func (l *gatedLog) Wait(uint64) error {
	l.mu.Lock()
	open := l.open
	l.mu.Unlock()
	<-open
	return nil
}

func (l *gatedLog) shut() {
	l.mu.Lock()
	l.open = make(chan struct{})
	l.mu.Unlock()
}

// deadlineRecorder is the ResponseWriter of a client that reads at once:
// a write fails only when a write deadline set on it has passed, as a
// connection's does.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	mu       sync.Mutex
	deadline time.Time
}

func (w *deadlineRecorder) Write(b []byte) (int, error) {
	w.mu.Lock()
	d := w.deadline
	w.mu.Unlock()
	if !d.IsZero() && time.Now().After(d) {
		return 0, os.ErrDeadlineExceeded
	}
	return w.ResponseRecorder.Write(b)
}

func (w *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadline = t
	return nil
}

// A grant whose record takes longer than handOnWriteLimit to be written
// (fsync: always on a slow disk, a sync standby that is slow to
// acknowledge) is answered once it is written: the write deadline bounds
// the write of the answer, not the wait for the log before it. A grant
// made by no release (ForceRelease here, as a lease's end) is settled by
// the list's goroutine; the log is held shut past handOnWriteLimit.
func TestHandOnWriteDeadlineLeavesOutTheLogWait(t *testing.T) {
	log := &gatedLog{open: make(chan struct{})}
	close(log.open)
	eng, err := engine.New(engine.Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	s := New(eng, Config{})
	if _, err := s.eng.Acquire(context.Background(), engine.AcquireRequest{Key: "cfg"}); err != nil {
		t.Fatal(err)
	}
	dw := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	r := httptest.NewRequest(http.MethodPost, "/locks/cfg?mode=shared", nil)
	p := newParkedAcquire(s, dw, r, "")
	if _, wt := s.eng.AcquireTo(engine.AcquireRequest{Key: "cfg", Mode: engine.Shared}, p); wt == nil {
		t.Fatal("shared acquire behind a writer was not queued")
	}
	log.shut()
	released := make(chan error, 1)
	go func() { released <- s.eng.ForceRelease("cfg") }()
	time.Sleep(handOnWriteLimit + 500*time.Millisecond)
	close(log.open)
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	waitAnswered(t, p, "the reader")
	if dw.Code != http.StatusOK || dw.Body.Len() == 0 {
		t.Fatalf("the reader: %d %q; want its grant (its answer was cut off by a deadline that ran during the log write)", dw.Code, dw.Body)
	}
	if st, err := s.eng.Status("cfg"); err != nil || len(st.Holders) != 1 || st.Holders[0].Token != grantToken(t, dw.ResponseRecorder) {
		t.Fatalf("status %+v, %v: want the reader holding", st, err)
	}
}

// stepLog is an engine.Log that writes every record at once until hold:
// then the records from there on wait until open, as on a log whose next
// write (an fsync, a sync standby's acknowledgement) takes long. A
// written index means every lower one is written, as the Log contract
// says. onWait, if set, runs once, at the first Wait.
type stepLog struct {
	mu     sync.Mutex
	idx    uint64
	held   uint64        // 0: none; else records above it wait for opened
	opened chan struct{} // closed by open
	onWait func()
}

func (l *stepLog) Append([]byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idx++
	return l.idx, nil
}

func (l *stepLog) Wait(index uint64) error {
	l.mu.Lock()
	f := l.onWait
	l.onWait = nil
	l.mu.Unlock()
	if f != nil {
		f()
	}
	l.mu.Lock()
	held, opened := l.held, l.opened
	l.mu.Unlock()
	if held != 0 && index > held {
		<-opened
	}
	return nil
}

// hold makes the records appended from now on wait for open.
func (l *stepLog) hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held, l.opened = l.idx, make(chan struct{})
}

// open lets the held records be written (again: nothing more).
func (l *stepLog) open() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opened != nil {
		select {
		case <-l.opened:
		default:
			close(l.opened)
		}
	}
}

// listedOnly is the receiver of a parked HTTP/1.1 acquire whose grant is
// listed as Done lists it, but whose list goroutine has not run yet (a
// loaded node): only a release's handler can take it from the list.
type listedOnly struct{ p *parkedAcquire }

func (r listedOnly) Done(o engine.AcquireResult) bool {
	if o.Err() != nil {
		panic(o.Err())
	}
	r.p.o = o
	r.p.s.handedOn.add(r.p)
	return true
}

// A release's handler answers its own client without waiting for the
// record of a grant listed after its release was made: here a reader of
// another key, granted while the release's record was written, whose
// record then waits (a slow fsync, a sync standby slow to acknowledge,
// up to sync_timeout). It may answer listed grants first, but only those
// already written; the list's goroutine answers the rest once written.
func TestReleaseDoesNotWaitForAnotherKeysGrant(t *testing.T) {
	log := &stepLog{}
	eng, err := engine.New(engine.Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	s := New(eng, Config{})
	writer, err := eng.Acquire(context.Background(), engine.AcquireRequest{Key: "other"})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := eng.Acquire(context.Background(), engine.AcquireRequest{Key: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/locks/other?mode=shared", nil)
	reader := newParkedAcquire(s, rec, r, "")
	if _, wt := eng.AcquireTo(engine.AcquireRequest{Key: "other", Mode: engine.Shared}, listedOnly{reader}); wt == nil {
		t.Fatal("shared acquire behind a writer was not queued")
	}
	// While the release of mine waits for its record, other's writer
	// releases (over the native protocol, say): its reader is granted
	// and listed, and from then on the log holds every new record.
	log.mu.Lock()
	log.onWait = func() {
		log.hold()
		if _, _, err := eng.ReleaseNoWait("other", writer.Token); err != nil {
			t.Error(err)
		}
	}
	log.mu.Unlock()
	defer log.open() // a failed test leaves no handler waiting
	released := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodDelete, "/locks/mine?token="+strconv.FormatUint(mine.Token, 10), nil))
		released <- w
	}()
	select {
	case w := <-released:
		if w.Code != http.StatusOK {
			t.Fatalf("release of mine: %d %q; want 200", w.Code, w.Body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("release of mine not answered within 20 s: it waited for the record of the grant on other")
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("the reader was answered %q before its record was written", rec.Body)
	}
	log.open()
	s.answerHandedOn(math.MaxUint64) // the list's goroutine
	waitAnswered(t, reader, "the reader")
	if rec.Code != http.StatusOK || rec.Header().Get(api.HeaderLockToken) == "" {
		t.Fatalf("the reader: %d %q; want its grant", rec.Code, rec.Body)
	}
}

// An exclusive grant listed while an HTTP release is between its engine
// call and its answers starts no goroutine of its own (the release's
// handler takes the grants of its step); one it cannot take (another
// key's, granted while its records were written, whose own record waits)
// is answered by the goroutine the release's handler starts as it leaves
// the list (releaseDone): nothing else here takes it from the list.
func TestReleaseStartsTheListsGoroutineForWhatItLeaves(t *testing.T) {
	log := &stepLog{}
	eng, err := engine.New(engine.Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	s := New(eng, Config{})
	writer, err := eng.Acquire(context.Background(), engine.AcquireRequest{Key: "other"})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := eng.Acquire(context.Background(), engine.AcquireRequest{Key: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	waiter := newParkedAcquire(s, rec, httptest.NewRequest(http.MethodPost, "/locks/other", nil), "")
	if _, wt := eng.AcquireTo(engine.AcquireRequest{Key: "other"}, waiter); wt == nil {
		t.Fatal("acquire of other behind its holder was not queued")
	}
	// While the release of mine waits for its record, other's writer
	// releases (over the native protocol, say): its waiter is granted
	// and listed, with the release of mine in flight, and its record
	// waits.
	log.mu.Lock()
	log.onWait = func() {
		log.hold()
		if _, _, err := eng.ReleaseNoWait("other", writer.Token); err != nil {
			t.Error(err)
		}
		if s.handedOn.n.Load() != 1 {
			t.Errorf("%d grants listed, want the waiter's", s.handedOn.n.Load())
		}
	}
	log.mu.Unlock()
	defer log.open() // a failed test leaves no goroutine waiting
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodDelete, "/locks/mine?token="+strconv.FormatUint(mine.Token, 10), nil))
	if w.Code != http.StatusOK {
		t.Fatalf("release of mine: %d %q; want 200", w.Code, w.Body)
	}
	if n := s.releasing.Load(); n != 0 {
		t.Fatalf("releasing is %d after the release was answered, want 0", n)
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("the waiter was answered %q before its record was written", rec.Body)
	}
	log.open()
	waitAnswered(t, waiter, "the waiter")
	if rec.Code != http.StatusOK || rec.Header().Get(api.HeaderLockToken) == "" {
		t.Fatalf("the waiter: %d %q; want its grant", rec.Code, rec.Body)
	}
}
