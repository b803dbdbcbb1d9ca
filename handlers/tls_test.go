package handlers_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// selfSigned writes a fresh self-signed certificate for 127.0.0.1 and its
// key as PEM files in dir and returns their paths and the pool that trusts
// it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "baton test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestTLSNegotiatesHTTP2 serves the real handler with NewHTTPServer and
// ServeTLS, as baton serve does with tls_cert and tls_key, and checks that
// an HTTP/2-capable client gets h2 by ALPN and an HTTP/1.1-only client still
// gets served.
func TestTLSNegotiatesHTTP2(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
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
			cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
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
