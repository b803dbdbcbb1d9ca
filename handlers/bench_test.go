package handlers_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// benchServer serves the real handler stack (h1 and h2c) on a loopback
// port and returns its base URL.
func benchServer(b *testing.B) string {
	b.Helper()
	eng, err := engine.New(engine.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	srv := handlers.NewHTTPServer(handlers.New(eng, handlers.Config{Node: "http://bench"}), b.Context(), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	b.Cleanup(func() {
		srv.Close()
		eng.Close()
	})
	return "http://" + ln.Addr().String()
}

// BenchmarkHTTPAcquireRelease is one POST (granted at once) and one DELETE
// per op over HTTP/1.1 keep-alive, each parallel client on its own key: the
// whole server path (routing, validation, JSON, engine, metrics).
func BenchmarkHTTPAcquireRelease(b *testing.B) {
	base := benchServer(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var ids atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("%s/locks/bench/%d", base, ids.Add(1))
		for pb.Next() {
			resp, err := client.Post(key+"?lease=10", "", nil)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			tok := resp.Header.Get(api.HeaderLockToken)
			if resp.StatusCode != http.StatusOK || tok == "" {
				b.Errorf("acquire: %d", resp.StatusCode)
				return
			}
			req, _ := http.NewRequest(http.MethodDelete, key+"?token="+tok, nil)
			resp, err = client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("release: %d", resp.StatusCode)
				return
			}
		}
	})
}

// BenchmarkHTTPContendedHandoff: parallel clients loop acquire/release on
// one key over keep-alive; each op is one grant, most of them handed over
// directly from a release to a parked waiter.
func BenchmarkHTTPContendedHandoff(b *testing.B) {
	base := benchServer(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := base + "/locks/contended"
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url+"?lease=10", "", nil)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			tok, err := strconv.ParseUint(resp.Header.Get(api.HeaderLockToken), 10, 64)
			if resp.StatusCode != http.StatusOK || err != nil {
				b.Errorf("acquire: %d", resp.StatusCode)
				return
			}
			req, _ := http.NewRequest(http.MethodDelete, url+"?token="+strconv.FormatUint(tok, 10), nil)
			resp, err = client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// nopWriter is the least a ResponseWriter can be: it keeps the headers and
// drops the body, so that BenchmarkHandlerAcquireRelease measures the
// handler stack alone.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}
func (w *nopWriter) Flush()                      {}

// BenchmarkHandlerAcquireRelease is one POST (granted at once) and one
// DELETE per op through the handler stack (router, middleware, parsing,
// validation, engine, JSON, metrics) without sockets or net/http's own
// request parsing: the server's cost per cycle beyond the HTTP ceiling.
func BenchmarkHandlerAcquireRelease(b *testing.B) {
	eng, err := engine.New(engine.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	h := handlers.New(eng, handlers.Config{Node: "http://bench"})
	post, _ := http.NewRequest(http.MethodPost, "/locks/bench/1?lease=10", nil)
	w := &nopWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, post)
		tok := w.h.Get(api.HeaderLockToken)
		if tok == "" {
			b.Fatal("no grant")
		}
		del, _ := http.NewRequest(http.MethodDelete, "/locks/bench/1?token="+tok, nil)
		clear(w.h)
		h.ServeHTTP(w, del)
	}
}
