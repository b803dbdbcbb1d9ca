package handlers_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A read's body sent chunked (no Content-Length, as a client streaming
// its body sends one) is refused as one with a Content-Length is: a 400
// naming body, not ignored with the read answered as if its parameters
// had been obeyed. An empty chunked body is no body.
func TestReadWithAChunkedBodyIsRefused(t *testing.T) {
	log := handlers.NewEventLog(0)
	e := newEnv(t, engine.Config{OnEvent: log.Add}, handlers.Config{Events: log})
	t.Cleanup(log.Close)
	e.acquire("/locks/other")
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	send := func(path, chunked string) (int, []byte) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		req := "GET " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if len(b) > 200 {
			b = append(b[:200], "…"...)
		}
		return res.StatusCode, b
	}
	for _, path := range []string{"/locks", "/events", "/locks/other", "/cluster", "/healthz", "/readyz", "/metrics"} {
		code, body := send(path, "e\r\n{\"prefix\":\"x\"}\r\n0\r\n\r\n")
		var eb api.Error
		if err := json.Unmarshal(body, &eb); code != http.StatusBadRequest || err != nil || eb.Field != "body" {
			t.Errorf("GET %s with a chunked body: %d %s; want 400 naming body", path, code, body)
		}
		if code, body := send(path, "0\r\n\r\n"); code != http.StatusOK {
			t.Errorf("GET %s with an empty chunked body: %d %s; want 200", path, code, body)
		}
	}
	if st := e.status("other"); st.Holder == nil {
		t.Errorf("other is no longer held: %+v", st)
	}
}
