package handlers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/baton-io/baton/api"
)

// h2ClosedWriter is the ResponseWriter of an HTTP/2 stream that its client
// reset just after the HEADERS frame reached it (a client that read the
// status and Lock-Token and closed the body unread): the headers were
// sent, yet net/http's flush may report the stream closed, as its handler
// goroutine finds the frame written and the stream closed both at once
// and picks either (http2serverConn.writeHeaders).
type h2ClosedWriter struct {
	h      http.Header
	sent   http.Header // the headers the client received
	status int
}

func (w *h2ClosedWriter) Header() http.Header { return w.h }
func (w *h2ClosedWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *h2ClosedWriter) FlushError() error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.sent = w.h.Clone()
	return errors.New("http2: stream closed")
}
func (w *h2ClosedWriter) Write([]byte) (int, error) {
	return 0, errors.New("http2: stream closed")
}

// An HTTP/2 client told 200 with a Lock-Token holds that lock, whatever
// the flush of those headers reports: the stream's reset after its
// headers cannot be told from one before them, so the grant stays (its
// lease, or the client's release, ends it) rather than being taken back
// from a client that has its token. (Seen in CI: a client that closed the
// body of its 200 unread had its grant released behind it.)
func TestHTTP2GrantWhoseHeadersWentOutStaysHeld(t *testing.T) {
	s := newHandOnServer(t)
	r := httptest.NewRequest(http.MethodPost, "/locks/k?lease=60", nil)
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	w := &h2ClosedWriter{h: http.Header{}}
	s.ServeHTTP(w, r)
	if w.status != http.StatusOK || w.sent == nil {
		t.Fatalf("answered %d, headers sent %v; want 200 sent", w.status, w.sent)
	}
	tok, err := strconv.ParseUint(w.sent.Get(api.HeaderLockToken), 10, 64)
	if err != nil {
		t.Fatalf("Lock-Token %q: %v", w.sent.Get(api.HeaderLockToken), err)
	}
	st, err := s.eng.Status("k")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != tok {
		t.Fatalf("status %+v, %v: want the client told 200 holding token %d", st, err, tok)
	}
}
