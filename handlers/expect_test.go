package handlers_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// TestOversizedBodyWithExpectIsAnswered413 sends what curl sends for a
// body over 1 MB: Content-Length above max_body and Expect: 100-continue.
// The node knows from the header alone that the body is too large, so it
// answers 413 body_too_large at once, instead of inviting the body with
// 100 Continue, reading max_body of it and closing the connection under
// the rest (curl then reported "Connection reset by peer" and no answer).
// Nothing changes: the key is not held.
func TestOversizedBodyWithExpectIsAnswered413(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, method := range []string{http.MethodPost, http.MethodDelete, http.MethodPatch} {
		t.Run(method, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A bound on the test, not a timing assertion: without it a
			// node waiting for the body would hold the test for bodyTimeout.
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			size := handlers.DefaultMaxBody + 1
			path := "/locks/big"
			if method != http.MethodPost {
				path += "?token=1"
			}
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", method, path, size)
			br := bufio.NewReader(conn)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), `"error":"body_too_large"`) {
				t.Fatalf("%s with Content-Length %d and Expect: 100-continue: got %d %q, want 413 body_too_large", method, size, res.StatusCode, b)
			}
		})
	}
	if r := e.do(http.MethodGet, "/locks/big", ""); r.code != http.StatusOK || !strings.Contains(string(r.body), `"holder":null`) {
		t.Fatalf("GET /locks/big after the refused requests: %d %s, want it free", r.code, r.body)
	}
}
