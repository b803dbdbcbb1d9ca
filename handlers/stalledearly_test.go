package handlers_test

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A request whose body stops short of its Content-Length (or mid-chunk)
// and is answered before its body is read (a 401 without a token, a 404,
// a 405, a 400 for a query parameter, a 307 from a standby, a read such as
// /healthz) was never answered nor closed: net/http reads what is left of
// an unread body before it writes the answer, and no deadline bounded that
// read (breaker: none after 200 s; 300 such connections held 300
// goroutines and files). An error is now answered at once and its
// connection closed; any other answer within the body's deadline (10 s).
func TestStalledBodyOfAnEarlyAnswer(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{AuthTokens: []string{"secret-token"}})
	open := newEnv(t, engine.Config{}, handlers.Config{})
	const stalled = "Content-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"wait\""
	const chunked = "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"wai"
	auth := "Authorization: Bearer secret-token\r\n"
	for _, c := range []struct {
		name, head, body string
		env              *env
		status           string
		within           time.Duration
	}{
		{"401 without a token", "POST /locks/x HTTP/1.1\r\nHost: x\r\n", stalled, e, "401", 5 * time.Second},
		{"401 chunked", "POST /locks/x HTTP/1.1\r\nHost: x\r\n", chunked, e, "401", 5 * time.Second},
		{"400 for a query parameter", "POST /locks/x?lease=abc HTTP/1.1\r\nHost: x\r\n" + auth, stalled, e, "400", 5 * time.Second},
		{"404 no route", "POST /nope HTTP/1.1\r\nHost: x\r\n" + auth, stalled, e, "404", 5 * time.Second},
		{"405", "PUT /locks/x HTTP/1.1\r\nHost: x\r\n" + auth, stalled, e, "405", 5 * time.Second},
		// An answer that is no error (a read that ignores its body):
		// within the body's deadline, and closed.
		{"200 from /healthz", "GET /healthz HTTP/1.1\r\nHost: x\r\n", stalled, open, "200", 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", c.env.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, c.head+c.body); err != nil {
				t.Fatal(err)
			}
			// The bound tells "answered at once" from "answered at the
			// body's 10 s deadline", and turns a hang into a failure.
			_ = conn.SetReadDeadline(time.Now().Add(c.within))
			got, err := io.ReadAll(conn)
			if err != nil {
				t.Fatalf("no answer and no close within %v: read %q, %v", c.within, got, err)
			}
			if !bytes.HasPrefix(got, []byte("HTTP/1.1 "+c.status+" ")) {
				t.Fatalf("answer %q, want %s", got, c.status)
			}
		})
	}
}
