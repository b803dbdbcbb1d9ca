package handlers_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// Every answer says X-Content-Type-Options: nosniff: JSON, text, errors,
// the status page and its assets, metrics, the OpenAPI document, and the
// 400 of a request net/http could not parse. Without it a browser may
// sniff a JSON error that echoes a key (or an owner) as HTML.
func TestEveryAnswerSaysNosniff(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, c := range []struct {
		method, path string
		hdr          []string
	}{
		{http.MethodPost, "/locks/n?lease=30", nil},
		{http.MethodPost, "/locks/t?lease=30", []string{"Accept", "text/plain"}},
		{http.MethodPost, "/locks/x?lease=0", nil},
		{http.MethodGet, "/locks/n", nil},
		{http.MethodGet, "/locks", nil},
		{http.MethodGet, "/no/such/route", nil},
		{http.MethodGet, "/", nil},
		{http.MethodGet, "/baton.js", nil},
		{http.MethodGet, "/metrics", nil},
		{http.MethodGet, "/openapi.json", nil},
		{http.MethodGet, "/cluster", nil},
		{http.MethodGet, "/healthz", nil},
	} {
		r := e.do(c.method, c.path, "", c.hdr...)
		if r.err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, r.err)
		}
		if got := r.hdr.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d, %s): X-Content-Type-Options %q, want nosniff", c.method, c.path, r.code, r.hdr.Get("Content-Type"), got)
		}
	}
	// The 400 of a request net/http cannot parse (BadRequestListener, as
	// baton serve listens).
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = handlers.NewHTTPServer(handlers.New(e.eng, handlers.Config{Node: "http://node-under-test"}), context.Background(), nil)
	srv.Listener = handlers.BadRequestListener(srv.Listener)
	srv.Start()
	defer srv.Close()
	nc, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := nc.Write([]byte("POST /locks/100% HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("X-Content-Type-Options"); res.StatusCode != http.StatusBadRequest || got != "nosniff" {
		t.Errorf("a path net/http cannot parse: %d, X-Content-Type-Options %q, want 400 and nosniff (%v)", res.StatusCode, got, strings.Join(res.Header.Values("Content-Type"), ","))
	}
}
