package handlers_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/internal/errcode"
	"github.com/baton-io/baton/wal"
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

// failingFiles wraps the files of a wal.Log (wal.Config.WrapFile) so that
// their writes fail, writing nothing, while fail is set: a disk that
// errors.
type failingFiles struct{ fail atomic.Bool }

func (fs *failingFiles) wrap(_ string, f wal.File) wal.File { return &failingFile{f, fs} }

type failingFile struct {
	wal.File
	fs *failingFiles
}

func (f *failingFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.fail.Load() {
		return 0, &os.PathError{Op: "write", Path: "injected", Err: syscall.EIO}
	}
	return f.File.WriteAt(p, off)
}

func (f *failingFile) Write(p []byte) (int, error) {
	if f.fs.fail.Load() {
		return 0, &os.PathError{Op: "write", Path: "injected", Err: syscall.EIO}
	}
	return f.File.Write(p)
}

// A release or renewal that the log takes but cannot write is made in
// memory (the release hands the lock on) and stays pending in the log:
// written if the log recovers, lost if the node stops first. Its answer
// is a 503 that says so, not the "nothing was changed" of a change the
// log refused (the next one, once the log is failed); a repeated release
// answers 503 too while the release is not written (a not_held would rest
// on it), and not_held once the log has written it; and a restart on the
// log finds one of the two
// outcomes the answer allowed: the change, once the log recovered, and
// the state before it, when the node stopped first.
func TestUnwrittenChangeIs503WithOutcomeUnknown(t *testing.T) {
	_, _, notWritten, _ := errcode.Of(engine.ErrNotWritten)
	_, _, refused, _ := errcode.Of(engine.ErrUnavailable)
	_, _, refusalUnwritten, _ := errcode.Of(engine.ErrRefusalNotWritten)
	_, _, readUnwritten, _ := errcode.Of(engine.ErrReadNotWritten)
	if notWritten == refused {
		t.Fatalf("ErrNotWritten and ErrUnavailable have the same message %q", refused)
	}
	for _, op := range []string{"release", "renew"} {
		for _, recovers := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/recovers=%v", op, recovers), func(t *testing.T) {
				files := &failingFiles{}
				health := make(chan error, 16)
				wc := wal.DefaultConfig(t.TempDir())
				wc.Preallocate = 0
				// How long a Wait waits for a failed log, and how often it
				// is retried: short, so that the test does not wait long.
				wc.FailTimeout, wc.RetryInterval = 10*time.Millisecond, 10*time.Millisecond
				wc.Logger = slog.New(slog.DiscardHandler)
				wc.WrapFile = files.wrap
				wc.OnHealth = func(err error) { health <- err }
				l, err := wal.Open(wc)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close() })
				e := newEnv(t, engine.Config{Log: l}, handlers.Config{})
				g := e.acquire("/locks/k?lease=60")
				before, _ := e.eng.Status("k")

				files.fail.Store(true)
				path := "/locks/k?token=" + tok(g.Token)
				method := http.MethodDelete
				if op == "renew" {
					method, path = http.MethodPatch, path+"&lease=120"
				}
				r := e.do(method, path, "")
				if r.code != http.StatusServiceUnavailable || r.hdr.Get("Retry-After") == "" {
					t.Fatalf("%s with the log failing: %d %s; want 503 with Retry-After", op, r.code, r.body)
				}
				if b := r.errBody(t); b.Code != api.CodeUnavailable || b.Message != notWritten {
					t.Fatalf("%s with the log failing: %+v; want code %q, message %q", op, b, api.CodeUnavailable, notWritten)
				}
				// Nor is the change shown while it is not written: a read
				// answers 503 until the log writes it (a grant caught so is
				// taken back, and was shown as the holder before).
				if _, err := e.eng.Status("k"); !errors.Is(err, engine.ErrReadNotWritten) {
					t.Fatalf("Status(k) after the unwritten %s: %v; want ErrReadNotWritten", op, err)
				}
				if r := e.do(http.MethodGet, "/locks/k", ""); r.code != http.StatusServiceUnavailable || r.errBody(t).Message != readUnwritten {
					t.Fatalf("GET /locks/k after the unwritten %s: %d %s; want 503 %q", op, r.code, r.body, readUnwritten)
				}
				if op == "release" {
					// Not not_held: that would rest on the unwritten
					// release, which a stop or a handoff loses.
					if r := e.do(method, path, ""); r.code != http.StatusServiceUnavailable || r.errBody(t).Message != refusalUnwritten {
						t.Fatalf("the release repeated, the log failing: %d %s; want 503 %q", r.code, r.body, refusalUnwritten)
					}
				}
				// The log is failed now: the next change is refused, and
				// that answer may say that nothing changed.
				if r := e.do(http.MethodPost, "/locks/other", ""); r.code != http.StatusServiceUnavailable || r.errBody(t).Message != refused {
					t.Fatalf("acquire on a failed log: %d %s; want 503 %q", r.code, r.body, refused)
				}

				want := before // the node stopped before the log could write the change
				if recovers {
					files.fail.Store(false)
					waitHealthy(t, health)
					made, err := e.eng.Status("k")
					switch {
					case err != nil:
						t.Fatalf("Status(k) once the log writes again: %v", err)
					case op == "release" && made.Holder != nil:
						t.Fatalf("k after the release, written: held by %+v; want free", made.Holder)
					case op == "renew" && (made.Holder == nil || made.Holder.Token != g.Token || !made.Holder.ExpiresAt.After(before.Holder.ExpiresAt.Add(time.Minute/2))):
						t.Fatalf("k after the renewal, written: %+v; want held by %d past %v", made.Holder, g.Token, before.Holder.ExpiresAt)
					}
					want = made
					if op == "release" {
						if r := e.do(method, path, ""); r.code != http.StatusNotFound || r.errBody(t).Code != api.CodeNotHeld {
							t.Fatalf("the release repeated, the log written: %d %s; want 404 not_held", r.code, r.body)
						}
					}
				}
				e.srv.Close()
				if err := e.eng.Close(); err != nil {
					t.Fatal(err)
				}
				if err := l.Close(); (err == nil) != recovers {
					t.Fatalf("closing the log: %v (recovered: %v)", err, recovers)
				}

				after := restart(t, wc.Dir, e.dir)
				if st, _ := after.Status("other"); st.Holder != nil {
					t.Fatalf("other after the restart: held by %+v; want free (its acquire was refused)", st.Holder)
				}
				got, _ := after.Status("k")
				switch {
				case want.Holder == nil && got.Holder != nil:
					t.Fatalf("k after the restart: held by %+v; want free", got.Holder)
				case want.Holder == nil:
				case got.Holder == nil || got.Holder.Token != want.Holder.Token || got.Holder.ExpiresAt.Sub(want.Holder.ExpiresAt).Abs() > time.Millisecond:
					t.Fatalf("k after the restart: %+v; want held by %d until %v", got.Holder, want.Holder.Token, want.Holder.ExpiresAt)
				}
			})
		}
	}
}

// waitHealthy waits until the log reports (wal.Config.OnHealth) that it
// writes again; the bound only turns a hang into a failure.
func waitHealthy(t *testing.T, health <-chan error) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case err := <-health:
			if err == nil {
				return
			}
		case <-timeout:
			t.Fatal("the log did not recover within 10 s of its disk writing again")
		}
	}
}

// restart opens the log in dir again and replays it into a new engine
// (tokens in dataDir), as a node does when it starts, and returns the
// engine, promoted.
func restart(t *testing.T, dir, dataDir string) *engine.Engine {
	t.Helper()
	wc := wal.DefaultConfig(dir)
	wc.Logger = slog.New(slog.DiscardHandler)
	l, err := wal.Open(wc)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	eng, err := engine.New(engine.Config{DataDir: dataDir, Standby: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	if err := l.Replay(1, func(_ uint64, rec []byte) error { return eng.Replay(rec) }); err != nil {
		t.Fatal(err)
	}
	eng.Promote(engine.Failover)
	return eng
}
