package native_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/native"
)

// TestHTTPClientsAreToldThePortSpeaksTheNativeProtocol: an HTTP request
// sent to the native port (a mix-up of listen and native_listen) is
// answered in its own protocol, saying so, instead of with a native error
// line an HTTP client cannot read (curl: "Received HTTP/0.9 when not
// allowed"; Go's HTTP/2 client: "http2: frame too large"; a tester's
// report), and nothing is changed.
func TestHTTPClientsAreToldThePortSpeaksTheNativeProtocol(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	t.Run("HTTP/1.1", func(t *testing.T) {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Post("http://"+e.addr+"/locks/k", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "native protocol") {
			t.Fatalf("%s %q, want 400 saying the port speaks the native protocol", resp.Status, b)
		}
	})
	t.Run("HTTP/2 with prior knowledge", func(t *testing.T) {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &p}
		defer tr.CloseIdleConnections()
		_, err := (&http.Client{Transport: tr}).Post("http://"+e.addr+"/locks/k", "", nil)
		if err == nil || !strings.Contains(err.Error(), "native protocol") {
			t.Fatalf("%v, want an error saying the port speaks the native protocol", err)
		}
	})
	// A native first line whose last field reads HTTP/1.1 is served
	// natively (a verifier's report: a ping's word, a cancel's id).
	c := e.dial()
	c.send("P HTTP/1.1", "A k2 10 - id=HTTP/1.1", "C k2 HTTP/1.1")
	for _, want := range []string{"P HTTP/1.1 OK", "A k2 OK", "C k2 OK"} {
		if got := c.read(); !strings.HasPrefix(got, want) {
			t.Fatalf("got %q, want %q...", got, want)
		}
	}
	if li, _ := e.eng.Status("k"); li.Holder != nil || li.Waiters != 0 {
		t.Fatalf("an HTTP request changed k: %+v", li)
	}
}
