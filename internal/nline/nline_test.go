package nline

import (
	"strings"
	"testing"
	"time"
)

// A grant has exactly three fields after OK: token, lease, expiry.
func TestParseAnswerGrantFields(t *testing.T) {
	a, err := ParseAnswer("A k OK 7 1.5 1700000000123")
	if err != nil || a.Op != OpAcquire || a.Key != "k" || a.Token != 7 || a.Lease != 1500*time.Millisecond || a.Expires.UnixMilli() != 1700000000123 {
		t.Fatalf("read as %+v, %v", a, err)
	}
	for _, line := range []string{
		"A k OK", "A k OK 7", "A k OK 7 1", "A k OK 7 1 2 3", "A k OK 7  1 2",
		"A k OK 7 1 2 ", "A k OK 7 -1 2", "A k OK 7 1 x", "N k OK 0 1 2",
	} {
		if a, err := ParseAnswer(line); err == nil {
			t.Errorf("%q read as %+v, want an error", line, a)
		}
	}
}

// An HTTP status line (baton:// pointed at a node's HTTP listen address,
// whose server answers the native lines 400) is refused as not an answer,
// saying that the address serves HTTP (a tester's report: "unknown
// outcome" told the user nothing).
func TestParseAnswerNamesAnHTTPAnswer(t *testing.T) {
	_, err := ParseAnswer("HTTP/1.1 400 Bad Request\r")
	if err == nil || !strings.Contains(err.Error(), "serves HTTP") || !strings.Contains(err.Error(), "native_listen") {
		t.Fatalf("%v, want an error saying the address serves HTTP and naming native_listen", err)
	}
}
