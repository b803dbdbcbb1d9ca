package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The reference servers give every baton figure something to be compared
// with on the same machine, with the same request pattern:
//
//   - null answers every POST and DELETE at once with a grant-shaped body:
//     the HTTP ceiling (no lock at all);
//   - floor is the smallest real lock over HTTP: one buffered channel per
//     key, an atomic token counter, no leases. A POST long-polls on the
//     key's channel; a DELETE with the holder's token puts it back. Go
//     channels queue their receivers in FIFO order, so the floor is fair.
//
// Both serve HTTP/1.1 and h2c on one port, like baton.

// nullHandler answers at once, whatever the lock state.
type nullHandler struct {
	token atomic.Uint64
}

func (h *nullHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, ok := strings.CutPrefix(r.URL.Path, "/locks/")
	switch {
	case r.URL.Path == "/healthz":
		w.WriteHeader(http.StatusOK)
	case !ok || key == "":
		http.NotFound(w, r)
	case r.Method == http.MethodPost:
		writeGrant(w, r, key, h.token.Add(1))
	case r.Method == http.MethodDelete:
		writeReleased(w, r, key)
	default:
		http.NotFound(w, r)
	}
}

// writeGrant writes a grant the way baton does (SPEC section 2): the
// Lock-Token header and a JSON body, or the bare token for text/plain.
func writeGrant(w http.ResponseWriter, r *http.Request, key string, tok uint64) {
	ts := strconv.FormatUint(tok, 10)
	h := w.Header()
	h.Set("Lock-Token", ts)
	if strings.HasPrefix(r.Header.Get("Accept"), "text/plain") {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(ts + "\n"))
		return
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	body := make([]byte, 0, 160)
	body = append(body, `{"key":`...)
	body = strconv.AppendQuote(body, key)
	body = append(body, `,"token":`...)
	body = append(body, ts...)
	body = append(body, `,"lease":30,"expires_at":"`...)
	body = time.Now().Add(30*time.Second).UTC().AppendFormat(body, time.RFC3339Nano)
	body = append(body, `","node":"http://127.0.0.1"}`+"\n"...)
	w.Write(body)
}

// writeReleased writes the answer to a successful release.
func writeReleased(w http.ResponseWriter, r *http.Request, key string) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	body := make([]byte, 0, 64)
	body = append(body, `{"key":`...)
	body = strconv.AppendQuote(body, key)
	body = append(body, `,"released":true}`+"\n"...)
	w.Write(body)
}

// floorLock is one key of the floor server.
type floorLock struct {
	ch      chan struct{} // holds one value while the lock is free
	holder  atomic.Uint64 // token of the holder, 0 when free
	waiters atomic.Int64
}

// floorHandler is the smallest real lock over HTTP.
type floorHandler struct {
	token atomic.Uint64
	mu    sync.Mutex
	locks map[string]*floorLock
}

func newFloorHandler() *floorHandler {
	return &floorHandler{locks: make(map[string]*floorLock)}
}

func (h *floorHandler) lock(key string, create bool) *floorLock {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.locks[key]
	if l == nil && create {
		l = &floorLock{ch: make(chan struct{}, 1)}
		l.ch <- struct{}{}
		h.locks[key] = l
	}
	return l
}

func (h *floorHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, ok := strings.CutPrefix(r.URL.Path, "/locks/")
	switch {
	case r.URL.Path == "/healthz":
		w.WriteHeader(http.StatusOK)
	case !ok || key == "":
		http.NotFound(w, r)
	case r.Method == http.MethodPost:
		h.acquire(w, r, key)
	case r.Method == http.MethodDelete:
		h.release(w, r, key)
	case r.Method == http.MethodGet:
		l := h.lock(key, false)
		var n int64
		var holder any
		if l != nil {
			n = l.waiters.Load()
			if t := l.holder.Load(); t != 0 {
				holder = map[string]uint64{"token": t}
			}
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		json.NewEncoder(w).Encode(map[string]any{"key": key, "holder": holder, "waiters": n})
	default:
		http.NotFound(w, r)
	}
}

func (h *floorHandler) acquire(w http.ResponseWriter, r *http.Request, key string) {
	l := h.lock(key, true)
	var timeout <-chan time.Time
	if ws := r.URL.Query().Get("wait"); ws != "" {
		if wait, err := strconv.ParseFloat(ws, 64); err == nil && wait > 0 {
			t := time.NewTimer(time.Duration(wait * float64(time.Second)))
			defer t.Stop()
			timeout = t.C
		}
	}
	select {
	case <-l.ch:
	default:
		l.waiters.Add(1)
		select {
		case <-l.ch:
			l.waiters.Add(-1)
		case <-timeout:
			l.waiters.Add(-1)
			w.WriteHeader(http.StatusRequestTimeout)
			w.Write([]byte(`{"error":"timeout","message":"wait ran out"}` + "\n"))
			return
		case <-r.Context().Done():
			l.waiters.Add(-1)
			return
		}
	}
	tok := h.token.Add(1)
	l.holder.Store(tok)
	writeGrant(w, r, key, tok)
}

func (h *floorHandler) release(w http.ResponseWriter, r *http.Request, key string) {
	tok, err := strconv.ParseUint(r.URL.Query().Get("token"), 10, 64)
	if err != nil || tok == 0 {
		http.Error(w, `{"error":"invalid_argument","field":"token"}`, http.StatusBadRequest)
		return
	}
	l := h.lock(key, false)
	if l == nil || !l.holder.CompareAndSwap(tok, 0) {
		http.Error(w, `{"error":"not_holder"}`, http.StatusConflict)
		return
	}
	l.ch <- struct{}{}
	writeReleased(w, r, key)
}

// newRefHandler returns the handler of a reference target: "null" or
// "floor".
func newRefHandler(kind string) http.Handler {
	if kind == "floor" || kind == "nfloor" {
		return newFloorHandler()
	}
	return &nullHandler{}
}

// newRefServer returns an http.Server for handler that speaks HTTP/1.1 and
// h2c on one port, as baton does. maxStreams caps the concurrent HTTP/2
// streams per connection (0: Go's default).
func newRefServer(handler http.Handler, maxStreams int) *http.Server {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           handler,
		Protocols:         p,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: maxStreams},
		ReadHeaderTimeout: 10 * time.Second,
	}
}

// inprocRef is a reference server running inside the bench process.
type inprocRef struct {
	srv *http.Server
	ln  net.Listener
	nln net.Listener // the native floor's (kind nfloor), else nil
}

// startInprocRef starts a reference server of kind on a free loopback
// port inside this process.
func startInprocRef(kind string, maxStreams int) (*inprocRef, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := newRefHandler(kind)
	r := &inprocRef{srv: newRefServer(h, maxStreams), ln: ln}
	if kind == "nfloor" {
		if r.nln, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
			ln.Close()
			return nil, err
		}
		go serveNativeFloor(r.nln, h.(*floorHandler))
	}
	go r.srv.Serve(ln)
	return r, nil
}

func (s *inprocRef) addr() string { return s.ln.Addr().String() }

// naddr is the native floor's address, "" for the HTTP references.
func (s *inprocRef) naddr() string {
	if s.nln == nil {
		return ""
	}
	return s.nln.Addr().String()
}

func (s *inprocRef) close() {
	if s.nln != nil {
		s.nln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		s.srv.Close()
	}
}

// serveRefMain is the hidden "__serve-ref KIND ADDR MAXSTREAMS [NADDR]"
// mode (NADDR: the native floor's address, KIND nfloor): the
// bench re-executes itself to run a reference server in a process of its
// own, so that its RSS and its CPU are separate from the load generator's,
// as baton's are.
func serveRefMain(args []string) int {
	if len(args) != 3 && !(len(args) == 4 && args[0] == "nfloor") {
		return 2
	}
	maxStreams, _ := strconv.Atoi(args[2])
	ln, err := net.Listen("tcp4", args[1])
	if err != nil {
		return 1
	}
	h := newRefHandler(args[0])
	if len(args) == 4 {
		// The native floor, over the same locks as its HTTP side (which
		// answers /healthz and the waiters workload's queue length).
		nln, err := net.Listen("tcp4", args[3])
		if err != nil {
			return 1
		}
		go serveNativeFloor(nln, h.(*floorHandler))
	}
	srv := newRefServer(h, maxStreams)
	srv.Serve(ln)
	return 0
}
