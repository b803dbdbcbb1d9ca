package handlers_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/internal/testproc"
)

// TestTLSNegotiatesHTTP2 serves the real handler with NewHTTPServer and
// ServeTLS, as baton serve does with tls_cert and tls_key, and checks that
// an HTTP/2-capable client gets h2 by ALPN and an HTTP/1.1-only client still
// gets served.
func TestTLSNegotiatesHTTP2(t *testing.T) {
	certFile, keyFile, pool := testproc.SelfSigned(t, t.TempDir())
	eng, err := engine.New(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := handlers.NewHTTPServer(handlers.New(eng, handlers.Config{}), context.Background(), nil)
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, certFile, keyFile) }()
	defer func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("ServeTLS: %v", err)
		}
	}()
	url := "https://" + ln.Addr().String()

	for _, c := range []struct {
		name  string
		h1    bool
		proto string
	}{
		{"h2 by ALPN", false, "h2"},
		{"HTTP/1.1 only", true, ""}, // no ALPN offered: plain TLS
	} {
		t.Run(c.name, func(t *testing.T) {
			var p http.Protocols
			if c.h1 {
				p.SetHTTP1(true)
			} else {
				p.SetHTTP2(true)
			}
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: &p}
			defer tr.CloseIdleConnections()
			cl := &http.Client{Transport: tr, Timeout: 20 * time.Second}
			res, err := cl.Post(url+"/locks/tls-"+c.name+"?lease=5", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("%d %s", res.StatusCode, b)
			}
			if res.TLS == nil || res.TLS.NegotiatedProtocol != c.proto {
				t.Fatalf("negotiated %q, want %q", res.TLS.NegotiatedProtocol, c.proto)
			}
			if want := map[string]int{"h2": 2, "": 1}[c.proto]; res.ProtoMajor != want {
				t.Fatalf("spoke %s", res.Proto)
			}
		})
	}
}
