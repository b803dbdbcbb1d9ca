package main

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// --acquire-grace reaches the client: a grant that a node answers later
// than the wait plus the library's default grace (as one made at the very
// end of a wait does under a sync_timeout above 1 s) is taken with
// --acquire-grace above that delay. Without the flag the CLI could not
// wait longer than 3 s past --wait: it gave the grant up, asked again and
// failed. The node here is a stand-in that answers every acquire late.
func TestCLIAcquireGrace(t *testing.T) {
	leakCheck(t)
	const wait = 100 * time.Millisecond
	delay := wait + api.DefaultAcquireGrace + 500*time.Millisecond
	mux := http.NewServeMux()
	mux.HandleFunc("POST /locks/{key}", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set(api.HeaderLockToken, "7")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"key":%q,"token":7,"lease":30,"expires_at":%q,"node":"http://%s"}`,
			r.PathValue("key"), time.Now().Add(30*time.Second).UTC().Format(time.RFC3339Nano), r.Host)
	})
	mux.HandleFunc("DELETE /locks/{key}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"key":%q,"released":true}`, r.PathValue("key"))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &protos}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	grace := (delay + 2*time.Second).String()
	r := runCLI(t, "http://"+ln.Addr().String(), false, "acquire", "late", "--wait", wait.String(), "--acquire-grace", grace)
	if r.code != exitOK || strings.TrimSpace(r.stdout.String()) != "7" {
		t.Fatalf("acquire --acquire-grace %s of a grant answered %v after the wait: code %d, out %q, err %q; want token 7",
			grace, delay-wait, r.code, r.stdout.String(), r.stderr.String())
	}
}
