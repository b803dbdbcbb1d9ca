package api_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is a real baton node in-process: the engine, the handlers and
// the h2c-capable http.Server of `baton serve`, on a listener that counts
// the connections it accepts.
type testServer struct {
	URL  string // http://127.0.0.1:port
	Addr string // 127.0.0.1:port

	ecfg engine.Config
	hcfg handlers.Config
	mu   sync.Mutex
	eng  *engine.Engine
	srv  *http.Server
	ln   *countingListener
	done chan struct{}
	wrap func(http.Handler) http.Handler
	// streams, if set, replaces the server's HTTP/2 stream limit per
	// connection (MaxConcurrentStreams).
	streams int

	// With ncfg set (startBoth), the node serves the native protocol too,
	// over the same engine, at Native (127.0.0.1:port).
	Native string
	ncfg   *native.Config
	nsrv   *native.Server
	ndone  chan struct{}
}

// startBoth starts a node that serves HTTP and the native protocol over
// one engine, as `baton serve` with native_listen does. The native
// server's AuthTokens and AdminTokens are hcfg's.
func startBoth(t testing.TB, ecfg engine.Config, hcfg handlers.Config, ncfg native.Config) *testServer {
	t.Helper()
	if ecfg.DataDir == "" {
		ecfg.DataDir = t.TempDir()
	}
	ncfg.AuthTokens, ncfg.AdminTokens = hcfg.AuthTokens, hcfg.AdminTokens
	s := &testServer{ecfg: ecfg, hcfg: hcfg, ncfg: &ncfg, Native: "127.0.0.1:0"}
	s.start(t, "127.0.0.1:0")
	s.Addr = s.ln.Addr().String()
	s.URL = "http://" + s.Addr
	t.Cleanup(s.Stop)
	return s
}

// Base returns the address a client of proto ("http" or "native") uses.
func (s *testServer) Base(proto string) string {
	if proto == "native" {
		return "baton://" + s.Native
	}
	return s.URL
}

// startServer starts a node on a free port; ecfg's zero fields are the
// engine's defaults (DataDir is a temporary directory). wrap, if set, wraps
// the handler.
func startServer(t testing.TB, ecfg engine.Config, wrap func(http.Handler) http.Handler) *testServer {
	t.Helper()
	return startServerWith(t, ecfg, handlers.Config{}, wrap)
}

// startServerWith is startServer with a handlers.Config (Node and Logger
// are filled in).
func startServerWith(t testing.TB, ecfg engine.Config, hcfg handlers.Config, wrap func(http.Handler) http.Handler) *testServer {
	t.Helper()
	if ecfg.DataDir == "" {
		ecfg.DataDir = t.TempDir()
	}
	s := &testServer{ecfg: ecfg, hcfg: hcfg, wrap: wrap}
	s.start(t, "127.0.0.1:0")
	s.Addr = s.ln.Addr().String()
	s.URL = "http://" + s.Addr
	t.Cleanup(s.Stop)
	return s
}

func (s *testServer) start(t testing.TB, addr string) {
	t.Helper()
	eng, err := engine.New(s.ecfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	hcfg := s.hcfg
	hcfg.Node, hcfg.Logger = "http://"+ln.Addr().String(), log
	var h http.Handler = handlers.New(eng, hcfg)
	if s.wrap != nil {
		h = s.wrap(h)
	}
	srv := handlers.NewHTTPServer(h, context.Background(), log)
	if s.streams > 0 {
		srv.HTTP2.MaxConcurrentStreams = s.streams
	}
	cl := &countingListener{Listener: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(cl)
	}()
	var nsrv *native.Server
	var ndone chan struct{}
	if s.ncfg != nil {
		nln, err := net.Listen("tcp", s.Native)
		if err != nil {
			srv.Close()
			eng.Close()
			t.Fatal(err)
		}
		ncfg := *s.ncfg
		ncfg.Logger = log
		nsrv, ndone = native.New(eng, ncfg), make(chan struct{})
		s.Native = nln.Addr().String()
		go func() {
			defer close(ndone)
			_ = nsrv.Serve(nln)
		}()
	}
	s.mu.Lock()
	s.eng, s.srv, s.ln, s.done = eng, srv, cl, done
	s.nsrv, s.ndone = nsrv, ndone
	s.mu.Unlock()
}

// Stop closes the listener and every connection, and the engine. It is
// idempotent.
func (s *testServer) Stop() {
	s.mu.Lock()
	eng, srv, done, nsrv, ndone := s.eng, s.srv, s.done, s.nsrv, s.ndone
	s.eng, s.srv, s.nsrv = nil, nil, nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	if nsrv != nil {
		nsrv.Close()
		<-ndone
	}
	eng.Close()
	srv.Close()
	<-done
}

// Restart starts the node again on the same port, with a fresh engine over
// the same data directory and a fresh connection count.
func (s *testServer) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.start(t, s.Addr)
}

// Accepted returns how many connections the current listener accepted.
func (s *testServer) Accepted() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ln.n.Load()
}

type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// newClient returns a Client for addrs, closed when the test ends.
func newClient(t testing.TB, mod func(*api.Config), addrs ...string) *api.Client {
	t.Helper()
	cfg := api.DefaultConfig()
	cfg.Addresses = addrs
	if mod != nil {
		mod(&cfg)
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
