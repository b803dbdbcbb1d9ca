package handlers_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A request whose body stops short of its Content-Length (or mid-chunk)
// and is answered before its body is read (a 401 without a token, a 404,
// a 405, a 400 for a query parameter, a read's 400 for having a body, a
// 307 from a standby) was never answered nor closed: net/http reads what is left of
// an unread body before it writes the answer, and no deadline bounded that
// read (breaker: none after 200 s; 300 such connections held 300
// goroutines and files). An error (a 307 too) is now answered at once,
// and the connection closed by the body's deadline (10 s) at the latest.
func TestStalledBodyOfAnEarlyAnswer(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{AuthTokens: []string{"secret-token"}})
	standby := newEnv(t, engine.Config{}, handlers.Config{Gate: standbyGate{active: "http://active.test:7070"}})
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
		{"400 from /healthz", "GET /healthz HTTP/1.1\r\nHost: x\r\n" + auth, stalled, e, "400", 5 * time.Second},
		// An answer that is no error (a standby's 307, which leaves the
		// body to the active): within the body's deadline, and closed.
		{"307 from a standby", "POST /locks/x HTTP/1.1\r\nHost: x\r\n", stalled, standby, "307", 30 * time.Second},
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
			br := bufio.NewReader(conn)
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("no answer within %v: read %q, %v", c.within, line, err)
			}
			if !strings.HasPrefix(line, "HTTP/1.1 "+c.status+" ") {
				t.Fatalf("answer %q, want %s", line, c.status)
			}
			// The connection closes, at the latest at the body's
			// deadline: nothing holds it for the rest of the body.
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.Copy(io.Discard, br); err != nil {
				t.Fatalf("the connection is not closed within 30 s: %v", err)
			}
		})
	}
}
